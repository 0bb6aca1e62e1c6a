//! The answer a comparison gives, computed from its rows: what serving from NFS costs
//! against local disk in CPU per request of every serving process (service demand, the
//! figure that does not depend on who else uses the machine), with its 95 % interval,
//! the latency NFS adds at equal offered load, and what limited throughput — as data
//! and as sentences. No I/O: `servelab report DIR` recomputes it from report.json.

use std::fmt::Write as _;

use super::model::*;
use crate::stats::{self, Comparison};

/// Quiet runs each side needs before a ratio is stated.
pub const MIN_RUNS: usize = 2;

/// A headline interval wider than this (relative half-width) asks for more repeats.
pub const NARROW_ENOUGH: f64 = 0.10;

/// The runs of a row that count: with a cost, and not taken on a busy machine unless
/// `keep_busy`.
pub fn runs_that_count(runs: &[HttpRun], keep_busy: bool) -> impl Iterator<Item = &HttpRun> {
    runs.iter().filter(move |r| {
        r.cost.as_ref().is_some_and(|c| c.cpu_us_per_request > 0.0)
            && (keep_busy || !r.noise.is_some_and(|n| n.busy))
    })
}

/// CPU ms per request of every serving process, one value per run that counts.
pub fn demand_samples(runs: &[HttpRun], keep_busy: bool) -> Vec<f64> {
    runs_that_count(runs, keep_busy)
        .filter_map(|r| r.cost.as_ref().map(|c| c.cpu_us_per_request / 1e3))
        .collect()
}

/// The headline comparison: A's service demand against B's in the large workload.
pub fn headline(a: &[HttpRun], b: &[HttpRun], keep_busy: bool) -> Option<Comparison> {
    let (a, b) = (demand_samples(a, keep_busy), demand_samples(b, keep_busy));
    if a.len() < MIN_RUNS || b.len() < MIN_RUNS {
        return None;
    }
    stats::ratio(&a, &b)
}

fn demand_row(row: &HttpRow, keep_busy: bool) -> Option<DemandRow> {
    let used: Vec<&HttpRun> = runs_that_count(&row.runs, keep_busy).collect();
    if used.is_empty() {
        return None;
    }
    let costs: Vec<&Cost> = used.iter().filter_map(|r| r.cost.as_ref()).collect();
    let cost = Cost::median_of(costs.iter().copied())?;
    let samples = demand_samples(&row.runs, keep_busy);
    let (lo, hi) = stats::spread(&samples)?;
    let ms = stats::median_of(&samples)?;
    let bound = used
        .iter()
        .filter(|r| r.client.is_some_and(|c| c.client_bound))
        .count();
    Some(DemandRow {
        workload: row.workload.clone(),
        scenario: row.scenario.clone(),
        cpu_ms_per_request: ms,
        cpu_ms_min: lo,
        cpu_ms_max: hi,
        cpu_s_per_gb: cost.cpu_s_per_gb,
        capacity_per_core: if ms > 0.0 { 1e3 / ms } else { 0.0 },
        peak_rss_bytes: cost.peak_rss_bytes,
        mean_rss_bytes: cost.mean_rss_bytes,
        processes: cost.processes,
        runs_used: used.len(),
        client_bound: bound * 2 > used.len(),
        requests_per_sec: stats::median_of(
            &used.iter().map(|r| r.requests_per_sec).collect::<Vec<_>>(),
        )
        .unwrap_or(0.0),
    })
}

/// Everything the answer section holds, from the report's rows.
pub fn compute(report: &Report) -> Answer {
    let keep_busy = report.settings.keep_busy;
    let mut answer = Answer::default();
    for row in &report.http {
        if let Some(d) = demand_row(row, keep_busy) {
            answer.service_demand.push(d);
        }
        if !keep_busy {
            answer.excluded_busy_runs += row
                .runs
                .iter()
                .filter(|r| r.noise.is_some_and(|n| n.busy))
                .count();
        }
    }
    for row in &report.http {
        let Some(b) = report
            .http
            .iter()
            .find(|r| r.workload == row.workload && r.scenario == REFERENCE_SCENARIO)
        else {
            continue;
        };
        if row.scenario == REFERENCE_SCENARIO {
            continue;
        }
        if let Some(c) = headline(&row.runs, &b.runs, keep_busy) {
            answer.ratios.push(RatioRow {
                workload: row.workload.clone(),
                scenario: row.scenario.clone(),
                against: REFERENCE_SCENARIO.into(),
                cpu_per_request: c,
            });
        }
    }
    answer.conclusive = ratio_of(&answer, "large", A_SCENARIO).is_some();
    answer.sentences = sentences(report, &answer);
    answer
}

