//! Where file bytes come from: one [`Storage`] trait, a local and an NFS implementation.
//!
//! Both answer the same questions the same way — resolve safe path components to a file
//! or directory with its size, mtime and inode (`meta` phase), read a byte range
//! (`read` phase), list a directory — so the HTTP layer produces byte-identical
//! responses whichever backend is behind it.

pub mod cache_file;
pub mod data_cache;
pub mod local;
pub mod nfs;
pub mod open_cache;

use std::any::Any;
use std::fs::File;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use bytes::Bytes;

pub use crate::cache_stats::CacheStats;
pub use local::LocalStorage;
pub use nfs::NfsStorage;

/// A file or directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
}

/// The metadata the HTTP layer needs (Content-Length, Last-Modified, ETag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    pub size: u64,
    pub mtime: SystemTime,
    /// Inode / NFS fileid, part of the ETag.
    pub ino: u64,
}

/// An open descriptor, and the file's whole contents when they are held in memory (small
/// files in the local open-file cache): a read of such a file costs no system call.
#[derive(Debug)]
pub struct OpenFile {
    file: File,
    data: Option<Bytes>,
    /// What a layer above derives once from this version of the file and keeps with it
    /// (the HTTP fast path keeps the file's response head here). An entry of the local
    /// open-file cache belongs to one path and one version of the file (a changed file
    /// gets a new `OpenFile`), so what is kept never goes stale.
    derived: OnceLock<Box<dyn Any + Send + Sync>>,
}

impl OpenFile {
    /// A descriptor without cached contents.
    pub fn new(file: File) -> OpenFile {
        OpenFile {
            file,
            data: None,
            derived: OnceLock::new(),
        }
    }

    /// A descriptor with its file's whole contents (as read when the entry was made).
    pub fn with_data(file: File, data: Bytes) -> OpenFile {
        OpenFile {
            file,
            data: Some(data),
            derived: OnceLock::new(),
        }
    }

    /// The cached contents, if any.
    pub fn data(&self) -> Option<&Bytes> {
        self.data.as_ref()
    }

    /// The value `make` derives from this version of the file, made on the first call
    /// and kept with it. One kind of value per file: `None` when the value kept is of
    /// another type than `T`.
    pub(crate) fn derived<T: Any + Send + Sync>(&self, make: impl FnOnce() -> T) -> Option<&T> {
        self.derived.get_or_init(|| Box::new(make())).downcast_ref()
    }

    /// `len` bytes at `offset` from the cached contents, when they are cached and cover it.
    pub fn cached_range(&self, offset: u64, len: usize) -> Option<Bytes> {
        let data = self.data.as_ref()?;
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(len)?;
        (end <= data.len()).then(|| data.slice(start..end))
    }
}

impl std::ops::Deref for OpenFile {
    type Target = File;
    fn deref(&self) -> &File {
        &self.file
    }
}

impl std::os::fd::AsRawFd for OpenFile {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }
}

/// What a backend needs to read an opened object again.
#[derive(Debug, Clone)]
pub enum Handle {
    /// An open file or directory descriptor: the local backend, or a copy in the NFS
    /// backend's data cache (a sealed memfd, or an unlinked file in its directory).
    Local(Arc<OpenFile>),
    /// An NFS file handle, and the file's first bytes when they came with the open.
    Nfs(NfsFile),
}

impl Handle {
    /// `len` bytes at `offset` that the handle already holds (the local open-file
    /// cache's copy, or an NFS file's first bytes read with its LOOKUP): a read of them
    /// costs no system call and no RPC.
    pub fn cached_range(&self, offset: u64, len: usize) -> Option<Bytes> {
        match self {
            Handle::Local(file) => file.cached_range(offset, len),
            Handle::Nfs(file) => {
                let start = usize::try_from(offset).ok()?;
                let end = start.checked_add(len)?;
                (end <= file.head.len()).then(|| file.head.slice(start..end))
            }
        }
    }
}

/// An opened NFS file or directory.
#[derive(Debug, Clone)]
pub struct NfsFile {
    pub fh: nfsclient::FileHandle,
    /// The file's first bytes, read in the same round trip as the LOOKUP that opened it
    /// (one NFSv4 COMPOUND; empty over NFSv3, for directories and when the attribute
    /// cache answered the open). As fresh as the open's attributes: both were answered
    /// after the request arrived.
    pub head: Bytes,
}

/// An opened object: its metadata and how to read it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub meta: Meta,
    pub handle: Handle,
}

