//! The boot-like file set — 12 small files of 1–64 KiB and 4 large ones of 10 MiB, like
//! the many small and few large files 16 clients read when they boot from one NFS
//! server at once — and its measurement.

use std::path::Path;

use anyhow::anyhow;
use lab::dataset;
use lab::tools::Measured;

use super::runs::NFS_BLOCK;
use crate::experiment::load::Load;
use crate::experiment::nfs::NfsExport;

/// Where the set lives inside the export, and its shape.
pub const DIR: &str = "boot";
pub const SMALL: usize = 12;
pub const LARGE: usize = 4;
/// One client per file.
pub const CLIENTS: usize = SMALL + LARGE;

/// The large files' paths inside the export (the NFS warm-up reads them).
pub fn large_files() -> impl Iterator<Item = String> {
    (0..LARGE).map(|i| format!("{DIR}/l{i}.bin"))
}

/// Every file's path inside the export: the small ones, then the large ones.
fn files() -> Vec<String> {
    let mut files: Vec<String> = (0..SMALL).map(|i| format!("{DIR}/s{i:02}.bin")).collect();
    files.extend(large_files());
    files
}

/// Writes the set under `root`, cut from the dataset's large file.
pub fn write(root: &Path) -> std::io::Result<()> {
    let dir = root.join(DIR);
    std::fs::create_dir_all(&dir)?;
    let large = std::fs::read(root.join(dataset::LARGE_FILE))?;
    for i in 0..SMALL {
        let len = 1024usize << (i % 7); // 1, 2, 4, … 64 KiB
        let start = (i * 7919) % (large.len() - len);
        std::fs::write(dir.join(format!("s{i:02}.bin")), &large[start..start + len])?;
    }
    for i in 0..LARGE {
        let mut data = large.clone();
        data.rotate_left(i * 4096 + 1);
        std::fs::write(dir.join(format!("l{i}.bin")), data)?;
    }
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    for e in std::fs::read_dir(&dir)? {
        std::fs::set_permissions(e?.path(), std::fs::Permissions::from_mode(0o644))?;
    }
    Ok(())
}

/// 16 clients at once, each with its own connection and thread, each reading its one
/// file for `seconds`. Operations and bytes add up across clients; latencies merge.
pub fn measure(export: &NfsExport, seconds: f64) -> anyhow::Result<Measured> {
    let files = files();
    let results: Vec<anyhow::Result<loadgen::Report>> = std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .iter()
            .map(|f| {
                let url = export.url(f);
                scope.spawn(move || {
                    Load::for_seconds(url, seconds, 1)
                        .threads(1)
                        .block_size(NFS_BLOCK)
                        .run()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a client thread panicked")))
            })
            .collect()
    });
    let mut m = Measured::default();
    let mut merged: Option<loadgen::Report> = None;
    for r in results {
        // `Load::run` already refuses a client that completed no read.
        let r = r?;
        m.seconds = m.seconds.max(r.duration.as_secs_f64());
        m.requests += r.requests;
        m.errors += r.failed();
        m.per_sec += r.requests_per_sec();
        m.bytes_per_sec += r.bytes_per_sec();
        match &mut merged {
            None => merged = Some(r),
            Some(acc) => {
                let _ = acc.merge(&r);
            }
        }
    }
    if let Some(total) = merged.as_ref().and_then(|r| r.total()) {
        m.p50_ms = Some(total.quantile_seconds(0.5) * 1e3);
        m.p99_ms = Some(total.quantile_seconds(0.99) * 1e3);
    }
    Ok(m)
}
