//! Runs the comparison: starts every scenario, measures each workload in interleaved
//! repeats, and assembles the [`Report`].
//!
//! Order of events: dataset → NFS servers → HTTP scenarios → same-bytes check → warm-up
//! → for each repeat, for each workload, every scenario in a rotating order (so no
//! scenario always runs first or last), our load generator then the reference client →
//! NFS-level runs → TCP ceiling → report. A scenario that fails to start or to run is
//! reported and the others go on. Each phase is one method of [`RunContext`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use lab::dataset::{self, DatasetInfo, DatasetSpec};
use lab::environment::{self, Environment, Noise};
use lab::peers::{Baseline, ExternalServer};
use lab::sampler::Sampler;
use lab::tools::Measured;
use latency::{Series, Snapshot};
use loadgen::{NfsWorkload, Schedule};

use super::crosscheck::{self, Reference};
use super::link::{self, Link, LinkSpec};
use super::model::*;
use super::scenarios::{self, HttpScenario, ScenarioSpec, ScratchDir, StartEnv};
use super::{markdown, plots};
use crate::measure::{Load, interleave, rotation};
use crate::ours::ServerProcess;

/// Which third-party baselines to run.
#[derive(Debug, Clone, PartialEq)]
pub enum BaselineChoice {
    None,
    /// Every baseline found on the machine.
    Auto,
    List(Vec<Baseline>),
}

