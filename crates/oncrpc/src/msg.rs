//! Call and reply headers (RFC 5531 §8–9), and every reply a server sends on its own:
//! accepted replies, and the error replies a call must get instead of silence.

/// The only RPC protocol version (RFC 5531 §8).
pub const RPC_VERSION: u32 = 2;
/// `msg_type`.
pub const CALL: u32 = 0;
pub const REPLY: u32 = 1;
/// `reply_stat`.
pub const MSG_ACCEPTED: u32 = 0;
pub const MSG_DENIED: u32 = 1;
/// `reject_stat`.
pub const RPC_MISMATCH: u32 = 0;
pub const AUTH_ERROR: u32 = 1;
/// An `opaque_auth` body is at most this long.
pub const MAX_AUTH_BYTES: usize = 400;
/// Bytes of an accepted reply's header with an AUTH_NONE verifier: xid, REPLY,
/// MSG_ACCEPTED, verifier flavour and length, accept_stat.
pub const ACCEPTED_HEADER_LEN: usize = 6 * 4;

/// Authentication flavours (RFC 5531 §8.2 and the IANA registry).
pub mod flavor {
    pub const AUTH_NONE: u32 = 0;
    pub const AUTH_SYS: u32 = 1;
    pub const AUTH_SHORT: u32 = 2;
    pub const AUTH_DH: u32 = 3;
    pub const RPCSEC_GSS: u32 = 6;
}

/// `accept_stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum AcceptStat {
    Success = 0,
    ProgUnavail = 1,
    ProgMismatch = 2,
    ProcUnavail = 3,
    GarbageArgs = 4,
    SystemErr = 5,
}

/// `auth_stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum AuthStat {
    Ok = 0,
    BadCred = 1,
    RejectedCred = 2,
    BadVerf = 3,
    RejectedVerf = 4,
    TooWeak = 5,
    InvalidResp = 6,
    Failed = 7,
}

impl AuthStat {
    fn from_u32(v: u32) -> Option<AuthStat> {
        use AuthStat::*;
        Some(match v {
            0 => Ok,
            1 => BadCred,
            2 => RejectedCred,
            3 => BadVerf,
            4 => RejectedVerf,
            5 => TooWeak,
            6 => InvalidResp,
            7 => Failed,
            _ => return None,
        })
    }
}

/// Every way a call can fail before its procedure runs (or as its procedure's answer:
/// GARBAGE_ARGS, SYSTEM_ERR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// Denied: the call is not RPC version 2 (we support 2..=2).
    RpcMismatch,
    /// Denied: the credential or verifier is not acceptable.
    Auth(AuthStat),
    ProgUnavail,
    ProgMismatch {
        low: u32,
        high: u32,
    },
    ProcUnavail,
    GarbageArgs,
    SystemErr,
}

impl Rejection {
    /// The metric `status` label (the RFC's names).
    pub fn label(&self) -> &'static str {
        match self {
            Rejection::RpcMismatch => "RPC_MISMATCH",
            Rejection::Auth(AuthStat::BadCred) => "AUTH_BADCRED",
            Rejection::Auth(AuthStat::RejectedCred) => "AUTH_REJECTEDCRED",
            Rejection::Auth(AuthStat::BadVerf) => "AUTH_BADVERF",
            Rejection::Auth(AuthStat::TooWeak) => "AUTH_TOOWEAK",
            Rejection::Auth(_) => "AUTH_ERROR",
            Rejection::ProgUnavail => "PROG_UNAVAIL",
            Rejection::ProgMismatch { .. } => "PROG_MISMATCH",
            Rejection::ProcUnavail => "PROC_UNAVAIL",
            Rejection::GarbageArgs => "GARBAGE_ARGS",
            Rejection::SystemErr => "SYSTEM_ERR",
        }
    }

    /// Appends this reply (no record mark) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>, xid: u32) {
        let words: &[u32] = match *self {
            Rejection::RpcMismatch => &[
                xid,
                REPLY,
                MSG_DENIED,
                RPC_MISMATCH,
                RPC_VERSION,
                RPC_VERSION,
            ],
            Rejection::Auth(s) => &[xid, REPLY, MSG_DENIED, AUTH_ERROR, s as u32],
            Rejection::ProgMismatch { low, high } => {
                accepted(out, xid, AcceptStat::ProgMismatch);
                put(out, &[low, high]);
                return;
            }
            Rejection::ProgUnavail => return accepted(out, xid, AcceptStat::ProgUnavail),
            Rejection::ProcUnavail => return accepted(out, xid, AcceptStat::ProcUnavail),
            Rejection::GarbageArgs => return accepted(out, xid, AcceptStat::GarbageArgs),
            Rejection::SystemErr => return accepted(out, xid, AcceptStat::SystemErr),
        };
        put(out, words);
    }

    /// This reply as a whole record (mark included).
    pub fn record(&self, xid: u32) -> Vec<u8> {
        let mut v = Vec::with_capacity(40);
        let at = crate::record::begin(&mut v);
        self.encode(&mut v, xid);
        crate::record::finish(&mut v, at);
        v
    }
}

