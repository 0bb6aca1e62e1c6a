//! The NFS backend: a pooled `nfsclient::Client` plus a short-lived handle/attribute cache.
//!
//! `meta` is one LOOKUP per path component, each result cached for `attr_ttl` (1 s by
//! default, like the kernel client's `acregmin`-style attribute cache), so on a warm
//! cache a request costs no metadata RPC at all; `read` is READ calls of at most the
//! server's `rtmax`. A stale handle (file replaced, server restarted with new handles)
//! drops the cache entry and resolves the path again once. NFS servers do not follow
//! symlinks, so the walk does: READLINK, then the target's components (relative targets
//! only; `..` may not climb above the served root, 40 hops at most) — the same answers as
//! the local backend's `RESOLVE_BENEATH` (outside → 403).
//!
//! The last component's LOOKUP, when no cache answers it, carries a READ of the file's
//! first 64 KiB in the same NFSv4 COMPOUND (PUTFH, LOOKUP, GETFH, GETATTR, READ;
//! [`Client::lookup_head`]): a small file is opened and read in one round trip, its
//! bytes kept in the handle ([`NfsFile::head`]), and a large file's first READ is done.
//! Both answers are the server's after the request arrived, so the cache-off guarantee
//! holds. The price: a HEAD, a 304 or a range past 64 KiB reads bytes it does not send.
//! Over NFSv3 (no COMPOUND) it is the LOOKUP alone, and the READ follows. When the
//! served root is the export's root, the walk starts from the client's root handle
//! without a GETATTR of it.
//!
//! Small whole files (≤ 64 KiB, the inline limit) read with a READ that reached EOF are
//! kept for the same `attr_ttl`, in at most `DATA_CACHE_MAX` bytes: within the TTL a
//! small file is served without any RPC, as the kernel client serves from its page cache
//! while its attribute cache is fresh. Large files are always read over NFS. A TTL of 0
//! turns both caches off (every request does LOOKUPs and READs).
//!
//! With `--nfs-data-cache SIZE` ([`super::data_cache`]) whole files up to SIZE are kept
//! instead — in sealed memfds, or in unlinked files in `--nfs-data-cache-dir` — close-to-open: every open does a fresh LOOKUP of the last
//! component (its reply carries the file's attributes, as a GETATTR would, and a file
//! replaced under the same name shows up as a new handle), and a copy whose size, mtime,
//! ctime or file id changed is dropped and read again. A cached file is handed to the
//! HTTP layer as an open descriptor with its bytes in memory (mapped, or read once when
//! small), which are written from there; a large directory copy is read from its
//! descriptor.
//! The TTL-based small-file cache is then off, since it serves without revalidating.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use nfsclient::{Attr, Client, ClientConfig, FileHandle, FileKind, NfsUrl, PipedData, nfsstat3};
use parking_lot::Mutex;

use super::cache_file::CopyStore;
use super::data_cache::{DataCache, Validator};
use super::{
    Chunk, Entry, Handle, Kind, ListEntry, Meta, NfsFile, OpenFile, Storage, StorageError,
};
use crate::cache_stats::CacheStats;
use crate::config::NfsVersionChoice;

/// Entries beyond this make the cache start over (a crude but bounded policy).
const CACHE_MAX: usize = 100_000;

/// Largest file kept in the data cache.
const DATA_FILE_MAX: usize = 64 * 1024;

/// Bytes read with a file's LOOKUP (over NFSv4, in the same COMPOUND): a file up to
/// this size is opened and read in one round trip, and a larger one's first READ
/// (`respond`'s `FIRST_READ`, the same 64 KiB) is already done.
const HEAD_MAX: u32 = 64 * 1024;

/// Bytes of file data the data cache may hold.
const DATA_CACHE_MAX: usize = 64 << 20;

