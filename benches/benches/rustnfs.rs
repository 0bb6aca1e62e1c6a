//! rustnfs through the RPC layer: READ (4 KiB and 1 MiB), GETATTR and LOOKUP issued by
//! nfsclient over one loopback connection to an in-process server.

use std::hint::black_box;

use benches::{LARGE, Lab, SMALL};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nfsclient::{Client, ClientConfig, NfsUrl};

fn rpc(c: &mut Criterion) {
    let lab = Lab::start().expect("start the in-process servers");
    let url = NfsUrl::parse(&lab.nfs_url("")).expect("nfs url");
    let cfg = ClientConfig {
        connections: 1,
        ..ClientConfig::default()
    };
    let client = lab
        .rt
        .block_on(Client::connect(&url, cfg))
        .expect("mount rustnfs");
    let root = client.root();
    let (large, _) = lab.rt.block_on(client.lookup(&root, LARGE)).unwrap();
    let (small, _) = lab.rt.block_on(client.lookup(&root, SMALL)).unwrap();

    let mut g = c.benchmark_group("rustnfs");
    g.bench_function("GETATTR", |b| {
        b.to_async(&lab.rt)
            .iter(|| async { black_box(client.getattr(&small).await.unwrap()) })
    });
    g.bench_function("LOOKUP", |b| {
        b.to_async(&lab.rt)
            .iter(|| async { black_box(client.lookup(&root, SMALL).await.unwrap()) })
    });
    for (name, fh, count) in [
        ("READ_4KiB", &small, 4096u32),
        ("READ_1MiB", &large, 1 << 20),
    ] {
        g.throughput(Throughput::Bytes(u64::from(count)));
        let mut offset = 0u64;
        g.bench_function(name, |b| {
            b.to_async(&lab.rt).iter(|| {
                // Walk the 10 MiB file so each READ touches new pages of the cache.
                let at = offset;
                offset = (offset + u64::from(count)) % (10 << 20);
                let at = if count == 4096 { 0 } else { at };
                let client = &client;
                async move { black_box(client.read(fh, at, count).await.unwrap()) }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, rpc);
criterion_main!(benches);
