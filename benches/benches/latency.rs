//! Histogram hot paths: recording one sample and merging two series (what every request
//! and every worker/run merge costs).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use latency::{Key, Registry, Series};

fn record(c: &mut Criterion) {
    let mut g = c.benchmark_group("latency/record");
    g.throughput(Throughput::Elements(1));
    let mut s = Series::new();
    let mut i = 0u64;
    g.bench_function("series", |b| {
        b.iter(|| {
            i = i.wrapping_add(7919);
            // Loopback-like values: 20 µs .. ~2 ms.
            s.record(
                Duration::from_nanos(20_000 + i % 2_000_000),
                black_box(4096),
            );
        })
    });
    let registry = Registry::new("bench");
    let handle = registry.handle(&Key::total("GET"));
    g.bench_function("registry_handle", |b| {
        b.iter(|| {
            i = i.wrapping_add(7919);
            handle.record(
                Duration::from_nanos(20_000 + i % 2_000_000),
                black_box(4096),
            );
        })
    });
    g.bench_function("registry_record_op", |b| {
        b.iter(|| {
            i = i.wrapping_add(7919);
            registry.record_op(
                black_box("READ"),
                "total",
                "ok",
                Duration::from_nanos(20_000 + i % 2_000_000),
                4096,
            );
        })
    });
    g.finish();
}

fn merge(c: &mut Criterion) {
    let mut filled = Series::new();
    for i in 0..100_000u64 {
        filled.record(Duration::from_nanos(10_000 + i * 97 % 50_000_000), 1);
    }
    c.bench_function("latency/merge/100k_samples", |b| {
        let mut acc = Series::new();
        b.iter(|| acc.merge(black_box(&filled)).unwrap())
    });
}

criterion_group!(benches, record, merge);
criterion_main!(benches);
