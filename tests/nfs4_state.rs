//! NFSv4 state judged with raw COMPOUNDs beside NFS-Ganesha (issue 31 §3 and §4): I/O
//! under the special stateids honours other clients' share reservations exactly as
//! Ganesha answers, and one client flooding the server with owners, client ids, locks
//! or SETCLIENTID purges cannot take NFSv4 away from the others.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::common::Nfsd;
use crate::support::ganesha;
use crate::support::nfs4::{ANONYMOUS, BOTH, BYPASS, Ops, READ, Stateid, V4, WRITE, op, st};

/// What client B does while client A holds its open.
#[derive(Clone, Copy, Debug)]
enum Io {
    Read(Stateid),
    Write(Stateid),
    Truncate(Stateid),
}

/// One row: A's open (access, deny), whether A also holds a write lock on bytes 0–9,
/// and B's call.
struct Row {
    what: &'static str,
    access: u32,
    deny: u32,
    lock: bool,
    io: Io,
}

const NONE: u32 = 0;

fn rows() -> Vec<Row> {
    let r = |what, access, deny, lock, io| Row {
        what,
        access,
        deny,
        lock,
        io,
    };
    // A stateid whose `other` is all zeros but whose seqid is not: reserved, not special.
    let zero_other = (1, [0u8; 12]);
    vec![
        r(
            "WRITE, anonymous, A denies WRITE",
            READ,
            WRITE,
            false,
            Io::Write(ANONYMOUS),
        ),
        r(
            "READ, anonymous, A denies READ",
            BOTH,
            READ,
            false,
            Io::Read(ANONYMOUS),
        ),
        r(
            "SETATTR size, anonymous, A denies BOTH",
            BOTH,
            BOTH,
            false,
            Io::Truncate(ANONYMOUS),
        ),
        r(
            "READ, bypass, A denies READ",
            BOTH,
            READ,
            false,
            Io::Read(BYPASS),
        ),
        r(
            "WRITE, bypass, A denies WRITE",
            READ,
            WRITE,
            false,
            Io::Write(BYPASS),
        ),
        r(
            "SETATTR size, bypass, A denies WRITE",
            READ,
            WRITE,
            false,
            Io::Truncate(BYPASS),
        ),
        r(
            "WRITE, anonymous, A denies READ only",
            BOTH,
            READ,
            false,
            Io::Write(ANONYMOUS),
        ),
        r(
            "READ, anonymous, A denies WRITE only",
            READ,
            WRITE,
            false,
            Io::Read(ANONYMOUS),
        ),
        r(
            "WRITE, anonymous, A denies nothing",
            BOTH,
            NONE,
            false,
            Io::Write(ANONYMOUS),
        ),
        r(
            "WRITE, anonymous, inside A's write lock",
            BOTH,
            NONE,
            true,
            Io::Write(ANONYMOUS),
        ),
        r(
            "READ, anonymous, inside A's write lock",
            BOTH,
            NONE,
            true,
            Io::Read(ANONYMOUS),
        ),
        r(
            "READ, other all zeros with seqid 1",
            BOTH,
            NONE,
            false,
            Io::Read(zero_other),
        ),
    ]
}

/// The file each row works on, with its content.
fn row_file(i: usize) -> String {
    format!("row{i:02}")
}

const CONTENT: &[u8] = b"0123456789abcdef";

pub(crate) fn write_rows(dir: &Path) {
    for i in 0..rows().len() {
        std::fs::write(dir.join(row_file(i)), CONTENT).unwrap();
    }
}

/// What each row's B does (the raw suite's row names).
pub(crate) fn row_names() -> Vec<&'static str> {
    rows().iter().map(|r| r.what).collect()
}

/// Runs every row against the server at `addr`: B's status per row.
pub(crate) fn run_rows(addr: SocketAddr, tag: &str) -> Vec<u32> {
    let mut a = V4::connect(addr);
    let cid = a
        .client(format!("share-rows-A-{tag}").as_bytes())
        .expect("client A");
    let mut b = V4::connect(addr);
    rows()
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let owner = format!("A-row{i}");
            let (fh, sid) = a
                .open(
                    cid,
                    owner.as_bytes(),
                    0,
                    row_file(i).as_bytes(),
                    row.access,
                    row.deny,
                    false,
                )
                .unwrap_or_else(|s| panic!("{tag}: A's open for {:?}: {s}", row.what));
            if row.lock {
                let ops = Ops::new().putfh(&fh).lock_new(
                    true,
                    0,
                    10,
                    2,
                    sid,
                    cid,
                    format!("L{i}").as_bytes(),
                );
                let mut r = a.compound(&ops);
                r.op(op::PUTFH);
                assert_eq!(r.op(op::LOCK), st::OK, "{tag}: A's lock for {:?}", row.what);
            }
            let ops = match row.io {
                Io::Read(s) => Ops::new().read(s, 0, 4),
                Io::Write(s) => Ops::new().write(s, 0, b"xy"),
                Io::Truncate(s) => Ops::new().setattr_size(s, 0),
            };
            b.status_on(&fh, ops)
        })
        .collect()
}

