//! The HTTP phases: every scenario serves the dataset's bytes, warms up, then every
//! workload runs on every scenario in every repeat — our load generator, then the
//! reference client (`ab` / `wrk`) in the same slot — with the server's cost, the
//! machine's noise and (for ours) the server's phase timings recorded per run.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context as _;
use loadgen::Schedule;

use super::{RunContext, drop_caches};
use crate::compare::answer;
use crate::compare::crosscheck::Reference;
use crate::compare::model::{
    A_SCENARIO, ByteCheck, CLIENT_CACHE_SCENARIO, Cost, REFERENCE_SCENARIO, Skipped,
};
use crate::compare::rows::{self, HttpRuns};
use crate::experiment::interrupt::Interrupted;
use crate::experiment::load::{Load, interleaved, rotation};
use crate::experiment::probe::Probe;
use crate::experiment::stack::Stack;
use crate::stats::coverage;

/// One HTTP workload: what every scenario is asked to serve.
pub(super) struct HttpWorkload {
    name: &'static str,
    path: String,
    schedule: Schedule,
    concurrency: usize,
    keepalive: bool,
    /// The reference client for the same workload, when installed and wanted.
    reference: Option<Reference>,
    /// How long one slot (ours and the reference) is expected to take.
    pub(super) expected: Duration,
}

