//! The whole machine's CPU time from `/proc/stat`: what no process's `/proc/PID/stat`
//! holds — softirq (packet processing run on the way out of an interrupt, charged to no
//! task) and the kernel threads' work (ksoftirqd, kworkers) — so a layer's cost can be
//! read as whole-machine CPU minus the client's own, beside the per-process figure.
//!
//! On a shared machine the whole machine also holds every neighbour's work, so the
//! figure also subtracts every other user-space process's CPU (own and reaped
//! children's, so a compiler that came and went under a living parent counts): what is
//! left is the serving processes plus the kernel's work, which is what a layer adds.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use lab::sampler::Target;

/// Clock ticks per second of `/proc/stat`.
fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// A kernel thread's `flags` bit in `/proc/PID/stat`.
const PF_KTHREAD: u64 = 0x0020_0000;

/// CPU time of the whole machine, of this process (the client) and of every other
/// user-space process at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MachineCpu {
    /// Busy jiffies over every CPU: user, nice, system, irq, softirq, steal (guest time
    /// is inside user; idle and iowait are not busy).
    busy: u64,
    softirq: u64,
    /// This process's own CPU seconds (the load generator is the client).
    client_s: f64,
    /// Every other user-space process: CPU seconds with its reaped children's.
    others: HashMap<u32, f64>,
}

/// What the machine did between two [`MachineCpu`] readings, in CPU seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MachineUse {
    /// Every CPU's busy time minus the client's and every other user process's: the
    /// serving processes plus the kernel's own work.
    pub besides_client_s: f64,
    /// Other user processes' CPU over the span (the neighbours taken out).
    pub others_s: f64,
    /// Softirq time over every CPU.
    pub softirq_s: f64,
}

/// Busy and softirq jiffies from the aggregate `cpu ` line of `/proc/stat`.
pub fn parse_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    Some((busy, at(6)))
}

/// From one `/proc/PID/stat`: `None` for a kernel thread, else utime + stime + cutime +
/// cstime in ticks.
pub fn parse_process(text: &str) -> Option<u64> {
    let rest: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).and_then(|x| x.parse::<u64>().ok());
    if field(9)? & PF_KTHREAD != 0 {
        return None;
    }
    Some(field(14)? + field(15)? + field(16)? + field(17)?)
}

/// The pids serving `parts` (a process tree, or every process in a cgroup).
pub fn serving_pids(parts: &[Target]) -> HashSet<u32> {
    fn cgroup_procs(dir: &Path, out: &mut HashSet<u32>) {
        if let Ok(t) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            out.extend(t.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        }
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                cgroup_procs(&e.path(), out);
            }
        }
    }
    let mut out = HashSet::new();
    for t in parts {
        match t {
            Target::Tree(pid) => out.extend(lab::sampler::tree_pids(*pid)),
            Target::Cgroup(dir) => cgroup_procs(dir, &mut out),
        }
    }
    out
}

/// Every user-space process but this one and `exclude`, with its CPU seconds.
fn other_processes(exclude: &HashSet<u32>) -> HashMap<u32, f64> {
    let hz = ticks_per_sec();
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me && !exclude.contains(pid))
        .filter_map(|pid| {
            let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some((pid, parse_process(&text)? as f64 / hz))
        })
        .collect()
}

impl MachineCpu {
    /// A reading; `serving` are the measured processes (left in the figure).
    pub fn now(serving: &HashSet<u32>) -> MachineCpu {
        let others = other_processes(serving);
        let (busy, softirq) = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| parse_stat(&t))
            .unwrap_or_default();
        MachineCpu {
            busy,
            softirq,
            client_s: lab::sampler::process_cpu_s(std::process::id()),
            others,
        }
    }

    /// What happened since `earlier`: a process seen only now ran within the span.
    pub fn since(&self, earlier: &MachineCpu) -> MachineUse {
        let hz = ticks_per_sec();
        let busy_s = self.busy.saturating_sub(earlier.busy) as f64 / hz;
        let client = (self.client_s - earlier.client_s).max(0.0);
        let others: f64 = self
            .others
            .iter()
            .map(|(pid, now)| (now - earlier.others.get(pid).copied().unwrap_or(0.0)).max(0.0))
            .sum();
        MachineUse {
            besides_client_s: (busy_s - client - others).max(0.0),
            others_s: others,
            softirq_s: self.softirq.saturating_sub(earlier.softirq) as f64 / hz,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_and_softirq_from_the_aggregate_line() {
        let stat = "cpu  100 5 50 1000 20 3 7 2 0 0\ncpu0 50 2 25 500 10 1 3 1 0 0\nintr 1 2\n";
        // 100 + 5 + 50 + 3 + 7 + 2: idle and iowait are not busy.
        assert_eq!(parse_stat(stat), Some((167, 7)));
        assert_eq!(parse_stat("intr 1\n"), None);
    }

    #[test]
    fn a_process_counts_with_its_reaped_children_a_kernel_thread_not_at_all() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
        // cmajflt utime stime cutime cstime …
        let user = "42 (cargo build) S 1 42 42 0 -1 4194560 10 0 0 0 30 10 500 100 20 0";
        assert_eq!(parse_process(user), Some(640));
        let kthread = "15 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 7 90 0 0 20 0";
        assert_eq!(parse_process(kthread), None);
    }

    #[test]
    fn the_client_and_the_neighbours_are_taken_out() {
        let hz = ticks_per_sec();
        let a = MachineCpu {
            client_s: 1.0,
            others: HashMap::from([(7, 10.0)]),
            ..MachineCpu::default()
        };
        let b = MachineCpu {
            busy: (3.5 * hz) as u64,
            softirq: (0.5 * hz) as u64,
            client_s: 2.0,
            // pid 7 used 0.25 s; pid 8 started and used 0.25 s within the span.
            others: HashMap::from([(7, 10.25), (8, 0.25)]),
        };
        let u = b.since(&a);
        assert!((u.besides_client_s - 2.0).abs() < 1e-9, "{u:?}");
        assert!((u.others_s - 0.5).abs() < 1e-9);
        assert!((u.softirq_s - 0.5).abs() < 1e-9);
    }

    /// This process's children are found by tree, and a real reading sees CPU pass.
    #[test]
    fn serving_processes_are_left_in() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pids = serving_pids(&[Target::Tree(std::process::id())]);
        assert!(pids.contains(&child.id()));
        let before = MachineCpu::now(&pids);
        assert!(!before.others.contains_key(&child.id()));
        let _ = child.kill();
        let _ = child.wait();
    }
}
