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
}
