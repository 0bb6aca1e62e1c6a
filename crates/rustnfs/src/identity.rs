//! Acting as the caller: the file-system work of an NFS call runs with the caller's
//! AUTH_SYS uid, gid and groups, so the kernel itself decides permissions, ownership of
//! new objects, SUID/SGID clearing and the sticky-directory rules, as on a local file
//! system (what kernel nfsd does with AUTH_SYS).
//!
//! # How, and why this way
//! Linux credentials are per thread at the system-call level. glibc's `setuid`,
//! `setgid` and `setgroups` wrappers change *every* thread of the process (they
//! broadcast with a signal), so they cannot serve concurrent callers; the raw
//! `setfsuid`, `setfsgid` and `setgroups` system calls change only the calling thread.
//! Only the file-system identity is switched: the process keeps euid 0, and when the
//! fsuid leaves 0 the kernel drops the file-system capabilities (CAP_CHOWN,
//! CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, ...) from the thread's effective set, and
//! raises them again when it comes back to 0 — exactly the transition knfsd relies on.
//!
//! The async runtime: the dispatcher answers a call synchronously on the connection's
//! task (no `.await` between the start and the end of a procedure), and `block_in_place`
//! (used around `fsync`) runs its closure on the same thread. [`act`] sets the
//! credentials, runs one closure, and restores the server's own identity before it
//! returns — also when the closure panics — so nothing else that runs on the thread
//! (another connection's task, the READ path, the runtime) ever sees a caller's identity.
//! Handle resolution (the jail's `openat2` walk) and opening files for data run with the
//! server's identity, as knfsd decodes handles; only the change itself runs as the
//! caller. That costs six credential system calls per change (about 2 µs here).
//! Nothing inside [`act`] may start a thread (`block_in_place` can): a new thread
//! inherits the credentials of the one that starts it.
//!
//! The caller of the call being answered is a thread-local set by [`Scope`] (no system
//! call); [`act`] reads it.

use std::cell::RefCell;
use std::sync::OnceLock;

/// The uid and gid anonymous and squashed callers get (knfsd's default anonuid/anongid).
pub const NOBODY: u32 = 65_534;

/// How client identities map to the identity the server acts with (knfsd's options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Squash {
    /// Every caller as itself, root included (`--no-root-squash`).
    None,
    /// uid 0 → 65534 and gid 0 → 65534, in the groups too (`root_squash`, the binary's
    /// default, as with knfsd).
    Root,
    /// Every caller → this `(uid, gid)` with no other groups (`--squash UID:GID`,
    /// knfsd's `all_squash` with anonuid/anongid).
    All(u32, u32),
    /// `root_squash` to another anonymous identity (an exports file's `anonuid` and
    /// `anongid`): uid 0 → the first, gid 0 → the second (groups too). [`Squash::Root`]
    /// is this with 65534 for both.
    RootTo(u32, u32),
}

/// Who is calling, from the AUTH_SYS credential (AUTH_NONE: nobody), after squashing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    pub gids: Vec<u32>,
}

impl Caller {
    pub fn nobody() -> Caller {
        Caller {
            uid: NOBODY,
            gid: NOBODY,
            gids: Vec::new(),
        }
    }

    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.gids.contains(&gid)
    }

    /// The identity to act with under `squash`.
    pub fn squashed(self, squash: Squash) -> Caller {
        match squash {
            Squash::None => self,
            Squash::All(uid, gid) => Caller {
                uid,
                gid,
                gids: Vec::new(),
            },
            Squash::Root => self.squashed(Squash::RootTo(NOBODY, NOBODY)),
            Squash::RootTo(anon_uid, anon_gid) => {
                let root = |id: u32, anon: u32| if id == 0 { anon } else { id };
                Caller {
                    uid: root(self.uid, anon_uid),
                    gid: root(self.gid, anon_gid),
                    gids: self.gids.into_iter().map(|g| root(g, anon_gid)).collect(),
                }
            }
        }
    }

    /// Whether this caller may READ a file with this owner and mode, as knfsd decides
    /// it: root (unsquashed) and the owner always (the owner override: a client that
    /// opened its own file before a chmod reads through that open), else the class's
    /// read bit — or its execute bit, since running a program over NFS is reading it
    /// (knfsd's "read access to binaries even when mode 111").
    pub fn may_read(&self, uid: u32, gid: u32, mode: u32) -> bool {
        if self.uid == 0 || self.uid == uid {
            return true;
        }
        let bits = if self.in_group(gid) {
            (mode >> 3) & 0o7
        } else {
            mode & 0o7
        };
        bits & 0o5 != 0
    }

    /// Whether this caller may `want` on a directory with this owner and mode, where the
    /// mode bits alone decide it as the kernel's `generic_permission` would (knfsd's
    /// `nfsd_permission` for a directory: no owner override): root (unsquashed: the
    /// kernel's CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH) always; the owner by the owner
    /// bits (a POSIX ACL's owner entry is those bits); anyone else by the group or other
    /// bits when the group class is empty — the kernel consults an ACL only when it is
    /// not. `None`: an ACL may decide, so the kernel must be asked as the caller.
    pub fn dir_access_by_mode(&self, uid: u32, gid: u32, mode: u32, want: Access) -> Option<bool> {
        let want = want.bits();
        if self.uid == 0 {
            return Some(true);
        }
        if self.uid == uid {
            return Some((mode >> 6) & want == want);
        }
        if mode & 0o070 != 0 {
            return None;
        }
        let bits = if self.in_group(gid) {
            (mode >> 3) & 0o7
        } else {
            mode & 0o7
        };
        Some(bits & want == want)
    }

    /// Whether this caller may write an object with this owner and mode, by the mode
    /// bits, with knfsd's owner override: the owner may always write its own file (a
    /// client that opened a file it created 0444 writes through that open, and the
    /// client checked the open itself). Root (unsquashed) may write anything.
    pub fn may_write(&self, uid: u32, gid: u32, mode: u32) -> bool {
        if self.uid == 0 || self.uid == uid {
            return true;
        }
        if self.in_group(gid) {
            mode & 0o020 != 0
        } else {
            mode & 0o002 != 0
        }
    }
}

