//! `servelab tcp-server`: the receiving (or, for -R clients, sending) end of tcp://
//! throughput runs, like `iperf3 -s`. Runs until SIGINT or SIGTERM (the servers' own
//! signal handling, `service::signal`).

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
    service::init_logging("info");
    let rt = tokio::runtime::Runtime::new().context("starting the tokio runtime")?;
    rt.block_on(async {
        let listener = loadgen::tcp::bind(args.listen)
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        tracing::info!(addr = %listener.local_addr()?, "tcp-server listening");
        loadgen::tcp::serve(listener, args.block, service::signal()).await?;
        tracing::info!("tcp-server stopped");
        Ok(())
    })
}
