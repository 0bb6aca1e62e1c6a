//! `servelab load`: flags → a validated `loadgen::LoadPlan` → `loadgen::run` → ab-style
//! text on stdout and, with `--json`, the JSON report.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use loadgen::{LoadPlan, NfsWorkload, Schedule, TargetUrl};

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Target: http://HOST[:PORT]/PATH, tcp://HOST:PORT or
    /// nfs://HOST[:PORT]/EXPORT/PATH[?nfsport=N&mountport=N&version=3].
    pub url: String,

    /// Number of operations to run (closed loop, like ab -n). Default: 1 for http://,
    /// a 10 s run for tcp:// and nfs://.
    #[arg(short = 'n', long = "requests")]
    pub requests: Option<u64>,

    /// Run for this long instead (closed loop, like wrk -d): 10s, 500ms, 2m.
    #[arg(short = 'z', long = "duration", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Fixed arrival rate in operations per second (open loop). Latencies are timed
    /// from each operation's intended start, so server stalls are not hidden
    /// (coordinated omission). Combine with -n or -z (default 10 s).
    #[arg(short = 'q', long = "rate")]
    pub rate: Option<f64>,

    /// Concurrent workers, each with its own connection (HTTP connections, TCP streams,
    /// NFS clients).
    #[arg(short = 'c', long = "concurrency", default_value_t = 1)]
    pub concurrency: usize,

    /// OS threads driving the workers (0: one per CPU, at most one per worker).
    #[arg(short = 't', long = "threads", default_value_t = 0)]
    pub threads: usize,

    /// HTTP: open a new connection per request with HTTP/1.0 (ab without -k). By
    /// default connections are kept alive (HTTP/1.1).
    #[arg(long = "no-keepalive")]
    pub no_keepalive: bool,

    /// HTTP: accept keep-alive explicitly (the default; for ab muscle memory).
    #[arg(short = 'k', long = "keepalive", conflicts_with = "no_keepalive")]
    pub keepalive: bool,

    /// HTTP: extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,

    /// HTTP: do not count responses whose length differs from the first as failed
    /// (ab -l).
    #[arg(short = 'l', long = "variable-length")]
    pub variable_length: bool,

    /// Give up on one operation after this long (counted as a timeout failure).
    #[arg(short = 's', long = "timeout", default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// TCP write/read size and NFS READ/WRITE size: 4096, 128k, 1M (the default).
    #[arg(long = "block", alias = "nfs-block", value_parser = parse_size)]
    pub block: Option<usize>,

    /// TCP: the server sends and this client receives (iperf3 -R).
    #[arg(short = 'R', long = "reverse")]
    pub reverse: bool,

    /// NFS: what each client does.
    #[arg(long = "nfs-workload", value_enum, default_value_t = Workload::Read)]
    pub nfs_workload: Workload,

    /// NFS metadata mix: files each client creates, stats and removes per round.
    #[arg(long = "nfs-files", default_value_t = 1000)]
    pub nfs_files: u64,

    /// NFS reads: expected CRC-32 (hex) of the whole file; every complete pass whose
    /// checksum differs counts as a failed operation.
    #[arg(long = "verify-crc32", value_parser = parse_crc)]
    pub verify_crc32: Option<u32>,

    /// Also write the full report (with exact histograms) as JSON to this file; see
    /// crates/loadgen/schema.json.
    #[arg(long = "json")]
    pub json: Option<PathBuf>,

    /// Never show the progress bar (it only appears on a terminal, after 1 s).
    #[arg(long = "no-progress")]
    pub no_progress: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Workload {
    /// Sequential READs through the file named by the URL.
    Read,
    /// Sequential WRITEs into a file per client in the URL's directory.
    Write,
    /// CREATE / GETATTR / REMOVE of many small files in the URL's directory.
    Metadata,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    loadgen::parse_duration(s).map_err(|e| e.to_string())
}

fn parse_size(s: &str) -> Result<usize, String> {
    loadgen::parse_size(s).map_err(|e| e.to_string())
}

fn parse_crc(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0x"), 16)
        .map_err(|_| format!("{s:?} is not a hexadecimal CRC-32"))
}

impl LoadArgs {
    /// Raw flags → a validated plan, in one place.
    pub fn to_plan(&self) -> anyhow::Result<LoadPlan> {
        let target = TargetUrl::parse(&self.url)?;
        let default = match target {
            TargetUrl::Http { .. } => Schedule::Count(1),
            _ => Schedule::Duration(Duration::from_secs(10)),
        };
        let schedule = Schedule::from_flags(self.requests, self.duration, self.rate, default)?;
        let mut plan = LoadPlan::new(&self.url, schedule, self.concurrency)?;
        let o = &mut plan.options;
        o.timeout = self.timeout;
        o.keepalive = !self.no_keepalive;
        o.headers.clone_from(&self.headers);
        o.variable_length = self.variable_length;
        o.block_size = self.block.unwrap_or(1 << 20);
        o.reverse = self.reverse;
        o.nfs_workload = match self.nfs_workload {
            Workload::Read => NfsWorkload::Read,
            Workload::Write => NfsWorkload::Write,
            Workload::Metadata => NfsWorkload::Metadata,
        };
        o.nfs_files = self.nfs_files;
        o.verify_crc32 = self.verify_crc32;
        o.threads = self.threads;
        o.progress = !self.no_progress;
        plan.validate()?;
        Ok(plan)
    }
}

pub fn run(args: LoadArgs) -> anyhow::Result<()> {
    let plan = args.to_plan()?;
    let report = loadgen::run(plan)?;
    print!("{}", report.render_text());
    if let Some(path) = &args.json {
        report
            .write_json(path)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    // The report is printed either way; a run where nothing succeeded must still fail
    // the process, since scripts and replicated load tasks only see the exit status.
    if report.requests == 0 || report.failed() >= report.requests {
        let first = report
            .first_error
            .as_deref()
            .map(|e| format!(" (first error: {})", e.replace('\n', " ")))
            .unwrap_or_default();
        if report.requests == 0 {
            anyhow::bail!("no operation against {} completed{first}", args.url);
        }
        anyhow::bail!(
            "all {} operations against {} failed{first}",
            report.requests,
            args.url
        );
    }
    Ok(())
}
