//! The table of exports being served: each export's jail and client list, found by a
//! handle's generation, by a MOUNT path, or by its root (NFSv4 crossing into a nested
//! export); and the NFSv4 root (an export, or the pseudo-filesystem joining them).
//!
//! Built from the one-export flags, or from an exports file (`file`): every directory
//! is opened when the table is built, so a table either serves every line or is
//! refused with the line that cannot be served. A rebuilt table (a reload) keeps the
//! jail — open root, inode map, open files — of every export whose directory is the
//! same, so its clients notice nothing.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use latency::Registry;
use nfs3_types::mount::mountstat3;

use super::ExportsError;
use super::clients::Pattern;
use super::export::{Export, beneath};
use super::file::{Client, ExportLine, Fsid, Mountpoint, Options};
use super::pseudo::Pseudo;
use crate::config::Config;
use crate::fs::{DirFs, Fh, FsidSource, Policy};

/// Where a table's exports come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `--export` and its flags: one export, mounted as `/` (and by its path), the
    /// NFSv4 root.
    Flags,
    /// An exports file (reloaded on SIGHUP).
    File(PathBuf),
}

/// What the NFSv4 root is.
pub enum V4Root {
    /// This export (`fsid=0`, an export of `/`, or the one-export flags): NFSv4 paths are
    /// relative to it.
    Export(usize),
    /// The pseudo-filesystem of the exports' paths.
    Pseudo(Pseudo),
}

/// The exports being served.
pub struct Table {
    pub origin: Origin,
    /// In file order.
    pub exports: Vec<Arc<Export>>,
    by_generation: HashMap<u64, usize>,
    by_root: HashMap<(u64, u64), usize>,
    pub v4: V4Root,
    /// When the table was built (the pseudo-filesystem's times).
    pub loaded: SystemTime,
}

impl Table {
    /// The one export of the `--export` flags (`config.export`, `read_only`, `allow`,
    /// `squash`), as served before exports files.
    pub fn from_flags(config: &Config, registry: Arc<Registry>) -> Result<Table, ExportsError> {
        let fs = DirFs::open(config, registry).map_err(|e| ExportsError::Flags(Box::new(e)))?;
        Ok(Table::single(fs, &config.allow))
    }

    /// A table of one export: `fs`, with its own options, to the clients in `allow`
    /// (everyone when empty).
    pub fn single(fs: DirFs, allow: &[ipnet::IpNet]) -> Table {
        let policy = fs.policy();
        let options = Options {
            read_only: policy.read_only,
            squash: policy.squash,
            secure: false,
            readdirplus: true,
        };
        let clients = if allow.is_empty() {
            vec![Client {
                text: "*".into(),
                pattern: Pattern::Anyone,
                options,
            }]
        } else {
            allow
                .iter()
                .map(|net| Client {
                    text: net.to_string(),
                    pattern: Pattern::Net(*net),
                    options,
                })
                .collect()
        };
        let line = ExportLine {
            line: 0,
            path: "/".into(),
            clients,
            fsid: None,
            mountpoint: None,
        };
        let export = Arc::new(Export { line, fs });
        Table::index(Origin::Flags, vec![export], V4Root::Export(0))
    }