fn put(out: &mut Vec<u8>, words: &[u32]) {
    for w in words {
        out.extend_from_slice(&w.to_be_bytes());
    }
}

/// Appends an accepted reply's header (AUTH_NONE verifier) to `out`; the procedure's
/// results follow it.
pub fn accepted(out: &mut Vec<u8>, xid: u32, stat: AcceptStat) {
    put(
        out,
        &[xid, REPLY, MSG_ACCEPTED, flavor::AUTH_NONE, 0, stat as u32],
    );
}

/// An accepted reply with `body` as a whole record (mark included).
pub fn accepted_record(xid: u32, stat: AcceptStat, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + ACCEPTED_HEADER_LEN + body.len());
    let at = crate::record::begin(&mut v);
    accepted(&mut v, xid, stat);
    v.extend_from_slice(body);
    crate::record::finish(&mut v, at);
    v
}

/// A credential or verifier: flavour and body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpaqueAuth<'a> {
    pub flavor: u32,
    pub body: &'a [u8],
}

/// The header of a call, borrowed from its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallHeader<'a> {
    pub xid: u32,
    pub rpcvers: u32,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    pub cred: OpaqueAuth<'a>,
    pub verf: OpaqueAuth<'a>,
    /// Offset of the procedure's arguments in the record.
    pub args: usize,
}

/// A record that is not a well-formed call or reply header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("record too short for an RPC header")]
    Truncated,
    #[error("not an RPC call")]
    NotACall,
    #[error("not an RPC reply")]
    NotAReply,
    /// The header was readable up to an authenticator longer than RFC 5531 allows; the
    /// caller can still be told (AUTH_BADCRED).
    #[error("authenticator of {len} bytes (the limit is 400)")]
    AuthTooLong { xid: u32, len: usize },
}

impl DecodeError {
    /// The reply such a call gets, when it can get one (its xid is known).
    pub fn rejection(&self) -> Option<(u32, Rejection)> {
        match *self {
            DecodeError::AuthTooLong { xid, .. } => Some((xid, Rejection::Auth(AuthStat::BadCred))),
            _ => None,
        }
    }
}

struct Cur<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cur<'a> {
    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self
            .buf
            .get(self.pos..self.pos + 4)
            .ok_or(DecodeError::Truncated)?;
        self.pos += 4;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn opaque(&mut self, max: usize, xid: u32) -> Result<&'a [u8], DecodeError> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(DecodeError::AuthTooLong { xid, len });
        }
        let body = self
            .buf
            .get(self.pos..self.pos + len)
            .ok_or(DecodeError::Truncated)?;
        self.pos += len.div_ceil(4) * 4;
        if self.pos > self.buf.len() {
            return Err(DecodeError::Truncated);
        }
        Ok(body)
    }
    fn auth(&mut self, xid: u32) -> Result<OpaqueAuth<'a>, DecodeError> {
        let flavor = self.u32()?;
        let body = self.opaque(MAX_AUTH_BYTES, xid)?;
        Ok(OpaqueAuth { flavor, body })
    }
}

/// Decodes a call's header.
pub fn decode_call(record: &[u8]) -> Result<CallHeader<'_>, DecodeError> {
    let mut c = Cur {
        buf: record,
        pos: 0,
    };
    let xid = c.u32()?;
    if c.u32()? != CALL {
        return Err(DecodeError::NotACall);
    }
    let rpcvers = c.u32()?;
    let prog = c.u32()?;
    let vers = c.u32()?;
    let proc_ = c.u32()?;
    let cred = c.auth(xid)?;
    let verf = c.auth(xid)?;
    Ok(CallHeader {
        xid,
        rpcvers,
        prog,
        vers,
        proc_,
        cred,
        verf,
        args: c.pos,
    })
}

/// One program a server offers, with the versions it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Program {
    pub prog: u32,
    pub low: u32,
    pub high: u32,
}

