//! The fixtures of the end-to-end tests, one job per module, on the harness crate (`lab`):
//!
//! - `ganesha`: NFS-Ganesha as the control server (lab's launcher), its URLs.
//! - `server`: our binaries as children to kill, stop and restart (lab's supervisor).
//! - `http`: curl, ab, raw requests on lab's HTTP client, a stalled reader.
//! - `rpc`: a hand-written ONC RPC client for what real clients cannot send.
//! - `nfs3`: a bare NFSv3 client that shows WRITE stability and verifiers.
//! - `nfs4`: a raw NFSv4 COMPOUND client (special stateids, floods, sessions).
//! - `libnfs`: libnfs-utils as the real userspace client.
//! - `tree`: an export next to a secret it must never reach.
//! - `kvm`: the qemu VM with the kernel's NFS client.
//! - `docker`, `compose`, `lxd`, `manifests`: the deployment paths.

#![allow(dead_code)]

pub mod compose;
pub mod docker;
pub mod ganesha;
pub mod http;
pub mod kvm;
pub mod libnfs;
pub mod lxd;
pub mod manifests;
pub mod nfs3;
pub mod nfs4;
pub mod rpc;
pub mod server;
pub mod tree;
