//! The `httpd` binary: parse flags, install logging, run the server ([`httpd::cli`]).

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let args = httpd::cli::Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "httpd=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    args.run()?;
    Ok(())
}
