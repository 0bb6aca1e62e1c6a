//! Runs the comparison: starts every scenario, measures each workload in interleaved
//! repeats, and assembles the [`Report`].
//!
//! Order of events: dataset → NFS servers → HTTP scenarios → same-bytes check → warm-up
//! → for each repeat, for each workload, every scenario in a rotating order (so no
//! scenario always runs first or last) → NFS-level runs → TCP ceiling → report. A
//! scenario that fails to start or to run is reported and the others go on.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use latency::{Series, Snapshot};
use loadgen::{LoadPlan, NfsWorkload, Schedule};

use super::baselines::{self, Baseline, ExternalServer};
use super::dataset::{self, DatasetInfo, DatasetSpec};
use super::environment::{self, Environment};
use super::link::{self, LinkSpec, Relay};
use super::memory::PeakSampler;
use super::model::*;
use super::process::ServerProcess;
use super::{httpget, markdown, plots};

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
    /// `results/`: the run goes into `<results>/<date>-<host>[-N]/`.
    pub results: PathBuf,
}

/// One HTTP scenario under test.
struct HttpScenario {
    name: String,
    description: String,
    addr: SocketAddr,
    /// Our httpd: scraped for its phase breakdown.
    ours: Option<ServerProcess>,
    /// A baseline: only its memory is sampled.
    external: Option<ExternalServer>,
    /// The NFS server behind it, when it is rustnfs (for procedure latencies).
    behind_rustnfs: bool,
}

impl HttpScenario {
    fn pid(&self) -> Option<u32> {
        self.ours
            .as_ref()
            .map(ServerProcess::pid)
            .or(self.external.as_ref().map(ExternalServer::pid))
    }
}

/// Accumulates one (workload, scenario) row over the repeats.
#[derive(Default)]
struct HttpAccumulator {
    runs: Vec<HttpRun>,
    merged_total: Option<Series>,
    phases: Snapshot,
    peak_rss: Option<u64>,
}