    /// The table of an exports file's `lines`, reusing the jails of `old` whose
    /// directory is unchanged. Every directory must open; exports whose `mountpoint`
    /// is not mounted are left out (as knfsd does), with a warning.
    pub fn from_lines(
        file: &Path,
        lines: Vec<ExportLine>,
        old: Option<&Table>,
        config: &Config,
        registry: &Arc<Registry>,
    ) -> Result<Table, ExportsError> {
        let mut exports: Vec<Arc<Export>> = Vec::new();
        let mut roots: HashMap<(u64, u64), usize> = HashMap::new();
        for line in lines {
            if let Some(mp) = &line.mountpoint
                && !mounted(&line.path, mp)
            {
                tracing::warn!(
                    "{}:{}: {} is not exported: no file system is mounted at {}",
                    file.display(),
                    line.line,
                    line.path,
                    match mp {
                        Mountpoint::Itself => line.path.as_str(),
                        Mountpoint::At(p) => p.as_str(),
                    }
                );
                continue;
            }
            let fs = open(file, &line, old, config, registry)?;
            if let Some(&other) = roots.get(&fs.root_id()) {
                let first = &exports[other].line;
                return Err(ExportsError::SameDirectory {
                    file: file.to_path_buf(),
                    line: line.line,
                    path: line.path,
                    other: first.path.clone(),
                    other_line: first.line,
                });
            }
            if let Some(other) = exports
                .iter()
                .find(|e| e.fs.generation() == fs.generation())
            {
                // Two roots hashed alike: their handles could not be told apart.
                return Err(ExportsError::HandleClash {
                    file: file.to_path_buf(),
                    line: line.line,
                    path: line.path,
                    other: other.line.path.clone(),
                });
            }
            roots.insert(fs.root_id(), exports.len());
            exports.push(Arc::new(Export { line, fs }));
        }
        if exports.is_empty() {
            return Err(ExportsError::Empty {
                file: file.to_path_buf(),
            });
        }
        let root = exports
            .iter()
            .position(|e| e.line.fsid == Some(Fsid::Root) || e.line.path == "/");
        let v4 = match root {
            Some(i) => {
                warn_unreachable_over_v4(file, &exports, i);
                V4Root::Export(i)
            }
            None => V4Root::Pseudo(Pseudo::build(&exports)),
        };
        Ok(Table::index(Origin::File(file.to_path_buf()), exports, v4))
    }

    fn index(origin: Origin, exports: Vec<Arc<Export>>, v4: V4Root) -> Table {
        let by_generation = exports
            .iter()
            .enumerate()
            .map(|(i, e)| (e.fs.generation(), i))
            .collect();
        let by_root = exports
            .iter()
            .enumerate()
            .map(|(i, e)| (e.fs.root_id(), i))
            .collect();
        Table {
            origin,
            exports,
            by_generation,
            by_root,
            v4,
            loaded: SystemTime::now(),
        }
    }

    /// The export a handle belongs to, and its index.
    pub fn by_handle(&self, fh: &Fh) -> Option<(usize, &Arc<Export>)> {
        self.by_generation
            .get(&fh.generation())
            .map(|&i| (i, &self.exports[i]))
    }

    /// The export whose root has this `(inode, birth time)`.
    pub fn by_root(&self, id: (u64, u64)) -> Option<(usize, &Arc<Export>)> {
        self.by_root.get(&id).map(|&i| (i, &self.exports[i]))
    }

    /// Whether some export other than `i` lies beneath export `i` (NFSv4 then checks
    /// the directories it looks up for their roots).
    pub fn has_nested(&self, i: usize) -> bool {
        let parent = &self.exports[i].line.path;
        self.exports
            .iter()
            .enumerate()
            .any(|(j, e)| j != i && beneath(&e.line.path, parent))
    }

    /// The export containing export `i` most closely (by path), if any.
    pub fn parent_of(&self, i: usize) -> Option<usize> {
        let path = &self.exports[i].line.path;
        self.exports
            .iter()
            .enumerate()
            .filter(|(j, e)| *j != i && beneath(path, &e.line.path))
            .max_by_key(|(_, e)| e.line.path.len())
            .map(|(j, _)| j)
    }

    /// MOUNT: the handle of `path` for a client at `peer` — in the export whose path is
    /// the longest prefix of it among those exported to the client (rpc.mountd's rule),
    /// walked beneath that export's root as the server. `ACCES` when only exports not
    /// exported to this client (or not from its port, with `secure`) match.
    pub fn mount(&self, path: &[u8], peer: Option<SocketAddr>) -> Result<Fh, mountstat3> {
        let allowed = |e: &Export| {
            e.options_for(peer.map(|p| p.ip()))
                .is_some_and(|o| !o.secure || peer.is_some_and(|p| p.port() < 1024))
        };
        if self.origin == Origin::Flags {
            let e = &self.exports[0];
            return if allowed(e) {
                e.fs.mount(path)
            } else {
                Err(mountstat3::MNT3ERR_ACCES)
            };
        }
        let wanted = super::file::normalize(&String::from_utf8_lossy(path));
        let matching = || {
            self.exports
                .iter()
                .filter(|e| e.line.path == wanted || beneath(&wanted, &e.line.path))
        };
        let Some(e) = matching()
            .filter(|e| allowed(e))
            .max_by_key(|e| e.line.path.len())
        else {
            return Err(if matching().next().is_some() {
                mountstat3::MNT3ERR_ACCES
            } else {
                mountstat3::MNT3ERR_NOENT
            });
        };
        let rest = wanted[e.line.path.len()..].trim_start_matches('/');
        e.fs.mount(format!("/{rest}").as_bytes())
    }

