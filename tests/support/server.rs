//! The rustnfs binary as a child process that a test can SIGKILL, SIGSTOP and restart on
//! the same port (optionally inside a network namespace); killed on drop.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;

/// A running rustnfs binary.
pub struct ServerProc {
    child: Option<Child>,
    /// Resolved once: `workspace_bin` holds a process-wide lock while any test builds a
    /// binary, and a restart must not wait for that.
    bin: PathBuf,
    pub addr: SocketAddr,
    export: PathBuf,
    netns: Option<String>,
    log: PathBuf,
}

impl ServerProc {
    /// Starts `rustnfs --export EXPORT --listen ADDR` (inside `netns` when given, via
    /// `ip netns exec`, which execs so the pid is rustnfs's) and waits until it accepts.
    /// Its output goes to `log`.
    pub fn start(export: &Path, addr: SocketAddr, netns: Option<&str>, log: &Path) -> ServerProc {
        let mut s = ServerProc {
            child: None,
            bin: common::workspace_bin("rustnfs", "rustnfs"),
            addr,
            export: export.to_path_buf(),
            netns: netns.map(str::to_string),
            log: log.to_path_buf(),
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let bin = &self.bin;
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        cmd.arg("--export")
            .arg(&self.export)
            .arg("--listen")
            .arg(self.addr.to_string())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        self.child = Some(cmd.spawn().expect("cannot start rustnfs"));
        if let Err(e) = self.wait_ready(Duration::from_secs(20)) {
            panic!(
                "{e}; log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }

    /// Waits until the port accepts a TCP connection; returns how long that took.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        loop {
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return Ok(start.elapsed());
            }
            if let Some(st) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(format!("rustnfs exited at start-up: {st}"));
            }
            if start.elapsed() > timeout {
                return Err(format!(
                    "rustnfs did not accept on {} in {timeout:?}",
                    self.addr
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// Sends `sig` to this rustnfs (and only it).
    pub fn signal(&self, sig: i32) {
        if let Some(pid) = self.pid() {
            // SAFETY: kill(2) of the child this value started.
            unsafe { libc::kill(pid, sig) };
        }
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the binary again on the same export and address; returns the time until it
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

/// Resident memory (kB, VmRSS) and the number of open descriptors of `pid`.
pub fn proc_rss_kb_and_fds(pid: i32) -> Option<(u64, usize)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
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
