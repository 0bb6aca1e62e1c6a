//! [`NfsVersion`]: the NFS protocol versions this crate speaks, as URLs and flags spell
//! them (a leaf: the URL parser and the v4 client both name it).

/// An NFS protocol version this crate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NfsVersion {
    V3,
    V4_0,
    V4_1,
    V4_2,
}

impl NfsVersion {
    /// Newest first: the order a kernel mount without `vers=` tries them in.
    pub const NEGOTIATION: [NfsVersion; 4] = [
        NfsVersion::V4_2,
        NfsVersion::V4_1,
        NfsVersion::V4_0,
        NfsVersion::V3,
    ];

    /// The NFSv4 minor version, `None` for v3.
    pub fn minor(self) -> Option<u32> {
        match self {
            NfsVersion::V3 => None,
            NfsVersion::V4_0 => Some(0),
            NfsVersion::V4_1 => Some(1),
            NfsVersion::V4_2 => Some(2),
        }
    }

    /// As URLs and `--nfs-version` spell it: `3`, `4.0`, `4.1`, `4.2` (`4` is 4.0).
    pub fn parse(s: &str) -> Option<NfsVersion> {
        Some(match s {
            "3" => NfsVersion::V3,
            "4" | "4.0" => NfsVersion::V4_0,
            "4.1" => NfsVersion::V4_1,
            "4.2" => NfsVersion::V4_2,
            _ => return None,
        })
    }
}

impl std::fmt::Display for NfsVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NfsVersion::V3 => "3",
            NfsVersion::V4_0 => "4.0",
            NfsVersion::V4_1 => "4.1",
            NfsVersion::V4_2 => "4.2",
        })
    }
}
