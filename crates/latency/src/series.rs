//! One measured series: a duration histogram (nanoseconds) with a byte count and an
//! exact sum of durations (errors are series of their own, by `status`).

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Significant figures kept by every histogram: 0.1 % relative precision, as wrk and
/// HdrHistogram's own tools use.
pub const SIGNIFICANT_FIGURES: u8 = 3;

/// Names one series: what was done (`op`, e.g. an NFS procedure or an HTTP route class),
/// which part of it was timed (`phase`: `total`, `meta`, `read`, `send`, …) and how it
/// ended (`status`: `ok`, an HTTP status, an NFS error name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Key {
    pub op: String,
    pub phase: String,
    pub status: String,
}

impl Key {
    pub fn new(op: impl Into<String>, phase: impl Into<String>, status: impl Into<String>) -> Self {
        Key {
            op: op.into(),
            phase: phase.into(),
            status: status.into(),
        }
    }

    /// The whole operation (`phase = "total"`) that ended well (`status = "ok"`).
    pub fn total(op: impl Into<String>) -> Self {
        Key::new(op, "total", "ok")
    }
}

/// A duration histogram plus the counters that go with it.
#[derive(Debug, Clone)]
pub struct Series {
    /// Durations in nanoseconds; auto-resizing so a 30 s stall is still recorded.
    pub histogram: Histogram<u64>,
    /// Bytes moved by the recorded operations (payload, not headers).
    pub bytes: u64,
    /// Sum of all recorded durations in nanoseconds, exact (the histogram's mean is not).
    pub sum_nanos: u128,
}

impl Default for Series {
    fn default() -> Self {
        Series::new()
    }
}

impl Series {
    pub fn new() -> Self {
        // Start small (1 ns .. 1 ms) and let it grow: most series stay in microseconds,
        // and each doubling of range costs only one bucket.
        let mut histogram = Histogram::new_with_bounds(1, 1_000_000, SIGNIFICANT_FIGURES)
            .expect("static histogram bounds are valid");
        histogram.auto(true);
        Series {
            histogram,
            bytes: 0,
            sum_nanos: 0,
        }
    }

    /// Records one operation that took `elapsed` and moved `bytes`.
    pub fn record(&mut self, elapsed: Duration, bytes: u64) {
        let nanos = duration_to_nanos(elapsed);
        // With auto-resize on, recording only fails for values beyond u64 range.
        let _ = self.histogram.record(nanos);
        self.sum_nanos += u128::from(nanos);
        self.bytes += bytes;
    }

    /// Records a value measured from an *intended* start under a fixed-rate schedule and
    /// back-fills the samples a stalled closed loop would have missed (HdrHistogram's
    /// coordinated-omission correction), `interval` being the schedule's period.
    pub fn record_corrected(&mut self, elapsed: Duration, bytes: u64, interval: Duration) {
        let nanos = duration_to_nanos(elapsed);
        let _ = self
            .histogram
            .record_correct(nanos, duration_to_nanos(interval).max(1));
        self.sum_nanos += u128::from(nanos);
        self.bytes += bytes;
    }

    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// Adds `other` into `self` exactly: counts, bytes and sums all add.
    pub fn merge(&mut self, other: &Series) -> Result<(), crate::Error> {
        self.histogram
            .add(&other.histogram)
            .map_err(|e| crate::Error::Merge(format!("{e:?}")))?;
        self.bytes += other.bytes;
        self.sum_nanos += other.sum_nanos;
        Ok(())
    }

    /// Removes `earlier` from `self`: what was recorded between two snapshots of one
    /// cumulative series (a server scraped before and after a run).
    pub fn subtract(&mut self, earlier: &Series) -> Result<(), crate::Error> {
        self.histogram
            .subtract(&earlier.histogram)
            .map_err(|e| crate::Error::Merge(format!("{e:?}")))?;
        self.bytes = self.bytes.saturating_sub(earlier.bytes);
        self.sum_nanos = self.sum_nanos.saturating_sub(earlier.sum_nanos);
        Ok(())
    }

    /// Exact mean in seconds (0 when empty).
    pub fn mean_seconds(&self) -> f64 {
        if self.count() == 0 {
            0.0
        } else {
            self.sum_nanos as f64 / self.count() as f64 / 1e9
        }
    }

    /// The value at `quantile` (0.0..=1.0) in seconds.
    pub fn quantile_seconds(&self, quantile: f64) -> f64 {
        self.histogram.value_at_quantile(quantile) as f64 / 1e9
    }
}

fn duration_to_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_merges_exactly() {
        let mut a = Series::new();
        let mut b = Series::new();
        for i in 1..=100u64 {
            a.record(Duration::from_micros(i), 10);
            b.record(Duration::from_millis(i), 1);
        }
        a.merge(&b).unwrap();
        assert_eq!(a.count(), 200);
        assert_eq!(a.bytes, 1100);
        let exact_sum: u128 = (1..=100u128).map(|i| i * 1000 + i * 1_000_000).sum();
        assert_eq!(a.sum_nanos, exact_sum);
        // Median sits between the two halves; max is 100 ms within 0.1 %.
        let max = a.histogram.max() as f64;
        assert!((max - 100e6).abs() / 100e6 < 0.001, "max {max}");
    }

    #[test]
    fn subtract_gives_the_interval() {
        let mut before = Series::new();
        before.record(Duration::from_micros(10), 5);
        let mut after = before.clone();
        after.record(Duration::from_millis(7), 3);
        after.subtract(&before).unwrap();
        assert_eq!(after.count(), 1);
        assert_eq!(after.bytes, 3);
        assert!((after.quantile_seconds(0.5) - 0.007).abs() < 1e-5);
    }

    #[test]
    fn grows_beyond_initial_range() {
        let mut s = Series::new();
        s.record(Duration::from_secs(30), 0);
        assert_eq!(s.count(), 1);
        assert!((s.quantile_seconds(1.0) - 30.0).abs() < 0.05);
    }

    #[test]
    fn coordinated_omission_backfills() {
        let mut s = Series::new();
        // One 100 ms stall under a 10 ms schedule stands for 10 requests that waited.
        s.record_corrected(Duration::from_millis(100), 0, Duration::from_millis(10));
        assert_eq!(s.count(), 10);
    }
}
