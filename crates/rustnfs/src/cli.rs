//! Command-line and environment options, turned into a validated [`RunConfig`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::Error;
use crate::config::{Config, parse_allow, parse_bool, parse_squash};

/// rustnfs: an instrumented userspace NFSv3 server exporting one directory.
///
/// NFSv3, MOUNT and a portmapper answer on one TCP port, so clients pass it as both
/// `port=` and `mountport=`. Environment variables use the names of the popular NFS
/// server images (SHARED_DIRECTORY, READ_ONLY, PERMITTED).
#[derive(Debug, Parser)]
#[command(name = "rustnfs", version)]
pub struct Args {
    /// Directory to export (clients see it as `/`).
    #[arg(
        long,
        env = "SHARED_DIRECTORY",
        required_unless_present = "healthcheck"
    )]
    pub export: Option<PathBuf>,
    /// Address and port to serve on; IPv6 as `[::]:2049`.
    #[arg(long, env = "RUSTNFS_LISTEN", default_value = "0.0.0.0:2049")]
    pub listen: SocketAddr,
    /// Refuse every change with NFS3ERR_ROFS (env: true/1/yes).
    #[arg(long, env = "READ_ONLY", default_value = "false", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub read_only: bool,
    /// Client networks allowed to connect: comma-separated CIDRs or addresses; `*` = all.
    #[arg(long, env = "PERMITTED", default_value = "*")]
    pub allow: String,
    /// Map every client to this owner: `UID:GID` (e.g. 65534:65534).
    #[arg(long, env = "SQUASH")]
    pub squash: Option<String>,
    /// Serve Prometheus `/metrics` and `/metrics.json` on this address.
    #[arg(long, env = "RUSTNFS_METRICS")]
    pub metrics: Option<SocketAddr>,
    /// Most client connections served at once; more are closed at accept.
    #[arg(long, env = "RUSTNFS_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,
    /// Close a connection that sends nothing for this many seconds.
    #[arg(long, env = "RUSTNFS_IDLE_TIMEOUT", default_value_t = 300)]
    pub idle_timeout: u64,
    /// Do not serve: send an RPC NULL call to NFSv3 on the --listen address (0.0.0.0 /
    /// [::] → loopback), print one line, exit 0 when it is accepted within 3 s, else 1.
    /// For container health checks (`HEALTHCHECK CMD ["/rustnfs", "--healthcheck"]`).
    #[arg(long)]
    pub healthcheck: bool,
}

/// Everything [`crate::run`] needs.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub listen: SocketAddr,
    pub metrics: Option<SocketAddr>,
    pub server: Config,
}

impl Args {
    /// Validates the options (the export must be a directory).
    pub fn into_run_config(self) -> Result<RunConfig, Error> {
        let export = self
            .export
            .ok_or_else(|| Error::Config("--export (SHARED_DIRECTORY) is required".into()))?;
        if !export.is_dir() {
            let what = if export.exists() {
                "not a directory"
            } else {
                "no such directory"
            };
            return Err(Error::Config(format!(
                "--export {}: {what}",
                export.display()
            )));
        }
        if self.max_connections == 0 {
            return Err(Error::Config("--max-connections must be at least 1".into()));
        }
        let mut server = Config::new(export);
        server.read_only = self.read_only;
        server.allow = parse_allow(&self.allow)?;
        server.squash = self.squash.as_deref().map(parse_squash).transpose()?;
        server.max_connections = self.max_connections;
        server.idle_timeout = Duration::from_secs(self.idle_timeout.max(1));
        Ok(RunConfig {
            listen: self.listen,
            metrics: self.metrics,
            server,
        })
    }
}

impl Args {
    /// Serves until SIGINT/SIGTERM on a new multi-threaded runtime, or with
    /// `--healthcheck` probes the server and prints one line (`Err` = unhealthy).
    pub fn run(self) -> Result<(), Error> {
        if self.healthcheck {
            return self.healthcheck();
        }
        let config = self.into_run_config()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        rt.block_on(crate::run(config))
    }

    /// `--healthcheck`: see [`crate::health::probe`].
    pub fn healthcheck(&self) -> Result<(), Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let addr = crate::health::probe_addr(self.listen);
        let line = rt
            .block_on(crate::health::probe(addr, crate::health::TIMEOUT))
            .map_err(Error::Unhealthy)?;
        println!("healthy: {line}");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flags() {
        let dir = std::env::temp_dir();
        let d = dir.to_str().unwrap();
        let a = Args::try_parse_from([
            "rustnfs",
            "--export",
            d,
            "--listen",
            "[::1]:0",
            "--read-only",
            "--allow",
            "10.0.0.0/8",
            "--squash",
            "1:2",
        ])
        .unwrap();
        let rc = a.into_run_config().unwrap();
        assert!(rc.server.read_only);
        assert_eq!(rc.server.squash, Some((1, 2)));
        assert_eq!(rc.server.allow.len(), 1);
        assert!(rc.listen.is_ipv6());
        let a = Args::try_parse_from(["rustnfs", "--export", d, "--read-only", "no"]).unwrap();
        assert!(!a.read_only);
        let bad = Args::try_parse_from(["rustnfs", "--export", "/nonexistent/x"]).unwrap();
        assert!(bad.into_run_config().is_err());
        // The probe needs no export.
        let h = Args::try_parse_from(["rustnfs", "--healthcheck", "--listen", "0.0.0.0:1"]);
        assert!(h.unwrap().healthcheck);
    }
}
