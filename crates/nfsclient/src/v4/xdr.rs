//! The XDR of NFSv4 COMPOUNDs as this client speaks them: [`Ops`] builds a request's
//! operations, [`Reply`] reads a reply with every length checked against what the
//! record holds (a short or garbled reply is an error, never a panic or an allocation
//! sized by the server), and the operation numbers and statuses used.

use std::fmt;

/// Operation numbers (RFC 7530, RFC 8881, RFC 7862 `nfs_opnum4`) this client sends.
pub(crate) mod op {
    pub const CLOSE: u32 = 4;
    pub const COMMIT: u32 = 5;
    pub const CREATE: u32 = 6;
    pub const GETATTR: u32 = 9;
    pub const GETFH: u32 = 10;
    pub const LOOKUP: u32 = 15;
    pub const OPEN: u32 = 18;
    pub const OPEN_CONFIRM: u32 = 20;
    pub const PUTFH: u32 = 22;
    pub const PUTROOTFH: u32 = 24;
    pub const READ: u32 = 25;
    pub const READDIR: u32 = 26;
    pub const READLINK: u32 = 27;
    pub const REMOVE: u32 = 28;
    pub const SETCLIENTID: u32 = 35;
    pub const SETCLIENTID_CONFIRM: u32 = 36;
    pub const WRITE: u32 = 38;
    pub const EXCHANGE_ID: u32 = 42;
    pub const CREATE_SESSION: u32 = 43;
    pub const DESTROY_SESSION: u32 = 44;
    pub const SEQUENCE: u32 = 53;
    pub const DESTROY_CLIENTID: u32 = 57;
    pub const RECLAIM_COMPLETE: u32 = 58;
}

/// The NFSv4 statuses this client acts on (RFC 7530 / RFC 8881 `nfsstat4`).
pub(crate) mod status {
    pub const OK: u32 = 0;
    pub const DELAY: u32 = 10008;
    pub const STALE_CLIENTID: u32 = 10022;
    pub const MINOR_VERS_MISMATCH: u32 = 10021;
    pub const BADSESSION: u32 = 10052;
    pub const DEADSESSION: u32 = 10078;
    pub const SEQ_MISORDERED: u32 = 10063;
    pub const RETRY_UNCACHED_REP: u32 = 10068;
    pub const SEQ_FALSE_RETRY: u32 = 10076;
    pub const COMPLETE_ALREADY: u32 = 10054;
}

/// NFS4ERR_MINOR_VERS_MISMATCH: the server does not serve the COMPOUND's minor version.
pub const MINOR_VERS_MISMATCH: u32 = status::MINOR_VERS_MISMATCH;

/// An NFSv4 status, named as RFC 7530/8881 name it where this client knows the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status4(pub u32);

impl fmt::Display for Status4 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.0 {
            0 => "NFS4_OK",
            1 => "NFS4ERR_PERM",
            2 => "NFS4ERR_NOENT",
            5 => "NFS4ERR_IO",
            13 => "NFS4ERR_ACCES",
            17 => "NFS4ERR_EXIST",
            20 => "NFS4ERR_NOTDIR",
            21 => "NFS4ERR_ISDIR",
            22 => "NFS4ERR_INVAL",
            28 => "NFS4ERR_NOSPC",
            30 => "NFS4ERR_ROFS",
            63 => "NFS4ERR_NAMETOOLONG",
            66 => "NFS4ERR_NOTEMPTY",
            70 => "NFS4ERR_STALE",
            10001 => "NFS4ERR_BADHANDLE",
            10004 => "NFS4ERR_NOTSUPP",
            10006 => "NFS4ERR_SERVERFAULT",
            10008 => "NFS4ERR_DELAY",
            10011 => "NFS4ERR_EXPIRED",
            10013 => "NFS4ERR_GRACE",
            10020 => "NFS4ERR_NOFILEHANDLE",
            10021 => "NFS4ERR_MINOR_VERS_MISMATCH",
            10022 => "NFS4ERR_STALE_CLIENTID",
            10025 => "NFS4ERR_BAD_STATEID",
            10036 => "NFS4ERR_BADXDR",
            10038 => "NFS4ERR_OP_ILLEGAL",
            10052 => "NFS4ERR_BADSESSION",
            10063 => "NFS4ERR_SEQ_MISORDERED",
            10071 => "NFS4ERR_OP_NOT_IN_SESSION",
            10078 => "NFS4ERR_DEADSESSION",
            n => return write!(f, "NFSv4 status {n}"),
        };
        f.write_str(name)
    }
}

/// Attribute numbers (RFC 7530 §5) this client asks for.
pub(crate) mod attr {
    pub const TYPE: u32 = 1;
    pub const SIZE: u32 = 4;
    pub const FILEID: u32 = 20;
    pub const MAXREAD: u32 = 30;
    pub const MAXWRITE: u32 = 31;
    pub const MODE: u32 = 33;
    pub const OWNER: u32 = 36;
    pub const OWNER_GROUP: u32 = 37;
    pub const TIME_METADATA: u32 = 52;
    pub const TIME_MODIFY: u32 = 53;
}

/// A stateid: sequence id and the server's 12 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Stateid {
    pub seqid: u32,
    pub other: [u8; 12],
}

impl Stateid {
    /// The anonymous stateid (all zeros, RFC 7530 §9.1.4.3): I/O without an OPEN.
    pub const ANONYMOUS: Stateid = Stateid {
        seqid: 0,
        other: [0; 12],
    };
}

/// The operations of one COMPOUND, encoded as they are added.
#[derive(Debug, Default)]
pub(crate) struct Ops {
    pub buf: Vec<u8>,
    pub n: u32,
}

