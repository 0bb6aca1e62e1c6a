//! Latency histograms per operation and phase, shared by every servelab part.
//!
//! # Layout
//! - [`series`]: one HDR histogram of durations plus a byte count and an exact duration
//!   sum ([`Series`]); failures are series of their own, keyed by `status`.
//! - [`registry`]: the live, thread-safe collection servers record into ([`Registry`]).
//! - [`snapshot`]: a point-in-time copy that merges exactly and round-trips through JSON.
//! - [`prometheus`]: Prometheus text exposition of a snapshot, in base units.
//! - [`server_timing`]: the `Server-Timing` HTTP header, written and parsed.
//! - [`table`]: a plain-text summary table for people (shutdown summaries, reports).
//!
//! This crate does no I/O: servers and the load generator feed it and decide where the
//! output goes.

pub mod prometheus;
pub mod registry;
pub mod series;
pub mod server_timing;
pub mod snapshot;
pub mod table;

pub use registry::{Registry, SeriesHandle};
pub use series::{Key, Series};
pub use snapshot::{SeriesSnapshot, Snapshot};

/// Errors from decoding or merging histograms.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("histogram encoding is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram encoding is not a valid HdrHistogram V2 blob: {0}")]
    Decode(String),
    #[error("histograms cannot be merged: {0}")]
    Merge(String),
    #[error("snapshot JSON is invalid: {0}")]
    Json(#[from] serde_json::Error),
}