/// What a call needs of a directory it names a child in or lists: the kernel's
/// `MAY_READ` (4), `MAY_WRITE` (2) and `MAY_EXEC` (1) bits, as knfsd asks them of the
/// directory handle (`NFSD_MAY_EXEC` to look a name up, `NFSD_MAY_READ` to list,
/// `NFSD_MAY_CREATE`/`NFSD_MAY_REMOVE` — write and search — to add or remove a name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access(u32);

impl Access {
    /// Search (x): LOOKUP, LOOKUPP, OPEN by name, SECINFO, a listing's attributes.
    pub const SEARCH: Access = Access(1);
    /// Read (r): READDIR, READDIRPLUS.
    pub const LIST: Access = Access(4);
    /// Write and search (wx): a name made, removed or renamed in the directory.
    pub const CHANGE: Access = Access(3);

    /// The `R_OK | W_OK | X_OK` bits (equal to the kernel's `MAY_*`).
    pub fn bits(self) -> u32 {
        self.0
    }
}

thread_local! {
    /// The caller of the call this thread is answering (set by [`Scope`]).
    static CURRENT: RefCell<Option<Caller>> = const { RefCell::new(None) };
}

/// The caller of the call being answered on this thread, while it lives.
pub struct Scope {
    previous: Option<Caller>,
}

