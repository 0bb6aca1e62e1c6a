//! The ladder as data (`ladder` in containers.json): each rung's runs, each layer's
//! added cost against the rung below with its interval, and how each container's extra
//! cost over the host splits into the layers the ladder measured and the rest.

use serde::{Deserialize, Serialize};

use crate::stats::{self, Comparison};

/// What one rung measured, one entry per run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RungRuns {
    /// CPU per request of the serving processes (or cgroups), `/proc/PID/stat`, ms.
    pub process_ms: Vec<f64>,
    /// Whole-machine CPU (`/proc/stat`) minus the client's own and every other user
    /// process's, per request, ms: the serving processes plus the kernel's work.
    pub machine_ms: Vec<f64>,
    /// Other user processes' CPU per request over the same runs (the neighbours taken
    /// out), ms.
    #[serde(default)]
    pub other_ms: Vec<f64>,
    /// Softirq time per request over every CPU, ms (a softirq tick is also charged to
    /// the task it interrupted).
    pub softirq_ms: Vec<f64>,
    /// Closed-loop requests per second (the capacity the equal load is a share of).
    pub capacity_per_sec: Vec<f64>,
    /// Median latency at the equal offered load, ms (quiet runs only unless
    /// `--keep-busy`).
    pub p50_ms: Vec<f64>,
    /// Runs whose latency was left out (busy machine).
    pub busy_runs: usize,
    pub failed: u64,
}

/// One rung: a side (B, or A's NFS hop), a layer, its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rung {
    /// `B` (the HTTP hop crosses the layer) or `A NFS hop` (httpd on the host reads
    /// rustnfs across it).
    pub side: String,
    /// `loopback`, `veth`, `bridge`, `bridge+NAT`, `LXD`, `Docker`.
    pub layer: String,
    pub description: String,
    pub runs: RungRuns,
}

/// One layer's added cost: a rung against the one below it on the same side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub side: String,
    pub from: String,
    pub to: String,
    pub process_ms: Option<Comparison>,
    pub machine_ms: Option<Comparison>,
    pub p50_ms: Option<Comparison>,
    /// What only the whole-machine figure sees: its added ms minus the per-process
    /// figure's (softirq, ksoftirqd, kernel threads).
    pub only_machine_ms: Option<f64>,
}

/// A container's extra CPU per request over the host (whole machine minus client),
/// split into the host layers it also crosses and the rest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    pub side: String,
    pub container: String,
    /// Container ÷ loopback.
    pub times_host: f64,
    /// Container − loopback, ms per request.
    pub extra_ms: f64,
    /// (layer, its added ms), in the order added.
    pub layers: Vec<(String, f64)>,
    /// `extra_ms` minus the layers: cgroups, the container's own stack.
    pub rest_ms: f64,
    /// What a published port (DNAT) adds on top, measured on the host layers.
    pub nat_ms: Option<f64>,
}

/// The ladder of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ladder {
    pub rungs: Vec<Rung>,
    pub steps: Vec<Step>,
    pub attributions: Vec<Attribution>,
    pub offered_per_sec: f64,
    pub rounds: usize,
    pub requests: u64,
    pub concurrency: usize,
    pub seconds_each: f64,
    pub elapsed_s: f64,
    /// Rungs that could not be built or run, with the reason.
    pub missing: Vec<String>,
    /// The programs the host rungs ran.
    #[serde(default)]
    pub programs: String,
    /// Runs on a busy machine were kept for latency (`--keep-busy`).
    #[serde(default)]
    pub keep_busy: bool,
}

/// The host layers each container's traffic also crosses (both reach the container by
/// its own address on a bridge; neither publishes a port in these runs).
pub const CONTAINER_CROSSES: [&str; 2] = ["veth", "bridge"];

fn compare(
    a: &[f64],
    b: &[f64],
    f: fn(&[f64], &[f64]) -> Option<Comparison>,
) -> Option<Comparison> {
    (a.len() >= 2 && b.len() >= 2).then(|| f(a, b)).flatten()
}

/// Each host rung against the one below it, and each container against loopback.
pub fn steps(rungs: &[Rung]) -> Vec<Step> {
    let mut out = Vec::new();
    for (i, r) in rungs.iter().enumerate() {
        let container = !["loopback", "veth", "bridge", "bridge+NAT"].contains(&r.layer.as_str());
        let below = if container {
            rungs
                .iter()
                .find(|x| x.side == r.side && x.layer == "loopback")
        } else {
            rungs[..i].iter().rev().find(|x| x.side == r.side)
        };
        let Some(below) = below.filter(|b| b.layer != r.layer) else {
            continue;
        };
        let (a, b) = (&r.runs, &below.runs);
        let process = compare(&a.process_ms, &b.process_ms, stats::difference);
        let machine = compare(&a.machine_ms, &b.machine_ms, stats::difference);
        out.push(Step {
            side: r.side.clone(),
            from: below.layer.clone(),
            to: r.layer.clone(),
            only_machine_ms: process.zip(machine).map(|(p, m)| m.estimate - p.estimate),
            process_ms: process,
            machine_ms: machine,
            p50_ms: compare(&a.p50_ms, &b.p50_ms, stats::difference),
        });
    }
    out
}

