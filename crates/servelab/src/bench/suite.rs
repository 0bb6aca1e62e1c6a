//! The suite's run context: dataset → servers and tools → the plan of every
//! measurement → byte checks and warm-up → every [`Case`] in every repeat, rotated by
//! [`interleaved`] → idle memory → files. A peer or tool that is missing is skipped and
//! named in the summary; a measurement that fails is a CSV row with its error, and the
//! run goes on; an interruption (Ctrl-C) stops it at the next measurement.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use lab::dataset::{self, DatasetInfo, DatasetSpec};
use lab::environment::Environment;
use lab::tools::{self, Measured};
use loadgen::{NfsWorkload, Schedule};

use super::bootset;
use super::cases::{self, Case, HttpCase, NfsCase};
use super::names::*;
use super::options::{BenchOptions, Group};
use super::record::{self, Row, Skip};
use super::runs::{http_load, nfs_cat, nfs_load, tcp_load};
use super::servers::{Servers, Tools, settle_rss};
use super::{setup, summary};
use crate::experiment::interrupt::Interrupted;
use crate::experiment::load::{interleaved, rotation};
use crate::experiment::probe::{Part, Probe};
use crate::experiment::progress::Progress;
use crate::experiment::workspace::{Dataset, loadavg, unique_run_dir};

/// Runs the suite and writes `results.csv`, `setup.md`, `summary.md` and `report.html`; returns the
/// directory.
pub fn run(opts: &BenchOptions) -> anyhow::Result<PathBuf> {
    let mut suite = Suite::prepare(opts)?;
    let cases = cases::matrix(opts, suite.tools.nfs_cat, suite.servers.nginx.is_some());
    suite.plan(&cases);
    suite.check_and_warm_up()?;
    for (rep, case) in interleaved(opts.repeat, &cases) {
        suite.measure(rep, case)?;
    }
    if opts.wants(Group::Loadgen) && suite.servers.nginx.is_none() {
        suite.skipped.push(Skip::new(
            "load generators on nginx",
            "nginx is not available",
        ));
    }
    if opts.wants(Group::Memory) {
        suite.measure_memory();
    }
    suite.finish()
}

/// The state the suite carries from phase to phase.
struct Suite<'a> {
    opts: &'a BenchOptions,
    out: PathBuf,
    log_dir: PathBuf,
    started: Instant,
    load_before: String,
    env: Environment,
    info: DatasetInfo,
    /// The export and document root (the dataset, the boot set, the scratch dirs).
    root: PathBuf,
    servers: Servers,
    tools: Tools,
    /// One per measurement, in the order measured: `results.csv`.
    rows: Vec<Row>,
    skipped: Vec<Skip>,
    /// Byte-check failures, for the setup note.
    notes: Vec<String>,
    progress: Progress,
    // Drop order: the servers stop before their files' temporary directory goes.
    _data: Dataset,
}

impl<'a> Suite<'a> {
    /// Output directory, dataset, servers and tools.
    fn prepare(opts: &'a BenchOptions) -> anyhow::Result<Self> {
        let out = output_dir(opts)?;
        let log_dir = out.join("logs");
        std::fs::create_dir_all(&log_dir)
            .with_context(|| format!("cannot create {}", log_dir.display()))?;
        eprintln!("servelab bench: writing to {}", out.display());
        let load_before = loadavg();
        let started = Instant::now();
        let env = Environment::capture(
            "warm: every file is read once before measuring (the dataset lives in a fresh temporary directory, so it is in the page cache)".into(),
        );
        let data = Dataset::prepare(
            None,
            DatasetSpec {
                small_set_files: 16,
                ..DatasetSpec::default()
            },
            "servelab-bench-",
        )?;
        let (info, root) = (data.info.clone(), data.info.root.clone());
        write_extras(&root)?;
        let mut skipped = Vec::new();
        let servers = Servers::start(&root, &log_dir, opts, &mut skipped)?;
        let tools = Tools::detect(opts, &mut skipped);
        Ok(Suite {
            opts,
            out,
            log_dir,
            started,
            load_before,
            env,
            info,
            root,
            servers,
            tools,
            rows: Vec::new(),
            skipped,
            notes: Vec::new(),
            progress: Progress::new("servelab bench"),
            _data: data,
        })
    }

