//! The comparison's results as data: what `report.json` holds and every renderer reads.
//!
//! Schema: `crates/servelab/report-schema.json` (checked by a test). Times are in
//! milliseconds, rates in units per second, sizes in bytes.

use serde::{Deserialize, Serialize};

use lab::dataset::DatasetInfo;
use lab::environment::Environment;

pub use crate::experiment::probe::{CLIENT_BOUND_BUSY, ClientLoad, RunNoise};

/// The scenario every Δ% and ratio is computed against.
pub const REFERENCE_SCENARIO: &str = "B (local)";

/// Scenario A as the question puts it: httpd reading every byte through rustnfs.
pub const A_SCENARIO: &str = "A (NFS: rustnfs)";
/// Scenario A over NFSv4.2, what a kernel mount negotiates by default (A itself speaks
/// NFSv3, as the original experiment's default did).
pub const A42_SCENARIO: &str = "A (NFS: rustnfs, NFSv4.2)";

/// Scenario A with httpd's client data cache: the row comparable to the original
/// experiment, whose httpd read through a kernel NFS mount with a page cache.
pub const CLIENT_CACHE_SCENARIO: &str = "A (NFS: rustnfs, client cache — like a kernel mount)";

/// Bumped when a field changes meaning or goes away.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub environment: Environment,
    pub dataset: DatasetInfo,
    pub settings: Settings,
    /// One row per HTTP workload × scenario.
    pub http: Vec<HttpRow>,
    /// One row per NFS workload × NFS server.
    pub nfs: Vec<NfsRow>,
    /// Raw TCP throughput on each path (the ceiling).
    pub tcp: Vec<TcpRow>,
    /// Server-side time per phase, per HTTP scenario and workload.
    pub server_phases: Vec<PhaseRow>,
    /// Server-side NFS procedure latencies (rustnfs), per workload.
    pub nfs_procedures: Vec<ProcedureRow>,
    /// Whether every scenario served the same bytes as scenario B.
    pub byte_checks: Vec<ByteCheck>,
    /// Scenarios that did not run, and why.
    pub skipped: Vec<Skipped>,
    /// Scenarios that started but failed; the others still ran.
    pub failures: Vec<Failure>,
    /// How the emulated link was built, when `--link` was given.
    #[serde(default)]
    pub link_path: Option<String>,
    /// How the link's unshaped control was built (`veth` beside `netns+tbf`, the relay
    /// beside the relay), when `--link` was given.
    #[serde(default)]
    pub control_path: Option<String>,
    /// Checks of the report against itself: ratios a reference client contradicts, runs
    /// taken on a busy machine.
    #[serde(default)]
    pub flags: Vec<String>,
    /// Which CPUs the client and the servers ran on.
    #[serde(default)]
    pub pinning: Option<Pinning>,
    /// Open-loop runs of A and B at the same offered rates (large workload).
    #[serde(default)]
    pub equal_load: Vec<EqualLoadRow>,
    /// The computed answer: what A costs against B, with its uncertainty.
    #[serde(default)]
    pub answer: Answer,
    /// A's NFS hop at a distance (one point, or the sweep with `--distance`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distance: Option<crate::distance::Distance>,
}

/// The client/server CPU split of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Pinning {
    /// CPUs of servelab itself (the load generator, `ab`, `wrk`, the sampler).
    pub client_cpus: Vec<usize>,
    /// CPUs of every serving process (httpd, rustnfs, nginx, Apache, Ganesha).
    pub server_cpus: Vec<usize>,
    /// How the split was chosen, or why there is none.
    pub note: String,
}

