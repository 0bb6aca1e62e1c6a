//! Restart-stable file handles: inode number plus birth time, no server start time.

use nfs3_server::vfs::FileHandle;

/// Identifies one file by `(inode, birth time)`. Both survive a server restart, and the
/// birth time tells a file apart from a later one that reuses the inode number. The engine
/// prefixes it with an 8-byte per-export generation, which is derived from the export
/// root's identity and therefore stable too.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fh {
    bytes: [u8; 16],
}

impl Fh {
    pub fn new(ino: u64, btime: u64) -> Self {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&ino.to_le_bytes());
        bytes[8..].copy_from_slice(&btime.to_le_bytes());
        Fh { bytes }
    }
    pub fn ino(&self) -> u64 {
        u64::from_le_bytes(self.bytes[..8].try_into().unwrap_or_default())
    }
    pub fn btime(&self) -> u64 {
        u64::from_le_bytes(self.bytes[8..].try_into().unwrap_or_default())
    }
}

impl std::fmt::Debug for Fh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fh(ino={}, btime={})", self.ino(), self.btime())
    }
}

impl FileHandle for Fh {
    fn len(&self) -> usize {
        16
    }
    fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        Some(Fh {
            bytes: bytes.try_into().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects_wrong_length() {
        let h = Fh::new(1234, 5678);
        let back = Fh::from_bytes(h.as_bytes()).unwrap();
        assert_eq!((back.ino(), back.btime()), (1234, 5678));
        assert!(Fh::from_bytes(&[0; 15]).is_none());
        assert!(Fh::from_bytes(&[0; 17]).is_none());
    }
}
