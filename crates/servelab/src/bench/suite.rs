//! The suite's orchestration: dataset → servers → warm-up and byte checks → for each
//! repeat, every case with servers and tools in a rotating order → idle memory → files.
//! A peer or tool that is missing is skipped and named in the summary; a measurement
//! that fails is a CSV row with its error, and the run goes on.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use lab::dataset::{self, DatasetSpec};
use lab::environment::Environment;
use lab::find_program;
use lab::peers::{self, Baseline, ExternalServer};
use lab::process::Supervised;
use lab::sampler::{self, Sampler, Target};
use lab::tools::{self, Measured};
use loadgen::{NfsWorkload, Schedule};

use super::BenchOptions;
use super::names::*;
use super::summary::{self, Row, Skip};
use crate::measure::Load;
use crate::ours::ServerProcess;

/// The parts of the suite `--groups` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Http,
    Nfs,
    Loadgen,
    Memory,
}

impl Group {
    pub fn parse(s: &str) -> Result<Group, String> {
        match s.trim() {
            "http" => Ok(Group::Http),
            "nfs" => Ok(Group::Nfs),
            "loadgen" | "tools" => Ok(Group::Loadgen),
            "memory" => Ok(Group::Memory),
            other => Err(format!(
                "unknown group `{other}` (use http, nfs, loadgen, memory)"
            )),
        }
    }
}

/// Where the boot-like file set lives inside the export, and its shape.
const BOOT_DIR: &str = "boot";
const BOOT_SMALL: usize = 12;
const BOOT_LARGE: usize = 4;

/// READ size of the NFS runs: 1 MiB, the rtmax both servers advertise and the rsize a
/// Linux client negotiates with them.
const NFS_BLOCK: usize = 1 << 20;

/// One HTTP server under test.
struct HttpServer {
    name: &'static str,
    addr: SocketAddr,
    pid: u32,
}

/// One NFS server under test: how loadgen and nfs-cat reach its files.
struct NfsServer {
    name: &'static str,
    pid: u32,
    /// `nfs://host:port<export>//` — append a path inside the export.
    url_prefix: String,
    /// `?mountport=N` (Ganesha) or empty.
    query: String,
    /// nfs-cat's URL for a path inside the export.
    libnfs_prefix: String,
    libnfs_query: String,
}

impl NfsServer {
    fn url(&self, path: &str) -> String {
        format!("{}{path}{}", self.url_prefix, self.query)
    }
    fn libnfs_url(&self, path: &str) -> String {
        format!("{}{path}{}", self.libnfs_prefix, self.libnfs_query)
    }
}

/// An HTTP case of the matrix.
#[derive(Debug, Clone, Copy)]
struct HttpCase {
    large: bool,
    keepalive: bool,
    concurrency: usize,
}

impl HttpCase {
    /// How long to measure: 100 clients each fetching 10 MiB keep ~1 GiB in flight, and
    /// both wrk and loadgen drop requests unfinished at the end, so that case runs 3×
    /// longer than the others to complete several rounds.
    fn seconds(&self, base: f64) -> f64 {
        if self.large && self.concurrency >= 100 {
            base * 3.0
        } else {
            base
        }
    }

    fn label(&self) -> String {
        format!(
            "{} {} c={}",
            if self.large { "10MiB" } else { "4KiB" },
            if self.keepalive {
                "keep-alive"
            } else {
                "close"
            },
            self.concurrency
        )
    }
}

/// An NFS case of the matrix.
#[derive(Debug, Clone, Copy, PartialEq)]
enum NfsCase {
    SeqRead(usize),
    Metadata(usize),
    BootSet,
}

