//! Where the NFS data cache keeps its copies: a sealed memfd (the default), or an unlinked
//! `O_TMPFILE` file in a directory (`--nfs-data-cache-dir DIR`), and the read-only mapping
//! both are served from.
//!
//! Why a directory at all: `sendfile` from a memfd (shmem, 4 KiB pages while shmem THP is
//! `never`) cost httpd 1.8–2.7 ms of CPU per 10 MiB response here, from an ext4 file
//! (large folios in the page cache) 1.4–1.8 ms — what `--root` pays. A copy in an
//! `O_TMPFILE` on ext4 is such a file.
//!
//! A regular file cannot be sealed, so what the seals give a memfd has to come from how
//! the file is made, and it does:
//! - *No one else can open it.* `O_TMPFILE` creates an inode with no name in any
//!   directory, and `O_EXCL` forbids ever linking it into one (`linkat` fails), so no path
//!   leads to it. Its mode is 0, so reopening it through `/proc/PID/fd/N` needs
//!   `CAP_DAC_OVERRIDE` — a process that already could rewrite httpd's memory. Our
//!   descriptor is close-on-exec and never handed out.
//! - *We never write after the fill.* The only writes are the fill's, before the copy is
//!   mapped and shared ([`CopyStore::finish`]); afterwards the descriptor is used for
//!   `sendfile` and `pread` only, and the size never changes (no `ftruncate`), so the
//!   read-only mapping can neither change under a reader nor fault past the end (SIGBUS).
//!
//! That is what `F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW` enforce on a memfd against
//! everyone who might hold it; here we are the only holder. The file's blocks are
//! allocated up front (`fallocate`), so a full disk fails the fill before any READ is
//! sent, and freed by the kernel when the last descriptor closes (also after a crash:
//! an unlinked inode is on the file system's orphan list). The cache's SIZE then counts
//! page cache (and disk) bytes instead of shmem.
//!
//! One difference remains, and it is the disk's: once written back, a file's pages are
//! clean page cache that memory pressure may drop and a later access reads again. If
//! that read fails (a dying disk), a read through a mapping would be SIGBUS for the
//! whole server. So a directory's copy is never mapped: copies up to [`IN_MEMORY`] are
//! read into memory once, at the end of the fill, and served from there (they count
//! twice, page cache and heap, at most 64 KiB each); larger ones are read with
//! `sendfile` and `pread` from the descriptor, where a failing disk fails that one
//! response with EIO. A memfd without swap is never dropped, so it stays mapped.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::OpenFile;

/// Where new copies are created.
#[derive(Debug)]
pub(crate) enum CopyStore {
    /// Sealed memfds (anonymous shared memory).
    Memory,
    /// Unlinked `O_TMPFILE` files in this directory (held open, so a rename of it does
    /// not matter).
    Dir { dir: File, path: PathBuf },
}

/// Why a directory cannot hold the data cache's copies: a short phrase for the start-up
/// line, which names the directory.
#[derive(Debug, thiserror::Error)]
pub enum CacheDirError {
    #[error("the path contains a NUL byte")]
    NulByte,
    #[error("no such directory")]
    Missing,
    #[error("not a directory")]
    NotADirectory,
    #[error("cannot open it")]
    Open(#[source] io::Error),
    #[error("its file system ({0}) does not support O_TMPFILE (unlinked cache files)")]
    NoTmpfile(String),
    #[error("cannot create a file in it")]
    Create(#[source] io::Error),
}

impl CopyStore {
    /// Opens `path` as the directory for copies and proves that it works by creating one
    /// unlinked file in it.
    pub(crate) fn in_dir(path: &Path) -> Result<CopyStore, CacheDirError> {
        let c_path =
            CString::new(path.as_os_str().as_bytes()).map_err(|_| CacheDirError::NulByte)?;
        // SAFETY: a NUL-terminated path and flags; the fd is owned by the File below.
        let fd = unsafe {
            libc::open(
                c_path.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ENOENT) => CacheDirError::Missing,
                Some(libc::ENOTDIR) => CacheDirError::NotADirectory,
                _ => CacheDirError::Open(e),
            });
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let dir = unsafe { File::from_raw_fd(fd) };
        let store = CopyStore::Dir {
            dir,
            path: path.to_path_buf(),
        };
        match store.create(0) {
            Ok(_probe) => Ok(store),
            // EISDIR: kernels and file systems from before O_TMPFILE take it for O_DIRECTORY.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR)) => {
                Err(CacheDirError::NoTmpfile(file_system_name(path)))
            }
            Err(e) => Err(CacheDirError::Create(e)),
        }
    }