impl Scope {
    pub fn enter(caller: Caller) -> Scope {
        let previous = CURRENT.with(|c| c.replace(Some(caller)));
        Scope { previous }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

/// The caller of the call being answered on this thread, if any.
pub fn current() -> Option<Caller> {
    CURRENT.with(|c| c.borrow().clone())
}

/// `f` of the caller of the call being answered on this thread (no copy), if any.
pub fn with_current<R>(f: impl FnOnce(&Caller) -> R) -> Option<R> {
    CURRENT.with(|c| c.borrow().as_ref().map(f))
}

/// Why this process cannot act as its callers.
#[derive(Debug, thiserror::Error)]
pub enum Unable {
    #[error(
        "running as uid {0}, not root (file-system identity switching needs euid 0 \
         and CAP_SETUID, CAP_SETGID, CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER)"
    )]
    NotRoot(u32),
    #[error("cannot read capabilities")]
    Capabilities(#[source] std::io::Error),
    #[error("missing {}", .0.join(", "))]
    Missing(Vec<&'static str>),
    #[error("setgroups")]
    SetGroups(#[source] std::io::Error),
    #[error("setfsuid did not take (saw {seen}, then {back})")]
    NotTaken { seen: u32, back: u32 },
}

/// Whether this process can act as its callers, and why not when it cannot (probed
/// once).
pub fn capability() -> &'static Result<(), Unable> {
    static PROBED: OnceLock<Result<(), Unable>> = OnceLock::new();
    PROBED.get_or_init(probe)
}

/// The server's own identity, restored after every switched call.
struct Own {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
}

fn own() -> &'static Own {
    static OWN: OnceLock<Own> = OnceLock::new();
    OWN.get_or_init(|| {
        // SAFETY: plain queries of this process's identity.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let mut groups = vec![0 as libc::gid_t; 1024];
        // SAFETY: the buffer holds `groups.len()` gids.
        let n = unsafe { libc::getgroups(groups.len() as i32, groups.as_mut_ptr()) };
        groups.truncate(n.max(0) as usize);
        Own { uid, gid, groups }
    })
}

/// The capabilities acting as a caller needs (bit numbers, linux/capability.h).
const NEEDED: [(u32, &str); 5] = [
    (0, "CAP_CHOWN"),
    (1, "CAP_DAC_OVERRIDE"),
    (3, "CAP_FOWNER"),
    (6, "CAP_SETGID"),
    (7, "CAP_SETUID"),
];

fn probe() -> Result<(), Unable> {
    let me = own();
    if me.uid != 0 {
        return Err(Unable::NotRoot(me.uid));
    }
    let effective = effective_caps().map_err(Unable::Capabilities)?;
    let missing: Vec<&'static str> = NEEDED
        .iter()
        .filter(|(bit, _)| effective & (1u64 << bit) == 0)
        .map(|(_, name)| *name)
        .collect();
    if !missing.is_empty() {
        return Err(Unable::Missing(missing));
    }
    // A real round trip on this thread, checked: the switch and its undo both work.
    let trial = Caller {
        uid: NOBODY,
        gid: NOBODY,
        gids: vec![NOBODY],
    };
    switch_to(&trial).map_err(Unable::SetGroups)?;
    // SAFETY: setfsuid(-1) changes nothing and returns the current fsuid.
    let seen = unsafe { libc::syscall(libc::SYS_setfsuid, u32::MAX) } as u32;
    restore();
    // SAFETY: as above.
    let back = unsafe { libc::syscall(libc::SYS_setfsuid, u32::MAX) } as u32;
    if seen != NOBODY || back != me.uid {
        return Err(Unable::NotTaken { seen, back });
    }
    Ok(())
}

/// The effective capability set of this thread (`capget`, version 3: 64 bits).
fn effective_caps() -> std::io::Result<u64> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: a version-3 header and the two data words it asks for.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(u64::from(data[0].effective) | (u64::from(data[1].effective) << 32))
}

/// Sets this thread's groups, fsgid and fsuid to the caller's (raw system calls: only
/// this thread changes). The groups first: `setgroups` needs CAP_SETGID, which a
/// non-zero fsuid does not drop, but keep the order knfsd uses.
fn switch_to(c: &Caller) -> std::io::Result<()> {
    let mut groups = Vec::with_capacity(c.gids.len() + 1);
    groups.extend_from_slice(&c.gids);
    if groups.is_empty() {
        groups.push(c.gid);
    }
    // SAFETY: a valid array of `groups.len()` gids.
    let r = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: setfsgid/setfsuid take any id and cannot fail in a way they report.
    unsafe {
        libc::syscall(libc::SYS_setfsgid, c.gid);
        libc::syscall(libc::SYS_setfsuid, c.uid);
    }
    Ok(())
}

/// Back to the server's own identity. A thread that cannot get it back would answer
/// later calls (and run other tasks) as someone else: that is not survivable.
fn restore() {
    let me = own();
    // SAFETY: as in `switch_to`; the fsuid first, which raises the file-system
    // capabilities again.
    unsafe {
        libc::syscall(libc::SYS_setfsuid, me.uid);
        libc::syscall(libc::SYS_setfsgid, me.gid);
    }
    // SAFETY: a valid array of `me.groups.len()` gids.
    let r = unsafe { libc::syscall(libc::SYS_setgroups, me.groups.len(), me.groups.as_ptr()) };
    if r < 0 {
        eprintln!(
            "rustnfs: cannot restore the server's groups ({}): aborting rather than serve \
             as a caller",
            std::io::Error::last_os_error()
        );
        std::process::abort();
    }
}

/// Restores the server's identity when dropped (also while unwinding).
struct Switched;

impl Drop for Switched {
    fn drop(&mut self) {
        restore();
    }
}