impl NfsCase {
    fn label(&self) -> String {
        match self {
            NfsCase::SeqRead(c) => format!("seq read 10MiB c={c}"),
            NfsCase::Metadata(c) => format!("metadata c={c}"),
            NfsCase::BootSet => format!("boot set c={}", BOOT_SMALL + BOOT_LARGE),
        }
    }
    fn clients(&self) -> usize {
        match self {
            NfsCase::SeqRead(c) | NfsCase::Metadata(c) => *c,
            NfsCase::BootSet => BOOT_SMALL + BOOT_LARGE,
        }
    }
}

/// Runs the suite and writes `results.csv`, `setup.md` and `summary.md`; returns the
/// directory.
pub fn run(opts: &BenchOptions) -> anyhow::Result<PathBuf> {
    let out = match &opts.out {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            if d.join("results.csv").exists() {
                bail!("{} already holds a run", d.display());
            }
            d.clone()
        }
        None => crate::compare::run::unique_run_dir(&opts.results)?,
    };
    let log_dir = out.join("logs");
    std::fs::create_dir_all(&log_dir)
        .map_err(|e| anyhow!("cannot create {}: {e}", log_dir.display()))?;
    eprintln!("servelab bench: writing to {}", out.display());
    let load_before = loadavg();
    let started = Instant::now();
    let env = Environment::capture(
        "warm: every file is read once before measuring (the dataset lives in a fresh temporary directory, so it is in the page cache)".into(),
    );

    let tmp = tempfile::Builder::new()
        .prefix("servelab-bench-")
        .tempdir()
        .map_err(|e| anyhow!("cannot create a temporary directory: {e}"))?;
    let root = tmp.path().join("www");
    let info = dataset::generate(
        &root,
        DatasetSpec {
            small_set_files: 16,
            ..DatasetSpec::default()
        },
    )
    .map_err(|e| anyhow!("cannot generate the dataset: {e}"))?;
    write_boot_set(&root).map_err(|e| anyhow!("cannot write the boot file set: {e}"))?;
    for s in [RUSTNFS, GANESHA] {
        let d = root.join(format!("scratch-{s}"));
        std::fs::create_dir_all(&d).map_err(|e| anyhow!("cannot create {}: {e}", d.display()))?;
        use std::os::unix::fs::PermissionsExt as _;
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777));
    }
    let root_s = root.display().to_string();

    let mut rows: Vec<Row> = Vec::new();
    let mut skipped: Vec<Skip> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let wants = |g: Group| opts.groups.contains(&g);

    // --- servers -----------------------------------------------------------------------
    let rustnfs = ServerProcess::start(
        RUSTNFS,
        "rustnfs",
        &["--export".into(), root_s.clone()],
        &log_dir,
    )?;
    let idle_rustnfs = settle_rss(rustnfs.pid());
    let httpd_local = ServerProcess::start(
        HTTPD_LOCAL,
        "httpd",
        &["--root".into(), root_s.clone()],
        &log_dir,
    )?;
    let httpd_nfs = ServerProcess::start(
        HTTPD_NFS,
        "httpd",
        &["--nfs".into(), format!("nfs://{}/", rustnfs.addr)],
        &log_dir,
    )?;
    let idle_httpd = settle_rss(httpd_local.pid());
    let idle_httpd_nfs = settle_rss(httpd_nfs.pid());
    let mut start_peer =
        |b: Baseline, f: &dyn Fn() -> lab::Result<ExternalServer>| -> Option<ExternalServer> {
            if let Err(why) = b.detect() {
                skipped.push(Skip::new(b.name(), why));
                return None;
            }
            match f() {
                Ok(s) => Some(s),
                Err(e) => {
                    skipped.push(Skip::new(
                        b.name(),
                        format!("installed but did not start: {e}"),
                    ));
                    None
                }
            }
        };
    let nginx = start_peer(Baseline::Nginx, &|| peers::start_nginx(&root));
    let apache = if wants(Group::Http) {
        start_peer(Baseline::Apache, &|| peers::start_apache(&root))
    } else {
        None
    };
    let ganesha = if wants(Group::Nfs) {
        start_peer(Baseline::Ganesha, &|| peers::start_ganesha(&root))
    } else {
        None
    };

    let mut http_servers = vec![
        HttpServer {
            name: HTTPD_LOCAL,
            addr: httpd_local.addr,
            pid: httpd_local.pid(),
        },
        HttpServer {
            name: HTTPD_NFS,
            addr: httpd_nfs.addr,
            pid: httpd_nfs.pid(),
        },
    ];
    if let Some(n) = &nginx {
        http_servers.push(HttpServer {
            name: NGINX,
            addr: n.addr,
            pid: n.pid(),
        });
    }
    if let Some(a) = &apache {
        http_servers.push(HttpServer {
            name: APACHE,
            addr: a.addr,
            pid: a.pid(),
        });
    }
    let mut nfs_servers = vec![NfsServer {
        name: RUSTNFS,
        pid: rustnfs.pid(),
        url_prefix: format!("nfs://{}//", rustnfs.addr),
        query: String::new(),
        libnfs_prefix: "nfs://127.0.0.1//".to_string(),
        libnfs_query: format!(
            "?version=3&nfsport={p}&mountport={p}",
            p = rustnfs.addr.port()
        ),
    }];
    if let Some(g) = &ganesha {
        let mnt = g.extra_port.unwrap_or(0);
        nfs_servers.push(NfsServer {
            name: GANESHA,
            pid: g.pid(),
            url_prefix: format!("nfs://{}{root_s}//", g.addr),
            query: format!("?mountport={mnt}"),
            libnfs_prefix: format!("nfs://127.0.0.1{root_s}/"),
            libnfs_query: format!("?version=3&nfsport={}&mountport={mnt}", g.addr.port()),
        });
    }

    // --- tools -------------------------------------------------------------------------
    let has = |t: &str| find_program(t).is_some();
    let mut http_tools: Vec<&'static str> = vec![LOAD];
    if has("wrk") {
        http_tools.push(WRK);
    } else {
        skipped.push(Skip::new(WRK, "wrk is not installed (apt-get install wrk)"));
    }
    let has_ab = has("ab");
    if !has_ab && wants(Group::Loadgen) {
        skipped.push(Skip::new(
            AB,
            "ab is not installed (apt-get install apache2-utils)",
        ));
    }
    let has_iperf3 = has("iperf3");
    if !has_iperf3 && wants(Group::Loadgen) {
        skipped.push(Skip::new(IPERF3, "iperf3 is not installed"));
    }
    let has_nfs_cat = has("nfs-cat");
    if !has_nfs_cat && wants(Group::Nfs) {
        skipped.push(Skip::new(
            NFS_CAT,
            "nfs-cat is not installed (libnfs-utils)",
        ));
    }

    // --- same bytes + warm-up ----------------------------------------------------------
    for file in [&info.large_file, &info.small_file] {
        let on_disk =
            std::fs::read(root.join(file)).map_err(|e| anyhow!("cannot read {file}: {e}"))?;
        for s in &http_servers {
            match lab::http::get(s.addr, &format!("/{file}"), Duration::from_secs(30)) {
                Ok((200, body)) if body == on_disk => {}
                Ok((status, body)) => notes.push(format!(
                    "{}: GET /{file} answered {status} with {} bytes that differ from the file",
                    s.name,
                    body.len()
                )),
                Err(e) => notes.push(format!("{}: GET /{file} failed: {e}", s.name)),
            }
        }
    }
    for s in &nfs_servers {
        let mut warm = vec![dataset::LARGE_FILE.to_string()];
        warm.extend((0..BOOT_LARGE).map(|i| format!("{BOOT_DIR}/l{i}.bin")));
        for f in warm {
            // Each 10 MiB file read twice in 1 MiB READs: warm page cache and connections;
            // more only made the quick suite slow on a busy machine.
            let _ = nfs_load(&s.url(&f), NfsWorkload::Read, 1, Schedule::Count(20));
        }
    }

    // --- the matrix --------------------------------------------------------------------
    // Quick: two connections on the large file, so a debug build completes requests
    // within its short measurements.
    let http_cases: Vec<HttpCase> = if opts.quick {
        vec![
            HttpCase {
                large: false,
                keepalive: true,
                concurrency: 10,
            },
            HttpCase {
                large: false,
                keepalive: false,
                concurrency: 10,
            },
            HttpCase {
                large: true,
                keepalive: true,
                concurrency: 2,
            },
        ]
    } else {
        let mut v = Vec::new();
        for large in [false, true] {
            for keepalive in [true, false] {
                for concurrency in [10, 100] {
                    v.push(HttpCase {
                        large,
                        keepalive,
                        concurrency,
                    });
                }
            }
        }
        v
    };
    let nfs_cases: Vec<NfsCase> = if opts.quick {
        vec![NfsCase::SeqRead(1), NfsCase::Metadata(1), NfsCase::BootSet]
    } else {
        vec![
            NfsCase::SeqRead(1),
            NfsCase::SeqRead(16),
            NfsCase::Metadata(1),
            NfsCase::Metadata(16),
            NfsCase::BootSet,
        ]
    };
    let lg_concurrency: Vec<usize> = if opts.quick { vec![10] } else { vec![10, 100] };
    let secs = opts.seconds;
    let small_path = format!("/{}", info.small_file);
    let large_path = format!("/{}", info.large_file);

    for rep in 0..opts.repeat {
        let rep1 = rep + 1;
        if wants(Group::Http) {
            for case in &http_cases {
                let label = case.label();
                for k in 0..http_servers.len() {
                    let s = &http_servers[(k + rep) % http_servers.len()];
                    for t in 0..http_tools.len() {
                        let tool = http_tools[(t + rep + k) % http_tools.len()];
                        eprintln!(
                            "servelab bench: {rep1}/{} http {label:<22} {:<12} {tool}",
                            opts.repeat, s.name
                        );
                        let url = format!(
                            "http://{}{}",
                            s.addr,
                            if case.large { &large_path } else { &small_path }
                        );
                        let sampler = Sampler::start(Target::Tree(s.pid));
                        let d = case.seconds(secs);
                        let result = match tool {
                            WRK => tools::wrk(&url, case.concurrency, d, case.keepalive)
                                .map_err(|e| e.to_string()),
                            _ => http_load(&url, case.concurrency, d, case.keepalive),
                        };
                        let peak = sampler.finish().peak_rss_bytes;
                        rows.push(Row::new(
                            rep1,
                            "http",
                            &label,
                            s.name,
                            tool,
                            case.concurrency,
                            result,
                            Some(peak),
                        ));
                    }
                }
            }
        }
        if wants(Group::Nfs) {
            for case in &nfs_cases {
                let label = case.label();
                for k in 0..nfs_servers.len() {
                    let s = &nfs_servers[(k + rep) % nfs_servers.len()];
                    eprintln!(
                        "servelab bench: {rep1}/{} nfs  {label:<22} {:<12} {LOAD}",
                        opts.repeat, s.name
                    );
                    let sampler = Sampler::start(Target::Tree(s.pid));
                    let d = Schedule::Duration(Duration::from_secs_f64(secs));
                    let result = match case {
                        NfsCase::SeqRead(c) => {
                            nfs_load(&s.url("testfile.bin"), NfsWorkload::Read, *c, d)
                        }
                        NfsCase::Metadata(c) => nfs_load(
                            &s.url(&format!("scratch-{}", s.name)),
                            NfsWorkload::Metadata,
                            *c,
                            d,
                        ),
                        NfsCase::BootSet => boot_set(s, secs),
                    };
                    let peak = sampler.finish().peak_rss_bytes;
                    rows.push(Row::new(
                        rep1,
                        "nfs",
                        &label,
                        s.name,
                        LOAD,
                        case.clients(),
                        result,
                        Some(peak),
                    ));
                }
            }
            if has_nfs_cat {
                for k in 0..nfs_servers.len() {
                    let s = &nfs_servers[(k + rep) % nfs_servers.len()];
                    eprintln!(
                        "servelab bench: {rep1}/{} nfs  seq read 10MiB c=1       {:<12} {NFS_CAT}",
                        opts.repeat, s.name
                    );
                    let sampler = Sampler::start(Target::Tree(s.pid));
                    let result = nfs_cat(&s.libnfs_url("testfile.bin"), info.large_bytes);
                    let peak = sampler.finish().peak_rss_bytes;
                    rows.push(Row::new(
                        rep1,
                        "nfs",
                        &NfsCase::SeqRead(1).label(),
                        s.name,
                        NFS_CAT,
                        1,
                        result,
                        Some(peak),
                    ));
                }
            }
        }
        if wants(Group::Loadgen) {
            match &nginx {
                None => {}
                Some(n) => {
                    let url = format!("http://{}{small_path}", n.addr);
                    let mut lg_tools = vec![LOAD];
                    if http_tools.contains(&WRK) {
                        lg_tools.push(WRK);
                    }
                    if has_ab {
                        lg_tools.push(AB);
                    }
                    for &c in &lg_concurrency {
                        let label = format!("nginx 4KiB keep-alive c={c}");
                        for t in 0..lg_tools.len() {
                            let tool = lg_tools[(t + rep) % lg_tools.len()];
                            eprintln!(
                                "servelab bench: {rep1}/{} load {label:<22} {tool}",
                                opts.repeat
                            );
                            let result = match tool {
                                WRK => tools::wrk(&url, c, secs, true).map_err(|e| e.to_string()),
                                AB => tools::ab(&url, c, secs, true).map_err(|e| e.to_string()),
                                _ => http_load(&url, c, secs, true),
                            };
                            rows.push(Row::new(
                                rep1, "loadgen", &label, NGINX, tool, c, result, None,
                            ));
                        }
                    }
                }
            }
            let mut tcp_tools = vec![LOAD];
            if has_iperf3 {
                tcp_tools.push(IPERF3);
            }
            for t in 0..tcp_tools.len() {
                let tool = tcp_tools[(t + rep) % tcp_tools.len()];
                eprintln!(
                    "servelab bench: {rep1}/{} tcp  1 stream               {tool}",
                    opts.repeat
                );
                let result = match tool {
                    IPERF3 => tools::iperf3(secs).map_err(|e| e.to_string()),
                    _ => tcp_load(secs, &log_dir),
                };
                let server = if tool == IPERF3 {
                    "iperf3 -s"
                } else {
                    "servelab tcp-server"
                };
                rows.push(Row::new(
                    rep1,
                    "tcp",
                    "loopback 1 stream",
                    server,
                    tool,
                    1,
                    result,
                    None,
                ));
            }
        }
    }
    if wants(Group::Loadgen) && nginx.is_none() {
        skipped.push(Skip::new(
            "load generators on nginx",
            "nginx is not available",
        ));
    }

    // --- memory ------------------------------------------------------------------------
    if wants(Group::Memory) {
        for (name, pid, before) in [
            (RUSTNFS, rustnfs.pid(), idle_rustnfs),
            (HTTPD_LOCAL, httpd_local.pid(), idle_httpd),
            (HTTPD_NFS, httpd_nfs.pid(), idle_httpd_nfs),
        ] {
            let after = settle_rss(pid);
            for (case, v) in [("idle at start", before), ("idle after the run", after)] {
                let mut row = Row::new(
                    rep_none(),
                    "memory",
                    case,
                    name,
                    "VmRSS",
                    0,
                    Ok(Measured::default()),
                    Some(v),
                );
                row.error = None;
                rows.push(row);
            }
        }
    }

    let load_after = loadavg();
    drop(nginx);
    drop(apache);
    drop(ganesha);
    drop(httpd_nfs);
    drop(httpd_local);
    drop(rustnfs);

    let setup = summary::setup_note(
        &env,
        opts,
        &info,
        &load_before,
        &load_after,
        started.elapsed(),
        &notes,
    );
    std::fs::write(out.join("setup.md"), setup).context("cannot write setup.md")?;
    std::fs::write(out.join("results.csv"), summary::csv(&rows))
        .context("cannot write results.csv")?;
    std::fs::write(
        out.join("summary.md"),
        summary::render(&rows, &skipped, &env, opts, &load_before, &load_after),
    )
    .map_err(|e| anyhow!("cannot write summary.md: {e}"))?;
    Ok(out)
}

