//! `servelab compare`: scenario A (httpd reading through NFS) against scenario B (httpd
//! reading local disk), with baselines, in one command.
//!
//! # Layout
//! - [`options`]: what a run is asked to do (validated options, baseline choice).
//! - [`scenarios`]: what runs — the list of scenario specs and how each is started.
//! - [`run`]: the orchestration over a run context, phase by phase.
//! - [`answer`]: the computed answer — service demand of A against B with its
//!   interval, latency at equal load, what limited throughput — as data and sentences.
//! - [`rows`]: raw runs → the report's rows (medians, spreads, curves, phases).
//! - [`crosscheck`]: the same workloads by `ab` and `wrk`, and the report's self-checks.
//! - [`model`]: the results as data (`report.json`).
//! - [`markdown`], [`plots`]: `report.md` and the SVG plots; [`output`] writes them.
//!
//! Peers, process supervision, datasets, the environment note and the sampler are the
//! `lab` crate's; our own servers as children are [`crate::experiment::ours`].

pub mod answer;
pub mod crosscheck;
pub mod markdown;
pub mod model;
pub mod options;
pub mod output;
pub mod plots;
pub mod rows;
pub mod run;
pub mod scenarios;
