//! `servelab compare`: options → validated [`CompareOptions`] → run → print the report.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::Args;

use crate::compare::options::{BaselineChoice, CompareOptions, CpuSplit, DataCacheCopies};
use crate::experiment::link::LinkSpec;
use lab::dataset::DatasetSpec;

/// Scenario A (httpd reading through NFS from rustnfs) against scenario B (httpd reading
/// local disk), plus nginx, Apache and NFS-Ganesha when installed, on loopback.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Serve this directory instead of the generated dataset (its largest top-level file
    /// is the large file, its smallest the small one).
    #[arg(long, value_name = "DIR")]
    pub dataset: Option<PathBuf>,
    /// Baselines: `auto` (all that are installed), `none`, or a list such as
    /// `nginx,apache,ganesha,kernel-nfs`.
    #[arg(long, default_value = "auto")]
    pub baselines: String,
    /// Runs of every workload per scenario; the report shows the median and the spread.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Requests of the large-file workload (the original `ab -n`).
    #[arg(long, default_value_t = 100)]
    pub requests: u64,
    /// Concurrency of the large-file workload (the original `ab -c`).
    #[arg(long, default_value_t = 10)]
    pub concurrency: usize,
    /// Seconds of the small-file workload (keep-alive).
    #[arg(long, default_value_t = 3.0)]
    pub small_seconds: f64,
    /// Connections of the small-file workload.
    #[arg(long, default_value_t = 10)]
    pub small_concurrency: usize,
    /// Concurrent NFS clients of the NFS-level runs.
    #[arg(long, default_value_t = 4)]
    pub nfs_clients: usize,
    /// Seconds of each NFS-level run.
    #[arg(long, default_value_t = 2.0)]
    pub nfs_seconds: f64,
    /// Seconds of each raw TCP run.
    #[arg(long, default_value_t = 2.0)]
    pub tcp_seconds: f64,
    /// Size of the generated large file, e.g. 10MiB (the original experiment's).
    #[arg(long, default_value = "10MiB", value_parser = large_size)]
    pub large_size: u64,
    /// Seed of the generated dataset.
    #[arg(long, default_value_t = DatasetSpec::default().seed)]
    pub seed: u64,
    /// Drop the page cache before every run (needs root); said plainly when impossible.
    #[arg(long)]
    pub cold: bool,
    /// Skip the warm-up requests.
    #[arg(long)]
    pub no_warmup: bool,
    /// Put scenario A's NFS traffic across an emulated link, e.g. `rate=1gbit,delay=500us`
    /// (rate by `tc tbf` in a network namespace as root, else a userspace relay; the
    /// delay by the relay; an unshaped relay runs too as the control).
    #[arg(long, value_name = "SPEC")]
    pub link: Option<String>,
    /// How long httpd's NFS backend (scenario A) reuses handles, attributes and small
    /// files, in ms, like the kernel client's attribute cache; 0 = every request goes to
    /// the NFS server.
    #[arg(long, default_value_t = 1000)]
    pub nfs_cache_ms: u64,
    /// Where the client-cache row's httpd keeps its copies (`httpd --nfs-data-cache-dir`):
    /// unlinked files in DIR, which should be on a large-folio file system such as ext4
    /// (default: a directory in this run's temporary directory; the report names its file
    /// system).
    #[arg(long, value_name = "DIR", conflicts_with = "nfs_data_cache_memfd")]
    pub nfs_data_cache_dir: Option<PathBuf>,
    /// Keep the client-cache row's copies in sealed memfds instead of files (httpd's
    /// default without --nfs-data-cache-dir), to measure that variant.
    #[arg(long)]
    pub nfs_data_cache_memfd: bool,
    /// Threads of servelab's load generator. One, like `wrk -t 1` and `ab`: on a small
    /// machine a client thread per core takes the CPU the server needs, and the servers
    /// that suffer most from that are not the same ones in every run.
    #[arg(long, default_value_t = 1)]
    pub client_threads: usize,
    /// Do not run `ab` (large file) and `wrk` (small file) beside servelab's load
    /// generator.
    #[arg(long)]
    pub no_cross_check: bool,
    /// CPUs of the client side (servelab's load generator, `ab`, `wrk`), as `taskset -c`
    /// writes them (`0`, `0-1`); default on a machine with two or more CPUs: the first
    /// half. The report labels a run client-bound when these were >= 90 % busy.
    #[arg(long, value_name = "LIST")]
    pub client_cpus: Option<String>,
    /// CPUs of every serving process (httpd, rustnfs, nginx, Apache, Ganesha); default:
    /// the CPUs the client does not get.
    #[arg(long, value_name = "LIST")]
    pub server_cpus: Option<String>,
    /// Let client and servers share every CPU (the fight for cores decides req/s).
    #[arg(long, conflicts_with_all = ["client_cpus", "server_cpus"])]
    pub no_pin: bool,
    /// While the interval of A's CPU per request against B's is wider than ±10 %, run
    /// more rounds of the large workload on A and B, up to this many in all.
    #[arg(long, default_value_t = 8)]
    pub max_repeat: usize,
    /// Keep runs taken on a busy machine (other processes used more than 20 % of the CPU
    /// time during the run) in the figures; by default they are left out and too few
    /// quiet runs means "rerun".
    #[arg(long)]
    pub keep_busy: bool,
    /// Seconds of each open-loop point of the latency-at-equal-load runs (A and B at
    /// 25, 50 and 75 % of the lower capacity); 0 skips them.
    #[arg(long, default_value_t = 2.0)]
    pub equal_load_seconds: f64,
    /// Keep the first servers for the whole run. By default every round after the
    /// first starts rustnfs and the httpd of B and the A rows anew, so the intervals
    /// cover what a new invocation changes (fresh processes, placement, warm-up).
    #[arg(long)]
    pub no_restart: bool,
    /// Run the whole distance sweep: A's NFS hop at 0 (loopback), 0.1, 0.5 and 2 ms
    /// round trip, at 1 and 10 Gbit/s, each against B at the same offered load. It runs
    /// 10 stacks × --repeat × --distance-seconds: about 2 minutes with the defaults on
    /// two cores (the default compare runs one point, 0.5 ms at 1 Gbit/s: about 20 s).
    #[arg(long)]
    pub distance: bool,
    /// Seconds of each distance run (open loop, every point and B at the same rate);
    /// 0 leaves the distance phase out.
    #[arg(long, default_value_t = 3.0)]
    pub distance_seconds: f64,
    /// Where runs are written: `<DIR>/<date>-<host>/`.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// Host against LXD and Docker, sysbench, and the CPU/client/worker sweeps.
    #[command(flatten)]
    pub containers: crate::containers::ContainerArgs,
}

