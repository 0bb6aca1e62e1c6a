//! SIGHUP, the reload signal: a server whose configuration can be read again while it
//! runs (rustnfs's exports file) waits for it here. Shutdown's signals are `shutdown`'s.

/// The SIGHUPs this process receives, from [`Hangups::install`] on (until then SIGHUP
/// keeps its default action: the process ends).
pub struct Hangups(tokio::signal::unix::Signal);

impl Hangups {
    /// Installs the handler; needs a runtime.
    pub fn install() -> std::io::Result<Hangups> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Hangups(signal(SignalKind::hangup())?))
    }

    /// The next SIGHUP (several arriving together count once).
    pub async fn recv(&mut self) {
        self.0.recv().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn each_hangup_is_heard_and_the_process_goes_on() {
        let mut h = Hangups::install().unwrap();
        for _ in 0..2 {
            // SAFETY: raise(3) sends a signal to this process, whose handler is installed.
            unsafe { libc::raise(libc::SIGHUP) };
            tokio::time::timeout(Duration::from_secs(5), h.recv())
                .await
                .expect("the SIGHUP arrives");
        }
    }
}
