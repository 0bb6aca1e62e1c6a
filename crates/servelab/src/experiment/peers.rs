//! Third-party baselines of a run, started by one call: [`start`] says whether a peer
//! runs, was not there to run, or failed — the caller only decides what a failure means
//! to it (compare fails a peer it was told to run, and skips one it found by itself).

use std::path::Path;

use lab::peers::{Baseline, ExternalServer};

/// What became of a baseline.
pub enum Started {
    Running(Box<ExternalServer>),
    /// Not installed here, or not a server we start (the kernel NFS client); the reason.
    Missing(String),
    /// Installed, and it did not start.
    Failed(lab::LabError),
}

/// Starts `b` serving (or exporting) `root` when this machine has it; NFS-Ganesha serves
/// NFSv3 and NFSv4.0 ([`Baseline::start`]).
pub fn start(b: Baseline, root: &Path) -> Started {
    if let Err(why) = b.detect() {
        return Started::Missing(why.to_string());
    }
    if b == Baseline::KernelNfs {
        return Started::Missing(
            "the kernel NFS client is mounted, not started: run httpd --root on the mount".into(),
        );
    }
    match b.start(root) {
        Ok(s) => Started::Running(Box::new(s)),
        Err(e) => Started::Failed(e),
    }
}

impl Started {
    /// Why it does not run, as a report's "skipped" line says it.
    pub fn why_not(&self) -> Option<String> {
        match self {
            Started::Running(_) => None,
            Started::Missing(why) => Some(why.clone()),
            Started::Failed(e) => Some(format!(
                "installed but did not start: {}",
                service::Chain(e)
            )),
        }
    }
}
