//! Sharded maps the hot path uses: inode → (parent, name), and an LRU of open files.
//!
//! Both are split into 64 shards keyed by inode, each behind its own lock, so concurrent
//! requests on different files do not contend (no global lock on the hot path).

use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

const SHARDS: usize = 64;

fn shard_of(ino: u64) -> usize {
    (ino.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize
}

/// Where an inode was last seen: its parent directory's inode and its name there.
#[derive(Debug, Clone)]
pub struct Node {
    pub parent: u64,
    pub name: Box<[u8]>,
}

/// inode → where it lives, learnt from LOOKUP, READDIRPLUS, CREATE, RENAME and scans.
pub struct Nodes {
    shards: Vec<RwLock<HashMap<u64, Node>>>,
}

impl Default for Nodes {
    fn default() -> Self {
        Self::new()
    }
}

impl Nodes {
    pub fn new() -> Self {
        Nodes {
            shards: (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect(),
        }
    }

    pub fn insert(&self, ino: u64, parent: u64, name: &[u8]) {
        let mut shard = self.shards[shard_of(ino)].write();
        match shard.get_mut(&ino) {
            Some(n) if n.parent == parent && &*n.name == name => {}
            Some(n) => {
                n.parent = parent;
                n.name = name.into();
            }
            None => {
                shard.insert(
                    ino,
                    Node {
                        parent,
                        name: name.into(),
                    },
                );
            }
        }
    }

    pub fn get(&self, ino: u64) -> Option<Node> {
        self.shards[shard_of(ino)].read().get(&ino).cloned()
    }

    pub fn remove(&self, ino: u64) {
        self.shards[shard_of(ino)].write().remove(&ino);
    }

    /// The path of `ino` relative to the root (`root` itself gives an empty list), or
    /// `None` when some ancestor is unknown or the chain is implausibly deep (a cycle).
    pub fn path(&self, ino: u64, root: u64) -> Option<Vec<Box<[u8]>>> {
        let mut out = Vec::new();
        let mut cur = ino;
        while cur != root {
            let node = self.get(cur)?;
            out.push(node.name);
            cur = node.parent;
            if out.len() > 4096 {
                return None;
            }
        }
        out.reverse();
        Some(out)
    }
}

/// A bounded LRU of open files keyed by `(inode, writable)`, so READ is one `pread`.
pub struct FdCache {
    shards: Vec<Mutex<FdShard>>,
    per_shard: usize,
}

#[derive(Default)]
struct FdShard {
    map: HashMap<(u64, bool), (Arc<File>, u64)>,
    tick: u64,
}

impl FdCache {
    pub fn new(capacity: usize) -> Self {
        FdCache {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(FdShard::default()))
                .collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
        }
    }

    pub fn get(&self, ino: u64, writable: bool) -> Option<Arc<File>> {
        let mut shard = self.shards[shard_of(ino)].lock();
        shard.tick += 1;
        let tick = shard.tick;
        let (file, used) = shard.map.get_mut(&(ino, writable))?;
        *used = tick;
        Some(file.clone())
    }

    pub fn insert(&self, ino: u64, writable: bool, file: Arc<File>) {
        let mut shard = self.shards[shard_of(ino)].lock();
        shard.tick += 1;
        let tick = shard.tick;
        shard.map.insert((ino, writable), (file, tick));
        while shard.map.len() > self.per_shard {
            let Some(oldest) = shard
                .map
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| *k)
            else {
                break;
            };
            shard.map.remove(&oldest);
        }
    }

    pub fn remove(&self, ino: u64) {
        let mut shard = self.shards[shard_of(ino)].lock();
        shard.map.remove(&(ino, false));
        shard.map.remove(&(ino, true));
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_parents() {
        let n = Nodes::new();
        n.insert(10, 1, b"a");
        n.insert(11, 10, b"b");
        let p = n.path(11, 1).unwrap();
        assert_eq!(
            p.iter().map(|c| &**c).collect::<Vec<_>>(),
            [&b"a"[..], b"b"]
        );
        assert!(n.path(1, 1).unwrap().is_empty());
        assert!(n.path(99, 1).is_none());
        n.insert(20, 21, b"x");
        n.insert(21, 20, b"y");
        assert!(n.path(20, 1).is_none(), "cycles end");
    }

    #[test]
    fn fd_cache_is_bounded() {
        let c = FdCache::new(64);
        let f = Arc::new(File::open("/dev/null").unwrap());
        for ino in 0..10_000 {
            c.insert(ino, false, f.clone());
        }
        assert!(c.len() <= 64);
        c.insert(5, true, f.clone());
        assert!(c.get(5, true).is_some());
        c.remove(5);
        assert!(c.get(5, true).is_none());
    }
}
