//! `servelab diff` on committed runs: two real default runs compared print their changed
//! rows with interval and call, and write diff.md and diff.html beside NEW; a synthetic
//! regression (one run's CPU per request raised by half) makes `--fail-on-regression`
//! exit 3 while the unchanged run exits 0; rows measured under other conditions (file
//! size, concurrency, protocol) are refused with the reason.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn committed(run: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../benches/results")
        .join(run)
        .join("report.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `report` written as `<dir>/<name>/report.json`; returns that directory.
fn put(dir: &Path, name: &str, report: &Value) -> PathBuf {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("report.json"),
        serde_json::to_string(report).unwrap(),
    )
    .unwrap();
    d
}

fn diff(old: &Path, new: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_servelab"))
        .arg("diff")
        .arg(old)
        .arg(new)
        .args(extra)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The HTTP row of `workload` and `scenario`.
fn row<'a>(r: &'a mut Value, workload: &str, scenario: &str) -> &'a mut Value {
    r["http"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|x| x["workload"] == workload && x["scenario"] == scenario)
        .unwrap()
}

#[test]
fn two_committed_runs_print_their_changed_rows_with_significance() {
    let tmp = tempfile::tempdir().unwrap();
    let old = put(tmp.path(), "old", &committed("2026-12-02-answer"));
    let new = put(tmp.path(), "new", &committed("2026-12-02-compare-v4"));
    let out = diff(&old, &new, &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // h2o's CPU per 10 MiB request fell from 5.5 to 3.1 ms, beyond its 75 % interval
    // (3 runs a side); A's fell 19.6 % from 8 runs a side, inside its 95 % interval.
    assert!(
        stdout.contains("| HTTP large | h2o | CPU ms/request | 5.500 | 3.100 | -43.6 % (")
            && stdout.contains(", 75 %) | better |"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "| HTTP large | A (NFS: rustnfs) | CPU ms/request | 11.200 | 9.000 | -19.6 % ("
        ) && stdout.contains(", 95 %) | no measurable difference |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("⚠ regression: HTTP small · nginx · p50 ms"),
        "{stdout}"
    );
    assert!(stdout.contains("CPU: 2 × Intel(R) Xeon(R) Processor → 2 × AMD EPYC"));
    assert_eq!(
        std::fs::read_to_string(new.join("diff.md")).unwrap(),
        stdout
    );
    let html = std::fs::read_to_string(new.join("diff.html")).unwrap();
    assert!(html.contains("<table") && html.contains("regression"));
}

#[test]
fn a_synthetic_regression_fails_the_run_and_an_unchanged_one_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let base = committed("2026-12-02-compare-v4");
    let old = put(tmp.path(), "old", &base);
    let same = put(tmp.path(), "same", &base);
    let out = diff(&old, &same, &["--fail-on-regression", "10"]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("0 of them for the worse"));
    let mut worse = base.clone();
    for run in row(&mut worse, "large", "A (NFS: rustnfs)")["runs"]
        .as_array_mut()
        .unwrap()
    {
        let c = &mut run["cost"]["cpu_us_per_request"];
        *c = Value::from(c.as_f64().unwrap() * 1.5);
    }
    let new = put(tmp.path(), "worse", &worse);
    let out = diff(&old, &new, &["--fail-on-regression", "10"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout)
            .contains("⚠ regression: HTTP large · A (NFS: rustnfs) · CPU ms/request +50.0 %"),
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stderr).contains("got worse by more than 10 %"));
    // Half a regression is under a 60 % bar.
    assert!(
        diff(&old, &new, &["--fail-on-regression", "60"])
            .status
            .success()
    );
}

#[test]
fn rows_measured_under_other_conditions_are_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let base = committed("2026-12-02-compare-v4");
    let old = put(tmp.path(), "old", &base);
    let mut other = base.clone();
    other["dataset"]["large_bytes"] = Value::from(1u64 << 20);
    other["settings"]["small_concurrency"] = Value::from(50);
    let a = row(&mut other, "small", "A (NFS: rustnfs)");
    a["description"] = Value::from("httpd --nfs: built-in NFSv4.2 client → rustnfs");
    let new = put(tmp.path(), "other", &other);
    let out = diff(&old, &new, &["--fail-on-regression", "0"]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("## Not compared: conditions differ"),
        "{stdout}"
    );
    assert!(
        stdout.contains("- HTTP large · A (NFS: rustnfs): file size 10 MiB → 1 MiB"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "- HTTP small · A (NFS: rustnfs): concurrency 10 → 50; protocol HTTP over NFSv3 → HTTP over NFSv4.2"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("- Equal load 50 % · B (local): file size 10 MiB → 1 MiB"));
    // No refused row is compared, so none can be a regression.
    assert!(!stdout.contains("| HTTP large |"), "{stdout}");
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn a_missing_run_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = diff(&tmp.path().join("nope"), tmp.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot read"),
        "{}",
        text(&out.stderr)
    );
}
