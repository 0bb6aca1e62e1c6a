//! The command-line surface: one subcommand per module (`load.rs`, `tcp_server.rs`, …).

use clap::{Parser, Subcommand};

/// servelab: measure where the time goes when an HTTP server serves files from NFS.
#[derive(Debug, Parser)]
#[command(name = "servelab", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate load against http://, nfs:// or tcp:// and print ab-compatible results
    /// with percentiles (replaces ab, wrk and iperf3 -c).
    Load(crate::load::LoadArgs),
    /// Serve the tcp:// throughput protocol for `servelab load tcp://…` (like iperf3 -s).
    TcpServer(crate::tcp_server::TcpServerArgs),
    /// Scenario A (HTTP from NFS) against scenario B (HTTP from local disk), with
    /// baselines, on loopback; writes results/<date>-<host>/.
    Compare(crate::compare_cmd::CompareArgs),
    /// Re-render a saved comparison, or merge `servelab load --json` files (--merge).
    Report(crate::report_cmd::ReportArgs),
    /// Run the httpd static server (the same options as the `httpd` binary).
    Httpd(httpd::cli::Args),
    /// Run the rustnfs NFS server, v3 and v4.0-4.2 (the same options as the `rustnfs` binary).
    Rustnfs(rustnfs::cli::Args),
    /// The side-by-side benchmark suite: httpd, nginx, Apache; rustnfs, Ganesha; servelab
    /// load, wrk, ab, iperf3 — interleaved and repeated; writes results/<date>-<host>/.
    Bench(crate::bench::BenchArgs),
    /// Two `servelab compare` runs compared row by row: each figure's change with its
    /// interval and significance; writes diff.md and diff.html beside NEW.
    Diff(crate::diff::DiffArgs),
}
