//! The load generator's own cost per request against an in-process httpd (4 KiB,
//! keep-alive, one connection) next to the minimal hand-written client doing the same
//! requests: the difference is loadgen's per-request overhead. Plus its tcp:// path
//! against the in-process `loadgen::tcp::serve` sink.

use std::time::{Duration, Instant};

use benches::{HTTP_TIMEOUT, Lab, SMALL, SMALL_BYTES};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lab::http::Connection;
use loadgen::{LoadPlan, Schedule};

fn per_request(c: &mut Criterion) {
    let lab = Lab::start().expect("start the in-process servers");
    let url = format!("http://{}/{SMALL}", lab.http_local);
    let mut g = c.benchmark_group("loadgen/http_4KiB_c1");
    g.throughput(Throughput::Elements(1));
    g.bench_function("loadgen", |b| {
        b.iter_custom(|iters| {
            let mut plan = LoadPlan::new(&url, Schedule::Count(iters.max(1)), 1).unwrap();
            plan.options.threads = 1;
            let report = loadgen::run(plan).unwrap();
            assert_eq!(report.failed(), 0, "{:?}", report.first_error);
            report.duration
        })
    });
    let mut client = Connection::connect(lab.http_local, HTTP_TIMEOUT).unwrap();
    g.bench_function("minimal_client", |b| {
        b.iter(|| assert_eq!(client.get_len(&format!("/{SMALL}")).unwrap(), SMALL_BYTES))
    });
    g.finish();

    // tcp://: bytes per second through loadgen's client against its own sink.
    let block = 128 * 1024;
    let sink = lab::inproc::TcpServer::tcp_on(Some(lab.rt.handle()), block).unwrap();
    let addr = sink.addr;
    let mut g = c.benchmark_group("loadgen/tcp");
    g.throughput(Throughput::Bytes(block as u64));
    g.bench_function("write_128KiB", |b| {
        b.iter_custom(|iters| {
            let mut plan =
                LoadPlan::new(&format!("tcp://{addr}"), Schedule::Count(iters.max(1)), 1).unwrap();
            plan.options.block_size = block;
            plan.options.threads = 1;
            let start = Instant::now();
            let report = loadgen::run(plan).unwrap();
            assert_eq!(report.failed(), 0, "{:?}", report.first_error);
            report
                .duration
                .max(Duration::from_nanos(1))
                .min(start.elapsed())
        })
    });
    g.finish();
    drop(sink);
}

criterion_group!(benches, per_request);
criterion_main!(benches);
