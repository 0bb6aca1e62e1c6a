//! The answer a comparison gives, computed from its rows: what serving from NFS costs
//! against local disk in CPU per request of every serving process (service demand, the
//! figure that does not depend on who else uses the machine), with its interval labelled
//! by the confidence it has at its repeat count,
//! the latency NFS adds at equal offered load, and what limited throughput — as data
//! and as sentences. No I/O: `servelab report DIR` recomputes it from report.json.

use super::model::*;
use crate::stats::{self, Comparison, Verdict};

/// Quiet runs each side needs before a ratio is stated.
pub const MIN_RUNS: usize = 2;

/// A headline interval wider than this (relative half-width) asks for more repeats.
pub const NARROW_ENOUGH: f64 = 0.10;

/// A run whose serving processes' CPU counters were read whole: its cost is there and
/// positive. Its CPU per request holds on a busy machine too — it counts only the
/// serving processes' own CPU time — so such a run counts for service demand either way.
fn whole(r: &HttpRun) -> bool {
    r.cost.as_ref().is_some_and(|c| c.cpu_us_per_request > 0.0)
}

/// The runs of a row that count for throughput and latency: whole, and not taken on a
/// busy machine unless `keep_busy` (neighbours take the CPU and the wire they measure).
pub fn runs_that_count(runs: &[HttpRun], keep_busy: bool) -> impl Iterator<Item = &HttpRun> {
    runs.iter()
        .filter(move |r| whole(r) && (keep_busy || !r.noise.is_some_and(|n| n.busy)))
}

/// CPU ms per request of every serving process, one value per run with whole counters,
/// busy or not.
pub fn demand_samples(runs: &[HttpRun]) -> Vec<f64> {
    runs.iter()
        .filter(|r| whole(r))
        .filter_map(|r| r.cost.as_ref().map(|c| c.cpu_us_per_request / 1e3))
        .collect()
}

/// The whole machine's CPU per request in ms (client included, stolen time not), from
/// the runs that count.
pub fn machine_samples(runs: &[HttpRun], keep_busy: bool) -> Vec<f64> {
    per_request_ms(runs, keep_busy, |c| c.machine_work_s)
}

/// The load generator's own CPU per request in ms, from the runs that count — shown as
/// the whole machine's share, so only from runs that have the whole machine's figure.
fn client_samples(runs: &[HttpRun], keep_busy: bool) -> Vec<f64> {
    per_request_ms(runs, keep_busy, |c| {
        c.machine_work_s.map(|_| c.client_process_cpu_s)
    })
}

fn per_request_ms(
    runs: &[HttpRun],
    keep_busy: bool,
    seconds: impl Fn(&crate::experiment::probe::ClientLoad) -> Option<f64>,
) -> Vec<f64> {
    runs_that_count(runs, keep_busy)
        .filter(|r| whole(r) && r.requests > 0)
        .filter_map(|r| Some(seconds(r.client.as_ref()?)? * 1e3 / r.requests as f64))
        .collect()
}

/// The headline comparison: a row's service demand against B's in the large workload.
pub fn headline(a: &[HttpRun], b: &[HttpRun]) -> Option<Comparison> {
    let (a, b) = (demand_samples(a), demand_samples(b));
    if a.len() < MIN_RUNS || b.len() < MIN_RUNS {
        return None;
    }
    stats::ratio(&a, &b)
}