/// One directory entry for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListEntry {
    pub name: String,
    pub is_dir: bool,
    pub size: u64,
    pub mtime: SystemTime,
}

/// Why a backend could not answer; each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// 404.
    #[error("not found")]
    NotFound,
    /// 403: permission denied, a symlink leaving the root, not a regular file.
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    /// 503: the NFS server cannot be reached.
    #[error("storage unavailable")]
    Unavailable(#[source] nfsclient::Error),
    /// 502: the NFS server broke the connection or answered with an error.
    #[error("bad gateway")]
    BadGateway(#[source] nfsclient::Error),
    /// 502: a READ answered no data before the end the file's size promised (the file
    /// shrank on the server).
    #[error("bad gateway: file ended at {at} while {missing} bytes were expected")]
    EndedEarly { at: u64, missing: u64 },
    /// 502: a READ answered more bytes than were asked for (the server ignored `count`).
    #[error("bad gateway: READ returned {got} bytes where {asked} were asked for")]
    ReadTooLong { got: usize, asked: usize },
    /// 504: the NFS server did not answer in time.
    #[error("storage timeout")]
    Timeout(#[source] nfsclient::Error),
    /// 500: a local I/O error.
    #[error("I/O error")]
    Io(#[from] std::io::Error),
}

impl StorageError {
    /// The HTTP status this error answers with.
    pub fn status(&self) -> u16 {
        match self {
            StorageError::NotFound => 404,
            StorageError::Forbidden(_) => 403,
            StorageError::Unavailable(_) => 503,
            StorageError::BadGateway(_)
            | StorageError::EndedEarly { .. }
            | StorageError::ReadTooLong { .. } => 502,
            StorageError::Timeout(_) => 504,
            StorageError::Io(_) => 500,
        }
    }
}

/// Bytes read for a streamed body: in memory, or waiting in kernel pipes (the NFS splice
/// path) for the connection to splice them to its socket.
#[derive(Debug)]
pub enum Chunk {
    Bytes(Bytes),
    Piped(nfsclient::PipedData),
}

impl Chunk {
    pub fn len(&self) -> usize {
        match self {
            Chunk::Bytes(b) => b.len(),
            Chunk::Piped(p) => p.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file store the server reads from. Paths are already-checked components relative to
/// the served root (no `.`, `..`, `/`, NUL).
#[async_trait::async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Resolves `path` to a file or directory without leaving the root.
    async fn open(&self, path: &[String]) -> Result<Entry, StorageError>;

    /// [`Storage::open`] for a storage that answers without waiting (the local file
    /// system's calls block briefly, or hit its open-file cache); `None`: use `open`.
    /// Saves the boxed future of the async call on every request.
    fn open_now(&self, path: &[String]) -> Option<Result<Entry, StorageError>> {
        let _ = path;
        None
    }

    /// Reads exactly `len` bytes at `offset` (fewer only if the file shrank: an error).
    async fn read(&self, handle: &Handle, offset: u64, len: usize) -> Result<Bytes, StorageError>;

    /// Reads like [`Storage::read`] for a streamed body, which may take the bytes in
    /// pipes; at most `max_piped` bytes may come piped.
    async fn read_chunk(
        &self,
        handle: &Handle,
        offset: u64,
        len: usize,
        max_piped: usize,
    ) -> Result<Chunk, StorageError> {
        let _ = max_piped;
        self.read(handle, offset, len).await.map(Chunk::Bytes)
    }

    /// The entries of an opened directory.
    async fn list(&self, dir: &Entry) -> Result<Vec<ListEntry>, StorageError>;

    /// How many chunk reads one streamed body may keep in flight.
    fn read_ahead(&self) -> usize;

    /// Largest useful single read.
    fn max_read(&self) -> usize;

    /// Large bodies' bytes go to the client with `splice` ([`Chunk::Piped`]).
    fn splices(&self) -> bool {
        false
    }

    /// The budgets streamed bodies from this storage share: one set per server whose
    /// storage streams (NFS), the process's otherwise.
    fn stream_budgets(&self) -> Arc<crate::stream_budget::StreamBudgets> {
        crate::stream_budget::StreamBudgets::process_wide()
    }

    /// Short name for logs (`local`, `nfs`).
    fn name(&self) -> &'static str;

    /// Releases what the backend holds on a server at shutdown (an NFSv4.1+ session
    /// and client id); nothing by default.
    async fn close(&self) {}
}