fn name(s: u32) -> String {
    match s {
        st::OK => "OK".into(),
        st::LOCKED => "LOCKED".into(),
        st::SHARE_DENIED => "SHARE_DENIED".into(),
        st::BAD_STATEID => "BAD_STATEID".into(),
        s => format!("{s}"),
    }
}

/// Issue 31 §3: client A opens a file with a share deny (or holds a lock); client B
/// uses the anonymous (all zeros) or READ-bypass (all ones) stateid. rustnfs answers
/// every row as NFS-Ganesha does: LOCKED for READ and WRITE against a deny of that
/// access (the bypass stateid reads anyway), SHARE_DENIED for a truncation against a
/// deny of WRITE, nothing denied by byte-range locks (they are advisory on both, as
/// on Linux), BAD_STATEID for a reserved stateid — and a refused truncation truncates
/// nothing.
#[test]
fn special_stateids_honour_share_reservations_as_ganesha_does() {
    let g_dir = tempfile::tempdir().unwrap();
    let r_dir = tempfile::tempdir().unwrap();
    write_rows(g_dir.path());
    write_rows(r_dir.path());
    let Some(g) = ganesha::start_v4(g_dir.path()) else {
        return;
    };
    let nfsd = Nfsd::exporting(r_dir.path()).unwrap();
    let tag = std::process::id().to_string();
    let theirs = run_rows(g.addr, &tag);
    let ours = run_rows(nfsd.addr, &tag);
    drop(g);
    let mut table = String::from("| B's call while A holds its open | rustnfs | Ganesha |\n");
    table.push_str("| --- | --- | --- |\n");
    let mut differ = Vec::new();
    for ((row, o), t) in rows().iter().zip(&ours).zip(&theirs) {
        table.push_str(&format!("| {} | {} | {} |\n", row.what, name(*o), name(*t)));
        if o != t {
            differ.push(row.what);
        }
    }
    eprintln!("{table}");
    // The control answers what the issue measured, or it judges nothing.
    assert_eq!(
        (theirs[0], theirs[1], theirs[2]),
        (st::LOCKED, st::LOCKED, st::SHARE_DENIED),
        "Ganesha's answers to the issue's three rows"
    );
    assert!(
        differ.is_empty(),
        "rows where rustnfs differs from Ganesha: {differ:?}"
    );
    // The refused truncations left the files whole.
    for (i, row) in rows().iter().enumerate() {
        if matches!(row.io, Io::Truncate(_)) {
            let len = std::fs::metadata(r_dir.path().join(row_file(i)))
                .unwrap()
                .len();
            assert_eq!(
                len,
                CONTENT.len() as u64,
                "{}: the file was truncated",
                row.what
            );
        }
    }
}

// ---- §4: floods one client cannot win ----------------------------------------------

/// The legitimate client's address; every flood comes from [`ATTACKER`].
const VICTIM: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
/// What the victim must get each of its calls answered within while a flood runs.
const WITHIN: Duration = Duration::from_secs(1);
/// The lease the flood server runs with (`--nfs4-lease`), so its state expires
/// within the test.
const LEASE_SECS: u64 = 8;

/// One flood of issue 31 §4, from one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flood {
    /// New open owners (1 KiB names) opening one file, on client id after client id.
    OpenOwners,
    /// SETCLIENTIDs with new ids, never confirmed.
    Unconfirmed,
    /// Byte-range locks on 100 files, 64 per 1 KiB lock owner, client after client.
    Locks,
    /// SETCLIENTID repeated with one id, 128 per COMPOUND on two connections, beside an
    /// open-owner flood that fills the tables.
    Purge,
}