impl Ops {
    /// Starts the next operation.
    pub fn op(&mut self, code: u32) -> &mut Self {
        self.n += 1;
        self.u32(code)
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    /// Fixed-length bytes, padded to four.
    pub fn fixed(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self.buf.resize(self.buf.len().next_multiple_of(4), 0);
        self
    }
    /// Variable-length bytes: length, bytes, padding.
    pub fn opaque(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32).fixed(b)
    }
    pub fn stateid(&mut self, s: &Stateid) -> &mut Self {
        self.u32(s.seqid).fixed(&s.other)
    }
    /// An attribute bitmap of the attributes numbered in `attrs`.
    pub fn bitmap(&mut self, attrs: &[u32]) -> &mut Self {
        let words = attrs.iter().map(|a| a / 32 + 1).max().unwrap_or(0);
        self.u32(words);
        for w in 0..words {
            let word = attrs
                .iter()
                .filter(|a| *a / 32 == w)
                .fold(0u32, |m, a| m | 1 << (a % 32));
            self.u32(word);
        }
        self
    }
}

/// Why a reply could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    /// The reply ended before a field it must hold.
    #[error("NFSv4 reply ends inside {0}")]
    Short(&'static str),
    /// A field holds a value this client cannot accept.
    #[error("NFSv4 reply has a bad {0}")]
    Bad(&'static str),
    /// The reply answers another operation than the one sent at its place.
    #[error("NFSv4 reply answers operation {got} where {want} was sent")]
    WrongOp { got: u32, want: u32 },
}

/// A COMPOUND reply being read, from after the RPC header.
#[derive(Debug)]
pub(crate) struct Reply<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Reply<'a> {
    pub fn new(buf: &'a [u8], pos: usize) -> Reply<'a> {
        Reply { buf, pos }
    }

    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ReplyError> {
        let end = self.pos.checked_add(n).ok_or(ReplyError::Short(what))?;
        let b = self.buf.get(self.pos..end).ok_or(ReplyError::Short(what))?;
        self.pos = end;
        Ok(b)
    }
    pub fn u32(&mut self, what: &'static str) -> Result<u32, ReplyError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self, what: &'static str) -> Result<u64, ReplyError> {
        Ok((u64::from(self.u32(what)?) << 32) | u64::from(self.u32(what)?))
    }
    pub fn bool(&mut self, what: &'static str) -> Result<bool, ReplyError> {
        match self.u32(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(ReplyError::Bad(what)),
        }
    }
    /// Variable-length bytes of at most `max`, borrowed from the record.
    pub fn opaque(&mut self, max: usize, what: &'static str) -> Result<&'a [u8], ReplyError> {
        let n = self.u32(what)? as usize;
        if n > max {
            return Err(ReplyError::Bad(what));
        }
        Ok(&self.take(n.next_multiple_of(4), what)?[..n])
    }
    pub fn fixed<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ReplyError> {
        let b = self.take(N.next_multiple_of(4), what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&b[..N]);
        Ok(out)
    }
    pub fn stateid(&mut self) -> Result<Stateid, ReplyError> {
        Ok(Stateid {
            seqid: self.u32("stateid")?,
            other: self.fixed("stateid")?,
        })
    }
    /// An attribute bitmap (at most four words are meaningful; more is garbage).
    pub fn bitmap(&mut self) -> Result<u128, ReplyError> {
        let n = self.u32("bitmap")?;
        if n > 8 {
            return Err(ReplyError::Bad("bitmap length"));
        }
        let mut bits = 0u128;
        for w in 0..n {
            let word = self.u32("bitmap")?;
            if w < 4 {
                bits |= u128::from(word) << (32 * w);
            } else if word != 0 {
                return Err(ReplyError::Bad("bitmap (attribute beyond 127)"));
            }
        }
        Ok(bits)
    }
    /// The next operation's number and status; the number must be `want`.
    pub fn op(&mut self, want: u32) -> Result<u32, ReplyError> {
        let got = self.u32("operation number")?;
        if got != want {
            return Err(ReplyError::WrongOp { got, want });
        }
        self.u32("operation status")
    }
    pub fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmaps_encode_by_word() {
        let mut o = Ops::default();
        o.bitmap(&[attr::TYPE, attr::SIZE, attr::MODE, attr::TIME_MODIFY]);
        let words: Vec<u32> = o
            .buf
            .chunks(4)
            .map(|c| u32::from_be_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(words, [2, (1 << 1) | (1 << 4), (1 << 1) | (1 << 21)]);
        let mut r = Reply::new(&o.buf, 0);
        let bits = r.bitmap().unwrap();
        assert_eq!(bits, (1 << 1) | (1 << 4) | (1 << 33) | (1 << 53));
        assert!(r.at_end());
    }

    #[test]
    fn short_and_oversized_fields_are_errors() {
        let buf = [0, 0, 0, 9, 1, 2];
        assert_eq!(
            Reply::new(&buf, 0).opaque(8, "name"),
            Err(ReplyError::Bad("name"))
        );
        assert_eq!(
            Reply::new(&buf, 0).opaque(16, "name"),
            Err(ReplyError::Short("name"))
        );
        assert_eq!(Reply::new(&buf, 4).u32("x"), Err(ReplyError::Short("x")));
        let two = [0, 0, 0, 2, 0, 0, 0, 0];
        assert!(Reply::new(&two, 0).bool("eof").is_err());
        let wrong = [0, 0, 0, 25, 0, 0, 0, 0];
        assert_eq!(
            Reply::new(&wrong, 0).op(op::PUTFH),
            Err(ReplyError::WrongOp { got: 25, want: 22 })
        );
    }
}
