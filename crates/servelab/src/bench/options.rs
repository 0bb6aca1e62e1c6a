//! `servelab bench`'s options: the command line, validated once into [`BenchOptions`],
//! and the groups `--groups` selects.

use std::path::PathBuf;

use clap::Args;

/// Options of `servelab bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// How many times the whole matrix runs; each repeat rotates the order of servers and
    /// tools, so none always goes first.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,

    /// Seconds of load per measurement.
    #[arg(long, default_value_t = 2.0)]
    pub duration: f64,

    /// A smoke run: one repeat, short measurements, a reduced matrix (c = 10, fewer
    /// cases). Checks the suite works; its numbers mean little.
    #[arg(long)]
    pub quick: bool,

    /// Which groups to run: any of http, nfs, loadgen, memory (comma-separated).
    #[arg(long, default_value = "http,nfs,loadgen,memory", value_delimiter = ',')]
    pub groups: Vec<String>,

    /// Write here instead of `results/<date>-<host>/` (created; must not hold a run).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Parent of the dated run directory when `--out` is not given.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
}

/// The parts of the suite `--groups` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Http,
    Nfs,
    Loadgen,
    Memory,
}

impl Group {
    pub fn parse(s: &str) -> anyhow::Result<Group> {
        match s.trim() {
            "http" => Ok(Group::Http),
            "nfs" => Ok(Group::Nfs),
            "loadgen" | "tools" => Ok(Group::Loadgen),
            "memory" => Ok(Group::Memory),
            other => anyhow::bail!("unknown group `{other}` (use http, nfs, loadgen, memory)"),
        }
    }
}

/// Validated options.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub repeat: usize,
    pub seconds: f64,
    pub quick: bool,
    pub groups: Vec<Group>,
    pub out: Option<PathBuf>,
    pub results: PathBuf,
}

impl BenchOptions {
    pub fn wants(&self, g: Group) -> bool {
        self.groups.contains(&g)
    }
}

impl BenchArgs {
    pub fn into_options(self) -> anyhow::Result<BenchOptions> {
        let groups = self
            .groups
            .iter()
            .map(|g| Group::parse(g))
            .collect::<anyhow::Result<Vec<_>>>()?;
        if groups.is_empty() {
            anyhow::bail!("--groups names no group (use http, nfs, loadgen, memory)");
        }
        if self.repeat == 0 || self.repeat > 100 {
            anyhow::bail!("--repeat must be between 1 and 100");
        }
        if !(self.duration.is_finite() && self.duration > 0.0 && self.duration <= 600.0) {
            anyhow::bail!("--duration must be between 0 and 600 seconds");
        }
        let (repeat, seconds) = if self.quick {
            (1, self.duration.min(0.5))
        } else {
            (self.repeat, self.duration)
        };
        Ok(BenchOptions {
            repeat,
            seconds,
            quick: self.quick,
            groups,
            out: self.out,
            results: self.results,
        })
    }
}
