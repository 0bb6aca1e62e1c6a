//! The `rustnfs` binary: parse options, install logging, run the server (or its probe).

use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    rustnfs::cli::Args::parse().run()?;
    Ok(())
}
