//! `servelab bench`: the side-by-side suite — our servers and load generator against
//! nginx, Apache, NFS-Ganesha, wrk, ab and iperf3 on one machine, interleaved and
//! repeated, written as raw CSV, a setup note and a summary with the ratios.
//!
//! # Layout
//! - [`names`]: tool and server names as the CSV writes them.
//! - [`options`]: the command line, validated into `BenchOptions`; the groups.
//! - [`suite`]: the run context — preparation, the interleaved measuring loop, files.
//! - [`servers`]: the servers and tools under test and how the loop reaches them.
//! - [`cases`]: the matrix of cases one repeat runs.
//! - [`runs`]: one measurement each (load generator, nfs-cat, TCP), as a `Measured`.
//! - [`bootset`]: the boot-like file set and its 16-client measurement.
//! - [`record`]: one row per measurement, the skips, `results.csv`.
//! - [`ratios`]: per-repeat ratios against the peers, the bars, the memory checks.
//! - [`setup`]: the setup note, `setup.md`.
//! - [`summary`]: `summary.md` — medians, spreads and the ratios against their bars.
//!
//! Peers, tools (`wrk`, `ab`, `iperf3`), datasets, the environment and the sampler come
//! from the `lab` crate; servers, probes, progress and the load-generator wrapper from
//! [`crate::experiment`]: the suite only decides what to measure and in which order.

pub mod bootset;
pub mod cases;
pub mod names;
pub mod options;
pub mod ratios;
pub mod record;
pub mod runs;
pub mod servers;
pub mod setup;
pub mod suite;
pub mod summary;

use anyhow::Context as _;

pub use options::BenchArgs;

/// Runs the suite and prints where the results went and the ratio table.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let opts = args.into_options()?;
    crate::experiment::interrupt::install();
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
