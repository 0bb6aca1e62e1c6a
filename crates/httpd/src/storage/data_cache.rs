//! The NFS backend's file-data cache (`--nfs-data-cache SIZE`): whole files, least
//! recently used out first, never more than SIZE bytes, revalidated on every open
//! (close-to-open, like the Linux NFS client).
//!
//! A cached copy is written once and then never changes: a sealed memfd, or with
//! `--nfs-data-cache-dir` an unlinked `O_TMPFILE` file only we hold ([`super::cache_file`]
//! says where copies live and why the two are equivalent). Bodies above the inline limit
//! go out with `sendfile` from the copy, the kernel path `--root` uses, with no
//! per-request copy in userspace; inline ones are sliced from memory (no `pread`, no
//! copy): a memfd's read-only mapping, or a small directory copy's bytes read once. A file that changes on the server gets
//! a new copy; responses still sending the old one keep it (it is freed with their last
//! reference), so a response is never torn by a refill.
//!
//! The bound counts cached files plus fills in progress (their size is reserved before
//! the first READ), so the cache never holds more than SIZE bytes; copies that were
//! evicted or replaced while a response still sends them are outside that count until
//! the response ends. A fill that fails on the local copy (out of space, an I/O error)
//! does not fail the request: the file is served over the wire, counted as `uncached`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use nfsclient::Attr;
use parking_lot::Mutex;

use super::cache_file::{self, CopyStore};
use super::{OpenFile, StorageError};
use crate::cache_stats::CacheStats;

/// At most one warning line about failed fills per this interval (a full disk would
/// otherwise log one per request).
const FILL_WARNING_EVERY: Duration = Duration::from_secs(10);

/// What must be unchanged for a cached copy to be served: the attributes the Linux client
/// compares on open (size, mtime, ctime), and the file id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Validator {
    fileid: u64,
    pub size: u64,
    mtime: SystemTime,
    ctime: SystemTime,
}

impl From<&Attr> for Validator {
    fn from(a: &Attr) -> Self {
        Validator {
            fileid: a.fileid,
            size: a.size,
            mtime: a.mtime,
            ctime: a.ctime,
        }
    }
}

struct Slot {
    file: Arc<OpenFile>,
    valid: Validator,
    /// Its key in `Inner::lru`.
    tick: u64,
}

#[derive(Default)]
struct Inner {
    /// By NFS file handle.
    slots: HashMap<Vec<u8>, Slot>,
    /// Last use → handle; the first entry is the least recently used.
    lru: BTreeMap<u64, Vec<u8>>,
    tick: u64,
    cached: u64,
    /// Bytes reserved by fills in progress.
    reserved: u64,
}

impl Inner {
    fn remove(&mut self, key: &[u8]) -> Option<Slot> {
        let slot = self.slots.remove(key)?;
        self.lru.remove(&slot.tick);
        self.cached -= slot.valid.size;
        Some(slot)
    }
}

/// Whole-file cache of at most `capacity` bytes; see the module docs.
pub(crate) struct DataCache {
    capacity: u64,
    /// Where copies are created: memfds, or files in `--nfs-data-cache-dir`.
    store: CopyStore,
    inner: Mutex<Inner>,
    /// One fill per file at a time: concurrent misses of a file wait for the first.
    filling: Mutex<HashMap<Vec<u8>, Arc<tokio::sync::Mutex<()>>>>,
    stats: Arc<CacheStats>,
    /// When the last fill-failure warning was logged, and failures since then not logged.
    fill_warned: Mutex<(Option<Instant>, u64)>,
}

impl std::fmt::Debug for DataCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataCache")
            .field("capacity", &self.capacity)
            .field("store", &self.store)
            .field("stats", &self.stats)
            .finish()
    }
}

/// Bytes reserved for one fill; given back on drop unless the fill was committed (a
/// cancelled request or a failed READ leaks nothing).
struct Reservation<'a> {
    cache: &'a DataCache,
    size: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.size > 0 {
            let mut inner = self.cache.inner.lock();
            inner.reserved -= self.size;
            self.cache.publish(&inner);
        }
    }
}

impl DataCache {
    pub(crate) fn new(capacity: u64, store: CopyStore, stats: Arc<CacheStats>) -> DataCache {
        stats.capacity.store(capacity, Ordering::Relaxed);
        DataCache {
            capacity,
            store,
            inner: Mutex::new(Inner::default()),
            filling: Mutex::new(HashMap::new()),
            stats,
            fill_warned: Mutex::new((None, 0)),
        }
    }

    /// Where this cache creates its copies.
    pub(crate) fn store(&self) -> &CopyStore {
        &self.store
    }