/// A running flood: its threads, a stop flag and what it got done (state created, or
/// calls answered for the purge).
struct Running {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    fn end(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Whether a status consumes the owner's seqid (RFC 7530 §9.1.7).
fn advances(s: u32) -> bool {
    !matches!(
        s,
        10022 | 10023 | 10025 | 10026 | 10036 | 10018 | 10020 | 10019
    )
}

/// The statuses of a reply's operations, in order, skipping what OPEN and LOCK return.
fn statuses(r: &mut crate::support::nfs4::Res) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for _ in 0..r.count {
        let (code, s) = (r.u32(), r.u32());
        out.push((code, s));
        match (code, s) {
            (op::OPEN, st::OK) => {
                r.open_result();
            }
            (op::LOCK, st::OK) => {
                r.stateid();
            }
            (op::SETCLIENTID, st::OK) => {
                r.u64();
                r.fixed::<8>();
            }
            (op::GETFH, st::OK) => {
                r.opaque();
            }
            (_, st::OK) => {}
            _ => break,
        }
    }
    out
}

fn start_flood(flood: Flood, addr: SocketAddr, tag: &str) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    let spawn = |threads: &mut Vec<_>, id: usize, f: fn(&mut V4, &str, &AtomicBool, &AtomicU64)| {
        let (stop, done) = (stop.clone(), done.clone());
        let tag = format!("{tag}-{flood:?}-{id}");
        threads.push(std::thread::spawn(move || {
            let Ok(mut c) = V4::connect_from(ATTACKER, addr) else {
                return;
            };
            // A refused or closed connection ends this thread's part, not the test.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                f(&mut c, &tag, &stop, &done)
            }));
        }));
    };
    match flood {
        Flood::OpenOwners => {
            for id in 0..2 {
                spawn(&mut threads, id, flood_owners);
            }
        }
        Flood::Unconfirmed => spawn(&mut threads, 0, flood_unconfirmed),
        Flood::Locks => spawn(&mut threads, 0, flood_locks),
        Flood::Purge => {
            spawn(&mut threads, 0, flood_owners);
            // The purges start once the owners are there (the flood server's tables full).
            for id in 1..3 {
                spawn(&mut threads, id, |c, tag, stop, done| {
                    std::thread::sleep(Duration::from_secs(3));
                    // Purges are counted apart: `done` is the state the owners made.
                    flood_purge(c, tag, stop, &AtomicU64::new(done.load(Ordering::Relaxed)))
                });
            }
        }
    }
    Running {
        stop,
        done,
        threads,
    }
}

/// New open owners, 32 OPENs of one file per COMPOUND; a client that is refused more
/// is replaced by a new one.
fn flood_owners(c: &mut V4, tag: &str, stop: &AtomicBool, done: &AtomicU64) {
    let mut n = 0u64;
    let mut clients = 0;
    while !stop.load(Ordering::Relaxed) {
        clients += 1;
        let Ok(cid) = c.client(format!("{tag}-c{clients}").as_bytes()) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let mut ops = Ops::new();
            for _ in 0..32 {
                n += 1;
                let mut owner = format!("{tag}-owner-{n}-").into_bytes();
                owner.resize(1024, b'o');
                ops = ops
                    .putrootfh()
                    .open(0, READ, NONE, cid, &owner, false, b"f");
            }
            let mut r = c.compound(&ops);
            let ok = statuses(&mut r)
                .iter()
                .filter(|(code, s)| *code == op::OPEN && *s == st::OK)
                .count();
            done.fetch_add(ok as u64, Ordering::Relaxed);
            if r.status != st::OK {
                break;
            }
        }
    }
}

/// SETCLIENTIDs with new ids, 64 per COMPOUND, never confirmed.
fn flood_unconfirmed(c: &mut V4, tag: &str, stop: &AtomicBool, done: &AtomicU64) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut ops = Ops::new();
        for _ in 0..64 {
            n += 1;
            ops = ops.setclientid(*b"verifier", format!("{tag}-{n}").as_bytes());
        }
        let mut r = c.compound(&ops);
        let ok = statuses(&mut r)
            .iter()
            .filter(|(_, s)| *s == st::OK)
            .count();
        done.fetch_add(ok as u64, Ordering::Relaxed);
    }
}

/// Locks with 1 KiB lock owners: 64 new lock owners per file, each taking 64 one-byte
/// locks (the first by open_to_lock_owner, the rest with its lock stateid), 4,096 per
/// file, file after file; a refused client is replaced by a new one on the next file.
fn flood_locks(c: &mut V4, tag: &str, stop: &AtomicBool, done: &AtomicU64) {
    let mut clients = 0;
    let mut owners = 0u64;
    let mut file = 0u32;
    while !stop.load(Ordering::Relaxed) {
        clients += 1;
        file = (file + 1) % 100;
        let Ok(cid) = c.client(format!("{tag}-c{clients}").as_bytes()) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        while lock_file(c, cid, file, tag, &mut owners, stop, done) {
            file = (file + 1) % 100;
        }
    }
}