/// Close-to-open revalidations (the fresh LOOKUP of a path's last component) shared by
/// concurrent requests for the same name, without weakening the guarantee.
///
/// A request may use a LOOKUP's answer only if that LOOKUP was *sent after the request
/// arrived* — then no change the request could be required to see is missed. Per name,
/// one LOOKUP is in flight at a time (a FIFO lock held across the call); requests that
/// arrive meanwhile queue, the first of them sends the next LOOKUP, and every other one
/// that arrived before that LOOKUP was sent takes its answer. With c concurrent requests
/// for one file this is at most two LOOKUPs per round trip instead of c.
#[derive(Default)]
struct Revalidations {
    /// Orders arrivals and LOOKUP starts.
    seq: std::sync::atomic::AtomicU64,
    /// Per (directory handle, name): the last LOOKUP's start number and answer.
    names: Mutex<HashMap<RevalKey, Arc<RevalSlot>>>,
}

/// A directory handle's bytes and a name in it.
type RevalKey = (Vec<u8>, String);

type RevalSlot = tokio::sync::Mutex<Option<(u64, (FileHandle, Attr))>>;

impl std::fmt::Debug for Revalidations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Revalidations").finish_non_exhaustive()
    }
}

impl Revalidations {
    /// LOOKUP `name` in `dir` with an answer no older than this call.
    async fn lookup(
        &self,
        client: &Client,
        dir: &FileHandle,
        name: &str,
    ) -> Result<(FileHandle, Attr), nfsclient::Error> {
        use std::sync::atomic::Ordering::SeqCst;
        let arrived = self.seq.fetch_add(1, SeqCst);
        let slot = {
            let mut names = self.names.lock();
            if names.len() >= CACHE_MAX {
                names.clear();
            }
            names
                .entry((dir.data.to_vec(), name.to_string()))
                .or_default()
                .clone()
        };
        let mut last = slot.lock().await;
        if let Some((started, hit)) = &*last
            && *started > arrived
        {
            return Ok(hit.clone());
        }
        let started = self.seq.fetch_add(1, SeqCst);
        match client.lookup(dir, name).await {
            Ok(hit) => {
                *last = Some((started, hit.clone()));
                Ok(hit)
            }
            Err(e) => {
                // Errors are not shared: each waiter asks for itself.
                *last = None;
                Err(e)
            }
        }
    }
}

/// Small files by handle: data, when read, bytes held in total.
#[derive(Debug, Default)]
struct SmallFiles {
    files: HashMap<Vec<u8>, (Bytes, Instant)>,
    bytes: usize,
}

/// Serves files of an NFS export.
#[derive(Debug)]
pub struct NfsStorage {
    client: Client,
    /// Components of the served root inside the export (the URL's path part).
    base: Vec<String>,
    /// The served root's attributes at connect: a directory. Stands in for them while
    /// a walk passes through the export's root (see [`NfsStorage::resolve`]).
    root_attr: Attr,
    /// Path (joined components, relative to the export) → handle, attributes, time.
    cache: Mutex<HashMap<String, (FileHandle, Attr, Instant)>>,
    data: Mutex<SmallFiles>,
    /// `--nfs-data-cache`: whole files, revalidated on every open.
    files: Option<DataCache>,
    /// The per-open revalidations of the data cache, shared between concurrent opens.
    revalidations: Revalidations,
    /// What this server's streamed bodies may hold (see [`crate::stream_budget::StreamBudgets`]).
    budgets: Arc<crate::stream_budget::StreamBudgets>,
    ttl: Duration,
    chunk: usize,
    read_ahead: usize,
    /// Streamed bodies take READ data in pipes and splice it on (see [`Self::with_splice`]).
    splice: bool,
}

/// Why [`NfsStorage::connect`] could not start serving an export.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The `nfs://` URL does not parse.
    #[error(transparent)]
    Url(nfsclient::Error),
    /// The data cache's directory cannot hold its copies.
    #[error("data cache directory {}", path.display())]
    DataCacheDir {
        path: std::path::PathBuf,
        #[source]
        source: super::cache_file::CacheDirError,
    },
    /// The export cannot be mounted, or the server cannot be reached.
    #[error(transparent)]
    Mount(nfsclient::Error),
    /// The export was mounted but the served path is missing or not a directory.
    #[error("path /{path} {reason} on the NFS server")]
    Root { path: String, reason: &'static str },
}

