//! The embedded load generator: HTTP, NFS and TCP workloads with honest statistics.
//!
//! # Layout
//! - [`plan`]: what to run — [`TargetUrl`], [`Schedule`], [`Options`], [`LoadPlan`].
//! - `worker`: the one worker loop, driven by the schedule against a `Target`; workers
//!   run on single-threaded event loops, one per OS thread, like wrk's threads.
//! - `pace`: the open-loop pacer thread, releasing fixed-rate tickets on time.
//! - [`http`], `tcp`, `nfs`, `file`: the `Target` implementations (`nfs`: every NFS
//!   workload over v3, 4.0, 4.1 or 4.2, as `nfs://…?version=` says). [`tcp::serve`] is the
//!   server side of `tcp://` (`servelab tcp-server`); [`http::parse_response_head`] is
//!   the HTTP client's response parser, public for fuzzing.
//! - [`sample`]: one operation's raw instants and outcome; the per-worker collector that
//!   derives durations and records them into `latency` histograms.
//! - [`report`]: [`Report`] — ab-compatible summary, percentile table, JSON (checked-in
//!   `schema.json`), exact merging across workers, runs and machines.
//! - `progress`: the stderr progress bar.
//!
//! The public surface is small on purpose: build a [`LoadPlan`], call [`run`], read the
//! [`Report`].

pub mod http;
pub mod plan;
pub mod report;
pub mod sample;
pub mod tcp;

mod file;
mod nfs;
mod pace;
mod progress;
mod worker;

/// Entry points for the fuzz targets under `fuzz/` (not a stable API).
#[doc(hidden)]
pub use http::fuzzing;

use std::sync::Arc;
use std::time::Instant;

/// The workload of `nfs://` and `file://` targets (the NFS name is kept for callers).
pub use plan::NfsWorkload as Workload;
pub use plan::{LoadPlan, NfsWorkload, Options, Schedule, TargetUrl, parse_duration, parse_size};
pub use report::{Report, merge_files};
pub use sample::ErrorKind;

