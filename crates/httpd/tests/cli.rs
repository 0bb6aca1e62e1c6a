//! The `httpd` binary's start-up errors for `--nfs-data-cache-dir`: one line each, naming
//! the flag, the directory and what is wrong, before any NFS server is contacted.

use std::path::Path;
use std::process::Command;

/// Runs httpd with a data cache in `dir` against an NFS address where nothing listens;
/// returns its exit success and stderr.
fn start_with_cache_dir(dir: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_httpd"))
        .args(["--listen", "127.0.0.1:0", "--nfs", "nfs://127.0.0.1:9/x"])
        .args(["--nfs-data-cache", "1M", "--nfs-data-cache-dir"])
        .arg(dir)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_missing_or_wrong_cache_dir_is_one_line_at_start_up() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    for (dir, reason) in [(&missing, "no such directory"), (&file, "not a directory")] {
        let (ok, stderr) = start_with_cache_dir(dir);
        let want = format!("httpd: --nfs-data-cache-dir {}: {reason}\n", dir.display());
        assert!(!ok, "{stderr}");
        assert_eq!(stderr, want, "exactly one line, and not about NFS");
    }
}

#[test]
fn a_cache_dir_without_a_cache_size_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_httpd"))
        .args(["--nfs", "nfs://127.0.0.1:9/x", "--nfs-data-cache-dir"])
        .arg(tmp.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--nfs-data-cache SIZE"), "{stderr}");
}
