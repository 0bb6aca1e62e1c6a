//! Renders a [`Report`] as the Markdown a student can paste into a report.

use std::fmt::Write as _;

use super::model::{HttpRow, Report};
use crate::table::Table;

/// The scenario every Δ% is computed against.
pub const REFERENCE_SCENARIO: &str = "B (local)";

/// The sections that come first: the computed answer, the service demand behind it and
/// the latency at equal offered load.
pub fn answer_sections(report: &Report) -> String {
    let a = &report.answer;
    let mut out = String::from("## The answer\n\n");
    for s in &a.sentences {
        let _ = writeln!(out, "- {s}");
    }
    out.push('\n');
    if !a.service_demand.is_empty() {
        let _ = writeln!(
            out,
            "## Service demand: CPU per request of every serving process\n\n\
             CPU seconds (user + system from `/proc/PID/stat`) of each serving process during \
             each run, divided by the requests it served: the figure that does not depend on who \
             else uses the machine (netperf's service demand). Median over the runs that count \
             (spread = lowest–highest); capacity per core = 1 / CPU per request. Ratios against B \
             with their bootstrap 95 % interval; one that includes 1 is no measurable difference.\n"
        );
        let mut t = Table::new([
            "Workload",
            "Scenario",
            "CPU ms/request (spread)",
            "By process, ms/request",
            "× B (95 % CI)",
            "Capacity per core, req/s",
            "CPU s/GB",
            "Peak RSS MB (by process)",
            "Runs",
            "Client-bound",
        ]);
        for d in &a.service_demand {
            let ratio = a
                .ratios
                .iter()
                .find(|r| r.workload == d.workload && r.scenario == d.scenario)
                .map(|r| {
                    let c = &r.cpu_per_request;
                    let verdict = if c.significant {
                        ""
                    } else {
                        ", no measurable difference"
                    };
                    format!(
                        "{:.2} ({:.2}–{:.2}{verdict})",
                        c.estimate, c.ci.low, c.ci.high
                    )
                })
                .unwrap_or_else(|| {
                    if d.scenario == REFERENCE_SCENARIO {
                        "—".into()
                    } else {
                        "n/a".into()
                    }
                });
            t.row([
                d.workload.clone(),
                d.scenario.clone(),
                format!(
                    "{:.3} ({:.3}–{:.3})",
                    d.cpu_ms_per_request, d.cpu_ms_min, d.cpu_ms_max
                ),
                d.processes
                    .iter()
                    .map(|p| format!("{} {:.3}", p.name, p.cpu_ms_per_request))
                    .collect::<Vec<_>>()
                    .join(" + "),
                ratio,
                format!("{:.0}", d.capacity_per_core),
                format!("{:.2}", d.cpu_s_per_gb),
                d.processes
                    .iter()
                    .map(|p| format!("{} {:.1}", p.name, p.peak_rss_bytes as f64 / 1e6))
                    .collect::<Vec<_>>()
                    .join(" + "),
                d.runs_used.to_string(),
                if d.client_bound {
                    "yes".into()
                } else {
                    "no".into()
                },
            ]);
        }
        out.push_str(&t.to_markdown());
        out.push('\n');
    }
    if !report.equal_load.is_empty() {
        let _ = writeln!(
            out,
            "## Latency at equal offered load\n\n\
             A and B driven open-loop at the same fixed rates on the large file (shares of the \
             lower of their closed-loop capacities), {} s per point, each request timed from its \
             intended start; medians over the repeats. Δ p50 = A − B with its bootstrap 95 % \
             interval.\n",
            report.settings.equal_load_seconds
        );
        let mut t = Table::new([
            "Offered req/s (share)",
            "Scenario",
            "Achieved req/s",
            "p50 ms",
            "p99 ms",
            "Δ p50 vs B ms (95 % CI)",
            "Runs",
            "Failed",
        ]);
        for r in &report.equal_load {
            t.row([
                format!(
                    "{:.1} ({:.0} %)",
                    r.offered_per_sec,
                    r.fraction_of_capacity * 100.0
                ),
                r.scenario.clone(),
                format!("{:.1}", r.achieved_per_sec),
                format!("{:.2}", r.p50_ms),
                format!("{:.2}", r.p99_ms),
                r.p50_minus_b_ms.map_or("—".into(), |d| {
                    let verdict = if d.significant {
                        ""
                    } else {
                        ", no measurable difference"
                    };
                    format!(
                        "{:+.2} ({:+.2} to {:+.2}{verdict})",
                        d.estimate, d.ci.low, d.ci.high
                    )
                }),
                r.runs_p50_ms.len().to_string(),
                r.failed.to_string(),
            ]);
        }
        out.push_str(&t.to_markdown());
        out.push('\n');
    }
    out
}

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let env = &report.environment;
    let _ = writeln!(
        out,
        "# servelab compare — {} — {}\n",
        env.hostname, env.started_utc
    );
    out.push_str(&answer_sections(report));
    let _ = writeln!(
        out,
        "## How it was measured\n\nScenario **A** serves files that live on an NFS export: `httpd --nfs` reads them \
         through its built-in NFSv3 client from `rustnfs`. Scenario **B** serves the same \
         files from local disk: `httpd --root`. Baselines serve the same files the same way. \
         Every figure is the median of {} runs (spread = lowest–highest); Δ% is against B; \
         server peak RSS is the HTTP server's process tree (workers included) during the runs.\n",
        report.settings.repeat
    );
    if let Some(p) = &report.pinning {
        let _ = writeln!(
            out,
            "CPUs: {}. A row marked **client-bound** had the client's CPUs at least {:.0} % busy \
             in most of its runs: its requests/s is a lower bound on the server's capacity, never \
             a finding about the server.\n",
            p.note,
            super::model::CLIENT_BOUND_BUSY * 100.0
        );
    }

    for workload in distinct(report.http.iter().map(|r| r.workload.as_str())) {
        let rows: Vec<&HttpRow> = report
            .http
            .iter()
            .filter(|r| r.workload == workload)
            .collect();
        let _ = writeln!(out, "## {}\n", http_heading(report, workload));
        let reference = rows
            .iter()
            .find(|r| r.scenario == REFERENCE_SCENARIO)
            .map(|r| r.median.requests_per_sec);
        let reference_tool = rows
            .iter()
            .find_map(|r| r.reference.as_ref().map(|x| x.tool.clone()));
        let ref_head = reference_tool
            .as_ref()
            .map(|t| format!(" {t} req/s | servelab ÷ {t} | {t} Δ% vs B |"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "| Scenario | Requests/s (spread) | Transfer rate MB/s | Mean ms | Median ms | p99 ms | Longest ms | Failed | Non-2xx | Δ% req/s vs B | Server peak RSS MB |{ref_head}"
        );
        let _ = writeln!(
            out,
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|{}",
            if reference_tool.is_some() {
                "---:|---:|---:|"
            } else {
                ""
            }
        );
        let b_ref = rows
            .iter()
            .find(|r| r.scenario == REFERENCE_SCENARIO)
            .and_then(|r| r.reference.as_ref())
            .map(|x| x.median_per_sec);
        for r in &rows {
            let m = &r.median;
            let delta = match reference {
                Some(b) if b > 0.0 && r.scenario != REFERENCE_SCENARIO => {
                    format!("{:+.1}%", (m.requests_per_sec - b) / b * 100.0)
                }
                Some(_) if r.scenario == REFERENCE_SCENARIO => "—".into(),
                _ => "n/a".into(),
            };
            let ref_cells = match (&reference_tool, &r.reference) {
                (None, _) => String::new(),
                (Some(_), None) => " n/a | n/a | n/a |".into(),
                (Some(_), Some(x)) => {
                    let d = match b_ref {
                        Some(b) if b > 0.0 && r.scenario != REFERENCE_SCENARIO => {
                            format!("{:+.1}%", (x.median_per_sec - b) / b * 100.0)
                        }
                        _ => "—".into(),
                    };
                    format!(" {:.1} | {:.2} | {d} |", x.median_per_sec, x.agreement)
                }
            };
            let _ = writeln!(
                out,
                "| {}{} | {:.1} ({:.1}–{:.1}) | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} |{ref_cells}",
                r.scenario,
                if r.client_bound {
                    " **(client-bound)**"
                } else {
                    ""
                },
                m.requests_per_sec,
                r.rps_min,
                r.rps_max,
                m.transfer_bytes_per_sec / 1e6,
                m.mean_ms,
                m.p50_ms,
                m.p99_ms,
                m.max_ms,
                m.failed,
                m.non_2xx,
                delta,
                r.server_peak_rss_bytes
                    .map_or("n/a".to_string(), |b| format!("{:.1}", b as f64 / 1e6))
            );
        }
        let _ = writeln!(out);
        if let Some(x) = rows.iter().find_map(|r| r.reference.as_ref()) {
            let _ = writeln!(
                out,
                "Cross-check: `{}` ran on the same URL right after `servelab load` in every slot \
                 (medians of runs; `servelab ÷ {}` = agreement). Percentiles above are servelab \
                 load's, to the last body byte.\n",
                x.command, x.tool
            );
            for r in &rows {
                if let Some(x) = &r.reference
                    && let Some(note) = &x.note
                {
                    let _ = writeln!(
                        out,
                        "- {}: servelab load and {} differ by {:+.0} % — {note} ({} CPU {:.2} s per {:.2} s run).",
                        r.scenario,
                        x.tool,
                        (x.agreement - 1.0) * 100.0,
                        x.tool,
                        x.median_client_cpu_s,
                        x.median_seconds
                    );
                }
            }
            let _ = writeln!(out);
        }
    }

    if report.http.iter().any(|r| r.cost.is_some()) {
        let _ = writeln!(
            out,
            "## What each scenario costs (server side, median run)\n"
        );
        let _ = writeln!(
            out,
            "Every serving process of the scenario — the HTTP server's process tree (workers \
             included) and the NFS server behind it (rustnfs for A, Ganesha for its row) — \
             sampled from `/proc` every 50 ms during each run and summed (peak RSS: the sum of \
             each one's peak): resident memory, CPU seconds, CPU per request and per GB of \
             body served, context switches, open file descriptors. The split by process is in \
             the service-demand table above. Memory over time: `memory-WORKLOAD.svg`.\n"
        );
        let _ = writeln!(
            out,
            "| Workload | Scenario | Peak RSS MB | Mean RSS MB | CPU user s | CPU sys s | CPU µs/request | CPU s/GB | Ctx switches vol/invol | Peak open fds |"
        );
        let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in &report.http {
            if let Some(c) = &r.cost {
                let _ = writeln!(
                    out,
                    "| {} | {} | {:.1} | {:.1} | {:.3} | {:.3} | {:.1} | {:.2} | {}/{} | {} |",
                    r.workload,
                    r.scenario,
                    c.peak_rss_bytes as f64 / 1e6,
                    c.mean_rss_bytes as f64 / 1e6,
                    c.cpu_user_s,
                    c.cpu_system_s,
                    c.cpu_us_per_request,
                    c.cpu_s_per_gb,
                    c.voluntary_switches,
                    c.involuntary_switches,
                    c.peak_open_fds
                );
            }
        }
        let _ = writeln!(out);
    }

    if report
        .http
        .iter()
        .any(|r| r.runs.iter().any(|x| x.noise.is_some()))
    {
        let _ = writeln!(out, "## Noise (other work during each run)\n");
        let _ = writeln!(
            out,
            "*Other work*: the share of all CPU time ({} cores) during a run that went to \
             processes other than the client and the serving processes (`/proc/stat` minus \
             their `/proc/PID/stat`); a run is *busy* when it exceeded {}. The 1-minute \
             load average and CPU pressure (`/proc/pressure/cpu` some avg10) just before and \
             after each run are shown too, but they count the run's own client and servers \
             (a closed-loop run keeps a 2-core machine's load near 2), so they do not decide.\n",
            report.environment.cores,
            match report.settings.busy_other_work {
                Some(t) => format!("{:.0} %", t * 100.0),
                None => "the threshold of the servelab that took it (this report predates \
                         recording it; 15–20 %)"
                    .to_string(),
            }
        );
        let _ = writeln!(
            out,
            "| Workload | Scenario | Other work % (max) | Load before (min–max) | Load after (min–max) | CPU pressure % (max) | Busy runs |"
        );
        let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|");
        for r in &report.http {
            let n: Vec<_> = r.runs.iter().filter_map(|x| x.noise).collect();
            if n.is_empty() {
                continue;
            }
            let range = |f: fn(&super::model::RunNoise) -> f64| {
                let lo = n.iter().map(f).fold(f64::INFINITY, f64::min);
                let hi = n.iter().map(f).fold(0.0, f64::max);
                format!("{lo:.2}–{hi:.2}")
            };
            let pressure = n
                .iter()
                .filter_map(|x| x.after.cpu_pressure_avg10.or(x.before.cpu_pressure_avg10))
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
            let other = n
                .iter()
                .filter_map(|x| x.other_work)
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {}/{} |",
                r.workload,
                r.scenario,
                other.map_or("n/a".into(), |w| format!("{:.1}", w * 100.0)),
                range(|x| x.before.load1),
                range(|x| x.after.load1),
                pressure.map_or("n/a".into(), |p| format!("{p:.1}")),
                n.iter().filter(|x| x.busy).count(),
                n.len()
            );
        }
        let _ = writeln!(out);
    }

    if !report.flags.is_empty() {
        let _ = writeln!(out, "## Checks that failed\n");
        for f in &report.flags {
            let _ = writeln!(out, "- ⚠ {f}");
        }
        let _ = writeln!(out);
    }

    if report.http.iter().any(|r| r.scenario.starts_with("A (NFS")) {
        let ttl = report.settings.nfs_cache_ms;
        let text = if ttl == 0 {
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
        };
        let _ = writeln!(out, "{text}\n");
    }

    if !report.server_phases.is_empty() {
        let _ = writeln!(out, "## Where the time goes (server side, per request)\n");
        let _ = writeln!(
            out,
            "`meta` = open/stat (or NFS LOOKUP+GETATTR), `read` = local read (or NFS READ), \
             `send` = writing to the socket; measured by httpd to the last body byte.\n"
        );
        let _ = writeln!(
            out,
            "| Scenario | Workload | Phase | Count | Mean ms | Median ms | p99 ms |"
        );
        let _ = writeln!(out, "|---|---|---|---:|---:|---:|---:|");
        for p in &report.server_phases {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.3} | {:.3} | {:.3} |",
                p.scenario, p.workload, p.phase, p.count, p.mean_ms, p.p50_ms, p.p99_ms
            );
        }
        let _ = writeln!(out);
    }

    if !report.nfs.is_empty() {
        let _ = writeln!(out, "## NFS level (`servelab load nfs://`)\n");
        let _ = writeln!(
            out,
            "| Workload | Server | Clients | Ops/s (spread) | MB/s | Mean ms | p99 ms | Failed |"
        );
        let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|");
        for n in &report.nfs {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.0} ({:.0}–{:.0}) | {:.1} | {:.3} | {:.3} | {} |",
                n.workload,
                n.server,
                n.clients,
                n.ops_per_sec,
                n.ops_min,
                n.ops_max,
                n.bytes_per_sec / 1e6,
                n.mean_ms,
                n.p99_ms,
                n.failed
            );
        }
        let _ = writeln!(out);
        let ratios = nfs_ratios(&report.nfs);
        if !ratios.is_empty() {
            let _ = writeln!(
                out,
                "rustnfs / Ganesha, median ops/s, same client and protocol: {}. Rows marked (NFSv4.0) ran `nfs://…?version=4` against both servers' v4 pseudo-root.\n",
                ratios.join("; ")
            );
        }
        if let Some(caveat) = metadata_caveat(report) {
            let _ = writeln!(out, "{caveat}\n");
        }
    }

    if !report.nfs_procedures.is_empty() {
        let _ = writeln!(out, "### rustnfs procedure latencies (server side)\n");
        let _ = writeln!(
            out,
            "| Workload | Procedure | Count | Mean ms | p99 ms | Errors |"
        );
        let _ = writeln!(out, "|---|---|---:|---:|---:|---:|");
        for p in &report.nfs_procedures {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.3} | {:.3} | {} |",
                p.workload, p.procedure, p.count, p.mean_ms, p.p99_ms, p.errors
            );
        }
        let _ = writeln!(out);
    }

    if !report.tcp.is_empty() {
        let _ = writeln!(
            out,
            "## Network ceiling (raw TCP, `servelab load tcp://`)\n"
        );
        let _ = writeln!(
            out,
            "| Path | Streams | Gbit/s (spread) | Of the link's rate |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|");
        for t in &report.tcp {
            let _ = writeln!(
                out,
                "| {} | {} | {:.2} ({:.2}–{:.2}) | {} |",
                t.path,
                t.streams,
                t.bits_per_sec / 1e9,
                t.bits_min / 1e9,
                t.bits_max / 1e9,
                t.expected_bits_per_sec.map_or("—".into(), |r| format!(
                    "{:.0} %",
                    t.bits_per_sec / r * 100.0
                ))
            );
        }
        let _ = writeln!(out);
    }

    if !report.byte_checks.is_empty() {
        let _ = writeln!(out, "## Same bytes?\n");
        for c in &report.byte_checks {
            let mark = if c.identical_to_b {
                "identical to B"
            } else {
                "DIFFERS from B"
            };
            let _ = writeln!(out, "- {} `{}`: {mark} ({})", c.scenario, c.file, c.detail);
        }
        let _ = writeln!(out);
    }

    if !report.skipped.is_empty() || !report.failures.is_empty() {
        let _ = writeln!(out, "## Not measured\n");
        for s in &report.skipped {
            let _ = writeln!(out, "- **{}** skipped: {}", s.scenario, s.reason);
        }
        for f in &report.failures {
            let _ = writeln!(
                out,
                "- **{}** failed on `{}`: {}",
                f.scenario, f.workload, f.error
            );
        }
        let _ = writeln!(out);
    }

    let _ = writeln!(out, "## Environment\n");
    let _ = writeln!(out, "| | |\n|---|---|");
    let _ = writeln!(out, "| Host | {} |", env.hostname);
    let _ = writeln!(out, "| CPU | {} ({} cores) |", env.cpu_model, env.cores);
    let _ = writeln!(
        out,
        "| Memory | {:.1} GiB |",
        env.memory_bytes as f64 / (1u64 << 30) as f64
    );
    let _ = writeln!(out, "| OS / kernel | {} / {} |", env.os, env.kernel);
    let _ = writeln!(out, "| servelab | {} |", env.servelab_version);
    for (tool, version) in &env.tools {
        let _ = writeln!(out, "| {tool} | {} |", version.replace('|', "/"));
    }
    let _ = writeln!(out, "| Page cache | {} |", env.cache_state);
    let ds = &report.dataset;
    let _ = writeln!(
        out,
        "| Dataset | {} (`{}` {} B, `{}` {} B, {} small files{}) |",
        ds.root.display(),
        ds.large_file,
        ds.large_bytes,
        ds.small_file,
        ds.small_bytes,
        ds.small_set_files,
        ds.seed.map(|s| format!(", seed {s}")).unwrap_or_default()
    );
    if let Some(fs) = &ds.file_system {
        let _ = writeln!(out, "| Dataset's file system | {} |", fs.describe());
    }
    if let Some(link) = &report.settings.link {
        let _ = writeln!(
            out,
            "| Emulated link (A's NFS traffic) | {link} ({}) |",
            report.link_path.as_deref().unwrap_or("userspace relay")
        );
        if let Some(control) = &report.control_path {
            let _ = writeln!(out, "| Its unshaped control | {control} |");
        }
    }
    if let Some(t) = report.settings.client_threads {
        let _ = writeln!(out, "| servelab load threads | {t} |");
    }
    let _ = writeln!(
        out,
        "\nAll traffic is on loopback unless an emulated link is named: \
        loopback has no wire, so A vs B differences here are the cost of the NFS hop itself \
        (protocol, copies, round trips), not of a network."
    );
    out
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
fn nfs_ratios(rows: &[super::model::NfsRow]) -> Vec<String> {
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
}