/// Runs `f` as the current call's caller when `enabled` (the export acts as callers and
/// the process can) and a caller is set; otherwise runs it as the server. The server's
/// identity is back before this returns.
pub fn act<R>(enabled: bool, f: impl FnOnce() -> R) -> Result<R, std::io::Error> {
    if !enabled {
        return Ok(f());
    }
    let Some(caller) = current() else {
        return Ok(f());
    };
    let me = own();
    if caller.uid == me.uid && caller.gid == me.gid && (me.uid == 0 || caller.gids == me.groups) {
        // Already this identity (an unsquashed root caller of a root server: fsuid 0
        // keeps every capability, so the groups decide nothing): no system call.
        return Ok(f());
    }
    let _back = Switched;
    switch_to(&caller)?;
    Ok(f())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squashing() {
        let root = Caller {
            uid: 0,
            gid: 0,
            gids: vec![0, 5],
        };
        let r = root.clone().squashed(Squash::Root);
        assert_eq!((r.uid, r.gid, r.gids), (NOBODY, NOBODY, vec![NOBODY, 5]));
        assert_eq!(root.clone().squashed(Squash::None), root);
        let a = root.clone().squashed(Squash::All(7, 8));
        assert_eq!((a.uid, a.gid, a.gids.len()), (7, 8, 0));
        let u = Caller {
            uid: 1000,
            gid: 1000,
            gids: vec![],
        };
        assert_eq!(u.clone().squashed(Squash::Root), u);
        // anonuid/anongid: root maps to them, in the groups too; others stay.
        let r = root.clone().squashed(Squash::RootTo(150, 100));
        assert_eq!((r.uid, r.gid, r.gids), (150, 100, vec![100, 5]));
        assert_eq!(u.clone().squashed(Squash::RootTo(150, 100)), u);
    }

    #[test]
    fn write_permission_with_owner_override() {
        let u = Caller {
            uid: 1000,
            gid: 100,
            gids: vec![20],
        };
        assert!(u.may_write(1000, 0, 0o444), "the owner overrides");
        assert!(!u.may_write(0, 0, 0o755));
        assert!(u.may_write(0, 20, 0o775));
        assert!(
            !u.may_write(0, 20, 0o757),
            "the group bits decide for members"
        );
        assert!(u.may_write(0, 0, 0o666));
    }

    #[test]
    fn directory_access_by_the_mode_where_it_decides() {
        let u = Caller {
            uid: 1000,
            gid: 100,
            gids: vec![20],
        };
        let (x, r, wx) = (Access::SEARCH, Access::LIST, Access::CHANGE);
        assert_eq!(u.dir_access_by_mode(0, 0, 0o700, x), Some(false));
        assert_eq!(u.dir_access_by_mode(0, 0, 0o701, x), Some(true));
        assert_eq!(u.dir_access_by_mode(0, 0, 0o701, r), Some(false));
        assert_eq!(u.dir_access_by_mode(0, 0, 0o703, wx), Some(true));
        // The owner's bits decide for the owner, even against it (no override).
        assert_eq!(u.dir_access_by_mode(1000, 0, 0o077, x), Some(false));
        assert_eq!(u.dir_access_by_mode(1000, 0, 0o500, r), Some(true));
        // A member of a group with no bits is refused even where others may.
        assert_eq!(u.dir_access_by_mode(0, 20, 0o705, x), Some(false));
        // Group bits set: an ACL may decide, the kernel is asked.
        assert_eq!(u.dir_access_by_mode(0, 0, 0o750, x), None);
        // Root (unsquashed) searches and lists anything.
        let root = Caller {
            uid: 0,
            gid: 0,
            gids: vec![],
        };
        assert_eq!(root.dir_access_by_mode(5, 5, 0o000, wx), Some(true));
        let squashed = root.squashed(Squash::Root);
        assert_eq!(squashed.dir_access_by_mode(0, 0, 0o700, x), Some(false));
    }

    #[test]
    fn switching_is_per_thread_and_undone() {
        if capability().is_err() {
            eprintln!("SKIP: cannot switch identity here: {:?}", capability());
            return;
        }
        // SAFETY: setfsuid(-1) changes nothing and returns the current fsuid.
        let fsuid = || unsafe { libc::syscall(libc::SYS_setfsuid, u32::MAX) } as u32;
        // A thread started before the switch (one started during it would inherit it,
        // which is why nothing in `act` may start threads).
        let (ask, asked) = std::sync::mpsc::channel::<()>();
        let (tell, told) = std::sync::mpsc::channel();
        let other = std::thread::spawn(move || {
            while asked.recv().is_ok() {
                tell.send(fsuid()).unwrap();
            }
        });
        let _scope = Scope::enter(Caller {
            uid: 4321,
            gid: 4321,
            gids: vec![],
        });
        let (inside, other_seen) = act(true, || {
            ask.send(()).unwrap();
            (fsuid(), told.recv().unwrap())
        })
        .unwrap();
        drop(ask);
        other.join().unwrap();
        let other = other_seen;
        assert_eq!(inside, 4321);
        assert_eq!(other, 0, "another thread keeps the server's identity");
        assert_eq!(fsuid(), 0, "restored after the call");
        let r = std::panic::catch_unwind(|| act(true, || panic!("boom")));
        assert!(r.is_err());
        assert_eq!(fsuid(), 0, "restored after a panic");
    }
}
