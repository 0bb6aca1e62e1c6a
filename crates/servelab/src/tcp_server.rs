//! `servelab tcp-server`: the receiving (or, for -R clients, sending) end of tcp://
//! throughput runs, like `iperf3 -s`. Runs until Ctrl-C.

use std::net::SocketAddr;

use anyhow::Context as _;
use clap::Args;

#[derive(Debug, Args)]
pub struct TcpServerArgs {
    /// Address to listen on, e.g. 127.0.0.1:5201 or [::1]:5201.
    #[arg(long = "listen", default_value = "127.0.0.1:5201")]
    pub listen: SocketAddr,

    /// Write size when a client asks the server to send (-R): 4096, 128k, 1M.
    #[arg(long = "block", default_value = "128k", value_parser = parse_size)]
    pub block: usize,
}

fn parse_size(s: &str) -> Result<usize, String> {
    loadgen::parse_size(s).map_err(|e| e.to_string())
}

pub fn run(args: TcpServerArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let rt = tokio::runtime::Runtime::new().context("starting the tokio runtime")?;
    rt.block_on(async {
        let listener = loadgen::tcp::bind(args.listen)
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        tracing::info!(addr = %listener.local_addr()?, "tcp-server listening");
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        loadgen::tcp::serve(listener, args.block, shutdown).await?;
        tracing::info!("tcp-server stopped");
        Ok(())
    })
}
