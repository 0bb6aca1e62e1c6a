//! The exported directory as an NFSv3 file system, resolved as a jail beneath fds.
//!
//! Every object is reached from the export's root descriptor: a directory by `openat2`
//! with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV`, a single name with
//! `*at(dirfd, name, AT_SYMLINK_NOFOLLOW)` or `O_NOFOLLOW`. The server never follows a
//! symbolic link (clients resolve them, as with kernel nfsd), never accepts a name with
//! `/`, `.` or `..` as a new name, and verifies every object it opens against the handle's
//! inode and birth time, so a swap between check and use is caught.

pub mod handle;
pub mod nodes;
mod resolve;

use std::collections::VecDeque;
use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use latency::Registry;
use nfs3_server::vfs::{
    DirEntry, DirEntryPlus, NextResult, NfsFileSystem, NfsReadFileSystem, ReadDirIterator,
    ReadDirPlusIterator, VFSCapabilities,
};
use nfs3_types::nfs3::{
    FSF3_CANSETTIME, FSF3_HOMOGENEOUS, FSF3_SYMLINK, FSINFO3resok, FSSTAT3resok, createverf3,
    entry3, fattr3, filename3, ftype3, nfspath3, nfsstat3, nfstime3, post_op_attr, sattr3,
    set_atime, set_mtime, specdata3, stable_how,
};
use nfs3_types::xdr_codec::Opaque;

use crate::config::Config;
use crate::error::{Error, nfsstat_from_io, status_label};
use crate::sys::{self, Stat};
pub use handle::Fh;
use nodes::{FdCache, Nodes};

/// Largest READ/WRITE payload advertised (and enforced) — FSINFO's rtmax/wtmax.
pub const MAX_IO: u32 = 1 << 20;

type NfsResult<T> = Result<T, nfsstat3>;

fn io_err(e: std::io::Error) -> nfsstat3 {
    nfsstat_from_io(&e)
}

/// A directory exported over NFSv3. Cheap to clone (shared state behind an `Arc`).
#[derive(Clone)]
pub struct DirFs {
    inner: Arc<Inner>,
}

struct Inner {
    /// `O_PATH` descriptor of the export root: the anchor of every resolution.
    root: OwnedFd,
    root_ino: u64,
    root_btime: u64,
    root_dev: (u32, u32),
    /// Canonical export path, so MOUNT of the export's own absolute path works.
    export: PathBuf,
    /// Per-export handle generation (from the root's identity): stable across restarts.
    generation: u64,
    nodes: Nodes,
    fds: FdCache,
    read_only: bool,
    squash: Option<(u32, u32)>,
    registry: Arc<Registry>,
    /// Export walks for handles the inode map does not know (see `resolve`).
    walks: resolve::Walks,
}

/// Where a handle's object is: the root itself, or a name in a directory.
enum Loc {
    Root(Stat),
    Child {
        dir: OwnedFd,
        name: CString,
        stat: Stat,
    },
}

impl Loc {
    fn stat(&self) -> &Stat {
        match self {
            Loc::Root(s) | Loc::Child { stat: s, .. } => s,
        }
    }
}

/// Runs a blocking call (fsync) without stalling the runtime's other tasks.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Validates a name for LOOKUP or for a new entry: one path component, never `.`/`..`.
pub fn check_name(name: &[u8]) -> NfsResult<CString> {
    if name.is_empty() {
        return Err(nfsstat3::NFS3ERR_NOENT);
    }
    if name == b"." || name == b".." {
        return Err(nfsstat3::NFS3ERR_EXIST);
    }
    if name.contains(&b'/') || name.contains(&0) {
        return Err(nfsstat3::NFS3ERR_ACCES);
    }
    if name.len() > 255 {
        return Err(nfsstat3::NFS3ERR_NAMETOOLONG);
    }
    CString::new(name).map_err(|_| nfsstat3::NFS3ERR_ACCES)
}

fn time3(t: (i64, u32)) -> nfstime3 {
    nfstime3 {
        seconds: t.0.clamp(0, i64::from(u32::MAX)) as u32,
        nseconds: t.1,
    }
}

fn set_time(a: set_atime) -> sys::SetTime {
    match a {
        set_atime::DONT_CHANGE => None,
        set_atime::SET_TO_SERVER_TIME => Some(None),
        set_atime::SET_TO_CLIENT_TIME(t) => Some(Some((i64::from(t.seconds), t.nseconds))),
    }
}

fn set_time_m(m: set_mtime) -> sys::SetTime {
    match m {
        set_mtime::DONT_CHANGE => None,
        set_mtime::SET_TO_SERVER_TIME => Some(None),
        set_mtime::SET_TO_CLIENT_TIME(t) => Some(Some((i64::from(t.seconds), t.nseconds))),
    }
}

