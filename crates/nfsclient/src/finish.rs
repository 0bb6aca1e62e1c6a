//! A call that runs to its end even when its caller stops waiting.
//!
//! An NFSv4.1+ call holds a session slot: cut off between sending the call and reading
//! its reply, the slot's sequence id is no longer known and the session has to be set
//! up again (and a v4.0 or v3 connection is left mid-record). [`FinishOnDrop`] runs the
//! call inside the caller's own task — no task is spawned and no other worker is woken
//! on the common path, where the caller waits for the answer — and only if the caller
//! drops it before the end (an HTTP client that disconnects, a timed run's end) is the
//! rest of the call handed to a task of its own, which finishes it within its deadline.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Wraps `call` (see the module header). It must be `'static` and `Send`: if dropped
/// mid-way it moves into a spawned task.
pub(crate) struct FinishOnDrop<F: Future + Send + 'static>
where
    F::Output: Send + 'static,
{
    call: Option<Pin<Box<F>>>,
}

impl<F: Future + Send + 'static> FinishOnDrop<F>
where
    F::Output: Send + 'static,
{
    pub(crate) fn new(call: F) -> Self {
        FinishOnDrop {
            call: Some(Box::pin(call)),
        }
    }
}

impl<F: Future + Send + 'static> Future for FinishOnDrop<F>
where
    F::Output: Send + 'static,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let call = self
            .call
            .as_mut()
            .expect("FinishOnDrop polled after it completed");
        let out = std::task::ready!(call.as_mut().poll(cx));
        self.call = None;
        Poll::Ready(out)
    }
}

impl<F: Future + Send + 'static> Drop for FinishOnDrop<F>
where
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        let Some(call) = self.call.take() else {
            return;
        };
        // Outside a runtime (the runtime itself is shutting down) there is nothing left
        // to finish the call on, and nobody to use the session after it either.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = call.await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_awaited_call_runs_in_the_callers_task() {
        let outer = tokio::spawn(async {
            let caller = tokio::task::id();
            let (ran_in, answer) = FinishOnDrop::new(async { (tokio::task::id(), 7) }).await;
            (caller, ran_in, answer)
        });
        let (caller, ran_in, answer) = outer.await.unwrap();
        assert_eq!(ran_in, caller, "no task of its own on the common path");
        assert_eq!(answer, 7);
    }

    #[tokio::test]
    async fn a_call_dropped_midway_still_runs_to_its_end() {
        let finished = Arc::new(AtomicBool::new(false));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let f = finished.clone();
        let call = FinishOnDrop::new(async move {
            rx.await.ok();
            f.store(true, Ordering::SeqCst);
        });
        // The caller gives up while the call waits for its "reply".
        let gave_up = tokio::time::timeout(Duration::from_millis(20), call).await;
        assert!(gave_up.is_err(), "the call cannot have finished yet");
        assert!(!finished.load(Ordering::SeqCst));
        tx.send(()).unwrap();
        for _ in 0..100 {
            if finished.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the dropped call was not finished by its own task");
    }
}
