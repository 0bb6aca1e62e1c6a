//! libnfs-utils (`nfs-ls`, `nfs-cat`, `nfs-cp`) as the real userspace NFS client.

use std::process::Command;

use crate::common;

pub fn available() -> bool {
    ["nfs-ls", "nfs-cat", "nfs-cp"]
        .iter()
        .all(|t| common::require_tool(t).is_some())
}

pub fn nfs_cat(url: &str) -> Vec<u8> {
    common::run_ok(Command::new("nfs-cat").arg(url)).stdout
}
