//! The procedure tables: one row per procedure of each program this server answers,
//! holding what a procedure is — its name (the metrics' `op`), how large its reply can
//! be, its handler, whether it is a slow call, and whether the front door sends its
//! data itself. The guard, the metrics and the dispatcher all read these rows, so a
//! procedure is added or changed in one place (as kernel nfsd keeps one
//! `svc_procedure` row per procedure in fs/nfsd/nfs3proc.c).
//!
//! A handler decodes its own arguments (with the bounded reader in `xdr`); where a
//! reply's bound depends on the arguments (READ, READDIR, READDIRPLUS), the row's bound
//! reads them with that same decoder (`ReadArgs::decode`, `DirArgs::decode`), so a
//! procedure's arguments are spelled once. NFSv4's two procedures have rows for their
//! name and slow-call class; COMPOUND's reply bound and handler are the `nfs4` module's
//! own (its operations are a table of their own there).

use oncrpc::msg::CallHeader;

use super::read::DirArgs;
use super::read3::{self, ReadArgs};
use super::xdr::Args;
use super::{Answer, Caller, Dispatcher, Refused};
use crate::rpc::{MOUNT_PROG, NFS_PROG, PMAP_PROG};

/// Answers one call: decodes the arguments from `Args` and appends the result to the
/// reply (after the RPC header); the `Ok` is the status label for the metrics.
pub(crate) type Handler = fn(&Dispatcher, &Caller, &mut Args<'_>, &mut Vec<u8>) -> Answer;

/// How large a procedure's reply body can be.
#[derive(Clone, Copy)]
pub(crate) enum Reply {
    /// Within [`super::SMALL_REPLY`] whatever the arguments.
    Small,
    /// Bounded by the arguments (the whole argument bytes), read with the handler's
    /// decoder; `None` when they do not decode (the reply is then a small refusal).
    ByArgs(fn(&[u8]) -> Option<usize>),
    /// Bounded by the COMPOUND's operations: `Nfs4::reply_bound`, which
    /// `Dispatcher::reply_bound` asks itself (not through the row).
    Compound,
}

/// Whether a call's file-system work can take long (see `crate::guard`'s slow calls).
#[derive(Clone, Copy)]
pub(crate) enum Slow {
    Never,
    Always,
    /// Decided from the arguments (an NFSv4 COMPOUND holding a WRITE, say).
    ByArgs(fn(&[u8]) -> bool),
}

/// One procedure.
pub(crate) struct Procedure {
    /// The metric name (`READ`, `MNT`, `PMAP_GETPORT`, `NFS4_COMPOUND`).
    pub name: &'static str,
    /// `None` for NFSv4's procedures, answered by `crate::nfs4`.
    pub handler: Option<Handler>,
    pub reply: Reply,
    pub slow: Slow,
    /// Answered by the front door's data path (its data sent from the file, or copied
    /// into a budgeted buffer) rather than by [`Dispatcher`]; the handler serves a call
    /// handed to the dispatcher directly.
    pub data_path: bool,
}

impl Procedure {
    const fn new(name: &'static str, handler: Handler) -> Self {
        Procedure {
            name,
            handler: Some(handler),
            reply: Reply::Small,
            slow: Slow::Never,
            data_path: false,
        }
    }

    const fn slow(mut self) -> Self {
        self.slow = Slow::Always;
        self
    }

    const fn reply(mut self, bound: fn(&[u8]) -> Option<usize>) -> Self {
        self.reply = Reply::ByArgs(bound);
        self
    }

    /// The most bytes of its reply body to a call with `args` (`None`: within the small
    /// reply, or a COMPOUND's, which `nfs4` bounds).
    pub fn reply_bound(&self, args: &[u8]) -> Option<usize> {
        match self.reply {
            Reply::Small | Reply::Compound => None,
            Reply::ByArgs(bound) => bound(args),
        }
    }

    /// Whether a call with `args` is a slow call.
    pub fn is_slow(&self, args: &[u8]) -> bool {
        match self.slow {
            Slow::Never => false,
            Slow::Always => true,
            Slow::ByArgs(slow) => slow(args),
        }
    }
}

/// NFSv3 (RFC 1813), by procedure number.
pub(crate) static NFS3: [Procedure; 22] = [
    Procedure::new("NULL", |_, _, a, _| {
        a.end().map(|()| "ok").map_err(Refused::from)
    }),
    Procedure::new("GETATTR", |d, _, a, out| d.getattr(a, out)),
    Procedure::new("SETATTR", |d, _, a, out| d.setattr(a, out)),
    Procedure::new("LOOKUP", |d, _, a, out| d.lookup(a, out)),
    Procedure::new("ACCESS", |d, caller, a, out| d.access(caller, a, out)),
    Procedure::new("READLINK", |d, _, a, out| d.readlink(a, out)),
    Procedure {
        data_path: true,
        ..Procedure::new("READ", |d, _, a, out| d.read(a, out)).reply(read_bound)
    },
    Procedure::new("WRITE", |d, _, a, out| d.write(a, out)).slow(),
    Procedure::new("CREATE", |d, _, a, out| d.create(a, out)),
    Procedure::new("MKDIR", |d, _, a, out| d.mkdir(a, out)),
    Procedure::new("SYMLINK", |d, _, a, out| d.symlink(a, out)),
    Procedure::new("MKNOD", |d, _, a, out| d.mknod(a, out)),
    Procedure::new("REMOVE", |d, _, a, out| d.remove(a, out, false)),
    Procedure::new("RMDIR", |d, _, a, out| d.remove(a, out, true)),
    Procedure::new("RENAME", |d, _, a, out| d.rename(a, out)),
    Procedure::new("LINK", |d, _, a, out| d.link(a, out)),
    Procedure::new("READDIR", |d, _, a, out| d.readdir(a, out))
        .reply(readdir_bound)
        .slow(),
    Procedure::new("READDIRPLUS", |d, _, a, out| d.readdirplus(a, out))
        .reply(readdirplus_bound)
        .slow(),
    Procedure::new("FSSTAT", |d, _, a, out| d.fsstat(a, out)),
    Procedure::new("FSINFO", |d, _, a, out| d.fsinfo(a, out)),
    Procedure::new("PATHCONF", |d, _, a, out| d.pathconf(a, out)),
    Procedure::new("COMMIT", |d, _, a, out| d.commit(a, out)).slow(),
];

/// NFSv3 READ's row: the procedure the front door answers with its data path.
pub(crate) static READ: &Procedure = &NFS3[6];

/// MOUNT v3 (RFC 1813 appendix I), by procedure number.
pub(crate) static MOUNT3: [Procedure; 6] = [
    Procedure::new("MOUNT_NULL", |d, _, a, _| d.empty_call(a)),
    Procedure::new("MNT", |d, _, a, out| d.mnt(a, out)),
    Procedure::new("DUMP", |d, _, a, out| d.mount_dump(a, out)),
    Procedure::new("UMNT", |d, _, a, _| d.umnt(a)),
    Procedure::new("UMNTALL", |d, _, a, _| d.empty_call(a)),
    Procedure::new("EXPORT", |d, _, a, out| d.mount_export(a, out)),
];

/// The portmapper v2 (RFC 1833), by procedure number.
pub(crate) static PMAP2: [Procedure; 6] = [
    Procedure::new("PMAP_NULL", |d, _, a, _| d.empty_call(a)),
    Procedure::new("PMAP_SET", |d, _, a, out| d.pmap_set(a, out)),
    Procedure::new("PMAP_UNSET", |d, _, a, out| d.pmap_set(a, out)),
    Procedure::new("PMAP_GETPORT", |d, _, a, out| d.pmap_getport(a, out)),
    Procedure::new("PMAP_DUMP", |d, _, a, out| d.pmap_dump(a, out)),
    // CALLIT would run other programs' procedures on a client's behalf: refused.
    Procedure::new("PMAP_CALLIT", |_, _, _, _| Err(Refused::ProcUnavail)),
];

/// NFSv4 (RFC 7530, 8881), by procedure number: NULL, and COMPOUND, slow when it holds
/// a WRITE, COMMIT or READDIR (or does not decode, which costs nothing to answer either
/// way); READs, walks and opens run inline, as v3's do: handing every COMPOUND off the
/// workers held 128 KiB v4 reads at 0.83 x Ganesha v4.
pub(crate) static NFS4: [Procedure; 2] = [
    Procedure {
        name: "NFS4_NULL",
        handler: None,
        reply: Reply::Small,
        slow: Slow::Never,
        data_path: false,
    },
    Procedure {
        name: "NFS4_COMPOUND",
        handler: None,
        reply: Reply::Compound,
        slow: Slow::ByArgs(crate::nfs4::Nfs4::is_slow),
        data_path: false,
    },
];

/// The row of `prog` version `vers` procedure `proc_`, or `None` for a procedure the
/// program does not have (PROC_UNAVAIL) or a program this server does not speak.
pub(crate) fn procedure(prog: u32, vers: u32, proc_: u32) -> Option<&'static Procedure> {
    let table: &'static [Procedure] = match (prog, vers) {
        (NFS_PROG, 4) => &NFS4,
        (NFS_PROG, _) => &NFS3,
        (MOUNT_PROG, _) => &MOUNT3,
        (PMAP_PROG, _) => &PMAP2,
        _ => return None,
    };
    table.get(proc_ as usize)
}

