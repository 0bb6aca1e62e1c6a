//! Where a run's files go (`results/<date>-<host>[-N]/`, shared by `compare` and
//! `bench`), the dataset it serves, and the machine's load noted beside them.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use lab::dataset::{self, DatasetInfo, DatasetSpec};
use lab::environment;

/// The dataset a run serves: a directory the user gave, or one generated into a
/// temporary directory that goes with it.
pub struct Dataset {
    pub info: DatasetInfo,
    tmp: tempfile::TempDir,
}

impl Dataset {
    /// Describes `given`, or generates `spec` into `<tmp>/www` (the temporary directory
    /// named `prefix…`, which also takes what else the run needs beside the data).
    pub fn prepare(
        given: Option<&Path>,
        spec: DatasetSpec,
        prefix: &str,
    ) -> anyhow::Result<Dataset> {
        let tmp = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .context("cannot create a temporary directory")?;
        let info = match given {
            Some(dir) => dataset::describe_existing(dir)
                .with_context(|| format!("--dataset {}", dir.display()))?,
            None => {
                let root = tmp.path().join("www");
                super::terminal::note(format!("generating the dataset in {}", root.display()));
                dataset::generate(&root, spec).context("cannot generate the dataset")?
            }
        };
        Ok(Dataset { info, tmp })
    }

    /// The run's temporary directory.
    pub fn tmp(&self) -> &Path {
        self.tmp.path()
    }
}

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
