//! What a server costs while it works: resident memory over time, CPU seconds, context
//! switches and open files of a process tree (master and workers) read from `/proc`, or
//! of a cgroup (a container) read from its cgroup v2 files.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// What to sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A process and every descendant (nginx's and Apache's workers count).
    Tree(u32),
    /// A cgroup v2 directory (`/sys/fs/cgroup/...`): memory and CPU from the cgroup's
    /// own accounting, context switches and files from the processes in it.
    Cgroup(PathBuf),
}

/// Counters that only grow, read at the start and the end of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Counters {
    user_s: f64,
    system_s: f64,
    voluntary_switches: u64,
    involuntary_switches: u64,
}

/// What a target cost during one sampled interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub seconds: f64,
    pub peak_rss_bytes: u64,
    pub mean_rss_bytes: u64,
    /// Resident memory when sampling began.
    pub start_rss_bytes: u64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// Most file descriptors open at once (sockets included).
    pub peak_open_fds: u64,
    /// (seconds since start, resident bytes), every sample.
    pub rss_samples: Vec<(f64, u64)>,
}

impl Usage {
    pub fn cpu_s(&self) -> f64 {
        self.cpu_user_s + self.cpu_system_s
    }
}

/// Resident bytes of `pid` and all its descendants now (0 when it is gone).
pub fn tree_rss_bytes(pid: u32) -> u64 {
    tree_pids(pid).into_iter().filter_map(rss_bytes).sum()
}

fn status_field(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Resident bytes of one process (`VmRSS`), or `None` when it is gone.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(status_field(&status, "VmRSS:")? * 1024)
}

/// Clock ticks per second of `/proc/*/stat`'s times.
pub(crate) fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// CPU and context switches of one process (all its threads).
fn process_counters(pid: u32, ticks: f64) -> Counters {
    let mut c = Counters::default();
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        && let Some((_, rest)) = stat.rsplit_once(')')
    {
        // After the command: state is field 3, utime 14 and stime 15 (1-based).
        let f: Vec<&str> = rest.split_whitespace().collect();
        let get = |i: usize| {
            f.get(i - 3)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        c.user_s = get(14) / ticks;
        c.system_s = get(15) / ticks;
    }
    // Context switches are per thread.
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("status")) {
                c.voluntary_switches += status_field(&s, "voluntary_ctxt_switches:").unwrap_or(0);
                c.involuntary_switches +=
                    status_field(&s, "nonvoluntary_ctxt_switches:").unwrap_or(0);
            }
        }
    }
    c
}

/// CPU seconds (user + system, all threads, children not included) `pid` has used so
/// far, from `/proc/PID/stat`; 0 when it is gone.
pub fn process_cpu_s(pid: u32) -> f64 {
    let c = process_counters(pid, ticks_per_sec());
    c.user_s + c.system_s
}

/// Open file descriptors of one process (0 when it is gone).
pub fn open_fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

/// Open descriptors of one process that are sockets (`socket:[inode]` links).
pub fn open_sockets(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| {
        d.filter_map(Result::ok)
            .filter(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
            })
            .count() as u64
    })
}

/// Parses the human sizes `docker stats` prints (`1.234MiB`, `512KiB`, `3.1GiB`, `900B`,
/// `2.5MB`) into bytes.
pub fn parse_docker_size(text: &str) -> Option<u64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = text.split_at(split);
    let mult = match unit {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        _ => return None,
    };
    Some((num.trim().parse::<f64>().ok()? * mult) as u64)
}

/// `pid` and every process whose parent chain leads to it.
pub fn tree_pids(pid: u32) -> Vec<u32> {
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

fn cgroup_pids(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

fn cgroup_value(dir: &Path, file: &str, key: Option<&str>) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join(file)).ok()?;
    match key {
        None => text.trim().parse().ok(),
        Some(k) => text.lines().find_map(|l| {
            let (name, v) = l.split_once(' ')?;
            (name == k).then(|| v.trim().parse().ok()).flatten()
        }),
    }
}

impl Target {
    fn pids(&self) -> Vec<u32> {
        match self {
            Target::Tree(pid) => tree_pids(*pid),
            Target::Cgroup(dir) => cgroup_pids(dir),
        }
    }

    /// Resident memory now: the processes' RSS, or the cgroup's anonymous + file-mapped
    /// memory (`memory.stat`, so page cache the cgroup merely read does not count).
    fn rss(&self, pids: &[u32]) -> u64 {
        match self {
            Target::Tree(_) => pids.iter().filter_map(|p| rss_bytes(*p)).sum(),
            Target::Cgroup(dir) => {
                let anon = cgroup_value(dir, "memory.stat", Some("anon")).unwrap_or(0);
                let mapped = cgroup_value(dir, "memory.stat", Some("file_mapped")).unwrap_or(0);
                anon + mapped
            }
        }
    }

    fn counters(&self, pids: &[u32], ticks: f64) -> Counters {
        let mut c = Counters::default();
        for p in pids {
            let pc = process_counters(*p, ticks);
            c.user_s += pc.user_s;
            c.system_s += pc.system_s;
            c.voluntary_switches += pc.voluntary_switches;
            c.involuntary_switches += pc.involuntary_switches;
        }
        if let Target::Cgroup(dir) = self {
            // The cgroup's own CPU accounting includes processes that already exited.
            if let Some(u) = cgroup_value(dir, "cpu.stat", Some("user_usec")) {
                c.user_s = u as f64 / 1e6;
            }
            if let Some(s) = cgroup_value(dir, "cpu.stat", Some("system_usec")) {
                c.system_s = s as f64 / 1e6;
            }
        }
        c
    }
}