    /// One warning line for a fill that failed on the local copy, unless one was logged
    /// less than [`FILL_WARNING_EVERY`] ago (then it is counted for the next line).
    fn warn_fill_failed(&self, error: &std::io::Error) {
        let mut warned = self.fill_warned.lock();
        let now = Instant::now();
        if warned.0.is_some_and(|at| now - at < FILL_WARNING_EVERY) {
            warned.1 += 1;
            return;
        }
        let earlier = std::mem::take(&mut warned.1);
        warned.0 = Some(now);
        drop(warned);
        tracing::warn!(
            error = %service::io_reason(error),
            store = %self.store.describe(),
            suppressed_since_last = earlier,
            "nfs data cache: a fill failed on the local copy; serving the file over the wire, uncached"
        );
    }

    fn publish(&self, inner: &Inner) {
        let s = &self.stats;
        s.bytes
            .store(inner.cached + inner.reserved, Ordering::Relaxed);
        s.files.store(inner.slots.len() as u64, Ordering::Relaxed);
    }

    /// The cached copy if its attributes still match `valid`; a stale copy is dropped.
    fn lookup(&self, key: &[u8], valid: &Validator) -> Option<Arc<OpenFile>> {
        let mut inner = self.inner.lock();
        let slot = inner.slots.get(key)?;
        if slot.valid != *valid {
            inner.remove(key);
            self.stats.invalidations.fetch_add(1, Ordering::Relaxed);
            self.publish(&inner);
            return None;
        }
        let old = slot.tick;
        inner.tick += 1;
        let tick = inner.tick;
        inner.lru.remove(&old);
        inner.lru.insert(tick, key.to_vec());
        let slot = inner.slots.get_mut(key).expect("checked above");
        slot.tick = tick;
        Some(slot.file.clone())
    }

    /// Makes room for `size` bytes by evicting the least recently used files; `None` when
    /// they do not fit even then (the rest is reserved by fills in progress).
    fn reserve(&self, size: u64) -> Option<Reservation<'_>> {
        let mut inner = self.inner.lock();
        while inner.cached + inner.reserved + size > self.capacity {
            let (_, key) = inner.lru.pop_first()?;
            let slot = inner.slots.remove(&key).expect("lru and slots agree");
            inner.cached -= slot.valid.size;
            self.stats.evictions.fetch_add(1, Ordering::Relaxed);
        }
        inner.reserved += size;
        self.publish(&inner);
        Some(Reservation { cache: self, size })
    }

    fn commit(&self, mut res: Reservation<'_>, key: &[u8], valid: Validator, file: Arc<OpenFile>) {
        let mut inner = self.inner.lock();
        inner.remove(key);
        inner.reserved -= res.size;
        res.size = 0;
        inner.tick += 1;
        let tick = inner.tick;
        inner.cached += valid.size;
        inner.lru.insert(tick, key.to_vec());
        inner.slots.insert(key.to_vec(), Slot { file, valid, tick });
        self.publish(&inner);
    }

    /// The cached copy of the file with handle `key` and attributes `valid`, filled with
    /// `fill` on a miss; `None` when the file is not cached (empty, larger than fits, or
    /// its fill failed on the local copy: out of space, an I/O error).
    pub(crate) async fn get_or_fill<F, Fut>(
        &self,
        key: &[u8],
        valid: Validator,
        fill: F,
    ) -> Result<Option<Arc<OpenFile>>, StorageError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<OpenFile, StorageError>>,
    {
        if valid.size == 0 || valid.size > self.capacity {
            if valid.size > 0 {
                self.stats.uncached.fetch_add(1, Ordering::Relaxed);
            }
            return Ok(None);
        }
        if let Some(f) = self.lookup(key, &valid) {
            self.stats.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(Some(f));
        }
        let gate = self.filling.lock().entry(key.to_vec()).or_default().clone();
        let result = async {
            let _turn = gate.lock().await;
            if let Some(f) = self.lookup(key, &valid) {
                self.stats.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(Some(f));
            }
            let Some(res) = self.reserve(valid.size) else {
                self.stats.uncached.fetch_add(1, Ordering::Relaxed);
                return Ok(None);
            };
            match fill().await {
                Ok(file) => {
                    self.stats.misses.fetch_add(1, Ordering::Relaxed);
                    let file = Arc::new(file);
                    self.commit(res, key, valid, file.clone());
                    Ok(Some(file))
                }
                Err(StorageError::Io(e)) if cache_file::is_local_space_or_io_error(&e) => {
                    self.stats.uncached.fetch_add(1, Ordering::Relaxed);
                    self.warn_fill_failed(&e);
                    Ok(None)
                }
                Err(e) => {
                    self.stats.misses.fetch_add(1, Ordering::Relaxed);
                    Err(e)
                }
            }
        }
        .await;
        let mut filling = self.filling.lock();
        // The map and this clone: no one else waits for this file's gate.
        if filling.get(key).is_some_and(|g| Arc::ptr_eq(g, &gate)) && Arc::strong_count(&gate) == 2
        {
            filling.remove(key);
        }
        result
    }
}

