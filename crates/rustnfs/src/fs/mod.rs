//! The exported directory as an NFSv3 file system, resolved as a jail beneath fds.
//!
//! Every object is reached from the export's root descriptor: a directory by `openat2`
//! with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV`, a single name with
//! `*at(dirfd, name, AT_SYMLINK_NOFOLLOW)` or `O_NOFOLLOW`. The server never follows a
//! symbolic link (clients resolve them, as with kernel nfsd), never accepts a name with
//! `/`, `.` or `..` as a new name, and verifies every object it opens against the handle's
//! inode and birth time, so a swap between check and use is caught.
//!
//! This file holds the jail (resolution of handles and names) and attributes; the
//! procedures that change the tree are in `ops`, directory listing in `readdir`.

pub mod handle;
pub mod nodes;
mod ops;
mod readdir;
mod resolve;

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use latency::Registry;
use nfs3_types::nfs3::{
    FSSTAT3resok, fattr3, ftype3, nfsstat3, nfstime3, post_op_attr, sattr3, set_atime, set_mtime,
    specdata3, wcc_attr,
};

use crate::config::Config;
use crate::error::{Error, nfsstat_from_io, status_label};
use crate::sys::{self, Stat};
pub use handle::Fh;
use nodes::{FdCache, Nodes};
pub use readdir::DirIter;

/// Largest READ/WRITE payload advertised (and enforced) — FSINFO's rtmax/wtmax.
pub const MAX_IO: u32 = 1 << 20;

