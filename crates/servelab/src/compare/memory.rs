//! Resident memory of a server's process tree (master and workers), sampled during a run.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Resident bytes of `pid` and all its descendants now (0 when it is gone).
pub fn tree_rss_bytes(pid: u32) -> u64 {
    let mut total = 0;
    for p in tree_pids(pid) {
        total += rss_bytes(p).unwrap_or(0);
    }
    total
}

fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// `pid` and every process whose parent chain leads to it.
fn tree_pids(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
                // The command name may hold spaces and parentheses: parse after the last ')'.
                if let Some((_, rest)) = stat.rsplit_once(')')
                    && let Some(ppid) = rest.split_whitespace().nth(1).and_then(|v| v.parse().ok())
                {
                    parents.push((p, ppid));
                }
            }
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    tree
}

/// Samples a process tree's resident memory every 50 ms until stopped; keeps the peak.
pub struct PeakSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl PeakSampler {
    pub fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(tree_rss_bytes(pid)));
        let thread = {
            let (stop, peak) = (stop.clone(), peak.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(tree_rss_bytes(pid), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
        };
        PeakSampler {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    /// Stops sampling and returns the peak seen.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for PeakSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_children() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let me = std::process::id();
        let own = rss_bytes(me).unwrap();
        let tree = tree_rss_bytes(me);
        assert!(tree_pids(me).contains(&child.id()));
        assert!(tree > own, "tree {tree} own {own}");
        let sampler = PeakSampler::start(me);
        std::thread::sleep(Duration::from_millis(120));
        assert!(sampler.finish() >= own / 2);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
