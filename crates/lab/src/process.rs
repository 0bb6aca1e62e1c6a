//! Child processes under supervision: started so the kernel kills them when we die,
//! waited for until their ports accept, stopped with SIGTERM → grace → SIGKILL, and
//! listed in one registry so an interrupted run can stop all of them.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::{LabError, Result};

/// Every supervised child that is running, so an interrupted run (Ctrl-C, SIGTERM) can
/// stop them gracefully before it exits.
static LIVE_CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Adds a child started outside [`Supervised`] to the registry [`terminate_all`] stops.
pub fn register(pid: u32) {
    LIVE_CHILDREN.lock().push(pid);
}

/// Removes a child from the registry once it has been reaped.
pub fn unregister(pid: u32) {
    LIVE_CHILDREN.lock().retain(|p| *p != pid);
}

/// Sends SIGTERM to every live supervised child and waits up to 5 s for them to go.
pub fn terminate_all() {
    let pids: Vec<u32> = LIVE_CHILDREN.lock().clone();
    for pid in &pids {
        // SAFETY: kill(2) on a pid we started and have not reaped (still registered).
        unsafe {
            libc::kill(*pid as i32, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && pids.iter().any(|p| is_running(*p)) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// True while `pid` exists and is not a zombie.
pub fn is_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, r)| !r.trim_start().starts_with('Z'))
    })
}

/// Asks the kernel to SIGKILL the child when the thread that started it dies, so a
/// harness killed with SIGKILL leaves nothing behind. Start children from a thread that
/// lives as long as they should (the main thread).
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: the closure runs between fork and exec and only calls prctl(2), which is
    // async-signal-safe; it touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// The last `lines` lines of `text`.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The last lines of a log file (empty when it cannot be read).
pub fn log_tail(path: &Path, lines: usize) -> String {
    std::fs::read_to_string(path)
        .map(|t| tail(&t, lines))
        .unwrap_or_default()
}

/// True when something accepts on `addr` within 200 ms.
pub fn accepts(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// A running child: stopped (SIGTERM, `grace`, SIGKILL) and reaped on drop.
pub struct Supervised {
    name: String,
    child: Child,
    /// Where the child writes its log, for the tail in error messages.
    log: Option<PathBuf>,
    grace: Duration,
}

impl Supervised {
    /// Spawns `cmd` dying with its parent and registers it. `log` is the file the child
    /// writes to (its stdout/stderr are the caller's business).
    pub fn spawn(name: &str, cmd: &mut Command, log: Option<&Path>) -> Result<Supervised> {
        die_with_parent(cmd);
        let child = cmd
            .spawn()
            .map_err(|e| LabError::io(format!("cannot start {name}"), e))?;
        register(child.id());
        Ok(Supervised {
            name: name.to_string(),
            child,
            log: log.map(Path::to_path_buf),
            grace: Duration::from_secs(10),
        })
    }

    /// How long [`Supervised::stop`] waits after SIGTERM before SIGKILL.
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its piped stdout and stderr (for a tool whose output is read), once.
    pub fn take_pipes(&mut self) -> (Option<ChildStdout>, Option<ChildStderr>) {
        (self.child.stdout.take(), self.child.stderr.take())
    }

    /// Its exit status once it exits within `limit`; `None` if it still runs then.
    pub fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.try_wait() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its exit status if it has exited.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    fn tail(&self) -> String {
        self.log
            .as_deref()
            .map(|p| log_tail(p, 8))
            .unwrap_or_default()
    }

    /// Waits until every address accepts a connection. On exit or timeout the child is
    /// killed and the error carries the tail of its log.
    pub fn wait_ready(&mut self, addrs: &[SocketAddr], timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if addrs.iter().all(|a| accepts(*a)) {
                return Ok(());
            }
            if let Some(status) = self.try_wait() {
                unregister(self.child.id());
                return Err(LabError::Exited {
                    name: self.name.clone(),
                    status,
                    log_tail: self.tail(),
                });
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(LabError::NotReady {
                    name: self.name.clone(),
                    seconds: timeout.as_secs(),
                    log_tail: self.tail(),
                });
            }
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    /// Sends `sig` to the child (and only it) while it has not been reaped — SIGSTOP and
    /// SIGCONT for a server that hangs, SIGKILL for one that crashes.
    pub fn signal(&mut self, sig: i32) {
        if self.try_wait().is_none() {
            // SAFETY: kill(2) on our own child, which has not been reaped yet.
            unsafe {
                libc::kill(self.child.id() as i32, sig);
            }
            if sig == libc::SIGSTOP {
                wait_until_stopped(self.child.id(), Duration::from_secs(5));
            }
        }
    }

    /// SIGKILL and reap, now.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        unregister(self.child.id());
    }

    /// SIGTERM (a graceful exit; our servers print their summary), up to the grace time,
    /// then SIGKILL.
    pub fn stop(&mut self) {
        if self.try_wait().is_none() {
            // SAFETY: kill(2) on our own child, which has not been reaped yet.
            unsafe {
                libc::kill(self.child.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + self.grace;
            while Instant::now() < deadline {
                if self.try_wait().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.kill();
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits (up to `limit`) until every thread of `pid` is stopped (`T` in its
/// `/proc/PID/task/TID/stat`). kill(2) returns once SIGSTOP is queued, and the threads
/// stop when they next run: on a loaded machine a "stopped" rustnfs answered 1.6 MB of
/// READs after the signal, and a test of what a stopped server does saw them.
fn wait_until_stopped(pid: u32, limit: Duration) {
    let deadline = Instant::now() + limit;
    let all_stopped = || -> bool {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return true; // gone, or no /proc: nothing to wait for
        };
        tasks.flatten().all(|t| {
            std::fs::read_to_string(t.path().join("stat"))
                .ok()
                .and_then(|stat| {
                    // The state follows the command name's closing parenthesis.
                    let after = stat.rsplit_once(')')?.1;
                    after
                        .split_whitespace()
                        .next()
                        .map(|state| state == "T" || state == "t")
                })
                .unwrap_or(true)
        })
    };
    while !all_stopped() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_that_exits_reports_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("x.log");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("echo it broke > {}; exit 3", log.display()));
        let mut c = Supervised::spawn("broken", &mut cmd, Some(&log)).unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], crate::free_port().unwrap()));
        let err = c
            .wait_ready(&[addr], Duration::from_secs(5))
            .unwrap_err()
            .to_string();
        assert!(err.contains("broken exited"), "{err}");
        assert!(err.contains("it broke"), "{err}");
    }

    #[test]
    fn sigstop_returns_once_the_child_is_stopped() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let mut c = Supervised::spawn("sleeper", &mut cmd, None).unwrap();
        let pid = c.child.id();
        c.signal(libc::SIGSTOP);
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let state = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .next()
            .unwrap();
        assert_eq!(state, "T", "{stat}");
        c.signal(libc::SIGCONT);
        c.kill();
    }

    #[test]
    fn stop_escalates_to_sigkill() {
        // A child that ignores SIGTERM is killed after the grace time.
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg("trap '' TERM; sleep 30");
        let mut c = Supervised::spawn("stubborn", &mut cmd, None)
            .unwrap()
            .with_grace(Duration::from_millis(200));
        let pid = c.pid();
        std::thread::sleep(Duration::from_millis(100));
        assert!(LIVE_CHILDREN.lock().contains(&pid));
        let t = Instant::now();
        c.stop();
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(!is_running(pid));
        assert!(!LIVE_CHILDREN.lock().contains(&pid));
    }
}
