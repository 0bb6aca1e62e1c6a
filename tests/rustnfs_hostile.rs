//! rustnfs against hostile clients: memory under a thousand connections, one byte budget
//! for all of them, a client that stops reading, forged handles, and the RFC 5531 error
//! replies, each a test that fails when its protection is removed (issue 10 §1 and §3).
//!
//! The memory tests run the `rustnfs` binary as a child process, so the resident set they
//! read from `/proc/PID/status` is the server's alone.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use oncrpc::msg::{self, AuthStat, OpaqueAuth, Rejection, flavor};
use oncrpc::record;

use crate::common::{self, Nfsd};
use crate::support::rpc::Xdr;
use crate::support::server::ServerProc;

const NFS: u32 = 100_003;
const MOUNT: u32 = 100_005;
const NFS3ERR_STALE: u32 = 70;
const NFS3ERR_JUKEBOX: u32 = 10008;

fn word(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// An AUTH_SYS credential body for root.
fn auth_sys_body() -> Vec<u8> {
    Xdr::default()
        .u32(0)
        .opaque(b"hostile")
        .u32(0)
        .u32(0)
        .u32(0)
        .0
}

/// A raw RPC client on one blocking socket, framed by the `oncrpc` crate.
struct Raw {
    s: TcpStream,
    xid: u32,
}

impl Raw {
    fn connect(addr: SocketAddr) -> Raw {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        Raw { s, xid: 0x4000 }
    }

    /// Sends one call with `cred`; returns its xid.
    fn send_as(
        &mut self,
        cred: OpaqueAuth<'_>,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &[u8],
    ) -> u32 {
        self.xid += 1;
        let mut m = Vec::new();
        msg::encode_call(&mut m, self.xid, prog, vers, proc_, cred);
        m.extend_from_slice(args);
        record::write_blocking(&mut self.s, &m).unwrap();
        self.xid
    }

    fn send(&mut self, prog: u32, proc_: u32, args: &[u8]) -> u32 {
        let body = auth_sys_body();
        let cred = OpaqueAuth {
            flavor: flavor::AUTH_SYS,
            body: &body,
        };
        self.send_as(cred, prog, 3, proc_, args)
    }

    /// Reads one reply: its header and its record.
    fn recv(&mut self) -> std::io::Result<(msg::ReplyHeader, Vec<u8>)> {
        let rec = record::read_blocking(&mut self.s, 4 << 20)?;
        let h = msg::decode_reply(&rec).unwrap();
        Ok((h, rec))
    }

    /// One accepted, successful call; returns the procedure's results.
    fn call(&mut self, prog: u32, proc_: u32, args: &[u8]) -> Vec<u8> {
        let xid = self.send(prog, proc_, args);
        let (h, rec) = self.recv().unwrap();
        assert_eq!((h.xid, h.status), (xid, Ok(())), "prog {prog} proc {proc_}");
        rec[h.body..].to_vec()
    }

    fn mount_root(&mut self) -> Vec<u8> {
        let body = self.call(MOUNT, 1, &Xdr::default().opaque(b"/").0);
        assert_eq!(word(&body, 0), 0, "MNT status");
        let n = word(&body, 4) as usize;
        body[8..8 + n].to_vec()
    }

    fn lookup(&mut self, dir: &[u8], name: &[u8]) -> Vec<u8> {
        let body = self.call(NFS, 3, &Xdr::default().opaque(dir).opaque(name).0);
        assert_eq!(word(&body, 0), 0, "LOOKUP status");
        let n = word(&body, 4) as usize;
        body[8..8 + n].to_vec()
    }

    /// READ: `Ok(data)` or `Err(nfsstat3)`.
    fn read(&mut self, fh: &[u8], offset: u64, count: u32) -> Result<Vec<u8>, u32> {
        let args = Xdr::default().opaque(fh).u64(offset).u32(count).0;
        let body = self.call(NFS, 6, &args);
        let status = word(&body, 0);
        if status != 0 {
            return Err(status);
        }
        // post_op_attr present: a bool, then the 84-byte fattr3.
        let mut at = 4;
        if word(&body, at) == 1 {
            at += 4 + 84;
        } else {
            at += 4;
        }
        let n = word(&body, at + 8) as usize;
        Ok(body[at + 12..at + 12 + n].to_vec())
    }

    /// Reads a whole file in 1 MiB READs.
    fn read_file(&mut self, fh: &[u8], len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let chunk = self.read(fh, out.len() as u64, 1 << 20).unwrap();
            assert!(!chunk.is_empty(), "short file");
            out.extend_from_slice(&chunk);
        }
        out
    }
}

/// This test process needs a descriptor per client connection.
fn raise_nofile() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain struct out-parameter / in-parameter.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
        l.rlim_cur = l.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &l);
    }
}

/// The `rustnfs` binary serving `export` (the harness's supervisor underneath), killed
/// on drop.
struct Server {
    proc_: ServerProc,
    addr: SocketAddr,
}

impl Server {
    fn start(export: &Path, extra: &[&str]) -> Server {
        let addr = SocketAddr::from(([127, 0, 0, 1], common::free_port()));
        let proc_ = ServerProc::binary("rustnfs", "rustnfs", addr)
            .args([std::ffi::OsStr::new("--export"), export.as_os_str()])
            .args(["--listen", &addr.to_string()])
            .args(extra)
            .rust_log("error")
            .start();
        // Let the probe connection close before measuring.
        std::thread::sleep(Duration::from_millis(300));
        Server { proc_, addr }
    }

