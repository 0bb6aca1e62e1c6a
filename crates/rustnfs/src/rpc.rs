//! rustnfs's view of ONC RPC: its programs and versions, and reply status labels for the
//! metrics (each procedure's name is its row's, in `crate::nfs::procs`); the wire format
//! itself lives in the `oncrpc` crate.

/// RPC program numbers.
pub const PMAP_PROG: u32 = 100_000;
pub const NFS_PROG: u32 = 100_003;
pub const MOUNT_PROG: u32 = 100_005;

/// The fixed part of a call this server cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub xid: u32,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    /// Offset of the procedure's arguments within the record.
    pub args: usize,
}

/// The programs and versions this server speaks; anything else gets PROG_UNAVAIL or
/// PROG_MISMATCH before it reaches a procedure.
pub const PROGRAMS: [oncrpc::msg::Program; 3] = [
    oncrpc::msg::Program {
        prog: NFS_PROG,
        low: 3,
        high: 4,
    },
    oncrpc::msg::Program {
        prog: MOUNT_PROG,
        low: 3,
        high: 3,
    },
    oncrpc::msg::Program {
        prog: PMAP_PROG,
        low: 2,
        high: 2,
    },
];

impl From<&oncrpc::CallHeader<'_>> for Call {
    fn from(h: &oncrpc::CallHeader<'_>) -> Self {
        Call {
            xid: h.xid,
            prog: h.prog,
            vers: h.vers,
            proc_: h.proc_,
            args: h.args,
        }
    }
}

/// Parses a call header; `None` when the record is not an RPC call at all.
pub fn parse_call(record: &[u8]) -> Option<Call> {
    oncrpc::msg::decode_call(record)
        .ok()
        .map(|h| Call::from(&h))
}

/// How a reply ended, for the `status` label: `ok`, an nfsstat3/mountstat3 name, or the
/// RPC error (`PROC_UNAVAIL`, `GARBAGE_ARGS`, `AUTH_BADCRED`, ...).
pub fn reply_status(reply: &[u8], prog: u32, proc_: u32) -> &'static str {
    let Ok(h) = oncrpc::msg::decode_reply(reply) else {
        return "BAD_REPLY";
    };
    if let Err(r) = h.status {
        return r.label();
    }
    if proc_ == 0 {
        return "ok";
    }
    let Some(b) = reply.get(h.body..h.body + 4) else {
        return "BAD_REPLY";
    };
    let word = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    match prog {
        NFS_PROG => crate::status::status_label_raw(word),
        MOUNT_PROG if proc_ == 1 => match word {
            0 => "ok",
            1 => "MNT3ERR_PERM",
            2 => "MNT3ERR_NOENT",
            13 => "MNT3ERR_ACCES",
            20 => "MNT3ERR_NOTDIR",
            22 => "MNT3ERR_INVAL",
            _ => "MNT3ERR_OTHER",
        },
        _ => "ok",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(prog: u32, proc_: u32, cred: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        for w in [7u32, 0, 2, prog, 3, proc_, 1, cred.len() as u32] {
            v.extend_from_slice(&w.to_be_bytes());
        }
        v.extend_from_slice(cred);
        v.resize(v.len().div_ceil(4) * 4, 0);
        v.extend_from_slice(&[0; 8]);
        v.extend_from_slice(&42u32.to_be_bytes());
        v
    }

    #[test]
    fn parses_calls_and_rejects_garbage() {
        let rec = call(NFS_PROG, 6, b"abcde");
        let c = parse_call(&rec).unwrap();
        assert_eq!((c.xid, c.prog, c.vers, c.proc_), (7, NFS_PROG, 3, 6));
        assert_eq!(&rec[c.args..], &42u32.to_be_bytes());
        assert!(parse_call(b"garbage!").is_none());
        let mut huge_cred = call(NFS_PROG, 6, b"");
        huge_cred[28..32].copy_from_slice(&10_000u32.to_be_bytes());
        assert!(parse_call(&huge_cred).is_none());
    }

    #[test]
    fn reply_statuses() {
        use oncrpc::msg::{AcceptStat, Rejection, accepted_record};
        let ok = accepted_record(7, AcceptStat::Success, &0u32.to_be_bytes());
        assert_eq!(reply_status(&ok[4..], NFS_PROG, 6), "ok");
        let stale = accepted_record(7, AcceptStat::Success, &70u32.to_be_bytes());
        assert_eq!(reply_status(&stale[4..], NFS_PROG, 1), "NFS3ERR_STALE");
        let unavail = Rejection::ProcUnavail.record(7);
        assert_eq!(reply_status(&unavail[4..], NFS_PROG, 21), "PROC_UNAVAIL");
        assert_eq!(reply_status(b"x", NFS_PROG, 1), "BAD_REPLY");
    }
}
