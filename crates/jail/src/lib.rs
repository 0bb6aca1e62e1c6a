//! One jail for the workspace: open a relative path beneath a directory descriptor
//! without ever resolving outside it.
//!
//! On Linux 5.6+ this is one `openat2` call with `RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS` (plus `RESOLVE_NO_SYMLINKS` and `RESOLVE_NO_XDEV` as the
//! [`Policy`] asks): the kernel refuses (`EXDEV`, `ELOOP`) any resolution that would
//! leave the directory — `..` above it, absolute symlinks, symlinks whose target climbs
//! out, `/proc` magic links — and does so atomically, so a concurrent rename cannot race
//! it the way a `canonicalize` + prefix check can. Older kernels (`ENOSYS`, remembered
//! for the process) get a per-component walk: each component opened with `O_NOFOLLOW`
//! (no symlink is followed at all, whatever the policy), `..` refused, and the device
//! checked at each step when mounts may not be crossed.
//!
//! No `unsafe` here: the system calls go through `rustix`.

#![forbid(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

pub use rustix::fs::OFlags;
use rustix::fs::{Mode, ResolveFlags};
use rustix::io::Errno;

/// How a path may be resolved beneath the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Follow symlinks whose resolution stays beneath the directory (with `openat2`; the
    /// fallback walk never follows any).
    pub symlinks: bool,
    /// Cross into other file systems mounted beneath the directory.
    pub cross_mounts: bool,
}

impl Policy {
    /// No symlink is ever followed and no mount point crossed (an NFS export: clients
    /// resolve symlinks themselves, as with kernel nfsd).
    pub const STRICT: Policy = Policy {
        symlinks: false,
        cross_mounts: false,
    };
    /// Symlinks that stay inside are followed, mounts inside are part of the tree (a web
    /// root).
    pub const BENEATH: Policy = Policy {
        symlinks: true,
        cross_mounts: true,
    };

    fn resolve(self) -> ResolveFlags {
        let mut r = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        if !self.symlinks {
            r |= ResolveFlags::NO_SYMLINKS;
        }
        if !self.cross_mounts {
            r |= ResolveFlags::NO_XDEV;
        }
        r
    }
}

/// Whether the kernel has `openat2`; cleared for the process on the first `ENOSYS`.
static HAVE_OPENAT2: AtomicBool = AtomicBool::new(true);