/// Errors that stop a run before or instead of measuring (failures *during* a run are
/// counted in the [`Report`], not returned).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid URL {url:?}: {reason}")]
    Url { url: String, reason: String },
    #[error("cannot resolve host {0:?}")]
    Resolve(String),
    #[error("invalid plan: {0}")]
    Plan(String),
    #[error("cannot start the worker threads: {0}")]
    Runtime(std::io::Error),
    #[error("worker failed: {0}")]
    Worker(String),
    #[error("NFS: {0}")]
    Nfs(String),
    /// The URL's path does not exist on the export: the run is not started (every
    /// operation would fail the same way).
    #[error("no such file on the export: {path:?}")]
    NoSuchFile {
        path: String,
        #[source]
        source: nfsclient::Error,
    },
    #[error("invalid report JSON: {0}")]
    Json(String),
    #[error("{path}: {source}")]
    File {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Runs `plan` to completion and returns what was measured. Blocking: it starts its own
/// worker threads (call it from `spawn_blocking` inside an async context). A run always
/// ends by itself: by count, by duration, and every operation is bounded by
/// `options.timeout`.
pub fn run(plan: LoadPlan) -> Result<Report, Error> {
    plan.validate()?;
    let threads = match plan.options.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let mut report = Report {
        target: String::new(),
        kind: plan.target.kind().to_string(),
        server_software: None,
        host: String::new(),
        port: 0,
        path: String::new(),
        document_length: None,
        concurrency: plan.concurrency as u64,
        schedule: describe(&plan.schedule),
        rate_per_second: match plan.schedule {
            Schedule::Rate { per_second, .. } => Some(per_second),
            _ => None,
        },
        keepalive: false,
        duration: Default::default(),
        requests: 0,
        failures: Default::default(),
        non_2xx: 0,
        keepalive_requests: 0,
        body_bytes: 0,
        wire_bytes: 0,
        latency: Default::default(),
        server_timing: Default::default(),
        first_error: None,
        merged_runs: 1,
        checksum_crc32: None,
        stopped: None,
        failed_before_first_success: 0,
    };
    let (collector, elapsed, ending) = match &plan.target {
        TargetUrl::Http { host, port, path } => {
            let addr = plan::resolve(host, *port)?;
            let target = Arc::new(http::HttpTarget::new(
                addr,
                host,
                *port,
                path,
                &plan.options,
            ));
            report.host.clone_from(host);
            report.port = *port;
            report.path.clone_from(path);
            report.keepalive = plan.options.keepalive;
            report.target = format!(
                "http://{}:{port}{path}",
                if host.contains(':') {
                    format!("[{host}]")
                } else {
                    host.clone()
                }
            );
            let out = drive(Arc::new(target.clone()), &plan, threads)?;
            if !plan.options.variable_length {
                report.document_length = target.document_length();
            }
            out
        }
        TargetUrl::Tcp { host, port } => {
            let addr = plan::resolve(host, *port)?;
            report.host.clone_from(host);
            report.port = *port;
            report.target = format!("tcp://{addr}");
            let target = Arc::new(tcp::TcpTarget {
                addr,
                block: plan.options.block_size,
                reverse: plan.options.reverse,
            });
            drive(Arc::new(target), &plan, threads)?
        }
        TargetUrl::Nfs { url } => {
            report.target.clone_from(url);
            let target = nfs::NfsTarget::new(url, &plan)?;
            target.preflight()?;
            report.host = target.host();
            report.port = target.port();
            report.path = target.path();
            let target = Arc::new(target);
            let out = drive(Arc::new(target.clone()), &plan, threads)?;
            report.checksum_crc32 = target.checksum();
            out
        }
        TargetUrl::File { path } => {
            report.target = format!("file://{}", path.display());
            report.path = path.display().to_string();
            let target = Arc::new(file::FileTarget::new(path, &plan)?);
            // Blocking file system calls: one OS thread per worker (fio's psync jobs),
            // so one worker's system call never delays another's timing.
            let out = drive(Arc::new(target.clone()), &plan, plan.concurrency)?;
            report.checksum_crc32 = target.checksum();
            out
        }
    };
    report.stopped = ending.stopped;
    report.failed_before_first_success = ending.failed_before_first_success;
    report.duration = elapsed;
    report.requests = collector.completed;
    report.failures = collector.failures.clone();
    report.non_2xx = collector.non_2xx;
    report.keepalive_requests = if report.keepalive {
        collector.keepalive_reused
    } else {
        0
    };
    report.body_bytes = collector.body_bytes;
    report.wire_bytes = collector.wire_bytes;
    report.server_software = collector.server_software.clone();
    report.first_error = collector.first_error.clone();
    report.latency = collector.latency_snapshot();
    report.server_timing = collector.server_timing_snapshot();
    Ok(report)
}

/// Starts the workers (and, under a fixed rate, the pacer) for one target and waits for
/// them, showing progress if asked. Returns what they collected, the wall time and why
/// the run stopped early and how it began ([`Ending`]).
fn drive<T: worker::Target>(
    target: Arc<T>,
    plan: &LoadPlan,
    threads: usize,
) -> Result<(sample::Collector, std::time::Duration, Ending), Error> {
    // Every worker may fail twice in a row before the run is taken to be pointless, so
    // one moment that breaks every connection at once (a server restart) does not end it.
    let failure_limit =
        (!plan.options.keep_going).then(|| FAILURE_LIMIT.max(2 * plan.concurrency as u64));
    let t0 = Instant::now();
    let dispenser = Arc::new(worker::Dispenser::new(plan.schedule, t0, failure_limit));
    let pacer = match &dispenser.pacer {
        Some(p) => {
            let p = p.clone();
            Some(
                std::thread::Builder::new()
                    .name("loadgen-pacer".into())
                    .spawn(move || p.run())
                    .map_err(Error::Runtime)?,
            )
        }
        None => None,
    };
    let bar = plan
        .options
        .progress
        .then(|| progress::Progress::start(dispenser.clone(), plan.schedule));
    let result = worker::run_workers(
        target,
        plan.concurrency,
        threads,
        dispenser.clone(),
        plan.options.timeout,
    );
    let elapsed = t0.elapsed();
    dispenser.stop();
    if let Some(p) = pacer {
        let _ = p.join();
    }
    if let Some(bar) = bar {
        bar.finish();
    }
    let ending = Ending {
        stopped: dispenser.stop_reason.lock().take(),
        failed_before_first_success: dispenser
            .failed_before_first_success
            .load(std::sync::atomic::Ordering::Relaxed),
    };
    Ok((result?, elapsed, ending))
}

/// What the dispenser saw of a run's shape beyond the collected samples.
struct Ending {
    /// Why the run stopped before its schedule ended, if it did.
    stopped: Option<String>,
    /// Failures before the first success (the target was not ready).
    failed_before_first_success: u64,
}

/// The fewest consecutive identical failures that stop a run (`--keep-going` disables).
pub const FAILURE_LIMIT: u64 = 100;

fn describe(s: &Schedule) -> String {
    match *s {
        Schedule::Count(n) => format!("count {n}"),
        Schedule::Duration(d) => format!("duration {:?}", d),
        Schedule::Rate {
            per_second,
            count,
            duration,
        } => {
            let mut out = format!("rate {per_second}/s");
            if let Some(n) = count {
                out.push_str(&format!(" count {n}"));
            }
            if let Some(d) = duration {
                out.push_str(&format!(" for {d:?}"));
            }
            out
        }
    }
}