/// Memory rows are not part of a repeat.
fn rep_none() -> usize {
    0
}

/// One closed-loop HTTP run with the load generator (loadgen's defaults: one thread per
/// core, like `wrk -t`), summarised like a tool's output.
fn http_load(
    url: &str,
    concurrency: usize,
    seconds: f64,
    keepalive: bool,
) -> Result<Measured, String> {
    Load::for_seconds(url, seconds, concurrency)
        .keepalive(keepalive)
        .run()
        .map(|r| to_measured(&r))
        .map_err(|e| format!("{e:#}"))
}

fn to_measured(r: &loadgen::Report) -> Measured {
    let total = r.total();
    Measured {
        seconds: r.duration.as_secs_f64(),
        requests: r.requests,
        errors: r.failed() + r.non_2xx,
        per_sec: r.requests_per_sec(),
        bytes_per_sec: r.bytes_per_sec(),
        p50_ms: total.as_ref().map(|s| s.quantile_seconds(0.5) * 1e3),
        p99_ms: total.as_ref().map(|s| s.quantile_seconds(0.99) * 1e3),
        client_cpu_s: None,
    }
}

fn nfs_load(
    url: &str,
    workload: NfsWorkload,
    clients: usize,
    schedule: Schedule,
) -> Result<Measured, String> {
    Load::new(url, schedule, clients)
        .nfs(workload)
        .block_size(NFS_BLOCK)
        .run()
        .map(|r| to_measured(&r))
        .map_err(|e| format!("{e:#}"))
}

