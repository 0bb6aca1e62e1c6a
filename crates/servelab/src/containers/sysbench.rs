//! sysbench on the host and inside each container, as the original report ran it: cpu
//! (`--cpu-max-prime` 10000 and 20000) and memory (`--memory-block-size` 1M and 1K).
//!
//! Debian has no static sysbench, so the host's binary goes in with its libraries and
//! the dynamic loader (`ldd`'s list) as a bundle: pushed to /opt/sysbench in the LXD
//! instance, copied into a FROM-scratch image for Docker, and started through the
//! bundled loader (`ld.so --library-path /opt/sysbench sysbench ...`). The same binary
//! and libraries run everywhere, so the ratios compare the isolation, not two builds.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One sysbench test: its label, its arguments, and the unit of its figure.
pub struct Test {
    pub label: &'static str,
    pub args: &'static [&'static str],
    pub unit: &'static str,
}

pub const TESTS: [Test; 4] = [
    Test {
        label: "cpu prime 10000",
        args: &["cpu", "--cpu-max-prime=10000"],
        unit: "events/s",
    },
    Test {
        label: "cpu prime 20000",
        args: &["cpu", "--cpu-max-prime=20000"],
        unit: "events/s",
    },
    Test {
        label: "memory 1M blocks",
        args: &[
            "memory",
            "--memory-block-size=1M",
            "--memory-total-size=10000G",
        ],
        unit: "MiB/s",
    },
    Test {
        label: "memory 1K blocks",
        args: &[
            "memory",
            "--memory-block-size=1K",
            "--memory-total-size=10000G",
        ],
        unit: "MiB/s",
    },
];

/// The full argument list of one run: one thread, time-bound.
pub fn args(test: &Test, seconds: u32) -> Vec<String> {
    let mut a: Vec<String> = test.args.iter().map(|s| s.to_string()).collect();
    a.push("--threads=1".into());
    a.push(format!("--time={seconds}"));
    a.push("run".into());
    a
}

/// The figure of a run's output: "events per second: X" (cpu) or "(X MiB/sec)" (memory).
pub fn parse(output: &str) -> Option<f64> {
    for line in output.lines() {
        if let Some(v) = line.trim().strip_prefix("events per second:") {
            return v.trim().parse().ok();
        }
        if let Some(i) = line.find(" MiB/sec)") {
            let start = line[..i].rfind('(')? + 1;
            return line[start..i].trim().parse().ok();
        }
    }
    None
}

/// Copies `sysbench` with every library `ldd` lists, and the loader as `ld.so`, into
/// `dir`; returns the host binary's path.
pub fn bundle(dir: &Path) -> Result<PathBuf, String> {
    let bin = super::which("sysbench").ok_or("sysbench is not installed")?;
    let out = Command::new("ldd")
        .arg(&bin)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ldd: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let mut loader = false;
    for line in text.lines() {
        let line = line.trim();
        let (name, path) = match line.split_once(" => ") {
            Some((n, rest)) => (n.to_string(), rest.split(" (").next().unwrap_or("").trim()),
            None => (
                "ld.so".to_string(),
                line.split(" (").next().unwrap_or("").trim(),
            ),
        };
        if !path.starts_with('/') {
            continue; // linux-vdso
        }
        loader |= name == "ld.so";
        std::fs::copy(path, dir.join(&name)).map_err(|e| format!("copy {path}: {e}"))?;
    }
    if !loader {
        return Err(format!("ldd {} named no dynamic loader", bin.display()));
    }
    std::fs::copy(&bin, dir.join("sysbench")).map_err(|e| e.to_string())?;
    Ok(bin)
}

/// The command line that runs the bundled sysbench from /opt/sysbench.
pub fn bundled_command(args: &[String]) -> Vec<String> {
    let mut c: Vec<String> = [
        "/opt/sysbench/ld.so",
        "--library-path",
        "/opt/sysbench",
        "/opt/sysbench/sysbench",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    c.extend(args.iter().cloned());
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_and_memory_output() {
        let cpu = "CPU speed:\n    events per second:   708.31\n\nGeneral statistics:";
        assert_eq!(parse(cpu), Some(708.31));
        let mem = "Total operations: 5919\n\n5919.00 MiB transferred (5883.99 MiB/sec)\n";
        assert_eq!(parse(mem), Some(5883.99));
        assert_eq!(parse("FATAL: no such test"), None);
    }

    #[test]
    fn one_thread_and_a_time_bound() {
        let a = args(&TESTS[2], 3);
        assert_eq!(
            a,
            [
                "memory",
                "--memory-block-size=1M",
                "--memory-total-size=10000G",
                "--threads=1",
                "--time=3",
                "run"
            ]
        );
    }
}
