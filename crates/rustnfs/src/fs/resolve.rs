//! Finding a handle's object: the inode map, and the export walk for handles it does not
//! know (after a restart, a rename on the host, or a forged handle), bounded in cost.
//!
//! A handle is `(inode, birth time)`; the map says where each inode was last seen. When
//! the map does not know a handle, only a walk of the export can find it, and a client can
//! forge handles at will: once every forged handle triggered its own walk, and 8 clients
//! sending random handles at a 200,000-file export slowed a legitimate 10 MiB read from
//! 0.03 s to 7.3 s. Now:
//! - one walk at a time, on its own low-priority thread, never on an async worker; it
//!   refreshes the whole map, so one walk answers every handle asked meanwhile;
//! - walks are rationed: the next may start only `WALK_GAP_FACTOR` × the last one's
//!   duration (at least `MIN_WALK_GAP`) after it ended — at most ~20% of one core;
//! - a handle that a whole walk, started after the call arrived, did not find is STALE; so
//!   is, at once, a handle born before a recent walk started that it did not find (the
//!   walk saw every file that existed then), one born in the future, and one whose inode
//!   now belongs to another file;
//! - a call that needs a walk waits for it (or for the next one allowed) at most
//!   `MAX_WAIT`, and at most `MAX_WAITERS` calls wait at once; the others get
//!   NFS3ERR_JUKEBOX ("try again later"), which clients retry after a pause.

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use nfs3_types::nfs3::nfsstat3;
use parking_lot::{Condvar, Mutex};

use super::{DirFs, Fh, Loc, NfsResult, io_err};
use crate::sys;

/// The next walk starts at least this many times the last one's duration after it ended.
const WALK_GAP_FACTOR: u32 = 4;
const MIN_WALK_GAP: Duration = Duration::from_secs(1);
/// A complete walk answers "not in the export" for handles born before it started, for
/// this long; after that a new walk may be needed (files moved in from outside).
const TRUST_WALK: Duration = Duration::from_secs(60);
/// Longest a call waits for a walk, and how many calls may wait at once (each holds a
/// thread while it waits).
const MAX_WAIT: Duration = Duration::from_secs(2);
const MAX_WAITERS: usize = 16;
/// A walk wakes its waiters every this many entries, so a handle found early is served
/// before the walk ends.
const PROGRESS_EVERY: usize = 4096;
/// Entries a walk visits at most.
const WALK_LIMIT: usize = 10_000_000;
/// A handle born this far in the future is forged (clocks differ by less).
const FUTURE_SLACK_NS: u64 = 2_000_000_000;
/// File systems stamp birth times with the coarse clock, up to one tick (10 ms at 100 Hz)
/// behind the real one: "born before the walk started" must clear this margin.
const BIRTH_SLACK_NS: u64 = 12_000_000;

/// The walk state shared by all calls.
#[derive(Default)]
pub(super) struct Walks {
    state: Mutex<WalkState>,
    news: Condvar,
    /// Walks started since the server started (the `export_walk` metric counts them too).
    started: AtomicU64,
}

#[derive(Default)]
struct WalkState {
    running: bool,
    /// Bumped on every progress report and at the end of each walk.
    progress: u64,
    waiters: usize,
    last: Option<LastWalk>,
}

#[derive(Clone, Copy)]
struct LastWalk {
    /// Wall-clock start in nanoseconds since the epoch (the birth times' scale).
    started_ns: u64,
    started: Instant,
    ended: Instant,
    took: Duration,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What the map says about a handle.
enum Probe {
    Found(Loc),
    /// The inode now belongs to another file, or the handle was born in the future.
    Gone,
    /// Not known, or known at a place where it no longer is.
    Unknown {
        known: bool,
    },
}

impl DirFs {
    /// Finds a handle's object through the inode map, waiting (bounded) for an export
    /// walk when the map does not know it; see the module docs for the bounds.
    pub(super) fn locate(&self, fh: &Fh) -> NfsResult<Loc> {
        let inner = &self.inner;
        if fh.ino() == inner.root_ino {
            if fh.btime() != inner.root_btime {
                return Err(nfsstat3::NFS3ERR_STALE);
            }
            let st = sys::fstat(inner.root.as_fd()).map_err(io_err)?;
            return Ok(Loc::Root(st));
        }
        let arrived = Instant::now();
        let deadline = arrived + MAX_WAIT;
        let mut waited = false;
        loop {
            let known = match self.probe(fh) {
                Probe::Found(loc) => return Ok(loc),
                Probe::Gone => return Err(nfsstat3::NFS3ERR_STALE),
                Probe::Unknown { known } => known,
            };
            self.await_walk(fh, known, arrived, deadline, &mut waited)?;
        }
    }

