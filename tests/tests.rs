//! End-to-end tests: servelab's parts against real, unmodified clients and servers.
//!
//! One test target, one module per area; `common` holds the shared helpers (temporary
//! datasets, free ports, external tools that must be present in CI and are skipped with a
//! message elsewhere).

mod common;
mod crash;
mod deploy;
mod faults;
mod httpd;
mod kernel_nfs;
mod loadgen;
mod rustnfs;
mod rustnfs_hostile;
mod soak;
mod support;