impl DirFs {
    /// Opens `config.export` as the jail root.
    pub fn open(config: &Config, registry: Arc<Registry>) -> Result<Self, Error> {
        let export_err = |source| Error::Export {
            path: config.export.display().to_string(),
            source,
        };
        let export = std::fs::canonicalize(&config.export).map_err(export_err)?;
        let path = CString::new(export.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::Config("export path contains NUL".into()))?;
        // SAFETY: a NUL-terminated absolute path.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(export_err(std::io::Error::last_os_error()));
        }
        // SAFETY: fresh descriptor.
        let root = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let st = sys::fstat(root.as_fd()).map_err(export_err)?;
        let mut generation = st.ino ^ st.btime.rotate_left(17) ^ 0x5255_5354_4e46_5300;
        generation |= 1;
        Ok(DirFs {
            inner: Arc::new(Inner {
                root,
                root_ino: st.ino,
                root_btime: st.btime,
                root_dev: st.dev,
                export,
                generation,
                nodes: Nodes::new(),
                fds: FdCache::new(config.fd_cache),
                read_only: config.read_only,
                squash: config.squash,
                registry,
                walks: resolve::Walks::default(),
            }),
        })
    }

    /// The handle generation the engine must use for this export.
    pub fn generation(&self) -> u64 {
        self.inner.generation
    }

    pub fn root_fh(&self) -> Fh {
        Fh::new(self.inner.root_ino, self.inner.root_btime)
    }

    /// The export's canonical path.
    pub fn export(&self) -> &Path {
        &self.inner.export
    }

    fn record<T>(&self, op: &str, start: Instant, r: &NfsResult<T>, bytes: u64) {
        let status = match r {
            Ok(_) => "ok",
            Err(s) => status_label(*s),
        };
        self.inner
            .registry
            .record_op(op, "vfs", status, start.elapsed(), bytes);
    }

    fn fattr(&self, st: &Stat) -> fattr3 {
        let type_ = match st.file_type() {
            libc::S_IFDIR => ftype3::NF3DIR,
            libc::S_IFLNK => ftype3::NF3LNK,
            libc::S_IFBLK => ftype3::NF3BLK,
            libc::S_IFCHR => ftype3::NF3CHR,
            libc::S_IFSOCK => ftype3::NF3SOCK,
            libc::S_IFIFO => ftype3::NF3FIFO,
            _ => ftype3::NF3REG,
        };
        let (maj, min) = self.inner.root_dev;
        fattr3 {
            type_,
            mode: st.mode & 0o7777,
            nlink: st.nlink,
            uid: st.uid,
            gid: st.gid,
            size: st.size,
            used: st.blocks.saturating_mul(512),
            rdev: specdata3 {
                specdata1: st.rdev.0,
                specdata2: st.rdev.1,
            },
            fsid: (u64::from(maj) << 32) | u64::from(min),
            fileid: st.ino,
            atime: time3(st.atime),
            mtime: time3(st.mtime),
            ctime: time3(st.ctime),
        }
    }

    fn matches(fh: &Fh, st: &Stat) -> bool {
        st.ino == fh.ino() && st.btime == fh.btime()
    }

    fn root_path_fd(&self, flags: i32) -> NfsResult<OwnedFd> {
        sys::open_beneath(self.inner.root.as_fd(), c".", flags).map_err(io_err)
    }

    /// Opens the object itself with `flags` (never following a symlink) and checks it is
    /// still the handle's inode.
    fn open_obj(&self, fh: &Fh, flags: i32) -> NfsResult<(OwnedFd, Stat)> {
        let fd = match self.locate(fh)? {
            Loc::Root(_) => self.root_path_fd(flags)?,
            Loc::Child { dir, name, .. } => {
                sys::openat(dir.as_fd(), &name, flags, 0).map_err(|e| {
                    if flags & libc::O_DIRECTORY != 0
                        && matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR))
                    {
                        nfsstat3::NFS3ERR_NOTDIR
                    } else {
                        io_err(e)
                    }
                })?
            }
        };
        let st = sys::fstat(fd.as_fd()).map_err(io_err)?;
        if !Self::matches(fh, &st) {
            return Err(nfsstat3::NFS3ERR_STALE);
        }
        Ok((fd, st))
    }

    fn dir_fd(&self, fh: &Fh) -> NfsResult<(OwnedFd, Stat)> {
        self.open_obj(fh, libc::O_PATH | libc::O_DIRECTORY)
    }

    /// An open regular file for READ/WRITE, from the LRU when possible.
    fn file(&self, fh: &Fh, writable: bool) -> NfsResult<Arc<File>> {
        if let Some(f) = self.inner.fds.get(fh.ino(), writable) {
            return Ok(f);
        }
        let loc = self.locate(fh)?;
        let Loc::Child {
            dir, name, stat, ..
        } = loc
        else {
            return Err(nfsstat3::NFS3ERR_ISDIR);
        };
        if stat.is_dir() {
            return Err(nfsstat3::NFS3ERR_ISDIR);
        }
        if !stat.is_reg() {
            // Symlinks, devices, fifos: never opened for data.
            return Err(nfsstat3::NFS3ERR_INVAL);
        }
        let mode = if writable {
            libc::O_RDWR
        } else {
            libc::O_RDONLY
        };
        let fd = sys::openat(dir.as_fd(), &name, mode | libc::O_NONBLOCK, 0).map_err(io_err)?;
        let st = sys::fstat(fd.as_fd()).map_err(io_err)?;
        if !Self::matches(fh, &st) || !st.is_reg() {
            return Err(nfsstat3::NFS3ERR_STALE);
        }
        let file = Arc::new(File::from(fd));
        self.inner.fds.insert(fh.ino(), writable, file.clone());
        Ok(file)
    }

    fn check_writable(&self) -> NfsResult<()> {
        if self.inner.read_only {
            Err(nfsstat3::NFS3ERR_ROFS)
        } else {
            Ok(())
        }
    }

    /// Gives a new object the squash owner, when squashing.
    fn squash_new(&self, dir: &OwnedFd, name: &CString) -> NfsResult<()> {
        if let Some((uid, gid)) = self.inner.squash {
            sys::lchownat(dir.as_fd(), name, uid, gid).map_err(io_err)?;
        }
        Ok(())
    }

    fn new_entry(&self, dir: &OwnedFd, dir_ino: u64, name: &CString) -> NfsResult<(Fh, fattr3)> {
        let st = sys::statx(dir.as_fd(), name).map_err(io_err)?;
        self.inner.nodes.insert(st.ino, dir_ino, name.as_bytes());
        Ok((Fh::new(st.ino, st.btime), self.fattr(&st)))
    }

    /// Applies a SETATTR-style change through an fd of the object (never a path).
    fn apply_sattr(&self, fd: &OwnedFd, st: &Stat, attr: &sattr3) -> NfsResult<()> {
        use nfs3_types::nfs3::Nfs3Option;
        if let Nfs3Option::Some(mode) = attr.mode {
            sys::fchmod(fd.as_fd(), mode & 0o7777).map_err(io_err)?;
        }
        let mut uid = match attr.uid {
            Nfs3Option::Some(u) => u,
            Nfs3Option::None => u32::MAX,
        };
        let mut gid = match attr.gid {
            Nfs3Option::Some(g) => g,
            Nfs3Option::None => u32::MAX,
        };
        if let Some((su, sg)) = self.inner.squash {
            if uid != u32::MAX {
                uid = su;
            }
            if gid != u32::MAX {
                gid = sg;
            }
        }
        if uid != u32::MAX || gid != u32::MAX {
            sys::lchownat(fd.as_fd(), c"", uid, gid).map_err(io_err)?;
        }
        if let Nfs3Option::Some(size) = attr.size {
            if st.is_dir() {
                return Err(nfsstat3::NFS3ERR_ISDIR);
            }
            if !st.is_reg() {
                return Err(nfsstat3::NFS3ERR_INVAL);
            }
            let file = File::from(fd.try_clone().map_err(io_err)?);
            file.set_len(size).map_err(io_err)?;
        }
        let (a, m) = (set_time(attr.atime), set_time_m(attr.mtime));
        if a.is_some() || m.is_some() {
            sys::lutimensat(fd.as_fd(), c"", a, m).map_err(io_err)?;
        }
        Ok(())
    }

    fn getattr_sync(&self, fh: &Fh) -> NfsResult<fattr3> {
        // Hot path (every READ starts with a GETATTR): a file already open answers with
        // one fstat. An unlinked file (nlink 0) falls through to the full check.
        let cached = self.inner.fds.get(fh.ino(), false);
        if let Some(file) = cached.or_else(|| self.inner.fds.get(fh.ino(), true)) {
            match sys::fstat(file.as_fd()) {
                Ok(st) if Self::matches(fh, &st) && st.nlink > 0 => return Ok(self.fattr(&st)),
                _ => self.inner.fds.remove(fh.ino()),
            }
        }
        Ok(self.fattr(self.locate(fh)?.stat()))
    }

    fn lookup_sync(&self, dirfh: &Fh, name: &[u8]) -> NfsResult<Fh> {
        let (dir, dst) = self.dir_fd(dirfh)?;
        if name == b"." {
            return Ok(*dirfh);
        }
        if name == b".." {
            // Never above the export: `..` of the root is the root.
            if dst.ino == self.inner.root_ino {
                return Ok(self.root_fh());
            }
            let parent = self
                .inner
                .nodes
                .get(dst.ino)
                .ok_or(nfsstat3::NFS3ERR_STALE)?;
            let path = self
                .inner
                .nodes
                .path(parent.parent, self.inner.root_ino)
                .ok_or(nfsstat3::NFS3ERR_STALE)?;
            let fd = self
                .open_rel(&path, libc::O_PATH | libc::O_DIRECTORY)
                .map_err(io_err)?;
            let st = sys::fstat(fd.as_fd()).map_err(io_err)?;
            return Ok(Fh::new(st.ino, st.btime));
        }
        let cname = check_name(name)?;
        let st = sys::statx(dir.as_fd(), &cname).map_err(io_err)?;
        if st.dev != self.inner.root_dev {
            // A mount point inside the export: not part of it (no crossmnt).
            return Err(nfsstat3::NFS3ERR_ACCES);
        }
        self.inner.nodes.insert(st.ino, dst.ino, name);
        Ok(Fh::new(st.ino, st.btime))
    }

    /// READ for the connection guard's fast path: appends the payload straight into the
    /// reply being built (`out`), so the data is copied once, from the page cache.
    /// Returns the attributes (taken before the read, as the engine does), the byte count
    /// and EOF.
    pub fn read_into(
        &self,
        fh: &Fh,
        offset: u64,
        count: u32,
        out: &mut Vec<u8>,
    ) -> Result<(fattr3, u32, bool), (nfsstat3, Option<fattr3>)> {
        let start = Instant::now();
        let r = (|| {
            let attr = self.getattr_sync(fh).map_err(|s| (s, None))?;
            let count = count.min(MAX_IO) as usize;
            let file = self.file(fh, false).map_err(|s| (s, Some(attr.clone())))?;
            let base = out.len();
            out.resize(base + count, 0);
            let mut n = 0;
            while n < count {
                match file.read_at(&mut out[base + n..], offset + n as u64) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        out.truncate(base);
                        return Err((io_err(e), Some(attr.clone())));
                    }
                }
            }
            out.truncate(base + n);
            let eof = n < count || offset + n as u64 >= attr.size;
            Ok((attr, n as u32, eof))
        })();
        let bytes = r.as_ref().map_or(0, |(_, n, _)| u64::from(*n));
        let rec: NfsResult<()> = r.as_ref().map(drop).map_err(|(s, _)| *s);
        self.record("READ", start, &rec, bytes);
        r
    }

    fn read_sync(&self, fh: &Fh, offset: u64, count: u32) -> NfsResult<(Vec<u8>, bool)> {
        let count = count.min(MAX_IO) as usize;
        let file = self.file(fh, false)?;
        let mut buf = vec![0u8; count];
        let mut n = 0;
        while n < count {
            match file.read_at(&mut buf[n..], offset + n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        let eof = if n < count {
            true
        } else {
            let st = sys::fstat(file.as_fd()).map_err(io_err)?;
            offset + n as u64 >= st.size
        };
        buf.truncate(n);
        Ok((buf, eof))
    }

    fn write_sync(&self, fh: &Fh, offset: u64, data: &[u8]) -> NfsResult<(fattr3, stable_how)> {
        self.check_writable()?;
        if data.len() > MAX_IO as usize {
            return Err(nfsstat3::NFS3ERR_INVAL);
        }
        let file = self.file(fh, true)?;
        blocking(|| {
            file.write_all_at(data, offset).map_err(io_err)?;
            // Every WRITE is answered FILE_SYNC: data and metadata on stable storage first.
            file.sync_all().map_err(io_err)
        })?;
        let st = sys::fstat(file.as_fd()).map_err(io_err)?;
        Ok((self.fattr(&st), stable_how::FILE_SYNC))
    }

    fn create_sync(&self, dirfh: &Fh, name: &[u8], attr: &sattr3) -> NfsResult<(Fh, fattr3)> {
        use nfs3_types::nfs3::Nfs3Option;
        self.check_writable()?;
        let cname = check_name(name)?;
        let (dir, dst) = self.dir_fd(dirfh)?;
        let mode = match attr.mode {
            Nfs3Option::Some(m) => m & 0o7777,
            Nfs3Option::None => 0o644,
        };
        let fd = sys::openat(
            dir.as_fd(),
            &cname,
            libc::O_CREAT | libc::O_WRONLY | libc::O_NONBLOCK,
            mode,
        )
        .map_err(io_err)?;
        let st = sys::fstat(fd.as_fd()).map_err(io_err)?;
        if !st.is_reg() {
            return Err(nfsstat3::NFS3ERR_EXIST);
        }
        let mut rest = attr.clone();
        rest.mode = Nfs3Option::None;
        self.apply_sattr(&fd, &st, &rest)?;
        self.squash_new(&dir, &cname)?;
        self.inner.fds.remove(st.ino);
        self.new_entry(&dir, dst.ino, &cname)
    }

    fn create_exclusive_sync(&self, dirfh: &Fh, name: &[u8], verf: &createverf3) -> NfsResult<Fh> {
        self.check_writable()?;
        let cname = check_name(name)?;
        let (dir, dst) = self.dir_fd(dirfh)?;
        // The verifier lives in atime/mtime seconds, as kernel nfsd stores it.
        let v0 = u32::from_be_bytes(verf.0[..4].try_into().unwrap_or_default());
        let v1 = u32::from_be_bytes(verf.0[4..].try_into().unwrap_or_default());
        match sys::openat(
            dir.as_fd(),
            &cname,
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY,
            0o644,
        ) {
            Ok(fd) => {
                sys::lutimensat(
                    fd.as_fd(),
                    c"",
                    Some(Some((i64::from(v0), 0))),
                    Some(Some((i64::from(v1), 0))),
                )
                .map_err(io_err)?;
                self.squash_new(&dir, &cname)?;
                Ok(self.new_entry(&dir, dst.ino, &cname)?.0)
            }
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                let st = sys::statx(dir.as_fd(), &cname).map_err(io_err)?;
                if st.is_reg() && st.atime.0 == i64::from(v0) && st.mtime.0 == i64::from(v1) {
                    // A retransmission of the same exclusive create.
                    Ok(self.new_entry(&dir, dst.ino, &cname)?.0)
                } else {
                    Err(nfsstat3::NFS3ERR_EXIST)
                }
            }
            Err(e) => Err(io_err(e)),
        }
    }

    fn mkdir_sync(&self, dirfh: &Fh, name: &[u8]) -> NfsResult<(Fh, fattr3)> {
        self.check_writable()?;
        let cname = check_name(name)?;
        let (dir, dst) = self.dir_fd(dirfh)?;
        sys::mkdirat(dir.as_fd(), &cname, 0o755).map_err(io_err)?;
        self.squash_new(&dir, &cname)?;
        self.new_entry(&dir, dst.ino, &cname)
    }

    fn remove_sync(&self, dirfh: &Fh, name: &[u8]) -> NfsResult<()> {
        self.check_writable()?;
        let cname = check_name(name)?;
        let (dir, _) = self.dir_fd(dirfh)?;
        let st = sys::statx(dir.as_fd(), &cname).map_err(io_err)?;
        sys::unlinkat(dir.as_fd(), &cname, st.is_dir()).map_err(io_err)?;
        self.inner.fds.remove(st.ino);
        if st.nlink <= 1 || st.is_dir() {
            self.inner.nodes.remove(st.ino);
        }
        Ok(())
    }

    fn rename_sync(&self, from: &Fh, from_name: &[u8], to: &Fh, to_name: &[u8]) -> NfsResult<()> {
        self.check_writable()?;
        let cfrom = check_name(from_name)?;
        let cto = check_name(to_name)?;
        let (fdir, _) = self.dir_fd(from)?;
        let (tdir, tst) = self.dir_fd(to)?;
        let st = sys::statx(fdir.as_fd(), &cfrom).map_err(io_err)?;
        let replaced = sys::statx(tdir.as_fd(), &cto).ok();
        sys::renameat(fdir.as_fd(), &cfrom, tdir.as_fd(), &cto).map_err(io_err)?;
        if let Some(old) = replaced
            && old.ino != st.ino
        {
            self.inner.fds.remove(old.ino);
            self.inner.nodes.remove(old.ino);
        }
        self.inner.nodes.insert(st.ino, tst.ino, to_name);
        Ok(())
    }

    fn symlink_sync(&self, dirfh: &Fh, name: &[u8], target: &[u8]) -> NfsResult<(Fh, fattr3)> {
        self.check_writable()?;
        let cname = check_name(name)?;
        if target.is_empty() {
            return Err(nfsstat3::NFS3ERR_INVAL);
        }
        let ctarget = CString::new(target).map_err(|_| nfsstat3::NFS3ERR_INVAL)?;
        let (dir, dst) = self.dir_fd(dirfh)?;
        // Stored verbatim; only clients ever resolve it.
        sys::symlinkat(&ctarget, dir.as_fd(), &cname).map_err(io_err)?;
        self.squash_new(&dir, &cname)?;
        self.new_entry(&dir, dst.ino, &cname)
    }

    fn readlink_sync(&self, fh: &Fh) -> NfsResult<Vec<u8>> {
        match self.locate(fh)? {
            Loc::Child {
                dir, name, stat, ..
            } if stat.is_symlink() => sys::readlinkat(dir.as_fd(), &name).map_err(io_err),
            _ => Err(nfsstat3::NFS3ERR_INVAL),
        }
    }

    fn setattr_sync(&self, fh: &Fh, attr: &sattr3) -> NfsResult<fattr3> {
        use nfs3_types::nfs3::Nfs3Option;
        self.check_writable()?;
        let loc = self.locate(fh)?;
        let st = *loc.stat();
        if st.is_symlink() {
            let Loc::Child { dir, name, .. } = &loc else {
                return Err(nfsstat3::NFS3ERR_INVAL);
            };
            if matches!(attr.size, Nfs3Option::Some(_)) {
                return Err(nfsstat3::NFS3ERR_INVAL);
            }
            let (mut uid, mut gid) = (
                if let Nfs3Option::Some(u) = attr.uid {
                    u
                } else {
                    u32::MAX
                },
                if let Nfs3Option::Some(g) = attr.gid {
                    g
                } else {
                    u32::MAX
                },
            );
            if let Some((su, sg)) = self.inner.squash {
                uid = if uid == u32::MAX { uid } else { su };
                gid = if gid == u32::MAX { gid } else { sg };
            }
            if uid != u32::MAX || gid != u32::MAX {
                sys::lchownat(dir.as_fd(), name, uid, gid).map_err(io_err)?;
            }
            let (a, m) = (set_time(attr.atime), set_time_m(attr.mtime));
            if a.is_some() || m.is_some() {
                sys::lutimensat(dir.as_fd(), name, a, m).map_err(io_err)?;
            }
            return self.getattr_sync(fh);
        }
        let flags = if st.is_dir() {
            libc::O_RDONLY | libc::O_DIRECTORY
        } else if st.is_reg() {
            if matches!(attr.size, Nfs3Option::Some(_)) {
                libc::O_WRONLY | libc::O_NONBLOCK
            } else {
                libc::O_RDONLY | libc::O_NONBLOCK
            }
        } else {
            // Devices, fifos, sockets: opening them may have side effects.
            return Err(nfsstat3::NFS3ERR_NOTSUPP);
        };
        let (fd, st) = self.open_obj(fh, flags)?;
        self.apply_sattr(&fd, &st, attr)?;
        let st = sys::fstat(fd.as_fd()).map_err(io_err)?;
        Ok(self.fattr(&st))
    }

    /// FSSTAT from the real file system (statvfs); answered by the connection guard.
    pub fn fsstat(&self, fh: &Fh) -> NfsResult<FSSTAT3resok> {
        let start = Instant::now();
        let r = (|| {
            let attr = self.getattr_sync(fh)?;
            let s = sys::fstatvfs(self.inner.root.as_fd()).map_err(io_err)?;
            Ok(FSSTAT3resok {
                obj_attributes: post_op_attr::Some(attr),
                tbytes: s.blocks.saturating_mul(s.frsize),
                fbytes: s.bfree.saturating_mul(s.frsize),
                abytes: s.bavail.saturating_mul(s.frsize),
                tfiles: s.files,
                ffiles: s.ffree,
                afiles: s.favail,
                invarsec: 0,
            })
        })();
        self.record("FSSTAT", start, &r, 0);
        r
    }

    fn dir_iter(&self, dirfh: &Fh, cookie: u64, plus: bool) -> NfsResult<DirIter> {
        let (fd, st) = self.open_obj(dirfh, libc::O_RDONLY | libc::O_DIRECTORY)?;
        sys::seek_dir(fd.as_fd(), cookie).map_err(|_| nfsstat3::NFS3ERR_BAD_COOKIE)?;
        Ok(DirIter {
            fs: self.clone(),
            fd,
            dir_ino: st.ino,
            buf: vec![0u8; 32 * 1024],
            pending: VecDeque::new(),
            done: false,
            plus,
        })
    }
}

