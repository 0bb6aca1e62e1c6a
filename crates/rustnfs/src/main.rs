//! The `rustnfs` binary: parse options, install logging, run the server.

use clap::Parser;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            // The engine logs every connection at info; ours are at debug.
            EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,nfs3_server=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = rustnfs::cli::Args::parse().into_run_config()?;
    rustnfs::run(config).await?;
    Ok(())
}
