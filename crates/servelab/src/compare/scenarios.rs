//! What a comparison runs: the list of HTTP scenario specs (B, A through rustnfs, A
//! across the emulated link, A through Ganesha, nginx, Apache) and how each is started.
//!
//! A new kind of scenario (a container, a CPU limit) is a new [`Launch`] variant and a
//! spec pushed onto the list; the measuring loops do not change.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use lab::peers::{Baseline, ExternalServer};

use super::link::{self, Link, LinkPath, LinkSpec};
use super::model::{A_SCENARIO, CLIENT_CACHE_SCENARIO, REFERENCE_SCENARIO};
use super::netns;
use crate::ours::ServerProcess;

/// The data cache size of [`CLIENT_CACHE_SCENARIO`]: room for the whole default dataset.
const DATA_CACHE: &str = "256M";

/// How a scenario's HTTP server is started.
#[derive(Debug, Clone)]
pub enum Launch {
    /// `servelab httpd --root DATASET`.
    HttpdLocal,
    /// `servelab httpd --nfs` reading from rustnfs, optionally across an emulated link,
    /// optionally with a client data cache (`--nfs-data-cache`, like a kernel mount's
    /// page cache: revalidated on every request, served from a local copy when
    /// unchanged; the copies' place is [`StartEnv::data_cache_dir`]).
    HttpdRustnfs {
        link: Option<LinkSpec>,
        data_cache: Option<&'static str>,
    },
    /// The unshaped control of a `netns+tbf` link: `servelab httpd --nfs` reading from a
    /// rustnfs of its own that listens inside a network namespace, across the same veth
    /// pair as the shaped wire but without tbf or relay ([`LinkPath::Veth`]).
    HttpdRustnfsVeth,
    /// `servelab httpd --nfs` reading from NFS-Ganesha.
    HttpdGanesha,
    /// nginx or Apache on the dataset.
    Peer(Baseline),
}

/// One HTTP scenario to run.
#[derive(Debug, Clone)]
pub struct ScenarioSpec {
    pub name: String,
    pub description: String,
    pub launch: Launch,
}

/// The scenarios of a run, B first.
pub fn specs(link: Option<LinkSpec>, ganesha: bool, peers: &[Baseline]) -> Vec<ScenarioSpec> {
    let mut v = vec![
        ScenarioSpec {
            name: REFERENCE_SCENARIO.into(),
            description: "httpd --root: local disk".into(),
            launch: Launch::HttpdLocal,
        },
        ScenarioSpec {
            name: A_SCENARIO.into(),
            description: "httpd --nfs: built-in NFSv3 client → rustnfs, every byte over the wire"
                .into(),
            launch: Launch::HttpdRustnfs {
                link: None,
                data_cache: None,
            },
        },
        ScenarioSpec {
            name: CLIENT_CACHE_SCENARIO.into(),
            description: format!(
                "httpd --nfs --nfs-data-cache {DATA_CACHE}: file data kept in a local copy, \
                 revalidated by one LOOKUP per request (close-to-open, like a kernel NFS \
                 mount's page cache — what the original experiment measured)"
            ),
            launch: Launch::HttpdRustnfs {
                link: None,
                data_cache: Some(DATA_CACHE),
            },
        },
    ];
    if let Some(spec) = link {
        v.push(control_spec(link::control_path(spec)));
        v.push(ScenarioSpec {
            name: format!("A (NFS: rustnfs, {spec})"),
            description: format!("httpd --nfs → emulated link ({spec}) → rustnfs"),
            launch: Launch::HttpdRustnfs {
                link: Some(spec),
                data_cache: None,
            },
        });
    }
    if ganesha {
        v.push(ScenarioSpec {
            name: "A (NFS: ganesha)".into(),
            description: "httpd --nfs: built-in NFSv3 client → NFS-Ganesha (VFS)".into(),
            launch: Launch::HttpdGanesha,
        });
    }
    for b in peers {
        v.push(ScenarioSpec {
            name: b.name().into(),
            description: format!(
                "{} serving the dataset from local disk (sendfile on)",
                b.name()
            ),
            launch: Launch::Peer(*b),
        });
    }
    v
}