fn demand_row(row: &HttpRow, keep_busy: bool) -> Option<DemandRow> {
    let used: Vec<&HttpRun> = row.runs.iter().filter(|r| whole(r)).collect();
    if used.is_empty() {
        return None;
    }
    let quiet: Vec<&HttpRun> = runs_that_count(&row.runs, keep_busy).collect();
    let cost = Cost::median_of(used.iter().filter_map(|r| r.cost.as_ref()))?;
    let samples = demand_samples(&row.runs);
    let (lo, hi) = stats::spread(&samples)?;
    let ms = stats::median_of(&samples)?;
    let busy: Vec<&RunNoise> = used
        .iter()
        .filter_map(|r| r.noise.as_ref())
        .filter(|n| n.busy)
        .collect();
    let bound = quiet
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
        busy_runs: busy.len(),
        other_work_max: busy.iter().filter_map(|n| n.other_work).reduce(f64::max),
        client_bound: bound * 2 > quiet.len(),
        requests_per_sec: stats::median_of(
            &quiet.iter().map(|r| r.requests_per_sec).collect::<Vec<_>>(),
        )
        .unwrap_or(0.0),
        client_ms_per_request: stats::median_of(&client_samples(&row.runs, keep_busy)),
        machine_ms_per_request: stats::median_of(&machine_samples(&row.runs, keep_busy)),
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
        if let Some(c) = headline(&row.runs, &b.runs) {
            answer.ratios.push(RatioRow {
                workload: row.workload.clone(),
                scenario: row.scenario.clone(),
                against: REFERENCE_SCENARIO.into(),
                cpu_per_request: c,
                machine_per_request: machine_ratio(&row.runs, &b.runs, keep_busy),
            });
        }
    }
    answer.conclusive = ratio_of(&answer, "large", A_SCENARIO).is_some();
    answer.sentences = sentences(report, &answer);
    answer
}

