//! service: what both servers (rustnfs, httpd) share around their own protocol, written
//! once so a fix reaches both.
//!
//! # Layout
//! - [`shutdown`]: [`Stop`], the one stop switch of a server's tasks, and [`signal`]
//!   (SIGINT or SIGTERM) — the workspace's one signal installation — which
//!   [`Stop::on_signal`] turns into a stop, and [`shutdown::on_signal_thread`] hands to a
//!   program without a runtime (servelab's measuring commands).
//! - [`reload`]: [`Hangups`], SIGHUP, for a server that reads its configuration again.
//! - [`metrics`]: `/metrics` (Prometheus text) and `/metrics.json` from a [`Source`]
//!   (a `latency` registry, plus what a server adds), behind a connection cap.
//! - [`RunConfig`]: what a server binary's `run(config)` takes: the listening address,
//!   the optional metrics address, the server's own configuration.
//! - [`healthcheck`]: `--healthcheck` around a server's own probe; [`probe_addr`], the
//!   address the probe dials for a listening address.
//! - [`init_logging`]: the `tracing` subscriber a server binary installs.
//! - [`Chain`]: an error and its causes as one line, for logs and a binary's last words.

mod error_chain;
pub mod metrics;
pub mod reload;
pub mod shutdown;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub use error_chain::{Chain, io_reason};
pub use metrics::Source;
pub use reload::Hangups;
pub use shutdown::{Stop, signal};

/// What a server's `run(config)` takes: both servers have this shape.
#[derive(Debug, Clone)]
pub struct RunConfig<C> {
    /// Where the server's own protocol is served.
    pub listen: SocketAddr,
    /// Where `/metrics` and `/metrics.json` are served, if anywhere.
    pub metrics: Option<SocketAddr>,
    /// The server's own configuration.
    pub server: C,
}

/// The address to probe for a server listening on `listen`: a wildcard address
/// (`0.0.0.0`, `[::]`) becomes the loopback address of the same family.
pub fn probe_addr(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

/// `--healthcheck` of a server listening on `listen`: runs `probe` (the server's own
/// protocol probe) against [`probe_addr`]`(listen)` on a small runtime of its own and
/// prints `healthy: <its line>`. The inner `Err` is the probe's reason: unhealthy.
pub fn healthcheck<F, Fut, E>(listen: SocketAddr, probe: F) -> std::io::Result<Result<(), E>>
where
    F: FnOnce(SocketAddr) -> Fut,
    Fut: std::future::Future<Output = Result<String, E>>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(rt.block_on(probe(probe_addr(listen))).map(|line| {
        println!("healthy: {line}");
    }))
}

/// Installs the `tracing` subscriber of a server binary on stderr: `default` as the
/// filter unless `RUST_LOG` says otherwise, colour only when stderr is a terminal (logs
/// collected by Docker, systemd or a file must not carry escape codes).
pub fn init_logging(default: &str) {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default.into()),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_listen_becomes_loopback() {
        let p = |s: &str| probe_addr(s.parse().unwrap()).to_string();
        assert_eq!(p("0.0.0.0:2049"), "127.0.0.1:2049");
        assert_eq!(p("[::]:8080"), "[::1]:8080");
        assert_eq!(p("10.1.2.3:12049"), "10.1.2.3:12049");
        assert_eq!(p("[::1]:80"), "[::1]:80");
    }
}
