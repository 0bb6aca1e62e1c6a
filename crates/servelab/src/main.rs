//! `servelab`: parse the command line and hand each subcommand to its module.

mod cli;
mod load;
mod tcp_server;

use clap::Parser as _;

fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    match cli.command {
        cli::Command::Load(args) => load::run(args),
        cli::Command::TcpServer(args) => tcp_server::run(args),
    }
}
