//! One measurement each, summarised as a [`Measured`] like a tool's output: our load
//! generator over HTTP, NFS and TCP (through [`crate::experiment::load::Load`] and its failure
//! policy), and libnfs's `nfs-cat`.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use lab::find_program;
use lab::process::Supervised;
use lab::tools::Measured;
use loadgen::{NfsWorkload, Schedule};

use crate::experiment::load::Load;

/// READ size of the NFS runs: 1 MiB, the rtmax both servers advertise and the rsize a
/// Linux client negotiates with them.
pub const NFS_BLOCK: usize = 1 << 20;

/// One closed-loop HTTP run with the load generator (loadgen's defaults: one thread per
/// core, like `wrk -t`).
pub fn http_load(
    url: &str,
    concurrency: usize,
    seconds: f64,
    keepalive: bool,
) -> anyhow::Result<Measured> {
    let r = Load::for_seconds(url, seconds, concurrency)
        .keepalive(keepalive)
        .run()?;
    Ok(to_measured(&r))
}

/// One NFS run in 1 MiB READs (or the metadata mix) with `clients` connections.
pub fn nfs_load(
    url: &str,
    workload: NfsWorkload,
    clients: usize,
    schedule: Schedule,
) -> anyhow::Result<Measured> {
    let r = Load::new(url, schedule, clients)
        .nfs(workload)
        .block_size(NFS_BLOCK)
        .run()?;
    Ok(to_measured(&r))
}

fn to_measured(r: &loadgen::Report) -> Measured {
    let total = r.total();
    Measured {
        seconds: r.duration.as_secs_f64(),
        requests: r.requests,
        errors: r.failed() + r.non_2xx,
        per_sec: r.requests_per_sec(),
        bytes_per_sec: r.bytes_per_sec(),
        p50_ms: total.as_ref().map(|s| s.quantile_seconds(0.5) * 1e3),
        p99_ms: total.as_ref().map(|s| s.quantile_seconds(0.99) * 1e3),
        client_cpu_s: None,
    }
}

/// `nfs-cat URL > /dev/null` five times in a row (one 10 MiB read takes ~20 ms, too short
/// to time alone on a busy machine), timed together; checks every byte count.
pub fn nfs_cat(url: &str, expect: u64) -> anyhow::Result<Measured> {
    const TIMES: u32 = 5;
    let program = find_program("nfs-cat").ok_or_else(|| anyhow!("nfs-cat is not installed"))?;
    let mut each = Vec::new();
    let t0 = Instant::now();
    for _ in 0..TIMES {
        let t = Instant::now();
        let (bytes, status, stderr) = cat_once(&program, url)?;
        each.push(t.elapsed().as_secs_f64() * 1e3);
        if !status.success() || bytes != expect {
            bail!(
                "nfs-cat {url}: {status} ({bytes} of {expect} bytes) {}",
                stderr.trim()
            );
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    each.sort_by(|a, b| a.total_cmp(b));
    Ok(Measured {
        seconds: secs,
        requests: u64::from(TIMES),
        errors: 0,
        per_sec: f64::from(TIMES) / secs,
        bytes_per_sec: (expect * u64::from(TIMES)) as f64 / secs,
        p50_ms: Some(each[each.len() / 2]),
        p99_ms: each.last().copied(),
        client_cpu_s: None,
    })
}

/// One `nfs-cat URL`, supervised (an interrupted run stops it): the bytes it wrote,
/// its exit status and what it said on stderr.
fn cat_once(program: &Path, url: &str) -> anyhow::Result<(u64, std::process::ExitStatus, String)> {
    let mut cmd = Command::new(program);
    cmd.arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = Supervised::spawn("nfs-cat", &mut cmd, None)?.with_grace(Duration::ZERO);
    let (Some(mut out), Some(mut err)) = child.take_pipes() else {
        bail!("nfs-cat: no output pipes");
    };
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let bytes =
        std::io::copy(&mut out, &mut std::io::sink()).context("cannot read nfs-cat's output")?;
    let status = child
        .wait_for(Duration::from_secs(60))
        .ok_or_else(|| anyhow!("nfs-cat {url} did not finish within 60 s"))?;
    Ok((bytes, status, errors.join().unwrap_or_default()))
}

/// `servelab load tcp://` (one stream, 128 KiB writes) against a `servelab tcp-server`
/// child process, like iperf3's client against `iperf3 -s`.
pub fn tcp_load(seconds: f64, log_dir: &Path) -> anyhow::Result<Measured> {
    let exe = std::env::current_exe().context("cannot find servelab itself")?;
    let port = lab::free_port()?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let log_path = log_dir.join("tcp-server.log");
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("cannot create {}", log_path.display()))?;
    let mut cmd = Command::new(exe);
    cmd.arg("tcp-server")
        .arg("--listen")
        .arg(addr.to_string())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    let mut server = Supervised::spawn("servelab tcp-server", &mut cmd, Some(&log_path))?
        .with_grace(Duration::from_secs(2));
    server.wait_ready(&[addr], Duration::from_secs(10))?;
    let r = Load::for_seconds(format!("tcp://{addr}"), seconds, 1)
        .block_size(128 * 1024)
        .run()?;
    Ok(to_measured(&r))
}
