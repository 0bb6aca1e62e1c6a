//! Support for the kernel-client, crash and fault tests: the qemu VM with the kernel's
//! NFS client (`kvm`), NFS-Ganesha as the control server (`ganesha`), the rustnfs binary
//! as a killable child (`server`) and a bare NFSv3 client that shows WRITE stability and
//! verifiers (`nfs3`).

#![allow(dead_code)]

pub mod ganesha;
pub mod kvm;
pub mod nfs3;
pub mod server;
