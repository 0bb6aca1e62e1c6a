//! The `httpd` binary: parse flags, build a validated config, run the server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;

/// A static file server for a local directory or an NFSv3 export, timing every request.
#[derive(Parser, Debug)]
#[command(name = "httpd", version)]
struct Args {
    /// Address to listen on, e.g. 127.0.0.1:8080 or [::]:80.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Serve this local directory.
    #[arg(long, conflicts_with = "nfs", required_unless_present = "nfs")]
    root: Option<PathBuf>,
    /// Serve this NFSv3 export: nfs://HOST[:PORT]/EXPORT[//PATH][?nfsport=N&mountport=N].
    #[arg(long)]
    nfs: Option<String>,
    /// Serve Prometheus /metrics and /metrics.json on this address.
    #[arg(long)]
    metrics: Option<SocketAddr>,
    /// Write one JSON line per request with phase times to FILE, or `-` for stdout.
    #[arg(long, value_name = "FILE|-")]
    access_log: Option<String>,
    /// Tokio worker threads (default: one per CPU).
    #[arg(long)]
    workers: Option<usize>,
    /// List directories that have no index.html (otherwise 403).
    #[arg(long)]
    list: bool,
    /// Follow symlinks that point outside the root (local backend).
    #[arg(long)]
    follow_symlinks: bool,
    /// Most simultaneous connections.
    #[arg(long, default_value_t = 10_000)]
    max_connections: usize,
    /// Seconds a client has to send its request headers (also the keep-alive idle limit).
    #[arg(long, default_value_t = 30)]
    header_timeout: u64,
    /// Seconds a connection may move no byte before it is closed.
    #[arg(long, default_value_t = 60)]
    idle_timeout: u64,
    /// Send local files with read + write instead of sendfile (for comparison).
    #[arg(long)]
    no_sendfile: bool,
    /// NFS: connections in the client pool.
    #[arg(long, default_value_t = 8)]
    nfs_connections: usize,
    /// NFS: milliseconds looked-up handles and attributes are reused (0 = never).
    #[arg(long, default_value_t = 1000)]
    nfs_attr_ttl_ms: u64,
    /// NFS: seconds before an unanswered NFS call fails the request with 504.
    #[arg(long, default_value_t = 5)]
    nfs_timeout: u64,
}

fn config(args: &Args) -> anyhow::Result<httpd::Config> {
    let mut cfg = match (&args.root, &args.nfs) {
        (Some(root), None) => {
            if !root.is_dir() {
                bail!("--root {}: not a directory", root.display());
            }
            httpd::Config::local(root)
        }
        (None, Some(url)) => {
            nfsclient::NfsUrl::parse(url)?;
            httpd::Config::nfs(url)
        }
        _ => bail!("give exactly one of --root DIR or --nfs nfs://..."),
    };
    cfg.list_dirs = args.list;
    cfg.follow_symlinks = args.follow_symlinks;
    cfg.max_connections = args.max_connections;
    cfg.header_timeout = Duration::from_secs(args.header_timeout);
    cfg.idle_timeout = Duration::from_secs(args.idle_timeout);
    cfg.sendfile = !args.no_sendfile;
    cfg.nfs_connections = args.nfs_connections;
    cfg.nfs_attr_ttl = Duration::from_millis(args.nfs_attr_ttl_ms);
    cfg.nfs_timeout = Duration::from_secs(args.nfs_timeout);
    cfg.access_log = args.access_log.as_deref().map(|p| match p {
        "-" => httpd::AccessLog::Stdout,
        p => httpd::AccessLog::File(p.into()),
    });
    cfg.validate()?;
    Ok(cfg)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "httpd=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cfg = config(&args)?;
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.workers {
        if n == 0 {
            bail!("--workers must be at least 1");
        }
        rt.worker_threads(n);
    }
    let rt = rt
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(httpd::run(cfg, args.listen, args.metrics))?;
    Ok(())
}
