//! Support for the kernel-client, crash and fault tests: the qemu VM with the kernel's
//! NFS client (`kvm`) and NFS-Ganesha as the control server (`ganesha`).

#![allow(dead_code)]

pub mod ganesha;
pub mod kvm;