    fn probe(&self, fh: &Fh) -> Probe {
        let inner = &self.inner;
        if fh.btime() > now_ns().saturating_add(FUTURE_SLACK_NS) {
            return Probe::Gone;
        }
        let Some(node) = inner.nodes.get(fh.ino()) else {
            return Probe::Unknown { known: false };
        };
        let stale = Probe::Unknown { known: true };
        let Some(path) = inner.nodes.path(node.parent, inner.root_ino) else {
            return stale;
        };
        let Ok(dir) = self.open_rel(&path, libc::O_PATH | libc::O_DIRECTORY) else {
            return stale;
        };
        let Ok(name) = CString::new(&*node.name) else {
            return stale;
        };
        match sys::statx(dir.as_fd(), &name) {
            Ok(stat) if stat.dev != inner.root_dev => stale,
            Ok(stat) if Self::matches(fh, &stat) => Probe::Found(Loc::Child { dir, name, stat }),
            // Inode numbers are unique within a file system: the handle's file is gone.
            Ok(stat) if stat.ino == fh.ino() => Probe::Gone,
            _ => stale,
        }
    }

    /// Decides what a call for an unknown handle gets: `Ok` when the map may know more
    /// now (probe it again), or the status to answer.
    fn await_walk(
        &self,
        fh: &Fh,
        known: bool,
        arrived: Instant,
        deadline: Instant,
        waited: &mut bool,
    ) -> Result<(), nfsstat3> {
        let walks = &self.inner.walks;
        let mut st = walks.state.lock();
        loop {
            if let Some(last) = st.last {
                // A whole walk ran since this call arrived and did not find the handle.
                if last.started >= arrived {
                    return Err(nfsstat3::NFS3ERR_STALE);
                }
                // Born before a recent walk started, and not found by it.
                if !known
                    && fh.btime().saturating_add(BIRTH_SLACK_NS) < last.started_ns
                    && last.started.elapsed() < TRUST_WALK
                {
                    return Err(nfsstat3::NFS3ERR_STALE);
                }
            }
            if st.running {
                if !*waited && st.waiters >= MAX_WAITERS {
                    return Err(nfsstat3::NFS3ERR_JUKEBOX);
                }
                *waited = true;
                let before = st.progress;
                st.waiters += 1;
                let timed_out =
                    super::blocking(|| walks.news.wait_until(&mut st, deadline)).timed_out();
                st.waiters -= 1;
                if st.progress != before {
                    return Ok(());
                }
                if timed_out {
                    return Err(nfsstat3::NFS3ERR_JUKEBOX);
                }
                continue;
            }
            if let Some(last) = st.last {
                let next = last.ended + (last.took * WALK_GAP_FACTOR).max(MIN_WALK_GAP);
                if Instant::now() < next {
                    // Rationed: wait for the next allowed walk if it comes before this
                    // call's deadline and a waiting slot is free, else "try later".
                    if next > deadline || (!*waited && st.waiters >= MAX_WAITERS) {
                        return Err(nfsstat3::NFS3ERR_JUKEBOX);
                    }
                    *waited = true;
                    st.waiters += 1;
                    super::blocking(|| walks.news.wait_until(&mut st, next));
                    st.waiters -= 1;
                    continue;
                }
            }
            st.running = true;
            walks.started.fetch_add(1, Ordering::Relaxed);
            let fs = self.clone();
            let spawned = std::thread::Builder::new()
                .name("rustnfs-walk".into())
                .spawn(move || fs.walk_export());
            if let Err(e) = spawned {
                tracing::warn!("cannot start an export walk: {e}");
                st.running = false;
                return Err(nfsstat3::NFS3ERR_JUKEBOX);
            }
            // Then wait for it like every other call (the next turn of the loop).
        }
    }

