//! Where a run's files go (`results/<date>-<host>[-N]/`, shared by `compare` and
//! `bench`) and the machine's load noted beside them.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use lab::environment;

/// `results/<date>-<host>`, or with `-2`, `-3`… when a run of the same day exists.
pub fn unique_run_dir(results: &Path) -> anyhow::Result<PathBuf> {
    let date = &environment::now_rfc3339()[..10];
    let base = format!("{date}-{}", environment::hostname());
    for n in 1.. {
        let name = if n == 1 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        let dir = results.join(name);
        match std::fs::create_dir_all(results).and_then(|_| std::fs::create_dir(&dir)) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    unreachable!()
}

/// `/proc/loadavg`'s first three fields (1, 5 and 15 minutes), or `unknown`.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
