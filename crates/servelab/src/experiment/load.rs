//! The one way the experiments drive the load generator and order their runs: a
//! [`Load`] description run under one failure policy, and [`interleaved`], which rotates
//! the order of the things measured in every repeat.

use std::time::Duration;

use anyhow::{Context as _, bail};
use loadgen::{LoadPlan, NfsWorkload, Schedule};

/// How long one request or operation may take before it counts as failed. 30 s, not
/// 10: a 10 MiB response over an emulated 100 Mbit/s link shared by ten clients takes
/// ~8 s, and 100 clients each fetching 10 MiB on a busy two-core machine queue for
/// seconds; a shorter limit would turn slowness into failures and hide it from the
/// latency figures, where it belongs. A server that hangs still ends the run.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One closed-loop load-generator run.
#[derive(Debug, Clone)]
pub struct Load {
    pub url: String,
    pub schedule: Schedule,
    pub concurrency: usize,
    pub keepalive: bool,
    /// Client threads; `None` = the load generator's default (one per core).
    pub threads: Option<usize>,
    pub nfs_workload: Option<NfsWorkload>,
    pub block_size: Option<usize>,
}

impl Load {
    pub fn new(url: impl Into<String>, schedule: Schedule, concurrency: usize) -> Self {
        Load {
            url: url.into(),
            schedule,
            concurrency,
            keepalive: true,
            threads: None,
            nfs_workload: None,
            block_size: None,
        }
    }

    pub fn for_seconds(url: impl Into<String>, seconds: f64, concurrency: usize) -> Self {
        Self::new(
            url,
            Schedule::Duration(Duration::from_secs_f64(seconds)),
            concurrency,
        )
    }

    pub fn keepalive(mut self, on: bool) -> Self {
        self.keepalive = on;
        self
    }

    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n);
        self
    }

    pub fn nfs(mut self, w: NfsWorkload) -> Self {
        self.nfs_workload = Some(w);
        self
    }

    pub fn block_size(mut self, b: usize) -> Self {
        self.block_size = Some(b);
        self
    }

    /// Runs it under the one failure policy of `compare` and `bench`: a run in which no
    /// request succeeded is an error carrying the first failure, because it has no
    /// throughput or latency to show; a run in which some failed is a result, with the
    /// failures counted in the report for the caller to show (a table row or CSV line
    /// with its error count), so partial failure is visible instead of turning a
    /// measurement into a gap.
    pub fn run(&self) -> anyhow::Result<loadgen::Report> {
        let mut plan = LoadPlan::new(&self.url, self.schedule, self.concurrency)
            .with_context(|| format!("load plan for {}", self.url))?;
        plan.options.keepalive = self.keepalive;
        plan.options.timeout = REQUEST_TIMEOUT;
        if let Some(t) = self.threads {
            plan.options.threads = t;
        }
        if let Some(w) = self.nfs_workload {
            plan.options.nfs_workload = w;
            plan.options.nfs_files = 200;
        }
        if let Some(b) = self.block_size {
            plan.options.block_size = b;
        }
        let report = loadgen::run(plan).with_context(|| format!("load on {}", self.url))?;
        if report.requests == 0 || report.failed() >= report.requests {
            bail!(
                "{}: no request succeeded: {}",
                self.url,
                report
                    .first_error
                    .clone()
                    .unwrap_or_else(|| "no request completed".into())
            );
        }
        Ok(report)
    }
}

/// An error as one line, its causes after it (`a: b: c`, the workspace's one way:
/// `service::Chain`), no backtrace — what a CSV cell, a report row and the command line
/// print.
pub fn error_text(e: &anyhow::Error) -> String {
    service::Chain(e.as_ref()).to_string()
}

/// Indices `0..n` rotated by `rep`: repeat 0 runs 0,1,2; repeat 1 runs 1,2,0; … so no
/// item always goes first or last.
pub fn rotation(rep: usize, n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |k| (k + rep) % n.max(1))
}

/// Every item in every repeat, as (repeat, item), in rotating order.
pub fn interleaved<T>(repeat: usize, items: &[T]) -> impl Iterator<Item = (usize, &T)> {
    (0..repeat).flat_map(move |rep| rotation(rep, items.len()).map(move |i| (rep, &items[i])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_rotates() {
        let seen: Vec<(usize, char)> = interleaved(3, &['a', 'b', 'c'])
            .map(|(rep, c)| (rep, *c))
            .collect();
        let order: String = seen.iter().map(|x| x.1).collect();
        assert_eq!(order, "abcbcacab");
        assert_eq!(seen.iter().filter(|x| x.0 == 2).count(), 3);
        assert_eq!(interleaved(2, &[] as &[u8]).count(), 0);
    }
}
