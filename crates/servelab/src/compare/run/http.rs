//! The HTTP phases: every scenario serves the dataset's bytes, warms up, then every
//! workload runs on every scenario in every repeat — our load generator, then the
//! reference client (`ab` / `wrk`) in the same slot — with the server's cost, the
//! machine's noise and (for ours) the server's phase timings recorded per run.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context as _;
use lab::affinity::CpuTimes;
use lab::environment::Noise;
use lab::sampler::{Sampler, Target};
use loadgen::Schedule;

use super::{RunContext, drop_caches};
use crate::compare::answer;
use crate::compare::crosscheck::Reference;
use crate::compare::model::{A_SCENARIO, REFERENCE_SCENARIO};
use crate::compare::model::{ByteCheck, CLIENT_BOUND_BUSY, ClientLoad, Cost, RunNoise, Skipped};
use crate::compare::options::CpuSplit;
use crate::compare::rows::{self, HttpRuns};
use crate::compare::scenarios::HttpScenario;
use crate::measure::{Load, interleave, rotation};

/// One HTTP workload: what every scenario is asked to serve.
struct HttpWorkload {
    name: &'static str,
    path: String,
    schedule: Schedule,
    concurrency: usize,
    keepalive: bool,
    /// The reference client for the same workload, when installed and wanted.
    reference: Option<Reference>,
}