    /// Every measurement of the run, planned before the first.
    fn plan(&mut self, cases: &[Case]) {
        let secs = Duration::from_secs_f64(self.opts.seconds);
        self.progress.plan(
            1,
            Duration::from_secs(2 * self.servers.nfs.len() as u64 + 1),
        );
        for case in cases {
            let (n, each) = match case {
                Case::Http(c) => (
                    self.servers.http.len() * self.tools.http.len(),
                    Duration::from_secs_f64(c.seconds(self.opts.seconds)),
                ),
                Case::Nfs(NfsCase::BootSet) => (self.servers.nfs.len(), secs),
                Case::Nfs(_) => {
                    let v4 = self.servers.nfs.iter().filter(|s| s.export.v4).count();
                    (self.servers.nfs.len() + v4, secs)
                }
                Case::NfsCat => (self.servers.nfs.len(), Duration::from_millis(500)),
                Case::Loadgen(_) => (self.tools.loadgen().len(), secs),
                Case::Tcp => (self.tools.tcp().len(), secs),
            };
            self.progress.plan(n * self.opts.repeat, each);
        }
    }

    /// Every HTTP server must serve the files' bytes (a difference is a note); every NFS
    /// server reads its large files before measuring.
    fn check_and_warm_up(&mut self) -> anyhow::Result<()> {
        let expected = Duration::from_secs(2 * self.servers.nfs.len() as u64 + 1);
        self.progress
            .step(expected, "checking bytes and warming up")?;
        for file in [&self.info.large_file, &self.info.small_file] {
            let on_disk = std::fs::read(self.root.join(file))
                .with_context(|| format!("cannot read {file}"))?;
            for s in &self.servers.http {
                match lab::http::get(s.addr, &format!("/{file}"), Duration::from_secs(30)) {
                    Ok((200, body)) if body == on_disk => {}
                    Ok((status, body)) => self.notes.push(format!(
                        "{}: GET /{file} answered {status} with {} bytes that differ from the file",
                        s.name,
                        body.len()
                    )),
                    Err(e) => self.notes.push(format!(
                        "{}: GET /{file} failed: {}",
                        s.name,
                        service::Chain(&e)
                    )),
                }
            }
        }
        for s in &self.servers.nfs {
            let warm =
                std::iter::once(dataset::LARGE_FILE.to_string()).chain(bootset::large_files());
            for f in warm {
                // Each 10 MiB file read twice in 1 MiB READs: warm page cache and connections;
                // more only made the quick suite slow on a busy machine.
                let _ = nfs_load(&s.export.url(&f), NfsWorkload::Read, 1, Schedule::Count(20));
            }
        }
        Ok(())
    }

    /// One case in repeat `rep` (0-based), on every server it concerns.
    fn measure(&mut self, rep: usize, case: &Case) -> Result<(), Interrupted> {
        match *case {
            Case::Http(c) => self.measure_http(rep, c),
            Case::Nfs(c) => self.measure_nfs(rep, c),
            Case::NfsCat => self.measure_nfs_cat(rep),
            Case::Loadgen(c) => self.measure_loadgen(rep, c),
            Case::Tcp => self.measure_tcp(rep),
        }
    }

    /// One measurement: a step of the plan, `run` under a probe of `part` (the server's
    /// process tree, for its peak RSS), and its row.
    fn measure_one(
        &mut self,
        slot: Slot<'_>,
        part: Option<&Part>,
        expected: Duration,
        run: impl FnOnce() -> anyhow::Result<Measured>,
    ) -> Result<(), Interrupted> {
        let what = format!(
            "{}/{} {:<4} {:<22} {:<12} {}",
            slot.rep + 1,
            self.opts.repeat,
            slot.group,
            slot.label,
            slot.server,
            slot.tool
        );
        self.progress.step(expected, what)?;
        let probe = part.map(|p| Probe::start(std::slice::from_ref(p), None));
        let result = run();
        let peak = probe.and_then(|p| p.finish().peak_rss());
        self.rows.push(Row::new(
            slot.rep + 1,
            slot.group,
            slot.label,
            slot.server,
            slot.tool,
            slot.concurrency,
            result,
            peak,
        ));
        Ok(())
    }

