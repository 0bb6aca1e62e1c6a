//! Bounded XDR decoding of call arguments, and packing of replies.
//!
//! `nfs3_types`' own `Unpack` for variable-length data allocates the length the client
//! wrote before reading it (a 4-byte length can ask for 4 GiB), so opaques — handles,
//! names, paths, WRITE data — are decoded here, checked against what the record really
//! holds and borrowed from it (no copy). Fixed-size parts (`sattr3`, `createhow3`, …)
//! use `nfs3_types`' decoders, which allocate nothing.

use std::io::Cursor;

use nfs3_types::xdr_codec::{Pack, Unpack};

/// The arguments do not decode: answered `GARBAGE_ARGS` (RFC 5531).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Garbage;

pub type Decoded<T> = Result<T, Garbage>;

/// A cursor over one call's arguments.
pub struct Args<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Args<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Args { buf, pos: 0 }
    }

    pub fn u32(&mut self) -> Decoded<u32> {
        let b = self.buf.get(self.pos..self.pos + 4).ok_or(Garbage)?;
        self.pos += 4;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Decoded<u64> {
        Ok((u64::from(self.u32()?) << 32) | u64::from(self.u32()?))
    }

    /// A variable-length opaque of at most `max` bytes, borrowed from the record.
    pub fn opaque(&mut self, max: usize) -> Decoded<&'a [u8]> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(Garbage);
        }
        let padded = len.checked_add(3).ok_or(Garbage)? & !3;
        let end = self.pos.checked_add(padded).ok_or(Garbage)?;
        if end > self.buf.len() {
            return Err(Garbage);
        }
        let data = &self.buf[self.pos..self.pos + len];
        self.pos = end;
        Ok(data)
    }

    /// An `nfs_fh3` (at most 64 bytes, RFC 1813).
    pub fn fh(&mut self) -> Decoded<&'a [u8]> {
        self.opaque(nfs3_types::nfs3::NFS3_FHSIZE)
    }

    /// A `filename3` or `nfspath3`: any length the record holds (the procedure judges
    /// it: over 255 bytes is `NAMETOOLONG`, not garbage).
    pub fn string(&mut self) -> Decoded<&'a [u8]> {
        self.opaque(usize::MAX)
    }

    /// A fixed-size XDR type decoded by `nfs3_types`.
    pub fn xdr<T: Unpack>(&mut self) -> Decoded<T> {
        let mut cur = Cursor::new(&self.buf[self.pos..]);
        let (v, _) = T::unpack(&mut cur).map_err(|_| Garbage)?;
        self.pos += cur.position() as usize;
        Ok(v)
    }

    /// Everything was consumed: trailing bytes mean the call is not what it claims.
    pub fn end(&self) -> Decoded<()> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(Garbage)
        }
    }
}

/// Appends `v` in XDR. Writing into a `Vec` cannot fail, and nothing we build exceeds
/// XDR's 4 GiB opaque limit, so an error here is a bug: it is logged, never a panic.
pub fn put<T: Pack>(out: &mut Vec<u8>, v: &T) {
    if let Err(e) = v.pack(out) {
        tracing::error!("cannot encode a reply: {e}");
    }
}

/// Appends one big-endian word.
pub fn word(out: &mut Vec<u8>, w: u32) {
    out.extend_from_slice(&w.to_be_bytes());
}

/// The XDR size of an opaque of `len` bytes (length word + padded data).
pub fn opaque_size(len: usize) -> usize {
    4 + len.div_ceil(4) * 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opaques_are_bounded_by_the_record_and_the_limit() {
        let mut rec = Vec::new();
        word(&mut rec, 5);
        rec.extend_from_slice(b"hello\0\0\0");
        word(&mut rec, 7);
        let mut a = Args::new(&rec);
        assert_eq!(a.opaque(8).unwrap(), b"hello");
        assert_eq!(a.u32().unwrap(), 7);
        assert!(a.end().is_ok());
        // A length beyond the record (4 GiB asked, 0 held) is garbage, allocating nothing.
        let huge = u32::MAX.to_be_bytes();
        assert_eq!(Args::new(&huge).string(), Err(Garbage));
        // Over the limit, and padding missing.
        assert_eq!(Args::new(&rec).opaque(4), Err(Garbage));
        assert_eq!(Args::new(&rec[..8]).opaque(8), Err(Garbage));
        // Trailing bytes.
        let mut b = Args::new(&rec);
        b.opaque(8).unwrap();
        assert_eq!(b.end(), Err(Garbage));
        assert_eq!(opaque_size(5), 12);
        assert_eq!(opaque_size(0), 4);
    }

    #[test]
    fn fixed_types_decode_with_nfs3_types() {
        use nfs3_types::nfs3::{Nfs3Option, sattr3};
        let mut rec = Vec::new();
        for w in [1u32, 0o640, 0, 0, 1, 0, 5, 0, 0] {
            word(&mut rec, w);
        }
        let mut a = Args::new(&rec);
        let s: sattr3 = a.xdr().unwrap();
        assert_eq!(s.mode, Nfs3Option::Some(0o640));
        assert!(matches!(s.size, Nfs3Option::Some(5)));
        assert!(a.end().is_ok());
        // A bad discriminant is garbage.
        let mut bad = rec.clone();
        bad[..4].copy_from_slice(&9u32.to_be_bytes());
        assert!(Args::new(&bad).xdr::<sattr3>().is_err());
    }
}
