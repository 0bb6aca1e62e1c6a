//! Measuring the ladder: every rung (a stack and the layer it stands for) in rotating
//! rounds — a closed-loop run of the large file under the probe (CPU per request of
//! the serving processes) and a whole-machine reading (`/proc/stat` minus the client),
//! then, at one offered rate for all (a share of the lowest capacity), open-loop runs
//! for the median latency at equal load.

use std::time::{Duration, Instant};

use loadgen::Schedule;

use super::kernel::{MachineCpu, serving_pids};
use super::model::{Ladder, Rung, RungRuns, attributions, steps};
use crate::experiment::interrupt::Interrupted;
use crate::experiment::load::{Load, rotation};
use crate::experiment::probe::{CpuSplit, NoiseProbe, Probe};
use crate::experiment::progress::Progress;
use crate::experiment::stack::Stack;

/// The share of the lowest rung's capacity every rung is offered.
pub const LOAD_SHARE: f64 = 0.5;

/// How the ladder runs.
#[derive(Debug, Clone)]
pub struct Settings {
    pub rounds: usize,
    /// Requests and concurrency of each closed-loop run (the large workload's).
    pub requests: u64,
    pub concurrency: usize,
    /// Seconds of each open-loop run at the equal rate.
    pub seconds: f64,
    pub keep_busy: bool,
    pub cpus: Option<CpuSplit>,
    /// The file every run fetches (with its leading `/`).
    pub path: String,
}

/// One rung as the runs see it.
pub struct RungStack<'a> {
    pub side: &'static str,
    pub layer: String,
    pub description: String,
    pub stack: &'a Stack,
}

/// Plans the steps of `n` rungs on `progress`.
pub fn plan(progress: &mut Progress, n: usize, s: &Settings) {
    progress.plan(s.rounds * n, Duration::from_secs(2));
    progress.plan(s.rounds * n, Duration::from_secs_f64(s.seconds));
}

/// Every rung, closed loop then at equal load, in rotating rounds.
pub fn measure(
    rungs: &[RungStack<'_>],
    s: &Settings,
    progress: &mut Progress,
) -> Result<Ladder, Interrupted> {
    let started = Instant::now();
    let mut runs = vec![RungRuns::default(); rungs.len()];
    for round in 0..s.rounds {
        for k in rotation(round, rungs.len()) {
            let r = &rungs[k];
            progress.step(
                Duration::from_secs(2),
                format!("ladder {}/{} {} {}", round + 1, s.rounds, r.side, r.layer),
            )?;
            closed_run(r.stack, s, &mut runs[k]);
        }
    }
    let lowest = runs
        .iter()
        .filter_map(|r| crate::stats::median_of(&r.capacity_per_sec))
        .fold(f64::INFINITY, f64::min);
    let rate = if lowest.is_finite() {
        lowest * LOAD_SHARE
    } else {
        0.0
    };
    for round in 0..s.rounds {
        for k in rotation(round, rungs.len()) {
            let r = &rungs[k];
            progress.step(
                Duration::from_secs_f64(s.seconds),
                format!(
                    "ladder equal load {}/{} {} {}",
                    round + 1,
                    s.rounds,
                    r.side,
                    r.layer
                ),
            )?;
            if rate > 0.0 {
                open_run(r.stack, rate, s, &mut runs[k]);
            }
        }
    }
    let rungs: Vec<Rung> = rungs
        .iter()
        .zip(runs)
        .map(|(r, runs)| Rung {
            side: r.side.to_string(),
            layer: r.layer.clone(),
            description: r.description.clone(),
            runs,
        })
        .collect();
    Ok(Ladder {
        steps: steps(&rungs),
        attributions: attributions(&rungs),
        rungs,
        offered_per_sec: rate,
        rounds: s.rounds,
        requests: s.requests,
        concurrency: s.concurrency,
        seconds_each: s.seconds,
        elapsed_s: started.elapsed().as_secs_f64(),
        missing: Vec::new(),
        programs: String::new(),
        keep_busy: s.keep_busy,
    })
}

/// One closed-loop run: capacity, CPU per request by process and by the whole machine.
fn closed_run(stack: &Stack, s: &Settings, runs: &mut RungRuns) {
    let targets: Vec<_> = stack.parts.iter().map(|p| p.target.clone()).collect();
    let serving = serving_pids(&targets);
    let probe = Probe::start(&stack.parts, s.cpus.as_ref());
    let machine = MachineCpu::now(&serving);
    let result = Load::new(
        stack.url(&s.path),
        Schedule::Count(s.requests),
        s.concurrency,
    )
    .keepalive(false)
    .run();
    let used = MachineCpu::now(&serving).since(&machine);
    let seen = probe.finish();
    let Ok(r) = result else {
        runs.failed += s.requests;
        return;
    };
    runs.failed += r.failed();
    if r.requests == 0 {
        return;
    }
    let per = |cpu_s: f64| cpu_s / r.requests as f64 * 1e3;
    runs.capacity_per_sec.push(r.requests_per_sec());
    if let Some(cpu) = seen.cpu_s() {
        runs.process_ms.push(per(cpu));
    }
    // The neighbours' processes are taken out of the whole machine's figure, so it is
    // kept from busy runs too (their share is in `other_ms`).
    runs.machine_ms.push(per(used.besides_client_s));
    runs.softirq_ms.push(per(used.softirq_s));
    runs.other_ms.push(per(used.others_s));
}

/// One open-loop run at `rate`: the median latency (quiet runs only).
fn open_run(stack: &Stack, rate: f64, s: &Settings, runs: &mut RungRuns) {
    let noise = NoiseProbe::start(&stack.parts);
    let result = Load::new(
        stack.url(&s.path),
        Schedule::Rate {
            per_second: rate,
            count: None,
            duration: Some(Duration::from_secs_f64(s.seconds)),
        },
        s.concurrency,
    )
    .keepalive(false)
    .run();
    let busy = noise.finish().busy;
    let Ok(r) = result else {
        return;
    };
    runs.failed += r.failed();
    if busy && !s.keep_busy {
        runs.busy_runs += 1;
        return;
    }
    let total = r.total().unwrap_or_default();
    runs.p50_ms.push(total.quantile_seconds(0.5) * 1e3);
}