/// Parses `--nfs-data-cache`: bytes, or a number with K, M, G or T (powers of 1024,
/// an optional `i`/`iB`/`B` after it); `0` turns the cache off.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let bad = || format!("{text:?} is not a size (e.g. 256M, 1G, 65536)");
    let n: u64 = num.parse().map_err(|_| bad())?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KI" | "KIB" => 10,
        "M" | "MB" | "MI" | "MIB" => 20,
        "G" | "GB" | "GI" | "GIB" => 30,
        "T" | "TB" | "TI" | "TIB" => 40,
        _ => return Err(bad()),
    };
    n.checked_mul(1u64 << shift).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::AtomicU64;

    fn valid(id: u64, size: u64, mtime_s: u64) -> Validator {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(mtime_s);
        Validator {
            fileid: id,
            size,
            mtime: t,
            ctime: t,
        }
    }

    async fn fill_with(byte: u8, len: u64) -> Result<OpenFile, StorageError> {
        let store = CopyStore::Memory;
        let f = store.create(len)?;
        f.write_all_at(&vec![byte; len as usize], 0)?;
        Ok(store.finish(f)?)
    }

    #[tokio::test]
    async fn a_cached_copy_is_served_from_its_mapping() {
        let stats = Arc::new(CacheStats::default());
        let cache = DataCache::new(1 << 20, CopyStore::Memory, stats);
        let got = cache
            .get_or_fill(b"m", valid(1, 5000, 1), || fill_with(7, 5000))
            .await
            .unwrap()
            .expect("cached");
        assert_eq!(got.data().map(|d| d.len()), Some(5000));
        assert_eq!(got.cached_range(4990, 10).as_deref(), Some(&[7u8; 10][..]));
        assert!(got.cached_range(4995, 10).is_none());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("0"), Ok(0));
        assert!(parse_size("12X").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("-1M").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[tokio::test]
    async fn lru_keeps_the_bound_and_attributes_revalidate() {
        let stats = Arc::new(CacheStats::default());
        let cache = DataCache::new(250, CopyStore::Memory, stats.clone());
        for (i, key) in [b"a", b"b"].iter().enumerate() {
            let got = cache
                .get_or_fill(*key, valid(i as u64, 100, 1), || fill_with(i as u8, 100))
                .await
                .unwrap();
            assert!(got.is_some());
        }
        // "a" used last, so "b" is evicted for "c".
        let hit = cache.get_or_fill(b"a", valid(0, 100, 1), || async {
            panic!("a hit must not fill")
        });
        assert!(hit.await.unwrap().is_some());
        cache
            .get_or_fill(b"c", valid(2, 100, 1), || fill_with(2, 100))
            .await
            .unwrap();
        assert_eq!(stats.bytes.load(Ordering::Relaxed), 200);
        assert_eq!(stats.evictions.load(Ordering::Relaxed), 1);
        assert!(cache.lookup(b"b", &valid(1, 100, 1)).is_none());
        // A new mtime drops the copy and fills again.
        cache
            .get_or_fill(b"a", valid(0, 100, 2), || fill_with(9, 100))
            .await
            .unwrap();
        assert_eq!(stats.invalidations.load(Ordering::Relaxed), 1);
        // Too large: not cached, nothing evicted.
        let big = cache.get_or_fill(b"d", valid(3, 251, 1), || async { panic!("no fill") });
        assert!(big.await.unwrap().is_none());
        // A failed fill gives its reservation back.
        let failed = cache
            .get_or_fill(b"e", valid(4, 50, 1), || async {
                Err(StorageError::EndedEarly { at: 0, missing: 50 })
            })
            .await;
        assert!(failed.is_err());
        assert_eq!(stats.bytes.load(Ordering::Relaxed), 200);
        assert_eq!(stats.files.load(Ordering::Relaxed), 2);
    }

    #[tokio::test]
    async fn a_fill_out_of_space_serves_uncached_and_gives_its_room_back() {
        let stats = Arc::new(CacheStats::default());
        let cache = DataCache::new(1000, CopyStore::Memory, stats.clone());
        for code in [libc::ENOSPC, libc::EIO] {
            let got = cache
                .get_or_fill(b"f", valid(1, 100, 1), || async move {
                    Err(StorageError::Io(std::io::Error::from_raw_os_error(code)))
                })
                .await;
            assert!(matches!(got, Ok(None)), "{code}: not an error, not cached");
        }
        let s = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!((s(&stats.uncached), s(&stats.misses)), (2, 0));
        assert_eq!((s(&stats.bytes), s(&stats.files)), (0, 0));
        // Space again: the next open fills.
        let got = cache
            .get_or_fill(b"f", valid(1, 100, 1), || fill_with(1, 100))
            .await
            .unwrap();
        assert!(got.is_some());
        assert_eq!((s(&stats.misses), s(&stats.bytes)), (1, 100));
    }
}
