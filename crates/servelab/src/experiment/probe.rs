//! The one sampler of a run, for compare, bench and the container sweeps: every part of
//! a serving stack (a process tree or a cgroup) sampled on its own, the work the rest of
//! the machine did meanwhile, the load average and CPU pressure around the run, and how
//! busy the client's and the servers' CPUs were. A [`Probe`] is started before a run and
//! finished after it; what it saw is an [`Observed`].

use lab::affinity::{CpuTimes, OtherWork};
use lab::environment::Noise;
use lab::sampler::{Sampler, Target, Usage};
use serde::{Deserialize, Serialize};

/// One part of a serving stack, sampled on its own: `httpd`, `rustnfs`, `nginx`, a
/// container's cgroup…
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub name: String,
    pub target: Target,
}

impl Part {
    /// A process and its descendants.
    pub fn process(name: impl Into<String>, pid: u32) -> Part {
        Part {
            name: name.into(),
            target: Target::Tree(pid),
        }
    }

    /// The process id, for a process part.
    pub fn pid(&self) -> Option<u32> {
        match self.target {
            Target::Tree(pid) => Some(pid),
            Target::Cgroup(_) => None,
        }
    }
}

/// Which CPUs the client (servelab, `ab`, `wrk`) and the serving processes run on.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuSplit {
    pub client: Vec<usize>,
    pub server: Vec<usize>,
    /// How it was chosen (stated in the report).
    pub note: String,
}

/// How busy the client's and the servers' CPUs were during one run.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct ClientLoad {
    /// Share (0–1) of time the client's CPUs were busy, by anyone.
    pub client_cpus_busy: f64,
    /// Share of time the servers' CPUs were busy, by anyone.
    pub server_cpus_busy: f64,
    /// CPU seconds servelab itself (the load generator) used.
    pub client_process_cpu_s: f64,
    /// CPU seconds the whole machine worked during the run, by anyone (without stolen
    /// time): beside the serving processes' own figure, it shows work that lands
    /// elsewhere — on loopback much of a response's sending runs in the client's
    /// context when the client's ACKs release it. Absent in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_work_s: Option<f64>,
    /// The client's CPUs were at least [`CLIENT_BOUND_BUSY`] busy: the run's req/s is a
    /// lower bound on the servers' capacity.
    pub client_bound: bool,
}

/// The client's CPUs this busy or busier make a run client-bound.
pub const CLIENT_BOUND_BUSY: f64 = 0.9;

/// Load average and CPU pressure around one run, and the other work during it.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct RunNoise {
    pub before: Noise,
    pub after: Noise,
    /// Share (0–1) of all CPU time during the run that went to processes other than
    /// the client and the serving processes (`lab::affinity::OtherWork`); absent in
    /// reports of older versions, which judged by the load average alone.
    #[serde(default)]
    pub other_work: Option<f64>,
    /// Other work above `lab::affinity::OTHER_WORK_BUSY` during the run (without that
    /// figure: more runnable tasks than cores before or after it).
    pub busy: bool,
}

impl RunNoise {
    /// Judges a run by the other work during it when known, else by the load average.
    pub fn judge(before: Noise, after: Noise, other_work: Option<f64>) -> RunNoise {
        let busy = match other_work {
            Some(w) => w > lab::affinity::OTHER_WORK_BUSY,
            None => before.busy() || after.busy(),
        };
        RunNoise {
            before,
            after,
            other_work,
            busy,
        }
    }
}

/// Samples a run: start it right before the load, finish it right after.
pub struct Probe {
    samplers: Vec<(String, u32, Sampler)>,
    other_work: OtherWork,
    noise_before: Noise,
    client: ClientProbe,
}

/// What a [`Probe`] saw over one run.
#[derive(Debug, Clone)]
pub struct Observed {
    /// Each part: (name, pid — 0 for a cgroup —, what it used).
    pub usages: Vec<(String, u32, Usage)>,
    pub noise: RunNoise,
    pub client: Option<ClientLoad>,
}

