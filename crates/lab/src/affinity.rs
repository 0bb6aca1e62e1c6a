//! Which CPUs a process may run on, and how busy they were: the client/server split of
//! a measurement (`sched_setaffinity` on every thread of a process tree) and each CPU's
//! busy share between two readings of `/proc/stat`.
//!
//! Why: on a small machine a load generator sharing cores with the servers measures who
//! wins the fight for them. Pinned apart, a client whose CPUs are saturated is visibly
//! the bottleneck (its req/s is a lower bound on the server's capacity).

use crate::{LabError, Result};

/// Parses a CPU list as `taskset -c` and cpusets write it: `0`, `0,2`, `1-3`, `0-1,4`.
/// The error says what is wrong with it.
pub fn parse_cpu_list(text: &str) -> std::result::Result<Vec<usize>, String> {
    let bad = |why: &str| format!("CPU list `{text}`: {why}");
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(bad("empty item"));
        }
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let lo: usize = lo.parse().map_err(|_| bad("not a number"))?;
        let hi: usize = hi.parse().map_err(|_| bad("not a number"))?;
        if hi < lo || hi >= libc::CPU_SETSIZE as usize {
            return Err(bad("bad range"));
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Formats a CPU list compactly (`0-2,5`).
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        while i + 1 < cpus.len() && cpus[i + 1] == cpus[i] + 1 {
            i += 1;
        }
        parts.push(match cpus[i] == start {
            true => start.to_string(),
            false => format!("{start}-{}", cpus[i]),
        });
        i += 1;
    }
    parts.join(",")
}

/// The CPUs this process may run on now.
pub fn available_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the call writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|c| libc::CPU_ISSET(*c, &set))
            .collect()
    }
}

/// The default split of `cpus`: the client gets the first half (at least one), the
/// servers the rest; `None` with fewer than two CPUs (nothing to split).
pub fn default_split(cpus: &[usize]) -> Option<(Vec<usize>, Vec<usize>)> {
    if cpus.len() < 2 {
        return None;
    }
    let k = (cpus.len() / 2).max(1);
    Some((cpus[..k].to_vec(), cpus[k..].to_vec()))
}

/// Pins one thread (a task id) to `cpus`.
pub fn pin_task(tid: u32, cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: as in `available_cpus`; CPU_SET is given indices below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in cpus.iter().filter(|c| **c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(*c, &mut set);
        }
        if libc::sched_setaffinity(tid as libc::pid_t, std::mem::size_of_val(&set), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Pins every thread of `pid` and of all its descendants to `cpus` (threads and
/// processes created later inherit it from their creator). Threads that exit meanwhile
/// are skipped; failing to pin the process itself is an error.
pub fn pin_tree(pid: u32, cpus: &[usize]) -> Result<()> {
    for p in crate::sampler::tree_pids(pid) {
        let tasks: Vec<u32> = std::fs::read_dir(format!("/proc/{p}/task"))
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        for t in tasks {
            if let Err(e) = pin_task(t, cpus)
                && t == pid
            {
                return Err(LabError::io(
                    format!("cannot pin process {pid} to CPUs {}", format_cpu_list(cpus)),
                    e,
                ));
            }
        }
    }
    Ok(())
}

/// Cumulative busy and total jiffies of each CPU, from `/proc/stat`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuTimes {
    /// (cpu index, busy jiffies, total jiffies).
    per_cpu: Vec<(usize, u64, u64)>,
}

impl CpuTimes {
    pub fn now() -> CpuTimes {
        Self::parse(&std::fs::read_to_string("/proc/stat").unwrap_or_default())
    }

    /// Parses `/proc/stat`: busy = everything but idle and iowait.
    pub fn parse(text: &str) -> CpuTimes {
        let per_cpu = text
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let cpu: usize = f.next()?.strip_prefix("cpu")?.parse().ok()?;
                let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
                // user nice system idle iowait irq softirq steal (guest is inside user).
                let total: u64 = v.iter().take(8).sum();
                let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
                Some((cpu, total.saturating_sub(idle), total))
            })
            .collect();
        CpuTimes { per_cpu }
    }

    /// The share of time (0–1) the CPUs in `cpus` were busy since `earlier`, by anyone;
    /// `None` when no time passed on them.
    pub fn busy_since(&self, earlier: &CpuTimes, cpus: &[usize]) -> Option<f64> {
        let (mut busy, mut total) = (0u64, 0u64);
        for (cpu, b, t) in &self.per_cpu {
            if !cpus.contains(cpu) {
                continue;
            }
            if let Some((_, b0, t0)) = earlier.per_cpu.iter().find(|x| x.0 == *cpu) {
                busy += b.saturating_sub(*b0);
                total += t.saturating_sub(*t0);
            }
        }
        (total > 0).then(|| busy as f64 / total as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_format() {
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_list("0-2,5, 1").unwrap(), vec![0, 1, 2, 5]);
        assert_eq!(format_cpu_list(&[0, 1, 2, 5]), "0-2,5");
        for bad in ["", "a", "3-1", "0,,1", "99999"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
        assert_eq!(default_split(&[0]), None);
        assert_eq!(default_split(&[0, 1]), Some((vec![0], vec![1])));
        assert_eq!(default_split(&[0, 1, 2]), Some((vec![0], vec![1, 2])));
    }

    #[test]
    fn busy_share_by_hand() {
        let a =
            CpuTimes::parse("cpu 1 1 1 1\ncpu0 100 0 50 800 50 0 0 0\ncpu1 10 0 0 990 0 0 0 0\n");
        let b =
            CpuTimes::parse("cpu 1 1 1 1\ncpu0 160 0 80 850 60 0 0 0\ncpu1 20 0 0 1080 0 0 0 0\n");
        // cpu0: busy +90 of +150 jiffies = 0.6; cpu1: +10 of +100 = 0.1; both: 100/250.
        assert!((b.busy_since(&a, &[0]).unwrap() - 0.6).abs() < 1e-9);
        assert!((b.busy_since(&a, &[1]).unwrap() - 0.1).abs() < 1e-9);
        assert!((b.busy_since(&a, &[0, 1]).unwrap() - 0.4).abs() < 1e-9);
        assert_eq!(b.busy_since(&b, &[0]), None);
    }

    #[test]
    fn pins_a_child_and_its_threads() {
        let cpus = available_cpus();
        assert!(!cpus.is_empty());
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        pin_tree(child.id(), &cpus[..1]).unwrap();
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim()
            .to_string();
        assert_eq!(allowed, cpus[0].to_string());
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