/// One open-loop point: a scenario at a fixed offered rate.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EqualLoadRow {
    pub workload: String,
    pub scenario: String,
    /// The offered rate as a share of the lower of A's and B's closed-loop capacity.
    pub fraction_of_capacity: f64,
    pub offered_per_sec: f64,
    /// Medians over the repeats.
    pub achieved_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Each repeat's median and 99th percentile, in the order run.
    pub runs_p50_ms: Vec<f64>,
    pub runs_p99_ms: Vec<f64>,
    pub failed: u64,
    /// Runs taken on a busy machine and left out (neighbours distort latency); a row
    /// with no run left has no figures and is not drawn.
    #[serde(default)]
    pub busy_runs: usize,
    /// Against B at the same rate: median p50 of this row minus B's, with its interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_minus_b_ms: Option<crate::stats::Comparison>,
}

/// The report's first section, as data and as sentences.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Answer {
    /// The computed sentences, plain text, most important first.
    pub sentences: Vec<String>,
    /// Service demand (CPU per request of every serving process) per workload and
    /// scenario, from the runs that count.
    pub service_demand: Vec<DemandRow>,
    /// Each scenario's service demand against B's, per workload.
    pub ratios: Vec<RatioRow>,
    /// Runs taken on a busy machine: kept for CPU per request, left out of throughput
    /// and latency (unless `settings.keep_busy`).
    pub excluded_busy_runs: usize,
    /// False when too few quiet runs remained to conclude anything.
    pub conclusive: bool,
}

/// What one scenario's serving processes cost per request in one workload.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DemandRow {
    pub workload: String,
    pub scenario: String,
    /// Median over the runs used of all serving processes' CPU per request.
    pub cpu_ms_per_request: f64,
    /// Lowest and highest over those runs.
    pub cpu_ms_min: f64,
    pub cpu_ms_max: f64,
    pub cpu_s_per_gb: f64,
    /// 1 / CPU per request: requests per second one core could serve.
    pub capacity_per_core: f64,
    pub peak_rss_bytes: u64,
    pub mean_rss_bytes: u64,
    /// The same split by process (median CPU per request, peak RSS).
    pub processes: Vec<ProcessCost>,
    /// Runs with whole CPU counters, busy ones included: CPU per request counts only
    /// the serving processes' own CPU, which neighbours do not add to.
    pub runs_used: usize,
    /// Of those, the runs taken on a busy machine.
    #[serde(default)]
    pub busy_runs: usize,
    /// The largest share of CPU time other work took during those busy runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_work_max: Option<f64>,
    /// Most of its quiet runs had the client's CPUs at least 90 % busy.
    pub client_bound: bool,
    /// Median requests/s of the quiet runs (a lower bound when client-bound; 0 when
    /// every run was busy — neighbours distort throughput).
    pub requests_per_sec: f64,
    /// The load generator's own CPU per request (median over the runs that count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ms_per_request: Option<f64>,
    /// The whole machine's CPU per request, client included, stolen time not (median
    /// over the runs that count): what the serving processes' figure leaves elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_ms_per_request: Option<f64>,
}

/// One scenario's service demand against B's in one workload.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RatioRow {
    pub workload: String,
    pub scenario: String,
    pub against: String,
    pub cpu_per_request: crate::stats::Comparison,
    /// The whole machine's CPU per request against B's, client included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_per_request: Option<crate::stats::Comparison>,
}

/// What one serving process cost (per run, or a median over runs).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ProcessCost {
    /// `httpd`, `rustnfs`, `nginx`, `ganesha.nfsd`, …
    pub name: String,
    pub pid: u32,
    pub cpu_s: f64,
    pub cpu_ms_per_request: f64,
    pub peak_rss_bytes: u64,
    pub mean_rss_bytes: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    pub repeat: usize,
    pub large_requests: u64,
    pub large_concurrency: usize,
    pub small_concurrency: usize,
    pub small_seconds: f64,
    pub nfs_clients: usize,
    pub nfs_seconds: f64,
    pub warmup: bool,
    pub cold: bool,
    pub link: Option<String>,
    pub baselines: String,
    /// How long httpd's NFS backend reuses handles, attributes and small files (ms).
    #[serde(default = "default_nfs_cache_ms")]
    pub nfs_cache_ms: u64,
    /// Threads of servelab's load generator.
    #[serde(default)]
    pub client_threads: Option<usize>,
    /// Repeats of A and B the headline ratio may grow to while its interval is wider
    /// than ±10 %.
    #[serde(default)]
    pub max_repeat: usize,
    /// Runs on a busy machine were kept in the figures (`--keep-busy`).
    #[serde(default)]
    pub keep_busy: bool,
    /// Seconds of each open-loop point of the equal-load runs.
    #[serde(default)]
    pub equal_load_seconds: f64,
    /// Every round of the headline after the first ran on freshly started servers
    /// (rustnfs and the httpd of B and the A rows; `--no-restart` turns it off).
    #[serde(default)]
    pub fresh_servers: bool,
    /// The other-work share above which a run was judged busy when it was taken
    /// (`None` in reports older than the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_other_work: Option<f64>,
}

