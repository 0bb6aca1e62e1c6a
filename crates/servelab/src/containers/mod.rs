//! `servelab compare --containers lxd,docker` and the scaling sweeps (`--cpus`,
//! `--clients`, `--workers`): the same static httpd on the host, in an LXD instance and
//! in a Docker container, for scenarios A (NFS from rustnfs in Docker) and B (local
//! files), with Δ% against the host as the original report's tables, sysbench on each,
//! memory per container, and throughput/p99 against CPU limit and client count.
//!
//! # Layout
//! - [`lxd`]: lxc/lxd-deploy.sh (embedded) brings the instance up and down.
//! - [`docker`]: the containers of the FROM-scratch images, addressed by their own IPs.
//! - [`cgroup`]: the host's CPU limit (a CFS quota in a cgroup of ours).
//! - [`sysbench`]: the host's sysbench bundled with its libraries into each container.
//! - [`report`]: the results as data, markdown and SVG.

pub mod cgroup;
pub mod docker;
pub mod fs;
pub mod lxd;
pub mod report;
pub mod sysbench;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use loadgen::{LoadPlan, Schedule};

use lab::dataset::{self, DatasetInfo, DatasetSpec};
use lab::sampler::tree_rss_bytes;
use report::*;

/// The options of the container comparison and the sweeps (flattened into `compare`).
#[derive(Debug, Args, Clone, Default)]
pub struct ContainerArgs {
    /// Also run httpd in containers against the host: `lxd`, `docker` or `lxd,docker`
    /// (the same static httpd everywhere; A reads rustnfs in Docker).
    #[arg(long, value_name = "LIST")]
    pub containers: Option<String>,
    /// CPU limits to sweep, e.g. `1,2`: host processes get a cgroup CFS quota, LXD
    /// `limits.cpu` (N pinned CPUs), Docker `docker update --cpus N`.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Client counts to sweep (small-file workload, keep-alive), e.g. `1,10,100`.
    #[arg(long, value_name = "LIST")]
    pub clients: Option<String>,
    /// httpd `--workers` values to sweep on the host, e.g. `1,2,4`.
    #[arg(long, value_name = "LIST")]
    pub workers: Option<String>,
    /// Seconds of each sweep point.
    #[arg(long, default_value_t = 1.0)]
    pub scale_seconds: f64,
    /// Seconds of each sysbench run where sysbench is installed; 0 leaves it out.
    #[arg(long, default_value_t = 2)]
    pub sysbench_seconds: u32,
    /// Tag of docker/build.sh's images (rustnfs, httpd) for the Docker column.
    #[arg(long, default_value = "latest")]
    pub image_tag: String,
    /// Run only the container comparison and sweeps, not compare's main tables.
    #[arg(long)]
    pub containers_only: bool,
    /// File-system workloads (sequential read, metadata mix) on the host, in a Docker
    /// container through a bind mount, and over NFS: seconds per run (0 = off).
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub fs: f64,
}

/// The workload sizes compare's own options give (the same for every column).
#[derive(Debug, Clone)]
pub struct Workloads {
    pub dataset: Option<PathBuf>,
    pub spec: DatasetSpec,
    pub repeat: usize,
    pub large_requests: u64,
    pub large_concurrency: usize,
    pub small_seconds: f64,
    pub small_concurrency: usize,
}

impl Workloads {
    pub fn of(o: &crate::compare::options::CompareOptions) -> Workloads {
        Workloads {
            dataset: o.dataset.clone(),
            spec: o.dataset_spec,
            repeat: o.repeat,
            large_requests: o.large_requests,
            large_concurrency: o.large_concurrency,
            small_seconds: o.small_seconds,
            small_concurrency: o.small_concurrency,
        }
    }
}

impl ContainerArgs {
    /// True when any part of this module was asked for.
    pub fn wanted(&self) -> bool {
        self.containers.is_some()
            || self.cpus.is_some()
            || self.clients.is_some()
            || self.workers.is_some()
            || self.fs > 0.0
    }

