//! rustnfs through the RPC layer: READ (4 KiB and 1 MiB), GETATTR and LOOKUP issued by
//! nfsclient over one loopback connection to an in-process server; and what routing a
//! call to its export costs (`rustnfs::exports`): GETATTR on the export's `DirFs`
//! directly, through a one-export table, and through an exports file's three.

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

/// GETATTR of one file: on the `DirFs` itself, and routed by its handle through the
/// exports (the one-export flags' table; the third export of a three-line file with
/// client lists), as a call from a loopback client.
fn route(c: &mut Criterion) {
    use rustnfs::exports::{CallFrom, CallScope, Exports};
    let tmp = tempfile::tempdir().unwrap();
    for d in ["a", "b", "c"] {
        std::fs::create_dir(tmp.path().join(d)).unwrap();
        std::fs::write(tmp.path().join(d).join("f"), b"x").unwrap();
    }
    let registry = latency::Registry::new("bench");
    let config = rustnfs::Config::new(tmp.path().join("c"));
    let fs = rustnfs::fs::DirFs::open(&config, registry.clone()).unwrap();
    let (fh, _) = fs.lookup(&fs.root_fh(), b"f").0.unwrap();
    let one = Exports::from(fs.clone());
    let file = tmp.path().join("exports");
    let p = |d: &str| tmp.path().join(d).display().to_string();
    let text = format!(
        "{} 10.0.0.0/8(rw) 192.168.0.0/16(ro)\n{} 10.1.2.3(rw) *(ro)\n{} 10.0.0.0/8(ro) 127.0.0.0/8(rw,all_squash)\n",
        p("a"),
        p("b"),
        p("c")
    );
    std::fs::write(&file, text).unwrap();
    let mut three_config = rustnfs::Config::new("/");
    three_config.exports_file = Some(file);
    let three = Exports::open(&three_config, registry).unwrap();
    let _from = CallScope::enter(CallFrom {
        peer: Some("127.0.0.1:40000".parse().unwrap()),
        v4: false,
    });
    let root = three.mount(p("c").as_bytes()).unwrap();
    let (fh3, _) = three.lookup(&root, b"f").0.unwrap();
    let mut g = c.benchmark_group("rustnfs_route");
    g.bench_function("GETATTR_direct", |b| {
        b.iter(|| black_box(fs.attr(&fh).unwrap()))
    });
    g.bench_function("GETATTR_one_export", |b| {
        b.iter(|| black_box(one.attr(&fh).unwrap()))
    });
    g.bench_function("GETATTR_three_exports", |b| {
        b.iter(|| black_box(three.attr(&fh3).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, rpc, route);
criterion_main!(benches);