    /// For the start-up log line.
    pub(crate) fn describe(&self) -> String {
        match self {
            CopyStore::Memory => "in sealed memfds".into(),
            CopyStore::Dir { path, .. } => format!(
                "in unlinked files under {} ({})",
                path.display(),
                file_system_name(path)
            ),
        }
    }

    /// A new file of `size` bytes (zeros) for one copy, blocks allocated where that is
    /// possible, so running out of space shows here rather than halfway through a fill.
    pub(crate) fn create(&self, size: u64) -> io::Result<File> {
        let file = match self {
            CopyStore::Memory => memfd()?,
            CopyStore::Dir { dir, .. } => tmpfile(dir)?,
        };
        if let CopyStore::Dir { .. } = self
            && size > 0
        {
            let len =
                libc::off_t::try_from(size).map_err(|_| io::Error::other("file too large"))?;
            // SAFETY: fallocate on a descriptor we own.
            if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) } == 0 {
                return Ok(file);
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                return Err(e);
            }
        }
        file.set_len(size)?;
        Ok(file)
    }

    /// Ends a fill: a memfd is sealed and mapped; a directory's file (which needs no
    /// seal, see the module docs) is not mapped, and a small one is read into memory.
    /// Nothing writes to `file` after this.
    pub(crate) fn finish(&self, file: File) -> io::Result<OpenFile> {
        match self {
            CopyStore::Memory => {
                seal(&file)?;
                map(file)
            }
            CopyStore::Dir { .. } => unmapped(file),
        }
    }
}

/// Whether a fill failed on the local copy in a way that says nothing about the file on
/// the server (out of space or quota, an I/O error): the request is then served over the
/// wire instead.
pub(crate) fn is_local_space_or_io_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC | libc::EDQUOT | libc::EIO)
    )
}

