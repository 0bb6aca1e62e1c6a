//! The NFSv4 pseudo-filesystem: one tree joining the exports, as knfsd and Ganesha
//! present them when no export is the root (`fsid=0`).
//!
//! Its directories are the components of the exports' paths above the exports
//! (`/srv/a` and `/srv/b` make `/` and `/srv`); they exist only here, read-only (mode
//! 0555, owned by root), never on disk. A client sees only the part that leads to
//! exports exported to it: a directory with none of its exports beneath it is not
//! listed, and looking it up is `NOENT`. Handles of pseudo directories carry
//! [`GENERATION`] (even, so never an export's) and an id hashed from the path, so they
//! survive restarts and reloads that keep the path.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use nfs3_types::nfs3::{fattr3, ftype3, nfstime3, specdata3};

use super::export::{Export, beneath};
use crate::fs::Fh;

/// The handle generation of pseudo directories (export generations are odd).
pub const GENERATION: u64 = 0x5053_4555_444f_4653 & !1;
/// The `fsid` the pseudo-filesystem reports (knfsd's pseudo root reports 0 too; no
/// export has it, since an `fsid=0` export replaces the pseudo-filesystem).
pub const FSID: u64 = 0;

/// What a name in a pseudo directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Child {
    /// Another pseudo directory (its index).
    Dir(usize),
    /// An export's root (its index in the table).
    Export(usize),
}

/// One pseudo directory.
#[derive(Debug)]
pub struct Node {
    pub id: u64,
    /// The parent's index (the root's is itself).
    pub parent: usize,
    /// Sorted by name.
    pub children: Vec<(String, Child)>,
    /// Every export beneath it (a client sees the directory if it may use one).
    pub exports: Vec<usize>,
}

/// The pseudo-filesystem of a table's exports. The root is node 0.
#[derive(Debug)]
pub struct Pseudo {
    nodes: Vec<Node>,
    by_id: HashMap<u64, usize>,
}

impl Pseudo {
    /// The tree above the topmost exports (an export beneath another one is reached
    /// through it, by crossing, not from here).
    pub fn build(exports: &[Arc<Export>]) -> Pseudo {
        let mut p = Pseudo {
            nodes: Vec::new(),
            by_id: HashMap::new(),
        };
        p.add("/", 0);
        for (i, e) in exports.iter().enumerate() {
            let path = &e.line.path;
            if exports.iter().any(|o| beneath(path, &o.line.path)) {
                continue;
            }
            let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
            let mut at = 0;
            p.nodes[0].exports.push(i);
            for (k, name) in parts.iter().enumerate() {
                if k + 1 == parts.len() {
                    p.nodes[at]
                        .children
                        .push((name.to_string(), Child::Export(i)));
                    break;
                }
                let found = p.nodes[at]
                    .children
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, c)| *c);
                at = match found {
                    Some(Child::Dir(d)) => d,
                    _ => {
                        let sub = format!("/{}", parts[..=k].join("/"));
                        let d = p.add(&sub, at);
                        p.nodes[at].children.push((name.to_string(), Child::Dir(d)));
                        d
                    }
                };
                p.nodes[at].exports.push(i);
            }
        }
        for n in &mut p.nodes {
            n.children.sort_by(|a, b| a.0.cmp(&b.0));
        }
        p
    }

    fn add(&mut self, path: &str, parent: usize) -> usize {
        let mut id = fnv1a(path.as_bytes());
        while id == 0 || self.by_id.contains_key(&id) {
            id = fnv1a(&id.to_le_bytes());
        }
        let i = self.nodes.len();
        self.nodes.push(Node {
            id,
            parent,
            children: Vec::new(),
            exports: Vec::new(),
        });
        self.by_id.insert(id, i);
        i
    }

    /// The node a pseudo handle names.
    pub fn by_handle(&self, fh: &Fh) -> Option<usize> {
        if fh.generation() != GENERATION || fh.btime() != 0 {
            return None;
        }
        self.by_id.get(&fh.ino()).copied()
    }

    pub fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    /// The handle of node `i`.
    pub fn fh(&self, i: usize) -> Fh {
        Fh::in_export(GENERATION, self.nodes[i].id, 0)
    }

    /// Where export `e` is a child, and under which name.
    pub fn parent_of_export(&self, e: usize) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.children.iter().any(|(_, c)| *c == Child::Export(e)))
    }

    /// The attributes of node `i`: a read-only directory owned by root, its times when
    /// the table was built (a reload that changes the tree changes them, so clients
    /// list it again).
    pub fn attr(&self, i: usize, loaded: SystemTime) -> fattr3 {
        let n = &self.nodes[i];
        let t = loaded
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let time = nfstime3 {
            seconds: t.as_secs() as u32,
            nseconds: t.subsec_nanos(),
        };
        let dirs = n
            .children
            .iter()
            .filter(|(_, c)| matches!(c, Child::Dir(_)))
            .count();
        fattr3 {
            type_: ftype3::NF3DIR,
            mode: 0o555,
            nlink: 2 + dirs as u32,
            uid: 0,
            gid: 0,
            size: 4096,
            used: 0,
            rdev: specdata3::default(),
            fsid: FSID,
            fileid: n.id,
            atime: time,
            mtime: time,
            ctime: time,
        }
    }
}

/// FNV-1a: a fixed hash, so a path's id is the same in every run.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