/// The whole machine's CPU per request of a row against B's, when both have enough runs.
fn machine_ratio(a: &[HttpRun], b: &[HttpRun], keep_busy: bool) -> Option<Comparison> {
    let (a, b) = (machine_samples(a, keep_busy), machine_samples(b, keep_busy));
    if a.len() < MIN_RUNS || b.len() < MIN_RUNS {
        return None;
    }
    stats::ratio(&a, &b)
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

/// A ratio and its interval in words, labelled with the confidence its method has at
/// its repeat counts: "4.1 × (95 % CI 3.8–4.4 ×)"; that there is no measurable
/// difference (only from enough repeats for 95 %); or that too few repeats left it
/// unresolved.
pub fn ratio_words(c: &Comparison) -> String {
    let (label, lo, hi) = (c.ci_label(), c.ci.low, c.ci.high);
    match c.verdict() {
        Verdict::Differs => format!("{:.2} × ({label} {lo:.2}–{hi:.2} ×)", c.estimate),
        Verdict::NoDifference => format!(
            "no measurable difference ({:.2} ×, {label} {lo:.2}–{hi:.2} × includes 1)",
            c.estimate
        ),
        Verdict::Unresolved => format!(
            "not resolved ({:.2} ×; the {label} {lo:.2}–{hi:.2} × from {} and {} runs includes 1: too few runs to call it no difference)",
            c.estimate, c.n_a, c.n_b
        ),
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
        format!("{n} runs taken on a busy machine kept in every figure (--keep-busy)")
    } else {
        format!(
            "{} runs taken on a busy machine kept for CPU per request, left out of throughput and latency",
            answer.excluded_busy_runs
        )
    };
    let fresh = if s.fresh_servers {
        "; every headline round after the first on freshly started rustnfs and httpd (so the intervals cover a restart)"
    } else {
        ""
    };
    let loads: Vec<f64> = report
        .http
        .iter()
        .flat_map(|r| &r.runs)
        .filter_map(|r| r.noise.map(|n| n.before.load_per_core()))
        .collect();
    let load = stats::median_of(&loads).map_or("n/a".into(), |l| format!("{l:.2}"));
    format!(
        "Conditions: {wire}, {cache}, {pin}; {busy}{fresh}; median load average {load} per core before the runs."
    )
}

fn sentences(report: &Report, answer: &Answer) -> Vec<String> {
    let mut out = headline_sentences(report, answer);
    out.extend(machine_sentence(report, answer));
    out.extend(v42_sentence(report, answer));
    if let Some(s) = equal_load_sentence(report) {
        out.push(s);
    }
    // How the price grows with distance: one sentence per point measured.
    if let Some(d) = &report.distance {
        out.extend(crate::distance::sentences::sentences(d));
    }
    if answer.conclusive {
        out.push(throughput_sentence(report, answer));
    }
    out.extend(small_file_sentences(report, answer));
    let large = size_words(report.dataset.large_bytes);
    let others: Vec<String> = answer
        .ratios
        .iter()
        .filter(|r| {
            r.workload == "large"
                && r.scenario != A_SCENARIO
                && r.scenario != CLIENT_CACHE_SCENARIO
                && r.scenario != A42_SCENARIO
        })
        .map(|r| format!("{}: {}", r.scenario, ratio_words(&r.cpu_per_request)))
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

/// The whole machine's CPU per large request, client included, A against B: beside the
/// serving processes' figure, it shows what part of B's cost the client carried.
fn machine_sentence(report: &Report, answer: &Answer) -> Option<String> {
    let c = answer
        .ratios
        .iter()
        .find(|r| r.workload == "large" && r.scenario == A_SCENARIO)?
        .machine_per_request
        .as_ref()?;
    let (a, b) = (
        demand_of(answer, "large", A_SCENARIO)?,
        demand_of(answer, "large", REFERENCE_SCENARIO)?,
    );
    let (am, bm) = (a.machine_ms_per_request?, b.machine_ms_per_request?);
    let (ac, bc) = (a.client_ms_per_request?, b.client_ms_per_request?);
    Some(format!(
        "The whole machine, load generator included, worked {:.2} vs {:.2} ms per {} request every byte over NFS against local disk: {} (the load generator's own share {ac:.2} vs {bc:.2} ms). On loopback part of a server's sending runs in the client's context, so the serving processes' figure above leaves some of B's cost with the client; the NFS hop's cost is real either way, its size lies between the two ratios.",
        am,
        bm,
        size_words(report.dataset.large_bytes),
        ratio_words(c),
    ))
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

/// How each of the two A configurations reads, as the answer names them.
const EVERY_BYTE: &str = "every byte over NFS (httpd's own NFS client, no client cache)";
const CLIENT_CACHE: &str = "with a client cache, as a kernel mount (file data kept locally, one LOOKUP per request to revalidate it)";

/// The opening: both ways a client can read through NFS, each named, with its ratio
/// against local disk and the figures behind it; which one the original experiment
/// measured; the split by process; what neighbours did to the runs.
fn headline_sentences(report: &Report, answer: &Answer) -> Vec<String> {
    let large = size_words(report.dataset.large_bytes);
    let Some(b) = demand_of(answer, "large", REFERENCE_SCENARIO) else {
        return vec![no_conclusion(report, &large)];
    };
    let rows: Vec<(&str, &Comparison, &DemandRow)> = [
        (EVERY_BYTE, A_SCENARIO),
        (CLIENT_CACHE, CLIENT_CACHE_SCENARIO),
    ]
    .into_iter()
    .filter_map(|(how, s)| {
        Some((
            how,
            ratio_of(answer, "large", s)?,
            demand_of(answer, "large", s)?,
        ))
    })
    .collect();
    if rows.is_empty() {
        return vec![no_conclusion(report, &large)];
    }
    let protocol = report
        .http
        .iter()
        .find(|r| r.workload == "large" && r.scenario == A_SCENARIO)
        .and_then(HttpRow::protocol)
        .unwrap_or_else(|| "NFS".into());
    let wire = if report.settings.link.is_some() {
        "loopback (the link's rows below)"
    } else {
        "loopback"
    };
    let parts: Vec<String> = rows
        .iter()
        .map(|(how, c, d)| {
            format!(
                "{how}: {}, {:.2} vs {:.2} ms",
                ratio_words(c),
                d.cpu_ms_per_request,
                b.cpu_ms_per_request
            )
        })
        .collect();
    let mut out = vec![format!(
        "Serving {large} files from rustnfs ({protocol} over {wire}) against local disk, in CPU per request of every serving process — {}. The original experiment read through a kernel NFS mount, which caches: its configuration is the client-cache one{}.",
        parts.join("; "),
        if rows.iter().any(|r| r.0 == CLIENT_CACHE) {
            ""
        } else {
            ", which did not run here"
        }
    )];
    let split: Vec<String> = rows
        .iter()
        .map(|(how, c, d)| {
            let short = how.split(" (").next().unwrap_or(how);
            format!("{short}, {} ({} and {} runs)", split_words(d), c.n_a, c.n_b)
        })
        .collect();
    out.push(format!(
        "By process, medians: {}; local disk, {}.{}",
        split.join("; "),
        split_words(b),
        busy_words(rows.iter().map(|r| r.2).chain([b]))
    ));
    if let Some(a) = rows.iter().find(|r| r.0 == EVERY_BYTE).map(|r| r.2) {
        out.push(format!(
            "At that cost one core serves {:.0} requests/s of {large} with every byte over NFS against {:.0} from local disk ({:.2} vs {:.2} CPU-seconds per GB).",
            a.capacity_per_core, b.capacity_per_core, a.cpu_s_per_gb, b.cpu_s_per_gb
        ));
    }
    out
}

/// " 5 of these runs were taken on a busy machine …", or nothing when none was.
fn busy_words<'a>(rows: impl Iterator<Item = &'a DemandRow>) -> String {
    let (mut busy, mut all, mut share) = (0, 0, None::<f64>);
    for d in rows {
        busy += d.busy_runs;
        all += d.runs_used;
        share = match (share, d.other_work_max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    if busy == 0 {
        return String::new();
    }
    let share = share.map_or(String::new(), |s| {
        format!(", other work up to {:.0} % of the CPU time", s * 100.0)
    });
    format!(
        " Taken on a busy machine: {busy} of these {all} runs{share}. CPU per request counts only the serving processes' own CPU, so they count here; their throughput and latency, which neighbours distort, are left out."
    )
}

/// Why there is no headline: too few runs of A and B with whole CPU counters.
fn no_conclusion(report: &Report, large: &str) -> String {
    let runs: Vec<&HttpRun> = report
        .http
        .iter()
        .filter(|r| {
            r.workload == "large" && (r.scenario == A_SCENARIO || r.scenario == REFERENCE_SCENARIO)
        })
        .flat_map(|r| &r.runs)
        .collect();
    let whole = runs.iter().filter(|r| whole(r)).count();
    format!(
        "No conclusion: fewer than {MIN_RUNS} runs each of A and B on the {large} file have whole CPU counters ({whole} of {} runs). Rerun with more --requests, so every run costs the servers many clock ticks.",
        runs.len()
    )
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
    let busy_only: Vec<&str> = rows
        .iter()
        .filter(|d| d.busy_runs == d.runs_used && !report.settings.keep_busy)
        .map(|d| d.scenario.as_str())
        .collect();
    if !busy_only.is_empty() {
        return format!(
            "Throughput withheld: every run of {} on the large file was taken on a busy machine, and neighbours distort requests/s and latency (not CPU per request). Rerun on a quieter machine for them, or with --keep-busy to see the distorted figures.",
            busy_only.join(" and ")
        );
    }
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
    let parts: Vec<String> = report
        .equal_load
        .iter()
        .filter(|r| r.scenario == A_SCENARIO && r.p50_minus_b_ms.is_some())
        .map(|r| {
            format!(
                "at {:.0} req/s ({:.0} %): {}",
                r.offered_per_sec,
                r.fraction_of_capacity * 100.0,
                latency_words(r, equal_load_b(report, r))
            )
        })
        .collect();
    if parts.is_empty() {
        let busy: usize = report.equal_load.iter().map(|r| r.busy_runs).sum();
        let quiet: usize = report.equal_load.iter().map(|r| r.runs_p50_ms.len()).sum();
        return (busy > 0 && quiet == 0).then(|| {
            format!(
                "Latency at equal offered load withheld: all {busy} open-loop runs were taken on a busy machine, and neighbours distort latency."
            )
        });
    }
    Some(format!(
        "Median latency of a {} request at equal offered load (open loop, each request timed from its intended start), A against B: {}.",
        size_words(report.dataset.large_bytes),
        parts.join("; ")
    ))
}

/// B's row at the same offered load as `row`.
pub fn equal_load_b<'a>(report: &'a Report, row: &EqualLoadRow) -> Option<&'a EqualLoadRow> {
    report.equal_load.iter().find(|b| {
        b.scenario == REFERENCE_SCENARIO
            && b.workload == row.workload
            && b.fraction_of_capacity == row.fraction_of_capacity
    })
}

/// A row's Δ p50 against B in words: the difference with its labelled interval, no
/// measurable difference, not resolved, or unstable with the run that made it so.
pub fn latency_words(row: &EqualLoadRow, b: Option<&EqualLoadRow>) -> String {
    let Some(d) = row.p50_minus_b_ms else {
        return "—".into();
    };
    let (label, lo, hi) = (d.ci_label(), d.ci.low, d.ci.high);
    if let Some(cause) = unstable_cause(&d, row, b) {
        return format!(
            "unstable ({cause}; the {label} {lo:+.2} to {hi:+.2} ms is wider than the difference it measures, {:+.2} ms)",
            d.estimate
        );
    }
    match d.verdict() {
        Verdict::Differs => format!(
            "{:+.2} ms ({label} {lo:+.2} to {hi:+.2}; {:.2} vs {:.2} ms)",
            d.estimate,
            row.p50_ms,
            row.p50_ms - d.estimate
        ),
        _ => difference_words(&d),
    }
}

pub use crate::stats::difference_words;

/// Why an equal-load interval says nothing: it is more than twice as wide as the
/// difference, and one run of a side had a median more than twice (or under half) that
/// side's median run — one outlier run among three decides the bootstrap's ends.
pub fn unstable_cause(
    d: &Comparison,
    a: &EqualLoadRow,
    b: Option<&EqualLoadRow>,
) -> Option<String> {
    if d.ci.high - d.ci.low <= 2.0 * d.estimate.abs() {
        return None;
    }
    let sides = [("A", Some(a)), ("B", b)];
    sides.iter().find_map(|(name, row)| {
        let runs = &row.as_ref()?.runs_p50_ms;
        let m = stats::median_of(runs)?;
        let odd = runs.iter().find(|&&x| x > 2.0 * m || x < 0.5 * m)?;
        Some(format!(
            "one of {}'s {} runs had a median of {odd:.2} ms against {m:.2} ms for its median run",
            name,
            runs.len()
        ))
    })
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

    /// Busy runs count for CPU per request (their own counters are whole) and are left
    /// out of throughput unless kept; a run without CPU figures counts for nothing.
    #[test]
    fn busy_runs_count_for_cpu_but_not_for_throughput() {
        let mut blind = run(3.0, false, false);
        blind.cost = None;
        let runs = [
            run(1.0, false, false),
            run(9.0, true, false),
            run(1.2, false, false),
            blind,
        ];
        assert_eq!(demand_samples(&runs), vec![1.0, 9.0, 1.2]);
        assert_eq!(runs_that_count(&runs, false).count(), 2);
        assert_eq!(runs_that_count(&runs, true).count(), 3);
    }

    #[test]
    fn headline_needs_whole_runs_and_states_the_ratio() {
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
        let c = headline(&a, &b).unwrap();
        assert!((c.estimate - 4.0).abs() < 1e-9 && c.significant);
        let busy = [
            run(5.2, true, false),
            run(5.2, true, false),
            run(5.2, false, false),
        ];
        assert!(headline(&busy, &b).is_some());
        let mut blind = busy.clone();
        blind[0].cost = None;
        blind[1].cost = None;
        assert_eq!(headline(&blind, &b), None);
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

    /// The whole machine's figure comes from the quiet runs' own counters, per request,
    /// and is compared with B's: busy runs (neighbours' work in /proc/stat) stay out.
    #[test]
    fn whole_machine_cost_is_per_request_from_quiet_runs_only() {
        let with = |cpu_ms: f64, busy: bool, machine_s: f64, client_s: f64| {
            let mut r = run(cpu_ms, busy, false);
            let c = r.client.as_mut().unwrap();
            c.machine_work_s = Some(machine_s);
            c.client_process_cpu_s = client_s;
            r
        };
        // 100 requests a run: 1.1 s of machine work is 11 ms per request.
        let b = [with(2.4, false, 1.1, 0.7), with(2.5, false, 1.1, 0.7)];
        let a = [
            with(8.7, false, 0.9, 0.3),
            with(8.6, false, 0.9, 0.3),
            with(8.0, true, 5.0, 0.3),
        ];
        assert_eq!(machine_samples(&a, false), vec![9.0, 9.0]);
        assert_eq!(machine_samples(&a, true).len(), 3);
        let c = machine_ratio(&a, &b, false).unwrap();
        assert!((c.estimate - 9.0 / 11.0).abs() < 1e-9, "{}", c.estimate);
        let mut old = b.clone();
        for r in &mut old {
            r.client.as_mut().unwrap().machine_work_s = None;
        }
        assert_eq!(
            machine_ratio(&a, &old, false),
            None,
            "older reports have no figure"
        );
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

    /// Issue 32 §3: the answer names the protocol version of its A rows — the headline
    /// (NFSv3, from the row's description) and a sentence for the NFSv4.2 row.
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
        let s = said("Over NFSv4.2, what a kernel mount negotiates, it cost");
        assert!(s.contains("on the 4 KiB file over keep-alive"), "{s}");
        assert!(answer.sentences.iter().all(|s| !s.contains("NFSv4.2)")));
        assert!(said("Serving 10 MiB files from rustnfs (NFSv3").contains("×"));
    }

    /// The committed default run as if a neighbour had taken 40 % of the CPU in every
    /// run: the CPU-per-request answer stands (the same ratios, from the same runs, flagged
    /// with the other work's share); throughput is withheld, not stated from busy runs.
    #[test]
    fn a_busy_machine_still_answers_cpu_per_request() {
        let mut report: Report = serde_json::from_str(include_str!(
            "../../../../benches/results/2026-12-02-answer/report.json"
        ))
        .unwrap();
        let quiet = compute(&report);
        for run in report.http.iter_mut().flat_map(|r| r.runs.iter_mut()) {
            let n = run.noise.get_or_insert_with(RunNoise::default);
            n.busy = true;
            n.other_work = Some(0.4);
        }
        let busy = compute(&report);
        assert!(busy.conclusive);
        assert_eq!(busy.ratios, quiet.ratios);
        assert!(
            busy.sentences[0].contains("5.21 ×"),
            "{:#?}",
            busy.sentences
        );
        assert!(
            busy.sentences[1].contains("Taken on a busy machine: 19 of these 19 runs, other work up to 40 % of the CPU time"),
            "{:#?}",
            busy.sentences
        );
        assert!(
            busy.sentences.iter().any(|s| s
                .starts_with("Throughput withheld: every run of A (NFS: rustnfs) and B (local)")),
            "{:#?}",
            busy.sentences
        );
        assert!(!busy.sentences.iter().any(|s| s.contains("closed-loop")));
        // The stored equal-load rows kept their quiet runs; with none left the answer
        // says latency was withheld.
        for r in &mut report.equal_load {
            r.busy_runs += r.runs_p50_ms.len();
            r.runs_p50_ms.clear();
            r.runs_p99_ms.clear();
            r.p50_minus_b_ms = None;
        }
        let withheld = compute(&report);
        assert!(
            withheld.sentences.iter().any(|s| s.starts_with(
                "Latency at equal offered load withheld: all 18 open-loop runs were taken on a busy machine"
            )),
            "{:#?}",
            withheld.sentences
        );
    }

    /// "No measurable difference" only from enough runs for a 95 % interval; from three
    /// a side the interval is labelled 75 % and the difference is not resolved.
    #[test]
    fn words_say_no_measurable_difference_only_at_95_percent() {
        let c = stats::ratio(&[1.0, 2.0, 3.0], &[1.0, 1.0, 1.0]).unwrap();
        let w = ratio_words(&c);
        assert!(
            w.starts_with("not resolved (2.00 ×; the 75 % CI 1.00–3.00 ×"),
            "{w}"
        );
        let six = [0.9, 1.1, 1.0, 0.95, 1.05, 1.0];
        let c = stats::ratio(&six, &[1.0; 6]).unwrap();
        let w = ratio_words(&c);
        assert!(
            w.starts_with("no measurable difference (1.00 ×, 95 % CI"),
            "{w}"
        );
        let c = stats::ratio(&[4.0, 4.0], &[1.0, 1.0]).unwrap();
        assert_eq!(ratio_words(&c), "4.00 × (50 % CI 4.00–4.00 ×)");
    }
}