impl RunContext<'_> {
    /// Every scenario must serve the same bytes as the file on disk.
    pub(super) fn check_bytes(&mut self, scenarios: &[HttpScenario]) -> anyhow::Result<()> {
        for file in [&self.info.large_file, &self.info.small_file] {
            let on_disk = std::fs::read(self.info.root.join(file))
                .with_context(|| format!("cannot read {file}"))?;
            for sc in scenarios {
                let got = lab::http::get(sc.addr, &format!("/{file}"), Duration::from_secs(60));
                let (identical, detail) = match got {
                    Ok((200, body)) if body == on_disk => (true, format!("{} bytes", body.len())),
                    Ok((200, body)) => (false, format!("{} bytes, content differs", body.len())),
                    Ok((status, _)) => (false, format!("HTTP {status}")),
                    Err(e) => (false, e.to_string()),
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

    pub(super) fn warm_up(&self, scenarios: &[HttpScenario]) {
        if !self.opts.warmup {
            return;
        }
        eprintln!("servelab compare: warming up {} scenarios", scenarios.len());
        for sc in scenarios {
            let url = |f: &str| format!("http://{}/{f}", sc.addr);
            let _ = Load::new(url(&self.info.large_file), Schedule::Count(4), 2)
                .keepalive(false)
                .run();
            let _ = Load::new(url(&self.info.small_file), Schedule::Count(200), 4).run();
        }
    }

    fn workloads(&self) -> Vec<HttpWorkload> {
        let o = self.opts;
        let with = |r: Reference| (o.cross_check && r.available()).then_some(r);
        vec![
            HttpWorkload {
                name: "large",
                path: format!("/{}", self.info.large_file),
                schedule: Schedule::Count(o.large_requests),
                concurrency: o.large_concurrency,
                keepalive: false,
                reference: with(Reference::Ab {
                    requests: o.large_requests,
                    concurrency: o.large_concurrency,
                }),
            },
            HttpWorkload {
                name: "small",
                path: format!("/{}", self.info.small_file),
                schedule: Schedule::Duration(Duration::from_secs_f64(o.small_seconds)),
                concurrency: o.small_concurrency,
                keepalive: true,
                reference: with(Reference::Wrk {
                    connections: o.small_concurrency,
                    seconds: o.small_seconds,
                }),
            },
        ]
    }

    /// Every workload on every scenario, `repeat` times, in rotating order.
    pub(super) fn measure_http(&mut self, scenarios: &[HttpScenario]) {
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
        interleave(self.opts.repeat, &numbered, |rep, &(wi, w)| {
            for si in rotation(rep, scenarios.len()) {
                let entry = acc.entry((wi, si)).or_default();
                self.measure_one(rep, w, &scenarios[si], entry);
            }
        });
        self.narrow_headline(&workloads, scenarios, &mut acc);
        for ((wi, si), a) in acc {
            let (w, sc) = (&workloads[wi], &scenarios[si]);
            let row = rows::http_row(w.name, &sc.name, &sc.description, w.reference.as_ref(), a);
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
    }

    /// While the interval of A's CPU per request against B's (large file) is wider than
    /// ±10 %, one more round of A and B, up to `--max-repeat` rounds in all. The other
    /// rows keep `--repeat` runs: the headline is what has to be narrow.
    fn narrow_headline(
        &mut self,
        workloads: &[HttpWorkload],
        scenarios: &[HttpScenario],
        acc: &mut BTreeMap<(usize, usize), HttpRuns>,
    ) {
        let Some(wi) = workloads.iter().position(|w| w.name == "large") else {
            return;
        };
        let find = |name: &str| scenarios.iter().position(|s| s.name == name);
        let (Some(b), Some(a)) = (find(REFERENCE_SCENARIO), find(A_SCENARIO)) else {
            return;
        };
        let keep_busy = self.opts.keep_busy;
        for rep in self.opts.repeat..self.opts.max_repeat {
            let runs = |si: usize| acc.get(&(wi, si)).map_or(&[][..], |r| r.runs.as_slice());
            let wide = match answer::headline(runs(a), runs(b), keep_busy) {
                Some(c) => c.ci.relative_half_width(c.estimate) > answer::NARROW_ENOUGH,
                None => true,
            };
            if !wide {
                break;
            }
            eprintln!(
                "servelab compare: the interval of A/B CPU per request is wider than ±10 %: round {} of at most {}",
                rep + 1,
                self.opts.max_repeat
            );
            for si in rotation(rep, 2).map(|k| [b, a][k]) {
                let entry = acc.entry((wi, si)).or_default();
                self.measure_one(rep, &workloads[wi], &scenarios[si], entry);
            }
        }
    }

    /// One slot: our load generator, then the reference client, on one scenario.
    fn measure_one(&mut self, rep: usize, w: &HttpWorkload, sc: &HttpScenario, acc: &mut HttpRuns) {
        eprintln!(
            "servelab compare: run {}/{} {:>5} {}",
            rep + 1,
            self.opts.repeat.max(rep + 1),
            w.name,
            sc.name
        );
        if self.cold {
            let _ = drop_caches();
        }
        let url = format!("http://{}{}", sc.addr, w.path);
        let before = sc.ours.as_ref().map(|p| p.scrape());
        let nfs_before = Self::rustnfs_of(sc, self.rustnfs.as_ref()).and_then(|p| p.scrape().ok());
        let noise_before = Noise::now();
        let pids: Vec<u32> = sc.serving.iter().map(|(_, pid)| *pid).collect();
        let other_work = lab::affinity::OtherWork::start(&pids);
        let probe = ClientProbe::start(self.opts.cpus.as_ref());
        let samplers: Vec<(String, u32, Sampler)> = sc
            .serving
            .iter()
            .map(|(name, pid)| (name.clone(), *pid, Sampler::start(Target::Tree(*pid))))
            .collect();
        let result = Load::new(&url, w.schedule, w.concurrency)
            .keepalive(w.keepalive)
            .threads(self.opts.client_threads)
            .run();
        let usages: Vec<(String, u32, lab::sampler::Usage)> = samplers
            .into_iter()
            .map(|(name, pid, s)| (name, pid, s.finish()))
            .collect();
        let client = probe.finish();
        let other_work = other_work.finish();
        let noise_after = Noise::now();
        match result {
            Ok(r) => {
                let cost = Cost::from_processes(&usages, r.requests, r.body_bytes);
                let noise = RunNoise::judge(noise_before, noise_after, other_work);
                acc.push(&r, cost, noise, client);
            }
            Err(e) => self.fail(&sc.name, w.name, e),
        }
        if let (Some(Ok(before)), Some(p)) = (before, &sc.ours)
            && let Ok(delta) = p.scrape_since(&before)
        {
            let _ = acc.phases.merge(&delta);
        }
        if let (Some(before), Some(nfs)) = (nfs_before, Self::rustnfs_of(sc, self.rustnfs.as_ref()))
        {
            let key = format!("HTTP {} via {}", w.name, sc.name);
            Self::add_nfs_phases(&mut self.nfs_phases, key, nfs, &before);
        }
        if let Some(reference) = &w.reference {
            match reference.run(&url) {
                Ok(m) => acc.reference.push(m),
                Err(e) => self.fail(&sc.name, &format!("{} ({})", w.name, reference.tool()), e),
            }
        }
    }
}

/// Reads how busy the client's and the servers' CPUs are over one run, and what
/// servelab itself (the client) spent.
pub(super) struct ClientProbe {
    client_cpus: Vec<usize>,
    server_cpus: Vec<usize>,
    cpu_before: CpuTimes,
    own_before: f64,
}

impl ClientProbe {
    /// Without a split, both sides are every CPU of the machine.
    pub(super) fn start(split: Option<&CpuSplit>) -> Self {
        let all = lab::affinity::available_cpus();
        ClientProbe {
            client_cpus: split.map_or(all.clone(), |s| s.client.clone()),
            server_cpus: split.map_or(all, |s| s.server.clone()),
            cpu_before: CpuTimes::now(),
            own_before: lab::sampler::process_cpu_s(std::process::id()),
        }
    }

    pub(super) fn finish(self) -> Option<ClientLoad> {
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
            client_bound: client_busy >= CLIENT_BOUND_BUSY,
        })
    }
}
