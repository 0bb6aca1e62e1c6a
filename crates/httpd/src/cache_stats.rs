//! The NFS data cache's counters and gauges (`--nfs-data-cache`): kept by the cache,
//! carried by [`crate::Config`] so that a caller can read them, and served by the
//! metrics endpoint as Prometheus lines and JSON.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters and gauges of one data cache, shared with the metrics endpoint.
#[derive(Debug, Default)]
pub struct CacheStats {
    /// SIZE (0 = the cache is off).
    pub capacity: AtomicU64,
    /// Bytes held now: cached files plus fills in progress. Never above `capacity`.
    pub bytes: AtomicU64,
    /// Files cached now.
    pub files: AtomicU64,
    /// Opens answered from the cache after revalidation.
    pub hits: AtomicU64,
    /// Opens that read the file over NFS into the cache.
    pub misses: AtomicU64,
    /// Files dropped to make room.
    pub evictions: AtomicU64,
    /// Cached files dropped because the server's attributes changed.
    pub invalidations: AtomicU64,
    /// Opens served over the wire because the file does not fit, or because its fill
    /// failed on the local copy (out of space, I/O error).
    pub uncached: AtomicU64,
}

impl CacheStats {
    fn fields(&self) -> [(&'static str, u64); 8] {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            ("capacity_bytes", g(&self.capacity)),
            ("bytes", g(&self.bytes)),
            ("files", g(&self.files)),
            ("hits", g(&self.hits)),
            ("misses", g(&self.misses)),
            ("evictions", g(&self.evictions)),
            ("invalidations", g(&self.invalidations)),
            ("uncached", g(&self.uncached)),
        ]
    }

    /// The values as one JSON object (`/metrics.json`'s `nfs_data_cache`).
    pub fn to_json(&self) -> serde_json::Value {
        let map: serde_json::Map<String, serde_json::Value> = self
            .fields()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect();
        serde_json::Value::Object(map)
    }

    /// The values as Prometheus text lines, `httpd_nfs_data_cache_*`.
    pub fn to_prometheus(&self) -> String {
        let mut out = String::new();
        for (k, v) in self.fields() {
            let kind = match k {
                "capacity_bytes" | "bytes" | "files" => "gauge",
                _ => "counter",
            };
            let name = match kind {
                "counter" => format!("httpd_nfs_data_cache_{k}_total"),
                _ => format!("httpd_nfs_data_cache_{k}"),
            };
            out.push_str(&format!("# TYPE {name} {kind}\n{name} {v}\n"));
        }
        out
    }
}