fn default_nfs_cache_ms() -> u64 {
    1000
}

/// Figures of one measured run (one repetition).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HttpRun {
    pub requests: u64,
    pub failed: u64,
    pub non_2xx: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub requests_per_sec: f64,
    pub transfer_bytes_per_sec: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// How busy the machine was just before and just after this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<RunNoise>,
    /// What the server process(es) cost during this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// How busy the client's and the servers' CPUs were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientLoad>,
}

/// What a server cost during one run: memory, CPU, switches, files; per request and per
/// GB served. Sampled from `/proc` (process tree) or a cgroup.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Cost {
    pub peak_rss_bytes: u64,
    pub mean_rss_bytes: u64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// CPU seconds (user + system) per request, in microseconds.
    pub cpu_us_per_request: f64,
    /// CPU seconds per GB (10^9 bytes) of body served.
    pub cpu_s_per_gb: f64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub peak_open_fds: u64,
    /// (seconds since the run began, resident bytes), at most ~100 points.
    #[serde(default)]
    pub rss_over_time: Vec<(f64, u64)>,
    /// The same by serving process (httpd and rustnfs for A); the figures above are
    /// their sums (peak RSS: the sum of each one's peak).
    #[serde(default)]
    pub processes: Vec<ProcessCost>,
}