impl NfsStorage {
    /// The NFS version the client speaks.
    pub fn version(&self) -> nfsclient::NfsVersion {
        self.client.version()
    }

    /// Mounts `url` in `version` and checks that the served root is a directory; for a missing or
    /// wrong root, the error names the path inside the export. A data-cache size
    /// of 0 leaves `--nfs-data-cache` off (its stats then stay 0); with a directory, its
    /// copies are files there, checked before anything is mounted.
    pub async fn connect(
        (url, version): (&str, NfsVersionChoice),
        connections: usize,
        timeout: Duration,
        ttl: Duration,
        chunk: usize,
        read_ahead: usize,
        (data_cache, data_cache_dir, stats): (u64, Option<&std::path::Path>, Arc<CacheStats>),
    ) -> Result<NfsStorage, ConnectError> {
        let files = match (data_cache, data_cache_dir) {
            (0, _) => None,
            (size, dir) => {
                let store = match dir {
                    None => CopyStore::Memory,
                    Some(path) => {
                        CopyStore::in_dir(path).map_err(|source| ConnectError::DataCacheDir {
                            path: path.to_path_buf(),
                            source,
                        })?
                    }
                };
                tracing::info!(size, "nfs data cache: copies {}", store.describe());
                Some(DataCache::new(size, store, stats))
            }
        };
        let mut url = NfsUrl::parse(url).map_err(ConnectError::Url)?;
        match version {
            NfsVersionChoice::Url => {}
            NfsVersionChoice::Auto => url.version = None,
            NfsVersionChoice::Exact(v) => url.version = Some(v),
        }
        let client = Client::connect(
            &url,
            ClientConfig {
                connections,
                call_timeout: timeout,
                connect_timeout: timeout.min(Duration::from_secs(2)),
            },
        )
        .await
        .map_err(ConnectError::Mount)?;
        let base: Vec<String> = client
            .path()
            .split('/')
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect();
        let root_err = |reason| ConnectError::Root {
            path: client.path().to_string(),
            reason,
        };
        let root_attr = match client.lookup_path(client.path()).await {
            Ok((_, attr)) => attr,
            Err(e) if e.status() == Some(nfsstat3::NFS3ERR_NOENT) => {
                return Err(root_err("does not exist"));
            }
            Err(e) if e.status() == Some(nfsstat3::NFS3ERR_NOTDIR) => {
                return Err(root_err("is not a directory (a path component is a file)"));
            }
            Err(e) => return Err(ConnectError::Mount(e)),
        };
        if root_attr.kind != FileKind::Dir {
            return Err(root_err("is not a directory"));
        }
        Ok(NfsStorage {
            chunk: chunk.min(client.rtmax() as usize),
            client,
            base,
            root_attr,
            cache: Mutex::new(HashMap::new()),
            data: Mutex::new(SmallFiles::default()),
            files,
            revalidations: Revalidations::default(),
            budgets: crate::stream_budget::StreamBudgets::new(),
            ttl,
            read_ahead,
            splice: false,
        })
    }

    /// A READ that failed: a stale handle clears the caches (the next request looks up
    /// and re-MOUNTs).
    fn read_failed(&self, e: nfsclient::Error) -> StorageError {
        if e.is_stale() {
            self.forget_all();
        }
        map_err(e)
    }

    /// Streamed bodies get their READ data spliced from the NFS socket into pipes and from
    /// there into the client's socket (`--nfs-splice`): httpd then copies no byte of a
    /// large download.
    pub fn with_splice(mut self, on: bool) -> NfsStorage {
        self.splice = on;
        self
    }

    /// The underlying client (tests and diagnostics).
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn cached(&self, key: &str) -> Option<(FileHandle, Attr)> {
        if self.ttl.is_zero() {
            return None;
        }
        let cache = self.cache.lock();
        let (fh, attr, at) = cache.get(key)?;
        (at.elapsed() < self.ttl).then(|| (fh.clone(), attr.clone()))
    }

