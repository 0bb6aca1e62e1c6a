//! The local backend's open-file cache: descriptors, metadata and small files' bytes by
//! request path, revalidated about once a second (nginx's `open_file_cache` idea).
//!
//! Without it every request pays `openat2` + `statx` + `pread` + `close` before its one
//! `writev` (four of the six system calls per small-file request). With it:
//! - A cached small file (≤ [`SMALL_FILE_MAX`], last changed more than `racy` ago) or
//!   directory is answered from memory with no system call until its entry is
//!   `valid_for` old; then the path is opened again through the jail and `statx`ed, and
//!   the entry is kept if the file is the same (device, inode, size, mtime, ctime, links),
//!   replaced if not, dropped if the path is gone. A change or delete is therefore seen
//!   within `valid_for` (1 s by default), as with nginx's `open_file_cache_valid`.
//! - Any other cached file (large, or changed recently) keeps its descriptor but is
//!   `fstat`ed on every request: one system call instead of three, and a change in place,
//!   a delete or a rename over it (its link count drops to 0) is seen at once.
//! - Bytes are only kept for a file whose ctime is at least `racy` (1 s) old, and are checked
//!   against a second `fstat` after reading: a write in the same timestamp tick as the
//!   read could otherwise leave stale bytes under an unchanged stamp forever (git's
//!   "racy clean" problem).
//!
//! Jail: every descriptor in the cache was opened by the same `openat2(RESOLVE_BENEATH)`
//! path as an uncached request, and revalidation opens through it again, so a cached
//! answer is never something the jail would have refused when the entry was made; a
//! symlink swapped into the path shows within `valid_for`, like any other change.
//!
//! Bounds: at most `max_entries` entries (also at most a quarter of the descriptor limit,
//! since each holds a descriptor) and `max_bytes` of cached bytes; when either is reached,
//! the least recently used eighth of the entries goes.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;

use super::Entry;

/// Largest file whose bytes are kept in memory (the default inline limit: bodies up to
/// this size are sent from memory anyway).
pub const SMALL_FILE_MAX: u64 = 64 * 1024;

/// Tunables of one cache.
#[derive(Debug, Clone, Copy)]
pub struct OpenCacheConfig {
    /// How long an entry is served without looking at the file system (0: every request
    /// revalidates by path).
    pub valid_for: Duration,
    /// Most entries (each holds one descriptor).
    pub max_entries: usize,
    /// Most bytes of small files held in memory.
    pub max_bytes: usize,
    /// Bytes are only cached for files last changed at least this long ago (longer than
    /// any file system's timestamp granularity).
    pub racy: Duration,
}

impl Default for OpenCacheConfig {
    fn default() -> Self {
        OpenCacheConfig {
            valid_for: Duration::from_secs(1),
            max_entries: 10_000,
            max_bytes: 32 << 20,
            racy: Duration::from_secs(1),
        }
    }
}

/// What must be unchanged for a cached entry to be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    nlink: u64,
}

impl Stamp {
    pub(crate) fn of(md: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: md.dev(),
            ino: md.ino(),
            size: md.size(),
            mtime: (md.mtime(), md.mtime_nsec()),
            ctime: (md.ctime(), md.ctime_nsec()),
            nlink: md.nlink(),
        }
    }

    /// The file was changed less than `racy` ago (or its ctime is in the future).
    pub(crate) fn is_racy(&self, now: SystemTime, racy: Duration) -> bool {
        let ctime = if self.ctime.0 >= 0 {
            SystemTime::UNIX_EPOCH
                + Duration::new(
                    self.ctime.0 as u64,
                    self.ctime.1.clamp(0, 999_999_999) as u32,
                )
        } else {
            return true;
        };
        now.duration_since(ctime).map_or(true, |age| age < racy)
    }

    /// Still linked somewhere (a deleted or renamed-over file has 0 links).
    pub(crate) fn linked(&self) -> bool {
        self.nlink > 0
    }
}

struct Slot {
    entry: Entry,
    stamp: Stamp,
    /// When the path was last opened and compared.
    checked: Instant,
    /// Bytes held in memory for this entry.
    bytes: usize,
    /// Last use (a tick of [`Inner::tick`]), for eviction.
    used: u64,
}

#[derive(Default)]
struct Inner {
    /// By the path's components joined with `/` (a component never holds a `/`), so a
    /// caller holding the request path as text looks it up without building components.
    map: HashMap<String, Slot>,
    bytes: usize,
    tick: u64,
}

/// What a lookup found.
pub(crate) enum Lookup {
    /// Serve this entry as it is.
    Fresh(Entry),
    /// Serve this entry if its descriptor's `fstat` still matches `stamp` (and is linked).
    CheckFd(Entry, Stamp),
    /// Open the path (and then [`OpenCache::revalidated`]).
    Open,
}

