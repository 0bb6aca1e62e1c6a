//! `lab`: the harness every servelab measurement and end-to-end test stands on.
//!
//! # Layout
//! - [`process`]: child processes under supervision — killed by the kernel when we die,
//!   waited for until they accept connections (with their log's tail when they do not),
//!   stopped with SIGTERM → grace → SIGKILL, listed in one registry of live children.
//! - [`peers`]: third-party servers started next to ours: nginx, Apache, NFS-Ganesha
//!   (with rpcbind, serialised across processes and retried).
//! - [`tools`]: the reference clients `wrk`, `ab`, `iperf3` — run, parsed, versioned.
//! - [`affinity`]: CPU pinning of the client and the servers, and how busy CPUs were.
//! - [`dataset`]: the one seeded dataset generator.
//! - [`environment`]: what the machine was, and how busy ([`environment::Noise`]).
//! - [`fsinfo`]: the file system a directory is on (type, device, ext4 journal).
//! - [`sampler`]: RSS, CPU, context switches and open files of a process tree (or a
//!   cgroup), sampled during a run.
//! - [`http`]: the one small blocking HTTP/1 client: a GET or raw request per
//!   connection for scraping and byte checks, a keep-alive [`http::Connection`].
//! - `inproc` (feature `inproc`): rustnfs and httpd running in-process on loopback, for
//!   tests and benches.
//! - [`free_port`], [`find_program`], [`in_ci`]: the small things every caller needs.

pub mod affinity;
pub mod dataset;
pub mod environment;
pub mod fsinfo;
pub mod http;
#[cfg(feature = "inproc")]
pub mod inproc;
pub mod peers;
pub mod process;
pub mod sampler;
pub mod skip;
pub mod tools;

use std::path::PathBuf;

/// What can go wrong in the harness. Each message says its own layer only — what was
/// being done — and keeps the error under it as its source (print the chain: `{:#}` of
/// an `anyhow::Error`, or `service::Chain`); a child's log tail follows on its own lines.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A program or feature this machine lacks; the text says how to get it.
    #[error("{0}")]
    Missing(String),
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A tool's output that cannot be read.
    #[error("{what}")]
    Unreadable {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// A server run in-process returned an error of its own.
    #[error("{what}")]
    Server {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A child exited before it was ready.
    #[error("{name} exited with {status}; its log ends:\n{log_tail}")]
    Exited {
        name: String,
        status: std::process::ExitStatus,
        log_tail: String,
    },
    /// A child ran but did not accept connections in time.
    #[error("{name} did not accept connections within {seconds} s; its log ends:\n{log_tail}")]
    NotReady {
        name: String,
        seconds: u64,
        log_tail: String,
    },
    /// A tool ran and failed, or printed something we cannot read.
    #[error("{0}")]
    Failed(String),
}

impl LabError {
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        LabError::Io {
            what: what.into(),
            source,
        }
    }
}

pub type Result<T, E = LabError> = std::result::Result<T, E>;

/// A TCP port on 127.0.0.1 that was free a moment ago (for programs that must be told a
/// port rather than handed a bound listener).
pub fn free_port() -> Result<u16> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| LabError::io("no free port on 127.0.0.1", e))
}

/// `name` on `PATH`, or in the sbin directories a non-login root shell may miss.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into(), "/usr/bin".into()])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// True under CI (`CI=true`), where every external tool must be present.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// Whether this process runs as root (peers drop privileges, mounts need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// CPUs online on the machine, whatever this process is pinned to: what the load
/// average is measured against (a client pinned to one CPU still shares a machine of N).
pub fn machine_cores() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 { n as usize } else { cores() }
}

/// Cores this process may use.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_says_its_own_layer_and_keeps_its_cause() {
        let e = LabError::io(
            "cannot connect to 127.0.0.1:1",
            std::io::ErrorKind::ConnectionRefused.into(),
        );
        assert_eq!(e.to_string(), "cannot connect to 127.0.0.1:1");
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("connection refused"));
    }

    #[test]
    fn finds_sh_and_a_port() {
        assert!(find_program("sh").is_some());
        assert!(find_program("no-such-program-here").is_none());
        assert!(free_port().unwrap() > 0);
    }
}