/// A new, empty memfd for one cached file.
fn memfd() -> io::Result<File> {
    // SAFETY: a valid NUL-terminated name and flags; the fd is owned by the File below.
    let fd = unsafe {
        libc::memfd_create(
            c"httpd-nfs-data".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// A new unlinked, unlinkable file in `dir`, mode 0 (see the module docs).
fn tmpfile(dir: &File) -> io::Result<File> {
    // SAFETY: openat relative to a directory we hold, a static path; the fd is owned below.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c".".as_ptr(),
            libc::O_TMPFILE | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC,
            0 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Seals a filled memfd: no more writes, no resize, so every response sees the same bytes.
fn seal(file: &File) -> io::Result<()> {
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
    // SAFETY: fcntl on a descriptor we own.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A read-only shared mapping of a finished copy, unmapped on drop.
struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and its file never changes after the fill — a memfd is
// sealed against writes and resizes, a directory's copy has no name and only our
// descriptor, which is never written again (module docs) — so the bytes never change
// while any thread reads them.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared reads of immutable memory.
unsafe impl Sync for Mapping {}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped, once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// Directory copies up to this size are held in memory as well (the default inline
/// limit: bodies this small are written from memory, not with `sendfile`).
pub(crate) const IN_MEMORY: u64 = 64 * 1024;

/// A directory's copy as the response path uses it: its bytes read into memory when it
/// is small, otherwise only its descriptor (read with `sendfile`/`pread`, never mapped).
fn unmapped(file: File) -> io::Result<OpenFile> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    if len > IN_MEMORY {
        return Ok(OpenFile::new(file));
    }
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, 0)?;
    Ok(OpenFile::with_data(file, bytes::Bytes::from(buf)))
}

/// A memfd copy as the response path uses it: the file and its bytes, mapped once
/// (populated up front, so no response takes page faults).
fn map(file: File) -> io::Result<OpenFile> {
    let len = usize::try_from(file.metadata()?.len())
        .map_err(|_| io::Error::other("file too large to map"))?;
    if len == 0 {
        return Ok(OpenFile::with_data(file, bytes::Bytes::new()));
    }
    // SAFETY: a fresh read-only shared mapping of a descriptor we own; checked below.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            file.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let data = bytes::Bytes::from_owner(Mapping { ptr, len });
    Ok(OpenFile::with_data(file, data))
}

/// The name of the file system `path` is on (`ext4`, `tmpfs`, ...), or its magic number
/// in hex when it is not one of the common ones; `unknown` when `statfs` fails.
pub fn file_system_name(path: &Path) -> String {
    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
        return "unknown".into();
    };
    // SAFETY: statfs fills the zeroed struct it is given.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out pointer.
    if unsafe { libc::statfs(c_path.as_ptr(), &mut st) } != 0 {
        return "unknown".into();
    }
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between targets.
    let magic = st.f_type as u64;
    match magic {
        0xEF53 => "ext4".into(),
        0x0102_1994 => "tmpfs".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x794C_7630 => "overlayfs".into(),
        0x2FC1_2FC1 => "zfs".into(),
        0x6969 => "nfs".into(),
        0x6573_5546 => "fuse".into(),
        other => format!("file system 0x{other:x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    fn roundtrip(store: &CopyStore) {
        let f = store.create(10_000).unwrap();
        assert_eq!(f.metadata().unwrap().len(), 10_000);
        f.write_all_at(&[7u8; 100], 9_900).unwrap();
        let copy = store.finish(f).unwrap();
        let data = copy.data().unwrap();
        assert_eq!((data.len(), data[9_899], data[9_900]), (10_000, 0, 7));
        let mut buf = [0u8; 4];
        copy.read_exact_at(&mut buf, 9_996).unwrap();
        assert_eq!(buf, [7; 4]);
    }

    #[test]
    fn memfd_and_directory_copies_hold_what_the_fill_wrote() {
        roundtrip(&CopyStore::Memory);
        let dir = tempfile::tempdir().unwrap();
        let store = CopyStore::in_dir(dir.path()).unwrap();
        roundtrip(&store);
        // Unlinked: the directory stays empty.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(store.describe().contains(&dir.path().display().to_string()));
    }

    #[test]
    fn a_large_directory_copy_is_read_from_its_descriptor_not_mapped() {
        let dir = tempfile::tempdir().unwrap();
        let store = CopyStore::in_dir(dir.path()).unwrap();
        let len = IN_MEMORY + 1;
        let f = store.create(len).unwrap();
        f.write_all_at(&[9u8; 10], len - 10).unwrap();
        let copy = store.finish(f).unwrap();
        assert!(
            copy.data().is_none(),
            "a large directory copy is not mapped"
        );
        assert!(copy.cached_range(0, 10).is_none());
        let mut buf = [0u8; 10];
        copy.read_exact_at(&mut buf, len - 10).unwrap();
        assert_eq!(buf, [9; 10]);
        // A memfd copy of the same size is mapped.
        let f = CopyStore::Memory.create(len).unwrap();
        assert!(CopyStore::Memory.finish(f).unwrap().data().is_some());
    }

    #[test]
    fn a_sealed_memfd_refuses_writes() {
        let store = CopyStore::Memory;
        let f = store.create(10).unwrap();
        let copy = store.finish(f).unwrap();
        assert!(copy.write_at(b"x", 0).is_err());
    }

    #[test]
    fn a_directory_copy_cannot_be_reopened_by_mode() {
        let dir = tempfile::tempdir().unwrap();
        let f = CopyStore::in_dir(dir.path()).unwrap().create(1).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(f.metadata().unwrap().permissions().mode() & 0o777, 0);
        assert_eq!(
            std::os::unix::fs::MetadataExt::nlink(&f.metadata().unwrap()),
            0
        );
    }

    #[test]
    fn a_bad_directory_is_one_short_reason() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let reason = |p: &Path| CopyStore::in_dir(p).unwrap_err().to_string();
        assert_eq!(reason(&missing), "no such directory");
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(reason(&file), "not a directory");
    }

    #[test]
    fn space_and_io_errors_are_recognised() {
        for code in [libc::ENOSPC, libc::EDQUOT, libc::EIO] {
            assert!(is_local_space_or_io_error(&io::Error::from_raw_os_error(
                code
            )));
        }
        assert!(!is_local_space_or_io_error(&io::Error::from_raw_os_error(
            libc::EBADF
        )));
    }
}