impl CallHeader<'_> {
    /// The checks every server makes before running a procedure: RPC version 2, a
    /// credential it accepts (AUTH_NONE, or a well-formed AUTH_SYS) with an AUTH_NONE
    /// verifier, a program it offers at a version it speaks.
    pub fn check(&self, programs: &[Program]) -> Result<(), Rejection> {
        if self.rpcvers != RPC_VERSION {
            return Err(Rejection::RpcMismatch);
        }
        match self.cred.flavor {
            flavor::AUTH_NONE if self.cred.body.is_empty() => {}
            flavor::AUTH_SYS if auth_sys_is_well_formed(self.cred.body) => {}
            flavor::AUTH_NONE | flavor::AUTH_SYS => {
                return Err(Rejection::Auth(AuthStat::BadCred));
            }
            // What libtirpc answers for a flavour it has no handler for.
            _ => return Err(Rejection::Auth(AuthStat::RejectedCred)),
        }
        if self.verf.flavor != flavor::AUTH_NONE || !self.verf.body.is_empty() {
            return Err(Rejection::Auth(AuthStat::BadVerf));
        }
        match programs.iter().find(|p| p.prog == self.prog) {
            None => Err(Rejection::ProgUnavail),
            Some(p) if !(p.low..=p.high).contains(&self.vers) => Err(Rejection::ProgMismatch {
                low: p.low,
                high: p.high,
            }),
            Some(_) => Ok(()),
        }
    }
}

/// An AUTH_SYS body (RFC 5531 appendix A): stamp, machine name (≤ 255 bytes), uid, gid
/// and at most 16 more gids, nothing after them.
pub fn auth_sys_is_well_formed(body: &[u8]) -> bool {
    let mut c = Cur { buf: body, pos: 0 };
    let parse = |c: &mut Cur<'_>| -> Result<bool, DecodeError> {
        c.u32()?;
        c.opaque(255, 0)?;
        c.u32()?;
        c.u32()?;
        let n = c.u32()?;
        if n > 16 {
            return Ok(false);
        }
        for _ in 0..n {
            c.u32()?;
        }
        Ok(c.pos == c.buf.len())
    };
    parse(&mut c).unwrap_or(false)
}

/// The header of a reply, borrowed from its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHeader {
    pub xid: u32,
    /// `Ok` when accepted with SUCCESS; the results start at `body`.
    pub status: Result<(), Rejection>,
    pub body: usize,
}

/// Decodes a reply's header.
pub fn decode_reply(record: &[u8]) -> Result<ReplyHeader, DecodeError> {
    let mut c = Cur {
        buf: record,
        pos: 0,
    };
    let xid = c.u32()?;
    if c.u32()? != REPLY {
        return Err(DecodeError::NotAReply);
    }
    let status = match c.u32()? {
        MSG_ACCEPTED => {
            c.auth(xid)?;
            match c.u32()? {
                0 => Ok(()),
                1 => Err(Rejection::ProgUnavail),
                2 => {
                    let low = c.u32()?;
                    let high = c.u32()?;
                    Err(Rejection::ProgMismatch { low, high })
                }
                3 => Err(Rejection::ProcUnavail),
                4 => Err(Rejection::GarbageArgs),
                5 => Err(Rejection::SystemErr),
                _ => return Err(DecodeError::NotAReply),
            }
        }
        MSG_DENIED => match c.u32()? {
            RPC_MISMATCH => {
                c.u32()?;
                c.u32()?;
                Err(Rejection::RpcMismatch)
            }
            AUTH_ERROR => Err(Rejection::Auth(
                AuthStat::from_u32(c.u32()?).ok_or(DecodeError::NotAReply)?,
            )),
            _ => return Err(DecodeError::NotAReply),
        },
        _ => return Err(DecodeError::NotAReply),
    };
    Ok(ReplyHeader {
        xid,
        status,
        body: c.pos,
    })
}

/// Appends a call's header (AUTH_NONE verifier) to `out`; the arguments follow it.
pub fn encode_call(
    out: &mut Vec<u8>,
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    cred: OpaqueAuth<'_>,
) {
    put(
        out,
        &[xid, CALL, RPC_VERSION, prog, vers, proc_, cred.flavor],
    );
    put(out, &[cred.body.len() as u32]);
    out.extend_from_slice(cred.body);
    out.resize(out.len() + (4 - cred.body.len() % 4) % 4, 0);
    put(out, &[flavor::AUTH_NONE, 0]);
}

