//! Docker for the deployment tests: the engine (optional: a missing one skips), the
//! images `docker/build.sh` builds once per run, names unique to this process, teardown
//! guards, container memory, and the dataset the containers serve.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common;

/// The image tag the tests build and run (not `latest`, to leave a user's images alone).
pub const TAG: &str = "e2e";

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A name unique to this process and call: containers, networks, projects — all under
/// `sl-deploy-`, the prefix this area's objects share on a machine shared with others.
pub fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "sl-deploy-{prefix}{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs a command, returning its output (never panics on a failing status).
pub fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Runs a command and returns its trimmed stdout; panics with stderr on failure.
pub fn run_text(cmd: &mut Command) -> String {
    let out = common::run_ok(cmd.stdin(Stdio::null()));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub fn docker(args: &[&str]) -> Command {
    let mut c = Command::new("docker");
    c.args(args);
    c
}

/// True when a Docker engine answers.
pub fn engine_answers() -> bool {
    Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success())
}

/// True when a Docker engine answers; otherwise skips (Docker is optional on a
/// developer's machine) — and under CI fails: CI has Docker (.ci/run installs docker.io),
/// so a missing engine there is a broken premise, not a pass.
pub fn docker_available(test: &str) -> bool {
    let ok = engine_answers();
    if !ok {
        common::skip(&format!(
            "{test}: no Docker engine here (`docker info` fails; Docker is optional outside CI, see docker/README.md)"
        ));
    }
    ok
}

/// Polls `f` every 200 ms until it returns Some or `limit` passes.
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Commands run in reverse order when dropped: teardown also on panic.
#[derive(Default)]
pub struct Cleanup(pub Vec<Command>);

impl Cleanup {
    pub fn push(&mut self, cmd: Command) {
        self.0.push(cmd);
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        while let Some(mut cmd) = self.0.pop() {
            let _ = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// What `docker/build.sh` produced.
pub struct Built {
    /// The static binaries (for the host side of the tests).
    pub bin_dir: PathBuf,
    /// `docker/build.sh`'s output: one `image NAME:TAG BYTES (..)` line per image.
    pub sizes: BTreeMap<String, u64>,
}

/// Builds the static binaries and the three images once per test run.
pub fn built() -> &'static Built {
    static BUILT: OnceLock<Result<Built, String>> = OnceLock::new();
    let result = BUILT.get_or_init(|| {
        // <target>/debug/deps/tests-HASH -> <target>
        let exe = std::env::current_exe().unwrap();
        let target = exe.ancestors().nth(3).unwrap().to_path_buf();
        let static_dir = target.join("static");
        let start = Instant::now();
        let out = run(Command::new(repo().join("docker/build.sh"))
            .env("TAG", TAG)
            .env("STATIC_TARGET_DIR", &static_dir)
            // Without an engine (the lxc test's fallback), only the static binaries.
            .env("BINS_ONLY", if engine_answers() { "" } else { "1" }));
        if !out.status.success() {
            return Err(format!(
                "docker/build.sh failed: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        eprintln!("docker/build.sh took {:.1?}:\n{text}", start.elapsed());
        let sizes = text
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                (w.next()? == "image").then_some(())?;
                let name = w.next()?.split(':').next()?.to_string();
                Some((name, w.next()?.parse().ok()?))
            })
            .collect();
        let triple = run_text(Command::new("rustc").arg("-vV"))
            .lines()
            .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
            .unwrap();
        Ok(Built {
            bin_dir: static_dir.join(triple).join("release-static"),
            sizes,
        })
    });
    match result {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    }
}

pub fn image(name: &str) -> String {
    format!("{name}:{TAG}")
}

/// A data directory with the original dataset, readable and writable by the images'
/// default user (65534), so the containers run without root.
pub fn dataset() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    common::write_dataset(dir.path());
    chown_tree(dir.path(), 65534);
    dir
}

pub fn chown_tree(dir: &Path, id: u32) {
    std::os::unix::fs::chown(dir, Some(id), Some(id)).unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            chown_tree(&path, id);
        } else {
            std::os::unix::fs::chown(&path, Some(id), Some(id)).unwrap();
        }
    }
}

/// `docker stats --no-stream` memory of one container, in bytes.
pub fn container_memory(name: &str) -> u64 {
    let text = run_text(&mut docker(&[
        "stats",
        "--no-stream",
        "--format",
        "{{.MemUsage}}",
        name,
    ]));
    lab::sampler::parse_docker_size(text.split('/').next().unwrap_or("").trim())
        .unwrap_or_else(|| panic!("cannot read docker stats memory from {text:?}"))
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Samples a container's memory every 250 ms while `work` runs; returns the peak.
pub fn peak_memory_during<T>(names: &[&str], work: impl FnOnce() -> T) -> (T, Vec<u64>) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let samplers: Vec<_> = names
        .iter()
        .map(|n| {
            let (n, stop) = (n.to_string(), stop.clone());
            std::thread::spawn(move || {
                let mut peak = 0;
                while !stop.load(Ordering::Relaxed) {
                    // A container may be gone when a failing test unwinds: no panic here.
                    let out = run(&mut docker(&[
                        "stats",
                        "--no-stream",
                        "--format",
                        "{{.MemUsage}}",
                        &n,
                    ]));
                    let text = String::from_utf8_lossy(&out.stdout);
                    if let Some(bytes) =
                        lab::sampler::parse_docker_size(text.split('/').next().unwrap_or("").trim())
                    {
                        peak = peak.max(bytes);
                    }
                    std::thread::sleep(Duration::from_millis(250));
                }
                peak
            })
        })
        .collect();
    let out = work();
    stop.store(true, Ordering::Relaxed);
    (
        out,
        samplers.into_iter().map(|s| s.join().unwrap()).collect(),
    )
}

/// GET over HTTP/1.0 with curl; returns the body.
pub fn http_get(url: &str) -> Vec<u8> {
    common::run_ok(Command::new("curl").args(["-fsS", "--max-time", "30", url])).stdout
}

/// The requests and failed requests a `servelab load --json` file reports, and the JSON.
pub fn load_counts(json: &Path) -> (u64, u64, serde_json::Value) {
    let text = std::fs::read_to_string(json)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", json.display()));
    let v: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", json.display()));
    let field = |k: &str| {
        v[k].as_u64()
            .unwrap_or_else(|| panic!("no {k} in {}: {text:.400}", json.display()))
    };
    (field("requests"), field("failed"), v)
}

/// Like `docker_available`: a missing tool skips, and under CI fails.
pub fn optional_tool(test: &str, name: &str) -> bool {
    let found = lab::find_program(name).is_some();
    if !found {
        common::skip(&format!("{test}: {name} is not installed"));
    }
    found
}
