//! The local-directory backend: `openat2(RESOLVE_BENEATH)` from a root descriptor.
//!
//! Every request opens its path relative to a descriptor of the root with
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: the kernel refuses (EXDEV) any resolution
//! that would leave the root — absolute symlinks, `..` in symlink targets — and never
//! races with a concurrent rename the way a `canonicalize` + prefix check does. Symlinks
//! inside the root work. With `follow_symlinks` the open is a plain `openat`, which can
//! only leave the root through a symlink (request paths have no `..`). On kernels
//! without `openat2` (< 5.6) each component is opened with `O_NOFOLLOW`, refusing every
//! symlink. Both are the workspace's one jail, `jail::open_beneath`. `O_NONBLOCK` keeps a
//! FIFO in the tree from blocking a worker; anything that is not a regular file or
//! directory is refused.
//!
//! Small reads happen inline (a page-cache hit costs microseconds, less than a hop to the
//! blocking pool); larger ones in `spawn_blocking`.
//!
//! Opened files and directories are kept in an [`OpenCache`] (on by default), so a
//! repeated request for a small file costs no system call before its response is written;
//! see [`super::open_cache`] for how and how often entries are revalidated.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::open_cache::{self, Lookup, OpenCache, OpenCacheConfig, OpenCacheCounts, Stamp};
use super::{Entry, Handle, Kind, ListEntry, Meta, OpenFile, Storage, StorageError};

/// Reads up to this size run on the calling (async) thread.
const INLINE_READ: usize = 64 * 1024;

/// Serves files under one directory.
#[derive(Debug)]
pub struct LocalStorage {
    root: PathBuf,
    root_fd: OwnedFd,
    follow_symlinks: bool,
    chunk: usize,
    /// Open files by path; `None` = every request opens and `statx`es its path.
    cache: Option<OpenCache>,
}

impl LocalStorage {
    /// Opens `root` (must be a directory).
    pub fn new(root: &Path, follow_symlinks: bool, chunk: usize) -> std::io::Result<LocalStorage> {
        let c = CString::new(root.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in path"))?;
        // SAFETY: open(2) with a valid C string; the result is checked.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        let root_fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(LocalStorage {
            root: root.to_path_buf(),
            root_fd,
            follow_symlinks,
            chunk,
            cache: Some(OpenCache::new(OpenCacheConfig::default())),
        })
    }

    /// Replaces the open-file cache (`None` turns it off).
    pub fn with_open_cache(mut self, cfg: Option<OpenCacheConfig>) -> LocalStorage {
        self.cache = cfg.map(OpenCache::new);
        self
    }

    /// Whether the open-file cache is on.
    pub(crate) fn has_open_cache(&self) -> bool {
        self.cache.is_some()
    }

    /// Entries and bytes in the open-file cache (zero when it is off).
    pub fn open_cache_counts(&self) -> OpenCacheCounts {
        self.cache
            .as_ref()
            .map_or_else(OpenCacheCounts::default, OpenCache::counts)
    }

    /// Opens `path` through the jail and makes its entry (with the bytes of a small file
    /// that has not changed lately, checked against a second `fstat` after reading).
    fn open_uncached(&self, path: &str) -> Result<(Entry, Stamp), StorageError> {
        let fd = self.open_fd(path).map_err(map_open_error)?;
        let file = File::from(fd);
        let md = file.metadata()?;
        let meta = meta_of(&md)?;
        let stamp = Stamp::of(&md);
        let small = meta.kind == Kind::File
            && meta.size <= open_cache::SMALL_FILE_MAX
            && self
                .cache
                .as_ref()
                .is_some_and(|c| !stamp.is_racy(std::time::SystemTime::now(), c.config().racy));
        if let Some(cache) = &self.cache
            && let Some(entry) = cache.revalidated(path, &stamp, small)
        {
            return Ok((entry, stamp));
        }
        let open = if small {
            match pread_exact(&file, 0, meta.size as usize) {
                Ok(data) if Stamp::of(&file.metadata()?) == stamp => {
                    OpenFile::with_data(file, data)
                }
                _ => OpenFile::new(file),
            }
        } else {
            OpenFile::new(file)
        };
        let entry = Entry {
            meta,
            handle: Handle::Local(Arc::new(open)),
        };
        if let Some(cache) = &self.cache {
            cache.insert(path, entry.clone(), stamp);
        }
        Ok((entry, stamp))
    }

    /// The served directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Opens `path` (components joined with `/`; empty: the root) beneath the root.
    fn open_fd(&self, path: &str) -> std::io::Result<OwnedFd> {
        let flags = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK) as u64;
        let rel = if path.is_empty() {
            CString::new(".").expect("static")
        } else {
            CString::new(path).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?
        };
        if self.follow_symlinks {
            // SAFETY: openat(2) with our root fd and a valid C string.
            let fd = unsafe { libc::openat(self.root_fd.as_raw_fd(), rel.as_ptr(), flags as i32) };
            return check_fd(fd);
        }
        let flags = jail::OFlags::from_bits_retain(flags as u32);
        jail::open_beneath(
            self.root_fd.as_fd(),
            rel.as_bytes(),
            flags,
            jail::Policy::BENEATH,
        )
    }
}

