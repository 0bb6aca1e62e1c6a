//! Exports: what is served, to whom, with which options — and the one door every
//! protocol goes through to reach an export's files.
//!
//! # Layout
//! - `file`: the exports(5) format read into export lines, or refused with the line;
//!   the list of options and what rustnfs does with each ([`OPTIONS`]).
//! - `clients`: client patterns (`*`, hosts, networks, names) and matching addresses.
//! - `table`: the exports being served: each one's jail (`fs::DirFs`) and clients,
//!   found by handle, MOUNT path or root; the NFSv4 root.
//! - `pseudo`: the NFSv4 pseudo-filesystem joining the exports.
//! - `calls`: [`Exports`]'s file-system calls — the `DirFs` calls, routed by the
//!   handle's export, with the calling client's options (read-only, squash, `secure`)
//!   and visibility; the NFSv3, MOUNT and NFSv4 code calls them.
//!
//! # The calling client
//! Which client is calling is a per-thread value set for the length of one call
//! ([`CallScope`]), as `identity::Scope` sets who is calling: the front door knows the
//! connection, and every call is answered synchronously on its thread. The caller's
//! identity in that scope is the credential as sent; each call into an export acts as
//! it after that export's squashing for this client.
//!
//! # Reloading
//! [`Exports::reload`] reads the file again and swaps the table whole, or keeps the old
//! one and says why. Exports whose directory is unchanged keep their jail (open root,
//! inode map, open files), so their clients' handles and calls go on untouched;
//! connections are never closed by a reload.

mod calls;
mod clients;
mod export;
mod file;
mod problem;
mod pseudo;
mod table;
#[cfg(test)]
mod tests;

use std::cell::Cell;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use latency::Registry;
use parking_lot::RwLock;

use crate::config::Config;
use crate::fs::DirFs;
pub use file::{OPTIONS, Support};
use table::{Origin, Table};

/// Why an exports file cannot be served: one line, naming the file and the line.
#[derive(Debug, thiserror::Error)]
pub enum ExportsError {
    #[error("{}: cannot read: {source}", file.display())]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{}: {}", file.display(), error.line, error.problem)]
    Line {
        file: PathBuf,
        error: file::LineError,
    },
    #[error("{}:{line}: {path}: {what}", file.display())]
    NotADirectory {
        file: PathBuf,
        line: usize,
        path: String,
        what: &'static str,
    },
    #[error("{}:{line}", file.display())]
    Open {
        file: PathBuf,
        line: usize,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The one-export flags' directory cannot be opened.
    #[error(transparent)]
    Flags(Box<dyn std::error::Error + Send + Sync>),
    #[error(
        "{}:{line}: {path} is the same directory as {other} on line {other_line}; export it once",
        file.display()
    )]
    SameDirectory {
        file: PathBuf,
        line: usize,
        path: String,
        other: String,
        other_line: usize,
    },
    #[error(
        "{}:{line}: {path} and {other} hash to the same handle generation (1 in 2^63); recreate one of the two directories",
        file.display()
    )]
    HandleClash {
        file: PathBuf,
        line: usize,
        path: String,
        other: String,
    },
    #[error("{}: no exports (every line is blank, a comment, or an unmounted mountpoint)", file.display())]
    Empty { file: PathBuf },
    #[error(
        "{}:{line}: all_squash to {uid}:{gid} needs acting as the caller, which this process cannot (run as root with the default capabilities, or squash to {own_uid}:{own_gid})",
        file.display()
    )]
    SquashNeedsIdentity {
        file: PathBuf,
        line: usize,
        uid: u32,
        gid: u32,
        own_uid: u32,
        own_gid: u32,
    },
}

/// The exports being served, swapped whole on reload. Cheap to clone.
#[derive(Clone)]
pub struct Exports {
    live: Arc<Live>,
}

struct Live {
    table: RwLock<Arc<Table>>,
    /// The server-wide settings every export is opened with.
    config: Config,
    registry: Arc<Registry>,
}

/// What a reload changed, by export path.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reloaded {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Same directory, other clients or options.
    pub changed: Vec<String>,
    pub unchanged: Vec<String>,
}

impl Exports {
    /// The exports `config` names: its exports file, or the one `--export` directory.
    pub fn open(config: &Config, registry: Arc<Registry>) -> Result<Exports, ExportsError> {
        let table = match &config.exports_file {
            Some(file) => read_file(file, None, config, &registry)?,
            None => Table::from_flags(config, registry.clone())?,
        };
        Ok(Exports::from_table(table, config.clone(), registry))
    }

    fn from_table(table: Table, config: Config, registry: Arc<Registry>) -> Exports {
        Exports {
            live: Arc::new(Live {
                table: RwLock::new(Arc::new(table)),
                config,
                registry,
            }),
        }
    }

    /// The table now being served.
    fn table(&self) -> Arc<Table> {
        self.live.table.read().clone()
    }

