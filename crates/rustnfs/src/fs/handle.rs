//! Restart-stable file handles and their wire form: export generation + inode + birth time.

use nfs3_types::nfs3::{nfs_fh3, nfsstat3};
use nfs3_types::xdr_codec::Opaque;

/// Bytes of a handle on the wire: 8 of generation, 8 of inode, 8 of birth time.
pub const WIRE_LEN: usize = 24;

/// Identifies one file by `(inode, birth time)`. Both survive a server restart, and the
/// birth time tells a file apart from a later one that reuses the inode number.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fh {
    ino: u64,
    btime: u64,
}

impl Fh {
    pub fn new(ino: u64, btime: u64) -> Self {
        Fh { ino, btime }
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
    pub fn to_wire(&self, generation: u64) -> [u8; WIRE_LEN] {
        let mut b = [0u8; WIRE_LEN];
        b[..8].copy_from_slice(&generation.to_le_bytes());
        b[8..16].copy_from_slice(&self.ino.to_le_bytes());
        b[16..].copy_from_slice(&self.btime.to_le_bytes());
        b
    }

    /// The handle as an XDR `nfs_fh3`.
    pub fn to_nfs(&self, generation: u64) -> nfs_fh3 {
        nfs_fh3 {
            data: Opaque::owned(self.to_wire(generation).to_vec()),
        }
    }

    /// Decodes a client's handle. A handle of an older generation of this export (the
    /// export directory was replaced) is `STALE`; anything else malformed is `BADHANDLE`.
    pub fn from_wire(generation: u64, data: &[u8]) -> Result<Fh, nfsstat3> {
        let b: &[u8; WIRE_LEN] = data.try_into().map_err(|_| nfsstat3::NFS3ERR_BADHANDLE)?;
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        let theirs = word(0);
        if theirs != generation {
            return Err(if theirs < generation {
                nfsstat3::NFS3ERR_STALE
            } else {
                nfsstat3::NFS3ERR_BADHANDLE
            });
        }
        Ok(Fh::new(word(8), word(16)))
    }
}

impl std::fmt::Debug for Fh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fh(ino={}, btime={})", self.ino, self.btime)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects_wrong_length_or_generation() {
        let h = Fh::new(1234, 5678);
        let wire = h.to_wire(77);
        let back = Fh::from_wire(77, &wire).unwrap();
        assert_eq!((back.ino(), back.btime()), (1234, 5678));
        assert_eq!(Fh::from_wire(78, &wire), Err(nfsstat3::NFS3ERR_STALE));
        assert_eq!(Fh::from_wire(76, &wire), Err(nfsstat3::NFS3ERR_BADHANDLE));
        assert_eq!(
            Fh::from_wire(77, &wire[..23]),
            Err(nfsstat3::NFS3ERR_BADHANDLE)
        );
        assert_eq!(
            Fh::from_wire(77, &[0; 25]),
            Err(nfsstat3::NFS3ERR_BADHANDLE)
        );
        assert_eq!(h.to_nfs(77).data.as_ref(), &wire[..]);
    }
}