fn check_fd(fd: RawFd) -> std::io::Result<OwnedFd> {
    if fd < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        // SAFETY: a fresh descriptor returned by the kernel, owned from here on.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

fn map_open_error(e: std::io::Error) -> StorageError {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) => StorageError::NotFound,
        Some(libc::EXDEV) => StorageError::Forbidden("path leaves the root"),
        Some(libc::ELOOP) => StorageError::Forbidden("symlink refused"),
        Some(libc::EACCES | libc::EPERM) => StorageError::Forbidden("permission denied"),
        _ => StorageError::Io(e),
    }
}

fn meta_of(md: &std::fs::Metadata) -> Result<Meta, StorageError> {
    let kind = if md.is_file() {
        Kind::File
    } else if md.is_dir() {
        Kind::Dir
    } else {
        return Err(StorageError::Forbidden("not a regular file or directory"));
    };
    Ok(Meta {
        kind,
        size: md.len(),
        mtime: md.modified()?,
        ino: md.ino(),
    })
}

fn pread_exact(file: &File, offset: u64, len: usize) -> Result<Bytes, StorageError> {
    let mut buf = vec![0u8; len];
    match file.read_exact_at(&mut buf, offset) {
        Ok(()) => Ok(Bytes::from(buf)),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(StorageError::Io(
            std::io::Error::new(e.kind(), "file shrank while being served"),
        )),
        Err(e) => Err(StorageError::Io(e)),
    }
}

impl LocalStorage {
    /// What [`Storage::open`] answers for `path`: its components joined with `/` (a
    /// component never holds a `/`; empty: the root). Every step is a short blocking call
    /// (or none, on a fresh cache hit). The HTTP fast path calls this with the request
    /// path's text, so both paths share one cache and one revalidation rule.
    pub(crate) fn open_joined(&self, path: &str) -> Result<Entry, StorageError> {
        let Some(cache) = &self.cache else {
            return self.open_uncached(path).map(|(e, _)| e);
        };
        match cache.lookup(path) {
            Lookup::Fresh(entry) => return Ok(entry),
            Lookup::CheckFd(entry, stamp) => {
                if let Handle::Local(f) = &entry.handle
                    && let Ok(md) = f.metadata()
                    && Stamp::of(&md) == stamp
                    && stamp.linked()
                {
                    return Ok(entry);
                }
            }
            Lookup::Open => {}
        }
        match self.open_uncached(path) {
            Ok((entry, _)) => Ok(entry),
            Err(e) => {
                cache.remove(path);
                Err(e)
            }
        }
    }
}

#[async_trait::async_trait]
impl Storage for LocalStorage {
    async fn open(&self, path: &[String]) -> Result<Entry, StorageError> {
        self.open_joined(&path.join("/"))
    }

    fn open_now(&self, path: &[String]) -> Option<Result<Entry, StorageError>> {
        Some(self.open_joined(&path.join("/")))
    }

    async fn read(&self, handle: &Handle, offset: u64, len: usize) -> Result<Bytes, StorageError> {
        let Handle::Local(file) = handle else {
            return Err(StorageError::Forbidden("foreign handle"));
        };
        if let Some(data) = file.cached_range(offset, len) {
            return Ok(data);
        }
        if len <= INLINE_READ {
            return pread_exact(file, offset, len);
        }
        let file = file.clone();
        tokio::task::spawn_blocking(move || pread_exact(&file, offset, len))
            .await
            .map_err(|e| StorageError::Io(std::io::Error::other(e)))?
    }

