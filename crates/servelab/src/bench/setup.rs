//! `setup.md`: the machine, versions, cache state, load, settings and dataset of a run.

use std::time::Duration;

use lab::dataset::DatasetInfo;
use lab::environment::Environment;

use super::options::BenchOptions;
use crate::doc::{Block, Doc};

/// What the setup note is made from.
pub struct Setup<'a> {
    pub env: &'a Environment,
    pub opts: &'a BenchOptions,
    pub info: &'a DatasetInfo,
    pub load_before: &'a str,
    pub load_after: &'a str,
    pub took: Duration,
    /// Byte-check failures and the like.
    pub notes: &'a [String],
}

/// The setup note: machine, versions, cache state, load, settings, dataset.
pub fn setup_note(s: &Setup) -> String {
    let mut blocks = vec![
        Block::Heading(1, "Setup of this run".into()),
        Block::List([machine(s), run(s), dataset(s.info), methods()].concat()),
    ];
    if !s.notes.is_empty() {
        blocks.extend([Block::h2("Notes"), Block::List(s.notes.to_vec())]);
    }
    blocks.into_iter().collect::<Doc>().to_markdown()
}

fn build() -> &'static str {
    if cfg!(debug_assertions) {
        "DEBUG"
    } else {
        "release"
    }
}

/// The machine, its load and the versions of everything that ran.
fn machine(s: &Setup) -> Vec<String> {
    let env = s.env;
    let mut v = vec![
        format!(
            "Started: {} (took {:.0} s)",
            env.started_utc,
            s.took.as_secs_f64()
        ),
        format!("Host: {} — {} × {}", env.hostname, env.cores, env.cpu_model),
        format!(
            "Memory: {:.1} GiB",
            env.memory_bytes as f64 / (1u64 << 30) as f64
        ),
        format!("Kernel: {}; OS: {}", env.kernel, env.os),
        format!(
            "Load average (1/5/15 min) before: {}; after: {} — the machine is shared; only ratios within this run mean anything",
            s.load_before, s.load_after
        ),
        format!("Cache state: {}", env.cache_state),
        format!(
            "servelab {} ({} build); httpd and rustnfs run as `servelab httpd|rustnfs` child processes",
            env.servelab_version,
            build()
        ),
    ];
    v.extend(
        env.tools
            .iter()
            .map(|(tool, version)| format!("{tool}: {version}")),
    );
    v
}

fn run(s: &Setup) -> Vec<String> {
    vec![format!(
        "Settings: repeat {}, {} s per measurement (3× for 10 MiB at c = 100, so several rounds complete){}, groups {:?}",
        s.opts.repeat,
        s.opts.seconds,
        if s.opts.quick { ", --quick" } else { "" },
        s.opts.groups
    )]
}

fn dataset(info: &DatasetInfo) -> Vec<String> {
    let mut v = vec![format!(
        "Dataset (seed {}): {} ({} bytes), {} ({} bytes), boot set: 12 files of 1–64 KiB + 4 of 10 MiB",
        info.seed.map_or("none".into(), |s| s.to_string()),
        info.large_file,
        info.large_bytes,
        info.small_file,
        info.small_bytes
    )];
    if let Some(fs) = &info.file_system {
        let mut line = format!("Dataset's file system: {}", fs.describe());
        if fs.creates_skip_recent_deletions() {
            line.push_str(
                "\n  - ext4 without a journal makes every create skip the inodes freed in the last 60 s or more, so the metadata cases slow down as they run, for whichever server runs then: their ratios measure the file system's recent deletions as much as the servers (`lab::fsinfo`)",
            );
        }
        v.push(line);
    }
    v
}

/// How each kind of measurement was taken.
fn methods() -> Vec<String> {
    [
        "HTTP: wrk -t min(c, cores) -c C -d D --latency [-H 'Connection: close']; servelab load: the loadgen library, one thread per core, keep-alive = HTTP/1.1 reuse, close = HTTP/1.0 new connection per request (as ab)",
        "NFS: servelab load nfs:// (nfsclient, one connection per client, 1 MiB READs, metadata = CREATE/GETATTR/REMOVE over 200 names); servelab-load-nfs4 = the same over NFSv4.0 (one v4 client per worker: OPEN + 1 MiB READs; OPEN-create/CLOSE/GETATTR/REMOVE), Ganesha serving v3 and v4 with the export as its pseudo-root; nfs-cat = libnfs, the 10 MiB file 5 times in a row per measurement, wall time including each mount",
        "TCP: servelab load tcp:// (128 KiB writes) → servelab tcp-server; iperf3 -c → iperf3 -s (default 128 KiB)",
    ]
    .map(String::from)
    .to_vec()
}