/// A procedure's outcome: its value or the status the client gets.
pub type NfsResult<T> = Result<T, nfsstat3>;

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

    /// This export's handle generation: the first 8 bytes of every handle.
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

    /// Whether every change is refused (`--read-only`).
    pub fn read_only(&self) -> bool {
        self.inner.read_only
    }

    /// The wire form of a handle of this export.
    pub fn wire(&self, fh: &Fh) -> nfs3_types::nfs3::nfs_fh3 {
        fh.to_nfs(self.inner.generation)
    }

    /// Decodes a client's handle for this export.
    pub fn decode(&self, data: &[u8]) -> NfsResult<Fh> {
        Fh::from_wire(self.inner.generation, data)
    }

    /// The handle of an object seen in a listing, or `None` for a mount point inside the
    /// export (not part of it: no crossmnt).
    fn handle_of(&self, st: &Stat) -> Option<Fh> {
        (st.dev == self.inner.root_dev).then(|| Fh::new(st.ino, st.btime))
    }

    /// NFS attributes of a stat.
    pub fn fattr(&self, st: &Stat) -> fattr3 {
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

    /// Applies a SETATTR-style change through an fd of the object (never a path).
    fn apply_sattr(&self, fd: &OwnedFd, st: &Stat, attr: &sattr3) -> NfsResult<()> {
        use nfs3_types::nfs3::Nfs3Option;
        // Refuse a size that cannot be set before changing anything else.
        if let Nfs3Option::Some(size) = attr.size {
            if st.is_dir() {
                return Err(nfsstat3::NFS3ERR_ISDIR);
            }
            if !st.is_reg() {
                return Err(nfsstat3::NFS3ERR_INVAL);
            }
            // ftruncate takes a signed offset: 2^63 and above is not a size.
            if size > i64::MAX as u64 {
                return Err(nfsstat3::NFS3ERR_FBIG);
            }
        }
        if let Nfs3Option::Some(mode) = attr.mode {
            sys::fchmod(fd.as_fd(), mode & 0o7777).map_err(io_err)?;
        }
        let (uid, gid) = self.owner_change(attr);
        if uid != u32::MAX || gid != u32::MAX {
            sys::lchownat(fd.as_fd(), c"", uid, gid).map_err(io_err)?;
        }
        if let Nfs3Option::Some(size) = attr.size {
            let file = File::from(fd.try_clone().map_err(io_err)?);
            file.set_len(size).map_err(io_err)?;
        }
        let (a, m) = (set_time(attr.atime), set_time_m(attr.mtime));
        if a.is_some() || m.is_some() {
            sys::lutimensat(fd.as_fd(), c"", a, m).map_err(io_err)?;
        }
        Ok(())
    }

    /// GETATTR (also the attributes every other reply carries).
    pub fn attr(&self, fh: &Fh) -> NfsResult<fattr3> {
        self.getattr_sync(fh)
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

    /// LOOKUP: the object's handle and attributes, and the directory's attributes
    /// (`None` when the directory itself cannot be reached).
    pub fn lookup(&self, dirfh: &Fh, name: &[u8]) -> (NfsResult<(Fh, fattr3)>, post_op_attr) {
        let (dir, dst) = match self.dir_fd(dirfh) {
            Ok(d) => d,
            Err(s) => return (Err(s), post_op_attr::None),
        };
        let r = self
            .lookup_in(&dir, &dst, dirfh, name)
            .and_then(|(fh, st)| {
                let attr = match st {
                    Some(st) => self.fattr(&st),
                    None => self.getattr_sync(&fh)?,
                };
                Ok((fh, attr))
            });
        (r, post_op_attr::Some(self.fattr(&dst)))
    }

    fn lookup_sync(&self, dirfh: &Fh, name: &[u8]) -> NfsResult<Fh> {
        let (dir, dst) = self.dir_fd(dirfh)?;
        self.lookup_in(&dir, &dst, dirfh, name).map(|(fh, _)| fh)
    }

    /// Resolves one name in an open directory; the stat comes along when it was taken.
    fn lookup_in(
        &self,
        dir: &OwnedFd,
        dst: &Stat,
        dirfh: &Fh,
        name: &[u8],
    ) -> NfsResult<(Fh, Option<Stat>)> {
        if name == b"." {
            return Ok((*dirfh, Some(*dst)));
        }
        if name == b".." {
            // Never above the export: `..` of the root is the root.
            if dst.ino == self.inner.root_ino {
                return Ok((self.root_fh(), None));
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
            return Ok((Fh::new(st.ino, st.btime), Some(st)));
        }
        let cname = check_name(name)?;
        let st = sys::statx(dir.as_fd(), &cname).map_err(io_err)?;
        if st.dev != self.inner.root_dev {
            // A mount point inside the export: not part of it (no crossmnt).
            return Err(nfsstat3::NFS3ERR_ACCES);
        }
        self.inner.nodes.insert(st.ino, dst.ino, name);
        Ok((Fh::new(st.ino, st.btime), Some(st)))
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

    /// FSSTAT from the real file system (statvfs).
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
}

/// The pre-operation attributes of a change (RFC 1813 `wcc_attr`).
fn wcc_of(a: &fattr3) -> wcc_attr {
    wcc_attr {
        size: a.size,
        mtime: a.mtime,
        ctime: a.ctime,
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
        assert!(fs.read_into(&up, 0, 10, &mut Vec::new()).is_err());
        let unchecked = nfs3_types::nfs3::createhow3::UNCHECKED(sattr3::default());
        assert!(fs.create(&up, b"x", &unchecked).0.is_err());
        assert!(!tmp.path().join("x").exists());
        let sub = fs.lookup_sync(&root, b"sub").unwrap();
        assert_eq!(fs.lookup_sync(&sub, b"..").unwrap(), root);
        // A handle found again after the inode map is lost (a restart).
        let (file, _) = fs.create(&sub, b"f", &unchecked).0.unwrap();
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
        use nfs3_types::mount::mountstat3;
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        std::fs::write(tmp.path().join("file"), b"x").unwrap();
        std::os::unix::fs::symlink("sub", tmp.path().join("link")).unwrap();
        let fs = fs_in(tmp.path());
        let root = fs.root_fh();
        let abs = fs.export().to_str().unwrap().to_string();
        for p in ["", "/", abs.as_str(), &format!("{abs}/")] {
            assert_eq!(fs.mount(p.as_bytes()).unwrap(), root, "{p:?}");
        }
        let sub = fs.mount(b"/sub").unwrap();
        assert_eq!(fs.mount(format!("{abs}/sub").as_bytes()).unwrap(), sub);
        assert!(matches!(
            fs.mount(b"/../etc"),
            Err(mountstat3::MNT3ERR_NOENT)
        ));
        assert!(matches!(fs.mount(b"/nope"), Err(mountstat3::MNT3ERR_NOENT)));
        // Only directories are mounted: a symlink (even to one) or a file is NOTDIR.
        assert!(matches!(
            fs.mount(b"/link"),
            Err(mountstat3::MNT3ERR_NOTDIR)
        ));
        assert!(matches!(
            fs.mount(b"/file"),
            Err(mountstat3::MNT3ERR_NOTDIR)
        ));
        assert!(matches!(
            fs.mount(b"/link/x"),
            Err(mountstat3::MNT3ERR_NOTDIR)
        ));
    }
}
