//! One byte budget shared by every connection of a server, so the memory that all clients
//! together can make it buffer has a single bound.
//!
//! Whoever keeps budgeted bytes it does not need right now (a connection's spare record
//! buffer, kept for its next call) can ask to be told when somebody waits for bytes
//! ([`Budget::wanted`]) and give them back then, so a spare never makes anyone wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Notify, Semaphore};

/// A pool of bytes. Cheap to clone; clones share the pool.
#[derive(Clone, Debug)]
pub struct Budget {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    sem: Semaphore,
    total: usize,
    /// Grants waiting for bytes right now.
    waiting: AtomicUsize,
    /// Told (`notify_waiters`) each time a grant starts waiting.
    wanted: Notify,
}

/// More bytes were asked for than the whole budget holds: waiting would never end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{wanted} bytes asked of a {total}-byte budget")]
pub struct Exceeded {
    pub wanted: usize,
    pub total: usize,
}

impl Budget {
    /// A budget of `total` bytes (at most `Semaphore::MAX_PERMITS`).
    pub fn new(total: usize) -> Budget {
        let total = total.min(Semaphore::MAX_PERMITS);
        Budget {
            inner: Arc::new(Inner {
                sem: Semaphore::new(total),
                total,
                waiting: AtomicUsize::new(0),
                wanted: Notify::new(),
            }),
        }
    }

    pub fn total(&self) -> usize {
        self.inner.total
    }

    /// Bytes currently granted to someone.
    pub fn in_use(&self) -> usize {
        self.inner.total - self.inner.sem.available_permits()
    }

    /// How many grants are waiting for bytes right now.
    pub fn waiting(&self) -> usize {
        self.inner.waiting.load(Ordering::SeqCst)
    }

    /// Resolves when some grant waits for bytes: at once if one is waiting already,
    /// else when the next one starts to. For holders of bytes they could give back.
    pub async fn wanted(&self) {
        let notified = self.inner.wanted.notified();
        tokio::pin!(notified);
        // Registered before the count is read: a grant that starts waiting after the
        // read notifies this future; one that started before is counted.
        notified.as_mut().enable();
        if self.waiting() > 0 {
            return;
        }
        notified.await;
    }

    /// A grant of nothing, to [`Grant::grow`] as a buffer grows.
    pub fn grant(&self) -> Grant {
        Grant {
            budget: self.clone(),
            bytes: 0,
        }
    }

    /// Waits until `n` bytes are free and grants them.
    pub async fn acquire(&self, n: usize) -> Result<Grant, Exceeded> {
        let mut g = self.grant();
        g.grow(n).await?;
        Ok(g)
    }

    /// Grants `n` bytes if they are free now.
    pub fn try_acquire(&self, n: usize) -> Option<Grant> {
        let mut g = self.grant();
        g.try_grow(n).then_some(g)
    }
}

/// Bytes held from a [`Budget`]; returned when dropped.
#[derive(Debug)]
pub struct Grant {
    budget: Budget,
    bytes: usize,
}

impl Grant {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The budget this grant draws from.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Waits for `n` more bytes. Fails at once if `n` plus what is held exceeds the total.
    pub async fn grow(&mut self, n: usize) -> Result<(), Exceeded> {
        let total = self.budget.inner.total;
        if self.bytes + n > total {
            return Err(Exceeded {
                wanted: self.bytes + n,
                total,
            });
        }
        let mut left = n;
        while left > 0 {
            // acquire_many counts in u32; the semaphore is never closed.
            let step = left.min(u32::MAX as usize);
            let inner = &self.budget.inner;
            match inner.sem.try_acquire_many(step as u32) {
                Ok(p) => p.forget(),
                Err(_) => {
                    // Counted while waiting (also if this future is dropped), and every
                    // holder of spare bytes told.
                    let _waiting = Waiting::start(inner);
                    let Ok(p) = inner.sem.acquire_many(step as u32).await else {
                        unreachable!("the budget's semaphore is never closed")
                    };
                    p.forget();
                }
            }
            self.bytes += step;
            left -= step;
        }
        Ok(())
    }

    /// Takes `n` more bytes if they are free now.
    pub fn try_grow(&mut self, n: usize) -> bool {
        let Ok(n32) = u32::try_from(n) else {
            return false;
        };
        match self.budget.inner.sem.try_acquire_many(n32) {
            Ok(p) => {
                p.forget();
                self.bytes += n;
                true
            }
            Err(_) => false,
        }
    }

    /// Gives back all but `keep` bytes.
    pub fn shrink_to(&mut self, keep: usize) {
        if keep < self.bytes {
            self.budget.inner.sem.add_permits(self.bytes - keep);
            self.bytes = keep;
        }
    }
}

/// One grant counted in [`Inner::waiting`] while it lives.
struct Waiting<'a>(&'a Inner);

impl<'a> Waiting<'a> {
    fn start(inner: &'a Inner) -> Self {
        inner.waiting.fetch_add(1, Ordering::SeqCst);
        inner.wanted.notify_waiters();
        Waiting(inner)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        self.shrink_to(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn grants_are_bounded_and_returned() {
        let b = Budget::new(100);
        let mut g = b.acquire(60).await.unwrap();
        assert_eq!(b.in_use(), 60);
        assert!(b.try_acquire(50).is_none());
        assert!(
            g.grow(41).await.is_err(),
            "more than the total fails at once"
        );
        g.shrink_to(10);
        assert_eq!(b.in_use(), 10);
        let h = b.try_acquire(90).unwrap();
        // A waiter is woken when bytes come back.
        let b2 = b.clone();
        let w = tokio::spawn(async move { b2.acquire(50).await.map(|g| g.bytes()) });
        tokio::task::yield_now().await;
        assert!(!w.is_finished());
        drop(h);
        assert_eq!(w.await.unwrap().unwrap(), 50);
        drop(g);
        assert_eq!(b.in_use(), 0);
    }

    #[tokio::test]
    async fn holders_of_spare_bytes_hear_when_someone_waits() {
        let b = Budget::new(100);
        let spare = b.try_acquire(100).unwrap();
        // Nobody waits: `wanted` stays pending.
        let quiet = tokio::time::timeout(std::time::Duration::from_millis(20), b.wanted()).await;
        assert!(quiet.is_err());
        let holder = {
            let b = b.clone();
            tokio::spawn(async move {
                b.wanted().await;
                drop(spare);
            })
        };
        tokio::task::yield_now().await;
        // A waiter is told to the holder, which gives its bytes back.
        let got = tokio::time::timeout(std::time::Duration::from_secs(1), b.acquire(60)).await;
        assert_eq!(got.unwrap().unwrap().bytes(), 60);
        holder.await.unwrap();
        assert_eq!(b.waiting(), 0);
        // One already waiting is seen at once.
        let all = b.try_acquire(100).unwrap();
        let b2 = b.clone();
        let w = tokio::spawn(async move { b2.acquire(10).await.map(|g| g.bytes()) });
        while b.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        tokio::time::timeout(std::time::Duration::from_secs(1), b.wanted())
            .await
            .expect("a waiting grant is seen");
        drop(all);
        assert_eq!(w.await.unwrap().unwrap(), 10);
        assert_eq!(b.waiting(), 0, "the count follows the waiters");
    }
}
