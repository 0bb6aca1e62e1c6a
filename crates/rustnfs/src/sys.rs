//! Safe wrappers over the Linux calls the file system needs: statx, getdents64 and *at
//! (resolution beneath the export root is the `jail` crate's).
//!
//! Everything here takes a directory file descriptor and a single name (or a relative path
//! resolved with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), so the server never follows a
//! symbolic link and never resolves a path from `/`.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Opens `path` (relative, `/`-separated) beneath `dir` without following any symbolic
/// link and without crossing a mount point: the workspace's one jail, `jail::open_beneath`
/// with `Policy::STRICT`.
pub fn open_beneath(dir: BorrowedFd<'_>, path: &CStr, flags: i32) -> io::Result<OwnedFd> {
    let flags = jail::OFlags::from_bits_retain(flags as u32);
    jail::open_beneath(dir, path.to_bytes(), flags, jail::Policy::STRICT)
}

pub fn einval() -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL)
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)`: one name, never a symlink.
pub fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    loop {
        // SAFETY: valid fd and NUL-terminated name.
        let r = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        };
        if r >= 0 {
            // SAFETY: fresh descriptor.
            return Ok(unsafe { OwnedFd::from_raw_fd(r) });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// The attributes of one inode, as statx reports them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stat {
    pub ino: u64,
    /// Birth time in nanoseconds since the epoch (0 when the file system has none); with
    /// the inode number it tells a file from a later one that reused its inode.
    pub btime: u64,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub blocks: u64,
    pub rdev: (u32, u32),
    pub dev: (u32, u32),
    pub atime: (i64, u32),
    pub mtime: (i64, u32),
    pub ctime: (i64, u32),
}

impl Stat {
    pub fn file_type(&self) -> u32 {
        self.mode & libc::S_IFMT
    }
    pub fn is_dir(&self) -> bool {
        self.file_type() == libc::S_IFDIR
    }
    pub fn is_reg(&self) -> bool {
        self.file_type() == libc::S_IFREG
    }
    pub fn is_symlink(&self) -> bool {
        self.file_type() == libc::S_IFLNK
    }
}

/// `statx(dir, name, AT_SYMLINK_NOFOLLOW)`; an empty `name` stats `dir` itself.
pub fn statx(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Stat> {
    let mut flags = libc::AT_SYMLINK_NOFOLLOW | libc::AT_STATX_SYNC_AS_STAT;
    if name.is_empty() {
        flags |= libc::AT_EMPTY_PATH;
    }
    // SAFETY: statx is plain data.
    let mut sx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd, NUL-terminated name, writable buffer.
    cvt(unsafe {
        libc::statx(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags,
            libc::STATX_BASIC_STATS | libc::STATX_BTIME,
            &mut sx,
        )
    })?;
    let btime = if sx.stx_mask & libc::STATX_BTIME != 0 {
        (sx.stx_btime.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(u64::from(sx.stx_btime.tv_nsec))
    } else {
        0
    };
    Ok(Stat {
        ino: sx.stx_ino,
        btime,
        mode: u32::from(sx.stx_mode),
        nlink: sx.stx_nlink,
        uid: sx.stx_uid,
        gid: sx.stx_gid,
        size: sx.stx_size,
        blocks: sx.stx_blocks,
        rdev: (sx.stx_rdev_major, sx.stx_rdev_minor),
        dev: (sx.stx_dev_major, sx.stx_dev_minor),
        atime: (sx.stx_atime.tv_sec, sx.stx_atime.tv_nsec),
        mtime: (sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec),
        ctime: (sx.stx_ctime.tv_sec, sx.stx_ctime.tv_nsec),
    })
}

pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<Stat> {
    statx(fd, c"")
}

/// `faccessat2(fd, "", mode, AT_EACCESS | AT_EMPTY_PATH)`: whether this thread's
/// file-system identity (fsuid, fsgid, groups, capabilities) may `mode` (`R_OK`,
/// `W_OK`, `X_OK` bits) the object `fd` is — the kernel's own `inode_permission`, POSIX
/// ACLs included. Works on `O_PATH` descriptors; EACCES when refused.
pub fn faccess(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    // SAFETY: valid fd and an empty NUL-terminated path.
    let r = unsafe {
        libc::syscall(
            libc::SYS_faccessat2,
            fd.as_raw_fd(),
            c"".as_ptr(),
            mode as libc::c_int,
            libc::AT_EACCESS | libc::AT_EMPTY_PATH,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One directory entry as getdents64 returns it.
#[derive(Debug, Clone)]
pub struct Dirent {
    pub ino: u64,
    /// The position just after this entry: the READDIR cookie that resumes after it.
    pub off: u64,
    pub kind: u8,
    pub name: Vec<u8>,
}

/// Positions a directory stream (`cookie` 0 is the start).
pub fn seek_dir(fd: BorrowedFd<'_>, cookie: u64) -> io::Result<()> {
    // SAFETY: valid fd.
    let r = unsafe { libc::lseek(fd.as_raw_fd(), cookie as libc::off_t, libc::SEEK_SET) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads the next batch of entries (without `.` and `..`); empty at the end.
pub fn getdents(fd: BorrowedFd<'_>, buf: &mut [u8], out: &mut Vec<Dirent>) -> io::Result<bool> {
    // SAFETY: valid fd and writable buffer of the given length.
    let n = unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            fd.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    let mut pos = 0;
    while pos + 19 <= n {
        let ino = u64::from_ne_bytes(buf[pos..pos + 8].try_into().unwrap_or_default());
        let off = u64::from_ne_bytes(buf[pos + 8..pos + 16].try_into().unwrap_or_default());
        let reclen = usize::from(u16::from_ne_bytes([buf[pos + 16], buf[pos + 17]]));
        let kind = buf[pos + 18];
        if reclen == 0 || pos + reclen > n {
            break;
        }
        let raw = &buf[pos + 19..pos + reclen];
        let len = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        let name = &raw[..len];
        if name != b"." && name != b".." {
            out.push(Dirent {
                ino,
                off,
                kind,
                name: name.to_vec(),
            });
        }
        pos += reclen;
    }
    Ok(n > 0)
}

pub fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: valid fd and name.
    cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) }).map(drop)
}

pub fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, rmdir: bool) -> io::Result<()> {
    let flags = if rmdir { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: valid fd and name.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) }).map(drop)
}

pub fn renameat(
    from: BorrowedFd<'_>,
    from_name: &CStr,
    to: BorrowedFd<'_>,
    to_name: &CStr,
) -> io::Result<()> {
    // SAFETY: valid fds and names.
    cvt(unsafe {
        libc::renameat(
            from.as_raw_fd(),
            from_name.as_ptr(),
            to.as_raw_fd(),
            to_name.as_ptr(),
        )
    })
    .map(drop)
}

pub fn symlinkat(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: valid fd and strings.
    cvt(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) }).map(drop)
}

pub fn readlinkat(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: valid fd, name and buffer.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// `fchownat(dir, name, uid, gid, AT_SYMLINK_NOFOLLOW)`; `u32::MAX` keeps a value.
pub fn lchownat(dir: BorrowedFd<'_>, name: &CStr, uid: u32, gid: u32) -> io::Result<()> {
    let mut flags = libc::AT_SYMLINK_NOFOLLOW;
    if name.is_empty() {
        flags |= libc::AT_EMPTY_PATH;
    }
    // SAFETY: valid fd and name.
    cvt(unsafe { libc::fchownat(dir.as_raw_fd(), name.as_ptr(), uid, gid, flags) }).map(drop)
}

/// `fchmodat(dir, name, mode, AT_SYMLINK_NOFOLLOW)`: a symlink is refused, never
/// followed (glibc does it through an `O_PATH` descriptor).
pub fn lchmodat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: valid fd and NUL-terminated name.
    cvt(unsafe {
        libc::fchmodat(
            dir.as_raw_fd(),
            name.as_ptr(),
            mode,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

pub fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    // SAFETY: valid fd.
    cvt(unsafe { libc::fchmod(fd.as_raw_fd(), mode) }).map(drop)
}

/// Time to set: `None` keeps it, `Some(None)` is "now", `Some(Some((s, ns)))` a value.
pub type SetTime = Option<Option<(i64, u32)>>;

fn timespec(t: SetTime) -> libc::timespec {
    match t {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(None) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(Some((s, ns))) => libc::timespec {
            tv_sec: s,
            tv_nsec: i64::from(ns),
        },
    }
}

/// `utimensat(dir, name, .., AT_SYMLINK_NOFOLLOW)`; an empty name sets `dir` itself
/// (which must then be opened for reading or writing, not `O_PATH`).
pub fn lutimensat(
    dir: BorrowedFd<'_>,
    name: &CStr,
    atime: SetTime,
    mtime: SetTime,
) -> io::Result<()> {
    let times = [timespec(atime), timespec(mtime)];
    if name.is_empty() {
        // glibc's utimensat() refuses a NULL path with EINVAL (2.36); the system call
        // itself takes NULL as "the descriptor itself" (what futimens does).
        // SAFETY: valid fd, a null path, a two-element timespec array, flags 0.
        let r = unsafe {
            libc::syscall(
                libc::SYS_utimensat,
                dir.as_raw_fd(),
                std::ptr::null::<libc::c_char>(),
                times.as_ptr(),
                0,
            )
        };
        return if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        };
    }
    // SAFETY: valid fd, NUL-terminated name, a two-element timespec array.
    cvt(unsafe {
        libc::utimensat(
            dir.as_raw_fd(),
            name.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

/// `linkat(from, from_name, to, to_name, 0)`: a new name for the object `from_name` is
/// (never following a symlink there).
pub fn linkat(
    from: BorrowedFd<'_>,
    from_name: &CStr,
    to: BorrowedFd<'_>,
    to_name: &CStr,
) -> io::Result<()> {
    // SAFETY: valid fds and NUL-terminated names.
    cvt(unsafe {
        libc::linkat(
            from.as_raw_fd(),
            from_name.as_ptr(),
            to.as_raw_fd(),
            to_name.as_ptr(),
            0,
        )
    })
    .map(drop)
}

/// `mknodat(dir, name, mode, dev)` (`mode` carries the type bits; `dev` only for devices).
pub fn mknodat(dir: BorrowedFd<'_>, name: &CStr, mode: u32, dev: libc::dev_t) -> io::Result<()> {
    // SAFETY: valid fd and NUL-terminated name.
    cvt(unsafe { libc::mknodat(dir.as_raw_fd(), name.as_ptr(), mode, dev) }).map(drop)
}

/// File system figures (statvfs) for FSSTAT and FSINFO.
#[derive(Debug, Clone, Copy)]
pub struct FsStat {
    pub bsize: u64,
    pub frsize: u64,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub favail: u64,
}

pub fn fstatvfs(fd: BorrowedFd<'_>) -> io::Result<FsStat> {
    // SAFETY: statvfs is plain data.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and buffer.
    cvt(unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut s) })?;
    Ok(FsStat {
        bsize: s.f_bsize,
        frsize: s.f_frsize,
        blocks: s.f_blocks,
        bfree: s.f_bfree,
        bavail: s.f_bavail,
        files: s.f_files,
        ffree: s.f_ffree,
        favail: s.f_favail,
    })
}

/// Raises the soft open-file limit to the hard limit (many clients, cached fds).
pub fn raise_nofile_limit() -> io::Result<u64> {
    // SAFETY: rlimit is plain data; get/setrlimit read and write it.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        cvt(libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl))?;
        if rl.rlim_cur < rl.rlim_max {
            rl.rlim_cur = rl.rlim_max;
            cvt(libc::setrlimit(libc::RLIMIT_NOFILE, &rl))?;
        }
        Ok(rl.rlim_cur)
    }
}

/// Whether the peer of TCP socket `fd` reset the connection (or it failed otherwise):
/// the kernel's state for it is CLOSED. Data still queued does not hide it, unlike a
/// read, which returns the queued bytes first. A peer that only half-closed (FIN) is not
/// gone: what it sent before may still complete its request.
pub fn tcp_closed(fd: BorrowedFd<'_>) -> bool {
    /// `TCP_CLOSE` of the kernel's TCP states (`include/net/tcp_states.h`).
    const TCP_CLOSE: u8 = 7;
    // SAFETY: tcp_info is plain data, zeroed is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: valid fd; the kernel writes at most `len` bytes into `info`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    r == 0 && info.tcpi_state == TCP_CLOSE
}

/// Asks for a send buffer of `bytes` on a socket (the kernel caps it at `wmem_max`).
/// A 1 MiB READ reply then leaves in one write instead of waiting for TCP autotuning to
/// grow a fresh connection's buffer from 16 KiB.
pub fn set_send_buffer(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: valid fd; the option value is a c_int of the given size.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Asks the allocator to return its free memory to the system (glibc keeps freed small
/// allocations in its arenas otherwise; musl's allocator returns them on its own).
pub fn give_back_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// `lseek(SEEK_DATA)` (or `SEEK_HOLE` when `hole`): the next data or hole at or after
/// `offset`; `ENXIO` past the last.
pub fn seek_data(fd: BorrowedFd<'_>, offset: i64, hole: bool) -> io::Result<u64> {
    let whence = if hole {
        libc::SEEK_HOLE
    } else {
        libc::SEEK_DATA
    };
    // SAFETY: lseek on a valid fd; the fd's own offset is not shared with other readers
    // (READ uses pread).
    let r = unsafe { libc::lseek(fd.as_raw_fd(), offset, whence) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as u64)
}

/// `fallocate`: space for `[offset, offset + len)` (the size grown to cover it), or a
/// hole punched there (`punch`, the size kept).
pub fn fallocate(fd: BorrowedFd<'_>, punch: bool, offset: i64, len: i64) -> io::Result<()> {
    let mode = if punch {
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE
    } else {
        0
    };
    // SAFETY: fallocate on a valid fd with plain integers.
    cvt(unsafe { libc::fallocate(fd.as_raw_fd(), mode, offset, len) }).map(drop)
}

/// `copy_file_range` of at most `len` bytes between two files at explicit offsets
/// (advanced by what was copied): the bytes copied, 0 at the source's end.
pub fn copy_file_range(
    from: BorrowedFd<'_>,
    from_at: &mut i64,
    to: BorrowedFd<'_>,
    to_at: &mut i64,
    len: usize,
) -> io::Result<usize> {
    // SAFETY: valid fds and offset pointers that live across the call.
    let r =
        unsafe { libc::copy_file_range(from.as_raw_fd(), from_at, to.as_raw_fd(), to_at, len, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}