/// The row of `call`.
pub(crate) fn of(call: &CallHeader<'_>) -> Option<&'static Procedure> {
    procedure(call.prog, call.vers, call.proc_)
}

/// The metric name of a call: its row's name; `NFS4_UNKNOWN_PROC` and `UNKNOWN_PROC`
/// for a procedure its program lacks, `OTHER` for another program.
pub(crate) fn call_name(prog: u32, vers: u32, proc_: u32) -> &'static str {
    match (procedure(prog, vers, proc_), prog, vers) {
        (Some(p), ..) => p.name,
        (None, NFS_PROG, 4) => "NFS4_UNKNOWN_PROC",
        (None, NFS_PROG | MOUNT_PROG | PMAP_PROG, _) => "UNKNOWN_PROC",
        (None, ..) => "OTHER",
    }
}

/// READ: its head and the data it may carry (and the data's XDR pad).
fn read_bound(args: &[u8]) -> Option<usize> {
    let r = ReadArgs::decode(&mut Args::new(args)).ok()?;
    Some(read3::ok_head_len() + r.max_data() as usize + 3)
}

fn readdir_bound(args: &[u8]) -> Option<usize> {
    let d = DirArgs::decode(&mut Args::new(args), false).ok()?;
    Some(d.count)
}

fn readdirplus_bound(args: &[u8]) -> Option<usize> {
    let d = DirArgs::decode(&mut Args::new(args), true).ok()?;
    Some(d.count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_name_their_procedures() {
        assert_eq!(READ.name, "READ");
        assert!(READ.data_path);
        let data_paths: Vec<&str> = NFS3
            .iter()
            .chain(&MOUNT3)
            .chain(&PMAP2)
            .chain(&NFS4)
            .filter(|p| p.data_path)
            .map(|p| p.name)
            .collect();
        assert_eq!(data_paths, ["READ"], "only READ leaves by the front door");
        assert_eq!(call_name(NFS_PROG, 3, 16), "READDIR");
        assert_eq!(call_name(NFS_PROG, 3, 22), "UNKNOWN_PROC");
        assert_eq!(call_name(NFS_PROG, 4, 1), "NFS4_COMPOUND");
        assert_eq!(call_name(NFS_PROG, 4, 2), "NFS4_UNKNOWN_PROC");
        assert_eq!(call_name(MOUNT_PROG, 3, 1), "MNT");
        assert_eq!(call_name(PMAP_PROG, 2, 3), "PMAP_GETPORT");
        assert_eq!(call_name(7, 1, 0), "OTHER");
        let slow: Vec<&str> = NFS3
            .iter()
            .filter(|p| p.is_slow(&[]))
            .map(|p| p.name)
            .collect();
        assert_eq!(slow, ["WRITE", "READDIR", "READDIRPLUS", "COMMIT"]);
        assert!(
            NFS3.iter()
                .chain(&MOUNT3)
                .chain(&PMAP2)
                .all(|p| p.handler.is_some())
        );
    }
}