impl BaselineChoice {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "none" => Ok(BaselineChoice::None),
            "auto" | "all" => Ok(BaselineChoice::Auto),
            list => list
                .split(',')
                .map(|n| {
                    Baseline::parse(n).ok_or_else(|| {
                        let known: Vec<&str> = Baseline::ALL.iter().map(|b| b.name()).collect();
                        format!(
                            "unknown baseline `{n}` (use {}, auto or none)",
                            known.join(", ")
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(BaselineChoice::List),
        }
    }

    fn wants(&self, b: Baseline) -> bool {
        match self {
            BaselineChoice::None => false,
            BaselineChoice::Auto => true,
            BaselineChoice::List(l) => l.contains(&b),
        }
    }

    fn explicit(&self, b: Baseline) -> bool {
        matches!(self, BaselineChoice::List(l) if l.contains(&b))
    }

    fn label(&self) -> String {
        match self {
            BaselineChoice::None => "none".into(),
            BaselineChoice::Auto => "auto".into(),
            BaselineChoice::List(l) => l.iter().map(|b| b.name()).collect::<Vec<_>>().join(","),
        }
    }
}

/// Everything a comparison run needs, validated by the CLI.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// Serve this directory instead of a generated dataset.
    pub dataset: Option<PathBuf>,
    pub dataset_spec: DatasetSpec,
    pub baselines: BaselineChoice,
    pub repeat: usize,
    pub large_requests: u64,
    pub large_concurrency: usize,
    pub small_seconds: f64,
    pub small_concurrency: usize,
    pub nfs_clients: usize,
    pub nfs_seconds: f64,
    pub tcp_seconds: f64,
    pub warmup: bool,
    pub cold: bool,
    pub link: Option<LinkSpec>,
    /// httpd's NFS cache lifetime for scenario A (`--nfs-attr-ttl-ms`).
    pub nfs_cache_ms: u64,
    /// Threads of our load generator (`servelab load -t`).
    pub client_threads: usize,
    /// Also run `ab` / `wrk` on the same workloads when installed.
    pub cross_check: bool,
    /// `results/`: the run goes into `<results>/<date>-<host>[-N]/`.
    pub results: PathBuf,
}

/// One HTTP workload: what every scenario is asked to serve.
struct HttpWorkload {
    name: &'static str,
    path: String,
    schedule: Schedule,
    concurrency: usize,
    keepalive: bool,
    reference: Option<Reference>,
}

/// One (workload, scenario) row over the repeats.
#[derive(Default)]
struct RowAcc {
    runs: Vec<HttpRun>,
    curves: Vec<Vec<(f64, f64)>>,
    phases: Snapshot,
    reference: Vec<Measured>,
}

/// One NFS-level target.
struct NfsTarget {
    server: &'static str,
    read_url: String,
    meta_url: String,
}

/// The state a comparison run carries from phase to phase.
struct RunContext<'a> {
    opts: &'a CompareOptions,
    out_dir: PathBuf,
    log_dir: PathBuf,
    info: DatasetInfo,
    cold: bool,
    report: Report,
    rt: tokio::runtime::Runtime,
    rustnfs: Option<ServerProcess>,
    ganesha: Option<ExternalServer>,
    /// The NFS procedure latencies rustnfs recorded, per workload label.
    nfs_phases: BTreeMap<String, Snapshot>,
    // Drop order: the scratch directory goes before the dataset's temporary directory.
    scratch: ScratchDir,
    _tmp: tempfile::TempDir,
}

/// Runs the whole comparison and writes `report.json`, `report.md` and the plots.
/// Returns the report and the directory it was written to.
pub fn run(opts: &CompareOptions) -> anyhow::Result<(Report, PathBuf)> {
    let mut ctx = RunContext::prepare(opts)?;
    ctx.start_nfs_servers();
    let scenarios = ctx.start_scenarios();
    ctx.check_bytes(&scenarios)?;
    ctx.warm_up(&scenarios);
    ctx.measure_http(&scenarios);
    drop(scenarios);
    ctx.measure_nfs();
    ctx.rustnfs = None;
    ctx.ganesha = None;
    ctx.measure_tcp();
    ctx.finish()
}

impl<'a> RunContext<'a> {
    /// Output directory, dataset, cache state and the report's header.
    fn prepare(opts: &'a CompareOptions) -> anyhow::Result<Self> {
        let out_dir = unique_run_dir(&opts.results)?;
        let log_dir = out_dir.join("logs");
        std::fs::create_dir_all(&log_dir)
            .with_context(|| format!("cannot create {}", log_dir.display()))?;
        eprintln!("servelab compare: writing to {}", out_dir.display());
        let tmp = tempfile::Builder::new()
            .prefix("servelab-dataset-")
            .tempdir()
            .context("cannot create a temporary directory")?;
        let info = match &opts.dataset {
            Some(dir) => dataset::describe_existing(dir)
                .with_context(|| format!("--dataset {}", dir.display()))?,
            None => {
                let root = tmp.path().join("www");
                eprintln!(
                    "servelab compare: generating the dataset in {}",
                    root.display()
                );
                dataset::generate(&root, opts.dataset_spec)
                    .context("cannot generate the dataset")?
            }
        };
        let scratch = ScratchDir::create(&info.root)?;
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
        let report = Report {
            schema_version: SCHEMA_VERSION,
            environment: Environment::capture(cache_state),
            dataset: info.clone(),
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
            flags: Vec::new(),
        };
        // The TCP sink runs on a small runtime of their own; it also hosts the Ctrl-C
        // handler that stops every child.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("servelab-net")
            .enable_all()
            .build()
            .context("cannot start the network runtime")?;
        crate::ours::stop_children_on_signal(&rt);
        Ok(RunContext {
            opts,
            out_dir,
            log_dir,
            info,
            cold,
            report,
            rt,
            rustnfs: None,
            ganesha: None,
            nfs_phases: BTreeMap::new(),
            scratch,
            _tmp: tmp,
        })
    }

    fn fail(&mut self, scenario: &str, workload: &str, error: impl std::fmt::Display) {
        self.report.failures.push(Failure {
            scenario: scenario.into(),
            workload: workload.into(),
            error: format!("{error:#}"),
        });
    }

    fn start_nfs_servers(&mut self) {
        let root = self.info.root.display().to_string();
        match ServerProcess::start(
            "rustnfs",
            "rustnfs",
            &["--export".into(), root],
            &self.log_dir,
        ) {
            Ok(p) => self.rustnfs = Some(p),
            Err(e) => self.fail("rustnfs", "start", e),
        }
        if let Some(g) = self.start_baseline(Baseline::Ganesha) {
            self.ganesha = Some(g);
        }
    }

