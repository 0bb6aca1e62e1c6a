//! Helpers shared by the end-to-end tests, on the harness crate (`lab`): external tools
//! that must be present in CI, building workspace binaries, the dataset.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Skips the calling test, visibly: `SKIP: why` on stderr and a line in the skip log
/// (`lab::skip`, printed at the end by scripts/test). Under CI (`CI=true`, root, .ci/run's
/// packages installed) nothing may be skipped: the premise is missing, and that fails.
pub fn skip(why: &str) {
    if lab::in_ci() {
        panic!("cannot be skipped under CI: {why}");
    }
    lab::skip::skip(why);
}

/// Finds an external program. Missing under CI is a failure (`.ci/run` installs it);
/// missing on a developer's machine skips the test with a message.
pub fn require_tool(name: &str) -> Option<PathBuf> {
    let found = lab::find_program(name);
    if found.is_none() {
        if lab::in_ci() {
            panic!("{name} is required in CI (.ci/run installs it) but was not found");
        }
        lab::skip::skip(&format!("{name} is not installed (see README: Testing)"));
    }
    found
}

/// What a harness start-up gave: the value, or `None` (after `SKIP:`) when the machine
/// lacks the program ([`lab::LabError::Missing`]; under CI that is a failure). Any
/// other error fails the test.
pub fn available<T>(started: lab::Result<T>) -> Option<T> {
    match started {
        Ok(v) => Some(v),
        Err(lab::LabError::Missing(why)) => {
            if lab::in_ci() {
                panic!("required in CI (.ci/run installs it): {why}");
            }
            lab::skip::skip(&format!("{why} (see README: Testing)"));
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (for servers that must be told a
/// port; our own in-process servers bind 127.0.0.1:0 instead).
pub fn free_port() -> u16 {
    lab::free_port().unwrap()
}

/// Writes the original experiment's dataset into `dir` with the harness's generator:
/// `index.html`, a 10 MiB `testfile.bin` and a 4 KiB `small.bin`. Returns `dir`.
pub fn write_dataset(dir: &Path) -> PathBuf {
    let spec = lab::dataset::DatasetSpec {
        large_bytes: 10 << 20,
        small_bytes: 4096,
        small_set_files: 0,
        seed: 42,
    };
    lab::dataset::generate(dir, spec).unwrap();
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

/// Runs a command to completion: (exit code, stdout followed by stderr, time taken).
pub fn run_timed(cmd: &mut Command) -> (i32, String, std::time::Duration) {
    let t = std::time::Instant::now();
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text, t.elapsed())
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

/// rustnfs in-process (the harness's fixture), shared by the rustnfs, httpd and
/// loadgen tests.
pub use lab::inproc::Nfsd;
