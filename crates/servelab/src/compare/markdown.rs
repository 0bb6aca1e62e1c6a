//! `report.md` of a comparison: a list of sections ([`SECTIONS`]), each a small
//! function from the [`Report`] to headings, sentences and tables. A new section is one
//! more function in that list.

use super::model::{
    CLIENT_BOUND_BUSY, EqualLoadRow, HttpRow, NfsRow, REFERENCE_SCENARIO, Report, RunNoise,
};
use crate::doc::{Block, Doc, Section};
use crate::stats::{Comparison, Verdict, delta_pct};
use crate::table::Table;

/// The report, top to bottom.
pub const SECTIONS: &[Section<Report>] = &[
    title,
    answer,
    service_demand,
    equal_load,
    crate::distance::markdown::section,
    how_measured,
    http,
    costs,
    noise,
    checks,
    reading_the_rows,
    server_phases,
    nfs,
    nfs_procedures,
    tcp,
    same_bytes,
    not_measured,
    environment,
];

/// The whole report as Markdown.
pub fn render(report: &Report) -> String {
    Doc::of(report, SECTIONS).to_markdown()
}

fn title(report: &Report) -> Vec<Block> {
    let env = &report.environment;
    vec![Block::Heading(
        1,
        format!("servelab compare — {} — {}", env.hostname, env.started_utc),
    )]
}

fn answer(report: &Report) -> Vec<Block> {
    vec![
        Block::h2("The answer"),
        Block::List(report.answer.sentences.clone()),
    ]
}

/// `1.23 (1.10–1.40, 95 %)`: the ratio, its interval and the confidence its method has
/// at its repeat counts, with the verdict when the interval includes 1.
fn ratio_cell(c: &Comparison) -> String {
    let verdict = match c.verdict() {
        Verdict::Differs => "",
        Verdict::NoDifference => ", no measurable difference",
        Verdict::Unresolved => ", not resolved: too few runs",
    };
    format!(
        "{:.2} ({:.2}–{:.2}, {}{verdict})",
        c.estimate,
        c.ci.low,
        c.ci.high,
        crate::stats::coverage::label(c.confidence())
    )
}

fn service_demand(report: &Report) -> Vec<Block> {
    let a = &report.answer;
    if a.service_demand.is_empty() {
        return Vec::new();
    }
    // Reports written before the whole-machine figure re-render as they were.
    let machine = a
        .service_demand
        .iter()
        .any(|d| d.machine_ms_per_request.is_some());
    let mut columns = vec![
        "Workload",
        "Scenario",
        "CPU ms/request (spread)",
        "By process, ms/request",
        "× B (CI, its confidence)",
    ];
    if machine {
        columns.push("Whole machine ms/request (client's own; × B)");
    }
    columns.extend([
        "Capacity per core, req/s",
        "CPU s/GB",
        "Peak RSS MB (by process)",
        "Runs",
        "Client-bound",
    ]);
    let mut t = Table::new(columns);
    for d in &a.service_demand {
        let against_b = a
            .ratios
            .iter()
            .find(|r| r.workload == d.workload && r.scenario == d.scenario);
        let ratio = against_b
            .map(|r| ratio_cell(&r.cpu_per_request))
            .unwrap_or_else(|| {
                if d.scenario == REFERENCE_SCENARIO {
                    "—"
                } else {
                    "n/a"
                }
                .into()
            });
        let by_process = |f: &dyn Fn(&super::model::ProcessCost) -> String| {
            d.processes.iter().map(f).collect::<Vec<_>>().join(" + ")
        };
        let mut cells = vec![
            d.workload.clone(),
            d.scenario.clone(),
            format!(
                "{:.3} ({:.3}–{:.3})",
                d.cpu_ms_per_request, d.cpu_ms_min, d.cpu_ms_max
            ),
            by_process(&|p| format!("{} {:.3}", p.name, p.cpu_ms_per_request)),
            ratio,
        ];
        if machine {
            cells.push(machine_cell(d, against_b));
        }
        cells.extend([
            format!("{:.0}", d.capacity_per_core),
            format!("{:.2}", d.cpu_s_per_gb),
            by_process(&|p| format!("{} {:.1}", p.name, p.peak_rss_bytes as f64 / 1e6)),
            d.runs_used.to_string(),
            if d.client_bound { "yes" } else { "no" }.into(),
        ]);
        t.row(cells);
    }
    let mut text = SERVICE_DEMAND_TEXT.to_string();
    if machine {
        text.push(' ');
        text.push_str(MACHINE_TEXT);
    }
    vec![
        Block::h2("Service demand: CPU per request of every serving process"),
        Block::text(text),
        Block::Table(t),
    ]
}

