//! `setup.md`: the machine, versions, cache state, load, settings and dataset of a run.

use std::fmt::Write as _;
use std::time::Duration;

use lab::dataset::DatasetInfo;
use lab::environment::Environment;

use super::options::BenchOptions;

/// The setup note: machine, versions, cache state, load, settings, dataset.
pub fn setup_note(
    env: &Environment,
    opts: &BenchOptions,
    info: &DatasetInfo,
    load_before: &str,
    load_after: &str,
    took: Duration,
    notes: &[String],
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Setup of this run\n");
    let _ = writeln!(
        s,
        "- Started: {} (took {:.0} s)",
        env.started_utc,
        took.as_secs_f64()
    );
    let _ = writeln!(
        s,
        "- Host: {} — {} × {}",
        env.hostname, env.cores, env.cpu_model
    );
    let _ = writeln!(
        s,
        "- Memory: {:.1} GiB",
        env.memory_bytes as f64 / (1u64 << 30) as f64
    );
    let _ = writeln!(s, "- Kernel: {}; OS: {}", env.kernel, env.os);
    let _ = writeln!(
        s,
        "- Load average (1/5/15 min) before: {load_before}; after: {load_after} — the machine is shared; only ratios within this run mean anything"
    );
    let _ = writeln!(s, "- Cache state: {}", env.cache_state);
    let _ = writeln!(
        s,
        "- servelab {} ({} build); httpd and rustnfs run as `servelab httpd|rustnfs` child processes",
        env.servelab_version,
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "release"
        }
    );
    for (tool, version) in &env.tools {
        let _ = writeln!(s, "- {tool}: {version}");
    }
    let _ = writeln!(
        s,
        "- Settings: repeat {}, {} s per measurement (3× for 10 MiB at c = 100, so several rounds complete){}, groups {:?}",
        opts.repeat,
        opts.seconds,
        if opts.quick { ", --quick" } else { "" },
        opts.groups
    );
    let _ = writeln!(
        s,
        "- Dataset (seed {}): {} ({} bytes), {} ({} bytes), boot set: 12 files of 1–64 KiB + 4 of 10 MiB",
        info.seed.map_or("none".into(), |s| s.to_string()),
        info.large_file,
        info.large_bytes,
        info.small_file,
        info.small_bytes
    );
    if let Some(fs) = &info.file_system {
        let _ = writeln!(s, "- Dataset's file system: {}", fs.describe());
        if fs.creates_skip_recent_deletions() {
            let _ = writeln!(
                s,
                "  - ext4 without a journal makes every create skip the inodes freed in the last 60 s or more, so the metadata cases slow down as they run, for whichever server runs then: their ratios measure the file system's recent deletions as much as the servers (`lab::fsinfo`)"
            );
        }
    }
    let _ = writeln!(
        s,
        "- HTTP: wrk -t min(c, cores) -c C -d D --latency [-H 'Connection: close']; servelab load: the loadgen library, one thread per core, keep-alive = HTTP/1.1 reuse, close = HTTP/1.0 new connection per request (as ab)"
    );
    let _ = writeln!(
        s,
        "- NFS: servelab load nfs:// (nfsclient, one connection per client, 1 MiB READs, metadata = CREATE/GETATTR/REMOVE over 200 names); servelab-load-nfs4 = the same over NFSv4.0 (one v4 client per worker: OPEN + 1 MiB READs; OPEN-create/CLOSE/GETATTR/REMOVE), Ganesha serving v3 and v4 with the export as its pseudo-root; nfs-cat = libnfs, the 10 MiB file 5 times in a row per measurement, wall time including each mount"
    );
    let _ = writeln!(
        s,
        "- TCP: servelab load tcp:// (128 KiB writes) → servelab tcp-server; iperf3 -c → iperf3 -s (default 128 KiB)"
    );
    if !notes.is_empty() {
        let _ = writeln!(s, "\n## Notes\n");
        for n in notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}