    fn remember(&self, key: String, fh: &FileHandle, attr: &Attr) {
        if self.ttl.is_zero() {
            return;
        }
        let mut cache = self.cache.lock();
        if cache.len() >= CACHE_MAX {
            cache.clear();
        }
        cache.insert(key, (fh.clone(), attr.clone(), Instant::now()));
    }

    /// Walks the components from the served root, reusing fresh cache entries and
    /// following symlinks whose targets stay inside the served root.
    /// With `fresh`, the last component is always looked up again (close-to-open).
    ///
    /// The last component's LOOKUP, when no cache answers it, is [`Client::lookup_head`]:
    /// over NFSv4 it reads the file's first `HEAD_MAX` bytes in the same round trip, and
    /// those come back as the third value (empty otherwise).
    async fn resolve(
        &self,
        path: &[String],
        fresh: bool,
    ) -> Result<(FileHandle, Attr, Bytes), Walk> {
        let base = self.base.len();
        let mut cur: Vec<String> = self.base.clone();
        cur.extend(path.iter().cloned());
        let full_key = cur.join("/");
        if !fresh && let Some((fh, attr)) = self.cached(&full_key) {
            return Ok((fh, attr, Bytes::new()));
        }
        // The served root's handle: cached, or LOOKUPs from the export root. When the
        // served root is the export's root, its handle is the client's (kept from the
        // MOUNT, renewed on a stale answer) and it is a directory (checked at connect;
        // an object's type never changes): its attributes are fetched only if the walk
        // ends on it (`root_attr_unknown`), not once per request.
        cur.truncate(base);
        let root_key = cur.join("/");
        let root_attr_unknown = base == 0 && !path.is_empty() && self.cached(&root_key).is_none();
        let (mut fh, mut attr) = match self.cached(&root_key) {
            Some(hit) => hit,
            None if root_attr_unknown => (self.client.root(), self.root_attr.clone()),
            None => {
                let hit = self.client.lookup_path(&root_key).await?;
                self.remember(root_key, &hit.0, &hit.1);
                hit
            }
        };
        let mut head = Bytes::new();
        // `stack[i]` is the object named by `cur[..base + i]`, so `..` can step back.
        let mut stack = vec![(fh.clone(), attr.clone())];
        let mut todo: std::collections::VecDeque<String> = path.iter().cloned().collect();
        let mut hops = 0;
        while let Some(comp) = todo.pop_front() {
            if comp == ".." {
                if cur.len() <= base {
                    return Err(Walk::Escape);
                }
                cur.pop();
                stack.pop();
                (fh, attr) = stack.last().cloned().expect("the root stays on the stack");
                head = Bytes::new();
                continue;
            }
            if attr.kind != FileKind::Dir {
                return Err(Walk::Nfs(nfsclient::Error::Status {
                    op: "LOOKUP",
                    status: nfsstat3::NFS3ERR_NOTDIR,
                }));
            }
            cur.push(comp);
            let key = cur.join("/");
            let last = fresh && todo.is_empty();
            let name = cur.last().expect("just pushed");
            let (nfh, nattr, nhead) = match self.cached(&key).filter(|_| !last) {
                Some((f, a)) => (f, a, Bytes::new()),
                None if last => {
                    let (f, a) = self.revalidations.lookup(&self.client, &fh, name).await?;
                    (f, a, Bytes::new())
                }
                None if todo.is_empty() => {
                    let l = self.client.lookup_head(&fh, name, HEAD_MAX).await?;
                    (l.fh, l.attr, l.head.map(|h| h.data).unwrap_or_default())
                }
                None => {
                    let (f, a) = self.client.lookup(&fh, name).await?;
                    (f, a, Bytes::new())
                }
            };
            if nattr.kind == FileKind::Symlink {
                cur.pop();
                hops += 1;
                if hops > 40 {
                    return Err(Walk::Escape);
                }
                let target = self.client.readlink(&nfh).await?;
                if target.starts_with('/') {
                    // Absolute targets name the client's file system, not the export.
                    return Err(Walk::Escape);
                }
                for c in target
                    .split('/')
                    .rev()
                    .filter(|c| !c.is_empty() && *c != ".")
                {
                    todo.push_front(c.to_string());
                }
                continue;
            }
            self.remember(key, &nfh, &nattr);
            (fh, attr, head) = (nfh, nattr, nhead);
            stack.push((fh.clone(), attr.clone()));
        }
        if root_attr_unknown && stack.len() == 1 {
            // Symlinks led back to the served root: it is the answer, with its own
            // attributes.
            attr = self.client.getattr(&fh).await?;
            head = Bytes::new();
        }
        self.remember(full_key, &fh, &attr);
        Ok((fh, attr, head))
    }

