//! The whole machine's CPU time from `/proc/stat`: what no process's `/proc/PID/stat`
//! holds — softirq (packet processing run on the way out of an interrupt, charged to no
//! task), and ksoftirqd's share beside the serving processes' — so a layer's cost can
//! be read as whole-machine CPU minus the client's own, beside the per-process figure.

/// CPU time of the whole machine and of this process (the client) at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MachineCpu {
    /// Busy jiffies over every CPU: user, nice, system, irq, softirq, steal (guest time
    /// is inside user; idle and iowait are not busy).
    busy: u64,
    softirq: u64,
    /// This process's own CPU seconds (the load generator is the client).
    client_s: f64,
}

/// What the machine did between two [`MachineCpu`] readings, in CPU seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MachineUse {
    /// Every CPU's busy time minus the client's own.
    pub besides_client_s: f64,
    /// Softirq time over every CPU (inside `besides_client_s` unless the client's
    /// process was charged for it, which the kernel does not do).
    pub softirq_s: f64,
}

/// Clock ticks per second of `/proc/stat`.
fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
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

impl MachineCpu {
    pub fn now() -> MachineCpu {
        let (busy, softirq) = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| parse_stat(&t))
            .unwrap_or_default();
        MachineCpu {
            busy,
            softirq,
            client_s: lab::sampler::process_cpu_s(std::process::id()),
        }
    }

    /// What happened since `earlier`.
    pub fn since(&self, earlier: &MachineCpu) -> MachineUse {
        let hz = ticks_per_sec();
        let busy_s = self.busy.saturating_sub(earlier.busy) as f64 / hz;
        let client = (self.client_s - earlier.client_s).max(0.0);
        MachineUse {
            besides_client_s: (busy_s - client).max(0.0),
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
    fn the_client_is_taken_out() {
        let hz = ticks_per_sec();
        let a = MachineCpu {
            busy: 0,
            softirq: 0,
            client_s: 1.0,
        };
        let b = MachineCpu {
            busy: (3.0 * hz) as u64,
            softirq: (0.5 * hz) as u64,
            client_s: 2.0,
        };
        let u = b.since(&a);
        assert!((u.besides_client_s - 2.0).abs() < 1e-9, "{u:?}");
        assert!((u.softirq_s - 0.5).abs() < 1e-9);
    }
}