impl CompareArgs {
    /// Checks every option once and builds the run's configuration.
    pub fn into_options(self) -> anyhow::Result<CompareOptions> {
        if self.repeat == 0 || self.repeat > 100 {
            bail!("--repeat must be between 1 and 100");
        }
        if self.requests == 0
            || self.concurrency == 0
            || self.small_concurrency == 0
            || self.nfs_clients == 0
            || self.client_threads == 0
        {
            bail!(
                "--requests, --concurrency, --small-concurrency, --nfs-clients and --client-threads must be at least 1"
            );
        }
        for (name, v) in [
            ("--small-seconds", self.small_seconds),
            ("--nfs-seconds", self.nfs_seconds),
            ("--tcp-seconds", self.tcp_seconds),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 3600.0) {
                bail!("{name} must be between 0 and 3600");
            }
        }
        if let Some(dir) = &self.dataset
            && !dir.is_dir()
        {
            bail!("--dataset {}: not a directory", dir.display());
        }
        if let Some(dir) = &self.nfs_data_cache_dir
            && !dir.is_dir()
        {
            bail!("--nfs-data-cache-dir {}: not a directory", dir.display());
        }
        let data_cache_copies = match (self.nfs_data_cache_memfd, self.nfs_data_cache_dir) {
            (true, _) => DataCacheCopies::Memfd,
            (false, Some(dir)) => DataCacheCopies::Dir(dir),
            (false, None) => DataCacheCopies::RunTempDir,
        };
        if self.max_repeat < self.repeat || self.max_repeat > 100 {
            bail!(
                "--max-repeat must be between --repeat ({}) and 100",
                self.repeat
            );
        }
        if !(self.equal_load_seconds.is_finite()
            && (0.0..=600.0).contains(&self.equal_load_seconds))
        {
            bail!("--equal-load-seconds must be between 0 and 600");
        }
        if !(self.distance_seconds.is_finite() && (0.0..=600.0).contains(&self.distance_seconds)) {
            bail!("--distance-seconds must be between 0 and 600");
        }
        if self.distance && self.distance_seconds == 0.0 {
            bail!("--distance needs --distance-seconds above 0");
        }
        let cpus = cpu_split(
            self.client_cpus.as_deref(),
            self.server_cpus.as_deref(),
            self.no_pin,
            &lab::affinity::available_cpus(),
        )?;
        let link = self
            .link
            .as_deref()
            .map(str::parse::<LinkSpec>)
            .transpose()
            .context("--link")?;
        Ok(CompareOptions {
            dataset: self.dataset,
            dataset_spec: DatasetSpec {
                large_bytes: self.large_size,
                seed: self.seed,
                ..DatasetSpec::default()
            },
            baselines: BaselineChoice::parse(&self.baselines).context("--baselines")?,
            repeat: self.repeat,
            large_requests: self.requests,
            large_concurrency: self.concurrency,
            small_seconds: self.small_seconds,
            small_concurrency: self.small_concurrency,
            nfs_clients: self.nfs_clients,
            nfs_seconds: self.nfs_seconds,
            tcp_seconds: self.tcp_seconds,
            warmup: !self.no_warmup,
            cold: self.cold,
            link,
            nfs_cache_ms: self.nfs_cache_ms,
            data_cache_copies,
            client_threads: self.client_threads,
            cross_check: !self.no_cross_check,
            results: self.results,
            cpus,
            max_repeat: self.max_repeat,
            keep_busy: self.keep_busy,
            equal_load_seconds: self.equal_load_seconds,
            restart: !self.no_restart,
            distance_sweep: self.distance,
            distance_seconds: self.distance_seconds,
        })
    }
}

