//! The host side of the container comparison: finding the static binaries every column
//! runs, a static httpd as a host process, waiting for ports, one load point, and small
//! helpers the columns share.

use anyhow::Context as _;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lab::sampler::tree_rss_bytes;
use loadgen::Schedule;

use super::model::Point;
use crate::experiment::load::Load;

/// True when the ELF file has no program interpreter (statically linked).
fn is_static_elf(path: &Path) -> bool {
    let Ok(b) = std::fs::read(path) else {
        return false;
    };
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).all(|i| {
        let o = phoff + i * size;
        o + 4 <= b.len() && u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) != 3
    })
}

/// The static build of `name` (docker/build.sh's): `SERVELAB_STATIC_DIR`, else
/// `<target>/static/*/release-static/` next to this executable's target directory.
pub fn static_bin(name: &str) -> anyhow::Result<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(d) = std::env::var_os("SERVELAB_STATIC_DIR") {
        candidates.push(PathBuf::from(d).join(name));
    }
    if let Ok(exe) = std::env::current_exe() {
        for up in exe.ancestors().skip(1).take(3) {
            if let Ok(rd) = std::fs::read_dir(up.join("static")) {
                for e in rd.flatten() {
                    candidates.push(e.path().join("release-static").join(name));
                }
            }
        }
    }
    candidates
        .into_iter()
        .find(|p| is_static_elf(p))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no static {name} (run `BINS_ONLY=1 docker/build.sh {name}` or set \
                 SERVELAB_STATIC_DIR): containers run the same static binary as the host"
            )
        })
}

/// A static httpd on the host, killed on drop.
pub struct HostHttpd {
    /// Supervised by the lab harness: dies with servelab, SIGTERM then SIGKILL on drop.
    pub proc: lab::process::Supervised,
    pub url: String,
}

impl HostHttpd {
    pub fn start(bin: &Path, args: &[String]) -> anyhow::Result<HostHttpd> {
        let port = lab::free_port()?;
        let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
        let mut cmd = Command::new(bin);
        cmd.args(["--listen", &addr.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut proc = lab::process::Supervised::spawn("httpd", &mut cmd, None)
            .with_context(|| bin.display().to_string())?
            .with_grace(Duration::from_secs(2));
        proc.wait_ready(&[addr], Duration::from_secs(15))
            .with_context(|| bin.display().to_string())?;
        Ok(HostHttpd {
            proc,
            url: format!("http://{addr}"),
        })
    }
}

pub fn wait_http(url: &str, limit: Duration) -> anyhow::Result<()> {
    let addr = url.trim_start_matches("http://").to_string();
    let start = Instant::now();
    while start.elapsed() < limit {
        if TcpStream::connect(&addr).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(anyhow::anyhow!("{url} did not accept within {limit:?}"))
}

/// One load run through the shared wrapper ([`crate::experiment::load::Load`], its timeout and
/// its no-success-is-an-error policy). A point of these tables is one figure with no
/// failure column, so on top of that policy a point must be clean: any failed or
/// non-2xx request makes it an error, listed under the report's failures.
pub fn load(url: &str, schedule: Schedule, c: usize, keepalive: bool) -> anyhow::Result<Point> {
    let r = Load::new(url, schedule, c).keepalive(keepalive).run()?;
    if r.failed() > 0 || r.non_2xx > 0 {
        anyhow::bail!(
            "{url}: {} requests, {} failed, {} non-2xx{}",
            r.requests,
            r.failed(),
            r.non_2xx,
            r.first_error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        );
    }
    let total = r.total().unwrap_or_default();
    Ok(Point {
        requests_per_sec: r.requests_per_sec(),
        mbytes_per_sec: r.bytes_per_sec() / 1e6,
        p50_ms: total.quantile_seconds(0.5) * 1e3,
        p99_ms: total.quantile_seconds(0.99) * 1e3,
        requests: r.requests,
        ..Point::default()
    })
}

pub fn host_rss(a: &Option<HostHttpd>, b: &HostHttpd) -> u64 {
    tree_rss_bytes(b.proc.pid()) + a.as_ref().map_or(0, |h| tree_rss_bytes(h.proc.pid()))
}

pub fn wait_tcp(addr: &str, secs: u64) -> anyhow::Result<()> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        if TcpStream::connect(addr).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(anyhow::anyhow!("{addr} did not accept within {secs} s"))
}

pub fn make_world_readable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(dir) else {
        return;
    };
    let mode = if meta.is_dir() { 0o755 } else { 0o644 };
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode));
    if meta.is_dir()
        && let Ok(rd) = std::fs::read_dir(dir)
    {
        for e in rd.flatten() {
            make_world_readable(&e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_elf_detection() {
        // This test binary is dynamically linked (it has an interpreter).
        let exe = std::env::current_exe().unwrap();
        assert!(!is_static_elf(&exe));
        assert!(!is_static_elf(Path::new("/nonexistent")));
    }
}