/// The median whole-machine-minus-client CPU per request of `layer` on `side`.
fn machine(rungs: &[Rung], side: &str, layer: &str) -> Option<f64> {
    let r = rungs.iter().find(|r| r.side == side && r.layer == layer)?;
    stats::median_of(&r.runs.machine_ms)
}

/// Every container's extra cost over loopback split into [`CONTAINER_CROSSES`] (each
/// the rung minus the one below it, medians) and the rest; `None` parts are skipped.
pub fn attributions(rungs: &[Rung]) -> Vec<Attribution> {
    let mut out = Vec::new();
    for r in rungs {
        if ["loopback", "veth", "bridge", "bridge+NAT"].contains(&r.layer.as_str()) {
            continue;
        }
        let side = r.side.as_str();
        let (Some(host), Some(total)) = (
            machine(rungs, side, "loopback"),
            stats::median_of(&r.runs.machine_ms),
        ) else {
            continue;
        };
        let mut layers = Vec::new();
        let mut below = host;
        for layer in CONTAINER_CROSSES {
            if let Some(m) = machine(rungs, side, layer) {
                layers.push((layer.to_string(), m - below));
                below = m;
            }
        }
        let extra = total - host;
        let nat = machine(rungs, side, "bridge+NAT")
            .zip(machine(rungs, side, "bridge"))
            .map(|(n, b)| n - b);
        out.push(Attribution {
            side: side.to_string(),
            container: r.layer.clone(),
            times_host: if host > 0.0 { total / host } else { f64::NAN },
            extra_ms: extra,
            rest_ms: extra - layers.iter().map(|(_, ms)| ms).sum::<f64>(),
            layers,
            nat_ms: nat,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rung(side: &str, layer: &str, machine: f64, process: f64) -> Rung {
        Rung {
            side: side.into(),
            layer: layer.into(),
            description: String::new(),
            runs: RungRuns {
                machine_ms: vec![machine, machine + 0.01, machine - 0.01],
                process_ms: vec![process, process + 0.01, process - 0.01],
                ..RungRuns::default()
            },
        }
    }

    /// Host 1.00 ms, veth 1.20, bridge 1.30, NAT 1.35, LXD 1.69: of LXD's +0.69 ms the
    /// veth pair is 0.20, the bridge 0.10, the rest 0.39; NAT would add 0.05.
    #[test]
    fn a_container_splits_into_its_layers_and_the_rest() {
        let rungs = vec![
            rung("B", "loopback", 1.00, 0.90),
            rung("B", "veth", 1.20, 0.95),
            rung("B", "bridge", 1.30, 0.96),
            rung("B", "bridge+NAT", 1.35, 0.96),
            rung("B", "LXD", 1.69, 1.40),
        ];
        let a = attributions(&rungs);
        assert_eq!(a.len(), 1);
        let a = &a[0];
        assert_eq!(a.container, "LXD");
        assert!((a.times_host - 1.69).abs() < 1e-9);
        assert!((a.extra_ms - 0.69).abs() < 1e-9);
        let parts: Vec<(&str, f64)> = a.layers.iter().map(|(l, m)| (l.as_str(), *m)).collect();
        assert_eq!(parts.len(), 2);
        assert!(parts[0].0 == "veth" && (parts[0].1 - 0.20).abs() < 1e-9);
        assert!(parts[1].0 == "bridge" && (parts[1].1 - 0.10).abs() < 1e-9);
        assert!((a.rest_ms - 0.39).abs() < 1e-9);
        assert!((a.nat_ms.unwrap() - 0.05).abs() < 1e-9);
        // The parts and the rest add up to the whole.
        let sum: f64 = a.layers.iter().map(|(_, m)| m).sum::<f64>() + a.rest_ms;
        assert!((sum - a.extra_ms).abs() < 1e-12);
    }

    /// Each rung against the one below on its side; a container against loopback; what
    /// only the whole machine sees is the difference of the two figures' steps.
    #[test]
    fn steps_pair_each_rung_with_the_one_below() {
        let rungs = vec![
            rung("B", "loopback", 1.00, 0.90),
            rung("A NFS hop", "loopback", 2.00, 1.90),
            rung("B", "veth", 1.20, 0.95),
            rung("A NFS hop", "veth", 2.50, 2.00),
            rung("B", "Docker", 1.80, 1.50),
        ];
        let s = steps(&rungs);
        let pairs: Vec<(&str, &str, &str)> = s
            .iter()
            .map(|x| (x.side.as_str(), x.from.as_str(), x.to.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("B", "loopback", "veth"),
                ("A NFS hop", "loopback", "veth"),
                ("B", "loopback", "Docker"),
            ]
        );
        let veth = &s[0];
        assert!((veth.machine_ms.unwrap().estimate - 0.20).abs() < 1e-9);
        assert!((veth.process_ms.unwrap().estimate - 0.05).abs() < 1e-9);
        assert!((veth.only_machine_ms.unwrap() - 0.15).abs() < 1e-9);
        // Without a container rung nothing is attributed.
        assert!(attributions(&rungs[..4]).is_empty());
    }
}