/// Runs the whole comparison and writes `report.json`, `report.md` and the plots.
/// Returns the report and the directory it was written to.
pub fn run(opts: &CompareOptions) -> Result<(Report, PathBuf), String> {
    let out_dir = unique_run_dir(&opts.results)?;
    let log_dir = out_dir.join("logs");
    std::fs::create_dir_all(&log_dir)
        .map_err(|e| format!("cannot create {}: {e}", log_dir.display()))?;
    eprintln!("servelab compare: writing to {}", out_dir.display());

    // The dataset: generated into a private temporary directory unless given.
    let tmp = tempfile::Builder::new()
        .prefix("servelab-dataset-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let info: DatasetInfo = match &opts.dataset {
        Some(dir) => dataset::describe_existing(dir)
            .map_err(|e| format!("--dataset {}: {e}", dir.display()))?,
        None => {
            let root = tmp.path().join("www");
            eprintln!(
                "servelab compare: generating the dataset in {}",
                root.display()
            );
            dataset::generate(&root, opts.dataset_spec)
                .map_err(|e| format!("cannot generate the dataset: {e}"))?
        }
    };
    let root = info.root.clone();
    let scratch = ScratchDir::create(&root)?;

    let cache_state = if opts.cold {
        match drop_caches() {
            Ok(()) => "cold (page cache dropped before each run)".to_string(),
            Err(e) => format!("warm (--cold asked, but the page cache cannot be dropped: {e})"),
        }
    } else {
        "warm (every file read during warm-up before measuring)".to_string()
    };
    let cold = opts.cold && cache_state.starts_with("cold");

    let mut report = Report {
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
            baselines: match &opts.baselines {
                BaselineChoice::None => "none".into(),
                BaselineChoice::Auto => "auto".into(),
                BaselineChoice::List(l) => l.iter().map(|b| b.name()).collect::<Vec<_>>().join(","),
            },
            nfs_cache_ms: opts.nfs_cache_ms,
        },
        http: Vec::new(),
        nfs: Vec::new(),
        tcp: Vec::new(),
        server_phases: Vec::new(),
        nfs_procedures: Vec::new(),
        byte_checks: Vec::new(),
        skipped: Vec::new(),
        failures: Vec::new(),
    };

    // Relays and the TCP sink run on a small runtime of their own.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("servelab-net")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the network runtime: {e}"))?;
    super::process::stop_children_on_signal(&rt);

    // --- NFS servers -----------------------------------------------------------------
    let root_arg = root.display().to_string();
    let rustnfs = match ServerProcess::start(
        "rustnfs",
        "rustnfs",
        &["--export".into(), root_arg.clone()],
        &log_dir,
    ) {
        Ok(p) => Some(p),
        Err(e) => {
            report.failures.push(Failure {
                scenario: "rustnfs".into(),
                workload: "start".into(),
                error: e,
            });
            None
        }
    };
    let ganesha = start_baseline(&opts.baselines, Baseline::Ganesha, &mut report, || {
        baselines::start_ganesha(&root)
    });

    // --- HTTP scenarios --------------------------------------------------------------
    let mut scenarios: Vec<HttpScenario> = Vec::new();
    let mut start_httpd = |name: &str,
                           description: &str,
                           args: Vec<String>,
                           behind_rustnfs: bool,
                           report: &mut Report| {
        match ServerProcess::start(name, "httpd", &args, &log_dir) {
            Ok(p) => scenarios.push(HttpScenario {
                name: name.into(),
                description: description.into(),
                addr: p.addr,
                ours: Some(p),
                external: None,
                behind_rustnfs,
            }),
            Err(e) => report.failures.push(Failure {
                scenario: name.into(),
                workload: "start".into(),
                error: e,
            }),
        }
    };
    start_httpd(
        markdown::REFERENCE_SCENARIO,
        "httpd --root: local disk",
        vec!["--root".into(), root_arg.clone()],
        false,
        &mut report,
    );
    let mut relays: Vec<Relay> = Vec::new();
    if let Some(nfs) = &rustnfs {
        start_httpd(
            "A (NFS: rustnfs)",
            "httpd --nfs: built-in NFSv3 client → rustnfs",
            nfs_args(format!("nfs://{}/", nfs.addr), opts.nfs_cache_ms),
            true,
            &mut report,
        );
        if let Some(spec) = opts.link {
            for (label, s) in [
                ("relay, unshaped control", LinkSpec::unshaped()),
                ("link", spec),
            ] {
                match rt.block_on(link::start("127.0.0.1:0".parse().unwrap(), nfs.addr, s)) {
                    Ok(relay) => {
                        let name = if label == "link" {
                            format!("A (NFS: rustnfs, {s})")
                        } else {
                            format!("A (NFS: rustnfs, {label})")
                        };
                        start_httpd(
                            &name,
                            &format!("httpd --nfs → userspace relay ({s}) → rustnfs"),
                            nfs_args(format!("nfs://{}/", relay.addr), opts.nfs_cache_ms),
                            true,
                            &mut report,
                        );
                        relays.push(relay);
                    }
                    Err(e) => report.failures.push(Failure {
                        scenario: format!("A via {label}"),
                        workload: "start".into(),
                        error: format!("cannot start the link relay: {e}"),
                    }),
                }
            }
        }
    }
    if let Some(g) = &ganesha {
        start_httpd(
            "A (NFS: ganesha)",
            "httpd --nfs: built-in NFSv3 client → NFS-Ganesha (VFS)",
            nfs_args(
                format!(
                    "nfs://{}{}?mountport={}",
                    g.addr,
                    root_arg,
                    g.extra_port.unwrap_or(0)
                ),
                opts.nfs_cache_ms,
            ),
            false,
            &mut report,
        );
    }
    for (b, start) in [
        (
            Baseline::Nginx,
            baselines::start_nginx as fn(&Path) -> Result<ExternalServer, String>,
        ),
        (Baseline::Apache, baselines::start_apache),
    ] {
        if let Some(server) = start_baseline(&opts.baselines, b, &mut report, || start(&root)) {
            scenarios.push(HttpScenario {
                name: b.name().into(),
                description: format!(
                    "{} serving the dataset from local disk (sendfile on)",
                    b.name()
                ),
                addr: server.addr,
                ours: None,
                external: Some(server),
                behind_rustnfs: false,
            });
        }
    }
    if opts.baselines.wants(Baseline::KernelNfs) {
        // Always reported: on machines with a kernel client this is where it would run.
        let reason = match Baseline::KernelNfs.detect() {
            Err(why) => why,
            Ok(_) => "a kernel NFS mount needs a mount point and root; run httpd --root on the mounted path (see crates/servelab/README.md) — compare does not mount file systems itself".into(),
        };
        report.skipped.push(Skipped {
            scenario: "A (kernel NFS mount)".into(),
            reason,
        });
    }

    // --- Same bytes? -----------------------------------------------------------------
    for file in [&info.large_file, &info.small_file] {
        let on_disk =
            std::fs::read(root.join(file)).map_err(|e| format!("cannot read {file}: {e}"))?;
        for sc in &scenarios {
            let check = match httpget::get(sc.addr, &format!("/{file}"), Duration::from_secs(60)) {
                Ok((200, body)) if body == on_disk => (true, format!("{} bytes", body.len())),
                Ok((200, body)) => (false, format!("{} bytes, content differs", body.len())),
                Ok((status, _)) => (false, format!("HTTP {status}")),
                Err(e) => (false, e),
            };
            report.byte_checks.push(ByteCheck {
                scenario: sc.name.clone(),
                file: file.clone(),
                identical_to_b: check.0,
                detail: check.1,
            });
        }
    }

    // --- HTTP workloads --------------------------------------------------------------
    let large_url = |sc: &HttpScenario| format!("http://{}/{}", sc.addr, info.large_file);
    let small_url = |sc: &HttpScenario| format!("http://{}/{}", sc.addr, info.small_file);
    if opts.warmup {
        eprintln!("servelab compare: warming up {} scenarios", scenarios.len());
        for sc in &scenarios {
            let _ = load(&large_url(sc), Schedule::Count(4), 2, false);
            let _ = load(&small_url(sc), Schedule::Count(200), 4, true);
        }
    }
    let workloads: [(&str, bool); 2] = [("large", false), ("small", true)];
    let mut acc: BTreeMap<(usize, usize), HttpAccumulator> = BTreeMap::new();
    let mut nfs_phase_acc: BTreeMap<String, Snapshot> = BTreeMap::new();
    for rep in 0..opts.repeat {
        for (wi, (workload, keepalive)) in workloads.iter().enumerate() {
            for k in 0..scenarios.len() {
                let si = (k + rep) % scenarios.len();
                let sc = &scenarios[si];
                eprintln!(
                    "servelab compare: run {}/{} {workload:>5} {}",
                    rep + 1,
                    opts.repeat,
                    sc.name
                );
                let (url, schedule, c) = if *keepalive {
                    (
                        small_url(sc),
                        Schedule::Duration(Duration::from_secs_f64(opts.small_seconds)),
                        opts.small_concurrency,
                    )
                } else {
                    (
                        large_url(sc),
                        Schedule::Count(opts.large_requests),
                        opts.large_concurrency,
                    )
                };
                if cold {
                    let _ = drop_caches();
                }
                let before = sc.ours.as_ref().map(|p| p.scrape());
                let nfs_before = sc
                    .behind_rustnfs
                    .then(|| rustnfs.as_ref().map(|p| p.scrape()))
                    .flatten();
                let sampler = sc.pid().map(PeakSampler::start);
                let result = load(&url, schedule, c, *keepalive);
                let peak = sampler.map(PeakSampler::finish);
                let entry = acc.entry((wi, si)).or_default();
                match result {
                    Ok(r) => {
                        entry.runs.push(http_run(&r));
                        if let Some(total) = r.total() {
                            match &mut entry.merged_total {
                                Some(m) => {
                                    let _ = m.merge(&total);
                                }
                                None => entry.merged_total = Some(total),
                            }
                        }
                        if let Some(p) = peak {
                            entry.peak_rss = Some(entry.peak_rss.unwrap_or(0).max(p));
                        }
                    }
                    Err(e) => report.failures.push(Failure {
                        scenario: sc.name.clone(),
                        workload: workload.to_string(),
                        error: e,
                    }),
                }
                if let (Some(Ok(before)), Some(p)) = (before, &sc.ours)
                    && let Ok(delta) = p.scrape_since(&before)
                {
                    let _ = entry.phases.merge(&delta);
                }
                if let (Some(Ok(before)), Some(nfs)) = (nfs_before, &rustnfs)
                    && let Ok(delta) = nfs.scrape_since(&before)
                {
                    let key = format!("HTTP {workload} via {}", sc.name);
                    let _ = nfs_phase_acc.entry(key).or_default().merge(&delta);
                }
            }
        }
    }
    for ((wi, si), a) in acc {
        let sc = &scenarios[si];
        let workload = workloads[wi].0;
        if a.runs.is_empty() {
            continue;
        }
        let rps: Vec<f64> = a.runs.iter().map(|r| r.requests_per_sec).collect();
        report.http.push(HttpRow {
            workload: workload.into(),
            scenario: sc.name.clone(),
            description: sc.description.clone(),
            median: HttpRun::median_of(&a.runs),
            rps_min: rps.iter().copied().fold(f64::INFINITY, f64::min),
            rps_max: rps.iter().copied().fold(0.0, f64::max),
            percentiles: a
                .merged_total
                .as_ref()
                .map(percentile_curve)
                .unwrap_or_default(),
            server_peak_rss_bytes: a.peak_rss,
            runs: a.runs,
        });
        for phase in ["meta", "read", "send", "total"] {
            if let Some(s) = combine_phase(&a.phases, phase) {
                report.server_phases.push(PhaseRow {
                    scenario: sc.name.clone(),
                    workload: workload.into(),
                    phase: phase.into(),
                    count: s.count(),
                    mean_ms: s.mean_seconds() * 1e3,
                    p50_ms: s.quantile_seconds(0.5) * 1e3,
                    p99_ms: s.quantile_seconds(0.99) * 1e3,
                });
            }
        }
    }
    // Keep rows in scenario order within each workload, B first.
    report.http.sort_by_key(|r| {
        (
            workloads.iter().position(|w| w.0 == r.workload),
            scenarios.iter().position(|s| s.name == r.scenario),
        )
    });
    drop(scenarios);

    // --- NFS level -------------------------------------------------------------------
    let mut nfs_targets: Vec<(String, String, String)> = Vec::new(); // (server, read url, meta url)
    if let Some(n) = &rustnfs {
        nfs_targets.push((
            "rustnfs".into(),
            format!("nfs://{}//{}", n.addr, info.large_file),
            format!("nfs://{}//{}", n.addr, scratch.name),
        ));
    }
    if let Some(g) = &ganesha {
        let q = format!("?mountport={}", g.extra_port.unwrap_or(0));
        nfs_targets.push((
            "ganesha".into(),
            format!("nfs://{}{}//{}{q}", g.addr, root_arg, info.large_file),
            format!("nfs://{}{}//{}{q}", g.addr, root_arg, scratch.name),
        ));
    }
    let mut nfs_acc: BTreeMap<(usize, usize), Vec<loadgen::Report>> = BTreeMap::new();
    let nfs_workloads = [
        ("read", NfsWorkload::Read),
        ("metadata", NfsWorkload::Metadata),
    ];
    for rep in 0..opts.repeat {
        for (wi, (wname, wl)) in nfs_workloads.iter().enumerate() {
            for k in 0..nfs_targets.len() {
                let ti = (k + rep) % nfs_targets.len();
                let (server, read_url, meta_url) = &nfs_targets[ti];
                eprintln!(
                    "servelab compare: run {}/{} nfs {wname:>8} {server}",
                    rep + 1,
                    opts.repeat
                );
                let url = if *wl == NfsWorkload::Read {
                    read_url
                } else {
                    meta_url
                };
                let nfs_before = (server == "rustnfs")
                    .then(|| rustnfs.as_ref().map(|p| p.scrape()))
                    .flatten();
                let result = nfs_load(url, *wl, opts.nfs_clients, opts.nfs_seconds);
                match result {
                    Ok(r) => nfs_acc.entry((wi, ti)).or_default().push(r),
                    Err(e) => report.failures.push(Failure {
                        scenario: server.clone(),
                        workload: format!("nfs {wname}"),
                        error: e,
                    }),
                }
                if let (Some(Ok(before)), Some(nfs)) = (nfs_before, &rustnfs)
                    && let Ok(delta) = nfs.scrape_since(&before)
                {
                    let _ = nfs_phase_acc
                        .entry(format!("NFS {wname}"))
                        .or_default()
                        .merge(&delta);
                }
            }
        }
    }
    for ((wi, ti), runs) in nfs_acc {
        let ops: Vec<f64> = runs.iter().map(|r| r.requests_per_sec()).collect();
        let mut merged = runs[0].clone();
        for r in &runs[1..] {
            let _ = merged.merge(r);
        }
        let total = merged.total();
        report.nfs.push(NfsRow {
            workload: nfs_workloads[wi].0.into(),
            server: nfs_targets[ti].0.clone(),
            clients: opts.nfs_clients,
            ops_per_sec: median(&mut ops.clone()),
            ops_min: ops.iter().copied().fold(f64::INFINITY, f64::min),
            ops_max: ops.iter().copied().fold(0.0, f64::max),
            bytes_per_sec: median(&mut runs.iter().map(|r| r.bytes_per_sec()).collect::<Vec<_>>()),
            mean_ms: total.as_ref().map_or(0.0, |s| s.mean_seconds() * 1e3),
            p99_ms: total
                .as_ref()
                .map_or(0.0, |s| s.quantile_seconds(0.99) * 1e3),
            failed: runs.iter().map(|r| r.failed()).sum(),
        });
    }
    for (workload, snap) in &nfs_phase_acc {
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
            report.nfs_procedures.push(ProcedureRow {
                workload: workload.clone(),
                procedure: procedure.into(),
                count: s.count(),
                mean_ms: s.mean_seconds() * 1e3,
                p99_ms: s.quantile_seconds(0.99) * 1e3,
                errors,
            });
        }
    }
    drop(rustnfs);
    drop(ganesha);

    // --- Network ceiling -------------------------------------------------------------
    match rt.block_on(start_tcp_sink()) {
        Ok((sink, stop)) => {
            let mut paths: Vec<(String, SocketAddr)> = vec![("loopback".into(), sink)];
            if let Some(spec) = opts.link {
                for s in [LinkSpec::unshaped(), spec] {
                    if let Ok(relay) =
                        rt.block_on(link::start("127.0.0.1:0".parse().unwrap(), sink, s))
                    {
                        paths.push((format!("loopback via relay ({s})"), relay.addr));
                        relays.push(relay);
                    }
                }
            }
            for (path, addr) in paths {
                let mut bits = Vec::new();
                for rep in 0..opts.repeat {
                    eprintln!(
                        "servelab compare: run {}/{} tcp {path}",
                        rep + 1,
                        opts.repeat
                    );
                    match load(
                        &format!("tcp://{addr}"),
                        Schedule::Duration(Duration::from_secs_f64(opts.tcp_seconds)),
                        1,
                        true,
                    ) {
                        Ok(r) => bits.push(r.bytes_per_sec() * 8.0),
                        Err(e) => report.failures.push(Failure {
                            scenario: path.clone(),
                            workload: "tcp".into(),
                            error: e,
                        }),
                    }
                }
                if !bits.is_empty() {
                    report.tcp.push(TcpRow {
                        path,
                        streams: 1,
                        bits_min: bits.iter().copied().fold(f64::INFINITY, f64::min),
                        bits_max: bits.iter().copied().fold(0.0, f64::max),
                        bits_per_sec: median(&mut bits),
                    });
                }
            }
            let _ = stop.send(());
        }
        Err(e) => report.failures.push(Failure {
            scenario: "tcp ceiling".into(),
            workload: "tcp".into(),
            error: e,
        }),
    }
    drop(relays);
    drop(scratch);

    write_outputs(&report, &out_dir)?;
    Ok((report, out_dir))
}

