//! What streamed bodies may hold in memory: the byte budgets they share (one set per
//! server whose storage streams, else one per process), read but not yet written to a
//! socket, and the per-address turns in which bodies wait for them.
//!
//! The storage owns its set (it knows whether it streams); the body (`crate::body`)
//! takes and gives back budget as its READs come and go.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

/// Bytes all streamed bodies of this process may hold at once, read but not yet written
/// to a socket (NFS READ buffers in flight and frames queued in hyper). Without a shared
/// budget, 100 clients of a 10 MiB file held 4 × 1 MiB of read-ahead each (325 MB peak
/// RSS); with it, memory stays bounded and the same bandwidth is shared by fewer
/// responses at a time. A body that holds nothing may always wait for its next chunk,
/// so every response makes progress.
pub const STREAM_BUDGET_BYTES: usize = 16 << 20;

/// The budget counts in units of this size (a READ of `n` bytes takes ⌈n / unit⌉).
pub(crate) const BUDGET_UNIT: usize = 64 << 10;

/// What frames of stalled responses may hold, outside [`STREAM_BUDGET_BYTES`], so all
/// streamed bodies together hold at most 24 MiB. Stalled clients mostly stop early,
/// holding one frame of a few of a body's first, smallest READs each: dozens of them fit.
pub const STALLED_BUDGET_BYTES: usize = 8 << 20;

/// The two budgets of [`STREAM_BUDGET_BYTES`] and [`STALLED_BUDGET_BYTES`] and the
/// bodies waiting for the first, one set per server (its storage holds it): servers in
/// one process (the test suite, a bench's in-process servers) must not wait on each
/// other's stalled clients. A 256-client stall test once took 28 s when another test's
/// server held the process-wide budget beside it.
#[derive(Debug)]
pub struct StreamBudgets {
    /// [`STREAM_BUDGET_BYTES`], in units of [`BUDGET_UNIT`].
    pub(crate) shared: Arc<Semaphore>,
    /// [`STALLED_BUDGET_BYTES`], in units of [`BUDGET_UNIT`].
    pub(crate) stalled: Arc<Semaphore>,
    /// Bodies waiting for shared budget right now: a stalled connection holding shared
    /// budget is closed sooner while others wait (the body's watchdog decides).
    pub(crate) waiters: AtomicUsize,
    /// Streamed bodies alive now: past a bound, new bodies cap their socket's unsent
    /// bytes (see the body).
    pub(crate) streaming: AtomicUsize,
    /// One turn per client address to wait in [`StreamBudgets::shared`]'s queue (see
    /// [`StreamBudgets::turn`]); an entry lives while a body of that address waits.
    pub(crate) turns: Mutex<HashMap<std::net::IpAddr, Weak<Semaphore>>>,
}

impl StreamBudgets {
    pub fn new() -> Arc<StreamBudgets> {
        Arc::new(StreamBudgets {
            shared: Arc::new(Semaphore::new(STREAM_BUDGET_BYTES / BUDGET_UNIT)),
            stalled: Arc::new(Semaphore::new(STALLED_BUDGET_BYTES / BUDGET_UNIT)),
            waiters: AtomicUsize::new(0),
            streaming: AtomicUsize::new(0),
            turns: Mutex::new(HashMap::new()),
        })
    }

    /// The turnstile of client address `ip`: of the bodies of one address, one at a time
    /// waits in the shared budget's queue, the others behind it here. The shared queue
    /// then holds at most one body per address and is served round-robin across
    /// addresses, so a client's download waits for budget behind one body of each other
    /// address, not behind every body of an address that opened hundreds. (FIFO alone:
    /// 1,000 clients of 127.0.0.2 that stop reading kept a download from 127.0.0.1
    /// waiting 22 s, the budget freed 64 stalled bodies at a time.) With the budget free
    /// nobody waits, so one address alone still gets all of it.
    fn turn(&self, ip: std::net::IpAddr) -> Arc<Semaphore> {
        let mut turns = self.turns.lock();
        if let Some(t) = turns.get(&ip).and_then(Weak::upgrade) {
            return t;
        }
        // Addresses whose bodies all stopped waiting leave their entries behind; drop
        // them whenever the map doubles, so it stays within twice the waiting addresses.
        if turns.len() >= 64 && turns.len().is_power_of_two() {
            turns.retain(|_, t| t.strong_count() > 0);
        }
        let t = Arc::new(Semaphore::new(1));
        turns.insert(ip, Arc::downgrade(&t));
        t
    }

    /// The budgets of storages that keep none of their own (one per process).
    pub fn process_wide() -> Arc<StreamBudgets> {
        static BUDGETS: OnceLock<Arc<StreamBudgets>> = OnceLock::new();
        BUDGETS.get_or_init(StreamBudgets::new).clone()
    }

    /// Budget units currently taken (tests and diagnostics).
    #[cfg(test)]
    pub(crate) fn shared_in_use(&self) -> usize {
        (STREAM_BUDGET_BYTES / BUDGET_UNIT - self.shared.available_permits()) * BUDGET_UNIT
    }
}

/// Counts one body in [`StreamBudgets::waiters`] while it lives.
struct Waiting(Arc<StreamBudgets>);

impl Waiting {
    fn new(budgets: Arc<StreamBudgets>) -> Waiting {
        budgets.waiters.fetch_add(1, Ordering::Relaxed);
        Waiting(budgets)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Waits for `units` of the shared budget, counted in its waiters: FIFO among the bodies
/// of one client address (`peer`), round-robin across addresses ([`StreamBudgets::turn`]).
pub(crate) fn wait_for_budget(
    budgets: Arc<StreamBudgets>,
    units: u32,
    peer: Option<std::net::IpAddr>,
) -> PermitWait {
    Box::pin(async move {
        let shared = budgets.shared.clone();
        let turn = peer.map(|ip| budgets.turn(ip));
        let _waiting = Waiting::new(budgets);
        let _my_turn = match turn {
            Some(t) => Some(t.acquire_owned().await?),
            None => None,
        };
        shared.acquire_many_owned(units).await
    })
}

pub(crate) fn budget_units(len: usize) -> u32 {
    len.div_ceil(BUDGET_UNIT)
        .min(STREAM_BUDGET_BYTES / BUDGET_UNIT) as u32
}

pub(crate) type PermitWait =
    Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send + Sync>>;
