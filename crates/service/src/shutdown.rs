//! The stop switch of a server's tasks, and the signals that flip it.

use std::future::Future;

use tokio::sync::watch;

/// One stop switch for every task of a server (its accept loop, its metrics endpoint):
/// [`Stop::stop`] flips it once, and every [`Stop::stopped`] future resolves. Cheap to
/// clone; a future made after the stop resolves at once.
#[derive(Debug, Clone)]
pub struct Stop {
    tx: std::sync::Arc<watch::Sender<bool>>,
}

impl Default for Stop {
    fn default() -> Self {
        Stop::new()
    }
}

impl Stop {
    pub fn new() -> Stop {
        Stop {
            tx: std::sync::Arc::new(watch::Sender::new(false)),
        }
    }

    /// Stops every task waiting on [`Stop::stopped`]; later calls do nothing more.
    pub fn stop(&self) {
        self.tx.send_replace(true);
    }

    /// Resolves once [`Stop::stop`] has been called (at once if it already was).
    pub fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.tx.subscribe();
        async move {
            // The sender lives in `self` and its clones; if all are gone, so is any
            // chance of a stop, and waiting on would hang: treat it as stopped.
            let _ = rx.wait_for(|s| *s).await;
        }
    }

    /// Spawns a task that stops on SIGINT or SIGTERM (see [`signal`]), logging it.
    pub fn on_signal(&self) -> tokio::task::JoinHandle<()> {
        let stop = self.clone();
        tokio::spawn(async move {
            signal().await;
            tracing::info!("signal received");
            stop.stop();
        })
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM (what `docker stop` and systemd send). Where
/// no SIGTERM handler can be installed, SIGINT alone. The one place the workspace
/// installs signal handlers: the servers stop on it ([`Stop::on_signal`]), programs
/// without a runtime of their own on [`on_signal_thread`].
pub async fn signal() {
    match Signals::install() {
        Ok(mut s) => s.recv().await,
        Err(e) => {
            tracing::warn!("cannot install signal handlers ({e}); running until killed");
            std::future::pending::<()>().await;
        }
    }
}

/// SIGINT and SIGTERM (SIGTERM when it can be had), installed together.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Installs both handlers; needs a runtime.
    fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt())?;
        let terminate = match signal(SignalKind::terminate()) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!("cannot install a SIGTERM handler ({e}); stopping on SIGINT only");
                None
            }
        };
        Ok(Signals {
            interrupt,
            terminate,
        })
    }

    /// The next SIGINT or SIGTERM.
    async fn recv(&mut self) {
        match self.terminate.as_mut() {
            Some(term) => {
                tokio::select! {
                    _ = self.interrupt.recv() => {}
                    _ = term.recv() => {}
                }
            }
            None => {
                self.interrupt.recv().await;
            }
        }
    }
}

/// For a program that is not async (servelab's measuring commands): installs the SIGINT
/// and SIGTERM handlers before it returns, then calls `on_signal(n)` on a thread of its
/// own for the n-th signal (1, 2, …). The program goes on running: it is `on_signal`'s
/// to make it stop (a flag its loops check), so its destructors still run.
pub fn on_signal_thread(
    on_signal: impl Fn(usize) + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Installed here, before returning: a signal that arrives from now on is ours.
    let mut signals = rt.block_on(async { Signals::install() })?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            rt.block_on(async {
                for n in 1.. {
                    signals.recv().await;
                    on_signal(n);
                }
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn every_waiter_stops_once_and_late_ones_at_once() {
        let stop = Stop::new();
        let a = tokio::spawn(stop.stopped());
        let b = tokio::spawn(stop.clone().stopped());
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            !a.is_finished() && !b.is_finished(),
            "nothing stops before stop()"
        );
        stop.stop();
        stop.stop();
        tokio::time::timeout(Duration::from_secs(2), async {
            a.await.unwrap();
            b.await.unwrap();
            stop.stopped().await;
        })
        .await
        .expect("every waiter resolves after stop()");
    }

    /// A signal after `on_signal_thread` returns reaches the callback, each one counted,
    /// and the process goes on.
    #[test]
    fn a_program_without_a_runtime_hears_each_signal() {
        let (tx, rx) = std::sync::mpsc::channel();
        on_signal_thread(move |n| {
            let _ = tx.send(n);
        })
        .unwrap();
        for want in 1..=2 {
            // SAFETY: raise(3) sends a signal to this process, whose handler is installed.
            unsafe { libc::raise(libc::SIGTERM) };
            assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(want));
        }
    }
}