fn ratio_of<'a>(answer: &'a Answer, workload: &str, scenario: &str) -> Option<&'a Comparison> {
    answer
        .ratios
        .iter()
        .find(|r| r.workload == workload && r.scenario == scenario)
        .map(|r| &r.cpu_per_request)
}

fn demand_of<'a>(answer: &'a Answer, workload: &str, scenario: &str) -> Option<&'a DemandRow> {
    answer
        .service_demand
        .iter()
        .find(|r| r.workload == workload && r.scenario == scenario)
}

/// A ratio and its interval in words: "4.1 × (95 % CI 3.8–4.4 ×)", or that there is no
/// measurable difference.
pub fn ratio_words(c: &Comparison) -> String {
    if c.significant {
        format!(
            "{:.2} × (95 % CI {:.2}–{:.2} ×)",
            c.estimate, c.ci.low, c.ci.high
        )
    } else {
        format!(
            "no measurable difference ({:.2} ×, 95 % CI {:.2}–{:.2} × includes 1)",
            c.estimate, c.ci.low, c.ci.high
        )
    }
}

/// "httpd 1.20 ms + rustnfs 3.90 ms".
fn split_words(d: &DemandRow) -> String {
    d.processes
        .iter()
        .map(|p| format!("{} {:.2} ms", p.name, p.cpu_ms_per_request))
        .collect::<Vec<_>>()
        .join(" + ")
}