    async fn list(&self, dir: &Entry) -> Result<Vec<ListEntry>, StorageError> {
        let Handle::Local(file) = &dir.handle else {
            return Err(StorageError::Forbidden("foreign handle"));
        };
        // Read the directory we already opened safely, not its path again.
        let proc_path = format!("/proc/self/fd/{}", file.as_raw_fd());
        let file = file.clone();
        tokio::task::spawn_blocking(move || {
            let _keep_open = file;
            let mut out = Vec::new();
            for ent in std::fs::read_dir(proc_path)? {
                let ent = ent?;
                let Ok(md) = ent.metadata() else { continue };
                out.push(ListEntry {
                    name: ent.file_name().to_string_lossy().into_owned(),
                    is_dir: md.is_dir(),
                    size: md.len(),
                    mtime: md.modified()?,
                });
            }
            Ok(out)
        })
        .await
        .map_err(|e| StorageError::Io(std::io::Error::other(e)))?
    }

    fn read_ahead(&self) -> usize {
        2
    }

    fn max_read(&self) -> usize {
        self.chunk
    }

    fn name(&self) -> &'static str {
        "local"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn comps(p: &str) -> Vec<String> {
        p.split('/').map(str::to_string).collect()
    }

    fn storage(dir: &Path, cfg: OpenCacheConfig) -> LocalStorage {
        LocalStorage::new(dir, false, 1 << 20)
            .unwrap()
            .with_open_cache(Some(cfg))
    }

    /// Opens `path` and reads the whole file.
    async fn get(s: &LocalStorage, path: &str) -> Result<Vec<u8>, StorageError> {
        let e = s.open(&comps(path)).await?;
        Ok(s.read(&e.handle, 0, e.meta.size as usize).await?.to_vec())
    }

    fn holds_bytes(e: &Entry) -> bool {
        matches!(&e.handle, Handle::Local(f) if f.data().is_some())
    }

    const NOT_RACY: OpenCacheConfig = OpenCacheConfig {
        valid_for: Duration::from_millis(300),
        max_entries: 100,
        max_bytes: 1 << 20,
        racy: Duration::ZERO,
    };

