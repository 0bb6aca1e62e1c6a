//! Renders a [`Report`] as the Markdown a student can paste into a report.

use std::fmt::Write as _;

use super::model::{HttpRow, Report};

/// The scenario every Δ% is computed against.
pub const REFERENCE_SCENARIO: &str = "B (local)";

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let env = &report.environment;
    let _ = writeln!(
        out,
        "# servelab compare — {} — {}\n",
        env.hostname, env.started_utc
    );
    let _ = writeln!(
        out,
        "Scenario **A** serves files that live on an NFS export: `httpd --nfs` reads them \
         through its built-in NFSv3 client from `rustnfs`. Scenario **B** serves the same \
         files from local disk: `httpd --root`. Baselines serve the same files the same way. \
         Every figure is the median of {} runs (spread = lowest–highest); Δ% is against B; \
         server peak RSS is the HTTP server's process tree (workers included) during the runs.\n",
        report.settings.repeat
    );

    for workload in distinct(report.http.iter().map(|r| r.workload.as_str())) {
        let rows: Vec<&HttpRow> = report
            .http
            .iter()
            .filter(|r| r.workload == workload)
            .collect();
        let _ = writeln!(out, "## HTTP: {}\n", workload_title(report, workload));
        let reference = rows
            .iter()
            .find(|r| r.scenario == REFERENCE_SCENARIO)
            .map(|r| r.median.requests_per_sec);
        let _ = writeln!(
            out,
            "| Scenario | Requests/s (spread) | Transfer rate MB/s | Mean ms | Median ms | p99 ms | Longest ms | Failed | Non-2xx | Δ% req/s vs B | Server peak RSS MB |"
        );
        let _ = writeln!(
            out,
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for r in &rows {
            let m = &r.median;
            let delta = match reference {
                Some(b) if b > 0.0 && r.scenario != REFERENCE_SCENARIO => {
                    format!("{:+.1}%", (m.requests_per_sec - b) / b * 100.0)
                }
                Some(_) if r.scenario == REFERENCE_SCENARIO => "—".into(),
                _ => "n/a".into(),
            };
            let _ = writeln!(
                out,
                "| {} | {:.1} ({:.1}–{:.1}) | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} |",
                r.scenario,
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
        let _ = writeln!(out, "| Path | Streams | Gbit/s (spread) |");
        let _ = writeln!(out, "|---|---:|---:|");
        for t in &report.tcp {
            let _ = writeln!(
                out,
                "| {} | {} | {:.2} ({:.2}–{:.2}) |",
                t.path,
                t.streams,
                t.bits_per_sec / 1e9,
                t.bits_min / 1e9,
                t.bits_max / 1e9
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
    if let Some(link) = &report.settings.link {
        let _ = writeln!(out, "| Emulated link (A's NFS traffic) | {link} |");
    }
    let _ = writeln!(
        out,
        "\nAll traffic is on loopback unless an emulated link is named: \
        loopback has no wire, so A vs B differences here are the cost of the NFS hop itself \
        (protocol, copies, round trips), not of a network."
    );
    out
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