/// One file of [`flood_locks`]: whether every lock was granted.
fn lock_file(
    c: &mut V4,
    cid: u64,
    file: u32,
    tag: &str,
    owners: &mut u64,
    stop: &AtomicBool,
    done: &AtomicU64,
) -> bool {
    let name = format!("lk{file:03}");
    let Ok((fh, open)) = c.open(cid, name.as_bytes(), 0, name.as_bytes(), BOTH, NONE, true) else {
        return false;
    };
    // The open owner's next seqid: OPEN and OPEN_CONFIRM took 0 and 1.
    let mut open_seq = 2;
    for k in 0..64u64 {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        *owners += 1;
        let mut owner = format!("{tag}-lockowner-{owners}-").into_bytes();
        owner.resize(1024, b'x');
        let base = k * 128;
        let ops = Ops::new()
            .putfh(&fh)
            .lock_new(true, base, 1, open_seq, open, cid, &owner);
        let mut r = c.compound(&ops);
        r.op(op::PUTFH);
        let s = r.op(op::LOCK);
        if advances(s) {
            open_seq += 1;
        }
        if s != st::OK {
            return false;
        }
        done.fetch_add(1, Ordering::Relaxed);
        let mut lsid = r.stateid();
        let mut ops = Ops::new().putfh(&fh);
        for j in 1..64u64 {
            ops = ops.lock_existing(true, base + 2 * j, 1, lsid, j as u32);
            lsid.0 += 1;
        }
        let mut r = c.compound(&ops);
        let all = statuses(&mut r);
        let ok = all
            .iter()
            .filter(|(code, s)| *code == op::LOCK && *s == st::OK);
        done.fetch_add(ok.count() as u64, Ordering::Relaxed);
        if r.status != st::OK {
            return false;
        }
    }
    true
}

/// SETCLIENTID with one id and a new verifier each time, 128 per COMPOUND: every one
/// replaces the last unconfirmed record of that id.
fn flood_purge(c: &mut V4, tag: &str, stop: &AtomicBool, done: &AtomicU64) {
    let mut n = 0u64;
    let mut slowest = Duration::ZERO;
    while !stop.load(Ordering::Relaxed) {
        let mut ops = Ops::new();
        for _ in 0..128 {
            n += 1;
            ops = ops.setclientid(n.to_be_bytes(), format!("{tag}-purged").as_bytes());
        }
        let t = Instant::now();
        c.compound(&ops);
        slowest = slowest.max(t.elapsed());
        done.fetch_add(128, Ordering::Relaxed);
    }
    eprintln!(
        "{tag}: {n} SETCLIENTIDs of one id, 128 per COMPOUND, slowest COMPOUND {slowest:.2?}"
    );
}

/// What the legitimate client got: the time of its SETCLIENTID (+ CONFIRM), of its
/// OPEN (+ CONFIRM), of its 10 MiB read in 1 MiB READs, and whether all went right.
#[derive(Debug, Clone)]
struct Probe {
    setclientid: Duration,
    open: Duration,
    read: Duration,
    failure: Option<String>,
}

impl Probe {
    fn worst(&self) -> Duration {
        self.setclientid.max(self.open).max(self.read)
    }
}

/// One probe, a panic (a reply that never came) counted as a failure.
fn probe(addr: SocketAddr, want: &[u8]) -> Probe {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let t = Instant::now();
    std::panic::catch_unwind(|| probe_once(addr, want, n)).unwrap_or_else(|_| Probe {
        setclientid: t.elapsed(),
        open: Duration::ZERO,
        read: Duration::ZERO,
        failure: Some(format!(
            "no answer within 10 s ({:.1?} in all)",
            t.elapsed()
        )),
    })
}

