//! httpd's request path in-process: a 4 KiB and a 10 MiB file over one keep-alive
//! connection, from local storage and from an in-process rustnfs.

use std::time::Duration;

use benches::{HTTP_TIMEOUT, LARGE, LARGE_BYTES, Lab, SMALL, SMALL_BYTES};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lab::http::Connection;

fn serve(c: &mut Criterion) {
    let lab = Lab::start().expect("start the in-process servers");
    for (backend, addr) in [("local", lab.http_local), ("nfs", lab.http_nfs)] {
        let mut client = Connection::connect(addr, HTTP_TIMEOUT).expect("connect to httpd");
        let mut g = c.benchmark_group(format!("httpd/{backend}"));
        g.throughput(Throughput::Bytes(SMALL_BYTES as u64));
        g.bench_function("get_4KiB", |b| {
            b.iter(|| assert_eq!(client.get_len(&format!("/{SMALL}")).unwrap(), SMALL_BYTES))
        });
        g.throughput(Throughput::Bytes(LARGE_BYTES as u64));
        g.sample_size(10).measurement_time(Duration::from_secs(5));
        g.bench_function("get_10MiB", |b| {
            b.iter(|| assert_eq!(client.get_len(&format!("/{LARGE}")).unwrap(), LARGE_BYTES))
        });
        g.finish();
    }
}

criterion_group!(benches, serve);
criterion_main!(benches);