const SERVICE_DEMAND_TEXT: &str = "CPU seconds (user + system from `/proc/PID/stat`) of each \
    serving process during each run, divided by the requests it served: the figure that does \
    not depend on who else uses the machine (netperf's service demand). Median over the runs \
    that count (spread = lowest–highest); capacity per core = 1 / CPU per request. Ratios \
    against B with their bootstrap interval and the confidence that interval has at its \
    repeat count (simulated: 50 % at 2 runs a side, 75 % at 3, 95 % from 6 on — see \
    `stats::coverage`); one that includes 1 is no measurable difference only at 95 %, \
    otherwise not resolved.";

const MACHINE_TEXT: &str = "Whole machine: every CPU's work during the run from \
    `/proc/stat` (stolen time left out), client included, per request; in brackets the load \
    generator's own share and the whole-machine ratio against B. On loopback the kernel runs \
    much of a TCP transfer in whichever process's context releases it — the sender's, or the \
    receiver's when its ACK lets queued data go — so part of a server's sending can land in \
    the client's figure, more for a server that queues a whole answer at once (`sendfile` of \
    the file) than for one fed piecewise (A's httpd, behind the NFS hop): read both columns.";

/// "10.60 (7.20; 0.85 ×)": the whole machine's CPU per request, the client's share of
/// it, and the whole-machine ratio against B when measured.
fn machine_cell(d: &super::model::DemandRow, against_b: Option<&super::model::RatioRow>) -> String {
    let (Some(m), Some(c)) = (d.machine_ms_per_request, d.client_ms_per_request) else {
        return "n/a".into();
    };
    let ratio = against_b
        .and_then(|r| r.machine_per_request.as_ref())
        .map_or(String::new(), |x| format!("; {:.2} ×", x.estimate));
    format!("{m:.3} ({c:.3}{ratio})")
}

fn equal_load(report: &Report) -> Vec<Block> {
    if report.equal_load.is_empty() {
        return Vec::new();
    }
    let mut t = Table::new([
        "Offered req/s (share)",
        "Scenario",
        "Achieved req/s",
        "p50 ms",
        "p99 ms",
        "Δ p50 vs B ms (CI)",
        "Runs",
        "Failed",
    ]);
    for r in &report.equal_load {
        t.row(equal_load_row(report, r));
    }
    vec![
        Block::h2("Latency at equal offered load"),
        Block::text(format!(
            "A and B driven open-loop at the same fixed rates on the large file (shares of the \
             lower of their closed-loop capacities), {} s per point, each request timed from its \
             intended start; medians over the repeats. Δ p50 = A − B with its bootstrap \
             interval, labelled with its confidence at its repeat count; *unstable* when one \
             outlier run makes the interval wider than twice the difference; runs taken on a \
             busy machine are left out (a point with none left says so and is not drawn).",
            report.settings.equal_load_seconds
        )),
        Block::Table(t),
    ]
}

fn equal_load_row(report: &Report, r: &EqualLoadRow) -> [String; 8] {
    let runs = r.runs_p50_ms.len();
    let busy = if r.busy_runs > 0 {
        format!(" ({} busy left out)", r.busy_runs)
    } else {
        String::new()
    };
    let figure = |v: f64| {
        if runs == 0 {
            "no quiet run".to_string()
        } else {
            format!("{v:.2}")
        }
    };
    [
        format!(
            "{:.1} ({:.0} %)",
            r.offered_per_sec,
            r.fraction_of_capacity * 100.0
        ),
        r.scenario.clone(),
        if runs == 0 {
            "no quiet run".into()
        } else {
            format!("{:.1}", r.achieved_per_sec)
        },
        figure(r.p50_ms),
        figure(r.p99_ms),
        super::answer::latency_words(r, super::answer::equal_load_b(report, r)),
        format!("{runs}{busy}"),
        r.failed.to_string(),
    ]
}

