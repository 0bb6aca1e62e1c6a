//! `servelab compare --containers lxd,docker` and the scaling sweeps (`--cpus`,
//! `--clients`, `--workers`): the same static httpd on the host, in an LXD instance and
//! in a Docker container, for scenarios A (NFS from rustnfs in Docker) and B (local
//! files), with Δ% against the host as the original report's tables, sysbench on each,
//! memory per container, and throughput/p99 against CPU limit and client count.
//!
//! # Layout
//! - [`options`]: the flattened options, checked once into a plan.
//! - [`host`]: static binaries, the host's httpd processes, one load point, helpers.
//! - [`lxd`]: lxc/lxd-deploy.sh (embedded) brings the instance up and down.
//! - [`docker`]: the containers of the FROM-scratch images, addressed by their own IPs.
//! - [`cgroup`]: the host's CPU limit (a CFS quota in a cgroup of ours).
//! - [`sysbench`]: the host's sysbench bundled with its libraries into each container.
//! - [`fs`]: the file-system workloads on the host, through a bind mount and over NFS.
//! - [`serving`]: which processes and cgroups serve each cell (for CPU per request).
//! - [`model`]: the results as data (`containers.json`).
//! - [`answer`]: A vs B in each place and each container vs the host, with intervals.
//! - [`markdown`], [`plots`]: `containers.md` and the SVG plots; [`output`] writes them.
//!
//! [`run`] goes phase by phase over a run context: deploy every column, check the bytes,
//! the original tables, memory, sysbench, the CPU × clients sweep, the workers sweep,
//! the file-system table, files.

pub mod answer;
pub mod cgroup;
pub mod docker;
pub mod fs;
pub mod host;
pub mod lxd;
pub mod markdown;
pub mod model;
pub mod options;
pub mod output;
pub mod plots;
pub mod serving;
pub mod sysbench;

pub use options::{ContainerArgs, Workloads};

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::anyhow;
use lab::dataset::{self, DatasetInfo};
use loadgen::Schedule;

use host::{HostHttpd, host_rss, load, make_world_readable, static_bin, wait_http, wait_tcp};
use options::{Engine, Plan};

use crate::measure::error_text;
use model::*;

/// Where httpd runs and how to reach its two scenarios.
struct Target {
    place: String,
    url_a: Option<String>,
    url_b: String,
}

/// One (place, scenario) cell of the tables.
struct Cell {
    /// Index into the run's targets.
    target: usize,
    scenario: &'static str,
    url: String,
    /// Its whole serving stack, sampled over each run.
    serving: serving::Serving,
}

/// Runs the container comparison and the sweeps; writes containers.md/.json and the
/// plots into `out_dir` and returns the results.
pub fn run(args: &ContainerArgs, w: &Workloads, out_dir: &Path) -> anyhow::Result<ContainerReport> {
    let mut run = Run::deploy(args, w)?;
    run.check_bytes()?;
    run.warm_up();
    run.tables();
    run.memory();
    if args.sysbench_seconds > 0 {
        run.sysbench();
    }
    if !run.plan.cpus.is_empty() || !run.plan.clients.is_empty() {
        run.scaling()?;
    }
    run.workers()?;
    if args.fs > 0.0 {
        run.fs()?;
    }
    run.finish(out_dir)
}

/// The state of a container comparison: every column deployed, and the report so far.
struct Run<'a> {
    args: &'a ContainerArgs,
    w: &'a Workloads,
    plan: Plan,
    rep: ContainerReport,
    info: DatasetInfo,
    /// The dataset's directory, served by every column.
    data: PathBuf,
    httpd_bin: PathBuf,
    /// scenario A's URL (rustnfs in Docker), when Docker is available.
    nfs_url: Option<String>,
    targets: Vec<Target>,
    cells: Vec<Cell>,
    /// The host's httpd A+B peak RSS over the tables.
    host_peak: u64,
    // Drop order: host processes, the LXD instance, the Docker deployment, the dataset.
    host_b: HostHttpd,
    host_a: Option<HostHttpd>,
    instance: Option<lxd::Instance>,
    deployment: Option<docker::Deployment>,
    _tmp: tempfile::TempDir,
}

