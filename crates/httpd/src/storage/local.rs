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

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::{Entry, Handle, Kind, ListEntry, Meta, Storage, StorageError};

/// Reads up to this size run on the calling (async) thread.
const INLINE_READ: usize = 64 * 1024;

/// Serves files under one directory.
#[derive(Debug)]
pub struct LocalStorage {
    root: PathBuf,
    root_fd: OwnedFd,
    follow_symlinks: bool,
    chunk: usize,
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
        })
    }

    /// The served directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn open_fd(&self, path: &[String]) -> std::io::Result<OwnedFd> {
        let flags = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK) as u64;
        let rel = if path.is_empty() {
            CString::new(".").expect("static")
        } else {
            CString::new(path.join("/"))
                .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?
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

#[async_trait::async_trait]
impl Storage for LocalStorage {
    async fn open(&self, path: &[String]) -> Result<Entry, StorageError> {
        let fd = self.open_fd(path).map_err(map_open_error)?;
        let file = File::from(fd);
        let meta = meta_of(&file.metadata()?)?;
        Ok(Entry {
            meta,
            handle: Handle::Local(Arc::new(file)),
        })
    }

    async fn read(&self, handle: &Handle, offset: u64, len: usize) -> Result<Bytes, StorageError> {
        let Handle::Local(file) = handle else {
            return Err(StorageError::Forbidden("foreign handle"));
        };
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