fn size_words(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.0} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else if bytes >= 1 << 10 {
        format!("{:.0} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// The conditions every sentence holds under.
fn conditions(report: &Report, answer: &Answer) -> String {
    let s = &report.settings;
    let wire = match &s.link {
        Some(l) => {
            format!("A's NFS traffic over loopback (and a link emulating {l} in its own row)")
        }
        None => "NFS over loopback".into(),
    };
    let cache = if s.cold {
        "cold page cache"
    } else {
        "warm page cache"
    };
    let pin = report
        .pinning
        .as_ref()
        .map_or("CPUs not recorded".to_string(), |p| p.note.clone());
    let busy = if s.keep_busy {
        let n: usize = report
            .http
            .iter()
            .flat_map(|r| &r.runs)
            .filter(|r| r.noise.is_some_and(|n| n.busy))
            .count();
        format!("{n} runs taken on a busy machine kept (--keep-busy)")
    } else {
        format!(
            "{} runs taken on a busy machine left out",
            answer.excluded_busy_runs
        )
    };
    let loads: Vec<f64> = report
        .http
        .iter()
        .flat_map(|r| &r.runs)
        .filter_map(|r| r.noise.map(|n| n.before.load_per_core()))
        .collect();
    let load = stats::median_of(&loads).map_or("n/a".into(), |l| format!("{l:.2}"));
    format!(
        "Conditions: {wire}, {cache}, {pin}; {busy}; median load average {load} per core before the runs."
    )
}

fn sentences(report: &Report, answer: &Answer) -> Vec<String> {
    let mut out = Vec::new();
    let large = size_words(report.dataset.large_bytes);
    let (a, b) = (
        demand_of(answer, "large", A_SCENARIO),
        demand_of(answer, "large", REFERENCE_SCENARIO),
    );
    match (ratio_of(answer, "large", A_SCENARIO), a, b) {
        (Some(c), Some(a), Some(b)) => {
            let what = if c.significant {
                format!("cost {} the CPU of local disk", ratio_words(c))
            } else {
                format!("showed {} in CPU against local disk", ratio_words(c))
            };
            out.push(format!(
                "Serving {large} files from rustnfs over NFSv3 {what}: {:.2} vs {:.2} ms of CPU per request for all serving processes ({} against {}), medians of {} and {} runs.",
                a.cpu_ms_per_request,
                b.cpu_ms_per_request,
                split_words(a),
                split_words(b),
                c.n_a,
                c.n_b
            ));
            out.push(format!(
                "At that cost one core serves {:.0} requests/s of {large} through NFS against {:.0} from local disk ({:.2} vs {:.2} CPU-seconds per GB).",
                a.capacity_per_core, b.capacity_per_core, a.cpu_s_per_gb, b.cpu_s_per_gb
            ));
        }
        _ => {
            // The runs of the large file on A and B: those the headline needed.
            let runs: Vec<&HttpRun> = report
                .http
                .iter()
                .filter(|r| {
                    r.workload == "large"
                        && (r.scenario == A_SCENARIO || r.scenario == REFERENCE_SCENARIO)
                })
                .flat_map(|r| &r.runs)
                .collect();
            let total = runs.len();
            let busy = runs
                .iter()
                .filter(|r| !report.settings.keep_busy && r.noise.is_some_and(|n| n.busy))
                .count();
            out.push(format!(
                "No conclusion: fewer than {MIN_RUNS} runs each of A and B on the {large} file count ({busy} of {total} were taken on a busy machine and left out, or had no CPU figures). Rerun on a quieter machine, or with --keep-busy to include busy runs."
            ));
        }
    }
    out.extend(v42_sentence(report, answer));
    if let Some(s) = equal_load_sentence(report) {
        out.push(s);
    }
    if answer.conclusive {
        out.push(throughput_sentence(report, answer));
    }
    out.extend(small_file_sentences(report, answer));
    let others: Vec<String> = answer
        .ratios
        .iter()
        .filter(|r| r.workload == "large" && r.scenario != A_SCENARIO && r.scenario != A42_SCENARIO)
        .map(|r| {
            let over = version_of(&r.scenario).map_or(String::new(), |v| format!(" over {v}"));
            format!("{}{over}: {}", r.scenario, ratio_words(&r.cpu_per_request))
        })
        .collect();
    if !others.is_empty() {
        out.push(format!(
            "CPU per {large} request against B, the other rows: {}.",
            others.join("; ")
        ));
    }
    out.push(conditions(report, answer));
    out
}

/// The NFS version an A row speaks: NFSv4.2 for [`A42_SCENARIO`], NFSv3 for every
/// other row of scenario A (httpd `--nfs-version 3`); `None` for rows without NFS.
pub fn version_of(scenario: &str) -> Option<&'static str> {
    if scenario == A42_SCENARIO {
        Some("NFSv4.2")
    } else if scenario.starts_with("A (") {
        Some("NFSv3")
    } else {
        None
    }
}

/// Scenario A over NFSv4.2 against B: the large file, and the small one when measured.
fn v42_sentence(report: &Report, answer: &Answer) -> Option<String> {
    let c = ratio_of(answer, "large", A42_SCENARIO)?;
    let (a, b) = (
        demand_of(answer, "large", A42_SCENARIO)?,
        demand_of(answer, "large", REFERENCE_SCENARIO)?,
    );
    let small = match ratio_of(answer, "small", A42_SCENARIO) {
        Some(s) => format!(
            "; on the {} file over keep-alive, {}",
            size_words(report.dataset.small_bytes),
            ratio_words(s)
        ),
        None => String::new(),
    };
    let what = match c.significant {
        true => format!("cost {} the CPU of B", ratio_words(c)),
        false => format!("showed {} against B", ratio_words(c)),
    };
    Some(format!(
        "Over NFSv4.2, what a kernel mount negotiates, it {what}: {:.2} vs {:.2} ms per {} request ({}){small}.",
        a.cpu_ms_per_request,
        b.cpu_ms_per_request,
        size_words(report.dataset.large_bytes),
        split_words(a),
    ))
}

/// CPU per request of the processes behind httpd (the NFS server), in a demand row.
fn nfs_server_ms(d: &DemandRow) -> f64 {
    d.processes
        .iter()
        .filter(|p| p.name != "httpd")
        .map(|p| p.cpu_ms_per_request)
        .sum()
}

/// The small file over keep-alive: A against B, with what A's cache did, and the
/// client-cache row, whose cost there is the NFS round trip of its per-request
/// revalidation (a surprising row without its reason: 4.6 × B beside A's 1.1 ×).
fn small_file_sentences(report: &Report, answer: &Answer) -> Vec<String> {
    let mut out = Vec::new();
    let small = size_words(report.dataset.small_bytes);
    let Some(b) = demand_of(answer, "small", REFERENCE_SCENARIO) else {
        return out;
    };
    let cache_ms = report.settings.nfs_cache_ms;
    if let (Some(c), Some(a)) = (
        ratio_of(answer, "small", A_SCENARIO),
        demand_of(answer, "small", A_SCENARIO),
    ) {
        let nfs = nfs_server_ms(a);
        let why = if cache_ms > 0 && nfs < 0.1 * a.cpu_ms_per_request {
            format!(
                "; the NFS server's share {nfs:.3} ms: httpd's {cache_ms} ms cache of handles, attributes and small files answered nearly every request without asking it"
            )
        } else {
            format!("; the NFS server's share {nfs:.3} ms")
        };
        out.push(format!(
            "On the {small} file over keep-alive connections, A's CPU per request against B's: {} ({:.3} vs {:.3} ms{why}).",
            ratio_words(c),
            a.cpu_ms_per_request,
            b.cpu_ms_per_request
        ));
    }
    if let (Some(c), Some(k)) = (
        ratio_of(answer, "small", CLIENT_CACHE_SCENARIO),
        demand_of(answer, "small", CLIENT_CACHE_SCENARIO),
    ) {
        out.push(format!(
            "The client-cache row revalidates every request with a LOOKUP to the NFS server (close-to-open, as a kernel mount's open() does), a round trip A's {cache_ms} ms cache skips: on the {small} file it cost {} B's CPU per request ({:.3} vs {:.3} ms; {}).",
            ratio_words(c),
            k.cpu_ms_per_request,
            b.cpu_ms_per_request,
            split_words_precise(k)
        ));
    }
    out
}

/// "httpd 0.033 ms + rustnfs 0.017 ms": [`split_words`] for sub-millisecond figures.
fn split_words_precise(d: &DemandRow) -> String {
    d.processes
        .iter()
        .map(|p| format!("{} {:.3} ms", p.name, p.cpu_ms_per_request))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// What limited the closed-loop throughput of A and B on the large file.
fn throughput_sentence(report: &Report, answer: &Answer) -> String {
    let rows: Vec<&DemandRow> = [A_SCENARIO, REFERENCE_SCENARIO]
        .iter()
        .filter_map(|s| demand_of(answer, "large", s))
        .collect();
    let bound: Vec<&str> = rows
        .iter()
        .filter(|d| d.client_bound)
        .map(|d| d.scenario.as_str())
        .collect();
    let client_cpus = report.pinning.as_ref().map_or(String::new(), |p| {
        lab::affinity::format_cpu_list(&p.client_cpus)
    });
    let rps = |s: &str| demand_of(answer, "large", s).map_or(0.0, |d| d.requests_per_sec);
    let (a, b) = (rps(A_SCENARIO), rps(REFERENCE_SCENARIO));
    if !bound.is_empty() {
        format!(
            "Throughput on this machine was limited by the client (CPU {client_cpus} at least 90 % busy in most runs of {}): the closed-loop {a:.0} vs {b:.0} req/s are lower bounds and say nothing about which server is faster.",
            bound.join(" and ")
        )
    } else {
        let runs = |s: &str| {
            report
                .http
                .iter()
                .find(|r| r.workload == "large" && r.scenario == s)
                .map(|r| {
                    runs_that_count(&r.runs, report.settings.keep_busy)
                        .map(|x| x.requests_per_sec)
                        .collect::<Vec<f64>>()
                })
                .unwrap_or_default()
        };
        let verdict = stats::ratio(&runs(A_SCENARIO), &runs(REFERENCE_SCENARIO))
            .map_or("n/a".into(), |c| ratio_words(&c));
        format!(
            "The client was not the bottleneck (its CPUs below 90 % busy): closed-loop throughput was {a:.0} req/s for A and {b:.0} for B, A/B {verdict} — on this machine, with the servers sharing CPU {}.",
            report
                .pinning
                .as_ref()
                .map_or(String::new(), |p| lab::affinity::format_cpu_list(
                    &p.server_cpus
                ))
        )
    }
}

/// The latency NFS adds at the same offered load, from the open-loop rows.
fn equal_load_sentence(report: &Report) -> Option<String> {
    let a_rows: Vec<&EqualLoadRow> = report
        .equal_load
        .iter()
        .filter(|r| r.scenario == A_SCENARIO && r.p50_minus_b_ms.is_some())
        .collect();
    if a_rows.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    for r in &a_rows {
        let d = r.p50_minus_b_ms?;
        let mut p = String::new();
        let _ = write!(
            p,
            "at {:.0} req/s ({:.0} %): ",
            r.offered_per_sec,
            r.fraction_of_capacity * 100.0
        );
        if d.significant {
            let _ = write!(
                p,
                "{:+.2} ms (95 % CI {:+.2} to {:+.2}; {:.2} vs {:.2} ms)",
                d.estimate,
                d.ci.low,
                d.ci.high,
                r.p50_ms,
                r.p50_ms - d.estimate
            );
        } else {
            let _ = write!(
                p,
                "no measurable difference ({:+.2} ms, CI {:+.2} to {:+.2})",
                d.estimate, d.ci.low, d.ci.high
            );
        }
        parts.push(p);
    }
    Some(format!(
        "Median latency of a {} request at equal offered load (open loop, each request timed from its intended start), A against B: {}.",
        size_words(report.dataset.large_bytes),
        parts.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cpu_ms: f64, busy: bool, client_bound: bool) -> HttpRun {
        HttpRun {
            requests: 100,
            requests_per_sec: 100.0,
            cost: Some(Cost {
                cpu_us_per_request: cpu_ms * 1e3,
                processes: vec![ProcessCost {
                    name: "httpd".into(),
                    cpu_ms_per_request: cpu_ms,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            noise: Some(RunNoise {
                busy,
                ..Default::default()
            }),
            client: Some(ClientLoad {
                client_bound,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The run's own client and servers raise the load average; only other work makes a
    /// run busy. Reports without the figure are judged by the load as before.
    #[test]
    fn a_run_is_busy_by_other_work_not_by_its_own_load() {
        let loaded = lab::environment::Noise {
            load1: 6.0,
            cores: 2,
            ..Default::default()
        };
        let quiet = lab::environment::Noise {
            load1: 0.1,
            cores: 2,
            ..Default::default()
        };
        assert!(!RunNoise::judge(loaded, loaded, Some(0.05)).busy);
        assert!(RunNoise::judge(quiet, quiet, Some(0.5)).busy);
        assert!(RunNoise::judge(loaded, quiet, None).busy);
        assert!(!RunNoise::judge(quiet, quiet, None).busy);
    }

    #[test]
    fn busy_runs_are_left_out_unless_kept() {
        let runs = [
            run(1.0, false, false),
            run(9.0, true, false),
            run(1.2, false, false),
        ];
        assert_eq!(demand_samples(&runs, false), vec![1.0, 1.2]);
        assert_eq!(demand_samples(&runs, true).len(), 3);
    }

    #[test]
    fn headline_needs_quiet_runs_and_states_the_ratio() {
        let b = [
            run(1.3, false, true),
            run(1.3, false, true),
            run(1.3, false, false),
        ];
        let a = [
            run(5.2, false, true),
            run(5.2, false, true),
            run(5.2, false, true),
        ];
        let c = headline(&a, &b, false).unwrap();
        assert!((c.estimate - 4.0).abs() < 1e-9 && c.significant);
        let busy = [
            run(5.2, true, false),
            run(5.2, true, false),
            run(5.2, false, false),
        ];
        assert_eq!(headline(&busy, &b, false), None);
        assert!(headline(&busy, &b, true).is_some());
        let row = HttpRow {
            workload: "large".into(),
            scenario: A_SCENARIO.into(),
            description: String::new(),
            runs: a.to_vec(),
            median: HttpRun::median_of(&a),
            rps_min: 0.0,
            rps_max: 0.0,
            percentiles: Vec::new(),
            server_peak_rss_bytes: None,
            cost: None,
            reference: None,
            client_bound: true,
        };
        let d = demand_row(&row, false).unwrap();
        assert!(d.client_bound);
        assert!((d.capacity_per_core - 1e3 / 5.2).abs() < 1e-9);
        assert_eq!(split_words(&d), "httpd 5.20 ms");
    }

    /// The committed default run (benches/results/2026-12-02-answer): its 4 KiB
    /// client-cache row, 4.6 × B beside A's 1.1 ×, is given its reason, and A's small-file
    /// figure says the cache kept rustnfs out of it.
    #[test]
    fn the_small_file_rows_are_explained() {
        let report: Report = serde_json::from_str(include_str!(
            "../../../../benches/results/2026-12-02-answer/report.json"
        ))
        .unwrap();
        let answer = compute(&report);
        let said = |what: &str| {
            answer
                .sentences
                .iter()
                .find(|s| s.contains(what))
                .unwrap_or_else(|| panic!("no sentence with {what:?}: {:#?}", answer.sentences))
                .clone()
        };
        let a = said("On the 4 KiB file over keep-alive connections");
        assert!(
            a.contains("1.13 ×") && a.contains("1000 ms cache") && a.contains("share 0.000 ms"),
            "{a}"
        );
        let k = said("The client-cache row revalidates every request");
        assert!(
            k.contains("4.62 ×") && k.contains("httpd 0.033 ms + rustnfs 0.017 ms"),
            "{k}"
        );
    }

    /// Issue 32 §3: the answer names the protocol version of every A row — the headline
    /// (NFSv3), a sentence for the NFSv4.2 row, and "over NFSv3" beside the other A rows.
    #[test]
    fn the_answer_names_the_version_of_every_a_row() {
        let mut report: Report = serde_json::from_str(include_str!(
            "../../../../benches/results/2026-12-02-answer/report.json"
        ))
        .unwrap();
        let mut v42: Vec<HttpRow> = report
            .http
            .iter()
            .filter(|r| r.scenario == A_SCENARIO)
            .cloned()
            .collect();
        for r in &mut v42 {
            r.scenario = A42_SCENARIO.into();
        }
        report.http.extend(v42);
        let answer = compute(&report);
        let said = |what: &str| {
            answer
                .sentences
                .iter()
                .find(|s| s.contains(what))
                .unwrap_or_else(|| panic!("no sentence with {what:?}: {:#?}", answer.sentences))
                .clone()
        };
        assert!(said("files from rustnfs over NFSv3").contains("×"));
        let s = said("Over NFSv4.2, what a kernel mount negotiates, it cost");
        assert!(s.contains("on the 4 KiB file over keep-alive"), "{s}");
        let others = said("the other rows");
        assert!(
            others.contains(&format!("{CLIENT_CACHE_SCENARIO} over NFSv3")),
            "{others}"
        );
        assert!(!others.contains(A42_SCENARIO), "{others}");
        assert_eq!(version_of("nginx"), None);
    }

    #[test]
    fn words_say_no_measurable_difference_inside_the_interval() {
        let c = stats::ratio(&[1.0, 2.0, 3.0], &[1.0, 1.0, 1.0]).unwrap();
        assert!(ratio_words(&c).starts_with("no measurable difference"));
        let c = stats::ratio(&[4.0, 4.0], &[1.0, 1.0]).unwrap();
        assert_eq!(ratio_words(&c), "4.00 × (95 % CI 4.00–4.00 ×)");
    }
}