struct Shared {
    samples: Vec<(f64, u64)>,
    peak_fds: u64,
}

/// Samples a target every `interval` on a thread of its own until [`Sampler::finish`].
pub struct Sampler {
    target: Target,
    started: Instant,
    before: Counters,
    stop: Arc<AtomicBool>,
    shared: Arc<Mutex<Shared>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Every 50 ms; the process list is refreshed every 0.5 s (workers come and go).
    pub fn start(target: Target) -> Self {
        Self::with_interval(target, Duration::from_millis(50))
    }

    pub fn with_interval(target: Target, interval: Duration) -> Self {
        let ticks = ticks_per_sec();
        let pids = target.pids();
        let before = target.counters(&pids, ticks);
        let started = Instant::now();
        let first = target.rss(&pids);
        let fds = pids.iter().map(|p| open_fds(*p)).sum();
        let shared = Arc::new(Mutex::new(Shared {
            samples: vec![(0.0, first)],
            peak_fds: fds,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stop, shared, target) = (stop.clone(), shared.clone(), target.clone());
            std::thread::Builder::new()
                .name("lab-sampler".into())
                .spawn(move || {
                    let mut pids = pids;
                    let mut listed = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(interval);
                        if listed.elapsed() >= Duration::from_millis(500) {
                            pids = target.pids();
                            listed = Instant::now();
                        }
                        let rss = target.rss(&pids);
                        let fds: u64 = pids.iter().map(|p| open_fds(*p)).sum();
                        let mut s = shared.lock();
                        s.samples.push((started.elapsed().as_secs_f64(), rss));
                        s.peak_fds = s.peak_fds.max(fds);
                    }
                })
                .ok()
        };
        Sampler {
            target,
            started,
            before,
            stop,
            shared,
            thread,
        }
    }

    /// Stops sampling and returns what the target cost since [`Sampler::start`].
    pub fn finish(mut self) -> Usage {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let pids = self.target.pids();
        let after = self.target.counters(&pids, ticks_per_sec());
        let seconds = self.started.elapsed().as_secs_f64();
        let mut s = self.shared.lock();
        s.samples.push((seconds, self.target.rss(&pids)));
        let samples = std::mem::take(&mut s.samples);
        let peak = samples.iter().map(|x| x.1).max().unwrap_or(0);
        let mean = samples.iter().map(|x| x.1).sum::<u64>() / samples.len().max(1) as u64;
        Usage {
            seconds,
            peak_rss_bytes: peak,
            mean_rss_bytes: mean,
            start_rss_bytes: samples.first().map_or(0, |x| x.1),
            cpu_user_s: (after.user_s - self.before.user_s).max(0.0),
            cpu_system_s: (after.system_s - self.before.system_s).max(0.0),
            voluntary_switches: after
                .voluntary_switches
                .saturating_sub(self.before.voluntary_switches),
            involuntary_switches: after
                .involuntary_switches
                .saturating_sub(self.before.involuntary_switches),
            peak_open_fds: s.peak_fds,
            rss_samples: samples,
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_sizes_parse_in_both_unit_systems() {
        assert_eq!(parse_docker_size("900B"), Some(900));
        assert_eq!(parse_docker_size("512KiB"), Some(512 * 1024));
        assert_eq!(parse_docker_size("2.5MB"), Some(2_500_000));
        assert_eq!(parse_docker_size("1.5GiB"), Some(3 << 29));
        assert_eq!(parse_docker_size("12"), None);
        assert_eq!(parse_docker_size("3 parsecs"), None);
    }

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
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn measures_cpu_memory_and_files_of_a_busy_process() {
        let sampler =
            Sampler::with_interval(Target::Tree(std::process::id()), Duration::from_millis(10));
        // Burn ~150 ms of CPU and hold 32 MiB touched, and a few extra files open.
        let files: Vec<_> = (0..5)
            .map(|_| std::fs::File::open("/proc/self/stat").unwrap())
            .collect();
        let buf = vec![1u8; 32 << 20];
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(150) {
            x = x.wrapping_add(std::hint::black_box(buf[x as usize % buf.len()] as u64));
        }
        std::thread::sleep(Duration::from_millis(30));
        let u = sampler.finish();
        drop(files);
        std::hint::black_box((x, &buf));
        assert!(u.cpu_user_s + u.cpu_system_s >= 0.05, "{u:?}");
        assert!(u.peak_rss_bytes >= 32 << 20, "{u:?}");
        assert!(u.mean_rss_bytes <= u.peak_rss_bytes);
        assert!(u.peak_open_fds >= 5);
        assert!(u.rss_samples.len() >= 5);
        assert!(u.voluntary_switches + u.involuntary_switches > 0);
    }

    #[test]
    fn reads_cgroup_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cgroup.procs"),
            format!("{}\n", std::process::id()),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("memory.stat"),
            "anon 1000\nfile 99999\nfile_mapped 24\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("cpu.stat"),
            "usage_usec 3000000\nuser_usec 2000000\nsystem_usec 1000000\n",
        )
        .unwrap();
        let t = Target::Cgroup(dir.path().to_path_buf());
        let pids = t.pids();
        assert_eq!(pids, vec![std::process::id()]);
        assert_eq!(t.rss(&pids), 1024);
        let c = t.counters(&pids, ticks_per_sec());
        assert_eq!((c.user_s, c.system_s), (2.0, 1.0));
    }
}