fn how_measured(report: &Report) -> Vec<Block> {
    let client = if report
        .http
        .iter()
        .any(|r| r.scenario == super::model::A42_SCENARIO)
    {
        "NFS client, over NFSv3 unless the row names another version (the NFSv4.2 row: what \
         a kernel mount negotiates),"
    } else {
        "NFSv3 client"
    };
    let mut out = vec![
        Block::h2("How it was measured"),
        Block::text(format!(
            "Scenario **A** serves files that live on an NFS export: `httpd --nfs` reads them \
             through its built-in {client} from `rustnfs`. Scenario **B** serves the same \
             files from local disk: `httpd --root`. Baselines serve the same files the same way. \
             Every figure is the median of {} runs (spread = lowest–highest); Δ% is against B; \
             server peak RSS is the HTTP server's process tree (workers included) during the runs.",
            report.settings.repeat
        )),
    ];
    if let Some(p) = &report.pinning {
        out.push(Block::text(format!(
            "CPUs: {}. A row marked **client-bound** had the client's CPUs at least {:.0} % busy \
             in most of its runs: its requests/s is a lower bound on the server's capacity, never \
             a finding about the server.",
            p.note,
            CLIENT_BOUND_BUSY * 100.0
        )));
    }
    out
}

/// One section per HTTP workload: its table (Δ% against B, the reference client's
/// figures beside ours) and the cross-check's notes.
fn http(report: &Report) -> Vec<Block> {
    let mut out = Vec::new();
    for workload in distinct(report.http.iter().map(|r| r.workload.as_str())) {
        let rows: Vec<&HttpRow> = report
            .http
            .iter()
            .filter(|r| r.workload == workload)
            .collect();
        out.push(Block::h2(http_heading(report, workload)));
        out.push(Block::Table(http_table(&rows, report.settings.keep_busy)));
        out.extend(cross_check(&rows));
    }
    out
}

/// Δ% of `value` against B's `reference` ("—" on B's own row, "n/a" without B).
fn delta_cell(value: f64, reference: Option<f64>, is_b: bool, missing: &str) -> String {
    match reference {
        Some(b) if b > 0.0 && !is_b => {
            delta_pct(value, b).map_or(missing.into(), |d| format!("{d:+.1}%"))
        }
        Some(_) if is_b => "—".into(),
        _ => missing.into(),
    }
}

fn http_table(rows: &[&HttpRow], keep_busy: bool) -> Table {
    let b = rows.iter().find(|r| r.scenario == REFERENCE_SCENARIO);
    let reference = b.map(|r| r.median.requests_per_sec);
    let tool = rows
        .iter()
        .find_map(|r| r.reference.as_ref().map(|x| x.tool.clone()));
    let b_ref = b
        .and_then(|r| r.reference.as_ref())
        .map(|x| x.median_per_sec);
    let mut columns: Vec<String> = [
        "Scenario",
        "Requests/s (spread)",
        "Transfer rate MB/s",
        "Mean ms",
        "Median ms",
        "p99 ms",
        "Longest ms",
        "Failed",
        "Non-2xx",
        "Δ% req/s vs B",
        "Server peak RSS MB",
    ]
    .map(String::from)
    .to_vec();
    if let Some(t) = &tool {
        columns.extend([
            format!("{t} req/s"),
            format!("servelab ÷ {t}"),
            format!("{t} Δ% vs B"),
        ]);
    }
    let mut t = Table::new(columns);
    for r in rows {
        let (m, is_b) = (&r.median, r.scenario == REFERENCE_SCENARIO);
        let mut cells = vec![
            format!(
                "{}{}{}",
                r.scenario,
                if r.client_bound {
                    " **(client-bound)**"
                } else {
                    ""
                },
                if r.busy_only(keep_busy) {
                    " **(busy runs only: neighbours distort these figures)**"
                } else {
                    ""
                }
            ),
            format!(
                "{:.1} ({:.1}–{:.1})",
                m.requests_per_sec, r.rps_min, r.rps_max
            ),
            format!("{:.1}", m.transfer_bytes_per_sec / 1e6),
            format!("{:.2}", m.mean_ms),
            format!("{:.2}", m.p50_ms),
            format!("{:.2}", m.p99_ms),
            format!("{:.2}", m.max_ms),
            m.failed.to_string(),
            m.non_2xx.to_string(),
            delta_cell(m.requests_per_sec, reference, is_b, "n/a"),
            r.server_peak_rss_bytes
                .map_or("n/a".to_string(), |b| format!("{:.1}", b as f64 / 1e6)),
        ];
        match (&tool, &r.reference) {
            (None, _) => {}
            (Some(_), None) => cells.extend(["n/a", "n/a", "n/a"].map(String::from)),
            (Some(_), Some(x)) => cells.extend([
                format!("{:.1}", x.median_per_sec),
                format!("{:.2}", x.agreement),
                delta_cell(x.median_per_sec, b_ref, is_b, "—"),
            ]),
        }
        t.row(cells);
    }
    t
}

