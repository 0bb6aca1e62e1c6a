//! What a comparison runs: the list of HTTP scenario specs (B, A through rustnfs, A
//! across the emulated link, A through Ganesha, nginx, Apache, h2o), each started as a
//! serving stack by the experiment layer ([`crate::experiment::stack`]).
//!
//! A new kind of scenario (a container, a CPU limit) is a new [`Launch`] variant and a
//! spec pushed onto the list; the measuring loops do not change.

use std::path::{Path, PathBuf};

use lab::peers::Baseline;

use super::model::{A_SCENARIO, A42_SCENARIO, CLIENT_CACHE_SCENARIO, REFERENCE_SCENARIO};
use crate::experiment::link::{self, LinkPath, LinkSpec};
use crate::experiment::stack::Launch;

/// The data cache size of [`CLIENT_CACHE_SCENARIO`]: room for the whole default dataset.
const DATA_CACHE: &str = "256M";

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
            description: "httpd --nfs --nfs-version 3: built-in NFSv3 client → rustnfs, every byte over the wire"
                .into(),
            launch: Launch::HttpdRustnfs {
                link: None,
                data_cache: None,
            },
        },
        ScenarioSpec {
            name: A42_SCENARIO.into(),
            description: "httpd --nfs --nfs-version 4.2: built-in NFSv4.2 client (a session, one COMPOUND per call) → rustnfs, every byte over the wire"
                .into(),
            launch: Launch::HttpdRustnfsOver {
                version: nfsclient::NfsVersion::V4_2,
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