    fn forget_all(&self) {
        self.cache.lock().clear();
        *self.data.lock() = SmallFiles::default();
    }

    fn cached_data(&self, fh: &FileHandle, offset: u64, len: usize) -> Option<Bytes> {
        if self.ttl.is_zero() || self.files.is_some() {
            return None;
        }
        let data = self.data.lock();
        let (bytes, at) = data.files.get(fh.data.as_ref())?;
        let end = (offset as usize).checked_add(len)?;
        (at.elapsed() < self.ttl && end <= bytes.len()).then(|| bytes.slice(offset as usize..end))
    }

    fn remember_data(&self, fh: &FileHandle, bytes: &Bytes) {
        if self.ttl.is_zero() || self.files.is_some() || bytes.len() > DATA_FILE_MAX {
            return;
        }
        let mut data = self.data.lock();
        if data.bytes + bytes.len() > DATA_CACHE_MAX {
            *data = SmallFiles::default();
        }
        data.bytes += bytes.len();
        if let Some((old, _)) = data
            .files
            .insert(fh.data.to_vec(), (bytes.clone(), Instant::now()))
        {
            data.bytes -= old.len();
        }
    }
}

impl NfsStorage {
    /// Reads the whole file (`size` bytes, as its attributes said) into a new copy in
    /// `store`, `read_ahead` READs of `chunk` bytes in flight, and finishes it
    /// ([`CopyStore::finish`]).
    async fn fill(
        &self,
        store: &CopyStore,
        fh: &FileHandle,
        size: u64,
    ) -> Result<OpenFile, StorageError> {
        let file = Arc::new(store.create(size)?);
        let chunk = self.chunk as u64;
        let mut tasks = tokio::task::JoinSet::new();
        let mut next = 0u64;
        loop {
            while tasks.len() < self.read_ahead && next < size {
                let (client, fh, file) = (self.client.clone(), fh.clone(), file.clone());
                let (off, len) = (next, chunk.min(size - next));
                next += len;
                tasks.spawn(async move { fill_range(&client, &fh, &file, off, len).await });
            }
            match tasks.join_next().await {
                None => break,
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(e))) => return Err(e),
                Some(Err(e)) => return Err(StorageError::Io(std::io::Error::other(e))),
            }
        }
        let file = Arc::into_inner(file).expect("every fill task has ended");
        Ok(store.finish(file)?)
    }
}

/// READs `len` bytes at `offset` into the same range of `file`.
async fn fill_range(
    client: &Client,
    fh: &FileHandle,
    file: &std::fs::File,
    offset: u64,
    len: u64,
) -> Result<(), StorageError> {
    let max = u64::from(client.rtmax());
    let mut done = 0u64;
    while done < len {
        let want = (len - done).min(max) as u32;
        let r = client
            .read(fh, offset + done, want)
            .await
            .map_err(map_err)?;
        if r.data.is_empty() {
            return Err(StorageError::EndedEarly {
                at: offset + done,
                missing: len - done,
            });
        }
        let n = (r.data.len() as u64).min(len - done);
        file.write_all_at(&r.data[..n as usize], offset + done)?;
        done += n;
    }
    Ok(())
}

