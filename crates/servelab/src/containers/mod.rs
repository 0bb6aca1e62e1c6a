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
//! - `deploy`, `tables`, `sweeps`, `ladder`: the run's phases (see [`run`]).
//! - [`model`]: the results as data (`containers.json`).
//! - [`answer`]: A vs B in each place and each container vs the host, with intervals.
//! - [`markdown`], [`plots`]: `containers.md` and the SVG plots; [`output`] writes them.
//!
//! Stacks, the probe, the progress display and the interruption are the experiment
//! layer's ([`crate::experiment`]). [`run`] goes phase by phase over a run context:
//! deploy every column, plan every step, check the bytes, the original tables, memory,
//! sysbench, the CPU × clients sweep, the workers sweep, the file-system table, files.

pub mod answer;
pub mod cgroup;
mod deploy;
pub mod docker;
pub mod fs;
pub mod host;
mod ladder;
pub mod lxd;
pub mod markdown;
pub mod model;
pub mod options;
pub mod output;
pub mod plots;
pub mod serving;
mod sweeps;
pub mod sysbench;
mod tables;

pub use options::{ContainerArgs, Workloads};

use std::path::{Path, PathBuf};
use std::time::Duration;

use host::HostHttpd;
use options::{Engine, Plan};

use crate::experiment::progress::Progress;
use crate::experiment::stack::Stack;
use crate::experiment::workspace::Dataset;
use model::*;

/// One (place, scenario) cell of the tables: httpd on the host, in LXD or in Docker,
/// serving B or A, as a stack the probe samples whole.
struct Cell {
    place: String,
    scenario: &'static str,
    stack: Stack,
}

/// Runs the container comparison and the sweeps; writes containers.md/.json and the
/// plots into `out_dir` and returns the results.
pub fn run(args: &ContainerArgs, w: &Workloads, out_dir: &Path) -> anyhow::Result<ContainerReport> {
    let mut run = Run::deploy(args, w)?;
    run.plan();
    run.check_bytes()?;
    run.warm_up()?;
    run.tables()?;
    run.memory();
    if args.sysbench_seconds > 0 {
        run.sysbench()?;
    }
    if !run.plan.cpus.is_empty() || !run.plan.clients.is_empty() {
        run.scaling()?;
    }
    run.workers()?;
    if args.ladder {
        run.ladder(out_dir)?;
    }
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
    /// The dataset's directory, served by every column.
    data: PathBuf,
    large_file: String,
    small_file: String,
    httpd_bin: PathBuf,
    /// scenario A's URL for httpd (rustnfs in Docker), when Docker is available.
    nfs_url: Option<String>,
    cells: Vec<Cell>,
    progress: Progress,
    /// The host's httpd A+B peak RSS over the tables.
    host_peak: u64,
    // Drop order: host processes, the LXD instance, the Docker deployment, the dataset.
    host_b: HostHttpd,
    host_a: Option<HostHttpd>,
    instance: Option<lxd::Instance>,
    deployment: Option<docker::Deployment>,
    _dataset: Dataset,
}

impl Run<'_> {
    fn docker_column(&self) -> bool {
        self.deployment.is_some() && self.plan.engines.contains(&Engine::Docker)
    }

    /// Rounds of each sweep point.
    fn sweep_rounds(&self) -> usize {
        self.w.repeat.min(3)
    }

    /// Every step of the run, planned before the first.
    fn plan(&mut self) {
        let w = self.w;
        let (cells, rounds) = (self.cells.len(), self.sweep_rounds());
        let sweep = Duration::from_secs_f64(self.args.scale_seconds);
        self.progress.plan(1, Duration::from_secs(2 * cells as u64));
        self.progress.plan(w.repeat * cells, Duration::from_secs(2));
        self.progress
            .plan(w.repeat * cells, Duration::from_secs_f64(w.small_seconds));
        if self.args.sysbench_seconds > 0 && lab::find_program("sysbench").is_some() {
            let places =
                1 + usize::from(self.instance.is_some()) + usize::from(self.docker_column());
            let each = Duration::from_secs(u64::from(self.args.sysbench_seconds));
            self.progress
                .plan(sysbench::TESTS.len() * places * w.repeat, each);
        }
        if !self.plan.cpus.is_empty() || !self.plan.clients.is_empty() {
            let points = self.plan.cpus.len().max(1) * self.plan.clients.len().max(1);
            self.progress.plan(points * cells * rounds, sweep);
        }
        let scenarios = 1 + usize::from(self.nfs_url.is_some());
        self.progress
            .plan(self.plan.workers.len() * scenarios * rounds, sweep);
        if self.args.fs > 0.0 {
            let image = format!("servelab:{}", self.args.image_tag);
            let places = 1
                + usize::from(docker::unavailable(&[&image]).is_none())
                + usize::from(host::static_bin("rustnfs").is_ok());
            self.progress.plan(
                fs::WORKLOADS.len() * places * w.repeat,
                Duration::from_secs_f64(self.args.fs),
            );
        }
    }

    /// The settings line, then the containers go and the files are written.
    fn finish(mut self, out_dir: &Path) -> anyhow::Result<ContainerReport> {
        let w = self.w;
        self.rep.loadavg_after = crate::experiment::workspace::loadavg();
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
        self.progress.finish();
        let rep = std::mem::take(&mut self.rep);
        drop(self);
        output::write(&rep, out_dir)?;
        Ok(rep)
    }
}

/// Scenario B's httpd arguments on the host: the dataset as its root, plus `extra`.
fn b_args(data: &Path, extra: &[String]) -> Vec<String> {
    let mut a = vec!["--root".to_string(), data.display().to_string()];
    a.extend(extra.iter().cloned());
    a
}