    /// Starts a peer when chosen and installed; records why not otherwise.
    fn start_baseline(&mut self, b: Baseline) -> Option<ExternalServer> {
        if !self.opts.baselines.wants(b) {
            return None;
        }
        let label = match b {
            Baseline::Ganesha => "A (NFS: ganesha) and NFS-level ganesha".to_string(),
            other => other.name().to_string(),
        };
        if let Err(why) = b.detect() {
            self.report.skipped.push(Skipped {
                scenario: label,
                reason: why.to_string(),
            });
            return None;
        }
        let started = match b {
            Baseline::Ganesha => lab::peers::start_ganesha(&self.info.root),
            Baseline::Nginx => lab::peers::start_nginx(&self.info.root),
            Baseline::Apache => lab::peers::start_apache(&self.info.root),
            Baseline::KernelNfs => return None,
        };
        match started {
            Ok(s) => Some(s),
            Err(e) if self.opts.baselines.explicit(b) => {
                self.fail(&label, "start", e);
                None
            }
            Err(e) => {
                self.report.skipped.push(Skipped {
                    scenario: label,
                    reason: format!("installed but did not start: {e}"),
                });
                None
            }
        }
    }

    /// The scenario list of this run.
    fn specs(&mut self) -> Vec<ScenarioSpec> {
        let mut peers = Vec::new();
        for b in [Baseline::Nginx, Baseline::Apache] {
            if !self.opts.baselines.wants(b) {
                continue;
            }
            match b.detect() {
                Ok(_) => peers.push(b),
                Err(why) => self.report.skipped.push(Skipped {
                    scenario: b.name().into(),
                    reason: why.to_string(),
                }),
            }
        }
        if self.opts.baselines.wants(Baseline::KernelNfs) {
            // Always reported: on machines with a kernel client this is where it would run.
            let reason = match Baseline::KernelNfs.detect() {
                Err(why) => why.to_string(),
                Ok(_) => "a kernel NFS mount needs a mount point and root; run httpd --root on the mounted path (see crates/servelab/README.md) — compare does not mount file systems itself".into(),
            };
            self.report.skipped.push(Skipped {
                scenario: "A (kernel NFS mount)".into(),
                reason,
            });
        }
        let mut specs = scenarios::specs(self.opts.link, self.ganesha.is_some(), &peers);
        if self.rustnfs.is_none() {
            specs.retain(|s| !matches!(s.launch, scenarios::Launch::HttpdRustnfs { .. }));
        }
        specs
    }

    fn start_scenarios(&mut self) -> Vec<HttpScenario> {
        let specs = self.specs();
        let mut started = Vec::new();
        for spec in &specs {
            let env = StartEnv {
                root: &self.info.root,
                log_dir: &self.log_dir,
                rustnfs: self.rustnfs.as_ref(),
                ganesha: self.ganesha.as_ref(),
                nfs_cache_ms: self.opts.nfs_cache_ms,
            };
            let result = scenarios::start(spec, &env);
            match result {
                Ok(s) => started.push(s),
                Err(e) if matches!(spec.launch, scenarios::Launch::Peer(b) if !self.opts.baselines.explicit(b)) => {
                    self.report.skipped.push(Skipped {
                        scenario: spec.name.clone(),
                        reason: format!("installed but did not start: {e:#}"),
                    })
                }
                Err(e) => self.fail(&spec.name, "start", e),
            }
        }
        started
    }

    /// Every scenario must serve the same bytes as the file on disk.
    fn check_bytes(&mut self, scenarios: &[HttpScenario]) -> anyhow::Result<()> {
        for file in [&self.info.large_file, &self.info.small_file] {
            let on_disk = std::fs::read(self.info.root.join(file))
                .with_context(|| format!("cannot read {file}"))?;
            for sc in scenarios {
                let got = lab::http::get(sc.addr, &format!("/{file}"), Duration::from_secs(60));
                let (identical, detail) = match got {
                    Ok((200, body)) if body == on_disk => (true, format!("{} bytes", body.len())),
                    Ok((200, body)) => (false, format!("{} bytes, content differs", body.len())),
                    Ok((status, _)) => (false, format!("HTTP {status}")),
                    Err(e) => (false, e.to_string()),
                };
                self.report.byte_checks.push(ByteCheck {
                    scenario: sc.name.clone(),
                    file: file.clone(),
                    identical_to_b: identical,
                    detail,
                });
            }
        }
        Ok(())
    }

    fn warm_up(&self, scenarios: &[HttpScenario]) {
        if !self.opts.warmup {
            return;
        }
        eprintln!("servelab compare: warming up {} scenarios", scenarios.len());
        for sc in scenarios {
            let url = |f: &str| format!("http://{}/{f}", sc.addr);
            let _ = Load::new(url(&self.info.large_file), Schedule::Count(4), 2)
                .keepalive(false)
                .run();
            let _ = Load::new(url(&self.info.small_file), Schedule::Count(200), 4).run();
        }
    }

