//! File-system workloads, host against container (`compare --fs`): sequential read of
//! the large file and the bonnie++ -n style metadata mix (create/stat/remove of many
//! small files), run by the load generator's `file://` target on the host, inside a
//! Docker container (the FROM-scratch servelab image) through a bind mount of the same
//! directory, and the same mix over NFS (rustnfs exporting that directory, on loopback).
//! Every column runs the same static `servelab load` (docker/build.sh's), as a host
//! process or in the container.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use lab::process::Supervised;
use loadgen::NfsWorkload;

use super::docker;
use super::model::{ContainerReport, FsRow};
use crate::experiment::nfs::{NfsExport, rustnfs_args};
use crate::experiment::progress::Progress;

/// The two workloads: (label, loadgen workload, path under the scratch directory).
pub const WORKLOADS: [(&str, NfsWorkload, &str); 2] = [
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

/// `servelab load URL ... --json` by the static servelab: `docker` runs it inside a
/// container with `dir` bind-mounted at /fs (the URL then names /fs/...), `None` on the
/// host — the same binary either way, so the columns differ only in where it runs.
fn run_cli(
    bin: &Path,
    docker_image: Option<&str>,
    dir: &Path,
    url: &str,
    workload: NfsWorkload,
    seconds: f64,
) -> anyhow::Result<(f64, f64)> {
    let wl = if workload == NfsWorkload::Read {
        "read"
    } else {
        "metadata"
    };
    let json = format!("out-{wl}.json");
    let json_arg = match docker_image {
        Some(_) => format!("/fs/{json}"),
        None => dir.join(&json).display().to_string(),
    };
    let load: Vec<String> = [
        "load",
        url,
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
        &json_arg,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    match docker_image {
        Some(image) => {
            let volume = format!("{}:/fs", dir.display());
            let name = format!("{}-fs", docker::PREFIX);
            let mut all: Vec<&str> = vec![
                "run",
                "--rm",
                "--name",
                &name,
                "--network",
                "none",
                "-v",
                &volume,
                image,
            ];
            all.extend(load.iter().map(String::as_str));
            docker::docker(&all)?;
        }
        None => {
            let out = Command::new(bin)
                .args(&load)
                .stdin(Stdio::null())
                .output()
                .with_context(|| format!("cannot run {}", bin.display()))?;
            if !out.status.success() {
                anyhow::bail!(
                    "servelab load {url}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }
    }
    let text =
        std::fs::read_to_string(dir.join(&json)).with_context(|| format!("cannot read {json}"))?;
    let _ = std::fs::remove_file(dir.join(&json));
    let v: serde_json::Value = serde_json::from_str(&text)?;
    if v["failed"].as_u64().unwrap_or(0) > 0 {
        anyhow::bail!("{url}: {} operations failed", v["failed"]);
    }
    Ok((
        v["requests_per_second"].as_f64().unwrap_or(0.0),
        v["bytes_per_second"].as_f64().unwrap_or(0.0) / 1e6,
    ))
}

/// Runs both workloads on the host, in Docker (when `image` is given) and over NFS
/// (when a static rustnfs is found), `rounds` interleaved rounds; medians into `rep`.
pub fn run(
    large: &Path,
    image: Option<&str>,
    seconds: f64,
    rounds: usize,
    rep: &mut ContainerReport,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let scratch = tempfile::Builder::new().prefix("sl-deploy-fs-").tempdir()?;
    let dir = scratch.path();
    prepare(large, dir)?;
    let bin = super::host::static_bin("servelab")?;
    // rustnfs exporting the same directory read-write on loopback, for the NFS column.
    let nfs = match start_rustnfs(dir) {
        Ok(n) => Some(n),
        Err(e) => {
            rep.failures
                .push(format!("file-system table, NFS column: {e:#}"));
            None
        }
    };
    let expected = Duration::from_secs_f64(seconds);
    for (label, workload, sub) in WORKLOADS {
        let mut places: Vec<(&str, String)> = vec![(
            "host (file://)",
            format!("file://{}", dir.join(sub).display()),
        )];
        if image.is_some() {
            places.push(("Docker, bind mount (file://)", format!("file:///fs/{sub}")));
        }
        if let Some((_, export)) = &nfs {
            places.push(("NFS (rustnfs, loopback)", export.url(sub)));
        }
        let mut values: Vec<Vec<(f64, f64)>> = vec![Vec::new(); places.len()];
        for round in 0..rounds {
            for k in 0..places.len() {
                let pi = (k + round) % places.len();
                let (place, url) = &places[pi];
                progress.step(expected, format!("fs {label} {place}"))?;
                let in_docker = (place.starts_with("Docker")).then_some(image).flatten();
                match run_cli(&bin, in_docker, dir, url, workload, seconds) {
                    Ok(v) => values[pi].push(v),
                    Err(e) => rep.failures.push(format!("fs {label} {place}: {e:#}")),
                }
            }
        }
        for (pi, (place, _)) in places.iter().enumerate() {
            let mut ops: Vec<f64> = values[pi].iter().map(|v| v.0).collect();
            let mut mb: Vec<f64> = values[pi].iter().map(|v| v.1).collect();
            if let (Some(o), Some(m)) = (
                crate::stats::median(&mut ops),
                crate::stats::median(&mut mb),
            ) {
                rep.fs.push(FsRow {
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

/// The scratch directory: a copy of the large file to read and a directory for the
/// metadata mix, open to the container's uid 65534 (it reads, creates and removes).
fn prepare(large: &Path, dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::copy(large, dir.join("seq.bin"))
        .with_context(|| format!("cannot copy {} into {}", large.display(), dir.display()))?;
    std::fs::create_dir(dir.join("meta"))?;
    for p in [dir.to_path_buf(), dir.join("meta"), dir.join("seq.bin")] {
        let mode = if p.is_dir() { 0o777 } else { 0o644 };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// The static rustnfs exporting `dir` on loopback, supervised (stopped with the run,
/// interrupted or not), and its export.
fn start_rustnfs(dir: &Path) -> anyhow::Result<(Supervised, NfsExport)> {
    let bin = super::host::static_bin("rustnfs")?;
    let addr = SocketAddr::from(([127, 0, 0, 1], lab::free_port()?));
    let mut cmd = Command::new(bin);
    cmd.args(rustnfs_args(dir))
        .args(["--listen", &addr.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = Supervised::spawn("rustnfs (file-system table)", &mut cmd, None)?
        .with_grace(Duration::from_secs(2));
    child.wait_ready(&[addr], Duration::from_secs(10))?;
    Ok((child, NfsExport::rustnfs(addr)))
}