    /// Checks every list once; returns (engines, cpus, clients, workers).
    pub fn parse(&self) -> Result<Plan, String> {
        let list = |name: &str, v: &Option<String>, max: u64| -> Result<Vec<u64>, String> {
            let Some(v) = v else { return Ok(Vec::new()) };
            v.split(',')
                .map(|x| match x.trim().parse::<u64>() {
                    Ok(n) if n >= 1 && n <= max => Ok(n),
                    _ => Err(format!("--{name}: '{x}' is not a number from 1 to {max}")),
                })
                .collect()
        };
        let mut engines = Vec::new();
        if let Some(c) = &self.containers {
            for e in c.split(',') {
                match e.trim() {
                    "lxd" => engines.push(Engine::Lxd),
                    "docker" => engines.push(Engine::Docker),
                    other => {
                        return Err(format!(
                            "--containers: unknown '{other}' (expected lxd, docker)"
                        ));
                    }
                }
            }
        }
        engines.dedup();
        if !(self.fs.is_finite() && (0.0..=600.0).contains(&self.fs)) {
            return Err("--fs must be between 0 and 600 seconds".into());
        }
        if !(self.scale_seconds.is_finite() && self.scale_seconds > 0.0) {
            return Err("--scale-seconds must be above 0".into());
        }
        Ok(Plan {
            engines,
            cpus: list("cpus", &self.cpus, 1024)?
                .into_iter()
                .map(|n| n as u32)
                .collect(),
            clients: list("clients", &self.clients, 10_000)?
                .into_iter()
                .map(|n| n as usize)
                .collect(),
            workers: list("workers", &self.workers, 1024)?,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Engine {
    Lxd,
    Docker,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub engines: Vec<Engine>,
    pub cpus: Vec<u32>,
    pub clients: Vec<usize>,
    pub workers: Vec<u64>,
}

/// An executable on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// True when the ELF file has no program interpreter (statically linked).
fn is_static_elf(path: &Path) -> bool {
    let Ok(b) = std::fs::read(path) else {
        return false;
    };
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).all(|i| {
        let o = phoff + i * size;
        o + 4 <= b.len() && u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) != 3
    })
}

/// The static build of `name` (docker/build.sh's): `SERVELAB_STATIC_DIR`, else
/// `<target>/static/*/release-static/` next to this executable's target directory.
pub fn static_bin(name: &str) -> Result<PathBuf, String> {
    let mut candidates = Vec::new();
    if let Some(d) = std::env::var_os("SERVELAB_STATIC_DIR") {
        candidates.push(PathBuf::from(d).join(name));
    }
    if let Ok(exe) = std::env::current_exe() {
        for up in exe.ancestors().skip(1).take(3) {
            if let Ok(rd) = std::fs::read_dir(up.join("static")) {
                for e in rd.flatten() {
                    candidates.push(e.path().join("release-static").join(name));
                }
            }
        }
    }
    candidates
        .into_iter()
        .find(|p| is_static_elf(p))
        .ok_or_else(|| {
            format!(
                "no static {name} (run `BINS_ONLY=1 docker/build.sh {name}` or set \
                 SERVELAB_STATIC_DIR): containers run the same static binary as the host"
            )
        })
}

/// A static httpd on the host, killed on drop.
struct HostHttpd {
    child: Child,
    url: String,
}

impl HostHttpd {
    fn start(bin: &Path, args: &[String]) -> Result<HostHttpd, String> {
        let port = lab::free_port().map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        lab::process::register(child.id());
        let h = HostHttpd {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        wait_http(&h.url, Duration::from_secs(15))?;
        Ok(h)
    }
}

impl Drop for HostHttpd {
    fn drop(&mut self) {
        lab::process::unregister(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_http(url: &str, limit: Duration) -> Result<(), String> {
    let addr = url.trim_start_matches("http://").to_string();
    let start = Instant::now();
    while start.elapsed() < limit {
        if TcpStream::connect(&addr).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("{url} did not accept within {limit:?}"))
}

/// One load run; an error when nothing completed or anything failed.
fn load(url: &str, schedule: Schedule, c: usize, keepalive: bool) -> Result<Point, String> {
    let mut plan = LoadPlan::new(url, schedule, c).map_err(|e| e.to_string())?;
    plan.options.keepalive = keepalive;
    plan.options.timeout = Duration::from_secs(30);
    plan.options.progress = false;
    let r = loadgen::run(plan).map_err(|e| e.to_string())?;
    if r.requests == 0 || r.failed() > 0 || r.non_2xx > 0 {
        return Err(format!(
            "{url}: {} requests, {} failed, {} non-2xx{}",
            r.requests,
            r.failed(),
            r.non_2xx,
            r.first_error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ));
    }
    let total = r.total().unwrap_or_default();
    Ok(Point {
        requests_per_sec: r.requests_per_sec(),
        mbytes_per_sec: r.bytes_per_sec() / 1e6,
        p50_ms: total.quantile_seconds(0.5) * 1e3,
        p99_ms: total.quantile_seconds(0.99) * 1e3,
    })
}

/// Where httpd runs and how to reach its two scenarios.
struct Target {
    place: String,
    url_a: Option<String>,
    url_b: String,
}

/// Runs the container comparison and the sweeps; writes containers.md/.json and the
/// scaling plots into `out_dir` and returns the markdown.
pub fn run(args: &ContainerArgs, w: &Workloads, out_dir: &Path) -> Result<String, String> {
    let plan = args.parse()?;
    let mut rep = ContainerReport {
        loadavg_before: loadavg(),
        ..ContainerReport::default()
    };
    // The dataset: compare's (generated with the same seed) or --dataset.
    let tmp = tempfile::Builder::new()
        .prefix("sl-deploy-data-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let info: DatasetInfo = match &w.dataset {
        Some(d) => dataset::describe_existing(d).map_err(|e| format!("--dataset: {e}"))?,
        None => {
            let root = tmp.path().join("www");
            dataset::generate(&root, w.spec).map_err(|e| format!("dataset: {e}"))?
        }
    };
    // Readable by the containers' uid 65534 (tempfile creates 0700).
    make_world_readable(tmp.path());
    make_world_readable(&info.root);
    let data = info.root.clone();
    rep.large_file = format!("{} ({} bytes)", info.large_file, info.large_bytes);
    rep.small_file = format!("{} ({} bytes)", info.small_file, info.small_bytes);

    let httpd_bin = static_bin("httpd")?;
    rep.notes.push(format!(
        "the same static httpd ({}) on the host and in every container",
        httpd_bin.display()
    ));

    // rustnfs in Docker for scenario A (host and Docker columns).
    let tag = &args.image_tag;
    let images = [format!("rustnfs:{tag}"), format!("httpd:{tag}")];
    let image_refs: Vec<&str> = images.iter().map(String::as_str).collect();
    let docker_missing = docker::unavailable(&image_refs);
    let mut deployment = match &docker_missing {
        None => Some(docker::Deployment::start(&data, tag, true)?),
        Some(why) => {
            rep.skipped
                .push(format!("scenario A and the Docker column: {why}"));
            None
        }
    };
    let nfs_url = deployment
        .as_ref()
        .and_then(|d| d.nfs_ip.as_ref())
        .map(|ip| format!("nfs://{ip}/nfs-share"));
    if let Some(d) = &deployment {
        wait_tcp(&format!("{}:2049", d.nfs_ip.as_ref().unwrap()), 20)?;
    }
    let b_args = |extra: &[String]| -> Vec<String> {
        let mut a = vec!["--root".to_string(), data.display().to_string()];
        a.extend(extra.iter().cloned());
        a
    };

    // Host.
    let host_b = HostHttpd::start(&httpd_bin, &b_args(&[]))?;
    let host_a = match &nfs_url {
        Some(u) => Some(HostHttpd::start(&httpd_bin, &["--nfs".into(), u.clone()])?),
        None => None,
    };
    let mut targets = vec![Target {
        place: "host".into(),
        url_a: host_a.as_ref().map(|h| h.url.clone()),
        url_b: host_b.url.clone(),
    }];

    // LXD.
    let mut instance = None;
    if plan.engines.contains(&Engine::Lxd) {
        match lxd::unavailable() {
            Some(why) => rep.skipped.push(format!("LXD: {why}")),
            None => {
                let rustnfs_image = images[0].clone();
                // Without Docker the instance's scenario A reads a host rustnfs (not
                // compared: the host and Docker columns have no A then).
                let rustnfs_bin = static_bin("rustnfs").ok();
                let up = lxd::UpOptions {
                    data: &data,
                    httpd_bin: &httpd_bin,
                    rustnfs_bin: rustnfs_bin.as_deref(),
                    rustnfs_image: docker_missing.is_none().then_some(rustnfs_image.as_str()),
                    file: &info.large_file,
                };
                eprintln!("servelab compare: starting the LXD instance (lxc/lxd-deploy.sh up)");
                match lxd::Instance::up(&up) {
                    Ok(i) => {
                        rep.notes.push(format!(
                            "LXD instance {} ({}), limits.memory=1GB; its scenario A reads \
                             the script's own rustnfs container",
                            i.name, i.path
                        ));
                        targets.push(Target {
                            place: "LXD".into(),
                            url_a: i.path.ends_with("docker").then(|| i.url_a.clone()),
                            url_b: i.url_b.clone(),
                        });
                        instance = Some(i);
                    }
                    Err(e) => rep.skipped.push(format!("LXD: {e}")),
                }
            }
        }
    }

    // Docker.
    if plan.engines.contains(&Engine::Docker)
        && let Some(d) = deployment.as_mut()
    {
        let data_args = vec!["--root".to_string(), "/www".to_string()];
        let b = d.httpd("b", tag, &data, &data_args)?;
        let a = d.httpd("a", tag, &data, &["--nfs".into(), nfs_url.clone().unwrap()])?;
        for (_, u) in [&a, &b] {
            wait_http(u, Duration::from_secs(15))?;
        }
        targets.push(Target {
            place: "Docker".into(),
            url_a: Some(a.1.clone()),
            url_b: b.1.clone(),
        });
        d.httpd_a = Some(a);
        d.httpd_b = b;
    }

    // Same bytes everywhere before measuring.
    let want = std::fs::read(data.join(&info.large_file)).map_err(|e| e.to_string())?;
    for t in &targets {
        for (sc, url) in [("B", Some(&t.url_b)), ("A", t.url_a.as_ref())] {
            let Some(url) = url else { continue };
            let addr: std::net::SocketAddr = url
                .trim_start_matches("http://")
                .parse()
                .map_err(|e| format!("{url}: {e}"))?;
            match lab::http::get(
                addr,
                &format!("/{}", info.large_file),
                Duration::from_secs(60),
            ) {
                Ok((200, body)) if body == want => {}
                other => {
                    return Err(format!(
                        "{} scenario {sc} did not serve the file's bytes: {:?}",
                        t.place,
                        other.map(|(s, b)| (s, b.len()))
                    ));
                }
            }
        }
    }

    // Warm-up, then the original tables: every (place, scenario) in rotating order.
    let large = |url: &str| {
        load(
            &format!("{url}/{}", info.large_file),
            Schedule::Count(w.large_requests),
            w.large_concurrency,
            false,
        )
    };
    let small = |url: &str, c: usize, secs: f64| {
        load(
            &format!("{url}/{}", info.small_file),
            Schedule::Duration(Duration::from_secs_f64(secs)),
            c,
            true,
        )
    };
    let cells: Vec<(usize, &'static str, String)> = targets
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            let mut v = vec![(i, "B", t.url_b.clone())];
            if let Some(a) = &t.url_a {
                v.push((i, "A", a.clone()));
            }
            v
        })
        .collect();
    for (_, _, url) in &cells {
        let _ = load(
            &format!("{url}/{}", info.large_file),
            Schedule::Count(4),
            2,
            false,
        );
        let _ = small(url, 4, 0.3);
    }
    let mut host_peak = 0u64;
    for (workload, is_small) in [("large", false), ("small", true)] {
        let mut runs: Vec<Vec<Point>> = vec![Vec::new(); cells.len()];
        for round in 0..w.repeat {
            for k in 0..cells.len() {
                let ci = (k + round) % cells.len();
                let (ti, sc, url) = &cells[ci];
                eprintln!(
                    "servelab compare: containers {}/{} {workload:>5} {} {sc}",
                    round + 1,
                    w.repeat,
                    targets[*ti].place
                );
                let r = if is_small {
                    small(url, w.small_concurrency, w.small_seconds)
                } else {
                    large(url)
                };
                match r {
                    Ok(p) => runs[ci].push(p),
                    Err(e) => rep
                        .failures
                        .push(format!("{} {sc} {workload}: {e}", targets[*ti].place)),
                }
                host_peak = host_peak.max(host_rss(&host_a, &host_b));
            }
        }
        for (ci, (ti, sc, _)) in cells.iter().enumerate() {
            if let Some(m) = Point::median(&runs[ci]) {
                rep.rows.push(Row {
                    workload: workload.into(),
                    scenario: sc.to_string(),
                    place: targets[*ti].place.clone(),
                    runs: runs[ci].len(),
                    median: m,
                });
            }
        }
    }

    // Memory per container after the runs.
    rep.memory.push(MemoryRow {
        place: "host".into(),
        what: "httpd A + B processes (RSS)".into(),
        current: host_rss(&host_a, &host_b),
        peak: Some(host_peak),
        source: "/proc/PID/status VmRSS".into(),
    });
    if let Some(i) = &instance
        && let Ok((cur, peak)) = i.memory()
    {
        rep.memory.push(MemoryRow {
            place: "LXD".into(),
            what: format!("instance {} (init + httpd A + B)", i.name),
            current: cur,
            peak: Some(peak),
            source: "lxc info / instance state".into(),
        });
    }
    if let Some(d) = &deployment {
        let mut names: Vec<(String, &str)> = Vec::new();
        if let Some((n, _)) = &d.httpd_a {
            names.push((n.clone(), "httpd A container"));
        }
        if !d.httpd_b.0.is_empty() {
            names.push((d.httpd_b.0.clone(), "httpd B container"));
        }
        if let Some(n) = &d.rustnfs {
            names.push((n.clone(), "rustnfs container (scenario A's server)"));
        }
        for (n, what) in names {
            if let Some(cur) = docker::stats_memory(&n) {
                rep.memory.push(MemoryRow {
                    place: "Docker".into(),
                    what: what.into(),
                    current: cur,
                    peak: docker::cgroup_peak(&n),
                    source: "docker stats; cgroup peak".into(),
                });
            }
        }
    }

    // sysbench on the host and in each container.
    if args.sysbench_seconds > 0 {
        match which("sysbench") {
            None => rep.skipped.push("sysbench: not installed".into()),
            Some(_) => run_sysbench(
                args,
                w,
                &instance,
                deployment.is_some() && plan.engines.contains(&Engine::Docker),
                &mut rep,
            ),
        }
    }

    // Scaling: CPU limit × client count (small-file workload).
    if !plan.cpus.is_empty() || !plan.clients.is_empty() {
        let limit = if plan.cpus.is_empty() {
            None
        } else {
            match cgroup::CpuLimit::create() {
                Ok(l) => {
                    for h in [Some(&host_b), host_a.as_ref()].into_iter().flatten() {
                        l.add(h.child.id())?;
                    }
                    rep.notes.push(format!(
                        "CPU limits: host {}, LXD limits.cpu (pinned CPUs), Docker --cpus \
                         (CFS quota)",
                        l.kind
                    ));
                    Some(l)
                }
                Err(e) => {
                    rep.skipped.push(format!("host CPU limit: {e}"));
                    None
                }
            }
        };
        let cpus: Vec<Option<u32>> = if plan.cpus.is_empty() {
            vec![None]
        } else {
            plan.cpus.iter().map(|c| Some(*c)).collect()
        };
        let clients = if plan.clients.is_empty() {
            vec![w.small_concurrency]
        } else {
            plan.clients.clone()
        };
        for cpu in &cpus {
            if let Some(l) = &limit {
                l.set(*cpu)?;
            }
            if let Some(i) = &instance {
                i.set_cpus(*cpu)?;
            }
            if let Some(d) = &deployment
                && plan.engines.contains(&Engine::Docker)
            {
                d.set_cpus(*cpu)?;
            }
            for c in &clients {
                for (ti, sc, url) in &cells {
                    let mut pts = Vec::new();
                    for _ in 0..w.repeat.min(3) {
                        match small(url, *c, args.scale_seconds) {
                            Ok(p) => pts.push(p),
                            Err(e) => rep.failures.push(format!(
                                "scaling {} {sc} cpus={cpu:?} c={c}: {e}",
                                targets[*ti].place
                            )),
                        }
                    }
                    if let Some(m) = Point::median(&pts) {
                        rep.scaling.push(ScaleRow {
                            scenario: sc.to_string(),
                            place: targets[*ti].place.clone(),
                            cpus: *cpu,
                            clients: *c,
                            median: m,
                        });
                    }
                }
            }
        }
        if let Some(l) = &limit {
            l.set(None)?;
        }
        if let Some(i) = &instance {
            i.set_cpus(None)?;
        }
        if let Some(d) = &deployment
            && plan.engines.contains(&Engine::Docker)
        {
            d.set_cpus(None)?;
        }
    }

    // httpd --workers on the host.
    for workers in &plan.workers {
        let extra = vec!["--workers".to_string(), workers.to_string()];
        let mut scenarios = vec![("B", b_args(&extra))];
        if let Some(u) = &nfs_url {
            let mut a = vec!["--nfs".to_string(), u.clone()];
            a.extend(extra.iter().cloned());
            scenarios.push(("A", a));
        }
        for (sc, a) in scenarios {
            let h = HostHttpd::start(&httpd_bin, &a)?;
            let mut pts = Vec::new();
            for _ in 0..w.repeat.min(3) {
                match small(&h.url, w.small_concurrency, args.scale_seconds) {
                    Ok(p) => pts.push(p),
                    Err(e) => rep.failures.push(format!("workers={workers} {sc}: {e}")),
                }
            }
            if let Some(m) = Point::median(&pts) {
                rep.workers.push(WorkersRow {
                    scenario: sc.into(),
                    workers: *workers,
                    clients: w.small_concurrency,
                    median: m,
                });
            }
        }
    }

    // File-system workloads: host, Docker bind mount, NFS.
    if args.fs > 0.0 {
        let image = format!("servelab:{tag}");
        let image = match docker::unavailable(&[&image]) {
            None => Some(image),
            Some(why) => {
                rep.skipped
                    .push(format!("file-system table, Docker column: {why}"));
                None
            }
        };
        fs::run(
            &data.join(&info.large_file),
            image.as_deref(),
            args.fs,
            w.repeat,
            &mut rep.fs,
            &mut rep.failures,
        )?;
    }

    rep.loadavg_after = loadavg();
    rep.settings = format!(
        "large: {} requests, {} concurrent, a new connection per request (as ab); small: \
         {:.1} s, {} connections, keep-alive; {} interleaved rounds, medians; sweep points \
         {:.1} s, median of {}",
        w.large_requests,
        w.large_concurrency,
        w.small_seconds,
        w.small_concurrency,
        w.repeat,
        args.scale_seconds,
        w.repeat.min(3)
    );
    drop(instance);
    drop(deployment);
    report::write(&rep, out_dir)
}

/// Runs sysbench with these arguments in one place and returns its output.
type Runner<'a> = Box<dyn Fn(&[String]) -> Result<String, String> + 'a>;

fn run_sysbench(
    args: &ContainerArgs,
    w: &Workloads,
    instance: &Option<lxd::Instance>,
    with_docker: bool,
    rep: &mut ContainerReport,
) {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => return rep.skipped.push(format!("sysbench: {e}")),
    };
    let bundle = dir.path().join("bundle");
    let host_bin = match sysbench::bundle(&bundle) {
        Ok(b) => b,
        Err(e) => return rep.skipped.push(format!("sysbench: {e}")),
    };
    // The sysbench image is removed again when this function returns.
    struct RemoveImage(Option<String>);
    impl Drop for RemoveImage {
        fn drop(&mut self) {
            if let Some(i) = &self.0 {
                let _ = docker::docker(&["rmi", "-f", i]);
            }
        }
    }
    let mut image_guard = RemoveImage(None);
    let mut places: Vec<(&str, Runner)> = Vec::new();
    let host_bin2 = host_bin.clone();
    places.push((
        "host",
        Box::new(move |a: &[String]| {
            let out = Command::new(&host_bin2)
                .args(a)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| e.to_string())?;
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        }),
    ));
    if let Some(i) = instance {
        match i.push_dir(&bundle, "/opt/sysbench") {
            Ok(()) => places.push((
                "LXD",
                Box::new(move |a: &[String]| i.exec(&sysbench::bundled_command(a))),
            )),
            Err(e) => rep.skipped.push(format!("sysbench in LXD: {e}")),
        }
    }
    if with_docker {
        match docker::sysbench_image(&bundle) {
            Ok(image) => {
                image_guard.0 = Some(image.clone());
                places.push((
                    "Docker",
                    Box::new(move |a: &[String]| {
                        let mut all = vec![
                            "run".to_string(),
                            "--rm".into(),
                            "--network".into(),
                            "none".into(),
                            image.clone(),
                        ];
                        all.extend(a.iter().cloned());
                        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
                        docker::docker(&refs)
                    }),
                ));
            }
            Err(e) => rep.skipped.push(format!("sysbench in Docker: {e}")),
        }
    }
    rep.notes.push(format!(
        "sysbench: the host's {} with its libraries and loader pushed to /opt/sysbench in \
         the LXD instance and copied into a FROM-scratch image for Docker; 1 thread, {} s a \
         run",
        host_bin.display(),
        args.sysbench_seconds
    ));
    for test in &sysbench::TESTS {
        let mut values: Vec<Vec<f64>> = vec![Vec::new(); places.len()];
        for round in 0..w.repeat {
            for k in 0..places.len() {
                let pi = (k + round) % places.len();
                let (place, f) = &places[pi];
                eprintln!("servelab compare: sysbench {} {place}", test.label);
                match f(&sysbench::args(test, args.sysbench_seconds))
                    .and_then(|o| sysbench::parse(&o).ok_or(format!("no figure in: {o:.300}")))
                {
                    Ok(v) => values[pi].push(v),
                    Err(e) => rep
                        .failures
                        .push(format!("sysbench {} {place}: {e}", test.label)),
                }
            }
        }
        for (pi, (place, _)) in places.iter().enumerate() {
            if let Some(m) = median(&mut values[pi]) {
                rep.sysbench.push(SysbenchRow {
                    test: test.label.into(),
                    unit: test.unit.into(),
                    place: place.to_string(),
                    runs: values[pi].len(),
                    median: m,
                });
            }
        }
    }
}

fn host_rss(a: &Option<HostHttpd>, b: &HostHttpd) -> u64 {
    tree_rss_bytes(b.child.id()) + a.as_ref().map_or(0, |h| tree_rss_bytes(h.child.id()))
}

fn wait_tcp(addr: &str, secs: u64) -> Result<(), String> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        if TcpStream::connect(addr).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("{addr} did not accept within {secs} s"))
}

fn make_world_readable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(dir) else {
        return;
    };
    let mode = if meta.is_dir() { 0o755 } else { 0o644 };
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode));
    if meta.is_dir()
        && let Ok(rd) = std::fs::read_dir(dir)
    {
        for e in rd.flatten() {
            make_world_readable(&e.path());
        }
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_checked() {
        let a = ContainerArgs {
            containers: Some("lxd,docker".into()),
            cpus: Some("1,2".into()),
            clients: Some("1,10,100".into()),
            scale_seconds: 1.0,
            ..Default::default()
        };
        let p = a.parse().unwrap();
        assert_eq!(p.engines, [Engine::Lxd, Engine::Docker]);
        assert_eq!(p.cpus, [1, 2]);
        assert_eq!(p.clients, [1, 10, 100]);
        let bad = ContainerArgs {
            containers: Some("podman".into()),
            scale_seconds: 1.0,
            ..Default::default()
        };
        assert!(bad.parse().unwrap_err().contains("podman"));
        let zero = ContainerArgs {
            cpus: Some("0".into()),
            scale_seconds: 1.0,
            ..Default::default()
        };
        assert!(zero.parse().unwrap_err().contains("--cpus"));
    }

    #[test]
    fn static_elf_detection() {
        // This test binary is dynamically linked (it has an interpreter).
        let exe = std::env::current_exe().unwrap();
        assert!(!is_static_elf(&exe));
        assert!(!is_static_elf(Path::new("/nonexistent")));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }
}
