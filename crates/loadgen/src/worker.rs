//! The one worker loop: take a ticket from the schedule, wait for its intended start if
//! there is one, run one operation against the target, record its instants. HTTP, NFS
//! and TCP only differ in their [`Target`] implementation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::pace::Pacer;
use crate::plan::Schedule;
use crate::sample::{Collector, ErrorKind, Instants, OpError, OpOk};

/// A kind of server to load. Shared by every worker thread; creates one [`Worker`] per
/// concurrent client.
pub(crate) trait Target: Send + Sync + 'static {
    type Worker: Worker;
    /// The operation name failures are recorded under when the operation never got far
    /// enough to name itself (a timeout cancels it).
    fn default_op(&self) -> &'static str;
    /// Prepares client number `id` (connecting, mounting, opening its file), setting
    /// `inst.connected` if it connected. Called on the thread that will drive it, inside
    /// the first operation's timing; an error is counted against that operation and the
    /// worker is created again for the next one.
    async fn worker(&self, id: usize, inst: &mut Instants) -> Result<Self::Worker, OpError>;
}

/// One concurrent client with its own connection.
pub(crate) trait Worker {
    /// Runs one operation, filling in `inst.connected`, `inst.written` and
    /// `inst.first_byte` as they happen. It may be cancelled at any await point (timeout,
    /// end of a timed run), so it must leave itself ready for a fresh start.
    async fn op(&mut self, inst: &mut Instants) -> Result<OpOk, OpError>;
    /// Called once after the last operation; it may run one last exchange whose outcome
    /// is recorded like an operation (a TCP stream's byte count acknowledgement).
    async fn finish(&mut self) -> Option<Result<OpOk, OpError>> {
        None
    }
}

/// Leave to run one operation, handed out by [`Dispenser::take`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    /// Under a fixed rate, when the operation should start (its latency counts from
    /// here, not from when it did start); `None` in a closed loop: it starts now.
    pub intended: Option<Instant>,
}

/// Hands out tickets to every worker on every thread, according to the schedule, and
/// stops the run when the target keeps failing the same way.
#[derive(Debug)]
pub(crate) struct Dispenser {
    schedule: Schedule,
    /// The run's start; no ticket is meant to start before it.
    pub t0: Instant,
    next: AtomicU64,
    /// Releases fixed-rate tickets on time (None in a closed loop).
    pub pacer: Option<Arc<Pacer>>,
    /// Set when a timed run ends or the run is stopped, so no new operation starts.
    pub stopped: AtomicBool,
    /// Operations finished so far (progress bar).
    pub done: AtomicU64,
    /// Consecutive identical failures across all workers: `(kind + 1) << 48 | count`.
    streak: AtomicU64,
    /// Stop after this many consecutive identical failures (None: `--keep-going`).
    failure_limit: Option<u64>,
    /// Why the run was stopped early, if it was.
    pub stop_reason: Mutex<Option<String>>,
    /// Set by the first operation that succeeds.
    any_success: AtomicBool,
    /// Failures noted before any operation succeeded: a target that was not ready yet
    /// (a server started with `&` a moment before the load), whose errors the figures
    /// then include.
    pub failed_before_first_success: AtomicU64,
}

impl Dispenser {
    pub fn new(schedule: Schedule, t0: Instant, failure_limit: Option<u64>) -> Self {
        let pacer = match schedule {
            Schedule::Rate {
                per_second,
                count,
                duration,
            } => Some(Arc::new(Pacer::new(t0, per_second, count, duration))),
            _ => None,
        };
        Dispenser {
            schedule,
            t0,
            next: AtomicU64::new(0),
            pacer,
            stopped: AtomicBool::new(false),
            done: AtomicU64::new(0),
            streak: AtomicU64::new(0),
            failure_limit,
            stop_reason: Mutex::new(None),
            any_success: AtomicBool::new(false),
            failed_before_first_success: AtomicU64::new(0),
        }
    }

    /// The instant a timed run ends, if it is timed.
    pub fn deadline(&self) -> Option<Instant> {
        match self.schedule {
            Schedule::Count(_) => None,
            Schedule::Duration(d) => Some(self.t0 + d),
            Schedule::Rate { duration, .. } => duration.map(|d| self.t0 + d),
        }
    }

