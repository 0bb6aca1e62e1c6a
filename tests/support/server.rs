//! Our binaries (rustnfs, httpd) as children a test can SIGKILL, SIGSTOP and restart on
//! the same address (optionally inside a network namespace), on the harness's
//! supervisor (`lab::process::Supervised`: dies with the test, log tail on a failed
//! start); killed on drop.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lab::process::Supervised;

use crate::common;

/// How to start a binary: built once with [`ServerProc::binary`], then
/// [`Spec::start`]ed.
pub struct Spec {
    name: String,
    /// Resolved once: `workspace_bin` holds a process-wide lock while any test builds a
    /// binary, and a restart must not wait for that.
    bin: PathBuf,
    args: Vec<OsString>,
    addr: SocketAddr,
    /// Further addresses that must accept too (a metrics port).
    also: Vec<SocketAddr>,
    netns: Option<String>,
    /// Where stdout and stderr go (appended); discarded when `None`.
    log: Option<PathBuf>,
    rust_log: &'static str,
    /// Environment variables removed from the child's (after the defaults).
    env_removed: Vec<&'static str>,
}

impl Spec {
    pub fn args<I, S>(mut self, args: I) -> Spec
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Also wait for `addr` to accept before the start counts as done.
    pub fn also_ready(mut self, addr: SocketAddr) -> Spec {
        self.also.push(addr);
        self
    }

    /// Run inside network namespace `ns` (`ip netns exec`, which execs, so the pid is
    /// the server's).
    pub fn netns(mut self, ns: Option<&str>) -> Spec {
        self.netns = ns.map(str::to_string);
        self
    }

    pub fn log(mut self, path: &Path) -> Spec {
        self.log = Some(path.to_path_buf());
        self
    }

    /// Removes `name` from the child's environment (`NO_ROOT_SQUASH`, which the
    /// harness sets for one-export servers, is refused beside `--exports`).
    pub fn env_remove(mut self, name: &'static str) -> Spec {
        self.env_removed.push(name);
        self
    }

    /// `RUST_LOG` for the child (`warn` unless set).
    pub fn rust_log(mut self, level: &'static str) -> Spec {
        self.rust_log = level;
        self
    }

    /// Starts it and waits (20 s at most) until every address accepts.
    pub fn start(self) -> ServerProc {
        let mut s = ServerProc {
            spec: self,
            child: None,
        };
        s.spawn();
        s
    }
}

/// A running binary of ours.
pub struct ServerProc {
    spec: Spec,
    child: Option<Supervised>,
}

impl ServerProc {
    /// `package`'s binary `name`, which will listen on `addr` once started.
    pub fn binary(package: &str, name: &str, addr: SocketAddr) -> Spec {
        Spec {
            name: name.to_string(),
            bin: common::workspace_bin(package, name),
            args: Vec::new(),
            addr,
            also: Vec::new(),
            netns: None,
            log: None,
            rust_log: "warn",
            env_removed: Vec::new(),
        }
    }

    /// `rustnfs --export EXPORT --listen ADDR` (inside `netns` when given), its output
    /// appended to `log`.
    pub fn start(export: &Path, addr: SocketAddr, netns: Option<&str>, log: &Path) -> ServerProc {
        ServerProc::binary("rustnfs", "rustnfs", addr)
            .args([OsString::from("--export"), export.into()])
            .args(["--listen".to_string(), addr.to_string()])
            .netns(netns)
            .log(log)
            .start()
    }

    pub fn addr(&self) -> SocketAddr {
        self.spec.addr
    }

    fn spawn(&mut self) {
        let spec = &self.spec;
        let mut cmd = match &spec.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(&spec.bin);
                c
            }
            None => Command::new(&spec.bin),
        };
        cmd.args(&spec.args)
            .env("RUST_LOG", spec.rust_log)
            // The harness's clients are root on loopback and write into root-owned
            // directories, as with the Ganesha peer's No_Root_Squash; a test of squashing
            // passes `--no-root-squash false` (a flag overrides the environment).
            .env("NO_ROOT_SQUASH", "true")
            .stdin(Stdio::null());
        for name in &spec.env_removed {
            cmd.env_remove(name);
        }
        match &spec.log {
            Some(path) => {
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap();
                cmd.stdout(log.try_clone().unwrap()).stderr(log);
            }
            None => {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
        let mut child = Supervised::spawn(&spec.name, &mut cmd, spec.log.as_deref()).unwrap();
        let mut ready = vec![spec.addr];
        ready.extend(&spec.also);
        if let Err(e) = child.wait_ready(&ready, Duration::from_secs(20)) {
            panic!("{e}");
        }
        self.child = Some(child);
    }

    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.pid() as i32)
    }

    /// Sends `sig` to this server (and only it).
    pub fn signal(&mut self, sig: i32) {
        if let Some(c) = self.child.as_mut() {
            c.signal(sig);
        }
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill();
        }
    }

    /// Starts the binary again with the same arguments; returns the time until it
    /// accepted.
    pub fn restart(&mut self) -> Duration {
        self.kill();
        let t = Instant::now();
        self.spawn();
        t.elapsed()
    }

    /// Resident memory (kB) and open descriptors of the process, from /proc.
    pub fn rss_kb_and_fds(&self) -> Option<(u64, usize)> {
        proc_rss_kb_and_fds(self.pid()?)
    }
}

/// Resident memory (kB, VmRSS) and the number of open descriptors of `pid`; None when
/// either cannot be read (`lab::sampler::open_fds` counts an unreadable fd/ as 0, which
/// would make a descriptor-growth check pass without measuring anything).
pub fn proc_rss_kb_and_fds(pid: i32) -> Option<(u64, usize)> {
    let rss = lab::sampler::rss_bytes(pid as u32)? / 1024;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some((rss, fds))
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        // A stopped process must be continued to die promptly under some kernels' job
        // control; SIGKILL works on stopped processes on Linux, CONT is harmless.
        self.signal(libc::SIGCONT);
        self.kill();
    }
}
