//! `servelab compare`: scenario A (httpd reading through NFS) against scenario B (httpd
//! reading local disk), with baselines, in one command.
//!
//! # Layout
//! - [`dataset`]: the seeded files every scenario serves.
//! - [`baselines`]: nginx, Apache, NFS-Ganesha started next to our servers when present.
//! - [`link`]: the userspace relay that emulates a network link for A's NFS traffic.
//! - [`environment`]: what the machine was.
//! - [`model`]: the results as data (`report.json`).
//! - [`markdown`], [`plots`]: `report.md` and the SVG plots.
//! - [`process`], [`httpget`], [`memory`]: our servers as child processes, scraping
//!   their metrics, sampling their memory.
//! - [`run`]: the orchestration.

pub mod baselines;
pub mod dataset;
pub mod environment;
pub mod httpget;
pub mod link;
pub mod markdown;
pub mod memory;
pub mod model;
pub mod plots;
pub mod process;
pub mod run;