/// 16 clients at once, each with its own connection and thread: 12 read one small file
/// each (1–64 KiB, boot's many small files), 4 read one 10 MiB file each (the few large
/// ones). Operations and bytes add up across clients.
fn boot_set(s: &NfsServer, seconds: f64) -> Result<Measured, String> {
    let mut files: Vec<String> = (0..BOOT_SMALL)
        .map(|i| format!("{BOOT_DIR}/s{i:02}.bin"))
        .collect();
    files.extend((0..BOOT_LARGE).map(|i| format!("{BOOT_DIR}/l{i}.bin")));
    let results: Vec<Result<loadgen::Report, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .iter()
            .map(|f| {
                let url = s.url(f);
                scope.spawn(move || {
                    Load::for_seconds(url, seconds, 1)
                        .threads(1)
                        .block_size(NFS_BLOCK)
                        .run()
                        .map_err(|e| format!("{e:#}"))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a client thread panicked".into()))
            })
            .collect()
    });
    let mut m = Measured::default();
    let mut merged: Option<loadgen::Report> = None;
    for r in results {
        let r = r?;
        if r.requests == 0 {
            return Err(r
                .first_error
                .unwrap_or_else(|| "a client completed no read".into()));
        }
        m.seconds = m.seconds.max(r.duration.as_secs_f64());
        m.requests += r.requests;
        m.errors += r.failed();
        m.per_sec += r.requests_per_sec();
        m.bytes_per_sec += r.bytes_per_sec();
        match &mut merged {
            None => merged = Some(r),
            Some(acc) => {
                let _ = acc.merge(&r);
            }
        }
    }
    if let Some(total) = merged.as_ref().and_then(|r| r.total()) {
        m.p50_ms = Some(total.quantile_seconds(0.5) * 1e3);
        m.p99_ms = Some(total.quantile_seconds(0.99) * 1e3);
    }
    Ok(m)
}