/// Why a path walk stopped.
enum Walk {
    Nfs(nfsclient::Error),
    /// A symlink pointed outside the served root (or looped).
    Escape,
}

impl From<nfsclient::Error> for Walk {
    fn from(e: nfsclient::Error) -> Self {
        Walk::Nfs(e)
    }
}

/// A READ at `at` answered no data while `missing` bytes were still expected.
fn ended_early(at: u64, missing: usize) -> StorageError {
    StorageError::EndedEarly {
        at,
        missing: missing as u64,
    }
}

fn map_err(e: nfsclient::Error) -> StorageError {
    use nfsclient::Error as E;
    match &e {
        _ if e.is_not_found() => StorageError::NotFound,
        E::BadPath { .. } => StorageError::NotFound,
        E::Status {
            status: nfsstat3::NFS3ERR_ACCES | nfsstat3::NFS3ERR_PERM,
            ..
        } => StorageError::Forbidden("permission denied"),
        E::Unreachable { .. } | E::MountDenied { .. } => StorageError::Unavailable(e),
        E::Timeout { .. } => StorageError::Timeout(e),
        _ => StorageError::BadGateway(e),
    }
}

fn meta_of(attr: &Attr) -> Result<Meta, StorageError> {
    let kind = match attr.kind {
        FileKind::File => Kind::File,
        FileKind::Dir => Kind::Dir,
        FileKind::Symlink => return Err(StorageError::Forbidden("symlink refused")),
        FileKind::Other => return Err(StorageError::Forbidden("not a regular file or directory")),
    };
    Ok(Meta {
        kind,
        size: attr.size,
        mtime: attr.mtime,
        ino: attr.fileid,
    })
}

#[async_trait::async_trait]
impl Storage for NfsStorage {
    async fn open(&self, path: &[String]) -> Result<Entry, StorageError> {
        let fresh = self.files.is_some();
        let res = match self.resolve(path, fresh).await {
            Err(Walk::Nfs(e)) if e.is_stale() => {
                self.forget_all();
                if let Err(e) = self.client.remount().await {
                    return Err(map_err(e));
                }
                self.resolve(path, fresh).await
            }
            other => other,
        };
        let (fh, attr, head) = res.map_err(|w| match w {
            Walk::Nfs(e) => map_err(e),
            Walk::Escape => StorageError::Forbidden("symlink leaves the root"),
        })?;
        let meta = meta_of(&attr)?;
        if let Some(cache) = &self.files
            && meta.kind == Kind::File
        {
            let valid = Validator::from(&attr);
            let size = valid.size;
            if let Some(file) = cache
                .get_or_fill(&fh.data, valid, || self.fill(cache.store(), &fh, size))
                .await?
            {
                return Ok(Entry {
                    meta,
                    handle: Handle::Local(file),
                });
            }
        }
        if head.len() as u64 == attr.size {
            // The whole file came with the LOOKUP: keep it while attributes are fresh.
            self.remember_data(&fh, &head);
        }
        Ok(Entry {
            meta,
            handle: Handle::Nfs(NfsFile { fh, head }),
        })
    }