    /// Walks the whole export on this (dedicated, low-priority) thread, refreshing the
    /// inode map, then publishes the result.
    fn walk_export(&self) {
        // Nice 10 for this thread only (Linux: PRIO_PROCESS with 0 is the calling thread),
        // so a walk yields the CPU to the threads answering calls.
        // SAFETY: setpriority takes no pointers.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, 0, 10);
        }
        let walks = &self.inner.walks;
        let started = Instant::now();
        let started_ns = now_ns();
        let visited = self.walk(|| {
            walks.state.lock().progress += 1;
            walks.news.notify_all();
        });
        let took = started.elapsed();
        self.record(
            "export_walk",
            started,
            &Ok::<(), nfsstat3>(()),
            visited as u64,
        );
        tracing::debug!(entries = visited, ?took, "export walked");
        let mut st = walks.state.lock();
        st.running = false;
        st.progress += 1;
        st.last = Some(LastWalk {
            started_ns,
            started,
            ended: Instant::now(),
            took,
        });
        drop(st);
        walks.news.notify_all();
    }

    /// Walks started so far.
    pub fn walks_started(&self) -> u64 {
        self.inner.walks.started.load(Ordering::Relaxed)
    }

    pub(super) fn open_rel(&self, path: &[Box<[u8]>], flags: i32) -> std::io::Result<OwnedFd> {
        if path.is_empty() {
            return sys::open_beneath(self.inner.root.as_fd(), c".", flags);
        }
        let joined = path.join(&b'/');
        let c = CString::new(joined).map_err(|_| sys::einval())?;
        sys::open_beneath(self.inner.root.as_fd(), &c, flags)
    }

    /// Visits every entry of the export (without following symlinks), recording where each
    /// inode lives; calls `progress` every `PROGRESS_EVERY` entries. Returns the count.
    fn walk(&self, mut progress: impl FnMut()) -> usize {
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
                    if visited.is_multiple_of(PROGRESS_EVERY) {
                        progress();
                    }
                    if e.kind == libc::DT_DIR {
                        let mut sub = path.clone();
                        sub.push(e.name.as_slice().into());
                        stack.push((sub, e.ino));
                    }
                }
            }
            if visited > WALK_LIMIT {
                tracing::warn!("export walk gave up after {visited} entries");
                break;
            }
        }
        visited
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn fresh(dir: &std::path::Path) -> DirFs {
        DirFs::open(&Config::new(dir), latency::Registry::new("t")).unwrap()
    }

    #[test]
    fn unknown_handles_walk_once_then_answer_at_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/deep"), b"x").unwrap();
        std::fs::write(dir.path().join("gone"), b"y").unwrap();
        let first = fresh(dir.path());
        let root = first.root_fh();
        let a = first.lookup_sync(&root, b"a").unwrap();
        let b = first.lookup_sync(&a, b"b").unwrap();
        let deep = first.lookup_sync(&b, b"deep").unwrap();
        let gone = first.lookup_sync(&root, b"gone").unwrap();
        std::fs::remove_file(dir.path().join("gone")).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // A new server knows neither: one walk finds the first, the second is stale.
        let fs = fresh(dir.path());
        assert!(fs.locate(&deep).is_ok());
        assert_eq!(fs.walks_started(), 1);
        assert_eq!(fs.locate(&gone).err(), Some(nfsstat3::NFS3ERR_STALE));
        // Forged: born in the future, or born long ago: no walk, STALE at once.
        let generation = fs.generation();
        let future = Fh::in_export(generation, deep.ino(), u64::MAX);
        assert_eq!(fs.locate(&future).err(), Some(nfsstat3::NFS3ERR_STALE));
        let old = Fh::in_export(generation, 987_654_321, 1);
        assert_eq!(fs.locate(&old).err(), Some(nfsstat3::NFS3ERR_STALE));
        // Born after the last walk: it needs a walk, and walks are rationed: the call
        // waits for the next one allowed (a second after the last), then is answered.
        let recent = Fh::in_export(generation, 987_654_321, now_ns());
        let t = Instant::now();
        assert_eq!(fs.locate(&recent).err(), Some(nfsstat3::NFS3ERR_STALE));
        assert!(t.elapsed() >= MIN_WALK_GAP / 2, "{:?}", t.elapsed());
        assert_eq!(fs.walks_started(), 2);
        // A gap longer than a call may wait: "try again later".
        fs.inner.walks.state.lock().last.as_mut().unwrap().took = MAX_WAIT;
        let later = Fh::in_export(generation, 987_654_322, now_ns());
        assert_eq!(fs.locate(&later).err(), Some(nfsstat3::NFS3ERR_JUKEBOX));
        assert_eq!(fs.walks_started(), 2);
    }
}