/// Writes `report.json`, `report.md` and the SVG plots into `dir`.
pub fn write_outputs(report: &Report, dir: &Path) -> Result<(), String> {
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("report.json"), json)
        .map_err(|e| format!("cannot write report.json: {e}"))?;
    std::fs::write(dir.join("report.md"), markdown::render(report))
        .map_err(|e| format!("cannot write report.md: {e}"))?;
    plots::write_all(report, dir)?;
    Ok(())
}

fn start_baseline(
    choice: &BaselineChoice,
    b: Baseline,
    report: &mut Report,
    start: impl FnOnce() -> Result<ExternalServer, String>,
) -> Option<ExternalServer> {
    if !choice.wants(b) {
        return None;
    }
    let label = match b {
        Baseline::Ganesha => "A (NFS: ganesha) and NFS-level ganesha".to_string(),
        other => other.name().to_string(),
    };
    if let Err(why) = b.detect() {
        report.skipped.push(Skipped {
            scenario: label,
            reason: why,
        });
        return None;
    }
    match start() {
        Ok(s) => Some(s),
        Err(e) if choice.explicit(b) => {
            report.failures.push(Failure {
                scenario: label,
                workload: "start".into(),
                error: e,
            });
            None
        }
        Err(e) => {
            report.skipped.push(Skipped {
                scenario: label,
                reason: format!("installed but did not start: {e}"),
            });
            None
        }
    }
}

