//! sysbench on the host and inside each container, as the original report ran it: cpu
//! (`--cpu-max-prime` 10000 and 20000) and memory (`--memory-block-size` 1M and 1K).
//!
//! Debian has no static sysbench, so the host's binary goes in with its libraries and
//! the dynamic loader (`ldd`'s list) as a bundle: pushed to /opt/sysbench in the LXD
//! instance, copied into a FROM-scratch image for Docker, and started through the
//! bundled loader (`ld.so --library-path /opt/sysbench sysbench ...`). The same binary
//! and libraries run everywhere, so the ratios compare the isolation, not two builds.

use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::model::{ContainerReport, SysbenchRow};
use super::options::{ContainerArgs, Workloads};
use super::{docker, lxd};
use crate::experiment::interrupt::Interrupted;
use crate::experiment::load::interleaved;
use crate::experiment::progress::Progress;
use crate::stats::median;

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
pub fn bundle(dir: &Path) -> anyhow::Result<PathBuf> {
    let bin = lab::find_program("sysbench")
        .ok_or_else(|| anyhow::anyhow!("sysbench is not installed"))?;
    let out = Command::new("ldd")
        .arg(&bin)
        .stdin(Stdio::null())
        .output()
        .context("cannot run ldd")?;
    let text = String::from_utf8_lossy(&out.stdout);
    std::fs::create_dir_all(dir)?;
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
        std::fs::copy(path, dir.join(&name)).with_context(|| format!("cannot copy {path}"))?;
    }
    if !loader {
        anyhow::bail!("ldd {} named no dynamic loader", bin.display());
    }
    std::fs::copy(&bin, dir.join("sysbench"))?;
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

/// Runs sysbench with these arguments in one place and returns its output.
type Runner<'a> = Box<dyn Fn(&[String]) -> anyhow::Result<String> + 'a>;

/// sysbench's tests on the host and, where deployed, in the LXD instance and a Docker
/// container, in rotating order; medians into `rep`, problems into its skips/failures.
pub fn measure(
    args: &ContainerArgs,
    w: &Workloads,
    instance: &Option<lxd::Instance>,
    with_docker: bool,
    rep: &mut ContainerReport,
    progress: &mut Progress,
) -> Result<(), Interrupted> {
    let planned =
        TESTS.len() * w.repeat * (1 + usize::from(instance.is_some()) + usize::from(with_docker));
    let each = std::time::Duration::from_secs(u64::from(args.sysbench_seconds));
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            progress.unplan(planned, each);
            rep.skipped.push(format!("sysbench: {e:#}"));
            return Ok(());
        }
    };
    let bundle_dir = dir.path().join("bundle");
    let host_bin = match bundle(&bundle_dir) {
        Ok(b) => b,
        Err(e) => {
            progress.unplan(planned, each);
            rep.skipped.push(format!("sysbench: {e:#}"));
            return Ok(());
        }
    };
    // The sysbench image is removed again when this function returns.
    struct RemoveImage(Option<String>);
    impl Drop for RemoveImage {
        fn drop(&mut self) {
            if let Some(i) = &self.0 {
                let _ = docker::docker(&["rmi", "-f", i]);
            }
        }
    }
    let mut image_guard = RemoveImage(None);
    let mut places: Vec<(&str, Runner)> = Vec::new();
    let host_bin2 = host_bin.clone();
    places.push((
        "host",
        Box::new(move |a: &[String]| {
            let out = Command::new(&host_bin2)
                .args(a)
                .stdin(Stdio::null())
                .output()?;
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        }),
    ));
    if let Some(i) = instance {
        match i.push_dir(&bundle_dir, "/opt/sysbench") {
            Ok(()) => places.push((
                "LXD",
                Box::new(move |a: &[String]| i.exec(&bundled_command(a))),
            )),
            Err(e) => {
                progress.unplan(TESTS.len() * w.repeat, each);
                rep.skipped.push(format!("sysbench in LXD: {e:#}"))
            }
        }
    }
    if with_docker {
        match docker::sysbench_image(&bundle_dir) {
            Ok(image) => {
                image_guard.0 = Some(image.clone());
                places.push((
                    "Docker",
                    Box::new(move |a: &[String]| {
                        let mut all = vec![
                            "run".to_string(),
                            "--rm".into(),
                            "--network".into(),
                            "none".into(),
                            image.clone(),
                        ];
                        all.extend(a.iter().cloned());
                        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
                        docker::docker(&refs)
                    }),
                ));
            }
            Err(e) => {
                progress.unplan(TESTS.len() * w.repeat, each);
                rep.skipped.push(format!("sysbench in Docker: {e:#}"))
            }
        }
    }
    rep.notes.push(format!(
        "sysbench: the host's {} with its libraries and loader pushed to /opt/sysbench in \
         the LXD instance and copied into a FROM-scratch image for Docker; 1 thread, {} s a \
         run",
        host_bin.display(),
        args.sysbench_seconds
    ));
    for test in &TESTS {
        let mut values: Vec<Vec<f64>> = vec![Vec::new(); places.len()];
        let numbered: Vec<usize> = (0..places.len()).collect();
        for (_, &pi) in interleaved(w.repeat, &numbered) {
            let (place, f) = &places[pi];
            progress.step(each, format!("sysbench {} {place}", test.label))?;
            let figure = f(&self::args(test, args.sysbench_seconds))
                .and_then(|o| parse(&o).ok_or_else(|| anyhow::anyhow!("no figure in: {:.300}", o)));
            match figure {
                Ok(v) => values[pi].push(v),
                Err(e) => rep
                    .failures
                    .push(format!("sysbench {} {place}: {e:#}", test.label)),
            }
        }
        for (pi, (place, _)) in places.iter().enumerate() {
            if let Some(m) = median(&mut values[pi]) {
                rep.sysbench.push(SysbenchRow {
                    test: test.label.into(),
                    unit: test.unit.into(),
                    place: place.to_string(),
                    runs: values[pi].len(),
                    median: m,
                });
            }
        }
    }
    Ok(())
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
