//! A serving stack: the HTTP server a run measures and everything behind it — the NFS
//! server it reads, the emulated link between them — started one way for every
//! experiment ([`start`] from a [`Launch`]), and held as a [`Stack`]: where it answers,
//! which parts serve it (each sampled by the probe), which of ours can be scraped.
//! A new kind of stack is a new `Launch` variant; the measuring loops do not change.

use std::any::Any;
use std::net::SocketAddr;
use std::path::Path;

use lab::peers::Baseline;
use nfsclient::NfsVersion;

use super::link::{self, Link, LinkPath, LinkSpec};
use super::netns;
use super::nfs::{NfsExport, NfsServer, rustnfs_args};
use super::ours::{Metrics, ServerProcess};
use super::probe::Part;

/// How a stack's HTTP server is started.
#[derive(Debug, Clone)]
pub enum Launch {
    /// `servelab httpd --root DATASET`.
    HttpdLocal,
    /// `servelab httpd --nfs` reading from the run's rustnfs, optionally across an
    /// emulated link, optionally with a client data cache (`--nfs-data-cache`, like a
    /// kernel mount's page cache: revalidated on every request, served from a local
    /// copy when unchanged; the copies' place is [`StartEnv::data_cache_dir`]).
    HttpdRustnfs {
        link: Option<LinkSpec>,
        data_cache: Option<&'static str>,
    },
    /// `servelab httpd --nfs --nfs-version VERSION` reading from the run's rustnfs, no
    /// link, no cache: scenario A over another protocol version than v3 (the other
    /// `--nfs` stacks speak NFSv3).
    HttpdRustnfsOver { version: NfsVersion },
    /// The unshaped control of a `netns+tbf` link: `servelab httpd --nfs` reading from a
    /// rustnfs of its own that listens inside a network namespace, across the same veth
    /// pair as the shaped wire but without tbf or relay ([`LinkPath::Veth`]).
    HttpdRustnfsVeth,
    /// `servelab httpd --nfs` reading from the run's NFS-Ganesha.
    HttpdGanesha,
    /// A third-party HTTP server (nginx, Apache, h2o) on the dataset.
    Peer(Baseline),
}

impl Launch {
    /// Whether a headline restart starts this stack anew: our httpd on local disk and
    /// every httpd that reads the run's shared rustnfs (which the restart replaces, so
    /// one left running would read a stopped server). No `_` arm: a new way to launch
    /// must decide.
    pub fn restarts_with_the_run(&self) -> bool {
        match self {
            Launch::HttpdLocal | Launch::HttpdRustnfs { .. } | Launch::HttpdRustnfsOver { .. } => {
                true
            }
            Launch::HttpdRustnfsVeth | Launch::HttpdGanesha | Launch::Peer(_) => false,
        }
    }
}

/// What starting stacks needs from the run.
pub struct StartEnv<'a> {
    pub root: &'a Path,
    pub log_dir: &'a Path,
    pub rustnfs: Option<&'a NfsServer>,
    pub ganesha: Option<&'a NfsServer>,
    /// httpd's NFS cache lifetime (`--nfs-attr-ttl-ms`); `None`: httpd's default.
    pub nfs_cache_ms: Option<u64>,
    /// Where a client data cache keeps its copies (`--nfs-data-cache-dir`); `None` =
    /// sealed memfds.
    pub data_cache_dir: Option<&'a Path>,
}

/// A started serving stack.
pub struct Stack {
    pub name: String,
    pub description: String,
    /// Where its HTTP service answers.
    pub addr: SocketAddr,
    /// Every part that serves its requests: the HTTP server and the NFS server behind
    /// it. Each is sampled on its own; their sum is the stack's service demand.
    pub parts: Vec<Part>,
    /// Our httpd's metrics (its request phases), when the HTTP server is ours.
    pub http_metrics: Option<Metrics>,
    /// The metrics of the rustnfs behind it (its procedures), when it reads one.
    pub nfs_metrics: Option<Metrics>,
    /// What runs as long as the stack: the HTTP server, its own NFS server, its link —
    /// stopped in this order when the stack is dropped.
    held: Vec<Box<dyn Any>>,
}

