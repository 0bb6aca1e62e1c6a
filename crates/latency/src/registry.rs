//! The live registry servers record into, safe to share across threads.
//!
//! Each series has its own mutex, so two threads only contend when they record the very
//! same operation, phase and status at the same instant; callers on a hot path can keep a
//! [`SeriesHandle`] and skip the map look-up entirely.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use crate::series::{Key, Series};
use crate::snapshot::Snapshot;

/// A handle on one series of a [`Registry`]; cheap to clone and to record into.
#[derive(Debug, Clone)]
pub struct SeriesHandle(Arc<Mutex<Series>>);

impl SeriesHandle {
    pub fn record(&self, elapsed: Duration, bytes: u64) {
        self.0.lock().record(elapsed, bytes);
    }
}

/// All series of one program, named by a metric prefix (`rustnfs_nfs`, `httpd_request`).
#[derive(Debug)]
pub struct Registry {
    prefix: String,
    series: RwLock<HashMap<Key, Arc<Mutex<Series>>>>,
}

impl Registry {
    /// `prefix` becomes the Prometheus metric name stem, e.g. `rustnfs_nfs` gives
    /// `rustnfs_nfs_duration_seconds`.
    pub fn new(prefix: impl Into<String>) -> Arc<Self> {
        Arc::new(Registry {
            prefix: prefix.into(),
            series: RwLock::new(HashMap::new()),
        })
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The handle for `key`, created empty on first use.
    pub fn handle(&self, key: &Key) -> SeriesHandle {
        if let Some(s) = self.series.read().get(key) {
            return SeriesHandle(s.clone());
        }
        let mut map = self.series.write();
        SeriesHandle(map.entry(key.clone()).or_default().clone())
    }

    /// Records one operation under `key`.
    pub fn record(&self, key: &Key, elapsed: Duration, bytes: u64) {
        self.handle(key).record(elapsed, bytes);
    }

    /// Convenience for the common case: `op`, `phase`, `status` as string slices.
    pub fn record_op(&self, op: &str, phase: &str, status: &str, elapsed: Duration, bytes: u64) {
        {
            let map = self.series.read();
            // Look up without allocating a Key on the hot path.
            if let Some((_, s)) = map
                .iter()
                .find(|(k, _)| k.op == op && k.phase == phase && k.status == status)
            {
                s.lock().record(elapsed, bytes);
                return;
            }
        }
        self.record(&Key::new(op, phase, status), elapsed, bytes);
    }

    /// Takes every series' contents out, leaving them empty: how a caller measures one
    /// interval (a warm-up, one workload) at a time while the server keeps recording.
    /// Series are reset in place, so [`SeriesHandle`]s taken before stay valid; series
    /// that recorded nothing in the interval are left out of the result.
    pub fn drain(&self) -> Snapshot {
        let map = self.series.read();
        let series = map
            .iter()
            .filter_map(|(k, s)| {
                let taken = std::mem::take(&mut *s.lock());
                (taken.count() > 0).then(|| (k.clone(), taken))
            })
            .collect();
        Snapshot::from_series(self.prefix.clone(), series)
    }

    /// A consistent copy of every series, for reports and exposition.
    pub fn snapshot(&self) -> Snapshot {
        let map = self.series.read();
        let series = map
            .iter()
            .map(|(k, s)| (k.clone(), s.lock().clone()))
            .collect();
        Snapshot::from_series(self.prefix.clone(), series)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_recording_loses_nothing() {
        let reg = Registry::new("test");
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let reg = reg.clone();
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        let op = if i % 2 == 0 { "READ" } else { "GETATTR" };
                        reg.record_op(op, "total", "ok", Duration::from_micros(t + 1), 4096);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let snap = reg.snapshot();
        assert_eq!(snap.get(&Key::total("READ")).unwrap().count(), 2000);
        assert_eq!(snap.get(&Key::total("GETATTR")).unwrap().bytes, 2000 * 4096);
    }

    #[test]
    fn drain_empties_the_registry() {
        let reg = Registry::new("test");
        reg.record_op("GET", "total", "200", Duration::from_micros(5), 1);
        let first = reg.drain();
        assert_eq!(
            first.get(&Key::new("GET", "total", "200")).unwrap().count(),
            1
        );
        assert!(reg.drain().series.is_empty());
        // A handle taken before the drain still records into the registry.
        let handle = reg.handle(&Key::new("GET", "total", "200"));
        handle.record(Duration::from_micros(5), 1);
        assert_eq!(reg.drain().series.len(), 1);
    }
}
