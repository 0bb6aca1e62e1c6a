//! Point-in-time copies of a registry: exact merging and a JSON form that keeps the full
//! histogram (HdrHistogram V2, base64), so results from several workers or machines merge
//! without losing percentiles.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2Serializer};
use serde::{Deserialize, Serialize};

use crate::Error;
use crate::series::{Key, Series};

/// The percentiles every report shows, as quantiles.
pub const REPORTED_QUANTILES: [(&str, f64); 7] = [
    ("p50", 0.50),
    ("p75", 0.75),
    ("p90", 0.90),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p99_9", 0.999),
    ("p99_99", 0.9999),
];

/// Every series of a registry (or of several, merged) at one instant.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub prefix: String,
    pub series: BTreeMap<Key, Series>,
}

/// The JSON form of one series: human-readable figures plus the exact histogram.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SeriesSnapshot {
    pub op: String,
    pub phase: String,
    pub status: String,
    pub count: u64,
    pub bytes: u64,
    pub sum_seconds: f64,
    pub min_seconds: f64,
    pub mean_seconds: f64,
    pub stddev_seconds: f64,
    pub max_seconds: f64,
    /// `p50` … `p99_99`, in seconds.
    pub percentiles_seconds: BTreeMap<String, f64>,
    /// HdrHistogram V2 encoding (nanoseconds), base64: what makes merging exact.
    pub histogram: String,
}

#[derive(Serialize, Deserialize)]
struct SnapshotJson {
    prefix: String,
    series: Vec<SeriesSnapshot>,
}

impl Snapshot {
    pub fn from_series(prefix: String, series: BTreeMap<Key, Series>) -> Self {
        Snapshot { prefix, series }
    }

    pub fn get(&self, key: &Key) -> Option<&Series> {
        self.series.get(key)
    }

    /// Sum of every series whose op and phase match, whatever their status.
    pub fn combined(&self, op: &str, phase: &str) -> Option<Series> {
        let mut out: Option<Series> = None;
        for (k, s) in &self.series {
            if k.op == op && k.phase == phase {
                match &mut out {
                    None => out = Some(s.clone()),
                    Some(acc) => acc.merge(s).ok()?,
                }
            }
        }
        out
    }

    /// Adds every series of `other` into `self`, key by key, exactly.
    pub fn merge(&mut self, other: &Snapshot) -> Result<(), Error> {
        if self.prefix.is_empty() {
            self.prefix = other.prefix.clone();
        }
        for (k, s) in &other.series {
            match self.series.get_mut(k) {
                Some(mine) => mine.merge(s)?,
                None => {
                    self.series.insert(k.clone(), s.clone());
                }
            }
        }
        Ok(())
    }

    /// What was recorded since `earlier`, a snapshot of the same cumulative registry;
    /// series with nothing new are left out.
    pub fn since(&self, earlier: &Snapshot) -> Result<Snapshot, Error> {
        let mut series = BTreeMap::new();
        for (k, s) in &self.series {
            let mut delta = s.clone();
            if let Some(old) = earlier.series.get(k) {
                delta.subtract(old)?;
            }
            if delta.count() > 0 {
                series.insert(k.clone(), delta);
            }
        }
        Ok(Snapshot {
            prefix: self.prefix.clone(),
            series,
        })
    }

    pub fn to_series_snapshots(&self) -> Vec<SeriesSnapshot> {
        self.series
            .iter()
            .map(|(k, s)| series_snapshot(k, s))
            .collect()
    }

    /// JSON with the full histograms, as served on `/metrics.json`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(SnapshotJson {
            prefix: self.prefix.clone(),
            series: self.to_series_snapshots(),
        })
        .expect("snapshot serializes")
    }

    /// Reads what [`Snapshot::to_json`] wrote, histograms included.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, Error> {
        let parsed: SnapshotJson = serde_json::from_value(value.clone())?;
        let mut series = BTreeMap::new();
        for s in parsed.series {
            let key = Key::new(s.op.clone(), s.phase.clone(), s.status.clone());
            series.insert(key, s.to_series()?);
        }
        Ok(Snapshot {
            prefix: parsed.prefix,
            series,
        })
    }
}