/// A READDIR/READDIRPLUS page reader: getdents64 from the cookie (the kernel's own
/// directory offset, `d_off`), so paging is exact for any directory size.
pub struct DirIter {
    fs: DirFs,
    fd: OwnedFd,
    dir_ino: u64,
    buf: Vec<u8>,
    pending: VecDeque<sys::Dirent>,
    done: bool,
    plus: bool,
}

impl DirIter {
    fn next_entry(&mut self) -> NextResult<(sys::Dirent, Option<Stat>)> {
        loop {
            if self.pending.is_empty() {
                if self.done {
                    return NextResult::Eof;
                }
                let mut v = Vec::new();
                match sys::getdents(self.fd.as_fd(), &mut self.buf, &mut v) {
                    Ok(more) => {
                        if !more {
                            self.done = true;
                        }
                        self.pending.extend(v);
                    }
                    Err(e) => return NextResult::Err(io_err(e)),
                }
                continue;
            }
            let Some(e) = self.pending.pop_front() else {
                continue;
            };
            if !self.plus {
                return NextResult::Ok((e, None));
            }
            let Ok(name) = CString::new(e.name.as_slice()) else {
                continue;
            };
            match sys::statx(self.fd.as_fd(), &name) {
                Ok(st) => {
                    self.fs.inner.nodes.insert(st.ino, self.dir_ino, &e.name);
                    return NextResult::Ok((e, Some(st)));
                }
                // Removed since getdents saw it: skip, as a later listing would.
                Err(_) => continue,
            }
        }
    }
}