/// The workload sizes the container comparison takes from compare's own options (the
/// same for every column).
fn workloads(o: &CompareOptions) -> crate::containers::Workloads {
    crate::containers::Workloads {
        dataset: o.dataset.clone(),
        spec: o.dataset_spec,
        repeat: o.repeat,
        large_requests: o.large_requests,
        large_concurrency: o.large_concurrency,
        small_seconds: o.small_seconds,
        small_concurrency: o.small_concurrency,
        keep_busy: o.keep_busy,
        cpus: o.cpus.clone(),
    }
}

/// `--large-size`'s value parser: a size in bytes, with a unit or not; an error says
/// what is wrong and what to write instead.
fn large_size(text: &str) -> Result<u64, String> {
    const WRITE: &str = "write a number with an optional unit, such as 10MiB, 512KiB, 1GiB or 1048576 (units: B, k/KiB, M/MiB, G/GiB)";
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    match loadgen::parse_size(t) {
        Ok(0) => Err(format!("the file must hold at least one byte; {WRITE}")),
        Ok(n) => Ok(n as u64),
        Err(_) if digits == 0 => Err(format!("`{text}` does not start with a number; {WRITE}")),
        Err(_) => match t[digits..].trim() {
            unit if unit.is_empty()
                || ["b", "k", "kb", "kib", "m", "mb", "mib", "g", "gb", "gib"]
                    .contains(&unit.to_ascii_lowercase().as_str()) =>
            {
                Err(format!("`{text}` is too large; {WRITE}"))
            }
            unit => Err(format!("`{unit}` is not a unit of size; {WRITE}")),
        },
    }
}

