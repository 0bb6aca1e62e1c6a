//! The experiment layer under `compare`, `bench` and the container sweeps: everything a
//! measurement needs that is not what it measures. An experiment plans its steps,
//! starts its stacks, runs its loads under a probe and writes its model; a new
//! experiment (a ladder of network layers, a distance sweep) is built from these parts,
//! not beside them.
//!
//! # Layout
//! - [`workspace`]: the run directory, the dataset, the load average noted.
//! - [`ours`]: our servers (`servelab httpd|rustnfs`) as supervised child processes,
//!   and their metrics endpoints.
//! - [`nfs`]: the run's NFS servers and the one place every NFS URL is built.
//! - [`peers`]: a third-party baseline started by one call.
//! - [`link`], [`netns`]: the emulated network link between httpd and its NFS server.
//! - [`stack`]: a serving stack (HTTP server, the NFS server and link behind it) started
//!   from a `Launch`, with the parts that serve it.
//! - [`load`]: the load generator under one failure policy, and the rotating order of
//!   repeats.
//! - [`probe`]: the one sampler of a run — each part's CPU and memory, the other work on
//!   the machine, how busy the client's CPUs were.
//! - [`progress`]: the one progress display, planned steps and the time left;
//!   [`terminal`]: lines for the user, printed above the bar.
//! - [`interrupt`]: the one lifecycle — SIGINT/SIGTERM stop the children and unwind the
//!   run so every destructor runs.

pub mod interrupt;
pub mod link;
pub mod load;
pub mod netns;
pub mod nfs;
pub mod ours;
pub mod peers;
pub mod probe;
pub mod progress;
pub mod stack;
pub mod terminal;
pub mod workspace;