    /// The total number of operations, if fixed.
    pub fn count(&self) -> Option<u64> {
        match self.schedule {
            Schedule::Count(n) => Some(n),
            Schedule::Duration(_) => None,
            Schedule::Rate { count, .. } => count,
        }
    }

    /// No new operation starts after this (operations in flight finish).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        if let Some(p) = &self.pacer {
            p.stop();
        }
    }

    /// The next ticket; under a fixed rate, waits until the pacer releases one
    /// (`connected`: whether the worker has its connection; see [`Pacer::claim`]).
    pub async fn take(&self, connected: bool) -> Option<Ticket> {
        if self.stopped.load(Ordering::Relaxed) {
            return None;
        }
        match self.schedule {
            Schedule::Count(n) => {
                let i = self.next.fetch_add(1, Ordering::Relaxed);
                (i < n).then_some(Ticket { intended: None })
            }
            Schedule::Duration(d) => (self.t0.elapsed() < d).then_some(Ticket { intended: None }),
            Schedule::Rate { .. } => {
                let pacer = self.pacer.as_ref().expect("a rate schedule has a pacer");
                let at = pacer.claim(connected).await?;
                Some(Ticket { intended: Some(at) })
            }
        }
    }

    /// Counts consecutive identical failures; after `failure_limit` of them the target
    /// is taken to be unreachable or wrong and the run stops (one line says why).
    pub fn note(&self, outcome: &Result<OpOk, OpError>) {
        let kind = match outcome {
            Ok(ok) => ok.failure,
            Err(e) => Some(e.kind),
        };
        let Some(kind) = kind else {
            // Read first: a shared line written on every success would bounce between
            // the workers' cores.
            if self.streak.load(Ordering::Relaxed) != 0 {
                self.streak.store(0, Ordering::Relaxed);
            }
            if !self.any_success.load(Ordering::Relaxed) {
                self.any_success.store(true, Ordering::Relaxed);
            }
            return;
        };
        if !self.any_success.load(Ordering::Relaxed) {
            self.failed_before_first_success
                .fetch_add(1, Ordering::Relaxed);
        }
        let Some(limit) = self.failure_limit else {
            return;
        };
        let tag = (kind as u64 + 1) << 48;
        let prev = self
            .streak
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                Some(if s >> 48 << 48 == tag { s + 1 } else { tag | 1 })
            })
            .unwrap_or(0);
        let count = if prev >> 48 << 48 == tag {
            (prev & ((1 << 48) - 1)) + 1
        } else {
            1
        };
        if count == limit {
            let last = match outcome {
                Err(e) => format!(" (last: {})", e.message.replace('\n', " ")),
                Ok(_) => String::new(),
            };
            *self.stop_reason.lock() = Some(format!(
                "stopped after {count} consecutive {} failures{last}; --keep-going runs on",
                kind.name()
            ));
            self.stop();
        }
    }
}

