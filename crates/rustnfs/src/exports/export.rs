//! One export being served: its line and its jail, and which options a client of it
//! gets.

use std::net::IpAddr;

use super::clients::Pattern;
use super::file::{Client, ExportLine, Options};
use crate::fs::{DirFs, Policy};

/// One export being served.
pub struct Export {
    /// As the file gives it (the one-export flags make a line of their own).
    pub line: ExportLine,
    /// Its jail; each call gets a view with the caller's options (`DirFs::with_policy`).
    pub fs: DirFs,
}

impl Export {
    /// The options of a client at `peer` (`None`: a caller of unknown address, which
    /// only `*` matches), or `None` when the export is not exported to it. exports(5)'s
    /// precedence: a single host, then networks, then `*`; in line order within a kind.
    pub fn options_for(&self, peer: Option<IpAddr>) -> Option<Options> {
        let mut best: Option<&Client> = None;
        for c in &self.line.clients {
            let hit = match peer {
                Some(ip) => c.pattern.matches(ip),
                None => c.pattern == Pattern::Anyone,
            };
            if hit && best.is_none_or(|b| c.pattern.rank() < b.pattern.rank()) {
                best = Some(c);
            }
        }
        best.map(|c| c.options)
    }

    /// The view of this export a caller with `options` gets.
    pub fn view(&self, options: &Options) -> DirFs {
        self.fs.with_policy(Policy {
            read_only: options.read_only,
            squash: options.squash,
        })
    }
}

/// Whether `path` lies strictly beneath `dir` (both normalized).
pub fn beneath(path: &str, dir: &str) -> bool {
    if dir == "/" {
        return path != "/";
    }
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}