impl ReadDirIterator for DirIter {
    async fn next(&mut self) -> NextResult<DirEntry> {
        match self.next_entry() {
            NextResult::Ok((e, _)) => NextResult::Ok(entry3 {
                fileid: e.ino,
                name: filename3(Opaque::owned(e.name)),
                cookie: e.off,
            }),
            NextResult::Eof => NextResult::Eof,
            NextResult::Err(s) => NextResult::Err(s),
        }
    }
}

impl ReadDirPlusIterator<Fh> for DirIter {
    async fn next(&mut self) -> NextResult<DirEntryPlus<Fh>> {
        match self.next_entry() {
            NextResult::Ok((e, st)) => {
                let st = st.unwrap_or_default();
                NextResult::Ok(DirEntryPlus {
                    fileid: e.ino,
                    name: filename3(Opaque::owned(e.name)),
                    cookie: e.off,
                    name_attributes: Some(self.fs.fattr(&st)),
                    // A mount point inside the export is not part of it (no crossmnt).
                    name_handle: (st.dev == self.fs.inner.root_dev)
                        .then(|| Fh::new(st.ino, st.btime)),
                })
            }
            NextResult::Eof => NextResult::Eof,
            NextResult::Err(s) => NextResult::Err(s),
        }
    }
}

impl NfsReadFileSystem for DirFs {
    type Handle = Fh;

