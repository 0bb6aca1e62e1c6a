//! What `compare --containers` and the sweeps are asked to do: the flattened options,
//! checked once into a [`Plan`], and the workload sizes compare's own options give.

use std::path::PathBuf;

use clap::Args;
use lab::dataset::DatasetSpec;

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
    /// Seconds of each sweep point: 3 by default, because a 1 s point on a shared
    /// two-core machine lasts a handful of a neighbour's scheduling bursts, and its
    /// connection ramp-up is a visible share of it; the report gives the spread.
    #[arg(long, default_value_t = 3.0)]
    pub scale_seconds: f64,
    /// Seconds of each sysbench run where sysbench is installed; 0 leaves it out.
    #[arg(long, default_value_t = 2)]
    pub sysbench_seconds: u32,
    /// Tag of docker/build.sh's images (rustnfs, httpd) for the Docker column.
    #[arg(long, default_value = "latest")]
    pub image_tag: String,
    /// Run only the container comparison and sweeps (with --ladder and no containers:
    /// only the ladder), not compare's main tables.
    #[arg(long)]
    pub containers_only: bool,
    /// The NFS version scenario A's httpd speaks to rustnfs in the container comparison
    /// and sweeps: 3, 4.0, 4.1 or 4.2 (default 4.2, what a kernel mount negotiates; 4.0
    /// repeats the original experiment's `mount -t nfs4 -o vers=4.0`).
    #[arg(long, value_name = "VERSION", value_parser = parse_nfs_version)]
    pub nfs_version: Option<nfsclient::NfsVersion>,
    /// File-system workloads (sequential read, metadata mix) on the host, in a Docker
    /// container through a bind mount, and over NFS: seconds per run (0 = off).
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub fs: f64,
    /// The ladder of layers: B and A's NFS hop on host loopback, in a network namespace
    /// over a veth pair, behind a Linux bridge, behind bridge + DNAT, and (with
    /// --containers) in the LXD instance / Docker container, each layer's added CPU per
    /// request and latency at equal load. Needs root for the namespace layers. It runs
    /// (rungs × --ladder-rounds) closed-loop runs of --requests plus as many open-loop
    /// runs of --ladder-seconds: about 2 minutes for the 8 host rungs with the defaults,
    /// 3 with both containers. Writes ladder.md and ladder.json.
    #[arg(long)]
    pub ladder: bool,
    /// Rounds of every ladder rung (the intervals need at least 2).
    #[arg(long, default_value_t = 3)]
    pub ladder_rounds: usize,
    /// Seconds of each open-loop ladder run at equal load.
    #[arg(long, default_value_t = 2.0)]
    pub ladder_seconds: f64,
}

impl ContainerArgs {
    /// The version scenario A speaks: `--nfs-version`, 4.2 by default.
    pub fn nfs_version(&self) -> nfsclient::NfsVersion {
        self.nfs_version.unwrap_or(nfsclient::NfsVersion::V4_2)
    }

    /// httpd's arguments for scenario A reading `url`.
    pub fn httpd_a_args(&self, url: &str) -> Vec<String> {
        vec![
            "--nfs".into(),
            url.into(),
            "--nfs-version".into(),
            self.nfs_version().to_string(),
        ]
    }
}

/// `--nfs-version`: 3, 4.0 (or 4), 4.1, 4.2.
fn parse_nfs_version(text: &str) -> Result<nfsclient::NfsVersion, String> {
    nfsclient::NfsVersion::parse(text)
        .ok_or_else(|| format!("{text:?} is not an NFS version: give 3, 4.0, 4.1 or 4.2"))
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
    /// Keep runs taken on a busy machine in the comparisons (`--keep-busy`).
    pub keep_busy: bool,
    /// compare's client/server CPU split (the ladder's host rungs are pinned by it).
    pub cpus: Option<crate::experiment::probe::CpuSplit>,
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
    pub fn parse(&self) -> anyhow::Result<Plan> {
        let list = |name: &str, v: &Option<String>, max: u64| -> anyhow::Result<Vec<u64>> {
            let Some(v) = v else { return Ok(Vec::new()) };
            v.split(',')
                .map(|x| match x.trim().parse::<u64>() {
                    Ok(n) if n >= 1 && n <= max => Ok(n),
                    _ => Err(anyhow::anyhow!(
                        "--{name}: '{x}' is not a number from 1 to {max}"
                    )),
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
                        anyhow::bail!("--containers: unknown '{other}' (expected lxd, docker)");
                    }
                }
            }
        }
        engines.dedup();
        if !(self.fs.is_finite() && (0.0..=600.0).contains(&self.fs)) {
            anyhow::bail!("--fs must be between 0 and 600 seconds");
        }
        if self.ladder && !(1..=100).contains(&self.ladder_rounds) {
            anyhow::bail!("--ladder-rounds must be between 1 and 100");
        }
        if self.ladder
            && !(self.ladder_seconds.is_finite()
                && self.ladder_seconds > 0.0
                && self.ladder_seconds <= 600.0)
        {
            anyhow::bail!("--ladder-seconds must be above 0 and at most 600");
        }
        if !(self.scale_seconds.is_finite() && self.scale_seconds > 0.0) {
            anyhow::bail!("--scale-seconds must be above 0");
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
        assert!(bad.parse().unwrap_err().to_string().contains("podman"));
        let zero = ContainerArgs {
            cpus: Some("0".into()),
            scale_seconds: 1.0,
            ..Default::default()
        };
        assert!(zero.parse().unwrap_err().to_string().contains("--cpus"));
    }
}
