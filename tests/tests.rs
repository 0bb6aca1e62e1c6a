//! End-to-end tests: servelab's parts against real, unmodified clients and servers.
//!
//! One test target, one module per area. They stand on the harness crate (`lab`:
//! supervised children, peers such as NFS-Ganesha, the seeded dataset generator, the
//! HTTP client, our servers in-process); `common` holds the small helpers on top of it
//! (external tools that must be present in CI and are skipped with a message elsewhere,
//! workspace binaries), `support` the fixtures, one job per module.

mod common;
mod crash;
mod deploy;
mod docs;
mod exports;
mod faults;
mod http_conformance;
mod httpd;
mod httpd_hostile;
mod kernel_nfs;
mod loadgen;
mod nfs4_state;
mod nfsclient;
mod raw_vs_ganesha;
mod readme_figures;
mod rustnfs;
mod rustnfs_hostile;
mod soak;
mod support;