    fn workloads(&self) -> Vec<HttpWorkload> {
        let o = self.opts;
        let with = |r: Reference| (o.cross_check && r.available()).then_some(r);
        vec![
            HttpWorkload {
                name: "large",
                path: format!("/{}", self.info.large_file),
                schedule: Schedule::Count(o.large_requests),
                concurrency: o.large_concurrency,
                keepalive: false,
                reference: with(Reference::Ab {
                    requests: o.large_requests,
                    concurrency: o.large_concurrency,
                }),
            },
            HttpWorkload {
                name: "small",
                path: format!("/{}", self.info.small_file),
                schedule: Schedule::Duration(Duration::from_secs_f64(o.small_seconds)),
                concurrency: o.small_concurrency,
                keepalive: true,
                reference: with(Reference::Wrk {
                    connections: o.small_concurrency,
                    seconds: o.small_seconds,
                }),
            },
        ]
    }

    /// Every workload on every scenario, `repeat` times, in rotating order.
    fn measure_http(&mut self, scenarios: &[HttpScenario]) {
        let workloads = self.workloads();
        for w in &workloads {
            if w.reference.is_none() && self.opts.cross_check {
                let tool = if w.keepalive { "wrk" } else { "ab" };
                self.report.skipped.push(Skipped {
                    scenario: format!("{tool} cross-check of the {} workload", w.name),
                    reason: format!("{tool} is not installed"),
                });
            }
        }
        let mut acc: BTreeMap<(usize, usize), RowAcc> = BTreeMap::new();
        for rep in 0..self.opts.repeat {
            for (wi, w) in workloads.iter().enumerate() {
                for si in rotation(rep, scenarios.len()) {
                    let entry = acc.entry((wi, si)).or_default();
                    self.measure_one(rep, w, &scenarios[si], entry);
                }
            }
        }
        for ((wi, si), a) in acc {
            self.add_http_row(&workloads[wi], &scenarios[si], a);
        }
        // Rows in scenario order within each workload, B first.
        self.report.http.sort_by_key(|r| {
            (
                workloads.iter().position(|w| w.name == r.workload),
                scenarios.iter().position(|s| s.name == r.scenario),
            )
        });
    }

    /// One slot: our load generator, then the reference client, on one scenario.
    fn measure_one(&mut self, rep: usize, w: &HttpWorkload, sc: &HttpScenario, acc: &mut RowAcc) {
        eprintln!(
            "servelab compare: run {}/{} {:>5} {}",
            rep + 1,
            self.opts.repeat,
            w.name,
            sc.name
        );
        if self.cold {
            let _ = drop_caches();
        }
        let url = format!("http://{}{}", sc.addr, w.path);
        let before = sc.ours.as_ref().map(|p| p.scrape());
        let nfs_before = self.rustnfs_scrape(sc.behind_rustnfs);
        let noise_before = Noise::now();
        let sampler = Sampler::start(sc.target.clone());
        let result = Load::new(&url, w.schedule, w.concurrency)
            .keepalive(w.keepalive)
            .threads(self.opts.client_threads)
            .run();
        let usage = sampler.finish();
        let noise_after = Noise::now();
        match result {
            Ok(r) => {
                let mut run = http_run(&r);
                run.cost = Some(Cost::from_usage(&usage, r.requests, r.body_bytes));
                run.noise = Some(RunNoise {
                    before: noise_before,
                    after: noise_after,
                    busy: noise_before.busy() || noise_after.busy(),
                });
                acc.runs.push(run);
                if let Some(total) = r.total() {
                    acc.curves.push(percentile_curve(&total));
                }
            }
            Err(e) => self.fail(&sc.name, w.name, e),
        }
        if let (Some(Ok(before)), Some(p)) = (before, &sc.ours)
            && let Ok(delta) = p.scrape_since(&before)
        {
            let _ = acc.phases.merge(&delta);
        }
        if let Some(before) = nfs_before {
            self.add_nfs_phases(format!("HTTP {} via {}", w.name, sc.name), &before);
        }
        if let Some(reference) = &w.reference {
            match reference.run(&url) {
                Ok(m) => acc.reference.push(m),
                Err(e) => self.fail(&sc.name, &format!("{} ({})", w.name, reference.tool()), e),
            }
        }
    }

