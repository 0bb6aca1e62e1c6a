//! Helpers shared by the end-to-end tests.

#![allow(dead_code)]

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// True when running under CI (`CI=true`), where every external tool must be present.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// Finds an external program. Missing under CI is a failure (`.ci/run` installs it);
/// missing on a developer's machine skips the test with a message.
pub fn require_tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .chain(["/usr/sbin".into(), "/sbin".into()])
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        if in_ci() {
            panic!("{name} is required in CI (.ci/run installs it) but was not found");
        }
        eprintln!("SKIP: {name} is not installed (see README: Testing)");
    }
    found
}

/// A TCP port on 127.0.0.1 that was free a moment ago (for external servers that must be
/// told a port; our own servers take an already-bound listener instead).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Deterministic pseudo-random bytes (xorshift), so a failing checksum is reproducible.
pub fn pseudo_random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Writes the original experiment's dataset into `dir`: `index.html` and a 10 MiB
/// `testfile.bin` of random bytes, plus a 4 KiB `small.bin`. Returns `dir`.
pub fn write_dataset(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("index.html"),
        "<!doctype html><title>servelab</title><p>It works.</p>\n",
    )
    .unwrap();
    let mut f = std::fs::File::create(dir.join("testfile.bin")).unwrap();
    f.write_all(&pseudo_random_bytes(10 << 20, 42)).unwrap();
    std::fs::write(dir.join("small.bin"), pseudo_random_bytes(4096, 7)).unwrap();
    dir.to_path_buf()
}

/// Runs a command to completion, returning its output; panics with stderr on failure.
pub fn run_ok(cmd: &mut Command) -> std::process::Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Builds a workspace binary (`cargo build -p PACKAGE --bin NAME`, same profile and target
/// directory as this test executable) once per test run and returns its path.
pub fn workspace_bin(package: &str, name: &str) -> PathBuf {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(p) = built.get(name) {
        return p.clone();
    }
    // This executable is <target>/<profile>/deps/tests-<hash>.
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let target_dir = profile_dir.parent().unwrap();
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["build", "-q", "-p", package, "--bin", name])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CARGO_TARGET_DIR", target_dir);
    if profile_dir.file_name().is_some_and(|p| p == "release") {
        cmd.arg("--release");
    }
    run_ok(&mut cmd);
    let path = profile_dir.join(name);
    assert!(path.is_file(), "{} was not built", path.display());
    built.insert(name.to_string(), path.clone());
    path
}

/// rustnfs running in-process on its own tokio runtime on 127.0.0.1:0; stopped
/// (gracefully) on drop. Shared by the rustnfs, httpd and loadgen tests.
pub struct Nfsd {
    pub port: u16,
    pub registry: std::sync::Arc<latency::Registry>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<std::sync::mpsc::Receiver<Result<(), rustnfs::Error>>>,
    rt: Option<tokio::runtime::Runtime>,
}

impl Nfsd {
    pub fn start(config: rustnfs::Config) -> Nfsd {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let registry = latency::Registry::new("rustnfs_nfs");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done) = std::sync::mpsc::channel();
        let reg = registry.clone();
        rt.spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            let r = rustnfs::serve(listener, config, reg, shutdown).await;
            let _ = done_tx.send(r);
        });
        Nfsd {
            port,
            registry,
            stop: Some(stop),
            done: Some(done),
            rt: Some(rt),
        }
    }

    /// rustnfs with default settings exporting `export`.
    pub fn exporting(export: &Path) -> Nfsd {
        Nfsd::start(rustnfs::Config::new(export))
    }

    /// A libnfs URL; `path` is taken as is (`/` for the export, `//file` for a file in it).
    pub fn url(&self, path: &str) -> String {
        format!(
            "nfs://127.0.0.1{path}?version=3&nfsport={p}&mountport={p}",
            p = self.port
        )
    }

    /// The export root as `httpd --nfs` and `nfsclient` take it.
    pub fn export_url(&self) -> String {
        format!("nfs://127.0.0.1:{}/", self.port)
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Stops the server and returns what `serve` returned.
    pub fn stop(mut self) -> Result<(), rustnfs::Error> {
        self.stop.take().unwrap().send(()).unwrap();
        self.done
            .take()
            .unwrap()
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("serve did not return after shutdown")
    }
}

impl Drop for Nfsd {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(d) = self.done.take() {
            let _ = d.recv_timeout(std::time::Duration::from_secs(20));
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(std::time::Duration::from_secs(5));
        }
    }
}