/// Opens `path` — relative, `/`-separated; empty or `.` is `dir` itself — beneath `dir`
/// with `flags` (`O_CLOEXEC` is always added; `O_NOFOLLOW` for the last component when
/// the policy follows no symlinks). An escape attempt fails with `EXDEV` or `ELOOP`.
pub fn open_beneath(
    dir: BorrowedFd<'_>,
    path: &[u8],
    flags: OFlags,
    policy: Policy,
) -> io::Result<OwnedFd> {
    if path.contains(&0) {
        return Err(io::Error::from_raw_os_error(libc_einval()));
    }
    let path = if path.is_empty() { &b"."[..] } else { path };
    let mut flags = flags | OFlags::CLOEXEC;
    if !policy.symlinks {
        flags |= OFlags::NOFOLLOW;
    }
    if HAVE_OPENAT2.load(Ordering::Relaxed) {
        // A concurrent rename anywhere makes RESOLVE_BENEATH ask for a retry (EAGAIN).
        for _ in 0..16 {
            match rustix::fs::openat2(dir, path, flags, Mode::empty(), policy.resolve()) {
                Ok(fd) => return Ok(fd),
                Err(Errno::AGAIN) | Err(Errno::INTR) => continue,
                Err(Errno::NOSYS) => {
                    HAVE_OPENAT2.store(false, Ordering::Relaxed);
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
        if HAVE_OPENAT2.load(Ordering::Relaxed) {
            return Err(Errno::AGAIN.into());
        }
    }
    walk(dir, path, flags, policy)
}

/// The fallback: one component at a time, each `O_NOFOLLOW`; `..` refused.
fn walk(dir: BorrowedFd<'_>, path: &[u8], flags: OFlags, policy: Policy) -> io::Result<OwnedFd> {
    let comps: Vec<&[u8]> = path
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .collect();
    if path.starts_with(b"/") || comps.contains(&&b".."[..]) {
        return Err(Errno::XDEV.into());
    }
    let flags = flags | OFlags::NOFOLLOW;
    let dev = if policy.cross_mounts {
        None
    } else {
        Some(rustix::fs::fstat(dir)?.st_dev)
    };
    let same_dev = |fd: &OwnedFd| -> io::Result<()> {
        match dev {
            Some(d) if rustix::fs::fstat(fd)?.st_dev != d => Err(Errno::XDEV.into()),
            _ => Ok(()),
        }
    };
    let Some((last, parents)) = comps.split_last() else {
        return Ok(rustix::fs::openat(dir, c".", flags, Mode::empty())?);
    };
    let mut cur: Option<OwnedFd> = None;
    for c in parents {
        let at = cur.as_ref().map_or(dir, |f| f.as_fd());
        let next = rustix::fs::openat(
            at,
            *c,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        same_dev(&next)?;
        cur = Some(next);
    }
    let at = cur.as_ref().map_or(dir, |f| f.as_fd());
    let fd = rustix::fs::openat(at, *last, flags, Mode::empty())?;
    same_dev(&fd)?;
    Ok(fd)
}

fn libc_einval() -> i32 {
    Errno::INVAL.raw_os_error()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// `<tmp>/root/{file, sub/inner, in -> sub, abs -> <tmp>/secret, up -> ../secret,
    /// proc -> /proc/self/root}` next to `<tmp>/secret`.
    fn tree() -> (tempfile::TempDir, OwnedFd) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("file"), b"f").unwrap();
        std::fs::write(root.join("sub/inner"), b"i").unwrap();
        std::fs::write(tmp.path().join("secret"), b"s").unwrap();
        symlink("sub", root.join("in")).unwrap();
        symlink(tmp.path().join("secret"), root.join("abs")).unwrap();
        symlink("../secret", root.join("up")).unwrap();
        symlink("/proc/self/root", root.join("proc")).unwrap();
        let fd = rustix::fs::open(&root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        (tmp, fd)
    }

    fn code(r: io::Result<OwnedFd>) -> Option<i32> {
        r.err().and_then(|e| e.raw_os_error())
    }

    const EXDEV: i32 = 18;
    const ELOOP: i32 = 40;
    const ENOTDIR: i32 = 20;

    /// An opener under test: `open_beneath` or the fallback `walk`.
    type Opener = dyn Fn(&OwnedFd, &[u8], Policy) -> io::Result<OwnedFd>;

    /// Every escape form, through `openat2` (`open`) and through the fallback (`walk`).
    fn escapes_refused(open: &Opener) {
        let (_tmp, root) = tree();
        for policy in [Policy::STRICT, Policy::BENEATH] {
            for bad in [
                &b".."[..],
                b"../secret",
                b"sub/../../secret",
                b"/etc/passwd",
            ] {
                assert!(open(&root, bad, policy).is_err(), "{bad:?} {policy:?}");
            }
            // Symlinks out: absolute, climbing, magic (as the last component, or on the
            // way, where the walk sees a non-directory).
            for bad in [&b"abs"[..], b"up", b"proc", b"proc/etc/passwd"] {
                let c = code(open(&root, bad, policy));
                assert!(
                    matches!(c, Some(EXDEV | ELOOP | ENOTDIR)),
                    "{bad:?} {policy:?}: {c:?}"
                );
            }
            assert!(open(&root, b"file", policy).is_ok());
            assert!(open(&root, b"sub/inner", policy).is_ok());
            assert!(open(&root, b"", policy).is_ok());
            assert!(open(&root, b"a\0b", policy).is_err());
        }
    }

    #[test]
    fn openat2_refuses_every_escape() {
        escapes_refused(&|root, p, policy| open_beneath(root.as_fd(), p, OFlags::RDONLY, policy));
    }

    #[test]
    fn the_fallback_walk_refuses_every_escape() {
        escapes_refused(&|root, p, policy| {
            if p.contains(&0) {
                return Err(Errno::INVAL.into());
            }
            walk(root.as_fd(), p, OFlags::RDONLY | OFlags::CLOEXEC, policy)
        });
    }

    #[test]
    fn symlinks_inside_follow_the_policy() {
        let (_tmp, root) = tree();
        let open = |p: &[u8], policy| open_beneath(root.as_fd(), p, OFlags::RDONLY, policy);
        assert!(open(b"in/inner", Policy::BENEATH).is_ok());
        assert_eq!(code(open(b"in/inner", Policy::STRICT)), Some(ELOOP));
        assert!(code(open(b"in", Policy::STRICT)).is_some());
        // The fallback never follows one.
        let w = walk(root.as_fd(), b"in/inner", OFlags::RDONLY, Policy::BENEATH);
        assert!(w.is_err());
    }

    #[test]
    fn mount_points_are_not_crossed_unless_allowed() {
        // `/proc` is another file system beneath `/`.
        let slash = rustix::fs::open("/", OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        if rustix::fs::stat("/proc/self").is_err() {
            return; // no procfs mounted: nothing to cross
        }
        let flags = OFlags::PATH;
        assert_eq!(
            code(open_beneath(
                slash.as_fd(),
                b"proc/self",
                flags,
                Policy::STRICT
            )),
            Some(EXDEV)
        );
        assert!(open_beneath(slash.as_fd(), b"proc/self", flags, Policy::BENEATH).is_ok());
        assert_eq!(
            code(walk(slash.as_fd(), b"proc/self", flags, Policy::STRICT)),
            Some(EXDEV)
        );
    }
}