    fn rustnfs_scrape(&self, wanted: bool) -> Option<Snapshot> {
        if !wanted {
            return None;
        }
        self.rustnfs.as_ref().and_then(|p| p.scrape().ok())
    }

    fn add_nfs_phases(&mut self, key: String, before: &Snapshot) {
        if let Some(nfs) = &self.rustnfs
            && let Ok(delta) = nfs.scrape_since(before)
        {
            let _ = self.nfs_phases.entry(key).or_default().merge(&delta);
        }
    }

    fn add_http_row(&mut self, w: &HttpWorkload, sc: &HttpScenario, a: RowAcc) {
        if a.runs.is_empty() {
            return;
        }
        let rps: Vec<f64> = a.runs.iter().map(|r| r.requests_per_sec).collect();
        let median_run = HttpRun::median_of(&a.runs);
        let reference = w
            .reference
            .as_ref()
            .filter(|_| !a.reference.is_empty())
            .map(|r| {
                let busy = a
                    .runs
                    .iter()
                    .filter(|x| x.noise.is_some_and(|n| n.busy))
                    .count();
                crosscheck::summarise(r, &a.reference, median_run.requests_per_sec, busy)
            });
        self.report.http.push(HttpRow {
            workload: w.name.into(),
            scenario: sc.name.clone(),
            description: sc.description.clone(),
            rps_min: rps.iter().copied().fold(f64::INFINITY, f64::min),
            rps_max: rps.iter().copied().fold(0.0, f64::max),
            percentiles: median_curve(&a.curves),
            server_peak_rss_bytes: a
                .runs
                .iter()
                .filter_map(|r| r.cost.as_ref().map(|c| c.peak_rss_bytes))
                .max(),
            cost: median_run.cost.clone(),
            median: median_run,
            reference,
            runs: a.runs,
        });
        for phase in ["meta", "read", "send", "total"] {
            if let Some(s) = combine_phase(&a.phases, phase) {
                self.report.server_phases.push(PhaseRow {
                    scenario: sc.name.clone(),
                    workload: w.name.into(),
                    phase: phase.into(),
                    count: s.count(),
                    mean_ms: s.mean_seconds() * 1e3,
                    p50_ms: s.quantile_seconds(0.5) * 1e3,
                    p99_ms: s.quantile_seconds(0.99) * 1e3,
                });
            }
        }
    }

    fn nfs_targets(&self) -> Vec<NfsTarget> {
        let mut v = Vec::new();
        let (large, scratch) = (&self.info.large_file, &self.scratch.name);
        if let Some(n) = &self.rustnfs {
            v.push(NfsTarget {
                server: "rustnfs",
                read_url: format!("nfs://{}//{large}", n.addr),
                meta_url: format!("nfs://{}//{scratch}", n.addr),
            });
        }
        if let Some(g) = &self.ganesha {
            let root = self.info.root.display();
            let q = format!("?mountport={}", g.extra_port.unwrap_or(0));
            v.push(NfsTarget {
                server: "ganesha",
                read_url: format!("nfs://{}{root}//{large}{q}", g.addr),
                meta_url: format!("nfs://{}{root}//{scratch}{q}", g.addr),
            });
        }
        v
    }