/// Drives one worker until the schedule runs out. The only loop in the crate.
pub(crate) async fn worker_loop<T: Target>(
    target: &T,
    id: usize,
    dispenser: &Dispenser,
    timeout: Duration,
) -> Collector {
    let mut collector = Collector::default();
    let deadline = dispenser.deadline().map(tokio::time::Instant::from_std);
    let mut worker: Option<T::Worker> = None;
    // Two timers per worker, re-armed rather than re-created: a timer per operation
    // costs measurably at 50k operations per second.
    let mut op_timer = Box::pin(tokio::time::sleep(timeout));
    let mut end_timer = deadline.map(|d| Box::pin(tokio::time::sleep_until(d)));
    // When this worker's connection became free: its previous operation's end. A fixed-
    // rate ticket that came due before then waited behind that operation (the server's
    // doing, coordinated omission); any later start is the generator's own lag.
    let mut ready = dispenser.t0;
    while let Some(ticket) = dispenser.take(worker.is_some()).await {
        let mut inst = Instants::new(ticket.intended, Instant::now());
        inst.ready = ready;
        let op_deadline = tokio::time::Instant::from_std(inst.start) + timeout;
        // Re-arming a timer takes the timer driver's lock, so it is done lazily: the
        // armed deadline is never later than this operation's (every earlier operation
        // started earlier), and when it fires early it is moved to the true deadline.
        if op_timer.deadline() <= tokio::time::Instant::from_std(inst.start) {
            op_timer.as_mut().reset(op_deadline);
        }
        let outcome = async {
            let w = match &mut worker {
                Some(w) => w,
                None => {
                    let w = target.worker(id, &mut inst).await?;
                    worker.insert(w)
                }
            };
            w.op(&mut inst).await
        };
        let result = {
            let mut run_end = std::pin::pin!(async {
                match &mut end_timer {
                    Some(t) => t.as_mut().await,
                    None => std::future::pending().await,
                }
            });
            let mut outcome = std::pin::pin!(outcome);
            // A timed run abandons what is in flight at its end (wrk does the same), so a
            // stalled server can never stretch the run; otherwise `--timeout` bounds it.
            loop {
                tokio::select! {
                    biased;
                    r = &mut outcome => break Some(r),
                    _ = &mut op_timer => {
                        if tokio::time::Instant::now() >= op_deadline {
                            break Some(Err(OpError::new(
                                target.default_op(),
                                ErrorKind::Timeout,
                                format!("no complete answer within {timeout:?}"),
                            )));
                        }
                        op_timer.as_mut().reset(op_deadline);
                    }
                    _ = &mut run_end => break None,
                }
            }
        };
        let Some(result) = result else {
            dispenser.stop();
            break;
        };
        inst.end = Instant::now();
        ready = inst.end;
        if let Err(e) = &result {
            // The connection state is unknown after a failure: start the next one afresh.
            // Only answers that were understood (a wrong length or checksum, an NFS
            // error status) leave the connection usable.
            if !matches!(
                e.kind,
                ErrorKind::Length | ErrorKind::Checksum | ErrorKind::Server
            ) {
                worker = None;
            }
        }
        collector.add(&inst, &result);
        dispenser.note(&result);
        dispenser.done.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(w) = &mut worker {
        let start = Instant::now();
        let fin = tokio::time::timeout(timeout, w.finish()).await;
        let mut inst = Instants::new(None, start);
        inst.end = Instant::now();
        match fin {
            Ok(Some(r)) => collector.add(&inst, &r),
            Ok(None) => {}
            Err(_) => collector.add(
                &inst,
                &Err(OpError::new(
                    target.default_op(),
                    ErrorKind::Timeout,
                    "no final answer",
                )),
            ),
        }
    }
    collector
}

/// Runs `concurrency` workers over `threads` OS threads, each a single-threaded tokio
/// event loop (as wrk's threads are), and merges their collectors.
pub(crate) fn run_workers<T: Target>(
    target: Arc<T>,
    concurrency: usize,
    threads: usize,
    dispenser: Arc<Dispenser>,
    timeout: Duration,
) -> Result<Collector, crate::Error> {
    let threads = threads.clamp(1, concurrency);
    let mut handles = Vec::with_capacity(threads);
    for t in 0..threads {
        let target = target.clone();
        let dispenser = dispenser.clone();
        let ids: Vec<usize> = (0..concurrency).filter(|i| i % threads == t).collect();
        let handle = std::thread::Builder::new()
            .name(format!("loadgen-{t}"))
            .spawn(move || -> Result<Collector, crate::Error> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(crate::Error::Runtime)?;
                let local = tokio::task::LocalSet::new();
                let collectors = local.block_on(&rt, async {
                    let tasks: Vec<_> = ids
                        .into_iter()
                        .map(|id| {
                            let target = target.clone();
                            let dispenser = dispenser.clone();
                            tokio::task::spawn_local(async move {
                                worker_loop(&*target, id, &dispenser, timeout).await
                            })
                        })
                        .collect();
                    let mut out = Vec::with_capacity(tasks.len());
                    for t in tasks {
                        out.push(t.await);
                    }
                    out
                });
                let mut merged = Collector::default();
                for c in collectors {
                    merged.merge(c.map_err(|e| crate::Error::Worker(e.to_string()))?);
                }
                Ok(merged)
            })
            .map_err(crate::Error::Runtime)?;
        handles.push(handle);
    }
    let mut merged = Collector::default();
    for h in handles {
        let c = h
            .join()
            .map_err(|_| crate::Error::Worker("a worker thread panicked".into()))??;
        merged.merge(c);
    }
    Ok(merged)
}
