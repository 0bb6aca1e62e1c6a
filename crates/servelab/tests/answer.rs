//! The answer section end to end: a short `servelab compare` with the client pinned to
//! one CPU that a busy loop shares, so the client has too little CPU — every row of A
//! and B must come out labelled client-bound, the answer must say throughput was the
//! client's limit, and the service demand must be split by serving process.

use std::path::Path;
use std::process::{Child, Command};

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// CPUs this process may run on (from /proc/self/status).
fn allowed_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().unwrap()..=b.parse().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

/// A shell busy loop pinned to `cpu`, killed on drop.
struct Hog(Child);

impl Hog {
    fn on(cpu: usize) -> Hog {
        let child = Command::new("taskset")
            .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
            .spawn()
            .expect("taskset (util-linux) runs");
        Hog(child)
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_client_with_too_little_cpu_is_labelled_client_bound() {
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        assert!(!in_ci(), "CI has two CPUs");
        eprintln!("skipped: needs two CPUs to pin the client apart from the servers");
        return;
    }
    let (client, server) = (cpus[0], cpus[1]);
    // Two busy loops on the client's CPU: the load generator gets about a third of it.
    let _hogs = [Hog::on(client), Hog::on(client)];
    let results = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_servelab"))
        .args([
            "compare",
            "--baselines",
            "none",
            "--no-cross-check",
            "--client-cpus",
            &client.to_string(),
            "--server-cpus",
            &server.to_string(),
            // Enough work that every run's server CPU is many clock ticks (10 ms):
            // 40 requests of 256 KiB cost B's httpd 2–4 ms, often 0 ticks, and a run
            // with no CPU figure made the answer "No conclusion" in a CI rehearsal.
            "--large-size",
            "1MiB",
            "--requests",
            "400",
            "--concurrency",
            "4",
            "--small-seconds",
            "0.5",
            "--nfs-seconds",
            "0.3",
            "--tcp-seconds",
            "0.3",
            "--repeat",
            "2",
            "--max-repeat",
            "2",
            "--keep-busy",
            "--equal-load-seconds",
            "0.5",
            "--results",
        ])
        .arg(results.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "compare failed:\n{stdout}\n{stderr}");
    let dir = std::fs::read_dir(results.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    validate(&report);

    assert_eq!(
        report["pinning"]["client_cpus"],
        serde_json::json!([client])
    );
    assert_eq!(
        report["pinning"]["server_cpus"],
        serde_json::json!([server])
    );
    for scenario in ["B (local)", "A (NFS: rustnfs)"] {
        let row = report["http"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["workload"] == "large" && r["scenario"] == scenario)
            .unwrap_or_else(|| panic!("no large row for {scenario}"));
        assert_eq!(row["client_bound"], true, "{scenario}: {:#}", row["runs"]);
        for run in row["runs"].as_array().unwrap() {
            assert!(run["client"]["client_cpus_busy"].as_f64().unwrap() >= 0.9);
        }
        // The cost is the sum of the serving processes, each named.
        let cost = &row["cost"];
        let names: Vec<&str> = cost["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        let want: &[&str] = if scenario == "B (local)" {
            &["httpd"]
        } else {
            &["httpd", "rustnfs"]
        };
        assert_eq!(names, want);
    }
    let answer = &report["answer"];
    let sentences: Vec<&str> = answer["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(
        sentences
            .iter()
            .any(|s| s.contains("limited by the client")),
        "{sentences:#?}"
    );
    // The answer opens with both ways a client reads, each named, and says which one
    // the original experiment (a kernel mount) measured; then the split by process.
    for named in [
        "every byte over NFS",
        "with a client cache, as a kernel mount",
        "The original experiment read through a kernel NFS mount",
    ] {
        assert!(sentences[0].contains(named), "{named}: {sentences:#?}");
    }
    assert!(
        sentences[1].starts_with("By process, medians:") && sentences[1].contains("rustnfs"),
        "{sentences:#?}"
    );
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let mut lines = md.lines().filter(|l| !l.is_empty());
    assert!(lines.next().unwrap().starts_with("# servelab compare"));
    assert_eq!(lines.next().unwrap(), "## The answer");
    assert!(md.contains("**(client-bound)**"));
    assert!(md.contains("## Latency at equal offered load"));
    // Terminal output opens with the same section.
    assert!(stdout.contains("## The answer"));
}

fn validate(report: &serde_json::Value) {
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("report-schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(report)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}
