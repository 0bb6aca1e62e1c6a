//! A CPU limit for host processes: a cgroup of our own with a CFS quota of N CPUs —
//! cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us` where the machine still runs v1.

use anyhow::Context as _;
use std::path::PathBuf;

/// A cgroup `sl-deploy-cmp-cpu`; its processes go back to the root cgroup on drop.
pub struct CpuLimit {
    dir: PathBuf,
    v2: bool,
    pub kind: &'static str,
}

const PERIOD_US: u64 = 100_000;

impl CpuLimit {
    pub fn create() -> anyhow::Result<CpuLimit> {
        let v2 = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let (dir, kind) = if v2 {
            // The cpu controller must be enabled for children of the root.
            let _ = std::fs::write("/sys/fs/cgroup/cgroup.subtree_control", "+cpu");
            (
                PathBuf::from("/sys/fs/cgroup/sl-deploy-cmp-cpu"),
                "cgroup v2 cpu.max",
            )
        } else {
            (
                PathBuf::from("/sys/fs/cgroup/cpu/sl-deploy-cmp-cpu"),
                "cgroup v1 cpu.cfs_quota_us",
            )
        };
        if !dir.exists() {
            std::fs::create_dir(&dir)
                .with_context(|| format!("cannot create cgroup {}", dir.display()))?;
        }
        Ok(CpuLimit { dir, v2, kind })
    }

    /// Moves a process (all its threads) into the cgroup.
    pub fn add(&self, pid: u32) -> anyhow::Result<()> {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
            .with_context(|| format!("cannot move {pid} into {}", self.dir.display()))
    }

    /// N CPUs of quota per period, or no limit.
    pub fn set(&self, cpus: Option<u32>) -> anyhow::Result<()> {
        let r = if self.v2 {
            let v = cpus.map_or(format!("max {PERIOD_US}"), |n| {
                format!("{} {PERIOD_US}", n as u64 * PERIOD_US)
            });
            std::fs::write(self.dir.join("cpu.max"), v)
        } else {
            std::fs::write(self.dir.join("cpu.cfs_period_us"), PERIOD_US.to_string()).and_then(
                |_| {
                    let q = cpus.map_or("-1".to_string(), |n| (n as u64 * PERIOD_US).to_string());
                    std::fs::write(self.dir.join("cpu.cfs_quota_us"), q)
                },
            )
        };
        r.with_context(|| format!("cannot set the CPU quota of {}", self.dir.display()))
    }
}

impl Drop for CpuLimit {
    fn drop(&mut self) {
        let root = self.dir.parent().unwrap().join("cgroup.procs");
        if let Ok(pids) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in pids.lines() {
                let _ = std::fs::write(&root, pid);
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}
