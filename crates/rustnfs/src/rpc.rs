//! Just enough ONC RPC (RFC 5531) to guard and time calls: record marks, call and reply
//! headers, procedure names, and the few replies the guard writes itself.

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

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn u32(&mut self) -> Option<u32> {
        let b = self.buf.get(self.pos..self.pos + 4)?;
        self.pos += 4;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn opaque_auth(&mut self) -> Option<()> {
        let _flavor = self.u32()?;
        let len = self.u32()? as usize;
        // RFC 5531: an opaque_auth body is at most 400 bytes.
        if len > 400 {
            return None;
        }
        let padded = len.div_ceil(4) * 4;
        self.buf.get(self.pos..self.pos + padded)?;
        self.pos += padded;
        Some(())
    }
}

/// Parses a call header; `None` when the record is not an RPC call at all.
pub fn parse_call(record: &[u8]) -> Option<Call> {
    let mut r = Reader {
        buf: record,
        pos: 0,
    };
    let xid = r.u32()?;
    if r.u32()? != 0 {
        return None; // not a CALL
    }
    let _rpcvers = r.u32()?; // the engine answers RPC_MISMATCH itself
    let prog = r.u32()?;
    let vers = r.u32()?;
    let proc_ = r.u32()?;
    r.opaque_auth()?;
    r.opaque_auth()?;
    Some(Call {
        xid,
        prog,
        vers,
        proc_,
        args: r.pos,
    })
}

/// The metric name of a procedure (`READ`, `MNT`, `PMAP_GETPORT`).
pub fn proc_name(prog: u32, proc_: u32) -> &'static str {
    const NFS: [&str; 22] = [
        "NULL",
        "GETATTR",
        "SETATTR",
        "LOOKUP",
        "ACCESS",
        "READLINK",
        "READ",
        "WRITE",
        "CREATE",
        "MKDIR",
        "SYMLINK",
        "MKNOD",
        "REMOVE",
        "RMDIR",
        "RENAME",
        "LINK",
        "READDIR",
        "READDIRPLUS",
        "FSSTAT",
        "FSINFO",
        "PATHCONF",
        "COMMIT",
    ];
    const MOUNT: [&str; 6] = ["MOUNT_NULL", "MNT", "DUMP", "UMNT", "UMNTALL", "EXPORT"];
    const PMAP: [&str; 6] = [
        "PMAP_NULL",
        "PMAP_SET",
        "PMAP_UNSET",
        "PMAP_GETPORT",
        "PMAP_DUMP",
        "PMAP_CALLIT",
    ];
    let table: &[&'static str] = match prog {
        NFS_PROG => &NFS,
        MOUNT_PROG => &MOUNT,
        PMAP_PROG => &PMAP,
        _ => return "OTHER",
    };
    table.get(proc_ as usize).copied().unwrap_or("UNKNOWN_PROC")
}

/// How a reply ended, for the `status` label: `ok`, an nfsstat3/mountstat3 name, an RPC
/// accept status (`PROC_UNAVAIL`, `GARBAGE_ARGS`, ...) or `DENIED`.
pub fn reply_status(reply: &[u8], prog: u32, proc_: u32) -> &'static str {
    let mut r = Reader { buf: reply, pos: 0 };
    let parse = |r: &mut Reader<'_>| -> Option<&'static str> {
        let _xid = r.u32()?;
        if r.u32()? != 1 {
            return Some("BAD_REPLY");
        }
        if r.u32()? != 0 {
            return Some("DENIED");
        }
        r.opaque_auth()?;
        let accept = r.u32()?;
        let name = match accept {
            0 => None,
            1 => Some("PROG_UNAVAIL"),
            2 => Some("PROG_MISMATCH"),
            3 => Some("PROC_UNAVAIL"),
            4 => Some("GARBAGE_ARGS"),
            _ => Some("SYSTEM_ERR"),
        };
        if let Some(n) = name {
            return Some(n);
        }
        if proc_ == 0 {
            return Some("ok");
        }
        match prog {
            NFS_PROG => Some(crate::error::status_label_raw(r.u32()?)),
            MOUNT_PROG if proc_ == 1 => Some(match r.u32()? {
                0 => "ok",
                1 => "MNT3ERR_PERM",
                2 => "MNT3ERR_NOENT",
                13 => "MNT3ERR_ACCES",
                20 => "MNT3ERR_NOTDIR",
                22 => "MNT3ERR_INVAL",
                _ => "MNT3ERR_OTHER",
            }),
            _ => Some("ok"),
        }
    };
    parse(&mut r).unwrap_or("BAD_REPLY")
}

/// A whole record (mark + accepted SUCCESS reply header + `body`).
pub fn accepted_reply(xid: u32, accept_stat: u32, body: &[u8]) -> Vec<u8> {
    let len = 24 + body.len();
    let mut v = Vec::with_capacity(4 + len);
    v.extend_from_slice(&(0x8000_0000u32 | len as u32).to_be_bytes());
    for word in [xid, 1, 0, 0, 0, accept_stat] {
        v.extend_from_slice(&word.to_be_bytes());
    }
    v.extend_from_slice(body);
    v
}

/// The record mark for a single last fragment of `len` bytes.
pub fn record_mark(len: usize) -> [u8; 4] {
    (0x8000_0000u32 | len as u32).to_be_bytes()
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
        assert_eq!(proc_name(c.prog, c.proc_), "READ");
        assert!(parse_call(b"garbage!").is_none());
        let mut huge_cred = call(NFS_PROG, 6, b"");
        huge_cred[28..32].copy_from_slice(&10_000u32.to_be_bytes());
        assert!(parse_call(&huge_cred).is_none());
    }

    #[test]
    fn reply_statuses() {
        let ok = accepted_reply(7, 0, &0u32.to_be_bytes());
        assert_eq!(reply_status(&ok[4..], NFS_PROG, 6), "ok");
        let stale = accepted_reply(7, 0, &70u32.to_be_bytes());
        assert_eq!(reply_status(&stale[4..], NFS_PROG, 1), "NFS3ERR_STALE");
        let unavail = accepted_reply(7, 3, &[]);
        assert_eq!(reply_status(&unavail[4..], NFS_PROG, 21), "PROC_UNAVAIL");
        assert_eq!(reply_status(b"x", NFS_PROG, 1), "BAD_REPLY");
    }
}