    /// `--open-file-cache-ms 0`: no cache, so a change in place is served at once.
    #[tokio::test]
    async fn without_the_open_file_cache_every_change_is_seen_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        std::fs::write(&f, b"old!").unwrap();
        let s = LocalStorage::new(dir.path(), false, 1 << 20)
            .unwrap()
            .with_open_cache(None);
        assert_eq!(get(&s, "a.txt").await.unwrap(), b"old!");
        std::fs::write(&f, b"new!").unwrap();
        assert_eq!(get(&s, "a.txt").await.unwrap(), b"new!");
        assert!(!holds_bytes(&s.open(&comps("a.txt")).await.unwrap()));
        assert_eq!(s.open_cache_counts().entries, 0);
    }

    #[tokio::test]
    async fn small_file_served_from_memory_then_change_and_delete_seen_after_valid_for() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        std::fs::write(&f, b"old!").unwrap();
        let s = storage(dir.path(), NOT_RACY);
        let t0 = Instant::now();
        assert_eq!(get(&s, "a.txt").await.unwrap(), b"old!");
        assert!(holds_bytes(&s.open(&comps("a.txt")).await.unwrap()));
        assert_eq!(s.open_cache_counts().bytes, 4);
        // Same size, in place: within valid_for the cached bytes are served (no syscall).
        std::fs::write(&f, b"new!").unwrap();
        let within = get(&s, "a.txt").await.unwrap();
        if t0.elapsed() < NOT_RACY.valid_for {
            assert_eq!(within, b"old!");
        }
        tokio::time::sleep(NOT_RACY.valid_for + Duration::from_millis(20)).await;
        assert_eq!(get(&s, "a.txt").await.unwrap(), b"new!");
        // Replaced by a rename (a new inode under the same name, as deploy tools do).
        let tmp = dir.path().join("a.tmp");
        std::fs::write(&tmp, b"renamed").unwrap();
        std::fs::rename(&tmp, &f).unwrap();
        tokio::time::sleep(NOT_RACY.valid_for + Duration::from_millis(20)).await;
        assert_eq!(get(&s, "a.txt").await.unwrap(), b"renamed");
        // Deleted: 404 and the entry (and its bytes) gone.
        std::fs::remove_file(&f).unwrap();
        tokio::time::sleep(NOT_RACY.valid_for + Duration::from_millis(20)).await;
        assert!(matches!(
            get(&s, "a.txt").await,
            Err(StorageError::NotFound)
        ));
        assert_eq!(s.open_cache_counts().entries, 0);
        assert_eq!(s.open_cache_counts().bytes, 0);
    }

    #[tokio::test]
    async fn large_file_change_and_delete_seen_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("big.bin");
        let big = open_cache::SMALL_FILE_MAX as usize + 1;
        std::fs::write(&f, vec![1u8; big]).unwrap();
        let cfg = OpenCacheConfig {
            valid_for: Duration::from_secs(3600),
            ..NOT_RACY
        };
        let s = storage(dir.path(), cfg);
        let e = s.open(&comps("big.bin")).await.unwrap();
        assert!(!holds_bytes(&e));
        assert_eq!(e.meta.size, big as u64);
        // Changed in place (new size): the per-request fstat sees it.
        std::fs::write(&f, vec![2u8; big + 10]).unwrap();
        let got = get(&s, "big.bin").await.unwrap();
        assert_eq!((got.len(), got[0]), (big + 10, 2));
        // Renamed over: the cached descriptor's file has no links left.
        let tmp = dir.path().join("big.tmp");
        std::fs::write(&tmp, vec![3u8; big + 10]).unwrap();
        std::fs::rename(&tmp, &f).unwrap();
        assert_eq!(get(&s, "big.bin").await.unwrap()[0], 3);
        std::fs::remove_file(&f).unwrap();
        assert!(matches!(
            get(&s, "big.bin").await,
            Err(StorageError::NotFound)
        ));
    }

    #[tokio::test]
    async fn recently_changed_small_file_is_not_kept_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("hot.txt");
        std::fs::write(&f, b"1111").unwrap();
        let cfg = OpenCacheConfig {
            valid_for: Duration::from_secs(3600),
            racy: Duration::from_secs(3600),
            ..NOT_RACY
        };
        let s = storage(dir.path(), cfg);
        assert_eq!(get(&s, "hot.txt").await.unwrap(), b"1111");
        assert!(!holds_bytes(&s.open(&comps("hot.txt")).await.unwrap()));
        // Rewritten with the same size, possibly in the same timestamp tick: still seen.
        std::fs::write(&f, b"2222").unwrap();
        assert_eq!(get(&s, "hot.txt").await.unwrap(), b"2222");
        assert_eq!(s.open_cache_counts().bytes, 0);
    }

    #[tokio::test]
    async fn bounded_in_entries_and_bytes() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..60 {
            std::fs::write(dir.path().join(format!("f{i}")), vec![b'x'; 1000]).unwrap();
        }
        let cfg = OpenCacheConfig {
            max_entries: 16,
            max_bytes: 10_000,
            ..NOT_RACY
        };
        let s = storage(dir.path(), cfg);
        for round in 0..2 {
            for i in 0..60 {
                let got = get(&s, &format!("f{i}")).await.unwrap();
                assert_eq!(got.len(), 1000, "round {round} file {i}");
                let c = s.open_cache_counts();
                assert!(c.entries <= 16 && c.bytes <= 10_000, "{c:?}");
            }
        }
        let c = s.open_cache_counts();
        assert!(c.entries > 0 && c.bytes > 0, "{c:?}");
        // A file larger than the whole byte budget is served, only its bytes not kept.
        std::fs::write(dir.path().join("wide"), vec![b'y'; 20_000]).unwrap();
        assert_eq!(get(&s, "wide").await.unwrap().len(), 20_000);
        assert!(s.open_cache_counts().bytes <= 10_000);
    }

    #[tokio::test]
    async fn jail_holds_with_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"secret").unwrap();
        std::fs::write(dir.path().join("inside"), b"inside").unwrap();
        std::os::unix::fs::symlink("inside", dir.path().join("link")).unwrap();
        let s = storage(dir.path(), NOT_RACY);
        assert_eq!(get(&s, "link").await.unwrap(), b"inside");
        // The link now leaves the root: refused once the entry is revalidated.
        std::fs::remove_file(dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("link")).unwrap();
        tokio::time::sleep(NOT_RACY.valid_for + Duration::from_millis(20)).await;
        for _ in 0..2 {
            assert!(matches!(
                get(&s, "link").await,
                Err(StorageError::Forbidden(_))
            ));
        }
    }
}
