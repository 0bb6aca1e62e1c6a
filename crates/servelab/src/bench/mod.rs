//! `servelab bench`: the side-by-side suite — our servers and load generator against
//! nginx, Apache, NFS-Ganesha, wrk, ab and iperf3 on one machine, interleaved and
//! repeated, written as raw CSV, a setup note and a summary with the ratios.
//!
//! # Layout
//! - [`names`]: tool and server names as the CSV writes them.
//! - [`suite`]: the servers, the matrix of cases and the interleaved measuring loop.
//! - [`summary`]: medians, spreads, ratios against the bars; `summary.md` and the CSV.
//!
//! Peers, tools (`wrk`, `ab`, `iperf3`), datasets, the environment and the sampler come
//! from the `lab` crate, the load-generator wrapper from [`crate::measure`]: the suite
//! only decides what to measure and in which order.

pub mod names;
pub mod suite;
pub mod summary;

use std::path::PathBuf;

use anyhow::Context as _;
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

/// Validated options.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub repeat: usize,
    pub seconds: f64,
    pub quick: bool,
    pub groups: Vec<suite::Group>,
    pub out: Option<PathBuf>,
    pub results: PathBuf,
}

impl BenchArgs {
    pub fn into_options(self) -> anyhow::Result<BenchOptions> {
        let groups = self
            .groups
            .iter()
            .map(|g| suite::Group::parse(g))
            .collect::<Result<Vec<_>, _>>()
            .map_err(anyhow::Error::msg)?;
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

/// Runs the suite and prints where the results went and the ratio table.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let opts = args.into_options()?;
    if cfg!(debug_assertions) && !opts.quick {
        eprintln!(
            "servelab bench: WARNING: this is a debug build; run `cargo run --release -p servelab -- bench` for numbers that mean something"
        );
    }
    let dir = suite::run(&opts).context("benchmark suite")?;
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap_or_default();
    println!("{summary}");
    eprintln!("servelab bench: results in {}", dir.display());
    Ok(())
}