    fn root_dir(&self) -> Fh {
        self.root_fh()
    }

    async fn lookup(&self, dirid: &Fh, filename: &filename3<'_>) -> NfsResult<Fh> {
        let start = Instant::now();
        let r = self.lookup_sync(dirid, &filename.0);
        self.record("LOOKUP", start, &r, 0);
        r
    }

    async fn lookup_by_path(&self, path: &str) -> NfsResult<Fh> {
        // MOUNT paths: "" and "/" are the root; so is the export's own absolute path
        // (`host:/srv/share`, as with kernel nfsd); anything else is a subdirectory.
        let path = path.trim_matches('/');
        let export = self.inner.export.to_string_lossy();
        let export = export.trim_matches('/');
        let rest = if path == export {
            ""
        } else if let Some(rest) = path.strip_prefix(export).and_then(|r| r.strip_prefix('/')) {
            rest
        } else {
            path
        };
        let mut fh = self.root_fh();
        for comp in rest.split('/').filter(|c| !c.is_empty()) {
            fh = self.lookup_sync(&fh, comp.as_bytes())?;
        }
        Ok(fh)
    }

    async fn getattr(&self, id: &Fh) -> NfsResult<fattr3> {
        let start = Instant::now();
        let r = self.getattr_sync(id);
        self.record("GETATTR", start, &r, 0);
        r
    }