/// The client/server CPU split from the flags and the CPUs this process may use: both
/// lists must be allowed, non-empty and disjoint; one given, the other is the rest.
fn cpu_split(
    client: Option<&str>,
    server: Option<&str>,
    no_pin: bool,
    available: &[usize],
) -> anyhow::Result<Option<CpuSplit>> {
    use lab::affinity::{default_split, format_cpu_list, parse_cpu_list};
    if no_pin {
        return Ok(None);
    }
    let parse = |flag: &str, text: &str| -> anyhow::Result<Vec<usize>> {
        let cpus = parse_cpu_list(text).with_context(|| flag.to_string())?;
        if let Some(c) = cpus.iter().find(|c| !available.contains(c)) {
            bail!(
                "{flag}: CPU {c} is not available to this process (available: {})",
                format_cpu_list(available)
            );
        }
        Ok(cpus)
    };
    let rest = |of: &[usize]| -> Vec<usize> {
        available
            .iter()
            .copied()
            .filter(|c| !of.contains(c))
            .collect()
    };
    let (c, s, how) = match (client, server) {
        (None, None) => match default_split(available) {
            Some((c, s)) => (c, s, "default: first half of the CPUs to the client"),
            None => return Ok(None),
        },
        (Some(c), None) => {
            let c = parse("--client-cpus", c)?;
            let s = rest(&c);
            (c, s, "--client-cpus; the servers get the rest")
        }
        (None, Some(s)) => {
            let s = parse("--server-cpus", s)?;
            let c = rest(&s);
            (c, s, "--server-cpus; the client gets the rest")
        }
        (Some(c), Some(s)) => (
            parse("--client-cpus", c)?,
            parse("--server-cpus", s)?,
            "--client-cpus and --server-cpus",
        ),
    };
    if c.is_empty() || s.is_empty() {
        bail!(
            "--client-cpus/--server-cpus: each side needs at least one CPU (available: {}); use --no-pin to share them",
            format_cpu_list(available)
        );
    }
    if c.iter().any(|x| s.contains(x)) {
        bail!(
            "--client-cpus and --server-cpus overlap; give each side its own CPUs or use --no-pin"
        );
    }
    Ok(Some(CpuSplit {
        note: format!(
            "client on CPU {}, servers on CPU {} ({how})",
            format_cpu_list(&c),
            format_cpu_list(&s)
        ),
        client: c,
        server: s,
    }))
}