impl SeriesSnapshot {
    /// Rebuilds the live series (histogram, bytes, sum) from its JSON form.
    pub fn to_series(&self) -> Result<Series, Error> {
        let raw = BASE64.decode(&self.histogram)?;
        let mut histogram: hdrhistogram::Histogram<u64> = Deserializer::new()
            .deserialize(&mut raw.as_slice())
            .map_err(|e| Error::Decode(format!("{e:?}")))?;
        histogram.auto(true);
        Ok(Series {
            histogram,
            bytes: self.bytes,
            sum_nanos: (self.sum_seconds * 1e9).round() as u128,
        })
    }
}

fn series_snapshot(key: &Key, s: &Series) -> SeriesSnapshot {
    let h = &s.histogram;
    let empty = h.is_empty();
    let mut buf = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut buf)
        .expect("serializing to a Vec cannot fail");
    SeriesSnapshot {
        op: key.op.clone(),
        phase: key.phase.clone(),
        status: key.status.clone(),
        count: h.len(),
        bytes: s.bytes,
        sum_seconds: s.sum_nanos as f64 / 1e9,
        min_seconds: if empty { 0.0 } else { h.min() as f64 / 1e9 },
        mean_seconds: s.mean_seconds(),
        stddev_seconds: if empty { 0.0 } else { h.stdev() / 1e9 },
        max_seconds: if empty { 0.0 } else { h.max() as f64 / 1e9 },
        percentiles_seconds: REPORTED_QUANTILES
            .iter()
            .map(|(name, q)| (name.to_string(), s.quantile_seconds(*q)))
            .collect(),
        histogram: BASE64.encode(buf),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;
    use std::time::Duration;

    #[test]
    fn json_round_trip_merges_exactly() {
        let a = Registry::new("lab");
        let b = Registry::new("lab");
        for i in 1..=1000u64 {
            a.record_op("GET", "total", "200", Duration::from_micros(i), 10);
            b.record_op("GET", "total", "200", Duration::from_micros(1000 + i), 10);
        }
        b.record_op("GET", "total", "500", Duration::from_micros(5), 0);

        // Merge through JSON, as results from two machines would be.
        let mut merged = Snapshot::from_json(&a.snapshot().to_json()).unwrap();
        merged
            .merge(&Snapshot::from_json(&b.snapshot().to_json()).unwrap())
            .unwrap();
        let ok = merged.get(&Key::new("GET", "total", "200")).unwrap();
        assert_eq!(ok.count(), 2000);
        assert_eq!(ok.bytes, 20_000);
        let p50 = ok.quantile_seconds(0.5);
        assert!((p50 - 1000e-6).abs() < 2e-6, "p50 {p50}");
        assert_eq!(merged.combined("GET", "total").unwrap().count(), 2001);

        // And the merged JSON equals merging the live snapshots directly.
        let mut direct = a.snapshot();
        direct.merge(&b.snapshot()).unwrap();
        assert_eq!(direct.to_json(), merged.to_json());
    }

    #[test]
    fn since_isolates_an_interval() {
        let reg = Registry::new("lab");
        reg.record_op("GET", "total", "200", Duration::from_micros(3), 1);
        let before = Snapshot::from_json(&reg.snapshot().to_json()).unwrap();
        reg.record_op("GET", "total", "200", Duration::from_micros(900), 1);
        reg.record_op("HEAD", "total", "200", Duration::from_micros(9), 0);
        let delta = reg.snapshot().since(&before).unwrap();
        assert_eq!(
            delta.get(&Key::new("GET", "total", "200")).unwrap().count(),
            1
        );
        assert_eq!(
            delta
                .get(&Key::new("HEAD", "total", "200"))
                .unwrap()
                .count(),
            1
        );
        let unchanged = reg.snapshot().since(&reg.snapshot()).unwrap();
        assert!(unchanged.series.is_empty());
    }
}
