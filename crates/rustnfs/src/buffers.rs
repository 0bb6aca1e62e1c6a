//! Reply buffers for READ: every byte drawn from the server's one buffer budget, a few kept
//! warm for the next READ, released (and the allocator trimmed) once unused for a while.
//!
//! Before this, each connection kept its last 1 MiB READ reply as a spare until its idle
//! timeout: 1,000 idle connections that had each read once held a gigabyte. Now an idle
//! connection holds no reply buffer at all; the warm set is shared and bounded.

use std::time::{Duration, Instant};

use oncrpc::Budget;
use oncrpc::budget::{Exceeded, Grant};
use parking_lot::Mutex;

/// Warm buffers kept for reuse (each at most [`KEEP_CAPACITY`]): enough for 16 clients
/// reading at once without a fresh 1 MiB allocation (and its page faults) per READ.
const KEEP: usize = 16;
const KEEP_CAPACITY: usize = 2 << 20;
/// A warm buffer unused this long is freed.
pub(crate) const IDLE_RELEASE: Duration = Duration::from_secs(2);

/// A reply buffer and the budget it holds.
pub(crate) struct ReplyBuf {
    pub buf: Vec<u8>,
    grant: Grant,
}

impl ReplyBuf {
    /// Counts what the buffer holds now, after a reply grew it past its grant (a bound
    /// that was too small), where the budget has room.
    pub fn settle(&mut self) {
        let extra = self.buf.capacity().saturating_sub(self.grant.bytes());
        if extra > 0 {
            let _ = self.grant.try_grow(extra);
        }
    }
}

/// The shared warm set.
pub(crate) struct ReplyBuffers {
    budget: Budget,
    idle: Mutex<Vec<(ReplyBuf, Instant)>>,
}

impl ReplyBuffers {
    pub fn new(budget: Budget) -> Self {
        ReplyBuffers {
            budget,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// A cleared buffer of at least `capacity` bytes; waits for budget when it is spent.
    pub async fn get(&self, capacity: usize) -> Result<ReplyBuf, Exceeded> {
        {
            let mut idle = self.idle.lock();
            if let Some(i) = idle.iter().rposition(|(b, _)| b.buf.capacity() >= capacity) {
                return Ok(idle.swap_remove(i).0);
            }
        }
        let grant = match self.budget.try_acquire(capacity) {
            Some(g) => g,
            None => {
                // Warm buffers are budget too: give them back before waiting on others.
                self.idle.lock().clear();
                self.budget.acquire(capacity).await?
            }
        };
        let buf = Vec::with_capacity(capacity);
        let mut b = ReplyBuf { buf, grant };
        // The allocator may round up; account for what it gave when it can.
        let extra = b.buf.capacity().saturating_sub(b.grant.bytes());
        if extra > 0 {
            let _ = b.grant.try_grow(extra);
        }
        Ok(b)
    }

    /// Returns a buffer after its reply was sent: kept warm, or freed.
    pub fn put(&self, mut b: ReplyBuf) {
        if b.buf.capacity() > KEEP_CAPACITY {
            return;
        }
        let mut idle = self.idle.lock();
        if idle.len() < KEEP {
            b.buf.clear();
            idle.push((b, Instant::now()));
        }
    }

    /// Frees warm buffers unused for `older_than`; returns how many bytes were freed.
    pub fn release_idle(&self, older_than: Duration) -> usize {
        let mut idle = self.idle.lock();
        let before: usize = idle.iter().map(|(b, _)| b.buf.capacity()).sum();
        idle.retain(|(_, t)| t.elapsed() < older_than);
        let after: usize = idle.iter().map(|(b, _)| b.buf.capacity()).sum();
        before - after
    }
}

/// Large buffers (records, replies) get their own mappings, so freeing one returns its
/// memory to the system at once instead of leaving it in a heap arena: glibc otherwise
/// raises its mmap threshold to the size of the first freed 1 MiB buffer, and a thousand
/// clients' buffers then stay resident after they leave.
pub(crate) fn tune_allocator() {
    #[cfg(target_env = "gnu")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: mallopt only changes allocator parameters.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
            }
        });
    }
}

/// Gives freed heap memory back to the system (glibc keeps it per arena otherwise).
pub(crate) fn trim_allocator() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free memory at the top of each arena.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn warm_buffers_are_bounded_budgeted_and_released() {
        let budget = Budget::new(64 << 20);
        let pool = ReplyBuffers::new(budget.clone());
        let mut held = Vec::new();
        for _ in 0..KEEP + 4 {
            held.push(pool.get(1 << 20).await.unwrap());
        }
        assert!(budget.in_use() >= (KEEP + 4) << 20);
        for b in held {
            pool.put(b);
        }
        assert!(budget.in_use() >= KEEP << 20 && budget.in_use() < (KEEP + 1) << 20);
        // Reused, not reallocated.
        let b = pool.get(1000).await.unwrap();
        assert!(b.buf.capacity() >= 1 << 20);
        pool.put(b);
        assert_eq!(pool.release_idle(Duration::ZERO), KEEP << 20);
        assert_eq!(budget.in_use(), 0);
    }

    #[tokio::test]
    async fn a_spent_budget_frees_warm_buffers_before_waiting() {
        let budget = Budget::new(3 << 20);
        let pool = ReplyBuffers::new(budget.clone());
        let a = pool.get(1 << 20).await.unwrap();
        let b = pool.get(1 << 20).await.unwrap();
        pool.put(a);
        pool.put(b);
        // Two warm 1 MiB buffers; a 2 MiB ask cannot reuse them but gets their budget.
        let c = tokio::time::timeout(Duration::from_secs(1), pool.get(2 << 20)).await;
        assert!(c.unwrap().is_ok());
    }
}
