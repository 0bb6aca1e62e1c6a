//! How the price of NFS grows with distance (issue 33 §3): scenario A with its NFS hop
//! across the emulated link ([`crate::experiment::link`]) at round-trip times of 0
//! (loopback), 0.1, 0.5 and 2 ms and at 1 and 10 Gbit/s, each against B at the same
//! offered load. `compare` measures one point (0.5 ms, 1 Gbit/s); `compare --distance`
//! the sweep. The runs are a phase of compare's run (`compare::run`'s `distance`); this
//! module holds what is measured and how it is told.
//!
//! # Layout
//! - [`model`]: the points of the sweep, the results as data, the comparisons with B.
//! - [`sentences`]: one answer sentence per point measured.
//! - [`markdown`], [`plots`]: the report section and its plot.

pub mod markdown;
pub mod model;
pub mod plots;
pub mod sentences;

pub use model::Distance;
/// The answer's distance sentences (`distance::sentences(&report.distance)`).
pub use sentences::sentences;