    /// Sequential READ and the metadata mix straight against each NFS server.
    fn measure_nfs(&mut self) {
        let targets = self.nfs_targets();
        let workloads = [
            ("read", NfsWorkload::Read),
            ("metadata", NfsWorkload::Metadata),
        ];
        let mut acc: BTreeMap<(usize, &'static str), Vec<loadgen::Report>> = BTreeMap::new();
        for rep in 0..self.opts.repeat {
            for (wi, (wname, wl)) in workloads.iter().enumerate() {
                for ti in rotation(rep, targets.len()) {
                    let t = &targets[ti];
                    eprintln!(
                        "servelab compare: run {}/{} nfs {wname:>8} {}",
                        rep + 1,
                        self.opts.repeat,
                        t.server
                    );
                    let url = if *wl == NfsWorkload::Read {
                        &t.read_url
                    } else {
                        &t.meta_url
                    };
                    let before = self.rustnfs_scrape(t.server == "rustnfs");
                    let result =
                        Load::for_seconds(url, self.opts.nfs_seconds, self.opts.nfs_clients)
                            .nfs(*wl)
                            .run();
                    match result {
                        Ok(r) => acc.entry((wi, t.server)).or_default().push(r),
                        Err(e) => self.fail(t.server, &format!("nfs {wname}"), e),
                    }
                    if let Some(before) = before {
                        self.add_nfs_phases(format!("NFS {wname}"), &before);
                    }
                }
            }
        }
        for ((wi, server), runs) in acc {
            self.report.nfs.push(nfs_row(
                workloads[wi].0,
                server,
                self.opts.nfs_clients,
                &runs,
            ));
        }
        self.add_procedure_rows();
    }

    fn add_procedure_rows(&mut self) {
        for (workload, snap) in &self.nfs_phases {
            let mut procs: BTreeMap<&str, (Series, u64)> = BTreeMap::new();
            for (k, s) in &snap.series {
                if k.phase != "total" {
                    continue;
                }
                let e = procs
                    .entry(k.op.as_str())
                    .or_insert_with(|| (Series::new(), 0));
                let _ = e.0.merge(s);
                if k.status != "ok" {
                    e.1 += s.count();
                }
            }
            for (procedure, (s, errors)) in procs {
                self.report.nfs_procedures.push(ProcedureRow {
                    workload: workload.clone(),
                    procedure: procedure.into(),
                    count: s.count(),
                    mean_ms: s.mean_seconds() * 1e3,
                    p99_ms: s.quantile_seconds(0.99) * 1e3,
                    errors,
                });
            }
        }
    }

    /// Raw TCP throughput on loopback and, with `--link`, through the control relay and
    /// the shaped link.
    fn measure_tcp(&mut self) {
        let (sink, stop) = match self.rt.block_on(start_tcp_sink()) {
            Ok(s) => s,
            Err(e) => return self.fail("tcp ceiling", "tcp", e),
        };
        let mut paths: Vec<(String, SocketAddr, Option<Link>)> =
            vec![("loopback".into(), sink, None)];
        if let Some(spec) = self.opts.link {
            for s in [LinkSpec::unshaped(), spec] {
                match Link::start(sink, s) {
                    Ok(l) => paths.push((
                        format!("loopback via link ({s}; {})", l.path_note()),
                        l.addr,
                        Some(l),
                    )),
                    Err(e) => self.fail(&format!("link {s}"), "tcp", e),
                }
            }
        }
        let mut bits: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
        let order: Vec<usize> = (0..paths.len()).collect();
        interleave(self.opts.repeat, &order, |rep, &i| {
            let (path, addr, _) = &paths[i];
            eprintln!(
                "servelab compare: run {}/{} tcp {path}",
                rep + 1,
                self.opts.repeat
            );
            match Load::for_seconds(format!("tcp://{addr}"), self.opts.tcp_seconds, 1).run() {
                Ok(r) => bits[i].push(r.bytes_per_sec() * 8.0),
                Err(e) => self.fail(path, "tcp", e),
            }
        });
        for ((path, _, link), mut bits) in paths.iter().zip(bits) {
            if !bits.is_empty() {
                self.report.tcp.push(TcpRow {
                    path: path.clone(),
                    streams: 1,
                    bits_min: bits.iter().copied().fold(f64::INFINITY, f64::min),
                    bits_max: bits.iter().copied().fold(0.0, f64::max),
                    bits_per_sec: median(&mut bits),
                    expected_bits_per_sec: link
                        .as_ref()
                        .and_then(|l| l.spec.rate_bits_per_sec)
                        .map(|r| r as f64),
                });
            }
        }
        let _ = stop.send(());
    }

    fn finish(mut self) -> anyhow::Result<(Report, PathBuf)> {
        self.report.flags = crosscheck::flags(&self.report);
        write_outputs(&self.report, &self.out_dir)?;
        Ok((self.report, self.out_dir))
    }
}

fn nfs_row(workload: &str, server: &str, clients: usize, runs: &[loadgen::Report]) -> NfsRow {
    let ops: Vec<f64> = runs.iter().map(|r| r.requests_per_sec()).collect();
    let mut merged = runs[0].clone();
    for r in &runs[1..] {
        let _ = merged.merge(r);
    }
    let total = merged.total();
    NfsRow {
        workload: workload.into(),
        server: server.into(),
        clients,
        ops_per_sec: median(&mut ops.clone()),
        ops_min: ops.iter().copied().fold(f64::INFINITY, f64::min),
        ops_max: ops.iter().copied().fold(0.0, f64::max),
        bytes_per_sec: median(&mut runs.iter().map(|r| r.bytes_per_sec()).collect::<Vec<_>>()),
        mean_ms: total.as_ref().map_or(0.0, |s| s.mean_seconds() * 1e3),
        p99_ms: total
            .as_ref()
            .map_or(0.0, |s| s.quantile_seconds(0.99) * 1e3),
        failed: runs.iter().map(|r| r.failed()).sum(),
    }
}

/// Writes `report.json`, `report.md` and the SVG plots into `dir`.
pub fn write_outputs(report: &Report, dir: &Path) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(report)?;
    std::fs::write(dir.join("report.json"), json).context("cannot write report.json")?;
    std::fs::write(dir.join("report.md"), markdown::render(report))
        .context("cannot write report.md")?;
    plots::write_all(report, dir).map_err(anyhow::Error::msg)?;
    Ok(())
}

fn http_run(r: &loadgen::Report) -> HttpRun {
    let total = r.total().unwrap_or_default();
    HttpRun {
        requests: r.requests,
        failed: r.failed(),
        non_2xx: r.non_2xx,
        bytes: r.body_bytes,
        seconds: r.duration.as_secs_f64(),
        requests_per_sec: r.requests_per_sec(),
        transfer_bytes_per_sec: r.bytes_per_sec(),
        mean_ms: total.mean_seconds() * 1e3,
        p50_ms: total.quantile_seconds(0.5) * 1e3,
        p99_ms: total.quantile_seconds(0.99) * 1e3,
        max_ms: total.quantile_seconds(1.0) * 1e3,
        noise: None,
        cost: None,
    }
}

const PERCENTILES: [f64; 8] = [50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 100.0];

fn percentile_curve(s: &Series) -> Vec<(f64, f64)> {
    PERCENTILES
        .iter()
        .map(|p| (*p, s.quantile_seconds(p / 100.0) * 1e3))
        .collect()
}

/// Point by point, the median over the runs' curves — the statistic the tables show.
fn median_curve(curves: &[Vec<(f64, f64)>]) -> Vec<(f64, f64)> {
    if curves.is_empty() {
        return Vec::new();
    }
    PERCENTILES
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut v: Vec<f64> = curves
                .iter()
                .filter_map(|c| c.get(i).map(|x| x.1))
                .collect();
            (*p, median(&mut v))
        })
        .collect()
}

