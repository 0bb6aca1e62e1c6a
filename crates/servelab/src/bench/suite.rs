//! The suite's run context: dataset → servers and tools → byte checks and warm-up →
//! every [`Case`] in every repeat, rotated by [`interleave`] → idle memory → files.
//! A peer or tool that is missing is skipped and named in the summary; a measurement
//! that fails is a CSV row with its error, and the run goes on.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use lab::dataset::{self, DatasetInfo, DatasetSpec};
use lab::environment::Environment;
use lab::sampler::{Sampler, Target};
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
use crate::measure::{interleave, rotation};
use crate::results::{loadavg, unique_run_dir};

/// Runs the suite and writes `results.csv`, `setup.md`, `summary.md` and `report.html`; returns the
/// directory.
pub fn run(opts: &BenchOptions) -> anyhow::Result<PathBuf> {
    let mut suite = Suite::prepare(opts)?;
    suite.check_and_warm_up()?;
    let cases = cases::matrix(opts, suite.tools.nfs_cat, suite.servers.nginx.is_some());
    interleave(opts.repeat, &cases, |rep, case| suite.measure(rep, case));
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
    // Drop order: the servers stop before their files' temporary directory goes.
    _tmp: tempfile::TempDir,
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
        let tmp = tempfile::Builder::new()
            .prefix("servelab-bench-")
            .tempdir()
            .context("cannot create a temporary directory")?;
        let root = tmp.path().join("www");
        let info = write_dataset(&root)?;
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
            _tmp: tmp,
        })
    }

    /// Every HTTP server must serve the files' bytes (a difference is a note); every NFS
    /// server reads its large files before measuring.
    fn check_and_warm_up(&mut self) -> anyhow::Result<()> {
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
                    Err(e) => self
                        .notes
                        .push(format!("{}: GET /{file} failed: {e}", s.name)),
                }
            }
        }
        for s in &self.servers.nfs {
            let warm =
                std::iter::once(dataset::LARGE_FILE.to_string()).chain(bootset::large_files());
            for f in warm {
                // Each 10 MiB file read twice in 1 MiB READs: warm page cache and connections;
                // more only made the quick suite slow on a busy machine.
                let _ = nfs_load(&s.url(&f), NfsWorkload::Read, 1, Schedule::Count(20));
            }
        }
        Ok(())
    }

    /// One case in repeat `rep` (0-based), on every server it concerns.
    fn measure(&mut self, rep: usize, case: &Case) {
        match *case {
            Case::Http(c) => self.measure_http(rep, c),
            Case::Nfs(c) => self.measure_nfs(rep, c),
            Case::NfsCat => self.measure_nfs_cat(rep),
            Case::Loadgen(c) => self.measure_loadgen(rep, c),
            Case::Tcp => self.measure_tcp(rep),
        }
    }

    /// Every HTTP server with every HTTP tool; servers rotate by repeat, tools by repeat
    /// and server, so no pairing always goes first.
    fn measure_http(&mut self, rep: usize, case: HttpCase) {
        let label = case.label();
        let file = if case.large {
            &self.info.large_file
        } else {
            &self.info.small_file
        };
        let servers = self.servers.http.clone();
        let tools = self.tools.http.clone();
        for (k, si) in rotation(rep, servers.len()).enumerate() {
            let s = servers[si];
            for ti in rotation(rep + k, tools.len()) {
                let tool = tools[ti];
                self.progress(rep, &format!("http {label:<22} {:<12} {tool}", s.name));
                let url = format!("http://{}/{file}", s.addr);
                let sampler = Sampler::start(Target::Tree(s.pid));
                let d = case.seconds(self.opts.seconds);
                let result = match tool {
                    WRK => {
                        tools::wrk(&url, case.concurrency, d, case.keepalive).map_err(Into::into)
                    }
                    _ => http_load(&url, case.concurrency, d, case.keepalive),
                };
                let peak = sampler.finish().peak_rss_bytes;
                self.rows.push(Row::new(
                    rep + 1,
                    "http",
                    &label,
                    s.name,
                    tool,
                    case.concurrency,
                    result,
                    Some(peak),
                ));
            }
        }
    }

    /// Every NFS server with our load generator.
    fn measure_nfs(&mut self, rep: usize, case: NfsCase) {
        let label = case.label();
        let secs = self.opts.seconds;
        let servers = self.servers.nfs.clone();
        for si in rotation(rep, servers.len()) {
            let s = &servers[si];
            self.progress(rep, &format!("nfs  {label:<22} {:<12} {LOAD}", s.name));
            let sampler = Sampler::start(Target::Tree(s.pid));
            let d = Schedule::Duration(Duration::from_secs_f64(secs));
            let result = match case {
                NfsCase::SeqRead(c) => {
                    nfs_load(&s.url(dataset::LARGE_FILE), NfsWorkload::Read, c, d)
                }
                NfsCase::Metadata(c) => nfs_load(
                    &s.url(&format!("scratch-{}", s.name)),
                    NfsWorkload::Metadata,
                    c,
                    d,
                ),
                NfsCase::BootSet => bootset::measure(s, secs),
            };
            let peak = sampler.finish().peak_rss_bytes;
            self.rows.push(Row::new(
                rep + 1,
                "nfs",
                &label,
                s.name,
                LOAD,
                case.clients(),
                result,
                Some(peak),
            ));
            // The same workload over NFSv4.0 (the boot set stays v3: its files are
            // read through MOUNT paths).
            let v4 = match case {
                NfsCase::SeqRead(c) => s
                    .v4_url(dataset::LARGE_FILE)
                    .map(|u| (u, NfsWorkload::Read, c)),
                NfsCase::Metadata(c) => s
                    .v4_url(&format!("scratch-{}", s.name))
                    .map(|u| (u, NfsWorkload::Metadata, c)),
                NfsCase::BootSet => None,
            };
            if let Some((url, workload, c)) = v4 {
                self.progress(rep, &format!("nfs  {label:<22} {:<12} {LOAD_NFS4}", s.name));
                let sampler = Sampler::start(Target::Tree(s.pid));
                let result = nfs_load(&url, workload, c, d);
                let peak = sampler.finish().peak_rss_bytes;
                self.rows.push(Row::new(
                    rep + 1,
                    "nfs",
                    &label,
                    s.name,
                    LOAD_NFS4,
                    c,
                    result,
                    Some(peak),
                ));
            }
        }
    }

    /// Every NFS server read by libnfs's nfs-cat, the reference NFS client.
    fn measure_nfs_cat(&mut self, rep: usize) {
        let servers = self.servers.nfs.clone();
        for si in rotation(rep, servers.len()) {
            let s = &servers[si];
            self.progress(
                rep,
                &format!("nfs  seq read 10MiB c=1       {:<12} {NFS_CAT}", s.name),
            );
            let sampler = Sampler::start(Target::Tree(s.pid));
            let result = nfs_cat(&s.libnfs_url(dataset::LARGE_FILE), self.info.large_bytes);
            let peak = sampler.finish().peak_rss_bytes;
            self.rows.push(Row::new(
                rep + 1,
                "nfs",
                &NfsCase::SeqRead(1).label(),
                s.name,
                NFS_CAT,
                1,
                result,
                Some(peak),
            ));
        }
    }

    /// The load generators side by side on nginx's small file.
    fn measure_loadgen(&mut self, rep: usize, c: usize) {
        let Some(nginx) = self.servers.nginx else {
            return;
        };
        let url = format!("http://{nginx}/{}", self.info.small_file);
        let secs = self.opts.seconds;
        let label = format!("nginx 4KiB keep-alive c={c}");
        let tools = self.tools.loadgen();
        for ti in rotation(rep, tools.len()) {
            let tool = tools[ti];
            self.progress(rep, &format!("load {label:<22} {tool}"));
            let result = match tool {
                WRK => tools::wrk(&url, c, secs, true).map_err(Into::into),
                AB => tools::ab(&url, c, secs, true).map_err(Into::into),
                _ => http_load(&url, c, secs, true),
            };
            self.rows.push(Row::new(
                rep + 1,
                "loadgen",
                &label,
                NGINX,
                tool,
                c,
                result,
                None,
            ));
        }
    }

    /// One TCP stream on loopback: `servelab load` → `servelab tcp-server`, iperf3 -c → -s.
    fn measure_tcp(&mut self, rep: usize) {
        let secs = self.opts.seconds;
        let tools = self.tools.tcp();
        for ti in rotation(rep, tools.len()) {
            let tool = tools[ti];
            self.progress(rep, &format!("tcp  1 stream               {tool}"));
            let (result, server) = match tool {
                IPERF3 => (tools::iperf3(secs).map_err(Into::into), "iperf3 -s"),
                _ => (tcp_load(secs, &self.log_dir), "servelab tcp-server"),
            };
            self.rows.push(Row::new(
                rep + 1,
                "tcp",
                "loopback 1 stream",
                server,
                tool,
                1,
                result,
                None,
            ));
        }
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

    fn progress(&self, rep: usize, what: &str) {
        eprintln!("servelab bench: {}/{} {what}", rep + 1, self.opts.repeat);
    }

    /// Stops the servers and writes `setup.md`, `results.csv`, `summary.md` and
    /// `report.html`.
    fn finish(self) -> anyhow::Result<PathBuf> {
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

/// The dataset with 16 small files, the boot set, and a world-writable scratch directory
/// per NFS server for the metadata mix.
fn write_dataset(root: &Path) -> anyhow::Result<DatasetInfo> {
    let info = dataset::generate(
        root,
        DatasetSpec {
            small_set_files: 16,
            ..DatasetSpec::default()
        },
    )
    .context("cannot generate the dataset")?;
    bootset::write(root).context("cannot write the boot file set")?;
    for s in [RUSTNFS, GANESHA] {
        let d = root.join(format!("scratch-{s}"));
        std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
        use std::os::unix::fs::PermissionsExt as _;
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777));
    }
    Ok(info)
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
