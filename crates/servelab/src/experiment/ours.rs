//! Our own servers as child processes (`servelab httpd …`, `servelab rustnfs …`), each
//! with its own metrics endpoint, so every scenario runs as separate programs the way it
//! is deployed and its cost can be measured on its own. Supervision is `lab`'s.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};
use lab::process::Supervised;

/// A server process started from this executable; SIGTERM (graceful, prints its summary
/// into its log) and then SIGKILL on drop.
pub struct ServerProcess {
    pub name: String,
    pub addr: SocketAddr,
    pub metrics: SocketAddr,
    child: Supervised,
}

impl ServerProcess {
    /// Runs `servelab <program> <args> --listen 127.0.0.1:P --metrics 127.0.0.1:M`,
    /// logging to `log_dir/<name>.log`, and waits until both ports accept.
    pub fn start(
        name: &str,
        program: &str,
        args: &[String],
        log_dir: &Path,
    ) -> anyhow::Result<ServerProcess> {
        Self::start_with(name, program, args, log_dir, |_| {})
    }

    /// As [`ServerProcess::start`], letting `adjust` change the command first (a wrapper
    /// program, a network namespace, environment).
    pub fn start_with(
        name: &str,
        program: &str,
        args: &[String],
        log_dir: &Path,
        adjust: impl FnOnce(&mut Command),
    ) -> anyhow::Result<ServerProcess> {
        let exe = std::env::current_exe().context("cannot find servelab itself")?;
        let addr = SocketAddr::from(([127, 0, 0, 1], lab::free_port()?));
        let metrics = SocketAddr::from(([127, 0, 0, 1], lab::free_port()?));
        Self::start_at(name, &exe, program, args, log_dir, addr, metrics, adjust)
    }

    /// Starts on given addresses (e.g. inside a network namespace).
    #[allow(clippy::too_many_arguments)]
    pub fn start_at(
        name: &str,
        exe: &Path,
        program: &str,
        args: &[String],
        log_dir: &Path,
        addr: SocketAddr,
        metrics: SocketAddr,
        adjust: impl FnOnce(&mut Command),
    ) -> anyhow::Result<ServerProcess> {
        let log_path = log_dir.join(format!("{}.log", file_name(name)));
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        let log2 = log.try_clone()?;
        let mut cmd = Command::new(exe);
        cmd.arg(program)
            .args(args)
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--metrics")
            .arg(metrics.to_string())
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        adjust(&mut cmd);
        let mut child = Supervised::spawn(name, &mut cmd, Some(&log_path))?;
        child.wait_ready(&[addr, metrics], Duration::from_secs(20))?;
        Ok(ServerProcess {
            name: name.to_string(),
            addr,
            metrics,
            child,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// Its metrics endpoint.
    pub fn metrics(&self) -> Metrics {
        Metrics {
            name: self.name.clone(),
            addr: self.metrics,
        }
    }
}

/// One of our servers' metrics endpoints, scraped for the histograms it keeps (httpd's
/// request phases, rustnfs's procedures).
#[derive(Debug, Clone)]
pub struct Metrics {
    pub name: String,
    pub addr: SocketAddr,
}

impl Metrics {
    /// The server's cumulative histograms from `/metrics.json`.
    pub fn scrape(&self) -> anyhow::Result<latency::Snapshot> {
        let (status, body) = lab::http::get(self.addr, "/metrics.json", Duration::from_secs(10))?;
        if status != 200 {
            bail!("{}: /metrics.json answered {status}", self.name);
        }
        let value: serde_json::Value = serde_json::from_slice(&body)
            .with_context(|| format!("{}: /metrics.json is not JSON", self.name))?;
        latency::Snapshot::from_json(&value)
            .with_context(|| format!("{}: /metrics.json holds no histograms", self.name))
    }

    /// What the server recorded since `before` (an earlier [`Metrics::scrape`]).
    pub fn scrape_since(&self, before: &latency::Snapshot) -> anyhow::Result<latency::Snapshot> {
        self.scrape()?
            .since(before)
            .with_context(|| format!("{}: the histograms went back in time", self.name))
    }
}

/// `A (NFS: rustnfs)` → `a-nfs-rustnfs`: a scenario name as a log file name.
pub fn file_name(name: &str) -> String {
    name.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}