    /// Every HTTP server with every HTTP tool; servers rotate by repeat, tools by repeat
    /// and server, so no pairing always goes first.
    fn measure_http(&mut self, rep: usize, case: HttpCase) -> Result<(), Interrupted> {
        let label = case.label();
        let file = if case.large {
            self.info.large_file.clone()
        } else {
            self.info.small_file.clone()
        };
        let servers = self.servers.http.clone();
        let tools = self.tools.http.clone();
        let d = case.seconds(self.opts.seconds);
        for (k, si) in rotation(rep, servers.len()).enumerate() {
            let s = &servers[si];
            for ti in rotation(rep + k, tools.len()) {
                let tool = tools[ti];
                let url = format!("http://{}/{file}", s.addr);
                let slot = Slot::new(rep, "http", &label, s.name, tool, case.concurrency);
                self.measure_one(
                    slot,
                    Some(&s.part),
                    Duration::from_secs_f64(d),
                    || match tool {
                        WRK => tools::wrk(&url, case.concurrency, d, case.keepalive)
                            .map_err(Into::into),
                        _ => http_load(&url, case.concurrency, d, case.keepalive),
                    },
                )?;
            }
        }
        Ok(())
    }

    /// Every NFS server with our load generator, over NFSv3 and (but the boot set, whose
    /// files are read through MOUNT paths) NFSv4.0.
    fn measure_nfs(&mut self, rep: usize, case: NfsCase) -> Result<(), Interrupted> {
        let label = case.label();
        let secs = self.opts.seconds;
        let expected = Duration::from_secs_f64(secs);
        let d = Schedule::Duration(expected);
        let servers = self.servers.nfs.clone();
        for si in rotation(rep, servers.len()) {
            let s = &servers[si];
            let part = Part::process(s.name, s.pid);
            let scratch = format!("scratch-{}", s.name);
            let (path, workload) = match case {
                NfsCase::SeqRead(_) => (dataset::LARGE_FILE, NfsWorkload::Read),
                _ => (scratch.as_str(), NfsWorkload::Metadata),
            };
            let slot = Slot::new(rep, "nfs", &label, s.name, LOAD, case.clients());
            self.measure_one(slot, Some(&part), expected, || match case {
                NfsCase::BootSet => bootset::measure(&s.export, secs),
                _ => nfs_load(&s.export.url(path), workload, case.clients(), d),
            })?;
            if case == NfsCase::BootSet {
                continue;
            }
            if let Some(url) = s.export.v4_url(path) {
                let slot = Slot::new(rep, "nfs", &label, s.name, LOAD_NFS4, case.clients());
                self.measure_one(slot, Some(&part), expected, || {
                    nfs_load(&url, workload, case.clients(), d)
                })?;
            }
        }
        Ok(())
    }

    /// Every NFS server read by libnfs's nfs-cat, the reference NFS client.
    fn measure_nfs_cat(&mut self, rep: usize) -> Result<(), Interrupted> {
        let servers = self.servers.nfs.clone();
        let label = NfsCase::SeqRead(1).label();
        let bytes = self.info.large_bytes;
        for si in rotation(rep, servers.len()) {
            let s = &servers[si];
            let part = Part::process(s.name, s.pid);
            let slot = Slot::new(rep, "nfs", &label, s.name, NFS_CAT, 1);
            self.measure_one(slot, Some(&part), Duration::from_millis(500), || {
                nfs_cat(&s.export.libnfs_url(dataset::LARGE_FILE), bytes)
            })?;
        }
        Ok(())
    }

    /// The load generators side by side on nginx's small file.
    fn measure_loadgen(&mut self, rep: usize, c: usize) -> Result<(), Interrupted> {
        let Some(nginx) = self.servers.nginx else {
            return Ok(());
        };
        let url = format!("http://{nginx}/{}", self.info.small_file);
        let secs = self.opts.seconds;
        let label = format!("nginx 4KiB keep-alive c={c}");
        let tools = self.tools.loadgen();
        for ti in rotation(rep, tools.len()) {
            let tool = tools[ti];
            let slot = Slot::new(rep, "loadgen", &label, NGINX, tool, c);
            self.measure_one(slot, None, Duration::from_secs_f64(secs), || match tool {
                WRK => tools::wrk(&url, c, secs, true).map_err(Into::into),
                AB => tools::ab(&url, c, secs, true).map_err(Into::into),
                _ => http_load(&url, c, secs, true),
            })?;
        }
        Ok(())
    }

