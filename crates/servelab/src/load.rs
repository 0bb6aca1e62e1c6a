//! `servelab load`: flags → a validated `loadgen::LoadPlan` → `loadgen::run` → ab-style
//! text on stdout and, with `--json`, the JSON report; the exit status says whether the
//! numbers can be trusted (see [`EXIT_CODES`]).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use loadgen::{LoadPlan, NfsWorkload, Schedule, TargetUrl};

/// What the exit status means (printed by `--help`, repeated in the README).
pub const EXIT_CODES: &str = "\
Exit status:
  0  the run completed, at least one operation succeeded, no data was wrong
  1  nothing was measured: bad flags or URL (before any traffic), or every
     operation failed / none completed
  2  command-line usage error
  3  data integrity failure: an operation got wrong data (a --verify-crc32
     mismatch, a TCP byte count the server did not acknowledge, a body length
     of a 2xx that differs from the first 2xx's); takes precedence over 4
  4  stopped early: max(100, 2 x -c) consecutive failures of one kind (an
     unreachable or wrong target); --keep-going runs to the end instead
  5  the target was not ready: operations failed before any succeeded (a
     server started a moment before the load), so the figures include them;
     wait until it answers (curl --retry-connrefused, nfs-ls) and run again
The report is printed (and --json written) in every case but 1 before traffic
and 2; non-zero statuses add one line on stderr saying why.";

/// `servelab load`'s exit statuses beyond 0 and 1, carried to `main` as an error.
#[derive(Debug)]
pub struct Exit {
    pub code: u8,
    pub message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct LoadArgs {
    /// Target: http://HOST[:PORT]/PATH, tcp://HOST:PORT,
    /// nfs://HOST[:PORT]/EXPORT/PATH[?nfsport=N&mountport=N&version=3] (version=4.0, 4.1,
    /// 4.2: every workload over NFSv4, PATH from the pseudo-root; auto: as a kernel
    /// mount negotiates) or
    /// file:///PATH (a file to read, a directory to write or run the metadata mix in).
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

    /// TCP write/read size, NFS READ/WRITE size and file read/write size: 4096, 128k,
    /// 1M (the default).
    #[arg(long = "block", alias = "nfs-block", value_parser = parse_size)]
    pub block: Option<usize>,

    /// TCP: the server sends and this client receives (iperf3 -R).
    #[arg(short = 'R', long = "reverse")]
    pub reverse: bool,

    /// nfs:// and file://: what each worker does (`--nfs-workload` is the old name).
    #[arg(long = "workload", alias = "nfs-workload", value_enum, default_value_t = Workload::Read)]
    pub nfs_workload: Workload,

    /// Metadata mix: files each worker creates, stats and removes per round
    /// (`--nfs-files` is the old name).
    #[arg(long = "files", alias = "nfs-files", default_value_t = 1000)]
    pub nfs_files: u64,

    /// nfs:// and file:// reads: expected CRC-32 (hex) of the whole file; every
    /// complete pass whose checksum differs counts as a failed operation (exit 3).
    #[arg(long = "verify-crc32", value_parser = parse_crc)]
    pub verify_crc32: Option<u32>,

    /// Also write the full report (with exact histograms) as JSON to this file; see
    /// crates/loadgen/schema.json.
    #[arg(long = "json")]
    pub json: Option<PathBuf>,

    /// Never show the progress bar (it only appears on a terminal, after 1 s).
    #[arg(long = "no-progress")]
    pub no_progress: bool,

    /// Run to the end however the target fails. By default a run stops after
    /// max(100, 2 x -c) consecutive failures of one kind (exit 4), so a closed port or
    /// a missing directory does not turn into thousands of attempts.
    #[arg(long = "keep-going")]
    pub keep_going: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Workload {
    /// Sequential reads through the file named by the URL.
    Read,
    /// Sequential writes into a file per worker in the URL's directory.
    Write,
    /// Create / stat / remove of many small files (NFS: CREATE / GETATTR / REMOVE in
    /// the URL's directory; file://: in a subdirectory per worker), like bonnie++ -n.
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
        o.keep_going = self.keep_going;
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
    // The report is printed either way; the exit status is what scripts and replicated
    // load tasks see, so it must say when the numbers cannot be trusted.
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let first = report
        .first_error
        .as_deref()
        .map(|e| format!(" (first error: {})", e.replace('\n', " ")))
        .unwrap_or_default();
    let integrity = report.integrity_failures();
    if integrity > 0 {
        let mut message = format!(
            "{integrity} of {} operations against {} got wrong data (checksum or length){first}",
            report.requests, args.url
        );
        if let Some(why) = &report.stopped {
            message.push_str(&format!("; {why}"));
        }
        return Err(Exit { code: 3, message }.into());
    }
    if let Some(why) = &report.stopped {
        return Err(Exit {
            code: 4,
            message: format!("{}: {why}", args.url),
        }
        .into());
    }
    if report.requests == 0 {
        anyhow::bail!("no operation against {} completed{first}", args.url);
    }
    if report.failed() >= report.requests {
        anyhow::bail!(
            "all {} operations against {} failed{first}",
            report.requests,
            args.url
        );
    }
    if report.failed_before_first_success > 0 {
        return Err(Exit {
            code: 5,
            message: format!(
                "{} was not ready: the first {} operations failed before any succeeded{first}",
                args.url, report.failed_before_first_success
            ),
        }
        .into());
    }
    Ok(())
}