impl Probe {
    /// Starts sampling `parts`; `cpus` is the run's client/server split (`None`: both
    /// sides are every CPU).
    pub fn start(parts: &[Part], cpus: Option<&CpuSplit>) -> Probe {
        let noise_before = Noise::now();
        // The other work leaves out our process trees; a cgroup's CPU is taken from its
        // sampler at the end.
        let pids: Vec<u32> = parts.iter().filter_map(Part::pid).collect();
        let other_work = OtherWork::start(&pids);
        let client = ClientProbe::start(cpus);
        let samplers = parts
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    p.pid().unwrap_or(0),
                    Sampler::start(p.target.clone()),
                )
            })
            .collect();
        Probe {
            samplers,
            other_work,
            noise_before,
            client,
        }
    }

    pub fn finish(self) -> Observed {
        let usages: Vec<(String, u32, Usage)> = self
            .samplers
            .into_iter()
            .map(|(name, pid, s)| (name, pid, s.finish()))
            .collect();
        let client = self.client.finish();
        let cgroups_s: f64 = usages
            .iter()
            .filter(|(_, pid, _)| *pid == 0)
            .map(|(_, _, u)| u.cpu_s())
            .sum();
        // Without a part to sample the stack's CPU is unknown: judged by the load alone.
        let other_work = if usages.is_empty() {
            None
        } else {
            self.other_work.finish_measured(cgroups_s)
        };
        Observed {
            noise: RunNoise::judge(self.noise_before, Noise::now(), other_work),
            usages,
            client,
        }
    }
}

impl Observed {
    /// CPU seconds of every part together; `None` with no parts.
    pub fn cpu_s(&self) -> Option<f64> {
        (!self.usages.is_empty()).then(|| self.usages.iter().map(|(_, _, u)| u.cpu_s()).sum())
    }

    /// The highest resident memory of the first part (a stack's front server).
    pub fn peak_rss(&self) -> Option<u64> {
        self.usages.first().map(|(_, _, u)| u.peak_rss_bytes)
    }
}

/// The machine's noise alone around a run (no sampling threads beside the load): for
/// open-loop latency runs, whose client must not share its CPUs with samplers.
pub struct NoiseProbe {
    other_work: OtherWork,
    before: Noise,
}

impl NoiseProbe {
    pub fn start(parts: &[Part]) -> NoiseProbe {
        let before = Noise::now();
        let pids: Vec<u32> = parts.iter().filter_map(Part::pid).collect();
        NoiseProbe {
            other_work: OtherWork::start(&pids),
            before,
        }
    }

    pub fn finish(self) -> RunNoise {
        let other_work = self.other_work.finish();
        RunNoise::judge(self.before, Noise::now(), other_work)
    }
}

/// Reads how busy the client's and the servers' CPUs are over one run, and what
/// servelab itself (the client) spent.
pub struct ClientProbe {
    client_cpus: Vec<usize>,
    server_cpus: Vec<usize>,
    cpu_before: CpuTimes,
    own_before: f64,
}

impl ClientProbe {
    /// Without a split, both sides are every CPU of the machine.
    pub fn start(split: Option<&CpuSplit>) -> Self {
        let all = lab::affinity::available_cpus();
        ClientProbe {
            client_cpus: split.map_or(all.clone(), |s| s.client.clone()),
            server_cpus: split.map_or(all, |s| s.server.clone()),
            cpu_before: CpuTimes::now(),
            own_before: lab::sampler::process_cpu_s(std::process::id()),
        }
    }

    pub fn finish(self) -> Option<ClientLoad> {
        let now = CpuTimes::now();
        let client_busy = now.busy_since(&self.cpu_before, &self.client_cpus)?;
        Some(ClientLoad {
            client_cpus_busy: client_busy,
            server_cpus_busy: now
                .busy_since(&self.cpu_before, &self.server_cpus)
                .unwrap_or(0.0),
            client_process_cpu_s: (lab::sampler::process_cpu_s(std::process::id())
                - self.own_before)
                .max(0.0),
            machine_work_s: Some(now.work_seconds_since(&self.cpu_before)),
            client_bound: client_busy >= CLIENT_BOUND_BUSY,
        })
    }
}
