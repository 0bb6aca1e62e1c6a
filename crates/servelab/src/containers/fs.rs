//! File-system workloads, host against container (`compare --fs`): sequential read of
//! the large file and the bonnie++ -n style metadata mix (create/stat/remove of many
//! small files), run by the load generator's `file://` target on the host, inside a
//! Docker container (the FROM-scratch servelab image) through a bind mount of the same
//! directory, and the same mix over NFS (rustnfs exporting that directory, on loopback).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use loadgen::{LoadPlan, NfsWorkload, Schedule};

use super::docker;
use super::report::FsRow;

/// The two workloads: (label, loadgen workload, path under the scratch directory).
const WORKLOADS: [(&str, NfsWorkload, &str); 2] = [
    (
        "sequential read (1 MiB blocks)",
        NfsWorkload::Read,
        "seq.bin",
    ),
    (
        "metadata mix (create/stat/remove)",
        NfsWorkload::Metadata,
        "meta",
    ),
];

/// Clients of each run (one thread each on file://).
const CLIENTS: usize = 4;
/// Files each client cycles through in the metadata mix.
const FILES: u64 = 200;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn plan(url: &str, workload: NfsWorkload, seconds: f64) -> Result<LoadPlan, String> {
    let mut p = LoadPlan::new(
        url,
        Schedule::Duration(Duration::from_secs_f64(seconds)),
        CLIENTS,
    )
    .map_err(|e| e.to_string())?;
    p.options.nfs_workload = workload;
    p.options.nfs_files = FILES;
    p.options.block_size = 1 << 20;
    p.options.progress = false;
    Ok(p)
}

/// (operations/s, MB/s) of one in-process run.
fn run_local(url: &str, workload: NfsWorkload, seconds: f64) -> Result<(f64, f64), String> {
    let r = loadgen::run(plan(url, workload, seconds)?).map_err(|e| e.to_string())?;
    if r.requests == 0 || r.failed() > 0 {
        return Err(format!(
            "{url}: {} operations, {} failed{}",
            r.requests,
            r.failed(),
            r.first_error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ));
    }
    Ok((r.requests_per_sec(), r.bytes_per_sec() / 1e6))
}

/// The same run by `servelab load` inside a container with `dir` bind-mounted at /fs.
fn run_docker(
    image: &str,
    dir: &Path,
    sub: &str,
    workload: NfsWorkload,
    seconds: f64,
) -> Result<(f64, f64), String> {
    let volume = format!("{}:/fs", dir.display());
    let wl = if workload == NfsWorkload::Read {
        "read"
    } else {
        "metadata"
    };
    let json = format!("out-{wl}.json");
    docker::docker(&[
        "run",
        "--rm",
        "--name",
        &format!("{}-fs", docker::PREFIX),
        "--network",
        "none",
        "-v",
        &volume,
        image,
        "load",
        &format!("file:///fs/{sub}"),
        "-z",
        &format!("{seconds}s"),
        "-c",
        &CLIENTS.to_string(),
        "--workload",
        wl,
        "--files",
        &FILES.to_string(),
        "--block",
        "1MiB",
        "--no-progress",
        "--json",
        &format!("/fs/{json}"),
    ])?;
    let text = std::fs::read_to_string(dir.join(&json)).map_err(|e| format!("{json}: {e}"))?;
    let _ = std::fs::remove_file(dir.join(&json));
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    Ok((
        v["requests_per_second"].as_f64().unwrap_or(0.0),
        v["bytes_per_second"].as_f64().unwrap_or(0.0) / 1e6,
    ))
}

/// Runs both workloads on the host, in Docker (when `image` is given) and over NFS
/// (when a static rustnfs is found), `rounds` interleaved rounds; medians.
pub fn run(
    large: &Path,
    image: Option<&str>,
    seconds: f64,
    rounds: usize,
    rows: &mut Vec<FsRow>,
    failures: &mut Vec<String>,
) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let scratch = tempfile::Builder::new()
        .prefix("sl-deploy-fs-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let dir = scratch.path();
    std::fs::copy(large, dir.join("seq.bin")).map_err(|e| format!("copy: {e}"))?;
    std::fs::create_dir(dir.join("meta")).map_err(|e| e.to_string())?;
    // The container runs as uid 65534: it must read, create and remove here.
    for p in [dir.to_path_buf(), dir.join("meta"), dir.join("seq.bin")] {
        let mode = if p.is_dir() { 0o777 } else { 0o644 };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))
            .map_err(|e| e.to_string())?;
    }

    // rustnfs exporting the same directory read-write on loopback, for the NFS column.
    let nfs = match super::static_bin("rustnfs") {
        Ok(bin) => {
            let port = crate::compare::baselines::free_port()?;
            let child = Command::new(bin)
                .args(["--export"])
                .arg(dir)
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("rustnfs: {e}"))?;
            let guard = Killed(child);
            super::wait_tcp(&format!("127.0.0.1:{port}"), 10)?;
            Some((guard, port))
        }
        Err(e) => {
            failures.push(format!("file-system table, NFS column: {e}"));
            None
        }
    };

    for (label, workload, sub) in WORKLOADS {
        let mut places: Vec<(&str, String)> = vec![("host (file://)", String::new())];
        if image.is_some() {
            places.push(("Docker, bind mount (file://)", String::new()));
        }
        if let Some((_, port)) = &nfs {
            places.push((
                "NFS (rustnfs, loopback)",
                format!("nfs://127.0.0.1:{port}//{sub}"),
            ));
        }
        let mut values: Vec<Vec<(f64, f64)>> = vec![Vec::new(); places.len()];
        for round in 0..rounds {
            for k in 0..places.len() {
                let pi = (k + round) % places.len();
                let (place, url) = &places[pi];
                eprintln!("servelab compare: fs {label} {place}");
                let r = match pi {
                    0 => run_local(
                        &format!("file://{}", dir.join(sub).display()),
                        workload,
                        seconds,
                    ),
                    _ if url.is_empty() => run_docker(image.unwrap(), dir, sub, workload, seconds),
                    _ => run_local(url, workload, seconds),
                };
                match r {
                    Ok(v) => values[pi].push(v),
                    Err(e) => failures.push(format!("fs {label} {place}: {e}")),
                }
            }
        }
        for (pi, (place, _)) in places.iter().enumerate() {
            let mut ops: Vec<f64> = values[pi].iter().map(|v| v.0).collect();
            let mut mb: Vec<f64> = values[pi].iter().map(|v| v.1).collect();
            if let (Some(o), Some(m)) = (super::median(&mut ops), super::median(&mut mb)) {
                rows.push(FsRow {
                    workload: label.into(),
                    place: place.to_string(),
                    runs: ops.len(),
                    ops_per_sec: o,
                    mbytes_per_sec: m,
                });
            }
        }
    }
    Ok(())
}