#[cfg(test)]
mod tests {
    use super::*;

    const NFS: Program = Program {
        prog: 100_003,
        low: 3,
        high: 3,
    };

    fn auth_sys(name: &[u8], gids: u32) -> Vec<u8> {
        let mut v = Vec::new();
        put(&mut v, &[1, name.len() as u32]);
        v.extend_from_slice(name);
        v.resize(v.len().div_ceil(4) * 4, 0);
        put(&mut v, &[0, 0, gids]);
        for g in 0..gids {
            put(&mut v, &[g]);
        }
        v
    }

    fn call(cred: OpaqueAuth<'_>, prog: u32, vers: u32) -> Vec<u8> {
        let mut v = Vec::new();
        encode_call(&mut v, 9, prog, vers, 1, cred);
        v.extend_from_slice(b"args");
        v
    }

    #[test]
    fn calls_round_trip_and_are_checked() {
        let cred = auth_sys(b"host", 2);
        let sys = OpaqueAuth {
            flavor: flavor::AUTH_SYS,
            body: &cred,
        };
        let rec = call(sys, 100_003, 3);
        let c = decode_call(&rec).unwrap();
        assert_eq!((c.xid, c.prog, c.vers, c.proc_), (9, 100_003, 3, 1));
        assert_eq!(&rec[c.args..], b"args");
        assert_eq!(c.check(&[NFS]), Ok(()));
        let rec = call(sys, 100_003, 4);
        assert_eq!(
            decode_call(&rec).unwrap().check(&[NFS]),
            Err(Rejection::ProgMismatch { low: 3, high: 3 })
        );
        let rec = call(sys, 100_099, 1);
        assert_eq!(
            decode_call(&rec).unwrap().check(&[NFS]),
            Err(Rejection::ProgUnavail)
        );
        let gss = OpaqueAuth {
            flavor: flavor::RPCSEC_GSS,
            body: b"tokn",
        };
        assert_eq!(
            decode_call(&call(gss, 100_003, 3)).unwrap().check(&[NFS]),
            Err(Rejection::Auth(AuthStat::RejectedCred))
        );
        let bad = auth_sys(b"host", 17);
        let bad = OpaqueAuth {
            flavor: flavor::AUTH_SYS,
            body: &bad,
        };
        assert_eq!(
            decode_call(&call(bad, 100_003, 3)).unwrap().check(&[NFS]),
            Err(Rejection::Auth(AuthStat::BadCred))
        );
        let mut v2 = call(sys, 100_003, 3);
        v2[8..12].copy_from_slice(&3u32.to_be_bytes());
        assert_eq!(
            decode_call(&v2).unwrap().check(&[NFS]),
            Err(Rejection::RpcMismatch)
        );
    }

    #[test]
    fn garbage_and_oversized_auth() {
        assert_eq!(decode_call(b"short"), Err(DecodeError::Truncated));
        let mut reply = Vec::new();
        accepted(&mut reply, 1, AcceptStat::Success);
        assert_eq!(decode_call(&reply), Err(DecodeError::NotACall));
        let mut v = Vec::new();
        put(&mut v, &[5, CALL, 2, 100_003, 3, 0, 1, 10_000]);
        let e = decode_call(&v).unwrap_err();
        assert_eq!(e.rejection(), Some((5, Rejection::Auth(AuthStat::BadCred))));
    }

    #[test]
    fn every_reply_decodes_as_encoded() {
        let all = [
            Rejection::RpcMismatch,
            Rejection::Auth(AuthStat::BadCred),
            Rejection::Auth(AuthStat::RejectedCred),
            Rejection::ProgUnavail,
            Rejection::ProgMismatch { low: 3, high: 3 },
            Rejection::ProcUnavail,
            Rejection::GarbageArgs,
            Rejection::SystemErr,
        ];
        for r in all {
            let rec = r.record(77);
            let h = decode_reply(&rec[4..]).unwrap();
            assert_eq!((h.xid, h.status), (77, Err(r)), "{}", r.label());
            assert_eq!(h.body, rec.len() - 4);
        }
        let ok = accepted_record(3, AcceptStat::Success, b"body");
        let h = decode_reply(&ok[4..]).unwrap();
        assert_eq!((h.xid, h.status), (3, Ok(())));
        assert_eq!(&ok[4 + h.body..], b"body");
        assert_eq!(h.body, ACCEPTED_HEADER_LEN);
    }
}
