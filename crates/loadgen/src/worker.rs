//! The one worker loop: take a ticket from the schedule, wait for its intended start if
//! there is one, run one operation against the target, record its instants. HTTP, NFS
//! and TCP only differ in their [`Target`] implementation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

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

/// One operation to run: its sequence number and, under a fixed rate, when it should start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    pub intended: Option<Instant>,
}

/// Hands out tickets to every worker on every thread, according to the schedule.
#[derive(Debug)]
pub(crate) struct Dispenser {
    schedule: Schedule,
    t0: Instant,
    next: AtomicU64,
    /// Set when a timed run ends, so operations in flight are abandoned at once.
    pub stopped: AtomicBool,
    /// Operations finished so far (progress bar).
    pub done: AtomicU64,
}

impl Dispenser {
    pub fn new(schedule: Schedule, t0: Instant) -> Self {
        Dispenser {
            schedule,
            t0,
            next: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            done: AtomicU64::new(0),
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

    pub fn take(&self) -> Option<Ticket> {
        if self.stopped.load(Ordering::Relaxed) {
            return None;
        }
        match self.schedule {
            Schedule::Count(n) => {
                let i = self.next.fetch_add(1, Ordering::Relaxed);
                (i < n).then_some(Ticket { intended: None })
            }
            Schedule::Duration(d) => (self.t0.elapsed() < d).then_some(Ticket { intended: None }),
            Schedule::Rate {
                per_second,
                count,
                duration,
            } => {
                let i = self.next.fetch_add(1, Ordering::Relaxed);
                if count.is_some_and(|n| i >= n) {
                    return None;
                }
                let offset = Duration::from_secs_f64(i as f64 / per_second);
                if duration.is_some_and(|d| offset >= d) {
                    return None;
                }
                Some(Ticket {
                    intended: Some(self.t0 + offset),
                })
            }
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
    while let Some(ticket) = dispenser.take() {
        if let Some(at) = ticket.intended {
            tokio::time::sleep_until(at.into()).await;
        }
        let mut inst = Instants::new(ticket.intended, Instant::now());
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
            dispenser.stopped.store(true, Ordering::Relaxed);
            break;
        };
        inst.end = Instant::now();
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
