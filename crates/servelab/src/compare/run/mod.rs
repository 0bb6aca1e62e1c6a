//! Runs the comparison: starts every scenario, measures each workload in interleaved
//! repeats, and assembles the [`Report`].
//!
//! Order of events: dataset → NFS servers → HTTP scenarios → the plan of every step →
//! same-bytes check → warm-up → for each repeat, for each workload, every scenario in a
//! rotating order (so no scenario always runs first or last), our load generator then
//! the reference client → NFS-level runs → TCP ceiling → report. A scenario that fails
//! to start or to run is reported and the others go on; an interruption (Ctrl-C) stops
//! the run at its next step. Each phase is one method of `RunContext`, one file per
//! part: `start` (servers, baselines, scenarios, the plan), `http` (byte checks, warm-up,
//! the HTTP workloads), `equal` (latency at equal load), `nfs` (NFS-level runs,
//! per-procedure rows), `tcp` (the TCP ceiling); the rows themselves are built by
//! [`super::rows`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context as _;
use lab::environment::Environment;
use latency::Snapshot;

use super::answer;
use super::crosscheck;
use super::model::*;
use super::options::{CompareOptions, DataCacheCopies};
use super::output::write_outputs;
use super::scenarios::{ScenarioSpec, ScratchDir};
use crate::experiment::link;
use crate::experiment::load::error_text;
use crate::experiment::nfs::NfsServer;
use crate::experiment::ours::Metrics;
use crate::experiment::progress::Progress;
use crate::experiment::workspace::{Dataset, unique_run_dir};

mod distance;
mod equal;
mod http;
mod nfs;
mod restart;
mod start;
mod tcp;

/// The state a comparison run carries from phase to phase.
struct RunContext<'a> {
    opts: &'a CompareOptions,
    out_dir: PathBuf,
    log_dir: PathBuf,
    cold: bool,
    report: Report,
    progress: Progress,
    rt: tokio::runtime::Runtime,
    rustnfs: Option<NfsServer>,
    ganesha: Option<NfsServer>,
    /// The NFS procedure latencies rustnfs recorded, per workload label.
    nfs_phases: BTreeMap<String, Snapshot>,
    /// Where the client-cache row's copies go (`None` = memfds); inside the dataset's
    /// temporary directory unless `--nfs-data-cache-dir` named one.
    data_cache_dir: Option<PathBuf>,
    /// The scenarios started, as specified (a restart starts them again).
    specs: Vec<ScenarioSpec>,
    /// How many times our servers were restarted (each round after the first).
    restarts: usize,
    // Drop order: the scratch directory goes before the dataset's temporary directory.
    scratch: ScratchDir,
    data: Dataset,
}

/// Runs the whole comparison and writes `report.json`, `report.md` and the plots.
/// Returns the report and the directory it was written to.
pub fn run(opts: &CompareOptions) -> anyhow::Result<(Report, PathBuf)> {
    let mut ctx = RunContext::prepare(opts)?;
    ctx.start_nfs_servers();
    let mut scenarios = ctx.start_scenarios();
    ctx.plan(&scenarios);
    ctx.check_bytes(&scenarios)?;
    ctx.warm_up(&scenarios)?;
    ctx.measure_http(&mut scenarios)?;
    ctx.measure_equal_load(&scenarios)?;
    ctx.measure_distance(&scenarios)?;
    drop(scenarios);
    ctx.measure_nfs()?;
    ctx.rustnfs = None;
    ctx.ganesha = None;
    ctx.measure_tcp()?;
    ctx.finish()
}

impl<'a> RunContext<'a> {
    /// Output directory, dataset, cache state and the report's header.
    fn prepare(opts: &'a CompareOptions) -> anyhow::Result<Self> {
        let out_dir = unique_run_dir(&opts.results)?;
        let log_dir = out_dir.join("logs");
        std::fs::create_dir_all(&log_dir)
            .with_context(|| format!("cannot create {}", log_dir.display()))?;
        crate::experiment::terminal::note(format!(
            "servelab compare: writing to {}",
            out_dir.display()
        ));
        let data = Dataset::prepare(
            opts.dataset.as_deref(),
            opts.dataset_spec,
            "servelab-dataset-",
        )?;
        let scratch = ScratchDir::create(&data.info.root)?;
        let data_cache_dir = data_cache_dir(opts, &data)?;
        let cache_state = if opts.cold {
            match drop_caches() {
                Ok(()) => "cold (page cache dropped before each run)".to_string(),
                Err(e) => {
                    format!("warm (--cold asked, but the page cache cannot be dropped: {e})")
                }
            }
        } else {
            "warm (every file read during warm-up before measuring)".to_string()
        };
        let cold = opts.cold && cache_state.starts_with("cold");
        let pinning = pin_client(opts)?;
        let report = header(opts, &data, cache_state, cold, pinning);
        // The TCP sink runs on a small runtime of its own.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("servelab-net")
            .enable_all()
            .build()
            .context("cannot start the network runtime")?;
        Ok(RunContext {
            opts,
            out_dir,
            log_dir,
            cold,
            report,
            progress: Progress::new("servelab compare"),
            rt,
            rustnfs: None,
            ganesha: None,
            nfs_phases: BTreeMap::new(),
            data_cache_dir,
            specs: Vec::new(),
            restarts: 0,
            scratch,
            data,
        })
    }