/// `httpd` arguments for scenario A: the export and the NFS cache lifetime.
fn nfs_args(url: String, cache_ms: u64) -> Vec<String> {
    vec![
        "--nfs".into(),
        url,
        "--nfs-attr-ttl-ms".into(),
        cache_ms.to_string(),
    ]
}

/// One closed-loop HTTP or TCP run with the load generator.
fn load(
    url: &str,
    schedule: Schedule,
    concurrency: usize,
    keepalive: bool,
) -> Result<loadgen::Report, String> {
    let mut plan = LoadPlan::new(url, schedule, concurrency).map_err(|e| e.to_string())?;
    plan.options.keepalive = keepalive;
    plan.options.timeout = Duration::from_secs(30);
    let report = loadgen::run(plan).map_err(|e| e.to_string())?;
    if report.requests == 0 {
        return Err(report
            .first_error
            .clone()
            .unwrap_or_else(|| "no request completed".into()));
    }
    Ok(report)
}

fn nfs_load(
    url: &str,
    workload: NfsWorkload,
    clients: usize,
    seconds: f64,
) -> Result<loadgen::Report, String> {
    let mut plan = LoadPlan::new(
        url,
        Schedule::Duration(Duration::from_secs_f64(seconds)),
        clients,
    )
    .map_err(|e| e.to_string())?;
    plan.options.nfs_workload = workload;
    plan.options.nfs_files = 200;
    plan.options.timeout = Duration::from_secs(30);
    let report = loadgen::run(plan).map_err(|e| e.to_string())?;
    if report.requests == 0 || report.failed() == report.requests {
        return Err(report
            .first_error
            .clone()
            .unwrap_or_else(|| "no operation completed".into()));
    }
    Ok(report)
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
    }
}