    async fn read(&self, id: &Fh, offset: u64, count: u32) -> NfsResult<(Vec<u8>, bool)> {
        let start = Instant::now();
        let r = self.read_sync(id, offset, count);
        let bytes = r.as_ref().map_or(0, |(b, _)| b.len() as u64);
        self.record("READ", start, &r, bytes);
        r
    }

    async fn readdir(&self, dirid: &Fh, cookie: u64) -> NfsResult<impl ReadDirIterator> {
        let start = Instant::now();
        let r = self.dir_iter(dirid, cookie, false);
        self.record("READDIR", start, &r, 0);
        r
    }

    async fn readdirplus(
        &self,
        dirid: &Fh,
        cookie: u64,
    ) -> NfsResult<impl ReadDirPlusIterator<Fh>> {
        let start = Instant::now();
        let r = self.dir_iter(dirid, cookie, true);
        self.record("READDIRPLUS", start, &r, 0);
        r
    }

    async fn readlink(&self, id: &Fh) -> NfsResult<nfspath3<'_>> {
        let start = Instant::now();
        let r = self.readlink_sync(id);
        self.record("READLINK", start, &r, 0);
        r.map(|v| nfspath3(Opaque::owned(v)))
    }

    async fn fsinfo(&self, root_fileid: &Fh) -> NfsResult<FSINFO3resok> {
        let start = Instant::now();
        let r = (|| {
            let attr = self.getattr_sync(root_fileid)?;
            let s = sys::fstatvfs(self.inner.root.as_fd()).map_err(io_err)?;
            let block = u32::try_from(s.bsize).unwrap_or(4096).clamp(512, MAX_IO);
            Ok(FSINFO3resok {
                obj_attributes: post_op_attr::Some(attr),
                rtmax: MAX_IO,
                rtpref: MAX_IO,
                rtmult: block,
                wtmax: MAX_IO,
                wtpref: MAX_IO,
                wtmult: block,
                dtpref: 64 * 1024,
                maxfilesize: i64::MAX as u64,
                time_delta: nfstime3 {
                    seconds: 0,
                    nseconds: 1,
                },
                properties: FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME,
            })
        })();
        self.record("FSINFO", start, &r, 0);
        r
    }
}

