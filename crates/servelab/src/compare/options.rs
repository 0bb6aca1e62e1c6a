//! What a comparison run is asked to do: the options the CLI validated, and which
//! third-party baselines take part.

use std::path::PathBuf;

use lab::dataset::DatasetSpec;
use lab::peers::Baseline;

use crate::experiment::link::LinkSpec;
pub use crate::experiment::probe::CpuSplit;

/// Which third-party baselines to run.
#[derive(Debug, Clone, PartialEq)]
pub enum BaselineChoice {
    None,
    /// Every baseline found on the machine.
    Auto,
    List(Vec<Baseline>),
}

impl BaselineChoice {
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        match text.trim() {
            "none" => Ok(BaselineChoice::None),
            "auto" | "all" => Ok(BaselineChoice::Auto),
            list => list
                .split(',')
                .map(|n| {
                    Baseline::parse(n).ok_or_else(|| {
                        let known: Vec<&str> = Baseline::ALL.iter().map(|b| b.name()).collect();
                        anyhow::anyhow!(
                            "unknown baseline `{n}` (use {}, auto or none)",
                            known.join(", ")
                        )
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()
                .map(BaselineChoice::List),
        }
    }

    pub fn wants(&self, b: Baseline) -> bool {
        match self {
            BaselineChoice::None => false,
            BaselineChoice::Auto => true,
            BaselineChoice::List(l) => l.contains(&b),
        }
    }

    pub fn explicit(&self, b: Baseline) -> bool {
        matches!(self, BaselineChoice::List(l) if l.contains(&b))
    }

    pub fn label(&self) -> String {
        match self {
            BaselineChoice::None => "none".into(),
            BaselineChoice::Auto => "auto".into(),
            BaselineChoice::List(l) => l.iter().map(|b| b.name()).collect::<Vec<_>>().join(","),
        }
    }
}

/// Where the client-cache row's httpd keeps its cached copies.
#[derive(Debug, Clone, PartialEq)]
pub enum DataCacheCopies {
    /// Unlinked files in a directory made in the run's temporary directory.
    RunTempDir,
    /// Unlinked files in this directory (`--nfs-data-cache-dir`).
    Dir(PathBuf),
    /// Sealed memfds (`--nfs-data-cache-memfd`).
    Memfd,
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
    /// Where the client-cache row keeps its copies.
    pub data_cache_copies: DataCacheCopies,
    /// Threads of our load generator (`servelab load -t`).
    pub client_threads: usize,
    /// Also run `ab` / `wrk` on the same workloads when installed.
    pub cross_check: bool,
    /// `results/`: the run goes into `<results>/<date>-<host>[-N]/`.
    pub results: PathBuf,
    /// The client/server CPU split; `None`: no pinning (one CPU, or `--no-pin`).
    pub cpus: Option<CpuSplit>,
    /// Repeats of A and B the headline may grow to while its interval is wider than ±10 %.
    pub max_repeat: usize,
    /// Keep runs taken on a busy machine in the figures.
    pub keep_busy: bool,
    /// Seconds of each open-loop point at equal offered load; 0 = none.
    pub equal_load_seconds: f64,
    /// Start rustnfs and our httpd stacks anew before every headline round after the
    /// first (`--no-restart`: false).
    pub restart: bool,
    /// `--distance`: the whole distance sweep instead of its one default point.
    pub distance_sweep: bool,
    /// Seconds of each distance run; 0 = no distance phase.
    pub distance_seconds: f64,
}