    /// The server's resident set in MB.
    fn rss_mb(&self) -> f64 {
        let pid = self.proc_.pid().unwrap() as u32;
        lab::sampler::rss_bytes(pid).unwrap() as f64 / (1024.0 * 1024.0)
    }

    /// Waits (at most `limit`) for the resident set to fall below `mb`; returns the last.
    fn rss_falls_below(&self, mb: f64, limit: Duration) -> f64 {
        let deadline = Instant::now() + limit;
        loop {
            let now = self.rss_mb();
            if now < mb || Instant::now() > deadline {
                return now;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Runs `per_thread` on `threads` threads and gathers their results.
fn parallel<T: Send>(threads: usize, per_thread: impl Fn(usize) -> Vec<T> + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let f = &per_thread;
                s.spawn(move || f(t))
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

const CONNECTIONS: usize = 1000;
/// Idle connections must not hold more than this in total (issue 10 §3).
const HELD_LIMIT_MB: f64 = 100.0;
/// After the clients leave, RSS comes back to within this of where it started.
const RETURN_MARGIN_MB: f64 = 16.0;

#[test]
fn a_thousand_connections_that_read_1mib_once_hold_no_buffers() {
    raise_nofile();
    let dir = tempfile::tempdir().unwrap();
    let data = lab::dataset::pseudo_random_bytes(1 << 20, 11);
    std::fs::write(dir.path().join("one.bin"), &data).unwrap();
    let srv = Server::start(dir.path(), &[]);
    let idle = srv.rss_mb();
    let mut rpc = Raw::connect(srv.addr);
    let root = rpc.mount_root();
    let fh = rpc.lookup(&root, b"one.bin");
    let started = Instant::now();
    let conns = parallel(8, |_| {
        (0..CONNECTIONS / 8)
            .map(|_| {
                let mut c = Raw::connect(srv.addr);
                assert_eq!(c.read(&fh, 0, 1 << 20).unwrap().len(), 1 << 20);
                c
            })
            .collect()
    });
    let held = srv.rss_mb();
    let took = started.elapsed();
    drop(conns);
    drop(rpc);
    let after = srv.rss_falls_below(idle + RETURN_MARGIN_MB, Duration::from_secs(8));
    eprintln!(
        "{CONNECTIONS} connections after one 1 MiB READ each ({took:.1?}): RSS idle {idle:.1} MB, \
         held {held:.1} MB, after close {after:.1} MB"
    );
    assert!(held < HELD_LIMIT_MB, "idle connections hold {held:.1} MB");
    assert!(
        after < idle + RETURN_MARGIN_MB,
        "RSS stayed at {after:.1} MB after the clients left (idle {idle:.1} MB)"
    );
}

#[test]
fn a_thousand_unfinished_1mib_records_share_one_budget() {
    raise_nofile();
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path(), &["--max-buffer-bytes", "64M"]);
    let idle = srv.rss_mb();
    // Each connection sends a 1 MiB fragment that is not the last one, and never the rest.
    let mut frag = (1u32 << 20).to_be_bytes().to_vec();
    frag.extend_from_slice(&vec![0x5a; 1 << 20]);
    let started = Instant::now();
    let mut conns: Vec<(TcpStream, usize)> = (0..CONNECTIONS)
        .map(|_| {
            let s = TcpStream::connect(srv.addr).unwrap();
            s.set_nonblocking(true).unwrap();
            (s, 0)
        })
        .collect();
    // Push as much as the sockets take, for a bounded time.
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        let mut progress = false;
        for (s, sent) in conns.iter_mut().filter(|(_, sent)| *sent < frag.len()) {
            if let Ok(n) = s.write(&frag[*sent..]) {
                *sent += n;
                progress |= n > 0;
            }
        }
        if conns.iter().all(|(_, sent)| *sent == frag.len()) {
            break;
        }
        if !progress {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let sent: usize = conns.iter().map(|(_, n)| n).sum();
    let held = srv.rss_mb();
    // Reset, not a graceful close: a graceful one would first deliver the ~900 MiB still
    // queued in the kernels, which the server reads (and drops) at its budget's pace.
    for (s, _) in &conns {
        abort_on_close(s);
    }
    drop(conns);
    let after = srv.rss_falls_below(idle + RETURN_MARGIN_MB, Duration::from_secs(8));
    eprintln!(
        "{CONNECTIONS} connections sent {} MiB of unfinished records in {:.1?}: RSS idle {idle:.1} MB, \
         held {held:.1} MB, after close {after:.1} MB",
        sent >> 20,
        started.elapsed()
    );
    assert!(sent > 256 << 20, "the attack only sent {} MiB", sent >> 20);
    assert!(held < HELD_LIMIT_MB, "unfinished records hold {held:.1} MB");
    assert!(
        after < idle + RETURN_MARGIN_MB,
        "RSS stayed at {after:.1} MB after the clients left (idle {idle:.1} MB)"
    );
}

/// Four clients each send 600 KiB of a 1 MiB fragment and stop: with a 2 MiB budget the
/// first holds its record's claim and the others wait for budget, with a fifth client's
/// 64 KiB WRITE queued behind them (its small calls, in its connection's share, are
/// answered meanwhile). When the four reset their connections the budget must come back
/// at once — from the holder, which reads the reset, and from the waiters, which see it
/// while waiting — not after the 30 s request timeout.
#[test]
fn records_stuck_waiting_for_budget_give_it_back_when_their_clients_reset() {
    const HOLDERS: usize = 4;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("target"), b"").unwrap();
    // The smallest budget rustnfs accepts: room for one largest record, not two.
    let srv = Server::start(dir.path(), &["--max-buffer-bytes", "2M"]);
    let mut part = (1u32 << 20).to_be_bytes().to_vec();
    part.extend_from_slice(&vec![0x5a; 600 << 10]);
    let stuck: Vec<TcpStream> = (0..HOLDERS)
        .map(|_| {
            let mut s = TcpStream::connect(srv.addr).unwrap();
            s.write_all(&part).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let mut bystander = Raw::connect(srv.addr);
    bystander
        .s
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    // Small calls need no budget.
    let root = bystander.mount_root();
    let fh = bystander.lookup(&root, b"target");
    let data = vec![0x33; 64 << 10];
    let write = Xdr::default()
        .opaque(&fh)
        .u64(0)
        .u32(data.len() as u32)
        .u32(2)
        .opaque(&data)
        .0;
    let xid = bystander.send(NFS, 7, &write);
    let blocked = bystander.recv();
    assert!(
        blocked.is_err(),
        "the 64 KiB WRITE was answered although unfinished records hold the whole budget"
    );
    for s in &stuck {
        abort_on_close(s);
    }
    let reset = Instant::now();
    drop(stuck);
    bystander
        .s
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (h, _) = bystander
        .recv()
        .expect("the WRITE still waits for budget 10 s after the four clients reset");
    let waited = reset.elapsed();
    eprintln!("WRITE answered {waited:.2?} after the four budget holders reset");
    assert_eq!((h.xid, h.status), (xid, Ok(())));
    assert!(
        waited < Duration::from_secs(5),
        "budget came back {waited:.1?} after the reset"
    );
}

/// Four honest clients send a 1 MiB WRITE each at once to a server whose budget holds two:
/// every call is answered. When a record was granted budget as its bytes arrived, the
/// four each got to 512 KiB — the whole 2 MiB between them — and each waited for more
/// that only the others could give back, until the 30 s request timeout closed all four
/// (600 clients writing 1 MiB blocks to the default 64 MiB budget saw the same).
#[test]
fn large_calls_that_together_exceed_the_budget_are_all_answered() {
    const CLIENTS: usize = 4;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("target"), b"").unwrap();
    let srv = Server::start(dir.path(), &["--max-buffer-bytes", "2M"]);
    let fh = {
        let mut c = Raw::connect(srv.addr);
        let root = c.mount_root();
        c.lookup(&root, b"target")
    };
    // WRITE of 1 MiB at offset 0 (FILE_SYNC), as a kernel client with wsize=1M sends.
    let body = auth_sys_body();
    let cred = OpaqueAuth {
        flavor: flavor::AUTH_SYS,
        body: &body,
    };
    let data = vec![0xab; 1 << 20];
    let mut call = Vec::new();
    msg::encode_call(&mut call, 0x77, NFS, 3, 7, cred);
    call.extend_from_slice(
        &Xdr::default()
            .opaque(&fh)
            .u64(0)
            .u32(data.len() as u32)
            .u32(2)
            .opaque(&data)
            .0,
    );
    let wire = record::frame(&call);
    let half = wire.len() / 2;
    let mut clients: Vec<TcpStream> = (0..CLIENTS)
        .map(|_| {
            let mut s = TcpStream::connect(srv.addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            s.write_all(&wire[..half]).unwrap();
            s
        })
        .collect();
    // Each record has half its bytes in before any has all of them.
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let writers: Vec<_> = clients
        .iter()
        .map(|s| {
            let mut s = s.try_clone().unwrap();
            let rest = wire[half..].to_vec();
            std::thread::spawn(move || s.write_all(&rest))
        })
        .collect();
    for (i, s) in clients.iter_mut().enumerate() {
        let reply = record::read_blocking(s, 1 << 20)
            .unwrap_or_else(|e| panic!("client {i} got no answer: {e}"));
        let h = msg::decode_reply(&reply).unwrap();
        assert_eq!((h.xid, h.status), (0x77, Ok(())), "client {i}");
        assert_eq!(word(&reply, h.body), 0, "client {i}: WRITE status");
    }
    for w in writers {
        w.join().unwrap().unwrap();
    }
    let took = started.elapsed();
    eprintln!("{CLIENTS} 1 MiB calls sharing a 2 MiB budget answered in {took:.2?}");
    assert!(took < Duration::from_secs(10), "answered after {took:.1?}");
}

/// SO_LINGER 0: closing sends a reset and discards what is queued.
fn abort_on_close(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket and a linger option value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Sets a small receive buffer, so replies back up quickly behind a client not reading.
fn small_receive_buffer(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let size: libc::c_int = 4096;
    // SAFETY: a valid socket and a c_int option value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[test]
fn a_client_that_pipelines_and_stops_reading_is_closed_and_frees_its_permit() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big");
    std::fs::create_dir(&big).unwrap();
    for i in 0..2000 {
        let name = format!("{i:05}-{}", "n".repeat(240));
        std::fs::File::create(big.join(name)).unwrap();
    }
    let mut config = rustnfs::Config::new(dir.path());
    config.max_connections = 1;
    config.request_timeout = Duration::from_secs(1);
    let nfsd = Nfsd::start(config).unwrap();
    let mut rpc = Raw::connect(nfsd.addr);
    let root = rpc.mount_root();
    let dirfh = rpc.lookup(&root, b"big");
    small_receive_buffer(&rpc.s);
    // Far more than the in-flight cap of large-reply calls (READDIRPLUS of long names),
    // and never a reply read.
    let args = Xdr::default()
        .opaque(&dirfh)
        .u64(0)
        .u64(0)
        .u32(1 << 20)
        .u32(1 << 20)
        .0;
    let mut batch = Vec::new();
    for i in 0..400u32 {
        let mut m = Vec::new();
        let body = auth_sys_body();
        let cred = OpaqueAuth {
            flavor: flavor::AUTH_SYS,
            body: &body,
        };
        msg::encode_call(&mut m, 0x9000 + i, NFS, 3, 17, cred);
        m.extend_from_slice(&args);
        batch.extend_from_slice(&record::frame(&m));
    }
    rpc.s
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = rpc.s.write_all(&batch);
    // The connection must be closed within a few request timeouts, freeing the only
    // connection permit for the next client.
    let started = Instant::now();
    let mut last = String::new();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the stalled client still holds its permit after {:?} ({last})",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(250));
        let Ok(s) = TcpStream::connect(nfsd.addr) else {
            continue;
        };
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut next = Raw { s, xid: 1 };
        next.send(NFS, 0, &[]);
        match next.recv() {
            Ok((h, _)) if h.status.is_ok() => break,
            Ok((h, _)) => last = format!("{:?}", h.status),
            Err(e) => last = e.to_string(),
        }
    }
    eprintln!(
        "stalled client closed; next client served after {:?}",
        started.elapsed()
    );
    drop(rpc);
}

#[test]
fn forged_handles_cost_a_bounded_number_of_walks_and_do_not_slow_reads() {
    // An export big enough that each walk costs real time.
    let dir = tempfile::tempdir().unwrap();
    for d in 0..100 {
        let sub = dir.path().join(format!("d{d:03}"));
        std::fs::create_dir(&sub).unwrap();
        for f in 0..300 {
            std::fs::File::create(sub.join(format!("f{f:04}"))).unwrap();
        }
    }
    let big = lab::dataset::pseudo_random_bytes(10 << 20, 5);
    std::fs::write(dir.path().join("big.bin"), &big).unwrap();
    let nfsd = Nfsd::exporting(dir.path()).unwrap();
    let mut rpc = Raw::connect(nfsd.addr);
    let root = rpc.mount_root();
    let fh = rpc.lookup(&root, b"big.bin");
    let timed_read = |rpc: &mut Raw| {
        let t = Instant::now();
        assert!(rpc.read_file(&fh, big.len()) == big);
        t.elapsed()
    };
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let quiet = median((0..3).map(|_| timed_read(&mut rpc)).collect());

    // 8 attackers: READs of random handles with the right generation prefix; four with
    // random birth times, four born "a moment ago" (newer than any walk, so each needs a
    // walk of its own).
    let stop = std::sync::atomic::AtomicBool::new(false);
    let generation = root[..8].to_vec();
    let addr = nfsd.addr;
    let attack_for = Duration::from_secs(4);
    let (under_attack, forged, walks) = std::thread::scope(|s| {
        let attackers: Vec<_> = (0..8u64)
            .map(|a| {
                let (stop, generation) = (&stop, &generation);
                s.spawn(move || {
                    let mut c = Raw::connect(addr);
                    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ a;
                    let mut sent = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        let now_ns = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .unwrap()
                            .as_nanos() as u64;
                        let btime = if a % 2 == 0 {
                            seed.rotate_left(17)
                        } else {
                            now_ns - (seed % 1_000_000)
                        };
                        let mut h = generation.clone();
                        h.extend_from_slice(&(seed | 1 << 40).to_le_bytes());
                        h.extend_from_slice(&btime.to_le_bytes());
                        let status = c.read(&h, 0, 4096).unwrap_err();
                        assert!(
                            status == NFS3ERR_STALE || status == NFS3ERR_JUKEBOX,
                            "forged handle answered {status}"
                        );
                        sent += 1;
                    }
                    sent
                })
            })
            .collect();
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(500));
        let mut times = Vec::new();
        while started.elapsed() < attack_for || times.len() < 3 {
            times.push(timed_read(&mut rpc));
        }
        let walks_during = nfsd
            .registry
            .snapshot()
            .get(&latency::Key::new("export_walk", "vfs", "ok"))
            .map_or(0, |s| s.count());
        let elapsed = started.elapsed();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let forged: u64 = attackers.into_iter().map(|h| h.join().unwrap()).sum();
        (median(times), forged, (walks_during, elapsed))
    });
    let (walks, elapsed) = walks;
    eprintln!(
        "10 MiB read: {quiet:.3?} quiet, {under_attack:.3?} under attack \
         ({forged} forged READs, {walks} export walks in {elapsed:.1?})"
    );
    assert!(forged > 1000, "the attack sent only {forged} calls");
    // One walk at most per second (the minimum gap), plus the first.
    let allowed = 2 + elapsed.as_secs();
    assert!(
        walks <= allowed,
        "{walks} walks in {elapsed:?} (at most {allowed})"
    );
    // Under 0.5 s as issue 10 asks; on a machine so loaded that even the quiet read is
    // slow, no worse than 4× the quiet read.
    let limit = Duration::from_millis(500).max(quiet * 4);
    assert!(
        under_attack < limit,
        "10 MiB read took {under_attack:?} under attack ({quiet:?} quiet)"
    );
    // The legitimate handle still works, and so does a real file's.
    let d = rpc.lookup(&root, b"d007");
    let f = rpc.lookup(&d, b"f0042");
    assert_eq!(rpc.read(&f, 0, 10).unwrap(), b"");
}

#[test]
fn rpc_errors_follow_rfc_5531_and_never_are_silence() {
    let dir = tempfile::tempdir().unwrap();
    let nfsd = Nfsd::exporting(dir.path()).unwrap();
    let mut c = Raw::connect(nfsd.addr);
    let sys = auth_sys_body();
    let sys = OpaqueAuth {
        flavor: flavor::AUTH_SYS,
        body: &sys,
    };
    let mut expect = |cred: OpaqueAuth<'_>, prog, vers, want: Rejection| {
        let xid = c.send_as(cred, prog, vers, 0, &[]);
        let (h, _) = c.recv().expect("an answer, not silence");
        assert_eq!(
            (h.xid, h.status),
            (xid, Err(want)),
            "prog {prog} vers {vers}"
        );
    };
    // Unsupported flavours: RPCSEC_GSS, AUTH_DH.
    for f in [flavor::RPCSEC_GSS, flavor::AUTH_DH] {
        let cred = OpaqueAuth {
            flavor: f,
            body: b"opaque token",
        };
        expect(cred, NFS, 3, Rejection::Auth(AuthStat::RejectedCred));
    }
    // A malformed AUTH_SYS body, and AUTH_NONE with a body.
    let bad = OpaqueAuth {
        flavor: flavor::AUTH_SYS,
        body: &[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff],
    };
    expect(bad, NFS, 3, Rejection::Auth(AuthStat::BadCred));
    let none_with_body = OpaqueAuth {
        flavor: flavor::AUTH_NONE,
        body: b"xxxx",
    };
    expect(none_with_body, MOUNT, 3, Rejection::Auth(AuthStat::BadCred));
    // Programs and versions.
    expect(sys, 100_099, 1, Rejection::ProgUnavail);
    expect(sys, 100_227, 3, Rejection::ProgUnavail); // NFS_ACL
    expect(sys, NFS, 5, Rejection::ProgMismatch { low: 3, high: 4 });
    expect(sys, NFS, 2, Rejection::ProgMismatch { low: 3, high: 4 });
    expect(sys, MOUNT, 1, Rejection::ProgMismatch { low: 3, high: 3 });
    expect(sys, 100_000, 4, Rejection::ProgMismatch { low: 2, high: 2 });
    // RPC version 3, and a credential longer than RFC 5531's 400 bytes: raw bytes.
    let mut v3 = Vec::new();
    msg::encode_call(&mut v3, 0x77, NFS, 3, 0, sys);
    v3[8..12].copy_from_slice(&3u32.to_be_bytes());
    record::write_blocking(&mut c.s, &v3).unwrap();
    let (h, rec) = c.recv().unwrap();
    assert_eq!((h.xid, h.status), (0x77, Err(Rejection::RpcMismatch)));
    assert_eq!(
        (word(&rec, 16), word(&rec, 20)),
        (2, 2),
        "supported low/high"
    );
    let long = Xdr::default()
        .u32(0x78)
        .u32(0)
        .u32(2)
        .u32(NFS)
        .u32(3)
        .u32(0)
        .u32(flavor::AUTH_SYS)
        .opaque(&[0; 1000])
        .u32(0)
        .u32(0)
        .0;
    record::write_blocking(&mut c.s, &long).unwrap();
    let (h, _) = c.recv().unwrap();
    assert_eq!(
        (h.xid, h.status),
        (0x78, Err(Rejection::Auth(AuthStat::BadCred)))
    );
    // The connection survived all of it.
    let xid = c.send(NFS, 0, &[]);
    let (h, _) = c.recv().unwrap();
    assert_eq!((h.xid, h.status), (xid, Ok(())));
    let mut buf = [0u8; 1];
    c.s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    assert!(
        c.s.read(&mut buf).is_err(),
        "no stray bytes after the replies"
    );
}

/// NFSv4 COMPOUNDs over a real socket, through the guard (issue 26): malformed
/// arguments are `NFS4ERR_BADXDR`, minor version 3 `NFS4ERR_MINOR_VERS_MISMATCH`, an
/// unknown procedure PROC_UNAVAIL, and a COMPOUND of 128 one-MiB READs is answered in
/// part within one bounded reply (`NFS4ERR_RESOURCE` once it is full) — never a closed
/// connection, never silence; the same connection then serves v3 as before.
#[test]
fn nfs4_compounds_over_a_socket_are_answered_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let data = lab::dataset::pseudo_random_bytes(3 << 20, 26);
    std::fs::write(dir.path().join("big"), &data).unwrap();
    let nfsd = Nfsd::exporting(dir.path()).unwrap();
    let mut c = Raw::connect(nfsd.addr);
    let body = auth_sys_body();
    let sys = OpaqueAuth {
        flavor: flavor::AUTH_SYS,
        body: &body,
    };
    let v4 = |c: &mut Raw, proc_: u32, args: &[u8]| {
        let xid = c.send_as(sys, NFS, 4, proc_, args);
        let (h, rec) = c.recv().expect("an answer, not silence");
        assert_eq!(h.xid, xid);
        (h, rec)
    };
    let (h, _) = v4(&mut c, 0, &[]);
    assert_eq!(h.status, Ok(()), "v4 NULL");
    let (h, _) = v4(&mut c, 2, &[]);
    assert_eq!(h.status, Err(Rejection::ProcUnavail));
    let compound = |minor: u32, ops: &[Xdr]| {
        let mut x = Xdr::default().opaque(b"").u32(minor).u32(ops.len() as u32);
        for o in ops {
            x.0.extend_from_slice(&o.0);
        }
        x.0
    };
    let status = |h: &msg::ReplyHeader, rec: &[u8]| word(rec, h.body);
    const BADXDR: u32 = 10036;
    const RESOURCE: u32 = 10018;
    const MINOR_VERS_MISMATCH: u32 = 10021;
    let (h, rec) = v4(&mut c, 1, &compound(3, &[Xdr::default().u32(24)]));
    assert_eq!(status(&h, &rec), MINOR_VERS_MISMATCH);
    // PUTROOTFH, then a LOOKUP whose name claims 4 GiB.
    let (h, rec) = v4(
        &mut c,
        1,
        &compound(
            0,
            &[Xdr::default().u32(24), Xdr::default().u32(15).u32(u32::MAX)],
        ),
    );
    assert_eq!(status(&h, &rec), BADXDR);
    // PUTROOTFH, LOOKUP big, then 128 READs of 1 MiB with the anonymous stateid.
    let mut ops = vec![
        Xdr::default().u32(24),
        Xdr::default().u32(15).opaque(b"big"),
    ];
    for i in 0..126u64 {
        ops.push(
            Xdr::default()
                .u32(25)
                .u32(0) // the anonymous stateid: seqid 0, 12 zero bytes
                .u32(0)
                .u32(0)
                .u32(0)
                .u64((i % 3) << 20)
                .u32(1 << 20),
        );
    }
    let (h, rec) = v4(&mut c, 1, &compound(0, &ops));
    assert_eq!(h.status, Ok(()));
    assert_eq!(status(&h, &rec), RESOURCE);
    assert!(
        rec.len() < (2 << 20) + (128 << 10),
        "reply of {} bytes",
        rec.len()
    );
    // The first READ's data is the file's first MiB: after the status, the empty tag,
    // the count, PUTROOTFH's and LOOKUP's results, READ's number, status and eof.
    let first = h.body + 12 + 8 + 8 + 8 + 4;
    assert_eq!(word(&rec, first), 1 << 20);
    assert_eq!(&rec[first + 4..first + 4 + 64], &data[..64]);
    // The connection still serves v3.
    let root = c.mount_root();
    let fh = c.lookup(&root, b"big");
    assert_eq!(c.read_file(&fh, data.len()), data);
}

// ---- Availability under cheap attacks (issue 22) ----------------------------------------

/// Where attacking connections come from: all from 127.0.0.2, or spread over 127.0.0.2
/// to 127.0.0.9. The legitimate client is 127.0.0.1.
#[derive(Clone, Copy, Debug)]
enum Origin {
    One,
    Several,
}

impl Origin {
    fn addr(self, i: usize) -> std::net::Ipv4Addr {
        match self {
            Origin::One => std::net::Ipv4Addr::new(127, 0, 0, 2),
            Origin::Several => std::net::Ipv4Addr::new(127, 0, 0, 2 + (i % 8) as u8),
        }
    }
}

/// A TCP connection to `to` from `from` (any port).
fn connect_from(from: std::net::Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket calls on a descriptor owned here until handed to TcpStream.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let s = TcpStream::from_raw_fd(fd);
        let sin = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(ip).to_be(),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let local = sin(from, 0);
        if libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let SocketAddr::V4(to) = to else {
            unreachable!("loopback v4 only")
        };
        let remote = sin(*to.ip(), to.port());
        if libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(s)
    }
}

/// Writes `bytes` to every connection (non-blocking) for at most `limit`; returns the
/// bytes the kernel took in all.
fn push_all(conns: &mut [TcpStream], bytes: &[u8], limit: Duration) -> usize {
    let mut sent = vec![0usize; conns.len()];
    for s in conns.iter() {
        s.set_nonblocking(true).unwrap();
    }
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let mut progress = false;
        for (s, n) in conns.iter_mut().zip(&mut sent) {
            if *n < bytes.len()
                && let Ok(k) = s.write(&bytes[*n..])
            {
                *n += k;
                progress |= k > 0;
            }
        }
        if sent.iter().all(|n| *n == bytes.len()) {
            break;
        }
        if !progress {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    sent.iter().sum()
}

/// One cheap attack of the issue 22 table.
#[derive(Clone, Copy, Debug)]
enum Attack {
    /// A 4-byte mark claiming a 1 MiB record, nothing more.
    Claims,
    /// Half of a 1 MiB record, then nothing.
    HalfRecords,
    /// A 1 MiB fragment that is not the last, then nothing.
    Fragments,
    /// A READDIRPLUS with maxcount 2^32-1 on a large directory, its reply never read.
    UnreadReaddirplus,
    /// A 1 MiB FILE_SYNC WRITE after another, for as long as the victim reads.
    Writers,
    /// Connections that send nothing, as many as the server's connection cap.
    IdleAtCap,
}

/// What an attack left behind: its connections (held until dropped) and its writers.
struct Running {
    conns: Vec<TcpStream>,
    stop: Option<(
        std::sync::Arc<std::sync::atomic::AtomicBool>,
        Vec<std::thread::JoinHandle<u64>>,
    )>,
    /// What the attack really sent or did, for the report and the check.
    sent: String,
}

impl Running {
    /// Stops the writers (returning the WRITEs answered) and resets every connection.
    fn end(self) -> u64 {
        let mut writes = 0;
        if let Some((stop, threads)) = self.stop {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            writes = threads.into_iter().map(|t| t.join().unwrap()).sum();
        }
        for s in &self.conns {
            abort_on_close(s);
        }
        writes
    }
}

/// The handles an attack needs from the export.
struct Targets {
    big_dir: Vec<u8>,
    write_file: Vec<u8>,
}

fn start_attack(
    attack: Attack,
    n: usize,
    origin: Origin,
    addr: SocketAddr,
    t: &Targets,
) -> Running {
    let connect_all = || -> Vec<TcpStream> {
        (0..n)
            .map(|i| connect_from(origin.addr(i), addr).unwrap())
            .collect()
    };
    let cred_body = auth_sys_body();
    let call = |proc_: u32, args: &[u8]| {
        let mut m = Vec::new();
        let cred = OpaqueAuth {
            flavor: flavor::AUTH_SYS,
            body: &cred_body,
        };
        msg::encode_call(&mut m, 0x5150, NFS, 3, proc_, cred);
        m.extend_from_slice(args);
        record::frame(&m)
    };
    match attack {
        Attack::Claims => {
            let mut conns = connect_all();
            let mark = (record::LAST_FRAGMENT | (1 << 20)).to_be_bytes();
            let sent = push_all(&mut conns, &mark, Duration::from_secs(2));
            assert_eq!(sent, 4 * n, "every mark was sent");
            Running {
                conns,
                stop: None,
                sent: format!("{sent} bytes of marks"),
            }
        }
        Attack::HalfRecords | Attack::Fragments => {
            let mut conns = connect_all();
            let (mark, len) = match attack {
                Attack::HalfRecords => (record::LAST_FRAGMENT | (1 << 20), 512 << 10),
                _ => (1 << 20, 1 << 20),
            };
            let mut bytes = u32::to_be_bytes(mark).to_vec();
            bytes.resize(4 + len, 0x5a);
            let sent = push_all(&mut conns, &bytes, Duration::from_secs(2));
            // The kernels take more than the server's budget: the attack reached past it.
            assert!(
                sent >= bytes.len() * n.min(128),
                "the attack sent only {} KiB",
                sent >> 10
            );
            Running {
                conns,
                stop: None,
                sent: format!("{} MiB", sent >> 20),
            }
        }
        Attack::UnreadReaddirplus => {
            let mut conns = connect_all();
            for s in &conns {
                small_receive_buffer(s);
            }
            let args = Xdr::default()
                .opaque(&t.big_dir)
                .u64(0)
                .u64(0)
                .u32(u32::MAX)
                .u32(u32::MAX)
                .0;
            let rec = call(17, &args);
            let sent = push_all(&mut conns, &rec, Duration::from_secs(2));
            assert_eq!(sent, rec.len() * n, "every call was sent");
            Running {
                conns,
                stop: None,
                sent: format!("{n} calls of {} bytes", rec.len()),
            }
        }
        Attack::Writers => {
            let data = vec![0xab; 1 << 20];
            let args = Xdr::default()
                .opaque(&t.write_file)
                .u64(0)
                .u32(data.len() as u32)
                .u32(2)
                .opaque(&data)
                .0;
            let rec = std::sync::Arc::new(call(7, &args));
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let threads = (0..n)
                .map(|i| {
                    let (rec, stop) = (rec.clone(), stop.clone());
                    let from = origin.addr(i);
                    std::thread::spawn(move || {
                        let mut done = 0;
                        let Ok(mut s) = connect_from(from, addr) else {
                            return 0;
                        };
                        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            if s.write_all(&rec).is_err()
                                || record::read_blocking(&mut s, 1 << 16).is_err()
                            {
                                break;
                            }
                            done += 1;
                        }
                        done
                    })
                })
                .collect();
            // Let the writers get going.
            std::thread::sleep(Duration::from_millis(500));
            Running {
                conns: Vec::new(),
                stop: Some((stop, threads)),
                sent: format!("{n} writers"),
            }
        }
        Attack::IdleAtCap => {
            let conns = connect_all();
            // Each was accepted (and holds a slot) before the victim comes.
            std::thread::sleep(Duration::from_millis(300));
            Running {
                conns,
                stop: None,
                sent: format!("{n} idle connections"),
            }
        }
    }
}

/// The legitimate client: a fresh connection from 127.0.0.1, MOUNT, LOOKUP, and the
/// 10 MiB file in 1 MiB READs; the time it took (the whole of it) and whether every
/// byte was right.
fn victim_read(addr: SocketAddr, want: &[u8]) -> (Duration, bool) {
    let t = Instant::now();
    let mut c = Raw::connect(addr);
    c.s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    let root = c.mount_root();
    let fh = c.lookup(&root, b"victim.bin");
    let got = c.read_file(&fh, want.len());
    (t.elapsed(), got == want)
}

/// Every row of issue 22's table against rustnfs, at 64, 256 and 1,000 attacking
/// connections, from one address and from several: the legitimate client's 10 MiB read
/// completes byte-exact within max(1 s, 2 × quiet + 0.5 s), the server's RSS stays within
/// its buffer budget plus a fixed overhead, and falls back within a few seconds after.
#[test]
fn a_10mib_read_is_served_beside_every_cheap_attack() {
    raise_nofile();
    let rows: &[(Attack, &[&str])] = &[
        (Attack::Claims, &[]),
        (Attack::HalfRecords, &[]),
        (Attack::Fragments, &[]),
        (Attack::UnreadReaddirplus, &["--max-buffer-bytes", "4M"]),
        (Attack::IdleAtCap, &[]),
        // Slow calls run 8 at once (`SLOW_CALLS_AT_ONCE`): unbounded, 1,000 writers of
        // 1 MiB FILE_SYNC blocks were 1,000 runnable threads and the victim took
        // 0.6–0.9 s at load 19 (just over 1 s at 256 on a loaded machine); bounded, 0.06–0.11 s.
        (Attack::Writers, &[]),
    ];
    // `AVAIL_ROWS=Claims,Writers` runs only those rows.
    let only = std::env::var("AVAIL_ROWS").ok();
    let dir = tempfile::tempdir().unwrap();
    let victim = lab::dataset::pseudo_random_bytes(10 << 20, 22);
    std::fs::write(dir.path().join("victim.bin"), &victim).unwrap();
    std::fs::write(dir.path().join("written"), b"").unwrap();
    let big = dir.path().join("big");
    std::fs::create_dir(&big).unwrap();
    // ~1.8 MB of READDIRPLUS reply, over the 1 MiB a reply may be.
    for i in 0..5000 {
        std::fs::File::create(big.join(format!("{i:05}-{}", "n".repeat(200)))).unwrap();
    }
    let mut failures = Vec::new();
    for &(attack, flags) in rows {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|r| format!("{attack:?}") == r))
        {
            continue;
        }
        for n in [64, 256, 1000] {
            let mut flags = flags.to_vec();
            let cap = n.to_string();
            if matches!(attack, Attack::IdleAtCap) {
                flags.extend(["--max-connections", &cap]);
            }
            let budget_mb = if matches!(attack, Attack::UnreadReaddirplus) {
                4.0
            } else {
                64.0
            };
            let srv = Server::start(dir.path(), &flags);
            let targets = {
                let mut c = Raw::connect(srv.addr);
                let root = c.mount_root();
                Targets {
                    big_dir: c.lookup(&root, b"big"),
                    write_file: c.lookup(&root, b"written"),
                }
            };
            let quiet = (0..3)
                .map(|_| victim_read(srv.addr, &victim).0)
                .min()
                .unwrap();
            let idle = srv.rss_falls_below(0.0, Duration::ZERO);
            let limit = Duration::from_secs(1).max(quiet * 2 + Duration::from_millis(500));
            // Up to three attempts per row: a neighbour's burst on a shared machine fails
            // one (a CI rehearsal's debug build beside the suite: 256 writers from one
            // address 2.15 s once, 0.37-0.88 s otherwise; release here 0.17-0.28 s), a
            // regression (22-29 s before the fixes) all three.
            for origin in [Origin::One, Origin::Several] {
                for attempt in 1..=3 {
                    let running = start_attack(attack, n, origin, srv.addr, &targets);
                    // The median of three reads (each on a new connection), so one slice of
                    // a loaded machine's noise does not decide the row.
                    let mut reads: Vec<(Duration, bool)> = (0..3)
                        .map(|_| {
                            let t = Instant::now();
                            std::panic::catch_unwind(|| victim_read(srv.addr, &victim))
                                .unwrap_or((t.elapsed(), false))
                        })
                        .collect();
                    reads.sort();
                    let (took, _) = reads[1];
                    let exact = reads.iter().all(|(_, exact)| *exact);
                    let held = srv.rss_mb();
                    let sent = running.sent.clone();
                    let writes = running.end();
                    let after =
                        srv.rss_falls_below(idle + RETURN_MARGIN_MB, Duration::from_secs(5));
                    // The fixed overhead beside the budget: 16 MB, and per attacking
                    // connection its share (at most 25 KiB while in a call) and its task.
                    let allowed = idle + budget_mb + 16.0 + n as f64 * 32.0 / 1024.0;
                    let line = format!(
                        "{attack:?} x{n} from {origin:?}, attempt {attempt} ({sent}{}): victim {took:.2?}{} \
                         (quiet {quiet:.2?}, limit {limit:.2?}), RSS idle {idle:.1} MB, \
                         during {held:.1} MB (allowed {allowed:.1}), after {after:.1} MB",
                        if writes > 0 {
                            format!(", {writes} WRITEs answered")
                        } else {
                            String::new()
                        },
                        if exact { "" } else { " NOT byte-exact" },
                    );
                    eprintln!("{line}");
                    let over =
                        !exact || took > limit || held > allowed || after > idle + RETURN_MARGIN_MB;
                    if !over {
                        break;
                    }
                    if attempt == 3 {
                        failures.push(line);
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "rows over the goal:\n{}",
        failures.join("\n")
    );
}