/// Every series of one phase (all routes and statuses) merged.
fn combine_phase(snapshot: &Snapshot, phase: &str) -> Option<Series> {
    let mut out: Option<Series> = None;
    for (k, s) in &snapshot.series {
        if k.phase == phase {
            match &mut out {
                Some(acc) => {
                    let _ = acc.merge(s);
                }
                None => out = Some(s.clone()),
            }
        }
    }
    out
}

async fn start_tcp_sink() -> anyhow::Result<(SocketAddr, tokio::sync::oneshot::Sender<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot bind the TCP sink")?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(loadgen::tcp::serve(listener, 128 * 1024, async move {
        let _ = rx.await;
    }));
    Ok((addr, tx))
}

/// `results/<date>-<host>`, or with `-2`, `-3`… when a run of the same day exists
/// (shared with `servelab bench`).
pub fn unique_run_dir(results: &Path) -> anyhow::Result<PathBuf> {
    let date = &environment::now_rfc3339()[..10];
    let base = format!("{date}-{}", environment::hostname());
    for n in 1.. {
        let name = if n == 1 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        let dir = results.join(name);
        match std::fs::create_dir_all(results).and_then(|_| std::fs::create_dir(&dir)) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    unreachable!()
}

/// Drops the page cache (needs root and a writable /proc/sys).
fn drop_caches() -> Result<(), String> {
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_are_medians_of_runs() {
        let c = |v: f64| PERCENTILES.iter().map(|p| (*p, v * p)).collect::<Vec<_>>();
        let m = median_curve(&[c(1.0), c(3.0), c(2.0)]);
        assert_eq!(m[0], (50.0, 100.0));
        assert!(median_curve(&[]).is_empty());
    }
}