/// The reference client's paragraph and the rows it disagrees with.
fn cross_check(rows: &[&HttpRow]) -> Vec<Block> {
    let Some(x) = rows.iter().find_map(|r| r.reference.as_ref()) else {
        return Vec::new();
    };
    let notes = rows
        .iter()
        .filter_map(|r| {
            let x = r.reference.as_ref()?;
            let note = x.note.as_ref()?;
            Some(format!(
                "{}: servelab load and {} differ by {:+.0} % — {note} ({} CPU {:.2} s per {:.2} s run).",
                r.scenario,
                x.tool,
                (x.agreement - 1.0) * 100.0,
                x.tool,
                x.median_client_cpu_s,
                x.median_seconds
            ))
        })
        .collect();
    vec![
        Block::text(format!(
            "Cross-check: `{}` ran on the same URL right after `servelab load` in every slot \
             (medians of runs; `servelab ÷ {}` = agreement). Percentiles above are servelab \
             load's, to the last body byte.",
            x.command, x.tool
        )),
        Block::List(notes),
    ]
}

fn costs(report: &Report) -> Vec<Block> {
    if !report.http.iter().any(|r| r.cost.is_some()) {
        return Vec::new();
    }
    let mut t = Table::new([
        "Workload",
        "Scenario",
        "Peak RSS MB",
        "Mean RSS MB",
        "CPU user s",
        "CPU sys s",
        "CPU µs/request",
        "CPU s/GB",
        "Ctx switches vol/invol",
        "Peak open fds",
    ])
    .left(2);
    for r in &report.http {
        if let Some(c) = &r.cost {
            t.row([
                r.workload.clone(),
                r.scenario.clone(),
                format!("{:.1}", c.peak_rss_bytes as f64 / 1e6),
                format!("{:.1}", c.mean_rss_bytes as f64 / 1e6),
                format!("{:.3}", c.cpu_user_s),
                format!("{:.3}", c.cpu_system_s),
                format!("{:.1}", c.cpu_us_per_request),
                format!("{:.2}", c.cpu_s_per_gb),
                format!("{}/{}", c.voluntary_switches, c.involuntary_switches),
                c.peak_open_fds.to_string(),
            ]);
        }
    }
    vec![
        Block::h2("What each scenario costs (server side, median run)"),
        Block::text(
            "Every serving process of the scenario — the HTTP server's process tree (workers \
             included) and the NFS server behind it (rustnfs for A, Ganesha for its row) — \
             sampled from `/proc` every 50 ms during each run and summed (peak RSS: the sum of \
             each one's peak): resident memory, CPU seconds, CPU per request and per GB of \
             body served, context switches, open file descriptors. The split by process is in \
             the service-demand table above. Memory over time: `memory-WORKLOAD.svg`.",
        ),
        Block::Table(t),
    ]
}

fn noise(report: &Report) -> Vec<Block> {
    if !report
        .http
        .iter()
        .any(|r| r.runs.iter().any(|x| x.noise.is_some()))
    {
        return Vec::new();
    }
    let mut t = Table::new([
        "Workload",
        "Scenario",
        "Other work % (max)",
        "Load before (min–max)",
        "Load after (min–max)",
        "CPU pressure % (max)",
        "Busy runs",
    ])
    .left(2);
    for r in &report.http {
        let n: Vec<RunNoise> = r.runs.iter().filter_map(|x| x.noise).collect();
        if !n.is_empty() {
            t.row(noise_row(r, &n));
        }
    }
    vec![
        Block::h2("Noise (other work during each run)"),
        Block::text(format!(
            "*Other work*: the share of all CPU time ({} cores) during a run that went to \
             processes other than the client and the serving processes (`/proc/stat` minus \
             their `/proc/PID/stat`); a run is *busy* when it exceeded {}. The 1-minute \
             load average and CPU pressure (`/proc/pressure/cpu` some avg10) just before and \
             after each run are shown too, but they count the run's own client and servers \
             (a closed-loop run keeps a 2-core machine's load near 2), so they do not decide.",
            report.environment.cores,
            match report.settings.busy_other_work {
                Some(t) => format!("{:.0} %", t * 100.0),
                None => "the threshold of the servelab that took it (this report predates \
                         recording it; 15–20 %)"
                    .to_string(),
            }
        )),
        Block::Table(t),
    ]
}