impl<'a> Run<'a> {
    /// The dataset, rustnfs in Docker, httpd on the host, in LXD and in Docker.
    fn deploy(args: &'a ContainerArgs, w: &'a Workloads) -> anyhow::Result<Self> {
        let plan = args.parse()?;
        let mut rep = ContainerReport {
            loadavg_before: crate::results::loadavg(),
            ..ContainerReport::default()
        };
        // The dataset: compare's (generated with the same seed) or --dataset.
        let tmp = tempfile::Builder::new()
            .prefix("sl-deploy-data-")
            .tempdir()
            .map_err(|e| anyhow!("cannot create a temporary directory: {e}"))?;
        let info: DatasetInfo = match &w.dataset {
            Some(d) => dataset::describe_existing(d).map_err(|e| anyhow!("--dataset: {e}"))?,
            None => {
                let root = tmp.path().join("www");
                dataset::generate(&root, w.spec).map_err(|e| anyhow!("dataset: {e}"))?
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
        let deployment = match &docker_missing {
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
        if let Some(ip) = deployment.as_ref().and_then(|d| d.nfs_ip.as_ref()) {
            wait_tcp(&format!("{ip}:2049"), 20)?;
        }

        // Host.
        let host_b = HostHttpd::start(&httpd_bin, &b_args(&data, &[]))?;
        let host_a = match &nfs_url {
            Some(u) => Some(HostHttpd::start(&httpd_bin, &["--nfs".into(), u.clone()])?),
            None => None,
        };
        let targets = vec![Target {
            place: "host".into(),
            url_a: host_a.as_ref().map(|h| h.url.clone()),
            url_b: host_b.url.clone(),
        }];
        let mut run = Run {
            args,
            w,
            plan,
            rep,
            info,
            data,
            httpd_bin,
            nfs_url,
            targets,
            cells: Vec::new(),
            host_peak: 0,
            host_b,
            host_a,
            instance: None,
            deployment,
            _tmp: tmp,
        };
        if run.plan.engines.contains(&Engine::Lxd) {
            let rustnfs_image = docker_missing.is_none().then(|| images[0].clone());
            run.deploy_lxd(rustnfs_image.as_deref());
        }
        if run.plan.engines.contains(&Engine::Docker) {
            run.deploy_docker()?;
        }
        run.cells = run
            .targets
            .iter()
            .enumerate()
            .flat_map(|(i, t)| {
                let mut v = vec![Cell {
                    target: i,
                    scenario: "B",
                    url: t.url_b.clone(),
                    serving: Vec::new(),
                }];
                if let Some(a) = &t.url_a {
                    v.push(Cell {
                        target: i,
                        scenario: "A",
                        url: a.clone(),
                        serving: Vec::new(),
                    });
                }
                v
            })
            .collect();
        for ci in 0..run.cells.len() {
            run.cells[ci].serving = run.serving_of(ci);
        }
        Ok(run)
    }

    /// The LXD column (skipped with its reason when LXD is missing or fails).
    fn deploy_lxd(&mut self, rustnfs_image: Option<&str>) {
        if let Some(why) = lxd::unavailable() {
            return self.rep.skipped.push(format!("LXD: {why}"));
        }
        // Without Docker the instance's scenario A reads a host rustnfs (not
        // compared: the host and Docker columns have no A then).
        let rustnfs_bin = static_bin("rustnfs").ok();
        let up = lxd::UpOptions {
            data: &self.data,
            httpd_bin: &self.httpd_bin,
            rustnfs_bin: rustnfs_bin.as_deref(),
            rustnfs_image,
            file: &self.info.large_file,
        };
        eprintln!("servelab compare: starting the LXD instance (lxc/lxd-deploy.sh up)");
        match lxd::Instance::up(&up) {
            Ok(i) => {
                self.rep.notes.push(format!(
                    "LXD instance {} ({}), limits.memory=1GB; its scenario A reads \
                     the script's own rustnfs container",
                    i.name, i.path
                ));
                self.targets.push(Target {
                    place: "LXD".into(),
                    url_a: i.path.ends_with("docker").then(|| i.url_a.clone()),
                    url_b: i.url_b.clone(),
                });
                self.instance = Some(i);
            }
            Err(e) => self.rep.skipped.push(format!("LXD: {e}")),
        }
    }

    /// The Docker column: httpd A and B containers next to rustnfs's.
    fn deploy_docker(&mut self) -> anyhow::Result<()> {
        let (Some(d), Some(nfs_url)) = (self.deployment.as_mut(), &self.nfs_url) else {
            return Ok(());
        };
        let tag = &self.args.image_tag;
        let data_args = vec!["--root".to_string(), "/www".to_string()];
        let b = d.httpd("b", tag, &self.data, &data_args)?;
        let a = d.httpd("a", tag, &self.data, &["--nfs".into(), nfs_url.clone()])?;
        for c in [&a, &b] {
            wait_http(&c.url, Duration::from_secs(15))?;
        }
        self.targets.push(Target {
            place: "Docker".into(),
            url_a: Some(a.url.clone()),
            url_b: b.url.clone(),
        });
        d.httpd_a = Some(a);
        d.httpd_b = Some(b);
        Ok(())
    }

    /// What serves cell `ci`: the host's httpd process, the LXD instance's cgroup or the
    /// Docker container's, plus the rustnfs container behind scenario A. A part whose
    /// cgroup cannot be found leaves the cell without a CPU figure (not a partial one).
    fn serving_of(&self, ci: usize) -> serving::Serving {
        use lab::sampler::Target as T;
        let c = &self.cells[ci];
        let place = self.targets[c.target].place.as_str();
        let a = c.scenario == "A";
        let mut v: Vec<(String, Option<T>)> = Vec::new();
        match place {
            "host" => {
                let h = if a {
                    self.host_a.as_ref()
                } else {
                    Some(&self.host_b)
                };
                v.push(("httpd (host)".into(), h.map(|h| T::Tree(h.proc.pid()))));
            }
            "LXD" => {
                let name = self.instance.as_ref().map(|i| i.name.clone());
                v.push((
                    "LXD instance".into(),
                    name.as_deref()
                        .and_then(container_target(serving::lxd_cgroup, serving::lxd_pid)),
                ));
            }
            _ => {
                let d = self.deployment.as_ref();
                let name = d.and_then(|d| {
                    if a {
                        d.httpd_a.as_ref()
                    } else {
                        d.httpd_b.as_ref()
                    }
                });
                // Its cgroup on a v2 host, its process tree on a v1 host (as the rustnfs
                // container below): with the cgroup alone, every Docker row of a v1 host
                // had no CPU figure and fell back to the load average.
                v.push((
                    "httpd container".into(),
                    name.and_then(|n| {
                        container_target(serving::docker_cgroup, serving::docker_pid)(&n.name)
                    }),
                ));
            }
        }
        if a {
            // The LXD instance reads the script's own rustnfs container.
            let nfs = match place {
                "LXD" => Some(format!("{}-rustnfs", lxd::PREFIX)),
                _ => self.deployment.as_ref().and_then(|d| d.rustnfs.clone()),
            };
            v.push((
                "rustnfs container".into(),
                nfs.as_deref().and_then(container_target(
                    serving::docker_cgroup,
                    serving::docker_pid,
                )),
            ));
        }
        if v.iter().any(|(_, t)| t.is_none()) {
            return Vec::new();
        }
        v.into_iter().filter_map(|(n, t)| Some((n, t?))).collect()
    }

    fn docker_column(&self) -> bool {
        self.deployment.is_some() && self.plan.engines.contains(&Engine::Docker)
    }

    /// Same bytes everywhere before measuring.
    fn check_bytes(&self) -> anyhow::Result<()> {
        let want = std::fs::read(self.data.join(&self.info.large_file))?;
        for c in &self.cells {
            let addr: std::net::SocketAddr = c
                .url
                .trim_start_matches("http://")
                .parse()
                .map_err(|e| anyhow!("{}: {e}", c.url))?;
            match lab::http::get(
                addr,
                &format!("/{}", self.info.large_file),
                Duration::from_secs(60),
            ) {
                Ok((200, body)) if body == want => {}
                other => anyhow::bail!(
                    "{} scenario {} did not serve the file's bytes: {:?}",
                    self.targets[c.target].place,
                    c.scenario,
                    other.map(|(s, b)| (s, b.len()))
                ),
            }
        }
        Ok(())
    }

    fn large(&self, url: &str) -> anyhow::Result<Point> {
        load(
            &format!("{url}/{}", self.info.large_file),
            Schedule::Count(self.w.large_requests),
            self.w.large_concurrency,
            false,
        )
    }

    fn small(&self, url: &str, c: usize, secs: f64) -> anyhow::Result<Point> {
        load(
            &format!("{url}/{}", self.info.small_file),
            Schedule::Duration(Duration::from_secs_f64(secs)),
            c,
            true,
        )
    }

    fn warm_up(&self) {
        for c in &self.cells {
            let _ = load(
                &format!("{}/{}", c.url, self.info.large_file),
                Schedule::Count(4),
                2,
                false,
            );
            let _ = self.small(&c.url, 4, 0.3);
        }
    }

    /// The original tables: every (place, scenario) in rotating order, per workload.
    fn tables(&mut self) {
        let w = self.w;
        for (workload, is_small) in [("large", false), ("small", true)] {
            let mut runs: Vec<Vec<Point>> = vec![Vec::new(); self.cells.len()];
            let numbered: Vec<usize> = (0..self.cells.len()).collect();
            crate::measure::interleave(w.repeat, &numbered, |round, &ci| {
                let c = &self.cells[ci];
                let place = &self.targets[c.target].place;
                eprintln!(
                    "servelab compare: containers {}/{} {workload:>5} {place} {}",
                    round + 1,
                    w.repeat,
                    c.scenario
                );
                let before = lab::environment::Noise::now();
                let other_work = lab::affinity::OtherWork::start(&[]);
                let sampler = serving::CellSampler::start(&c.serving);
                let r = if is_small {
                    self.small(&c.url, w.small_concurrency, w.small_seconds)
                } else {
                    self.large(&c.url)
                };
                let cpu_s = sampler.finish();
                // Busy by the other work during the run when the stack's CPU is known (the
                // load average counts the run's own client and servers), else by the load.
                let other_work = cpu_s.and_then(|s| other_work.finish_measured(s));
                let busy = match other_work {
                    Some(w) => w > lab::affinity::OTHER_WORK_BUSY,
                    None => before.busy() || lab::environment::Noise::now().busy(),
                };
                match r {
                    Ok(mut p) => {
                        p.busy = busy;
                        p.other_work = other_work;
                        p.cpu_ms_per_request =
                            cpu_s.and_then(|s| crate::stats::service_demand_ms(&[s], p.requests));
                        runs[ci].push(p)
                    }
                    Err(e) => self.rep.failures.push(format!(
                        "{place} {} {workload}: {}",
                        c.scenario,
                        error_text(&e)
                    )),
                }
                self.host_peak = self.host_peak.max(host_rss(&self.host_a, &self.host_b));
            });
            for (c, runs) in self.cells.iter().zip(&runs) {
                if let Some(m) = Point::median(runs) {
                    self.rep.rows.push(Row {
                        workload: workload.into(),
                        scenario: c.scenario.to_string(),
                        place: self.targets[c.target].place.clone(),
                        runs: runs.len(),
                        median: m,
                        points: runs.clone(),
                    });
                }
            }
        }
    }

    /// Memory per column after the runs.
    fn memory(&mut self) {
        self.rep.memory.push(MemoryRow {
            place: "host".into(),
            what: "httpd A + B processes (RSS)".into(),
            current: host_rss(&self.host_a, &self.host_b),
            peak: Some(self.host_peak),
            source: "/proc/PID/status VmRSS".into(),
        });
        if let Some(i) = &self.instance
            && let Ok((cur, peak)) = i.memory()
        {
            self.rep.memory.push(MemoryRow {
                place: "LXD".into(),
                what: format!("instance {} (init + httpd A + B)", i.name),
                current: cur,
                peak: Some(peak),
                source: "lxc info / instance state".into(),
            });
        }
        if let Some(d) = &self.deployment {
            let mut names: Vec<(&str, &str)> = Vec::new();
            if let Some(c) = &d.httpd_a {
                names.push((&c.name, "httpd A container"));
            }
            if let Some(c) = &d.httpd_b {
                names.push((&c.name, "httpd B container"));
            }
            if let Some(n) = &d.rustnfs {
                names.push((n, "rustnfs container (scenario A's server)"));
            }
            for (n, what) in names {
                if let Some(cur) = docker::stats_memory(n) {
                    self.rep.memory.push(MemoryRow {
                        place: "Docker".into(),
                        what: what.into(),
                        current: cur,
                        peak: docker::cgroup_peak(n),
                        source: "docker stats; cgroup peak".into(),
                    });
                }
            }
        }
    }

    /// sysbench on the host and in each container.
    fn sysbench(&mut self) {
        if lab::find_program("sysbench").is_none() {
            return self.rep.skipped.push("sysbench: not installed".into());
        }
        let with_docker = self.docker_column();
        sysbench::measure(
            self.args,
            self.w,
            &self.instance,
            with_docker,
            &mut self.rep,
        );
    }

    /// Every column's CPU limit set to `cpu` (`None` lifts it).
    fn set_cpus(&self, limit: Option<&cgroup::CpuLimit>, cpu: Option<u32>) -> anyhow::Result<()> {
        if let Some(l) = limit {
            l.set(cpu)?;
        }
        if let Some(i) = &self.instance {
            i.set_cpus(cpu)?;
        }
        if let Some(d) = &self.deployment
            && self.plan.engines.contains(&Engine::Docker)
        {
            d.set_cpus(cpu)?;
        }
        Ok(())
    }

    /// Scaling: CPU limit × client count (small-file workload).
    fn scaling(&mut self) -> anyhow::Result<()> {
        let limit = if self.plan.cpus.is_empty() {
            None
        } else {
            match cgroup::CpuLimit::create() {
                Ok(l) => {
                    for h in [Some(&self.host_b), self.host_a.as_ref()]
                        .into_iter()
                        .flatten()
                    {
                        l.add(h.proc.pid())?;
                    }
                    self.rep.notes.push(format!(
                        "CPU limits: host {}, LXD limits.cpu (pinned CPUs), Docker --cpus \
                         (CFS quota)",
                        l.kind
                    ));
                    Some(l)
                }
                Err(e) => {
                    self.rep.skipped.push(format!("host CPU limit: {e}"));
                    None
                }
            }
        };
        let cpus: Vec<Option<u32>> = if self.plan.cpus.is_empty() {
            vec![None]
        } else {
            self.plan.cpus.iter().map(|c| Some(*c)).collect()
        };
        let clients = if self.plan.clients.is_empty() {
            vec![self.w.small_concurrency]
        } else {
            self.plan.clients.clone()
        };
        for cpu in &cpus {
            self.set_cpus(limit.as_ref(), *cpu)?;
            for c in &clients {
                for cell in &self.cells {
                    let place = &self.targets[cell.target].place;
                    let mut pts = Vec::new();
                    for _ in 0..self.w.repeat.min(3) {
                        match self.small(&cell.url, *c, self.args.scale_seconds) {
                            Ok(p) => pts.push(p),
                            Err(e) => self.rep.failures.push(format!(
                                "scaling {place} {} cpus={cpu:?} c={c}: {}",
                                cell.scenario,
                                error_text(&e)
                            )),
                        }
                    }
                    if let Some(m) = Point::median(&pts) {
                        self.rep.scaling.push(ScaleRow {
                            scenario: cell.scenario.to_string(),
                            place: place.clone(),
                            cpus: *cpu,
                            clients: *c,
                            median: m,
                        });
                    }
                }
            }
        }
        self.set_cpus(limit.as_ref(), None)
    }

    /// httpd --workers on the host, a fresh process per value and scenario.
    fn workers(&mut self) -> anyhow::Result<()> {
        for workers in self.plan.workers.clone() {
            let extra = vec!["--workers".to_string(), workers.to_string()];
            let mut scenarios = vec![("B", b_args(&self.data, &extra))];
            if let Some(u) = &self.nfs_url {
                let mut a = vec!["--nfs".to_string(), u.clone()];
                a.extend(extra.iter().cloned());
                scenarios.push(("A", a));
            }
            for (sc, a) in scenarios {
                let h = HostHttpd::start(&self.httpd_bin, &a)?;
                let mut pts = Vec::new();
                for _ in 0..self.w.repeat.min(3) {
                    match self.small(&h.url, self.w.small_concurrency, self.args.scale_seconds) {
                        Ok(p) => pts.push(p),
                        Err(e) => self
                            .rep
                            .failures
                            .push(format!("workers={workers} {sc}: {}", error_text(&e))),
                    }
                }
                if let Some(m) = Point::median(&pts) {
                    self.rep.workers.push(WorkersRow {
                        scenario: sc.into(),
                        workers,
                        clients: self.w.small_concurrency,
                        median: m,
                    });
                }
            }
        }
        Ok(())
    }

    /// File-system workloads: host, Docker bind mount, NFS.
    fn fs(&mut self) -> anyhow::Result<()> {
        let image = format!("servelab:{}", self.args.image_tag);
        let image = match docker::unavailable(&[&image]) {
            None => Some(image),
            Some(why) => {
                self.rep
                    .skipped
                    .push(format!("file-system table, Docker column: {why}"));
                None
            }
        };
        fs::run(
            &self.data.join(&self.info.large_file),
            image.as_deref(),
            self.args.fs,
            self.w.repeat,
            &mut self.rep.fs,
            &mut self.rep.failures,
        )
    }

    /// The settings line, then the containers go and the files are written.
    fn finish(mut self, out_dir: &Path) -> anyhow::Result<ContainerReport> {
        let w = self.w;
        self.rep.loadavg_after = crate::results::loadavg();
        self.rep.settings = format!(
            "large: {} requests, {} concurrent, a new connection per request (as ab); small: \
             {:.1} s, {} connections, keep-alive; {} interleaved rounds, medians; sweep points \
             {:.1} s, median of {}",
            w.large_requests,
            w.large_concurrency,
            w.small_seconds,
            w.small_concurrency,
            w.repeat,
            self.args.scale_seconds,
            w.repeat.min(3)
        );
        self.rep.answer = answer::compute(&self.rep.rows, w.keep_busy);
        self.rep.notes.push(format!(
            "CPU per request: the whole serving stack of each cell — the host's httpd process, \
             the LXD instance's cgroup or the httpd container's, plus the rustnfs container's \
             for A — from /proc and cgroup cpu.stat over each run; sweep points last {:.1} s \
             each (--scale-seconds; 1 s points on a shared two-core machine moved with each \
             neighbour's burst), median of {}",
            self.args.scale_seconds,
            w.repeat.min(3)
        ));
        let rep = std::mem::take(&mut self.rep);
        drop(self);
        output::write(&rep, out_dir)?;
        Ok(rep)
    }
}

/// A container's sampling target: its cgroup v2 directory, else (cgroup v1 hosts) the
/// process tree under its first process.
fn container_target(
    cgroup: fn(&str) -> Option<PathBuf>,
    pid: fn(&str) -> Option<u32>,
) -> impl Fn(&str) -> Option<lab::sampler::Target> {
    move |name| {
        cgroup(name)
            .map(lab::sampler::Target::Cgroup)
            .or_else(|| pid(name).map(lab::sampler::Target::Tree))
    }
}

/// Scenario B's httpd arguments on the host: the dataset as its root, plus `extra`.
fn b_args(data: &Path, extra: &[String]) -> Vec<String> {
    let mut a = vec!["--root".to_string(), data.display().to_string()];
    a.extend(extra.iter().cloned());
    a
}