    /// The exports file, when the exports come from one.
    pub fn file(&self) -> Option<PathBuf> {
        match &self.table().origin {
            Origin::File(f) => Some(f.clone()),
            Origin::Flags => None,
        }
    }

    /// The paths served and their clients, as MOUNT's EXPORT lists them.
    pub fn list(&self) -> Vec<(String, Vec<String>)> {
        self.table().list()
    }

    /// Each export as served: its path and its clients with every option in effect
    /// (`/srv/a 10.0.0.0/8(rw,root_squash,insecure)`), for the server's log.
    pub fn describe(&self) -> Vec<String> {
        self.table()
            .exports
            .iter()
            .map(|e| {
                let clients: Vec<String> = e
                    .line
                    .clients
                    .iter()
                    .map(|c| format!("{}({})", c.text, c.options))
                    .collect();
                format!("{} {}", e.line.path, clients.join(" "))
            })
            .collect()
    }

    /// Reads the exports file again and serves it, or keeps serving the old table and
    /// returns why not (one line: file, line, what is wrong).
    pub fn reload(&self) -> Result<Reloaded, ExportsError> {
        let old = self.table();
        let Origin::File(file) = &old.origin else {
            return Ok(Reloaded::default());
        };
        let new = read_file(file, Some(&old), &self.live.config, &self.live.registry)?;
        let mut r = Reloaded::default();
        for e in &new.exports {
            let before = old.exports.iter().find(|o| o.line.path == e.line.path);
            let list = match before {
                None => &mut r.added,
                Some(o) if o.fs.same_export(&e.fs) && o.line.clients == e.line.clients => {
                    &mut r.unchanged
                }
                Some(_) => &mut r.changed,
            };
            list.push(e.line.path.clone());
        }
        for o in &old.exports {
            if !new.exports.iter().any(|e| e.line.path == o.line.path) {
                r.removed.push(o.line.path.clone());
            }
        }
        *self.live.table.write() = Arc::new(new);
        Ok(r)
    }
}

/// One export, `fs`, with its own options, to everyone (embedders and tests).
impl From<DirFs> for Exports {
    fn from(fs: DirFs) -> Exports {
        let registry = Registry::new("rustnfs_nfs");
        let config = Config::new(fs.export());
        Exports::from_table(Table::single(fs, &[]), config, registry)
    }
}

/// Reads and builds an exports file's table (jails of `old` reused where unchanged).
fn read_file(
    file: &Path,
    old: Option<&Table>,
    config: &Config,
    registry: &Arc<Registry>,
) -> Result<Table, ExportsError> {
    let text = std::fs::read_to_string(file).map_err(|source| ExportsError::Read {
        file: file.to_path_buf(),
        source,
    })?;
    let lines =
        file::parse(&text, &clients::system_resolver).map_err(|error| ExportsError::Line {
            file: file.to_path_buf(),
            error,
        })?;
    check_squash(file, &lines, config)?;
    Table::from_lines(file, lines, old, config, registry)
}

/// all_squash to another identity needs acting as the caller (as `--squash` does).
fn check_squash(
    file: &Path,
    lines: &[file::ExportLine],
    config: &Config,
) -> Result<(), ExportsError> {
    if !config.act_as_caller || crate::identity::capability().is_ok() {
        return Ok(());
    }
    // SAFETY: plain queries of this process's identity.
    let own = unsafe { (libc::geteuid(), libc::getegid()) };
    for l in lines {
        for c in &l.clients {
            if let crate::identity::Squash::All(uid, gid) = c.options.squash
                && (uid, gid) != own
            {
                return Err(ExportsError::SquashNeedsIdentity {
                    file: file.to_path_buf(),
                    line: l.line,
                    uid,
                    gid,
                    own_uid: own.0,
                    own_gid: own.1,
                });
            }
        }
    }
    Ok(())
}

/// The client a call comes from, while it is answered on this thread.
#[derive(Debug, Clone, Copy)]
pub struct CallFrom {
    /// `None`: not known (a caller outside the front door); only `*` matches it.
    pub peer: Option<SocketAddr>,
    /// NFSv4 (the pseudo-filesystem and crossing into nested exports); else NFSv3 or
    /// MOUNT.
    pub v4: bool,
}

thread_local! {
    static CALL: Cell<Option<CallFrom>> = const { Cell::new(None) };
}

/// Sets the calling client for one call on this thread; the previous one comes back
/// when it is dropped.
pub struct CallScope {
    previous: Option<CallFrom>,
}

impl CallScope {
    pub fn enter(from: CallFrom) -> CallScope {
        CallScope {
            previous: CALL.with(|c| c.replace(Some(from))),
        }
    }
}

impl Drop for CallScope {
    fn drop(&mut self) {
        CALL.with(|c| c.set(self.previous));
    }
}

/// The calling client; outside a call, an unknown one speaking NFSv4.
fn calling() -> CallFrom {
    CALL.with(|c| c.get()).unwrap_or(CallFrom {
        peer: None,
        v4: true,
    })
}