    /// Records a failure of one scenario (or server) in one workload; the run goes on.
    fn fail(&mut self, scenario: &str, workload: &str, error: impl Into<anyhow::Error>) {
        self.report.failures.push(Failure {
            scenario: scenario.into(),
            workload: workload.into(),
            error: error_text(&error.into()),
        });
    }

    /// Moves a serving process (and its threads and children) to the servers' CPUs; a
    /// process that cannot be moved is a failure of that scenario's start.
    fn pin_server(&mut self, name: &str, pid: u32) {
        if let Some(split) = &self.opts.cpus
            && let Err(e) = lab::affinity::pin_tree(pid, &split.server)
        {
            self.fail(name, "start", e);
        }
    }

    /// Adds what `nfs` recorded since `before` to the procedure latencies of `key`.
    fn add_nfs_phases(
        phases: &mut BTreeMap<String, Snapshot>,
        key: String,
        nfs: &Metrics,
        before: &Snapshot,
    ) {
        if let Ok(delta) = nfs.scrape_since(before) {
            let _ = phases.entry(key).or_default().merge(&delta);
        }
    }

    /// The report's self-checks, then `report.json`, `report.md` and the plots.
    fn finish(mut self) -> anyhow::Result<(Report, PathBuf)> {
        self.progress.finish();
        self.report.flags = crosscheck::flags(&self.report);
        self.report.answer = answer::compute(&self.report);
        write_outputs(&self.report, &self.out_dir)?;
        Ok((self.report, self.out_dir))
    }
}

/// Where the client-cache row keeps its copies: none (memfds), the directory given, or
/// one made in the dataset's temporary directory.
fn data_cache_dir(opts: &CompareOptions, data: &Dataset) -> anyhow::Result<Option<PathBuf>> {
    Ok(match &opts.data_cache_copies {
        DataCacheCopies::Memfd => None,
        DataCacheCopies::Dir(dir) => Some(dir.clone()),
        DataCacheCopies::RunTempDir => {
            let dir = data.tmp().join("nfs-data-cache");
            std::fs::create_dir(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            if httpd::storage::cache_file::file_system_name(&dir) == "tmpfs" {
                crate::experiment::terminal::note(
                    "servelab compare: the client-cache row's copies are on tmpfs (shmem, \
                     like memfds); --nfs-data-cache-dir DIR on ext4 measures file-backed copies",
                );
            }
            Some(dir)
        }
    })
}

/// servelab is the client: its threads, and `ab`/`wrk` started later, inherit the
/// client's CPUs; each server is moved to the servers' CPUs once started.
fn pin_client(opts: &CompareOptions) -> anyhow::Result<Pinning> {
    Ok(match &opts.cpus {
        Some(split) => {
            lab::affinity::pin_tree(std::process::id(), &split.client)
                .context("cannot pin servelab to the client CPUs")?;
            Pinning {
                client_cpus: split.client.clone(),
                server_cpus: split.server.clone(),
                note: split.note.clone(),
            }
        }
        None => {
            let all = lab::affinity::available_cpus();
            Pinning {
                note: match all.len() {
                    0 | 1 => "not pinned: one CPU, client and servers share it".into(),
                    _ => "not pinned (--no-pin): client and servers share every CPU".into(),
                },
                client_cpus: all.clone(),
                server_cpus: all,
            }
        }
    })
}

/// The report before anything is measured: the machine, the dataset, the settings.
fn header(
    opts: &CompareOptions,
    data: &Dataset,
    cache_state: String,
    cold: bool,
    pinning: Pinning,
) -> Report {
    Report {
        schema_version: SCHEMA_VERSION,
        environment: Environment::capture(cache_state),
        dataset: data.info.clone(),
        settings: Settings {
            repeat: opts.repeat,
            large_requests: opts.large_requests,
            large_concurrency: opts.large_concurrency,
            small_concurrency: opts.small_concurrency,
            small_seconds: opts.small_seconds,
            nfs_clients: opts.nfs_clients,
            nfs_seconds: opts.nfs_seconds,
            warmup: opts.warmup,
            cold,
            link: opts.link.map(|l| l.to_string()),
            baselines: opts.baselines.label(),
            nfs_cache_ms: opts.nfs_cache_ms,
            client_threads: Some(opts.client_threads),
            max_repeat: opts.max_repeat,
            keep_busy: opts.keep_busy,
            equal_load_seconds: opts.equal_load_seconds,
            fresh_servers: opts.restart,
            busy_other_work: Some(lab::affinity::OTHER_WORK_BUSY),
        },
        http: Vec::new(),
        nfs: Vec::new(),
        tcp: Vec::new(),
        server_phases: Vec::new(),
        nfs_procedures: Vec::new(),
        byte_checks: Vec::new(),
        skipped: Vec::new(),
        failures: Vec::new(),
        link_path: opts.link.map(|l| link::path_note(l).to_string()),
        control_path: opts.link.map(|l| link::control_note(l).to_string()),
        flags: Vec::new(),
        pinning: Some(pinning),
        equal_load: Vec::new(),
        answer: Answer::default(),
        distance: None,
    }
}

/// Drops the page cache (needs root and a writable /proc/sys).
fn drop_caches() -> std::io::Result<()> {
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3")
}