/// `nfs-cat URL > /dev/null` five times in a row (one 10 MiB read takes ~20 ms, too short
/// to time alone on a busy machine), timed together; checks every byte count.
fn nfs_cat(url: &str, expect: u64) -> Result<Measured, String> {
    const TIMES: u32 = 5;
    let program = find_program("nfs-cat").ok_or("nfs-cat is not installed")?;
    let mut each = Vec::new();
    let t0 = Instant::now();
    for _ in 0..TIMES {
        let t = Instant::now();
        let out = Command::new(&program)
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .output()
            .map_err(|e| format!("cannot run nfs-cat: {e}"))?;
        each.push(t.elapsed().as_secs_f64() * 1e3);
        if !out.status.success() || out.stdout.len() as u64 != expect {
            return Err(format!(
                "nfs-cat {url}: {} ({} of {expect} bytes) {}",
                out.status,
                out.stdout.len(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    each.sort_by(|a, b| a.total_cmp(b));
    Ok(Measured {
        seconds: secs,
        requests: u64::from(TIMES),
        errors: 0,
        per_sec: f64::from(TIMES) / secs,
        bytes_per_sec: (expect * u64::from(TIMES)) as f64 / secs,
        p50_ms: Some(each[each.len() / 2]),
        p99_ms: each.last().copied(),
        client_cpu_s: None,
    })
}

/// `servelab load tcp://` (one stream, 128 KiB writes) against a `servelab tcp-server`
/// child process, like iperf3's client against `iperf3 -s`.
fn tcp_load(seconds: f64, log_dir: &Path) -> Result<Measured, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find servelab itself: {e}"))?;
    let port = lab::free_port().map_err(|e| e.to_string())?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let log_path = log_dir.join("tcp-server.log");
    let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.arg("tcp-server")
        .arg("--listen")
        .arg(addr.to_string())
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    let mut server = Supervised::spawn("servelab tcp-server", &mut cmd, Some(&log_path))
        .map_err(|e| e.to_string())?
        .with_grace(Duration::from_secs(2));
    server
        .wait_ready(&[addr], Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    Load::for_seconds(format!("tcp://{addr}"), seconds, 1)
        .block_size(128 * 1024)
        .run()
        .map(|r| to_measured(&r))
        .map_err(|e| format!("{e:#}"))
}

/// The boot-like set: 12 small files of 1–64 KiB and 4 large ones of 10 MiB.
fn write_boot_set(root: &Path) -> std::io::Result<()> {
    let dir = root.join(BOOT_DIR);
    std::fs::create_dir_all(&dir)?;
    let large = std::fs::read(root.join(dataset::LARGE_FILE))?;
    for i in 0..BOOT_SMALL {
        let len = 1024usize << (i % 7); // 1, 2, 4, … 64 KiB
        let start = (i * 7919) % (large.len() - len);
        std::fs::write(dir.join(format!("s{i:02}.bin")), &large[start..start + len])?;
    }
    for i in 0..BOOT_LARGE {
        let mut data = large.clone();
        data.rotate_left(i * 4096 + 1);
        std::fs::write(dir.join(format!("l{i}.bin")), data)?;
    }
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    for e in std::fs::read_dir(&dir)? {
        std::fs::set_permissions(e?.path(), std::fs::Permissions::from_mode(0o644))?;
    }
    Ok(())
}

/// Resident memory after a short quiet moment (so a burst just before does not count).
fn settle_rss(pid: u32) -> u64 {
    std::thread::sleep(Duration::from_millis(300));
    sampler::tree_rss_bytes(pid)
}

/// `/proc/loadavg`'s first three fields.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