fn probe_once(addr: SocketAddr, want: &[u8], n: u64) -> Probe {
    let mut p = Probe {
        setclientid: Duration::ZERO,
        open: Duration::ZERO,
        read: Duration::ZERO,
        failure: None,
    };
    let Ok(mut v) = V4::connect_from(VICTIM, addr) else {
        p.failure = Some("cannot connect".into());
        return p;
    };
    v.s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let t = Instant::now();
    let cid = v.client(format!("victim-{}-{n}", std::process::id()).as_bytes());
    p.setclientid = t.elapsed();
    let cid = match cid {
        Ok(c) => c,
        Err(s) => {
            p.failure = Some(format!("SETCLIENTID: {s}"));
            return p;
        }
    };
    let t = Instant::now();
    let opened = v.open(cid, b"victim", 0, b"victim.bin", READ, NONE, false);
    p.open = t.elapsed();
    let (fh, sid) = match opened {
        Ok(o) => o,
        Err(s) => {
            p.failure = Some(format!("OPEN: {s}"));
            return p;
        }
    };
    let t = Instant::now();
    let mut got = Vec::with_capacity(want.len());
    while got.len() < want.len() {
        let mut r = v.compound(&Ops::new().putfh(&fh).read(sid, got.len() as u64, 1 << 20));
        r.op(op::PUTFH);
        let s = r.op(op::READ);
        if s != st::OK {
            p.failure = Some(format!("READ: {s}"));
            return p;
        }
        let _eof = r.u32();
        let data = r.opaque();
        if data.is_empty() {
            break;
        }
        got.extend_from_slice(&data);
    }
    p.read = t.elapsed();
    if got != want {
        p.failure = Some("the read was not byte-exact".into());
    }
    p
}

/// Waits until `done` stops growing for a second (the flood reached its limits), at
/// most `limit`; returns what it reached.
fn saturate(done: &AtomicU64, limit: Duration) -> u64 {
    let until = Instant::now() + limit;
    let mut last = done.load(Ordering::Relaxed);
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = done.load(Ordering::Relaxed);
        if now == last || Instant::now() > until {
            return now;
        }
        last = now;
    }
}

/// The state one address may make the server hold, as crates/rustnfs/README.md states it
/// ("memory at most", per client address), and the allocator's and buffers' slack
/// allowed beside it.
const ONE_ADDRESS_MIB: f64 = 19.1;
const SLACK_MIB: f64 = 8.0;