pub fn run(mut args: CompareArgs) -> anyhow::Result<()> {
    let containers = std::mem::take(&mut args.containers);
    containers.parse()?;
    let options = args.into_options()?;
    // Both parts, `--containers-only` included: Ctrl-C stops the children and unwinds.
    crate::experiment::interrupt::install();
    let (report, dir) = if containers.containers_only {
        (
            None,
            crate::experiment::workspace::unique_run_dir(&options.results)?,
        )
    } else {
        let (report, dir) =
            crate::compare::run::run(&options).context("servelab compare failed")?;
        print!("{}", crate::compare::markdown::render(&report));
        println!(
            "\nWritten: {}/report.md, report.html, report.json and the SVG plots.",
            dir.display()
        );
        (Some(report), dir)
    };
    if let Some(report) = &report {
        crate::page::write(&dir, Some(report), None)?;
    }
    if containers.ladder && !containers.wanted() {
        let ladder = crate::ladder::standalone(&containers, &workloads(&options), &dir)
            .context("servelab compare --ladder failed")?;
        print!("\n{}", crate::ladder::markdown::render(&ladder));
        println!("\nWritten: {}/ladder.md, ladder.json.", dir.display());
    }
    // `--containers-only --ladder` without containers: the ladder alone.
    if containers.wanted() || (containers.containers_only && !containers.ladder) {
        let c = crate::containers::run(&containers, &workloads(&options), &dir)
            .context("servelab compare --containers failed")?;
        print!("\n{}", crate::containers::markdown::render(&c));
        // One page for the whole run: the comparison (when it ran) and the containers.
        crate::page::write(&dir, report.as_ref(), Some(&c))?;
        println!(
            "\nWritten: {}/containers.md, containers.json, report.html.",
            dir.display()
        );
        if containers.ladder
            && let Ok(md) = std::fs::read_to_string(dir.join("ladder.md"))
        {
            print!("\n{md}");
            println!("\nWritten: {}/ladder.md, ladder.json.", dir.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        compare: CompareArgs,
    }

    fn copies(args: &[&str]) -> anyhow::Result<DataCacheCopies> {
        let cmd = Cmd::try_parse_from(std::iter::once("compare").chain(args.iter().copied()))?;
        Ok(cmd.compare.into_options()?.data_cache_copies)
    }

    #[test]
    fn client_cache_copies_default_to_the_run_dir_and_can_be_memfds_or_elsewhere() {
        assert_eq!(copies(&[]).unwrap(), DataCacheCopies::RunTempDir);
        assert_eq!(
            copies(&["--nfs-data-cache-memfd"]).unwrap(),
            DataCacheCopies::Memfd
        );
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        assert_eq!(
            copies(&["--nfs-data-cache-dir", d]).unwrap(),
            DataCacheCopies::Dir(dir.path().into())
        );
        assert!(copies(&["--nfs-data-cache-dir", d, "--nfs-data-cache-memfd"]).is_err());
        let missing = dir.path().join("missing");
        let e = copies(&["--nfs-data-cache-dir", missing.to_str().unwrap()]).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
    }

    /// 35 s1: `--large-size 10XB` said "invalid plan"; it names the bad unit and what to
    /// write instead.
    #[test]
    fn a_bad_large_size_says_what_to_write() {
        let parse = |v: &str| Cmd::try_parse_from(["compare", "--large-size", v]);
        let e = parse("10XB").err().unwrap().to_string();
        assert!(e.contains("`XB` is not a unit of size"), "{e}");
        assert!(e.contains("such as 10MiB"), "{e}");
        assert!(!e.contains("invalid plan"), "{e}");
        for (bad, needle) in [
            ("MiB", "does not start with a number"),
            ("0", "at least one byte"),
        ] {
            let e = parse(bad).err().unwrap().to_string();
            assert!(e.contains(needle), "{bad}: {e}");
        }
        let ok = parse("4MiB").unwrap();
        assert_eq!(
            ok.compare.into_options().unwrap().dataset_spec.large_bytes,
            4 << 20
        );
    }

    #[test]
    fn cpu_split_defaults_to_halves_and_rejects_bad_lists() {
        let four = [0, 1, 2, 3];
        let d = cpu_split(None, None, false, &four).unwrap().unwrap();
        assert_eq!((d.client, d.server), (vec![0, 1], vec![2, 3]));
        assert_eq!(cpu_split(None, None, false, &[0]).unwrap(), None);
        assert_eq!(cpu_split(None, None, true, &four).unwrap(), None);
        let c = cpu_split(Some("3"), None, false, &four).unwrap().unwrap();
        assert_eq!((c.client, c.server), (vec![3], vec![0, 1, 2]));
        for (client, server, needle) in [
            (Some("0-1"), Some("1-2"), "overlap"),
            (Some("7"), None, "not available"),
            (Some("0-3"), None, "at least one CPU"),
            (Some("x"), None, "not a number"),
        ] {
            let e = format!("{:#}", cpu_split(client, server, false, &four).unwrap_err());
            assert!(e.contains(needle), "{e}");
        }
    }
}

#[cfg(test)]
mod nfs_version_tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        compare: CompareArgs,
    }

    /// Issue 32 §3: the container comparison's A speaks the version `--nfs-version`
    /// names, 4.2 by default; a bad version is refused naming the choices.
    #[test]
    fn containers_take_the_nfs_version_asked_for() {
        let parse = |args: &[&str]| {
            Cmd::try_parse_from(std::iter::once("compare").chain(args.iter().copied()))
                .map(|c| c.compare.containers)
        };
        let a = parse(&[]).unwrap();
        assert_eq!(a.nfs_version(), nfsclient::NfsVersion::V4_2);
        assert_eq!(
            a.httpd_a_args("nfs://10.0.0.2/nfs-share"),
            ["--nfs", "nfs://10.0.0.2/nfs-share", "--nfs-version", "4.2"]
        );
        let a = parse(&["--nfs-version", "4.0"]).unwrap();
        assert_eq!(a.nfs_version(), nfsclient::NfsVersion::V4_0);
        let err = parse(&["--nfs-version", "5"]).err().unwrap().to_string();
        assert!(err.contains("3, 4.0, 4.1 or 4.2"), "{err}");
    }
}