fn percentile_curve(s: &Series) -> Vec<(f64, f64)> {
    [50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 100.0]
        .iter()
        .map(|p| (*p, s.quantile_seconds(p / 100.0) * 1e3))
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

async fn start_tcp_sink() -> Result<(SocketAddr, tokio::sync::oneshot::Sender<()>), String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot bind the TCP sink: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(loadgen::tcp::serve(listener, 128 * 1024, async move {
        let _ = rx.await;
    }));
    Ok((addr, tx))
}

/// `results/<date>-<host>`, or with `-2`, `-3`… when a run of the same day exists
/// (shared with `servelab bench`).
pub fn unique_run_dir(results: &Path) -> Result<PathBuf, String> {
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
            Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
        }
    }
    unreachable!()
}

/// A directory inside the export for the NFS metadata run, removed afterwards so a
/// user's own dataset is left as it was.
struct ScratchDir {
    path: PathBuf,
    name: String,
}

impl ScratchDir {
    fn create(root: &Path) -> Result<Self, String> {
        use std::os::unix::fs::PermissionsExt as _;
        let name = format!(".servelab-scratch-{}", std::process::id());
        let path = root.join(&name);
        std::fs::create_dir_all(&path)
            .and_then(|_| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)))
            .map_err(|e| {
                format!(
                    "cannot create {}: {e} (the NFS metadata run needs a writable dataset)",
                    path.display()
                )
            })?;
        Ok(ScratchDir { path, name })
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Drops the page cache (needs root and a writable /proc/sys).
fn drop_caches() -> Result<(), String> {
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| e.to_string())
}
