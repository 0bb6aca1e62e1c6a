//! httpd's request path in-process: a 4 KiB and a 10 MiB file over one keep-alive
//! connection, from local storage and from an in-process rustnfs.

use std::time::Duration;

use benches::{HttpClient, LARGE, LARGE_BYTES, Lab, SMALL, SMALL_BYTES};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn serve(c: &mut Criterion) {
    let lab = Lab::start().expect("start the in-process servers");
    for (backend, addr) in [("local", lab.http_local), ("nfs", lab.http_nfs)] {
        let mut client = HttpClient::connect(addr).expect("connect to httpd");
        let mut g = c.benchmark_group(format!("httpd/{backend}"));
        g.throughput(Throughput::Bytes(SMALL_BYTES as u64));
        g.bench_function("get_4KiB", |b| {
            b.iter(|| assert_eq!(client.get(&format!("/{SMALL}")).unwrap(), SMALL_BYTES))
        });
        g.throughput(Throughput::Bytes(LARGE_BYTES as u64));
        g.sample_size(10).measurement_time(Duration::from_secs(5));
        g.bench_function("get_10MiB", |b| {
            b.iter(|| assert_eq!(client.get(&format!("/{LARGE}")).unwrap(), LARGE_BYTES))
        });
        g.finish();
    }
}

criterion_group!(benches, serve);
criterion_main!(benches);