fn noise_row(r: &HttpRow, n: &[RunNoise]) -> [String; 7] {
    let range = |f: fn(&RunNoise) -> f64| {
        let lo = n.iter().map(f).fold(f64::INFINITY, f64::min);
        let hi = n.iter().map(f).fold(0.0, f64::max);
        format!("{lo:.2}–{hi:.2}")
    };
    let max = |v: &mut dyn Iterator<Item = f64>| {
        v.fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    let pressure = max(&mut n
        .iter()
        .filter_map(|x| x.after.cpu_pressure_avg10.or(x.before.cpu_pressure_avg10)));
    let other = max(&mut n.iter().filter_map(|x| x.other_work));
    [
        r.workload.clone(),
        r.scenario.clone(),
        other.map_or("n/a".into(), |w| format!("{:.1}", w * 100.0)),
        range(|x| x.before.load1),
        range(|x| x.after.load1),
        pressure.map_or("n/a".into(), |p| format!("{p:.1}")),
        format!("{}/{}", n.iter().filter(|x| x.busy).count(), n.len()),
    ]
}

fn checks(report: &Report) -> Vec<Block> {
    if report.flags.is_empty() {
        return Vec::new();
    }
    vec![
        Block::h2("Checks that failed"),
        Block::List(report.flags.iter().map(|f| format!("⚠ {f}")).collect()),
    ]
}

fn reading_the_rows(report: &Report) -> Vec<Block> {
    if !report.http.iter().any(|r| r.scenario.starts_with("A (NFS")) {
        return Vec::new();
    }
    let ttl = report.settings.nfs_cache_ms;
    vec![Block::text(if ttl == 0 {
        "Reading the rows: httpd's NFS cache was off (`--nfs-cache-ms 0`), so in A every \
         request goes to the NFS server (LOOKUP, GETATTR, READ) while B opens, stats and \
         reads local disk: the small-file rows show the per-request cost of the NFS hop."
            .to_string()
    } else {
        format!(
            "Reading the rows: httpd's NFS backend reuses looked-up handles, attributes and \
             files up to 64 KiB for {ttl} ms (`--nfs-cache-ms`, like the kernel NFS \
             client's attribute cache), so in A a hot small file is served from memory \
             while B opens, stats and reads it on every request; large files always cross \
             NFS. The cost of the NFS hop shows in the large-file rows and the tables \
             below; `--nfs-cache-ms 0` shows it per small request too."
        )
    })]
}

fn server_phases(report: &Report) -> Vec<Block> {
    if report.server_phases.is_empty() {
        return Vec::new();
    }
    let mut t = Table::new([
        "Scenario",
        "Workload",
        "Phase",
        "Count",
        "Mean ms",
        "Median ms",
        "p99 ms",
    ])
    .left(3);
    for p in &report.server_phases {
        t.row([
            p.scenario.clone(),
            p.workload.clone(),
            p.phase.clone(),
            p.count.to_string(),
            format!("{:.3}", p.mean_ms),
            format!("{:.3}", p.p50_ms),
            format!("{:.3}", p.p99_ms),
        ]);
    }
    vec![
        Block::h2("Where the time goes (server side, per request)"),
        Block::text(
            "`meta` = open/stat (or NFS LOOKUP+GETATTR), `read` = local read (or NFS READ), \
             `send` = writing to the socket; measured by httpd to the last body byte.",
        ),
        Block::Table(t),
    ]
}

fn nfs(report: &Report) -> Vec<Block> {
    if report.nfs.is_empty() {
        return Vec::new();
    }
    let mut t = Table::new([
        "Workload",
        "Server",
        "Clients",
        "Ops/s (spread)",
        "MB/s",
        "Mean ms",
        "p99 ms",
        "Failed",
    ])
    .left(2);
    for n in &report.nfs {
        t.row([
            n.workload.clone(),
            n.server.clone(),
            n.clients.to_string(),
            format!("{:.0} ({:.0}–{:.0})", n.ops_per_sec, n.ops_min, n.ops_max),
            format!("{:.1}", n.bytes_per_sec / 1e6),
            format!("{:.3}", n.mean_ms),
            format!("{:.3}", n.p99_ms),
            n.failed.to_string(),
        ]);
    }
    let mut out = vec![
        Block::h2("NFS level (`servelab load nfs://`)"),
        Block::Table(t),
    ];
    let ratios = nfs_ratios(&report.nfs);
    if !ratios.is_empty() {
        out.push(Block::text(format!(
            "rustnfs / Ganesha, median ops/s, same client and protocol: {}. Rows marked (NFSv4.0) ran `nfs://…?version=4` against both servers' v4 pseudo-root.",
            ratios.join("; ")
        )));
    }
    out.extend(metadata_caveat(report).map(Block::Text));
    out
}

fn nfs_procedures(report: &Report) -> Vec<Block> {
    if report.nfs_procedures.is_empty() {
        return Vec::new();
    }
    let mut t = Table::new([
        "Workload",
        "Procedure",
        "Count",
        "Mean ms",
        "p99 ms",
        "Errors",
    ])
    .left(2);
    for p in &report.nfs_procedures {
        t.row([
            p.workload.clone(),
            p.procedure.clone(),
            p.count.to_string(),
            format!("{:.3}", p.mean_ms),
            format!("{:.3}", p.p99_ms),
            p.errors.to_string(),
        ]);
    }
    vec![
        Block::h3("rustnfs procedure latencies (server side)"),
        Block::Table(t),
    ]
}

fn tcp(report: &Report) -> Vec<Block> {
    if report.tcp.is_empty() {
        return Vec::new();
    }
    let mut t = Table::new(["Path", "Streams", "Gbit/s (spread)", "Of the link's rate"]);
    for r in &report.tcp {
        t.row([
            r.path.clone(),
            r.streams.to_string(),
            format!(
                "{:.2} ({:.2}–{:.2})",
                r.bits_per_sec / 1e9,
                r.bits_min / 1e9,
                r.bits_max / 1e9
            ),
            r.expected_bits_per_sec.map_or("—".into(), |e| {
                format!("{:.0} %", r.bits_per_sec / e * 100.0)
            }),
        ]);
    }
    vec![
        Block::h2("Network ceiling (raw TCP, `servelab load tcp://`)"),
        Block::Table(t),
    ]
}

fn same_bytes(report: &Report) -> Vec<Block> {
    if report.byte_checks.is_empty() {
        return Vec::new();
    }
    let items = report
        .byte_checks
        .iter()
        .map(|c| {
            let mark = if c.identical_to_b {
                "identical to B"
            } else {
                "DIFFERS from B"
            };
            format!("{} `{}`: {mark} ({})", c.scenario, c.file, c.detail)
        })
        .collect();
    vec![Block::h2("Same bytes?"), Block::List(items)]
}

fn not_measured(report: &Report) -> Vec<Block> {
    if report.skipped.is_empty() && report.failures.is_empty() {
        return Vec::new();
    }
    let skipped = report
        .skipped
        .iter()
        .map(|s| format!("**{}** skipped: {}", s.scenario, s.reason));
    let failed = report
        .failures
        .iter()
        .map(|f| format!("**{}** failed on `{}`: {}", f.scenario, f.workload, f.error));
    vec![
        Block::h2("Not measured"),
        Block::List(skipped.chain(failed).collect()),
    ]
}

fn environment(report: &Report) -> Vec<Block> {
    let env = &report.environment;
    let mut t = Table::new(["", ""]).left(2);
    t.row(["Host".to_string(), env.hostname.clone()]);
    t.row([
        "CPU".to_string(),
        format!("{} ({} cores)", env.cpu_model, env.cores),
    ]);
    t.row([
        "Memory".to_string(),
        format!("{:.1} GiB", env.memory_bytes as f64 / (1u64 << 30) as f64),
    ]);
    t.row([
        "OS / kernel".to_string(),
        format!("{} / {}", env.os, env.kernel),
    ]);
    t.row(["servelab".to_string(), env.servelab_version.clone()]);
    for (tool, version) in &env.tools {
        t.row([tool.clone(), version.replace('|', "/")]);
    }
    t.row(["Page cache".to_string(), env.cache_state.clone()]);
    dataset_rows(report, &mut t);
    vec![
        Block::h2("Environment"),
        Block::Table(t),
        Block::text(
            "All traffic is on loopback unless an emulated link is named: \
             loopback has no wire, so A vs B differences here are the cost of the NFS hop itself \
             (protocol, copies, round trips), not of a network.",
        ),
    ]
}

/// The environment table's rows about the dataset, the link and the client.
fn dataset_rows(report: &Report, t: &mut Table) {
    let ds = &report.dataset;
    t.row([
        "Dataset".to_string(),
        format!(
            "{} (`{}` {} B, `{}` {} B, {} small files{})",
            ds.root.display(),
            ds.large_file,
            ds.large_bytes,
            ds.small_file,
            ds.small_bytes,
            ds.small_set_files,
            ds.seed.map(|s| format!(", seed {s}")).unwrap_or_default()
        ),
    ]);
    if let Some(fs) = &ds.file_system {
        t.row(["Dataset's file system".to_string(), fs.describe()]);
    }
    if let Some(link) = &report.settings.link {
        t.row([
            "Emulated link (A's NFS traffic)".to_string(),
            format!(
                "{link} ({})",
                report.link_path.as_deref().unwrap_or("userspace relay")
            ),
        ]);
        if let Some(control) = &report.control_path {
            t.row(["Its unshaped control".to_string(), control.clone()]);
        }
    }
    if let Some(n) = report.settings.client_threads {
        t.row(["servelab load threads".to_string(), n.to_string()]);
    }
}

/// The heading of a workload's HTTP section (without `## `): the plots of that workload
/// name it, so report.html puts them beside its table.
pub fn http_heading(report: &Report, workload: &str) -> String {
    format!("HTTP: {}", workload_title(report, workload))
}

fn workload_title(report: &Report, workload: &str) -> String {
    let s = &report.settings;
    let d = &report.dataset;
    match workload {
        "large" => format!(
            "`{}` ({:.1} MiB), {} requests, {} concurrent, new connection per request (as `ab -n {} -c {}`)",
            d.large_file,
            d.large_bytes as f64 / (1u64 << 20) as f64,
            s.large_requests,
            s.large_concurrency,
            s.large_requests,
            s.large_concurrency
        ),
        "small" => format!(
            "`{}` ({} B), keep-alive, {} connections, {} s per run",
            d.small_file, d.small_bytes, s.small_concurrency, s.small_seconds
        ),
        other => other.to_string(),
    }
}

fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// Why the metadata rows may measure the file system more than the servers: the
/// dataset is on ext4 without a journal (see `lab::fsinfo`).
fn metadata_caveat(report: &Report) -> Option<String> {
    let fs = report.dataset.file_system.as_ref()?;
    if !fs.creates_skip_recent_deletions() || !report.nfs.iter().any(|n| n.workload == "metadata") {
        return None;
    }
    Some(format!(
        "**The metadata rows measure the file system as much as the servers.** The dataset \
         is on {}. Without a journal, ext4 makes every create skip the inodes freed in \
         the last 60 s or more (`recently_deleted` in its inode allocator), so the mix's \
         CREATEs get slower the longer it runs, for whichever server runs then; the \
         rows' spread, and rustnfs's CREATE latency beside its REMOVE's below, show it. \
         To compare the servers' own metadata work, put the generated dataset on tmpfs \
         (`TMPDIR=/dev/shm servelab compare`) or a journalled file system, or pass \
         `--dataset DIR` there (measured: `crates/rustnfs/bench/RESULTS.md`).",
        fs.describe()
    ))
}

/// "read 1.85, read (NFSv4.0) 1.40, …": each rustnfs row's median ops/s over Ganesha's in
/// the same workload and protocol.
fn nfs_ratios(rows: &[NfsRow]) -> Vec<String> {
    rows.iter()
        .filter_map(|r| {
            let protocol = r.server.strip_prefix("rustnfs")?;
            let g = rows.iter().find(|g| {
                g.workload == r.workload && g.server.strip_prefix("ganesha") == Some(protocol)
            })?;
            (g.ops_per_sec > 0.0).then(|| {
                format!(
                    "{}{protocol} {:.2}",
                    r.workload,
                    r.ops_per_sec / g.ops_per_sec
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::model::NfsRow;
    use super::*;

    fn row(workload: &str, server: &str, ops: f64) -> NfsRow {
        NfsRow {
            workload: workload.into(),
            server: server.into(),
            clients: 4,
            ops_per_sec: ops,
            ops_min: ops,
            ops_max: ops,
            bytes_per_sec: 0.0,
            mean_ms: 0.0,
            p99_ms: 0.0,
            failed: 0,
        }
    }

    /// Each rustnfs row against Ganesha's of the same workload and protocol, never across
    /// protocols; a row without its Ganesha counterpart has no ratio.
    #[test]
    fn nfs_ratios_pair_the_same_workload_and_protocol() {
        let rows = [
            row("read", "rustnfs", 300.0),
            row("read", "rustnfs (NFSv4.0)", 140.0),
            row("read", "ganesha", 200.0),
            row("read", "ganesha (NFSv4.0)", 100.0),
            row("metadata", "rustnfs (NFSv4.0)", 50.0),
        ];
        assert_eq!(
            nfs_ratios(&rows),
            ["read 1.50", "read (NFSv4.0) 1.40"].map(String::from)
        );
    }

    /// The committed compare run (benches/results/2026-12-02-compare-v4) had its dataset
    /// on ext4 without a journal (recorded since): its metadata rows get the caveat, the
    /// same run on a journalled ext4 or on tmpfs does not, and neither does a run without
    /// metadata rows.
    #[test]
    fn metadata_rows_on_ext4_without_a_journal_are_explained() {
        let mut report: Report = serde_json::from_str(include_str!(
            "../../../../benches/results/2026-12-02-compare-v4/report.json"
        ))
        .unwrap();
        assert!(
            report.dataset.file_system.is_none(),
            "written before it was recorded"
        );
        assert!(!render(&report).contains("measure the file system"));
        let on = |kind: &str, journal| lab::fsinfo::FileSystem {
            kind: kind.into(),
            source: "/dev/vda".into(),
            journal,
        };
        report.dataset.file_system = Some(on("ext4", Some(false)));
        let md = render(&report);
        assert!(md.contains("| Dataset's file system | ext4 (/dev/vda, no journal) |"));
        let caveat = md
            .lines()
            .find(|l| l.contains("measure the file system as much as the servers"))
            .expect("the caveat");
        assert!(caveat.contains("ext4 (/dev/vda, no journal)"), "{caveat}");
        for fs in [on("ext4", Some(true)), on("tmpfs", None)] {
            report.dataset.file_system = Some(fs);
            assert!(!render(&report).contains("measure the file system"));
        }
        report.dataset.file_system = Some(on("ext4", Some(false)));
        report.nfs.retain(|n| n.workload != "metadata");
        assert!(!render(&report).contains("measure the file system"));
    }

    /// The committed default run (benches/results/2026-12-02-compare-v4) renders from
    /// its report.json to its report.md line for line, except the lines that print an
    /// interval: they were written when every interval was labelled 95 %, and now carry
    /// the confidence their repeat count gives (`stats::coverage`). Nothing else moved.
    /// The byte-for-byte check is on the run taken since,
    /// [`the_committed_answer_run_re_renders_byte_for_byte`].
    #[test]
    fn the_older_default_run_re_renders_but_for_its_interval_labels() {
        let report: Report = serde_json::from_str(include_str!(
            "../../../../benches/results/2026-12-02-compare-v4/report.json"
        ))
        .unwrap();
        let then = include_str!("../../../../benches/results/2026-12-02-compare-v4/report.md");
        let now = render(&report);
        assert_eq!(then.lines().count(), now.lines().count());
        let mut changed = 0;
        for (old, new) in then.lines().zip(now.lines()) {
            if old != new {
                changed += 1;
                assert!(
                    old.contains("95 %")
                        || old.contains("no measurable difference")
                        || interval_cell(old),
                    "a line without an interval changed:\n{old}\n{new}"
                );
            }
        }
        assert!(changed > 10, "{changed}");
    }

    /// The committed default run (benches/results/2026-12-03-answer-explained) renders
    /// from its report.json to its report.md byte for byte, and its answer recomputed
    /// from its rows (what `servelab report DIR` does) is the one it was written with.
    #[test]
    fn the_committed_answer_run_re_renders_byte_for_byte() {
        let mut report: Report = serde_json::from_str(include_str!(
            "../../../../benches/results/2026-12-03-answer-explained/report.json"
        ))
        .unwrap();
        let md = include_str!("../../../../benches/results/2026-12-03-answer-explained/report.md");
        assert_eq!(render(&report), md);
        let written = report.answer.clone();
        report.answer = super::super::answer::compute(&report);
        assert_eq!(report.answer, written);
        assert_eq!(render(&report), md);
    }

    /// A table row with a ratio interval cell such as `4.39 (3.40–5.20)`.
    fn interval_cell(line: &str) -> bool {
        line.starts_with('|')
            && line.split('|').any(|c| {
                let c = c.trim();
                c.contains(" (") && c.contains('–') && c.ends_with(')') || c.contains(" to ")
            })
    }
}
