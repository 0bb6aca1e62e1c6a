//! Our own servers as child processes (`servelab httpd …`, `servelab rustnfs …`), each
//! with its own metrics endpoint, so every scenario runs as separate programs the way it
//! is deployed and its memory can be measured on its own.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::baselines::free_port;
use super::httpget;

/// Every server process this run started and has not stopped yet, so an interrupted
/// run (Ctrl-C, SIGTERM) can stop them gracefully before it exits.
static LIVE_CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

pub fn register_child(pid: u32) {
    LIVE_CHILDREN.lock().push(pid);
}

pub fn unregister_child(pid: u32) {
    LIVE_CHILDREN.lock().retain(|p| *p != pid);
}

/// Sends SIGTERM to every live child and waits up to 5 s for them to go.
pub fn terminate_all_children() {
    let pids: Vec<u32> = LIVE_CHILDREN.lock().clone();
    for pid in &pids {
        unsafe {
            libc::kill(*pid as i32, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline
        && pids
            .iter()
            .any(|p| Path::new(&format!("/proc/{p}")).exists() && !is_zombie(*p))
    {
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// Stops every child and exits when the user presses Ctrl-C or the run gets SIGTERM.
pub fn stop_children_on_signal(rt: &tokio::runtime::Runtime) {
    rt.spawn(async {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
        }
        eprintln!("servelab: interrupted — stopping the servers this run started");
        terminate_all_children();
        std::process::exit(130);
    });
}

/// A server process started from this executable; SIGTERM (graceful, prints its summary
/// into its log) and then SIGKILL on drop.
pub struct ServerProcess {
    pub name: String,
    pub addr: SocketAddr,
    pub metrics: SocketAddr,
    child: Child,
}

impl ServerProcess {
    /// Runs `servelab <program> <args> --listen 127.0.0.1:P --metrics 127.0.0.1:M`,
    /// logging to `log_dir/<name>.log`, and waits until both ports accept.
    pub fn start(
        name: &str,
        program: &str,
        args: &[String],
        log_dir: &Path,
    ) -> Result<ServerProcess, String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find servelab itself: {e}"))?;
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let log_path = log_dir.join(format!("{}.log", file_name(name)));
        let log = std::fs::File::create(&log_path)
            .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
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
        die_with_parent(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let up =
                |a: &SocketAddr| TcpStream::connect_timeout(a, Duration::from_millis(200)).is_ok();
            if up(&addr) && up(&metrics) {
                register_child(child.id());
                return Ok(ServerProcess {
                    name: name.to_string(),
                    addr,
                    metrics,
                    child,
                });
            }
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(format!("{name} exited with {status}: {}", log.trim()));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{name} did not accept connections within 20 s"));
            }
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's cumulative histograms from `/metrics.json`.
    pub fn scrape(&self) -> Result<latency::Snapshot, String> {
        let (status, body) = httpget::get(self.metrics, "/metrics.json", Duration::from_secs(10))?;
        if status != 200 {
            return Err(format!("{}: /metrics.json answered {status}", self.name));
        }
        let value: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| format!("{}: /metrics.json is not JSON: {e}", self.name))?;
        latency::Snapshot::from_json(&value).map_err(|e| format!("{}: {e}", self.name))
    }
}

impl ServerProcess {
    /// What the server recorded since `before` (an earlier [`ServerProcess::scrape`]).
    pub fn scrape_since(&self, before: &latency::Snapshot) -> Result<latency::Snapshot, String> {
        self.scrape()?
            .since(before)
            .map_err(|e| format!("{}: {e}", self.name))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        stop_child(&mut self.child);
        unregister_child(self.child.id());
    }
}

/// SIGTERM, up to 10 s for a graceful exit, then SIGKILL.
pub fn stop_child(child: &mut Child) {
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Asks the kernel to SIGKILL the child when the thread that started it dies, so a
/// `servelab compare` killed with SIGKILL leaves no server behind. Children are started
/// from the main thread, which lives as long as the process.
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// `A (NFS: rustnfs)` → `a-nfs-rustnfs`: a scenario name as a log file name.
fn file_name(name: &str) -> String {
    name.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}