    /// One TCP stream on loopback: `servelab load` → `servelab tcp-server`, iperf3 -c → -s.
    fn measure_tcp(&mut self, rep: usize) -> Result<(), Interrupted> {
        let secs = self.opts.seconds;
        let tools = self.tools.tcp();
        let log_dir = self.log_dir.clone();
        for ti in rotation(rep, tools.len()) {
            let tool = tools[ti];
            let server = if tool == IPERF3 {
                "iperf3 -s"
            } else {
                "servelab tcp-server"
            };
            let slot = Slot::new(rep, "tcp", "loopback 1 stream", server, tool, 1);
            self.measure_one(slot, None, Duration::from_secs_f64(secs), || match tool {
                IPERF3 => tools::iperf3(secs).map_err(Into::into),
                _ => tcp_load(secs, &log_dir),
            })?;
        }
        Ok(())
    }

    /// Our servers' resident memory idle at the start and again after the run.
    fn measure_memory(&mut self) {
        for idle in self.servers.idle.clone() {
            let after = settle_rss(idle.pid);
            for (case, v) in [("idle at start", idle.bytes), ("idle after the run", after)] {
                self.rows.push(Row::new(
                    REPEAT_NONE,
                    "memory",
                    case,
                    idle.name,
                    "VmRSS",
                    0,
                    Ok(Measured::default()),
                    Some(v),
                ));
            }
        }
    }

    /// Stops the servers and writes `setup.md`, `results.csv`, `summary.md` and
    /// `report.html`.
    fn finish(mut self) -> anyhow::Result<PathBuf> {
        self.progress.finish();
        let load_after = loadavg();
        let took = self.started.elapsed();
        drop(self.servers);
        let (opts, out) = (self.opts, &self.out);
        let setup = setup::setup_note(&setup::Setup {
            env: &self.env,
            opts,
            info: &self.info,
            load_before: &self.load_before,
            load_after: &load_after,
            took,
            notes: &self.notes,
        });
        write(out, "setup.md", setup.clone())?;
        write(out, "results.csv", record::csv(&self.rows))?;
        let md = summary::render(&summary::Summary {
            rows: &self.rows,
            skipped: &self.skipped,
            env: &self.env,
            opts,
            load_before: &self.load_before,
            load_after: &load_after,
        });
        // report.html: the summary, then the setup, as one page that works offline.
        let page = format!("{md}\n{}", demote_title(&setup));
        crate::html::write_report(out, "servelab bench", &page, &[])?;
        write(out, "summary.md", md)?;
        Ok(self.out)
    }
}

/// Memory rows are not part of a repeat.
const REPEAT_NONE: usize = 0;

/// `--out DIR` (created, must not hold a run) or a fresh `results/<date>-<host>`.
fn output_dir(opts: &BenchOptions) -> anyhow::Result<PathBuf> {
    match &opts.out {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            if d.join("results.csv").exists() {
                bail!("{} already holds a run", d.display());
            }
            Ok(d.clone())
        }
        None => unique_run_dir(&opts.results),
    }
}

/// Beside the dataset: the boot set, and a world-writable scratch directory per NFS
/// server for the metadata mix.
fn write_extras(root: &Path) -> anyhow::Result<()> {
    bootset::write(root).context("cannot write the boot file set")?;
    for s in [RUSTNFS, GANESHA] {
        let d = root.join(format!("scratch-{s}"));
        std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
        use std::os::unix::fs::PermissionsExt as _;
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777));
    }
    Ok(())
}

/// A document's `# ` title as a `## ` section heading, to follow another document.
fn demote_title(md: &str) -> String {
    match md.strip_prefix("# ") {
        Some(rest) => format!("## {rest}"),
        None => md.to_string(),
    }
}

fn write(dir: &Path, name: &str, text: String) -> anyhow::Result<()> {
    std::fs::write(dir.join(name), text).with_context(|| format!("cannot write {name}"))
}

/// Where a measurement sits in the run: its repeat and its CSV row's key.
struct Slot<'a> {
    rep: usize,
    group: &'a str,
    label: &'a str,
    server: &'a str,
    tool: &'a str,
    concurrency: usize,
}

impl<'a> Slot<'a> {
    fn new(
        rep: usize,
        group: &'a str,
        label: &'a str,
        server: &'a str,
        tool: &'a str,
        concurrency: usize,
    ) -> Slot<'a> {
        Slot {
            rep,
            group,
            label,
            server,
            tool,
            concurrency,
        }
    }
}