/// The same workload measured by a reference client (`ab`, `wrk`) right after ours.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReferenceCheck {
    /// `ab` or `wrk`.
    pub tool: String,
    /// The command line, with the scenario's URL as `URL`.
    pub command: String,
    /// Requests/s of each run, in the order run.
    pub runs_per_sec: Vec<f64>,
    pub median_per_sec: f64,
    pub median_transfer_bytes_per_sec: f64,
    /// CPU seconds (user + system) the tool itself used per run, median; a single-
    /// threaded tool near one second per second of run is the bottleneck.
    pub median_client_cpu_s: f64,
    pub median_seconds: f64,
    /// Our requests/s divided by the tool's.
    pub agreement: f64,
    /// Why they differ, when they do by more than 15 %.
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HttpRow {
    /// `large` (the original `-n 100 -c 10` on the 10 MiB file) or `small`.
    pub workload: String,
    /// `B (local)`, `A (NFS: rustnfs)`, `nginx`, …
    pub scenario: String,
    pub description: String,
    pub runs: Vec<HttpRun>,
    /// Field-by-field median of `runs`.
    pub median: HttpRun,
    /// Lowest and highest requests/s over the runs.
    pub rps_min: f64,
    pub rps_max: f64,
    /// Latency curve: (percentile 0–100, ms), each point the median over the runs (the
    /// same statistic as the table).
    pub percentiles: Vec<(f64, f64)>,
    /// Peak resident memory of the server process(es) during this workload's runs.
    pub server_peak_rss_bytes: Option<u64>,
    /// Median over the runs of what the server cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// The same workload by `ab` (large) or `wrk` (small), when installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferenceCheck>,
    /// Most runs had the client's CPUs at least 90 % busy: requests/s is a lower bound.
    #[serde(default)]
    pub client_bound: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NfsRow {
    /// `read` (sequential READ of the large file) or `metadata` (create/getattr/remove).
    pub workload: String,
    pub server: String,
    pub clients: usize,
    pub ops_per_sec: f64,
    pub ops_min: f64,
    pub ops_max: f64,
    pub bytes_per_sec: f64,
    pub mean_ms: f64,
    pub p99_ms: f64,
    pub failed: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TcpRow {
    pub path: String,
    pub streams: usize,
    pub bits_per_sec: f64,
    pub bits_min: f64,
    pub bits_max: f64,
    /// The emulated link's rate, when the path has one.
    #[serde(default)]
    pub expected_bits_per_sec: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseRow {
    pub scenario: String,
    pub workload: String,
    pub phase: String,
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcedureRow {
    pub workload: String,
    pub procedure: String,
    pub count: u64,
    pub mean_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ByteCheck {
    pub scenario: String,
    pub file: String,
    pub identical_to_b: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Skipped {
    pub scenario: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Failure {
    pub scenario: String,
    pub workload: String,
    pub error: String,
}

/// Median of a list (mean of the middle two when even); 0 for an empty list.
pub fn median(values: &mut [f64]) -> f64 {
    crate::stats::median(values).unwrap_or(0.0)
}

impl HttpRow {
    /// Every run was taken on a busy machine (and `keep_busy` was off): the row's
    /// throughput and latency are the busy runs', which neighbours distort.
    pub fn busy_only(&self, keep_busy: bool) -> bool {
        !keep_busy
            && !self.runs.is_empty()
            && self.runs.iter().all(|r| r.noise.is_some_and(|n| n.busy))
    }

    /// The NFS protocol the row's httpd reads with, as its name or description names it
    /// (`NFSv3`, `NFSv4.2`); `None` for a row that reads no NFS (B, the peers).
    pub fn protocol(&self) -> Option<String> {
        nfs_version(&self.scenario).or_else(|| nfs_version(&self.description))
    }
}

/// The first `NFSv…` version named in `text`, without trailing punctuation.
pub fn nfs_version(text: &str) -> Option<String> {
    let at = text.find("NFSv")?;
    let version: String = text[at + 4..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let version = version.trim_end_matches('.');
    (!version.is_empty()).then(|| format!("NFSv{version}"))
}

impl HttpRun {
    /// Field-by-field median of several runs.
    pub fn median_of(runs: &[HttpRun]) -> HttpRun {
        let m = |f: fn(&HttpRun) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
        HttpRun {
            requests: m(|r| r.requests as f64).round() as u64,
            failed: m(|r| r.failed as f64).round() as u64,
            non_2xx: m(|r| r.non_2xx as f64).round() as u64,
            bytes: m(|r| r.bytes as f64).round() as u64,
            seconds: m(|r| r.seconds),
            requests_per_sec: m(|r| r.requests_per_sec),
            transfer_bytes_per_sec: m(|r| r.transfer_bytes_per_sec),
            mean_ms: m(|r| r.mean_ms),
            p50_ms: m(|r| r.p50_ms),
            p99_ms: m(|r| r.p99_ms),
            max_ms: m(|r| r.max_ms),
            noise: None,
            cost: Cost::median_of(runs.iter().filter_map(|r| r.cost.as_ref())),
            client: None,
        }
    }
}

impl Cost {
    /// Field-by-field median; the memory curve of the run with the median peak.
    pub fn median_of<'a>(costs: impl Iterator<Item = &'a Cost>) -> Option<Cost> {
        let costs: Vec<&Cost> = costs.collect();
        if costs.is_empty() {
            return None;
        }
        let m = |f: fn(&Cost) -> f64| median(&mut costs.iter().map(|c| f(c)).collect::<Vec<_>>());
        let peak = m(|c| c.peak_rss_bytes as f64);
        let curve = costs
            .iter()
            .min_by(|a, b| {
                (a.peak_rss_bytes as f64 - peak)
                    .abs()
                    .total_cmp(&(b.peak_rss_bytes as f64 - peak).abs())
            })
            .map(|c| c.rss_over_time.clone())
            .unwrap_or_default();
        Some(Cost {
            peak_rss_bytes: peak.round() as u64,
            mean_rss_bytes: m(|c| c.mean_rss_bytes as f64).round() as u64,
            cpu_user_s: m(|c| c.cpu_user_s),
            cpu_system_s: m(|c| c.cpu_system_s),
            cpu_us_per_request: m(|c| c.cpu_us_per_request),
            cpu_s_per_gb: m(|c| c.cpu_s_per_gb),
            voluntary_switches: m(|c| c.voluntary_switches as f64).round() as u64,
            involuntary_switches: m(|c| c.involuntary_switches as f64).round() as u64,
            peak_open_fds: m(|c| c.peak_open_fds as f64).round() as u64,
            rss_over_time: curve,
            processes: ProcessCost::median_by_name(costs.iter().map(|c| c.processes.as_slice())),
        })
    }

    /// From one sampler per serving process (name, pid, usage) over a run that served
    /// `requests` requests and `bytes` body bytes: the sum, and the split.
    pub fn from_processes(
        per_process: &[(String, u32, lab::sampler::Usage)],
        requests: u64,
        bytes: u64,
    ) -> Cost {
        let mut sum = lab::sampler::Usage::default();
        for (_, _, u) in per_process {
            sum.peak_rss_bytes += u.peak_rss_bytes;
            sum.mean_rss_bytes += u.mean_rss_bytes;
            sum.cpu_user_s += u.cpu_user_s;
            sum.cpu_system_s += u.cpu_system_s;
            sum.voluntary_switches += u.voluntary_switches;
            sum.involuntary_switches += u.involuntary_switches;
            sum.peak_open_fds += u.peak_open_fds;
        }
        // The memory curve of the first process (the HTTP server) only: curves sampled
        // by different threads do not share instants.
        if let Some((_, _, u)) = per_process.first() {
            sum.rss_samples = u.rss_samples.clone();
        }
        let mut cost = Cost::from_usage(&sum, requests, bytes);
        cost.processes = per_process
            .iter()
            .map(|(name, pid, u)| ProcessCost {
                name: name.clone(),
                pid: *pid,
                cpu_s: u.cpu_s(),
                cpu_ms_per_request: crate::stats::service_demand_ms(&[u.cpu_s()], requests)
                    .unwrap_or(0.0),
                peak_rss_bytes: u.peak_rss_bytes,
                mean_rss_bytes: u.mean_rss_bytes,
            })
            .collect();
        cost
    }

    /// From a sampler's [`lab::sampler::Usage`] over a run that served `requests`
    /// requests and `bytes` body bytes.
    pub fn from_usage(u: &lab::sampler::Usage, requests: u64, bytes: u64) -> Cost {
        let cpu = u.cpu_s();
        let step = u.rss_samples.len().div_ceil(100).max(1);
        Cost {
            peak_rss_bytes: u.peak_rss_bytes,
            mean_rss_bytes: u.mean_rss_bytes,
            cpu_user_s: u.cpu_user_s,
            cpu_system_s: u.cpu_system_s,
            cpu_us_per_request: if requests > 0 {
                cpu / requests as f64 * 1e6
            } else {
                0.0
            },
            cpu_s_per_gb: if bytes > 0 {
                cpu / (bytes as f64 / 1e9)
            } else {
                0.0
            },
            voluntary_switches: u.voluntary_switches,
            involuntary_switches: u.involuntary_switches,
            peak_open_fds: u.peak_open_fds,
            rss_over_time: u.rss_samples.iter().step_by(step).copied().collect(),
            processes: Vec::new(),
        }
    }
}

impl ProcessCost {
    /// Per process name (in first-seen order), the field-by-field median over runs.
    pub fn median_by_name<'a>(runs: impl Iterator<Item = &'a [ProcessCost]>) -> Vec<ProcessCost> {
        let runs: Vec<&[ProcessCost]> = runs.collect();
        let mut names: Vec<&str> = Vec::new();
        for r in &runs {
            for p in r.iter() {
                if !names.contains(&p.name.as_str()) {
                    names.push(&p.name);
                }
            }
        }
        names
            .into_iter()
            .map(|name| {
                let of: Vec<&ProcessCost> = runs
                    .iter()
                    .filter_map(|r| r.iter().find(|p| p.name == name))
                    .collect();
                let m = |f: fn(&ProcessCost) -> f64| {
                    median(&mut of.iter().map(|p| f(p)).collect::<Vec<_>>())
                };
                ProcessCost {
                    name: name.to_string(),
                    pid: of.last().map_or(0, |p| p.pid),
                    cpu_s: m(|p| p.cpu_s),
                    cpu_ms_per_request: m(|p| p.cpu_ms_per_request),
                    peak_rss_bytes: m(|p| p.peak_rss_bytes as f64).round() as u64,
                    mean_rss_bytes: m(|p| p.mean_rss_bytes as f64).round() as u64,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&mut []), 0.0);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        let runs = [
            HttpRun {
                requests_per_sec: 10.0,
                failed: 0,
                ..Default::default()
            },
            HttpRun {
                requests_per_sec: 30.0,
                failed: 2,
                ..Default::default()
            },
            HttpRun {
                requests_per_sec: 20.0,
                failed: 0,
                ..Default::default()
            },
        ];
        let m = HttpRun::median_of(&runs);
        assert_eq!(m.requests_per_sec, 20.0);
        assert_eq!(m.failed, 0);
    }

    #[test]
    fn service_demand_from_known_cpu_counters() {
        // Over one run of 100 requests and 10^9 body bytes, httpd's utime + stime grew by
        // 2.0 + 0.5 s and rustnfs's by 2.0 + 0.8 s (what /proc/PID/stat's ticks give at
        // 100 Hz for 250 and 280 ticks): 25 + 28 = 53 ms per request, 5.3 CPU-s per GB.
        let usage = |user: f64, system: f64, peak: u64| lab::sampler::Usage {
            cpu_user_s: user,
            cpu_system_s: system,
            peak_rss_bytes: peak,
            mean_rss_bytes: peak / 2,
            ..Default::default()
        };
        let c = Cost::from_processes(
            &[
                ("httpd".into(), 10, usage(2.0, 0.5, 8 << 20)),
                ("rustnfs".into(), 11, usage(2.0, 0.8, 4 << 20)),
            ],
            100,
            1_000_000_000,
        );
        assert!((c.cpu_us_per_request - 53_000.0).abs() < 1e-6, "{c:?}");
        assert!((c.cpu_s_per_gb - 5.3).abs() < 1e-9);
        assert!((c.cpu_user_s - 4.0).abs() < 1e-9 && (c.cpu_system_s - 1.3).abs() < 1e-9);
        assert_eq!(c.peak_rss_bytes, 12 << 20);
        let split: Vec<(&str, f64)> = c
            .processes
            .iter()
            .map(|p| (p.name.as_str(), p.cpu_ms_per_request))
            .collect();
        assert_eq!(split.len(), 2);
        assert!((split[0].1 - 25.0).abs() < 1e-9 && (split[1].1 - 28.0).abs() < 1e-9);
        // The median over runs keeps the split by name.
        let mut other = c.clone();
        other.processes[1].cpu_ms_per_request = 30.0;
        let mut third = c.clone();
        third.processes[1].cpu_ms_per_request = 40.0;
        let m = Cost::median_of([&c, &other, &third].into_iter()).unwrap();
        assert_eq!(m.processes[1].name, "rustnfs");
        assert_eq!(m.processes[1].cpu_ms_per_request, 30.0);
    }
}