impl NfsFileSystem for DirFs {
    fn capabilities(&self) -> VFSCapabilities {
        if self.inner.read_only {
            VFSCapabilities::ReadOnly
        } else {
            VFSCapabilities::ReadWrite
        }
    }

    async fn setattr(&self, id: &Fh, setattr: sattr3) -> NfsResult<fattr3> {
        let start = Instant::now();
        let r = self.setattr_sync(id, &setattr);
        self.record("SETATTR", start, &r, 0);
        r
    }

    async fn write(
        &self,
        id: &Fh,
        offset: u64,
        data: &[u8],
        _stable: stable_how,
    ) -> NfsResult<(fattr3, stable_how)> {
        let start = Instant::now();
        let r = self.write_sync(id, offset, data);
        let bytes = if r.is_ok() { data.len() as u64 } else { 0 };
        self.record("WRITE", start, &r, bytes);
        r
    }

    async fn create(
        &self,
        dirid: &Fh,
        filename: &filename3<'_>,
        attr: sattr3,
    ) -> NfsResult<(Fh, fattr3)> {
        let start = Instant::now();
        let r = self.create_sync(dirid, &filename.0, &attr);
        self.record("CREATE", start, &r, 0);
        r
    }

    async fn create_exclusive(
        &self,
        dirid: &Fh,
        filename: &filename3<'_>,
        createverf: createverf3,
    ) -> NfsResult<Fh> {
        let start = Instant::now();
        let r = self.create_exclusive_sync(dirid, &filename.0, &createverf);
        self.record("CREATE", start, &r, 0);
        r
    }

