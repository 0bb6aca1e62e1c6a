//! Restart-stable file handles and their wire form: export generation + inode + birth time.
//!
//! The generation names the export a handle belongs to (it is derived from the export
//! root's identity, see `DirFs::open`), so a handle says which export it is of, and a
//! server with several exports finds the export before the file.

use nfs3_types::nfs3::{nfs_fh3, nfsstat3};
use nfs3_types::xdr_codec::Opaque;

/// Bytes of a handle on the wire: 8 of generation, 8 of inode, 8 of birth time.
pub const WIRE_LEN: usize = 24;

/// Identifies one file of one export by `(generation, inode, birth time)`. All three
/// survive a server restart; the birth time tells a file apart from a later one that
/// reuses the inode number, the generation tells exports apart.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fh {
    generation: u64,
    ino: u64,
    btime: u64,
}

impl Fh {
    /// A handle of no export (generation 0): state tables and tests key files by it.
    pub fn new(ino: u64, btime: u64) -> Self {
        Fh::in_export(0, ino, btime)
    }
    /// A handle of the export whose generation is `gen`.
    pub fn in_export(generation: u64, ino: u64, btime: u64) -> Self {
        Fh {
            generation,
            ino,
            btime,
        }
    }
    /// The export's generation (the first 8 bytes on the wire).
    pub fn generation(&self) -> u64 {
        self.generation
    }
    pub fn ino(&self) -> u64 {
        self.ino
    }
    pub fn btime(&self) -> u64 {
        self.btime
    }

    /// The handle as clients see it: little-endian generation, inode, birth time. The
    /// layout is kept from earlier rustnfs versions (built on the `nfs3_server` crate),
    /// so handles they gave out stay valid.
    pub fn to_wire(&self) -> [u8; WIRE_LEN] {
        let mut b = [0u8; WIRE_LEN];
        b[..8].copy_from_slice(&self.generation.to_le_bytes());
        b[8..16].copy_from_slice(&self.ino.to_le_bytes());
        b[16..].copy_from_slice(&self.btime.to_le_bytes());
        b
    }

    /// The handle as an XDR `nfs_fh3`.
    pub fn to_nfs(&self) -> nfs_fh3 {
        nfs_fh3 {
            data: Opaque::owned(self.to_wire().to_vec()),
        }
    }

    /// Decodes a client's handle of any export; one of the wrong length is `BADHANDLE`.
    pub fn from_wire(data: &[u8]) -> Result<Fh, nfsstat3> {
        let b: &[u8; WIRE_LEN] = data.try_into().map_err(|_| nfsstat3::NFS3ERR_BADHANDLE)?;
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        Ok(Fh::in_export(word(0), word(8), word(16)))
    }

    /// Decodes a client's handle for the export of generation `generation`. A handle of
    /// an older generation (the export directory was replaced) is `STALE`; anything else
    /// malformed is `BADHANDLE`.
    pub fn from_wire_of(generation: u64, data: &[u8]) -> Result<Fh, nfsstat3> {
        let fh = Fh::from_wire(data)?;
        if fh.generation != generation {
            return Err(if fh.generation < generation {
                nfsstat3::NFS3ERR_STALE
            } else {
                nfsstat3::NFS3ERR_BADHANDLE
            });
        }
        Ok(fh)
    }
}

impl std::fmt::Debug for Fh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Fh(generation={:#x}, ino={}, btime={})",
            self.generation, self.ino, self.btime
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects_wrong_length_or_generation() {
        let h = Fh::in_export(77, 1234, 5678);
        let wire = h.to_wire();
        let back = Fh::from_wire_of(77, &wire).unwrap();
        assert_eq!(
            (back.ino(), back.btime(), back.generation()),
            (1234, 5678, 77)
        );
        assert_eq!(Fh::from_wire(&wire), Ok(h));
        assert_eq!(Fh::from_wire_of(78, &wire), Err(nfsstat3::NFS3ERR_STALE));
        assert_eq!(
            Fh::from_wire_of(76, &wire),
            Err(nfsstat3::NFS3ERR_BADHANDLE)
        );
        assert_eq!(
            Fh::from_wire_of(77, &wire[..23]),
            Err(nfsstat3::NFS3ERR_BADHANDLE)
        );
        assert_eq!(Fh::from_wire(&[0; 25]), Err(nfsstat3::NFS3ERR_BADHANDLE));
        assert_eq!(h.to_nfs().data.as_ref(), &wire[..]);
    }
}