/// The unshaped control row of a link whose control takes `path`: what the shaped row
/// is read against.
pub fn control_spec(path: LinkPath) -> ScenarioSpec {
    match path {
        LinkPath::Veth => ScenarioSpec {
            name: "A (NFS: rustnfs, veth, unshaped control)".into(),
            description:
                "httpd --nfs → veth pair (no tbf, no relay) → rustnfs in a network namespace".into(),
            launch: Launch::HttpdRustnfsVeth,
        },
        LinkPath::Relay | LinkPath::NetnsTbf | LinkPath::NetnsTbfDirect => ScenarioSpec {
            name: "A (NFS: rustnfs, relay, unshaped control)".into(),
            description: "httpd --nfs → userspace relay (no delay, no rate limit) → rustnfs".into(),
            launch: Launch::HttpdRustnfs {
                link: Some(LinkSpec::unshaped()),
                data_cache: None,
            },
        },
    }
}

/// A started HTTP scenario.
pub struct HttpScenario {
    pub name: String,
    pub description: String,
    pub addr: SocketAddr,
    /// Our httpd: scraped for its phase breakdown.
    pub ours: Option<ServerProcess>,
    /// A baseline: only its cost is sampled; held so it runs as long as the scenario.
    pub _peer: Option<ExternalServer>,
    /// The NFS server behind it is rustnfs (for procedure latencies).
    pub behind_rustnfs: bool,
    /// A rustnfs of this scenario's own (the `veth` control's, inside its namespace);
    /// `None`: the run's shared rustnfs, if any. Stopped before the link below goes.
    pub own_rustnfs: Option<ServerProcess>,
    /// The emulated link its NFS traffic crosses, held as long as the scenario.
    pub _link: Option<Link>,
    /// Every process that serves this scenario's requests (name, pid): the HTTP server,
    /// and the NFS server behind it. Each is sampled on its own; their sum is the
    /// scenario's service demand.
    pub serving: Vec<(String, u32)>,
}

/// What starting scenarios needs from the run.
pub struct StartEnv<'a> {
    pub root: &'a Path,
    pub log_dir: &'a Path,
    pub rustnfs: Option<&'a ServerProcess>,
    pub ganesha: Option<&'a ExternalServer>,
    pub nfs_cache_ms: u64,
    /// Where the client-cache row keeps its copies (`--nfs-data-cache-dir`); `None` =
    /// sealed memfds.
    pub data_cache_dir: Option<&'a Path>,
}