    async fn mkdir(&self, dirid: &Fh, dirname: &filename3<'_>) -> NfsResult<(Fh, fattr3)> {
        let start = Instant::now();
        let r = self.mkdir_sync(dirid, &dirname.0);
        self.record("MKDIR", start, &r, 0);
        r
    }

    async fn remove(&self, dirid: &Fh, filename: &filename3<'_>) -> NfsResult<()> {
        let start = Instant::now();
        let r = self.remove_sync(dirid, &filename.0);
        self.record("REMOVE", start, &r, 0);
        r
    }

    async fn rename<'a>(
        &self,
        from_dirid: &Fh,
        from_filename: &filename3<'a>,
        to_dirid: &Fh,
        to_filename: &filename3<'a>,
    ) -> NfsResult<()> {
        let start = Instant::now();
        let r = self.rename_sync(from_dirid, &from_filename.0, to_dirid, &to_filename.0);
        self.record("RENAME", start, &r, 0);
        r
    }

    async fn symlink<'a>(
        &self,
        dirid: &Fh,
        linkname: &filename3<'a>,
        symlink: &nfspath3<'a>,
        _attr: &sattr3,
    ) -> NfsResult<(Fh, fattr3)> {
        let start = Instant::now();
        let r = self.symlink_sync(dirid, &linkname.0, &symlink.0);
        self.record("SYMLINK", start, &r, 0);
        r
    }

    async fn commit(&self, id: &Fh, _offset: u64, _count: u32) -> NfsResult<()> {
        let start = Instant::now();
        let r = self
            .file(id, false)
            .and_then(|f| blocking(|| f.sync_all()).map_err(io_err));
        self.record("COMMIT", start, &r, 0);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs_in(dir: &Path) -> DirFs {
        DirFs::open(&Config::new(dir), Registry::new("t")).unwrap()
    }

    #[test]
    fn names_are_single_components() {
        assert!(check_name(b"ok.txt").is_ok());
        assert_eq!(check_name(b"").unwrap_err(), nfsstat3::NFS3ERR_NOENT);
        assert_eq!(check_name(b".").unwrap_err(), nfsstat3::NFS3ERR_EXIST);
        assert_eq!(check_name(b"..").unwrap_err(), nfsstat3::NFS3ERR_EXIST);
        assert_eq!(check_name(b"a/b").unwrap_err(), nfsstat3::NFS3ERR_ACCES);
        assert_eq!(check_name(b"a\0b").unwrap_err(), nfsstat3::NFS3ERR_ACCES);
        assert_eq!(
            check_name(&[b'x'; 256]).unwrap_err(),
            nfsstat3::NFS3ERR_NAMETOOLONG
        );
    }

    #[test]
    fn the_jail_holds_at_the_vfs_level() {
        let tmp = tempfile::tempdir().unwrap();
        let export = tmp.path().join("export");
        std::fs::create_dir_all(export.join("sub")).unwrap();
        std::fs::write(tmp.path().join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(tmp.path(), export.join("up")).unwrap();
        let fs = fs_in(&export);
        let root = fs.root_fh();
        assert_eq!(fs.lookup_sync(&root, b"..").unwrap(), root);
        let up = fs.lookup_sync(&root, b"up").unwrap();
        assert_eq!(
            fs.lookup_sync(&up, b"secret"),
            Err(nfsstat3::NFS3ERR_NOTDIR)
        );
        assert!(fs.read_sync(&up, 0, 10).is_err());
        assert!(fs.create_sync(&up, b"x", &sattr3::default()).is_err());
        assert!(!tmp.path().join("x").exists());
        let sub = fs.lookup_sync(&root, b"sub").unwrap();
        assert_eq!(fs.lookup_sync(&sub, b"..").unwrap(), root);
        // A handle found again after the inode map is lost (a restart).
        let (file, _) = fs.create_sync(&sub, b"f", &sattr3::default()).unwrap();
        let fresh = fs_in(&export);
        assert!(fresh.getattr_sync(&file).is_ok());
        std::fs::remove_file(export.join("sub/f")).unwrap();
        assert_eq!(
            fresh.getattr_sync(&file).unwrap_err(),
            nfsstat3::NFS3ERR_STALE
        );
    }

    #[test]
    fn mount_paths() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        let fs = fs_in(tmp.path());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let root = fs.root_fh();
        let abs = fs.export().to_str().unwrap().to_string();
        for p in ["", "/", abs.as_str(), &format!("{abs}/")] {
            assert_eq!(rt.block_on(fs.lookup_by_path(p)).unwrap(), root, "{p:?}");
        }
        let sub = rt.block_on(fs.lookup_by_path("/sub")).unwrap();
        assert_eq!(
            rt.block_on(fs.lookup_by_path(&format!("{abs}/sub")))
                .unwrap(),
            sub
        );
        assert!(rt.block_on(fs.lookup_by_path("/../etc")).is_err());
        assert!(rt.block_on(fs.lookup_by_path("/nope")).is_err());
    }
}