/// Counters (tests and diagnostics).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OpenCacheCounts {
    pub entries: usize,
    pub bytes: usize,
}

/// See the module docs.
pub struct OpenCache {
    cfg: OpenCacheConfig,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for OpenCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenCache")
            .field("cfg", &self.cfg)
            .field("counts", &self.counts())
            .finish()
    }
}

/// The soft limit on open descriptors (1024 when unknown).
fn nofile_limit() -> usize {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return 1024;
    }
    usize::try_from(rl.rlim_cur).unwrap_or(usize::MAX)
}

impl OpenCache {
    pub fn new(mut cfg: OpenCacheConfig) -> OpenCache {
        cfg.max_entries = cfg.max_entries.min(nofile_limit() / 4).max(1);
        OpenCache {
            cfg,
            inner: Mutex::new(Inner::default()),
        }
    }

    pub fn config(&self) -> &OpenCacheConfig {
        &self.cfg
    }

    pub fn counts(&self) -> OpenCacheCounts {
        let inner = self.inner.lock();
        OpenCacheCounts {
            entries: inner.map.len(),
            bytes: inner.bytes,
        }
    }

    pub(crate) fn lookup(&self, path: &str) -> Lookup {
        let mut inner = self.inner.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let Some(slot) = inner.map.get_mut(path) else {
            return Lookup::Open;
        };
        if slot.checked.elapsed() >= self.cfg.valid_for {
            return Lookup::Open;
        }
        slot.used = tick;
        let entry = slot.entry.clone();
        let holds_bytes = matches!(&entry.handle, super::Handle::Local(f) if f.data().is_some());
        if holds_bytes || entry.meta.kind == super::Kind::Dir {
            Lookup::Fresh(entry)
        } else {
            Lookup::CheckFd(entry, slot.stamp)
        }
    }

    /// After opening `path` anew: the cached entry if it is still the same file (its
    /// check time renewed), else `None` (the caller makes a new entry and [`insert`]s it).
    /// With `want_bytes`, an entry that holds no bytes is not reused (the file has become
    /// old enough to have its bytes cached).
    ///
    /// [`insert`]: OpenCache::insert
    pub(crate) fn revalidated(&self, path: &str, stamp: &Stamp, want_bytes: bool) -> Option<Entry> {
        let mut inner = self.inner.lock();
        let slot = inner.map.get_mut(path)?;
        if slot.stamp != *stamp || (want_bytes && slot.bytes == 0 && stamp.size > 0) {
            return None;
        }
        slot.checked = Instant::now();
        Some(slot.entry.clone())
    }

    /// Drops the entry of `path` (it is gone or changed).
    pub(crate) fn remove(&self, path: &str) {
        let mut inner = self.inner.lock();
        if let Some(slot) = inner.map.remove(path) {
            inner.bytes -= slot.bytes;
        }
    }

    /// Caches `entry` for `path`, evicting the least recently used entries to stay in bounds.
    pub(crate) fn insert(&self, path: &str, entry: Entry, stamp: Stamp) {
        let bytes = match &entry.handle {
            super::Handle::Local(f) => f.data().map_or(0, |d| d.len()),
            super::Handle::Nfs(_) => return,
        };
        if bytes > self.cfg.max_bytes {
            return;
        }
        let mut inner = self.inner.lock();
        if let Some(old) = inner.map.remove(path) {
            inner.bytes -= old.bytes;
        }
        if inner.map.len() >= self.cfg.max_entries || inner.bytes + bytes > self.cfg.max_bytes {
            self.evict(&mut inner, bytes);
        }
        inner.tick += 1;
        let used = inner.tick;
        inner.bytes += bytes;
        inner.map.insert(
            path.to_string(),
            Slot {
                entry,
                stamp,
                checked: Instant::now(),
                bytes,
                used,
            },
        );
    }

    /// Removes the least recently used eighth of the entries (at least one), then more
    /// until `incoming` more bytes and one more entry fit.
    fn evict(&self, inner: &mut Inner, incoming: usize) {
        let mut ticks: Vec<u64> = inner.map.values().map(|s| s.used).collect();
        let n = (ticks.len() / 8).max(1).min(ticks.len());
        let (_, cut, _) = ticks.select_nth_unstable(n - 1);
        let cut = *cut;
        let mut freed = 0;
        inner.map.retain(|_, s| {
            let keep = s.used > cut;
            if !keep {
                freed += s.bytes;
            }
            keep
        });
        inner.bytes -= freed;
        while inner.bytes + incoming > self.cfg.max_bytes || inner.map.len() >= self.cfg.max_entries
        {
            let Some(oldest) = inner
                .map
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(s) = inner.map.remove(&oldest) {
                inner.bytes -= s.bytes;
            }
        }
    }
}