/// Starts one scenario.
pub fn start(spec: &ScenarioSpec, env: &StartEnv<'_>) -> anyhow::Result<HttpScenario> {
    let root_arg = env.root.display().to_string();
    let mut link = None;
    let mut notes = Vec::new();
    let mut own_rustnfs = None;
    let (args, behind_rustnfs) = match &spec.launch {
        Launch::HttpdLocal => (vec!["--root".to_string(), root_arg], false),
        Launch::HttpdRustnfs {
            link: l,
            data_cache,
        } => {
            let nfs = env
                .rustnfs
                .ok_or_else(|| anyhow::anyhow!("rustnfs is not running"))?;
            let addr = match l {
                None => nfs.addr,
                // A rate without a delay: this row's own rustnfs inside the shaped
                // namespace, no relay — the veth control plus tbf, nothing else.
                Some(s) if link::shaped_path(*s) == LinkPath::NetnsTbfDirect => {
                    let (l, own) = start_rustnfs_inside(env, *s)?;
                    let a = own.addr;
                    notes.push(l.path_note().to_string());
                    link = Some(l);
                    own_rustnfs = Some(own);
                    a
                }
                Some(s) => {
                    let started = Link::start(nfs.addr, *s)?;
                    let a = started.addr;
                    notes.push(started.path_note().to_string());
                    link = Some(started);
                    a
                }
            };
            let mut args = nfs_args(format!("nfs://{addr}/"), env.nfs_cache_ms);
            if let Some(size) = data_cache {
                args.extend(["--nfs-data-cache".to_string(), size.to_string()]);
                notes.push(match env.data_cache_dir {
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
            }
            (args, true)
        }
        Launch::HttpdRustnfsVeth => {
            let (l, nfs) = start_rustnfs_inside(env, LinkSpec::unshaped())?;
            let args = nfs_args(format!("nfs://{}/", nfs.addr), env.nfs_cache_ms);
            notes.push(l.path_note().to_string());
            link = Some(l);
            own_rustnfs = Some(nfs);
            (args, true)
        }
        Launch::HttpdGanesha => {
            let g = env
                .ganesha
                .ok_or_else(|| anyhow::anyhow!("NFS-Ganesha is not running"))?;
            let url = format!(
                "nfs://{}{}?mountport={}",
                g.addr,
                root_arg,
                g.extra_port.unwrap_or(0)
            );
            (nfs_args(url, env.nfs_cache_ms), false)
        }
        Launch::Peer(b) => {
            let server = start_peer(*b, env.root)?;
            return Ok(HttpScenario {
                name: spec.name.clone(),
                description: spec.description.clone(),
                addr: server.addr,
                serving: vec![(b.name().to_string(), server.pid())],
                ours: None,
                _peer: Some(server),
                behind_rustnfs: false,
                own_rustnfs: None,
                _link: None,
            });
        }
    };
    let p = ServerProcess::start(&spec.name, "httpd", &args, env.log_dir)?;
    let mut serving = vec![("httpd".to_string(), p.pid())];
    match &spec.launch {
        Launch::HttpdGanesha => {
            serving.extend(env.ganesha.map(|g| ("ganesha.nfsd".into(), g.pid())))
        }
        _ if behind_rustnfs => {
            let nfs = own_rustnfs.as_ref().or(env.rustnfs);
            serving.extend(nfs.map(|n| ("rustnfs".to_string(), n.pid())));
        }
        _ => {}
    }
    Ok(HttpScenario {
        serving,
        name: spec.name.clone(),
        description: match notes.is_empty() {
            false => format!("{} [{}]", spec.description, notes.join("; ")),
            true => spec.description.clone(),
        },
        addr: p.addr,
        ours: Some(p),
        _peer: None,
        behind_rustnfs,
        own_rustnfs,
        _link: link,
    })
}

/// A veth pair into a new namespace, limited to `spec`'s rate by tbf (none: the `veth`
/// control), and a rustnfs exporting the dataset inside it (NFS and metrics on the
/// namespace's address: nothing else listens there). `spec` has no delay.
fn start_rustnfs_inside(
    env: &StartEnv<'_>,
    spec: LinkSpec,
) -> anyhow::Result<(Link, ServerProcess)> {
    let wire = netns::Wire::create(spec.rate_bits_per_sec)?;
    let exe = std::env::current_exe()?;
    let nfs = ServerProcess::start_at(
        match spec.rate_bits_per_sec {
            None => "rustnfs (veth control)",
            Some(_) => "rustnfs (inside the shaped link)",
        },
        &exe,
        "rustnfs",
        // As the Ganesha peer (No_Root_Squash): the load runs as root.
        &[
            "--export".into(),
            env.root.display().to_string(),
            "--no-root-squash".into(),
        ],
        env.log_dir,
        SocketAddr::from((wire.ns_ip, 2049)),
        SocketAddr::from((wire.ns_ip, 9100)),
        |cmd| wire.enter_before_exec(cmd),
    )?;
    let addr = nfs.addr;
    Ok((Link::inside(wire, addr, spec), nfs))
}

fn start_peer(b: Baseline, root: &Path) -> lab::Result<ExternalServer> {
    b.start(root)
}

/// `httpd` arguments for scenario A: the export and the NFS cache lifetime.
fn nfs_args(url: String, cache_ms: u64) -> Vec<String> {
    vec![
        "--nfs".into(),
        url,
        "--nfs-attr-ttl-ms".into(),
        cache_ms.to_string(),
    ]
}

/// A directory inside the export for the NFS metadata run, removed afterwards so a
/// user's own dataset is left as it was.
pub struct ScratchDir {
    path: PathBuf,
    pub name: String,
}

impl ScratchDir {
    pub fn create(root: &Path) -> anyhow::Result<Self> {
        use std::os::unix::fs::PermissionsExt as _;
        let name = format!(".servelab-scratch-{}", std::process::id());
        let path = root.join(&name);
        std::fs::create_dir_all(&path)
            .and_then(|_| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)))
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot create {}: {e} (the NFS metadata run needs a writable dataset)",
                    path.display()
                )
            })?;
        Ok(ScratchDir { path, name })
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