impl RunContext<'_> {
    /// Every scenario must serve the same bytes as the file on disk.
    pub(super) fn check_bytes(&mut self, scenarios: &[Stack]) -> anyhow::Result<()> {
        let info = &self.data.info;
        for file in [&info.large_file, &info.small_file] {
            let on_disk = std::fs::read(info.root.join(file))
                .with_context(|| format!("cannot read {file}"))?;
            for sc in scenarios {
                let got = lab::http::get(sc.addr, &format!("/{file}"), Duration::from_secs(60));
                let (identical, detail) = match got {
                    Ok((200, body)) if body == on_disk => (true, format!("{} bytes", body.len())),
                    Ok((200, body)) => (false, format!("{} bytes, content differs", body.len())),
                    Ok((status, _)) => (false, format!("HTTP {status}")),
                    Err(e) => (false, service::Chain(&e).to_string()),
                };
                self.report.byte_checks.push(ByteCheck {
                    scenario: sc.name.clone(),
                    file: file.clone(),
                    identical_to_b: identical,
                    detail,
                });
            }
        }
        Ok(())
    }

    pub(super) fn warm_up(&mut self, scenarios: &[Stack]) -> Result<(), Interrupted> {
        let expected = Duration::from_secs_f64(2.0 * scenarios.len() as f64);
        if !self.opts.warmup {
            return self.progress.step(expected, "no warm-up (--no-warmup)");
        }
        let what = format!("warming up {} scenarios", scenarios.len());
        self.progress.step(expected, what)?;
        let info = &self.data.info;
        for sc in scenarios {
            super::restart::warm(sc, &info.large_file, &info.small_file);
        }
        Ok(())
    }

    pub(super) fn workloads(&self) -> Vec<HttpWorkload> {
        let o = self.opts;
        let with = |r: Reference| (o.cross_check && r.available()).then_some(r);
        let large_ref = with(Reference::Ab {
            requests: o.large_requests,
            concurrency: o.large_concurrency,
        });
        let small_ref = with(Reference::Wrk {
            connections: o.small_concurrency,
            seconds: o.small_seconds,
        });
        vec![
            HttpWorkload {
                name: "large",
                path: format!("/{}", self.data.info.large_file),
                schedule: Schedule::Count(o.large_requests),
                concurrency: o.large_concurrency,
                keepalive: false,
                expected: Duration::from_secs_f64(if large_ref.is_some() { 4.0 } else { 2.0 }),
                reference: large_ref,
            },
            HttpWorkload {
                name: "small",
                path: format!("/{}", self.data.info.small_file),
                schedule: Schedule::Duration(Duration::from_secs_f64(o.small_seconds)),
                concurrency: o.small_concurrency,
                keepalive: true,
                expected: Duration::from_secs_f64(
                    o.small_seconds
                        + if small_ref.is_some() {
                            o.small_seconds.ceil().max(1.0)
                        } else {
                            0.0
                        },
                ),
                reference: small_ref,
            },
        ]
    }

    /// Every workload on every scenario, `repeat` times, in rotating order.
    pub(super) fn measure_http(&mut self, scenarios: &mut [Stack]) -> Result<(), Interrupted> {
        let workloads = self.workloads();
        for w in &workloads {
            if w.reference.is_none() && self.opts.cross_check {
                let tool = if w.keepalive { "wrk" } else { "ab" };
                self.report.skipped.push(Skipped {
                    scenario: format!("{tool} cross-check of the {} workload", w.name),
                    reason: format!("{tool} is not installed"),
                });
            }
        }
        let mut acc: BTreeMap<(usize, usize), HttpRuns> = BTreeMap::new();
        let numbered: Vec<(usize, &HttpWorkload)> = workloads.iter().enumerate().collect();
        let mut restarted = 0;
        for (rep, &(wi, w)) in interleaved(self.opts.repeat, &numbered) {
            if rep > restarted {
                self.restart_ours(scenarios);
                restarted = rep;
            }
            for si in rotation(rep, scenarios.len()) {
                let entry = acc.entry((wi, si)).or_default();
                self.measure_one(rep, w, &scenarios[si], entry)?;
            }
        }
        self.narrow_headline(&workloads, scenarios, &mut acc)?;
        for ((wi, si), a) in acc {
            let (w, sc) = (&workloads[wi], &scenarios[si]);
            let row = rows::http_row(
                w.name,
                &sc.name,
                &sc.description,
                w.reference.as_ref(),
                a,
                self.opts.keep_busy,
            );
            if let Some((row, phases)) = row {
                self.report.http.push(row);
                self.report.server_phases.extend(phases);
            }
        }
        // Rows in scenario order within each workload, B first.
        self.report.http.sort_by_key(|r| {
            (
                workloads.iter().position(|w| w.name == r.workload),
                scenarios.iter().position(|s| s.name == r.scenario),
            )
        });
        Ok(())
    }

    /// While the interval of A's CPU per request against B's (large file), or the
    /// client-cache row's, is wider than ±10 % or drawn from too few runs to be a 95 %
    /// interval ([`coverage::CONFIDENCE`]: 6 a side), one more round of those rows on fresh
    /// servers, up to `--max-repeat` rounds in all. The other rows keep `--repeat` runs:
    /// the headline is what has to be narrow and sure. The rounds not needed leave the
    /// plan.
    fn narrow_headline(
        &mut self,
        workloads: &[HttpWorkload],
        scenarios: &mut [Stack],
        acc: &mut BTreeMap<(usize, usize), HttpRuns>,
    ) -> Result<(), Interrupted> {
        let rounds = self.opts.repeat..self.opts.max_repeat;
        let headline = headline_scenarios(scenarios);
        let Some(wi) = workloads.iter().position(|w| w.name == "large") else {
            let large = workloads.first().map_or(Duration::ZERO, |w| w.expected);
            self.progress.unplan(rounds.len() * headline.len(), large);
            return Ok(());
        };
        if headline.len() < 2 {
            self.progress
                .unplan(rounds.len() * headline.len(), workloads[wi].expected);
            return Ok(());
        }
        for rep in rounds.clone() {
            let runs = |si: usize| acc.get(&(wi, si)).map_or(&[][..], |r| r.runs.as_slice());
            let unsettled = headline[1..].iter().any(|&si| {
                answer::headline(runs(si), runs(headline[0])).is_none_or(|c| {
                    c.ci.relative_half_width(c.estimate) > answer::NARROW_ENOUGH
                        || c.confidence() < coverage::FULL
                })
            });
            if !unsettled {
                let left = rounds.end - rep;
                self.progress
                    .unplan(left * headline.len(), workloads[wi].expected);
                break;
            }
            crate::experiment::terminal::note(format!(
                "servelab compare: the headline's interval is wider than ±10 % or below 95 %: round {} of at most {}",
                rep + 1,
                self.opts.max_repeat
            ));
            self.restart_ours(scenarios);
            for k in rotation(rep, headline.len()) {
                let si = headline[k];
                let entry = acc.entry((wi, si)).or_default();
                self.measure_one(rep, &workloads[wi], &scenarios[si], entry)?;
            }
        }
        Ok(())
    }

    /// One slot: our load generator, then the reference client, on one scenario.
    fn measure_one(
        &mut self,
        rep: usize,
        w: &HttpWorkload,
        sc: &Stack,
        acc: &mut HttpRuns,
    ) -> Result<(), Interrupted> {
        let what = format!(
            "run {}/{} {:>5} {}",
            rep + 1,
            self.opts.repeat.max(rep + 1),
            w.name,
            sc.name
        );
        self.progress.step(w.expected, what)?;
        if self.cold {
            let _ = drop_caches();
        }
        let url = sc.url(&w.path);
        let before = sc.http_metrics.as_ref().map(|m| m.scrape());
        let nfs_before = sc.nfs_metrics.as_ref().and_then(|m| m.scrape().ok());
        let probe = Probe::start(&sc.parts, self.opts.cpus.as_ref());
        let result = Load::new(&url, w.schedule, w.concurrency)
            .keepalive(w.keepalive)
            .threads(self.opts.client_threads)
            .run();
        let seen = probe.finish();
        match result {
            Ok(r) => {
                let cost = Cost::from_processes(&seen.usages, r.requests, r.body_bytes);
                acc.push(&r, cost, seen.noise, seen.client);
            }
            Err(e) => self.fail(&sc.name, w.name, e),
        }
        if let (Some(Ok(before)), Some(m)) = (before, &sc.http_metrics)
            && let Ok(delta) = m.scrape_since(&before)
        {
            let _ = acc.phases.merge(&delta);
        }
        if let (Some(before), Some(nfs)) = (nfs_before, &sc.nfs_metrics) {
            let key = format!("HTTP {} via {}", w.name, sc.name);
            Self::add_nfs_phases(&mut self.nfs_phases, key, nfs, &before);
        }
        if let Some(reference) = &w.reference {
            match reference.run(&url) {
                Ok(m) => acc.reference.push(m),
                Err(e) => self.fail(&sc.name, &format!("{} ({})", w.name, reference.tool()), e),
            }
        }
        Ok(())
    }
}

/// The rows the headline rounds repeat: B first, then A and the client-cache row, as
/// far as they run.
pub(super) fn headline_scenarios(scenarios: &[Stack]) -> Vec<usize> {
    let Some(b) = scenarios.iter().position(|s| s.name == REFERENCE_SCENARIO) else {
        return Vec::new();
    };
    let mut out = vec![b];
    out.extend(
        [A_SCENARIO, CLIENT_CACHE_SCENARIO]
            .iter()
            .filter_map(|n| scenarios.iter().position(|s| s.name == *n)),
    );
    out
}
