//! Finding a handle's object: the inode map, and the bounded export walk for handles it
//! does not know (after a restart, a rename on the host, or a forged handle).

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

use nfs3_types::nfs3::nfsstat3;

use super::{DirFs, Fh, Loc, NfsResult, blocking, io_err};
use crate::sys;

impl DirFs {
    /// Finds a handle's object: through the inode map, with one full rescan of the export
    /// when the map does not know it (after a restart) or knows a stale place.
    pub(super) fn locate(&self, fh: &Fh) -> NfsResult<Loc> {
        let inner = &self.inner;
        if fh.ino() == inner.root_ino {
            if fh.btime() != inner.root_btime {
                return Err(nfsstat3::NFS3ERR_STALE);
            }
            let st = sys::fstat(inner.root.as_fd()).map_err(io_err)?;
            return Ok(Loc::Root(st));
        }
        for attempt in 0..2 {
            if attempt == 1 && !self.rescan(fh) {
                break;
            }
            let Some(node) = inner.nodes.get(fh.ino()) else {
                continue;
            };
            let Some(path) = inner.nodes.path(node.parent, inner.root_ino) else {
                continue;
            };
            let Ok(dir) = self.open_rel(&path, libc::O_PATH | libc::O_DIRECTORY) else {
                continue;
            };
            let Ok(name) = CString::new(&*node.name) else {
                continue;
            };
            match sys::statx(dir.as_fd(), &name) {
                Ok(stat) if Self::matches(fh, &stat) && stat.dev == inner.root_dev => {
                    return Ok(Loc::Child { dir, name, stat });
                }
                _ => continue,
            }
        }
        Err(nfsstat3::NFS3ERR_STALE)
    }

    pub(super) fn open_rel(&self, path: &[Box<[u8]>], flags: i32) -> std::io::Result<OwnedFd> {
        if path.is_empty() {
            return sys::open_beneath(self.inner.root.as_fd(), c".", flags);
        }
        let joined = path.join(&b'/');
        let c = CString::new(joined).map_err(|_| sys::einval())?;
        sys::open_beneath(self.inner.root.as_fd(), &c, flags)
    }

    /// Walks the whole export (without following symlinks) to find `target`, refreshing
    /// the inode map on the way. Only runs for handles the map does not know.
    fn rescan(&self, target: &Fh) -> bool {
        // Unknown handles are rare (restarts, renames on the host) but a client can forge
        // them: one walk at a time, and a miss is remembered for a while.
        const FORGET_MISS: std::time::Duration = std::time::Duration::from_secs(30);
        let inner = &self.inner;
        let key = (target.ino(), target.btime());
        if let Some(t) = inner.misses.lock().get(&key)
            && t.elapsed() < FORGET_MISS
        {
            return false;
        }
        let _one_at_a_time = inner.rescan_lock.lock();
        let found = blocking(|| self.walk(target));
        if !found {
            let mut misses = inner.misses.lock();
            if misses.len() >= 4096 {
                misses.retain(|_, t| t.elapsed() < FORGET_MISS);
                if misses.len() >= 4096 {
                    misses.clear();
                }
            }
            misses.insert(key, Instant::now());
        }
        found
    }

    fn walk(&self, target: &Fh) -> bool {
        const LIMIT: usize = 10_000_000;
        let inner = &self.inner;
        let mut stack: Vec<(Vec<Box<[u8]>>, u64)> = vec![(Vec::new(), inner.root_ino)];
        let mut buf = vec![0u8; 64 * 1024];
        let mut ents = Vec::new();
        let mut visited = 0usize;
        while let Some((path, ino)) = stack.pop() {
            let Ok(fd) = self.open_rel(&path, libc::O_RDONLY | libc::O_DIRECTORY) else {
                continue;
            };
            match sys::fstat(fd.as_fd()) {
                Ok(st) if st.ino == ino => {}
                _ => continue,
            }
            loop {
                ents.clear();
                match sys::getdents(fd.as_fd(), &mut buf, &mut ents) {
                    Ok(true) => {}
                    _ => break,
                }
                for e in &ents {
                    visited += 1;
                    inner.nodes.insert(e.ino, ino, &e.name);
                    if e.ino == target.ino()
                        && let Ok(name) = CString::new(e.name.as_slice())
                        && let Ok(st) = sys::statx(fd.as_fd(), &name)
                        && Self::matches(target, &st)
                    {
                        return true;
                    }
                    if e.kind == libc::DT_DIR {
                        let mut sub = path.clone();
                        sub.push(e.name.as_slice().into());
                        stack.push((sub, e.ino));
                    }
                }
            }
            if visited > LIMIT {
                tracing::warn!("handle rescan gave up after {visited} entries");
                return false;
            }
        }
        false
    }
}