    async fn read(&self, handle: &Handle, offset: u64, len: usize) -> Result<Bytes, StorageError> {
        if let Some(data) = handle.cached_range(offset, len) {
            return Ok(data);
        }
        let fh = match handle {
            Handle::Nfs(file) => &file.fh,
            Handle::Local(copy) => {
                if let Some(data) = copy.cached_range(offset, len) {
                    return Ok(data);
                }
                // A data-cache copy not held in memory (a large directory copy): one
                // pread, whose failure (a dying disk) is this response's alone.
                let mut buf = vec![0u8; len];
                copy.read_exact_at(&mut buf, offset)?;
                return Ok(Bytes::from(buf));
            }
        };
        if let Some(hit) = self.cached_data(fh, offset, len) {
            return Ok(hit);
        }
        let max = self.client.rtmax() as usize;
        let mut out: Option<Vec<u8>> = None;
        let mut done = 0usize;
        while done < len {
            let want = (len - done).min(max) as u32;
            let r = self
                .client
                .read(fh, offset + done as u64, want)
                .await
                .map_err(|e| self.read_failed(e))?;
            let got = r.data.len();
            if got == 0 {
                return Err(ended_early(offset + done as u64, len - done));
            }
            done += got;
            match &mut out {
                None if done >= len => {
                    let mut data = r.data;
                    data.truncate(len);
                    if offset == 0 && r.eof && got == len {
                        // The whole file in one READ: keep it while attributes are fresh.
                        self.remember_data(fh, &data);
                    }
                    return Ok(data);
                }
                None => {
                    let mut v = Vec::with_capacity(len);
                    v.extend_from_slice(&r.data);
                    out = Some(v);
                }
                Some(v) => v.extend_from_slice(&r.data),
            }
        }
        let mut v = out.unwrap_or_default();
        v.truncate(len);
        Ok(Bytes::from(v))
    }

    async fn read_chunk(
        &self,
        handle: &Handle,
        offset: u64,
        len: usize,
        max_piped: usize,
    ) -> Result<Chunk, StorageError> {
        let fh = match handle {
            Handle::Nfs(file)
                if self.splice
                    && len <= max_piped
                    && handle.cached_range(offset, len).is_none() =>
            {
                &file.fh
            }
            _ => return self.read(handle, offset, len).await.map(Chunk::Bytes),
        };
        let max = self.client.rtmax() as usize;
        let mut out = PipedData::default();
        while out.len() < len {
            let done = out.len();
            let want = (len - done).min(max) as u32;
            let r = self
                .client
                .read_piped(fh, offset + done as u64, want)
                .await
                .map_err(|e| self.read_failed(e))?;
            if r.data.is_empty() {
                return Err(ended_early(offset + done as u64, len - done));
            }
            out.append(r.data);
        }
        if out.len() > len {
            // More than asked for (the server ignored `count`): a piped chunk cannot be
            // cut, and the response's length is fixed.
            return Err(StorageError::ReadTooLong {
                got: out.len(),
                asked: len,
            });
        }
        Ok(Chunk::Piped(out))
    }

    async fn list(&self, dir: &Entry) -> Result<Vec<ListEntry>, StorageError> {
        let Handle::Nfs(NfsFile { fh, .. }) = &dir.handle else {
            return Err(StorageError::Forbidden("foreign handle"));
        };
        let entries = self.client.readdir(fh).await.map_err(map_err)?;
        let mut out = Vec::with_capacity(entries.len());
        for e in entries {
            let attr = match e.attr {
                Some(a) => a,
                None => match self.client.lookup(fh, &e.name).await {
                    Ok((_, a)) => a,
                    Err(_) => continue,
                },
            };
            out.push(ListEntry {
                name: e.name,
                is_dir: attr.kind == FileKind::Dir,
                size: attr.size,
                mtime: attr.mtime,
            });
        }
        Ok(out)
    }

    fn read_ahead(&self) -> usize {
        self.read_ahead
    }

    fn max_read(&self) -> usize {
        self.chunk
    }

    fn splices(&self) -> bool {
        self.splice
    }

    fn stream_budgets(&self) -> Arc<crate::stream_budget::StreamBudgets> {
        self.budgets.clone()
    }

    async fn close(&self) {
        if let Err(e) = self.client.close().await {
            tracing::debug!(error = %e, "NFS session not ended at shutdown");
        }
    }

    fn name(&self) -> &'static str {
        match self.version() {
            nfsclient::NfsVersion::V3 => "nfs (NFSv3)",
            nfsclient::NfsVersion::V4_0 => "nfs (NFSv4.0)",
            nfsclient::NfsVersion::V4_1 => "nfs (NFSv4.1)",
            nfsclient::NfsVersion::V4_2 => "nfs (NFSv4.2)",
        }
    }
}
