//! Bounded XDR for NFSv4: a cursor that borrows every variable-length field from the
//! record after checking it against a limit and against what the record really holds,
//! and the few packing helpers replies need.
//!
//! Why our own: the `nfs3_types` crate has no NFSv4 types, and the NFSv4 crates we could
//! find either decode with allocations sized by the client's length words (one 4-byte
//! length asks for 4 GiB, the same flaw `nfs/xdr.rs` documents for v3) or pull in a
//! code generator for the whole RFC 7531 XDR file, most of which we do not serve. The
//! part of NFSv4.0 a COMPOUND needs is a few dozen argument shapes; decoding them by
//! hand keeps every length checked before use, and nothing decoded here allocates.

/// The arguments do not decode: the operation is answered `NFS4ERR_BADXDR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadXdr;

pub type Decoded<T> = Result<T, BadXdr>;

/// Longest file handle (RFC 7530 `NFS4_FHSIZE`).
pub const FH_MAX: usize = 128;
/// Longest owner, client id and other protocol opaques (RFC 7530 `NFS4_OPAQUE_LIMIT`).
pub const OPAQUE_LIMIT: usize = 1024;
/// Most words an attribute bitmap may have here: NFSv4.0 defines 56 attributes (two
/// words), 4.1 and 4.2 three. Longer bitmaps are garbage, not a reason to loop.
pub const BITMAP_WORDS_MAX: u32 = 8;

/// An attribute bitmap: the first four words (every attribute any minor version
/// defines), and whether any bit beyond them was set (an attribute this server cannot
/// know).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bitmap {
    pub bits: u128,
    pub beyond: bool,
}

impl Bitmap {
    pub fn has(&self, attr: u32) -> bool {
        attr < 128 && self.bits & (1u128 << attr) != 0
    }
}

/// A cursor over one COMPOUND's arguments.
pub struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Dec<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Dec { buf, pos: 0 }
    }

    pub fn u32(&mut self) -> Decoded<u32> {
        let b = self.buf.get(self.pos..self.pos + 4).ok_or(BadXdr)?;
        self.pos += 4;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Decoded<u64> {
        Ok((u64::from(self.u32()?) << 32) | u64::from(self.u32()?))
    }

    /// An XDR bool: 0 or 1, anything else is garbage.
    pub fn bool(&mut self) -> Decoded<bool> {
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(BadXdr),
        }
    }

    /// `N` fixed bytes (a verifier, a stateid's `other`).
    pub fn fixed<const N: usize>(&mut self) -> Decoded<[u8; N]> {
        let padded = N.div_ceil(4) * 4;
        let b = self.buf.get(self.pos..self.pos + padded).ok_or(BadXdr)?;
        self.pos += padded;
        let mut out = [0u8; N];
        out.copy_from_slice(&b[..N]);
        Ok(out)
    }

    /// A variable-length opaque or string of at most `max` bytes, borrowed from the
    /// record (the record bounds it whatever `max` says).
    pub fn opaque(&mut self, max: usize) -> Decoded<&'a [u8]> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(BadXdr);
        }
        let padded = len.checked_add(3).ok_or(BadXdr)? & !3;
        let end = self.pos.checked_add(padded).ok_or(BadXdr)?;
        if end > self.buf.len() {
            return Err(BadXdr);
        }
        let data = &self.buf[self.pos..self.pos + len];
        self.pos = end;
        Ok(data)
    }

    /// A name or path (`component4`, `linktext4`): any length the record holds; the
    /// operation judges it (over 255 bytes is `NAMETOOLONG`, not garbage).
    pub fn string(&mut self) -> Decoded<&'a [u8]> {
        self.opaque(usize::MAX)
    }

    /// A `bitmap4` of at most [`BITMAP_WORDS_MAX`] words.
    pub fn bitmap(&mut self) -> Decoded<Bitmap> {
        let n = self.u32()?;
        if n > BITMAP_WORDS_MAX {
            return Err(BadXdr);
        }
        let mut b = Bitmap::default();
        for i in 0..n {
            let w = self.u32()?;
            match i {
                0..4 => b.bits |= u128::from(w) << (32 * i),
                _ => b.beyond |= w != 0,
            }
        }
        Ok(b)
    }

    /// Where the cursor is.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// The bytes read since `start` (a [`pos`](Self::pos)).
    pub fn since(&self, start: usize) -> &'a [u8] {
        &self.buf[start..self.pos]
    }

    /// Whether every byte was consumed.
    pub fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }
}

/// Appends one big-endian word.
pub fn u32(out: &mut Vec<u8>, w: u32) {
    out.extend_from_slice(&w.to_be_bytes());
}

pub fn u64(out: &mut Vec<u8>, w: u64) {
    out.extend_from_slice(&w.to_be_bytes());
}

pub fn bool(out: &mut Vec<u8>, b: bool) {
    u32(out, u32::from(b));
}

/// Appends a variable-length opaque (length, data, padding).
pub fn opaque(out: &mut Vec<u8>, data: &[u8]) {
    u32(out, data.len() as u32);
    fixed(out, data);
}

/// Appends fixed bytes with their padding.
pub fn fixed(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(data);
    out.resize(out.len() + (4 - data.len() % 4) % 4, 0);
}

/// Appends a bitmap, trimmed of trailing zero words.
pub fn bitmap(out: &mut Vec<u8>, bits: u128) {
    let words = (128 - bits.leading_zeros()).div_ceil(32);
    u32(out, words);
    for i in 0..words {
        u32(out, (bits >> (32 * i)) as u32);
    }
}

/// The XDR size of an opaque of `len` bytes.
pub fn opaque_size(len: usize) -> usize {
    4 + len.div_ceil(4) * 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_bounded_by_the_record_and_their_limits() {
        let mut rec = Vec::new();
        opaque(&mut rec, b"hello");
        u32(&mut rec, 2);
        assert_eq!(rec.len(), 12 + 4);
        let mut d = Dec::new(&rec);
        assert_eq!(d.opaque(8).unwrap(), b"hello");
        assert!(d.bool().is_err(), "2 is not a bool");
        assert!(Dec::new(&rec).opaque(4).is_err(), "over the limit");
        assert!(Dec::new(&rec[..10]).opaque(8).is_err(), "padding missing");
        // A length of 4 GiB over a record of nothing allocates nothing and fails.
        assert!(Dec::new(&u32::MAX.to_be_bytes()).string().is_err());
        // Bitmaps: too many words is garbage; bits beyond two words are remembered.
        let mut b = Vec::new();
        for w in [5u32, 1, 1 << 1, 1 << 11, 0, 5] {
            u32(&mut b, w);
        }
        let bm = Dec::new(&b).bitmap().unwrap();
        assert!(bm.has(0) && bm.has(33) && bm.has(75) && bm.beyond);
        assert!(Dec::new(&9u32.to_be_bytes()).bitmap().is_err());
        let mut out = Vec::new();
        bitmap(&mut out, 1 | (1 << 33));
        assert_eq!(out.len(), 12);
        out.clear();
        bitmap(&mut out, 1 << 75);
        assert_eq!(out, [0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0]);
        out.clear();
        bitmap(&mut out, 0);
        assert_eq!(out, [0, 0, 0, 0]);
        assert_eq!(opaque_size(5), 12);
    }
}