    /// MOUNT's EXPORT list: every export's path and its clients as written (the one-export
    /// flags: `/`, and the `--allow` networks, none meaning everyone).
    pub fn list(&self) -> Vec<(String, Vec<String>)> {
        self.exports
            .iter()
            .map(|e| {
                let clients = if self.origin == Origin::Flags
                    && e.line.clients.iter().all(|c| c.pattern == Pattern::Anyone)
                {
                    Vec::new()
                } else {
                    e.line.clients.iter().map(|c| c.text.clone()).collect()
                };
                (e.line.path.clone(), clients)
            })
            .collect()
    }

    /// Whether a connection from `ip` may be served at all: some export lists it, or it
    /// is loopback (the container's own health check) — everyone else is closed at
    /// accept, as `--allow` does for the one-export flags.
    pub fn admits(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        if self.origin == Origin::Flags {
            return self.exports[0].options_for(Some(ip)).is_some();
        }
        ip.is_loopback()
            || self
                .exports
                .iter()
                .any(|e| e.options_for(Some(ip)).is_some())
    }
}

/// Opens a line's directory, or reuses `old`'s jail of the same directory (same root
/// inode and birth time, same fsid).
fn open(
    file: &Path,
    line: &ExportLine,
    old: Option<&Table>,
    config: &Config,
    registry: &Arc<Registry>,
) -> Result<DirFs, ExportsError> {
    let fsid = match line.fsid {
        Some(f) => FsidSource::Value(f.value()),
        None => FsidSource::Generation,
    };
    let refused = |source| ExportsError::Open {
        file: file.to_path_buf(),
        line: line.line,
        source: Box::new(source),
    };
    let dir = Path::new(&line.path);
    if !dir.is_dir() {
        return Err(ExportsError::NotADirectory {
            file: file.to_path_buf(),
            line: line.line,
            path: line.path.clone(),
            what: if dir.exists() {
                "not a directory"
            } else {
                "no such directory"
            },
        });
    }
    let policy = Policy {
        read_only: true,
        squash: crate::identity::Squash::Root,
    };
    let fresh = DirFs::open_dir(dir, fsid, policy, config, registry.clone()).map_err(refused)?;
    if let Some(old) = old
        && let Some((_, e)) = old.by_root(fresh.root_id())
        && e.line.fsid == line.fsid
        && e.fs.export() == fresh.export()
    {
        return Ok(e.fs.clone());
    }
    Ok(fresh)
}

/// Warns of exports an NFSv4 client cannot reach: not beneath the `fsid=0` export.
fn warn_unreachable_over_v4(file: &Path, exports: &[Arc<Export>], root: usize) {
    let top = &exports[root].line.path;
    for (i, e) in exports.iter().enumerate() {
        if i != root && !beneath(&e.line.path, top) {
            tracing::warn!(
                "{}:{}: {} is not beneath the fsid=0 export {top}: NFSv4 clients cannot reach it (NFSv3 clients can)",
                file.display(),
                e.line.line,
                e.line.path
            );
        }
    }
}

/// Whether a file system is mounted where `mp` says (`/proc/self/mountinfo`, field 5).
fn mounted(path: &str, mp: &Mountpoint) -> bool {
    let at = match mp {
        Mountpoint::Itself => path,
        Mountpoint::At(p) => p.as_str(),
    };
    let want = std::fs::canonicalize(at).unwrap_or_else(|_| PathBuf::from(at));
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    info.lines().any(|l| {
        l.split(' ')
            .nth(4)
            .is_some_and(|p| Path::new(&unescape_mountinfo(p)) == want)
    })
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8)
        {
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