impl Stack {
    /// A stack started elsewhere (a container, a host process of a deployment), reached
    /// at `addr` and served by `parts`.
    pub fn new(name: impl Into<String>, addr: SocketAddr, parts: Vec<Part>) -> Stack {
        Stack {
            name: name.into(),
            description: String::new(),
            addr,
            parts,
            http_metrics: None,
            nfs_metrics: None,
            held: Vec::new(),
        }
    }

    /// Keeps `thing` running as long as the stack (dropped after what was held before).
    pub fn hold(&mut self, thing: impl Any) {
        self.held.push(Box::new(thing));
    }

    /// The URL of `path` (with its leading `/`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// The NFS server behind a stack: its process (sampled with the stack) and, for
/// rustnfs, its metrics.
struct Behind {
    process: &'static str,
    pid: u32,
    metrics: Option<Metrics>,
}

impl Behind {
    fn of(n: &NfsServer) -> Behind {
        Behind {
            process: n.process,
            pid: n.pid,
            metrics: n.metrics.clone(),
        }
    }
}

/// Starts one stack named `name`; `description` says what it is (how its link and
/// cache were built is added in brackets).
pub fn start(
    name: &str,
    description: &str,
    launch: &Launch,
    env: &StartEnv<'_>,
) -> anyhow::Result<Stack> {
    if let Launch::Peer(b) = launch {
        let server = b.start(env.root)?;
        let mut stack = Stack::new(
            name,
            server.addr,
            vec![Part::process(b.name(), server.pid())],
        );
        stack.description = description.to_string();
        stack.hold(server);
        return Ok(stack);
    }
    let mut notes = Vec::new();
    let mut behind: Vec<Box<dyn Any>> = Vec::new();
    let (args, nfs): (Vec<String>, Option<Behind>) = match launch {
        Launch::HttpdLocal => (
            vec!["--root".to_string(), env.root.display().to_string()],
            None,
        ),
        Launch::HttpdRustnfs { link, data_cache } => {
            let shared = env
                .rustnfs
                .ok_or_else(|| anyhow::anyhow!("rustnfs is not running"))?;
            let (export, nfs) = across(shared, *link, env, &mut notes, &mut behind)?;
            let mut args = nfs_args(&export, env.nfs_cache_ms, NfsVersion::V3);
            if let Some(size) = data_cache {
                args.extend(data_cache_args(size, env.data_cache_dir, &mut notes));
            }
            (args, Some(nfs))
        }
        Launch::HttpdRustnfsOver { version } => {
            let shared = env
                .rustnfs
                .ok_or_else(|| anyhow::anyhow!("rustnfs is not running"))?;
            let args = nfs_args(&shared.export, env.nfs_cache_ms, *version);
            (args, Some(Behind::of(shared)))
        }
        Launch::HttpdRustnfsVeth => {
            let (l, own) = start_rustnfs_inside(env, LinkSpec::unshaped())?;
            notes.push(l.path_note().to_string());
            let args = nfs_args(&own.export, env.nfs_cache_ms, NfsVersion::V3);
            let nfs = Behind::of(&own);
            behind.push(Box::new(own));
            behind.push(Box::new(l));
            (args, Some(nfs))
        }
        Launch::HttpdGanesha => {
            let g = env
                .ganesha
                .ok_or_else(|| anyhow::anyhow!("NFS-Ganesha is not running"))?;
            let args = nfs_args(&g.export, env.nfs_cache_ms, NfsVersion::V3);
            (args, Some(Behind::of(g)))
        }
        Launch::Peer(_) => unreachable!("peers are started above"),
    };
    let httpd = ServerProcess::start(name, "httpd", &args, env.log_dir)?;
    let mut stack = Stack::new(name, httpd.addr, vec![Part::process("httpd", httpd.pid())]);
    stack.http_metrics = Some(httpd.metrics());
    if let Some(b) = nfs {
        stack.parts.push(Part::process(b.process, b.pid));
        stack.nfs_metrics = b.metrics;
    }
    stack.description = match notes.is_empty() {
        true => description.to_string(),
        false => format!("{description} [{}]", notes.join("; ")),
    };
    // The HTTP server stops first, then its own NFS server, then the link under it.
    stack.hold(httpd);
    for b in behind {
        stack.held.push(b);
    }
    Ok(stack)
}

/// The export httpd reads for the run's rustnfs `shared` across `link` (none: directly),
/// and the NFS server that serves it (name, pid, metrics). A rate without a delay gets a
/// rustnfs of its own inside the shaped namespace, no relay — the veth control plus tbf,
/// nothing else.
fn across(
    shared: &NfsServer,
    link: Option<LinkSpec>,
    env: &StartEnv<'_>,
    notes: &mut Vec<String>,
    behind: &mut Vec<Box<dyn Any>>,
) -> anyhow::Result<(NfsExport, Behind)> {
    let of_shared = Behind::of(shared);
    let Some(spec) = link else {
        return Ok((shared.export.clone(), of_shared));
    };
    if link::shaped_path(spec) == LinkPath::NetnsTbfDirect {
        let (l, own) = start_rustnfs_inside(env, spec)?;
        notes.push(l.path_note().to_string());
        let out = (own.export.clone(), Behind::of(&own));
        behind.push(Box::new(own));
        behind.push(Box::new(l));
        return Ok(out);
    }
    let upstream = SocketAddr::new(shared.export.ip, shared.export.port.unwrap_or(2049));
    let l = Link::start(upstream, spec)?;
    notes.push(l.path_note().to_string());
    let export = NfsExport::rustnfs(l.addr);
    behind.push(Box::new(l));
    Ok((export, of_shared))
}

/// A veth pair into a new namespace, limited to `spec`'s rate by tbf (none: the `veth`
/// control), and a rustnfs exporting the dataset inside it (NFS and metrics on the
/// namespace's address: nothing else listens there). `spec` has no delay.
fn start_rustnfs_inside(env: &StartEnv<'_>, spec: LinkSpec) -> anyhow::Result<(Link, NfsServer)> {
    let wire = netns::Wire::create(spec.rate_bits_per_sec)?;
    let exe = std::env::current_exe()?;
    let nfs = ServerProcess::start_at(
        match spec.rate_bits_per_sec {
            None => "rustnfs (veth control)",
            Some(_) => "rustnfs (inside the shaped link)",
        },
        &exe,
        "rustnfs",
        &rustnfs_args(env.root),
        env.log_dir,
        SocketAddr::from((wire.ns_ip, 2049)),
        SocketAddr::from((wire.ns_ip, 9100)),
        |cmd| wire.enter_before_exec(cmd),
    )?;
    let addr = nfs.addr;
    Ok((Link::inside(wire, addr, spec), NfsServer::rustnfs(nfs)))
}

/// `httpd` arguments for reading an export: its URL, the protocol version (httpd's own
/// default is what a kernel mount negotiates, so every stack names its version) and the
/// NFS cache lifetime.
fn nfs_args(export: &NfsExport, cache_ms: Option<u64>, version: NfsVersion) -> Vec<String> {
    let mut args = vec![
        "--nfs".into(),
        export.httpd_url(),
        "--nfs-version".into(),
        version.to_string(),
    ];
    if let Some(ms) = cache_ms {
        args.extend(["--nfs-attr-ttl-ms".into(), ms.to_string()]);
    }
    args
}

/// `httpd` arguments for a client data cache of `size`, its copies in `dir` (memfds
/// without one), and the note the report gives it.
fn data_cache_args(size: &str, dir: Option<&Path>, notes: &mut Vec<String>) -> Vec<String> {
    let mut args = vec!["--nfs-data-cache".to_string(), size.to_string()];
    notes.push(match dir {
        Some(dir) => {
            args.extend([
                "--nfs-data-cache-dir".to_string(),
                dir.display().to_string(),
            ]);
            format!(
                "copies: unlinked files in {} ({})",
                dir.display(),
                httpd::storage::cache_file::file_system_name(dir)
            )
        }
        None => "copies: sealed memfds".to_string(),
    });
    args
}
