//! Plain Rust views of NFSv3 attributes and directory entries.

use std::time::SystemTime;

use nfs3_client::nfs3_types::nfs3::{fattr3, ftype3, nfs_fh3};

/// What kind of object a handle names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Other,
}

/// The attributes servelab uses, converted from `fattr3`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    pub kind: FileKind,
    /// Permission bits (`0o644`).
    pub mode: u32,
    pub size: u64,
    pub uid: u32,
    pub gid: u32,
    /// The server's file id (inode number).
    pub fileid: u64,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
}

impl From<&fattr3> for Attr {
    fn from(a: &fattr3) -> Self {
        Attr {
            kind: match a.type_ {
                ftype3::NF3REG => FileKind::File,
                ftype3::NF3DIR => FileKind::Dir,
                ftype3::NF3LNK => FileKind::Symlink,
                _ => FileKind::Other,
            },
            mode: a.mode & 0o7777,
            size: a.size,
            uid: a.uid,
            gid: a.gid,
            fileid: a.fileid,
            mtime: a.mtime.into(),
            ctime: a.ctime.into(),
        }
    }
}

/// One directory entry from READDIRPLUS (attributes and handle when the server sent them).
#[derive(Debug, Clone)]
pub struct DirEntry {
    pub name: String,
    pub fileid: u64,
    pub attr: Option<Attr>,
    pub handle: Option<nfs_fh3>,
}