/// Issue 31 §4: each flood runs from 127.0.0.2 against a `rustnfs` binary of its own (the
/// four at once) while a client from 127.0.0.1 makes a new client id, opens a file and reads 10 MiB over
/// NFSv4.0 — each of the three within a second (the median of three probes), byte-exact;
/// the server's resident set stays within what the README says one address can make it
/// hold; and once the flood stops, its leases run out and the memory is given back.
#[test]
fn one_client_cannot_exhaust_nfs4_state() {
    let dir = tempfile::tempdir().unwrap();
    let victim = lab::dataset::pseudo_random_bytes(10 << 20, 31);
    std::fs::write(dir.path().join("victim.bin"), &victim).unwrap();
    std::fs::write(dir.path().join("f"), b"flooded").unwrap();
    let tag = std::process::id().to_string();
    let mut failures = Vec::new();
    let mut table = String::from(
        "| flood from one address | state made | victim SETCLIENTID / OPEN / 10 MiB read (median of 3) | RSS idle → during → after the lease |\n| --- | ---: | --- | --- |\n",
    );
    // The rows run at once, each on its own server: about one row's time in all.
    let floods = [
        Flood::OpenOwners,
        Flood::Unconfirmed,
        Flood::Locks,
        Flood::Purge,
    ];
    let rows: Vec<(String, bool)> = std::thread::scope(|s| {
        let handles: Vec<_> = floods
            .iter()
            .map(|f| {
                let (dir, victim, tag) = (dir.path(), &victim, &tag);
                s.spawn(move || flood_row(*f, dir, victim, tag))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (line, ok) in rows {
        table.push_str(&line);
        table.push('\n');
        if !ok {
            failures.push(line);
        }
    }
    eprintln!("{table}");
    assert!(
        failures.is_empty(),
        "floods the victim did not survive:\n{}",
        failures.join("\n")
    );
}

/// One row on a fresh server: its table line, and whether it met the bounds.
fn flood_row(flood: Flood, dir: &Path, victim: &[u8], tag: &str) -> (String, bool) {
    use crate::support::server::ServerProc;
    let addr = SocketAddr::from(([127, 0, 0, 1], crate::common::free_port()));
    let lease = LEASE_SECS.to_string();
    let server = ServerProc::binary("rustnfs", "rustnfs", addr)
        .args([std::ffi::OsStr::new("--export"), dir.as_os_str()])
        .args(["--listen", &addr.to_string(), "--nfs4-lease", &lease])
        .rust_log("error")
        .start();
    std::thread::sleep(Duration::from_millis(300));
    let pid = server.pid().unwrap() as u32;
    let mut line = String::new();
    for attempt in 1..=3 {
        let (l, ok) = flood_once(
            flood,
            server.addr(),
            pid,
            victim,
            &format!("{tag}-{attempt}"),
            true,
        );
        line = format!("{l} (attempt {attempt})");
        eprintln!("{line}");
        if ok {
            return (line, true);
        }
    }
    (line, false)
}

/// One flood against the server at `addr` (process `pid`): the quiet probe, the flood
/// until it stops making state, three probes beside it, and (`expire`) the wait for its
/// leases to run out. Its table line, and whether it met the bounds.
fn flood_once(
    flood: Flood,
    addr: SocketAddr,
    pid: u32,
    victim: &[u8],
    tag: &str,
    expire: bool,
) -> (String, bool) {
    let rss = || lab::sampler::rss_bytes(pid).unwrap() as f64 / (1024.0 * 1024.0);
    let quiet = probe(addr, victim);
    assert!(quiet.failure.is_none(), "quiet probe: {quiet:?}");
    let idle = rss();
    let running = start_flood(flood, addr, tag);
    if flood == Flood::Purge {
        std::thread::sleep(Duration::from_secs(4));
    }
    let made = saturate(&running.done, Duration::from_secs(30));
    let mut probes: Vec<Probe> = (1..=3).map(|_| probe(addr, victim)).collect();
    let held = rss();
    running.end();
    probes.sort_by_key(Probe::worst);
    let p = probes[1].clone();
    let failed = probes.iter().find_map(|p| p.failure.clone());
    // The flood is silent now: after its lease (and the once-a-second sweep, run by the
    // next COMPOUND) its state is freed and the memory given back.
    let mut after = rss();
    if expire {
        let until = Instant::now() + Duration::from_secs(LEASE_SECS * 2 + 6);
        while after > idle + 4.0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(500));
            if let Ok(mut c) = V4::connect_from(VICTIM, addr) {
                c.compound(&Ops::new().putrootfh());
            }
            after = rss();
        }
    }
    let line = format!(
        "| {flood:?} | {made} | {:.2?} / {:.2?} / {:.2?}{} | {idle:.1} → {held:.1} → {after:.1} MiB |",
        p.setclientid,
        p.open,
        p.read,
        failed
            .as_deref()
            .map(|f| format!(" FAILED {f}"))
            .unwrap_or_default(),
    );
    let ok = failed.is_none()
        && p.worst() <= WITHIN
        && held <= idle + ONE_ADDRESS_MIB + SLACK_MIB
        && (!expire || after <= idle + 4.0);
    (line, ok)
}

/// The same floods against NFS-Ganesha, for the note beside the table above (not a
/// judgement: Ganesha's caps are its own): `cargo test --test tests
/// nfs4_state::floods_against_ganesha -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement for the note, about two minutes"]
fn floods_against_ganesha() {
    let mut table = String::from(
        "| flood from one address (Ganesha) | state made | victim SETCLIENTID / OPEN / 10 MiB read | RSS idle → during |\n| --- | ---: | --- | --- |\n",
    );
    let victim = lab::dataset::pseudo_random_bytes(10 << 20, 31);
    for flood in [
        Flood::OpenOwners,
        Flood::Unconfirmed,
        Flood::Locks,
        Flood::Purge,
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("victim.bin"), &victim).unwrap();
        std::fs::write(dir.path().join("f"), b"flooded").unwrap();
        let Some(g) = ganesha::start_v4(dir.path()) else {
            return;
        };
        let tag = format!("g{}", std::process::id());
        let (line, _) = flood_once(flood, g.addr, g.pid(), &victim, &tag, false);
        eprintln!("{line}");
        table.push_str(&line);
        table.push('\n');
    }
    eprintln!("{table}");
}

// ---- NFSv4.1 and 4.2 sessions, beside Ganesha -------------------------------------------

/// What one server answers to the session rows: a GUARDED create sent twice on one slot
/// (the second must be the first's reply, not EXIST), the retired SETCLIENTID in a 4.1
/// session, an operation without SEQUENCE, and 4.2's SEEK.
fn session_rows(addr: SocketAddr, minor: u32, tag: &str) -> Vec<(String, String)> {
    let mut c = V4::connect(addr);
    c.session(minor, format!("session-rows-{tag}-{minor}").as_bytes())
        .expect("a session");
    let name = format!("once-{tag}-{minor}");
    let guarded =
        Ops::new()
            .putrootfh()
            .open_how(0, BOTH, NONE, 0, b"owner", Some(1), name.as_bytes());
    let args = c.args(&guarded);
    let first = c.call(1, &args).unwrap();
    let again = c.call(1, &args).unwrap();
    let mut rows = vec![(
        "the same SEQUENCE + GUARDED OPEN twice".to_string(),
        if first == again {
            "same reply".to_string()
        } else {
            format!("differs ({} / {} bytes)", first.len(), again.len())
        },
    )];
    let mut r = c.compound(&Ops::new().setclientid(*b"verifier", b"x"));
    let s = r.op(op::SETCLIENTID);
    rows.push(("SETCLIENTID in a session".into(), name_of(s)));
    let session = c.session.take();
    // Ganesha answers with no result at all, rustnfs (as knfsd) on the operation: the
    // COMPOUND's status is what both say.
    let r = c.compound(&Ops::new().putrootfh());
    rows.push(("PUTROOTFH without SEQUENCE".into(), name_of(r.status)));
    c.session = session;
    if minor == 2 {
        let fh = c.lookup_root(b"f").expect("f");
        let mut r = c.compound(&Ops::new().putfh(&fh).raw(op::SEEK, &{
            let mut a = ANONYMOUS.0.to_be_bytes().to_vec();
            a.extend_from_slice(&ANONYMOUS.1);
            a.extend_from_slice(&0u64.to_be_bytes());
            a.extend_from_slice(&1u32.to_be_bytes());
            a
        }));
        r.op(op::PUTFH);
        let s = r.op(op::SEEK);
        let detail = if s == st::OK {
            format!("OK eof={} offset={}", r.u32(), r.u64())
        } else {
            name_of(s)
        };
        rows.push(("SEEK hole from 0 in a 7-byte file".into(), detail));
    }
    rows
}

fn name_of(s: u32) -> String {
    match s {
        st::NOTSUPP => "NOTSUPP".into(),
        st::OP_NOT_IN_SESSION => "OP_NOT_IN_SESSION".into(),
        s => name(s),
    }
}

/// NFSv4.1 and 4.2 sessions answer as NFS-Ganesha's do: a retransmission on its slot
/// gets the reply it had (exactly once), the operations 4.1 retired are NOTSUPP, an
/// operation without SEQUENCE is OP_NOT_IN_SESSION, and SEEK finds the hole at the end.
#[test]
fn sessions_answer_as_ganesha_does() {
    let g_dir = tempfile::tempdir().unwrap();
    let r_dir = tempfile::tempdir().unwrap();
    for d in [g_dir.path(), r_dir.path()] {
        std::fs::write(d.join("f"), b"flooded").unwrap();
    }
    let Some(g) = ganesha::start_v4(g_dir.path()) else {
        return;
    };
    let nfsd = Nfsd::exporting(r_dir.path()).unwrap();
    let tag = std::process::id().to_string();
    let mut differ = Vec::new();
    let mut table =
        String::from("| minor | call | rustnfs | Ganesha |\n| --- | --- | --- | --- |\n");
    for minor in [1, 2] {
        let theirs = session_rows(g.addr, minor, &tag);
        let ours = session_rows(nfsd.addr, minor, &tag);
        for ((what, o), (_, t)) in ours.iter().zip(&theirs) {
            table.push_str(&format!("| 4.{minor} | {what} | {o} | {t} |\n"));
            // SEEK: Ganesha 4.3 answers a hole at 0 (eof false) in a file whose first
            // byte is data; rustnfs answers as knfsd does (`nfsd4_seek`: lseek
            // SEEK_HOLE, eof when that is the file's end): the implicit hole at 7.
            if what.starts_with("SEEK") {
                assert_eq!(o, "OK eof=1 offset=7", "SEEK");
            } else if o != t {
                differ.push(format!("4.{minor} {what}"));
            }
        }
    }
    drop(g);
    eprintln!("{table}");
    assert!(
        differ.is_empty(),
        "rows where rustnfs differs from Ganesha: {differ:?}"
    );
}

// ---- READ data after the COMPOUND reply (issue 32 §2) ------------------------------------

/// A COMPOUND's reply as the client reads it off the socket: PUTFH's and READ's statuses
/// checked, then READ's eof and data (after the SEQUENCE result in a session).
fn read_reply(body: Vec<u8>, session: bool) -> (bool, Vec<u8>) {
    let mut r = crate::support::nfs4::Res::new(body);
    if session {
        assert_eq!(r.op(op::SEQUENCE), st::OK, "SEQUENCE");
        r.pos += 16 + 4 * 5;
    }
    assert_eq!(r.op(op::PUTFH), st::OK);
    assert_eq!(r.op(op::READ), st::OK, "READ");
    let eof = r.u32() == 1;
    let data = r.opaque();
    assert_eq!(
        r.pos,
        r.buf.len(),
        "the record ends with the data and its pad"
    );
    (eof, data)
}

/// A READ that ends its COMPOUND leaves rustnfs as v3 READ data does (the head, then
/// the file's bytes with `sendfile`), over 4.0, 4.1 and 4.2: what the client reads off
/// the socket is the file, whole, in records that frame it (every pad length, a short
/// READ at the end, two COMPOUNDs sent before either reply is read). On a session slot
/// exactly once holds: the same SEQUENCE + READ again is RETRY_UNCACHED_REP when the
/// reply was not asked kept (a tailed reply is not kept), and the same reply byte for
/// byte when it was (copied within the slot's 4 KiB).
#[test]
fn large_reads_arrive_whole_and_exactly_once() {
    const SIZE: usize = 3 * 1024 * 1024 + 6;
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..SIZE as u32)
        .map(|i| (i * 31 + i / 4099) as u8)
        .collect();
    std::fs::write(dir.path().join("big"), &data).unwrap();
    let nfsd = Nfsd::exporting(dir.path()).unwrap();
    let reads = [
        (0u64, 1u32 << 20),
        (2 * 1024 * 1024 + 9, 1 << 20),
        (5000, 5001),
        (7, 4097),
        (SIZE as u64 - 100, 1 << 20),
    ];
    for minor in 0..=2 {
        let mut c = V4::connect(nfsd.addr);
        if minor > 0 {
            c.session(minor, format!("tail-{minor}").as_bytes())
                .expect("a session");
        }
        let fh = c.lookup_root(b"big").expect("big");
        // From here on each COMPOUND's SEQUENCE (slot 0) is made here, to choose its
        // cachethis: a Linux client asks READ replies not kept.
        let session = c.session.take();
        let mut seq = session.as_ref().map_or(0, |s| s.next[0]);
        let mut args = |c: &mut V4, cache: bool, ops: Ops| {
            let Some(s) = &session else {
                return c.args(&ops);
            };
            let mut all = Ops::new().sequence(s.id, seq, 0, cache);
            seq += 1;
            all.buf.extend_from_slice(&ops.buf);
            all.count += ops.count;
            c.args(&all)
        };
        // One at a time, then all sent before any reply is read.
        let all: Vec<_> = reads
            .iter()
            .map(|&(o, n)| args(&mut c, false, Ops::new().putfh(&fh).read(ANONYMOUS, o, n)))
            .collect();
        let single: Vec<_> = all.iter().map(|a| c.call(1, a).unwrap()).collect();
        let all: Vec<_> = reads
            .iter()
            .map(|&(o, n)| args(&mut c, false, Ops::new().putfh(&fh).read(ANONYMOUS, o, n)))
            .collect();
        for a in &all {
            c.send(1, a).unwrap();
        }
        let pipelined: Vec<_> = all.iter().map(|_| c.recv().unwrap()).collect();
        for (&(offset, count), body) in reads
            .iter()
            .cycle()
            .zip(single.into_iter().chain(pipelined))
        {
            let (eof, got) = read_reply(body, session.is_some());
            let start = offset as usize;
            let end = (start + count as usize).min(SIZE);
            let what = format!("4.{minor} READ {count} at {offset}: {} bytes", got.len());
            assert!(got == data[start..end], "{what}: the file's bytes");
            assert_eq!(eof, end == SIZE, "{what}");
        }
        if session.is_none() {
            continue;
        }
        // The slot's retransmissions.
        let mut twice = |c: &mut V4, cache: bool| {
            let a = args(c, cache, Ops::new().putfh(&fh).read(ANONYMOUS, 0, 1 << 20));
            (c.call(1, &a).unwrap(), c.call(1, &a).unwrap())
        };
        let (first, again) = twice(&mut c, false);
        let (_, got) = read_reply(first, true);
        assert!(got == data[..1 << 20], "4.{minor}: the whole MiB");
        let mut r = crate::support::nfs4::Res::new(again);
        assert_eq!(
            r.op(op::SEQUENCE),
            st::RETRY_UNCACHED_REP,
            "4.{minor}: a reply not asked kept"
        );
        let (first, again) = twice(&mut c, true);
        assert!(first == again, "4.{minor}: the kept reply, byte for byte");
        let (eof, got) = read_reply(first, true);
        assert!(
            !eof && !got.is_empty() && got.len() < 4096,
            "4.{minor}: shortened"
        );
        assert!(got == data[..got.len()]);
    }
}
