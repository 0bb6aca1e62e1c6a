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
/// no SIGTERM handler can be installed, SIGINT alone.
pub async fn signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(e) => {
            tracing::warn!("cannot install a SIGTERM handler ({e}); stopping on SIGINT only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
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
}
