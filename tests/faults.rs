//! Faults in scenario A (httpd serving files from rustnfs over NFS), each counted:
//! requests failed, requests hung (must be 0), time to recover, httpd's descriptors and
//! memory afterwards. Faults: rustnfs killed and restarted, stopped and continued, the
//! link cut and restored (rustnfs in a network namespace of its own), the export's disk
//! full during NFS writes, a file replaced during a download.
//!
//! Both servers run as binaries (children of the test); the load is a few HTTP/1.1
//! clients in a loop, each request bounded, so a hang is seen as one.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nfs3_client::nfs3_types::nfs3::{nfsstat3, stable_how};

use crate::common;
use crate::support::nfs3::{CallError, Conn};
use crate::support::server::ServerProc;

/// A request not finished after this long is hung (httpd's NFS timeout is 2 s).
const HUNG_AFTER: Duration = Duration::from_secs(15);
/// httpd's `--nfs-timeout`: how long a request waits for an unanswered NFS call.
const NFS_TIMEOUT_S: u64 = 2;
/// Concurrent HTTP clients of the load.
const CLIENTS: usize = 3;
/// Recovery must take less than this after the fault is removed.
const RECOVERY_BOUND: Duration = Duration::from_secs(10);

/// httpd (the binary) serving `--nfs URL` on a free port, its output in `log`.
fn start_httpd(nfs_url: &str, log: &Path) -> ServerProc {
    let addr = SocketAddr::from(([127, 0, 0, 1], common::free_port()));
    ServerProc::binary("httpd", "httpd", addr)
        .args(["--nfs", nfs_url, "--listen", &addr.to_string()])
        .args(["--nfs-timeout", &NFS_TIMEOUT_S.to_string()])
        .args(["--nfs-attr-ttl-ms", "0", "--workers", "2"])
        .log(log)
        .start()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// 200 with exactly the expected bytes.
    Ok,
    /// An error status, a refused or broken connection, or a short body.
    Failed,
    /// No answer within [`HUNG_AFTER`].
    Hung,
    /// 200 with a full-length body that differs from the expected bytes.
    Corrupt,
}

struct Req {
    start: Instant,
    end: Instant,
    outcome: Outcome,
}

/// One GET with `Connection: close`, bounded by [`HUNG_AFTER`]; the body is compared
/// with `want`.
fn get(addr: SocketAddr, path: &str, want: &[u8]) -> Outcome {
    get_with(addr, path, |body| {
        if body == want {
            Outcome::Ok
        } else {
            Outcome::Corrupt
        }
    })
    .0
}

/// GET returning the outcome (judged by `judge` for a complete 200 body) and the body.
fn get_with(
    addr: SocketAddr,
    path: &str,
    judge: impl FnOnce(&[u8]) -> Outcome,
) -> (Outcome, Vec<u8>) {
    let start = Instant::now();
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let r = lab::http::request(addr, request.as_bytes(), Duration::from_secs(2), HUNG_AFTER);
    // A read that waited HUNG_AFTER for a byte, or a response still arriving then, is a
    // hang; a refused or reset connection, or a cut response, a failure.
    let r = match r {
        Err(_) if start.elapsed() >= HUNG_AFTER => return (Outcome::Hung, Vec::new()),
        Err(_) => return (Outcome::Failed, Vec::new()),
        Ok(_) if start.elapsed() > HUNG_AFTER => return (Outcome::Hung, Vec::new()),
        Ok(r) => r,
    };
    let length = r
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok());
    let status_ok = r.head.to_ascii_lowercase().starts_with("http/1.1 200");
    if !status_ok || length != Some(r.body.len()) {
        return (Outcome::Failed, r.body);
    }
    (judge(&r.body), r.body)
}

/// Runs [`CLIENTS`] request loops on `path` until `stop` is set; returns every request.
fn load(
    addr: SocketAddr,
    want: Arc<Vec<u8>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<Req>> {
    std::thread::spawn(move || {
        let workers: Vec<_> = (0..CLIENTS)
            .map(|_| {
                let (want, stop) = (want.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut out = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let start = Instant::now();
                        let outcome = get(addr, "/testfile.bin", &want);
                        out.push(Req {
                            start,
                            end: Instant::now(),
                            outcome,
                        });
                        if outcome != Outcome::Ok {
                            // Do not spin on a server that refuses at once.
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                    out
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    })
}

/// The figures of one fault.
struct Row {
    fault: String,
    requests: usize,
    failed: usize,
    hung: usize,
    corrupt: usize,
    recover: Option<Duration>,
    httpd_before: (u64, usize),
    httpd_after: (u64, usize),
    note: String,
}

impl Row {
    fn from_reqs(
        fault: &str,
        reqs: &[Req],
        restored: Instant,
        before: (u64, usize),
        after: (u64, usize),
    ) -> Row {
        let count = |o| reqs.iter().filter(|r| r.outcome == o).count();
        // Recovery: from the moment the fault was removed to the end of the first
        // successful request that started after it.
        let recover = reqs
            .iter()
            .filter(|r| r.outcome == Outcome::Ok && r.start >= restored)
            .map(|r| r.end - restored)
            .min();
        Row {
            fault: fault.into(),
            requests: reqs.len(),
            failed: count(Outcome::Failed),
            hung: count(Outcome::Hung),
            corrupt: count(Outcome::Corrupt),
            recover,
            httpd_before: before,
            httpd_after: after,
            note: String::new(),
        }
    }
}

/// One fault under load: `inject` at 1 s, `restore` 2 s later, load until 3 s after
/// that (or until the first success after restoring plus 1 s).
fn under_load(
    fault: &str,
    h: &ServerProc,
    want: &Arc<Vec<u8>>,
    inject: &mut dyn FnMut(),
    restore: &mut dyn FnMut(),
) -> Row {
    // Warm-up request: the system works before the fault.
    assert_eq!(
        get(h.addr(), "/testfile.bin", want),
        Outcome::Ok,
        "{fault}: not working before the fault"
    );
    let before = h
        .rss_kb_and_fds()
        .expect("httpd's /proc/PID/status and fd/ are readable");
    let stop = Arc::new(AtomicBool::new(false));
    let l = load(h.addr(), want.clone(), stop.clone());
    std::thread::sleep(Duration::from_secs(1));
    inject();
    std::thread::sleep(Duration::from_secs(2));
    restore();
    let restored = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let reqs = l.join().unwrap();
    // Let finished connections close before counting descriptors.
    std::thread::sleep(Duration::from_millis(300));
    let after = h
        .rss_kb_and_fds()
        .expect("httpd's /proc/PID/status and fd/ are readable");
    Row::from_reqs(fault, &reqs, restored, before, after)
}

fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| fault | requests | failed | hung | corrupt | recovered after | httpd RSS before → after | httpd fds before → after | note |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} → {} kB | {} → {} | {} |\n",
            r.fault,
            r.requests,
            r.failed,
            r.hung,
            r.corrupt,
            r.recover
                .map_or("never".into(), |d| format!("{:.2} s", d.as_secs_f64())),
            r.httpd_before.0,
            r.httpd_after.0,
            r.httpd_before.1,
            r.httpd_after.1,
            r.note
        ));
    }
    out
}

#[test]
fn scenario_a_faults_are_counted_and_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let www = common::write_dataset(&dir.path().join("www"));
    let want = Arc::new(std::fs::read(www.join("testfile.bin")).unwrap());
    let mut rows = Vec::new();

    // Kill/restart and stop/continue: rustnfs on loopback.
    {
        let addr = SocketAddr::from(([127, 0, 0, 1], common::free_port()));
        let nfs = std::cell::RefCell::new(ServerProc::start(
            &www,
            addr,
            None,
            &dir.path().join("rustnfs.log"),
        ));
        let h = start_httpd(
            &format!("nfs://127.0.0.1:{}/", addr.port()),
            &dir.path().join("httpd.log"),
        );
        rows.push(under_load(
            "rustnfs SIGKILL, restart 2 s later",
            &h,
            &want,
            &mut || nfs.borrow_mut().kill(),
            &mut || {
                nfs.borrow_mut().restart();
            },
        ));
        rows.push(under_load(
            "rustnfs SIGSTOP, SIGCONT 2 s later",
            &h,
            &want,
            &mut || nfs.borrow_mut().signal(libc::SIGSTOP),
            &mut || nfs.borrow_mut().signal(libc::SIGCONT),
        ));
        rows.push(replaced_during_download(&h, &www, &want));
    }
    if let Some(row) = link_cut(dir.path(), &www, &want) {
        rows.push(row);
    }
    if let Some(row) = disk_full(dir.path()) {
        rows.push(row);
    }

    let report = format!(
        "scenario A faults (httpd --nfs → rustnfs, {CLIENTS} clients, 10 MiB file):\n{}",
        table(&rows)
    );
    let _ = std::io::stderr().write_all(report.as_bytes());
    let mut problems = Vec::new();
    for r in &rows {
        if r.hung > 0 {
            problems.push(format!("{}: {} requests hung", r.fault, r.hung));
        }
        if r.corrupt > 0 {
            problems.push(format!(
                "{}: {} responses had wrong bytes",
                r.fault, r.corrupt
            ));
        }
        if r.requests > 0 && r.recover.is_none_or(|d| d > RECOVERY_BOUND) {
            problems.push(format!(
                "{}: no recovery within {RECOVERY_BOUND:?}",
                r.fault
            ));
        }
        if r.requests > 0 && r.httpd_after.1 > r.httpd_before.1 + 16 {
            problems.push(format!(
                "{}: httpd descriptors grew {} → {}",
                r.fault, r.httpd_before.1, r.httpd_after.1
            ));
        }
        if r.note.starts_with("FAIL") {
            problems.push(format!("{}: {}", r.fault, r.note));
        }
    }
    assert!(problems.is_empty(), "faults:\n{}", problems.join("\n"));
}

/// A stopped rustnfs (SIGSTOP: its connections stay open, nothing answers) behind httpd
/// --nfs: a request whose handle and attributes are still cached (the hardest case: no
/// call has failed yet when the response starts) must get a complete 5xx within the NFS
/// timeout (or, for bytes httpd still holds, a whole 200), never a 200 whose body then
/// stops; after SIGCONT the same file is served.
#[test]
fn stopped_nfs_server_gives_a_complete_5xx_not_a_cut_200() {
    let dir = tempfile::tempdir().unwrap();
    let www = common::write_dataset(&dir.path().join("www"));
    let want = std::fs::read(www.join("testfile.bin")).unwrap();
    let nfs_addr = SocketAddr::from(([127, 0, 0, 1], common::free_port()));
    let mut nfs = ServerProc::start(&www, nfs_addr, None, &dir.path().join("rustnfs.log"));
    let addr = SocketAddr::from(([127, 0, 0, 1], common::free_port()));
    let h = ServerProc::binary("httpd", "httpd", addr)
        .args(["--nfs", &format!("nfs://127.0.0.1:{}/", nfs_addr.port())])
        .args(["--listen", &addr.to_string()])
        .args(["--nfs-timeout", &NFS_TIMEOUT_S.to_string()])
        .args(["--nfs-attr-ttl-ms", "60000", "--workers", "2"])
        .log(&dir.path().join("httpd.log"))
        .start();
    for path in ["/testfile.bin", "/small.bin"] {
        let (outcome, _) = get_with(addr, path, |_| Outcome::Ok);
        assert_eq!(outcome, Outcome::Ok, "{path} before the stop");
    }

    nfs.signal(libc::SIGSTOP);
    for path in ["/testfile.bin", "/small.bin", "/testfile.bin"] {
        let start = Instant::now();
        let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let r = lab::http::request(addr, request.as_bytes(), Duration::from_secs(2), HUNG_AFTER);
        let took = start.elapsed();
        let r = r.unwrap_or_else(|e| panic!("{path}: no complete answer while stopped: {e}"));
        let status = r.head.split_whitespace().nth(1).unwrap_or("").to_string();
        let length = r
            .header("content-length")
            .and_then(|v| v.parse::<usize>().ok());
        // httpd may answer from what it cached (a small file's bytes), but only whole.
        let cached_whole =
            status == "200" && r.body == std::fs::read(www.join(&path[1..])).unwrap();
        assert!(
            (status.starts_with('5') || cached_whole) && length == Some(r.body.len()),
            "{path}: a stopped NFS server gave {status} with {} of {length:?} body bytes\n{}",
            r.body.len(),
            r.head
        );
        assert!(
            took < Duration::from_secs(NFS_TIMEOUT_S) + Duration::from_millis(1500),
            "{path}: the 5xx took {took:?} (NFS timeout {NFS_TIMEOUT_S} s)"
        );
    }

    nfs.signal(libc::SIGCONT);
    let deadline = Instant::now() + RECOVERY_BOUND;
    loop {
        if get(addr, "/testfile.bin", &want) == Outcome::Ok {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no recovery within {RECOVERY_BOUND:?} of SIGCONT"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(h);
}

/// A file replaced (rename of a new file over it, as deploy tools do) while it is being
/// downloaded: each download must be the old bytes, the new bytes, or an error.
fn replaced_during_download(h: &ServerProc, www: &Path, old: &Arc<Vec<u8>>) -> Row {
    let new = lab::dataset::pseudo_random_bytes(old.len(), 4242);
    std::fs::write(www.join("swap.bin"), old.as_slice()).unwrap();
    // Control: without a replacement the same download succeeds.
    let control = get(h.addr(), "/swap.bin", old);
    let before = h
        .rss_kb_and_fds()
        .expect("httpd's /proc/PID/status and fd/ are readable");
    let (mut n_old, mut n_new, mut n_err, mut n_mixed) = (0, 0, 0, 0);
    let mut err_bytes = Vec::new();
    let mut reqs = Vec::new();
    for round in 0..4 {
        let (cur, next) = if round % 2 == 0 {
            (old.as_slice(), new.as_slice())
        } else {
            (new.as_slice(), old.as_slice())
        };
        std::fs::write(www.join("swap.bin"), cur).unwrap();
        let addr = h.addr();
        let dl = std::thread::spawn(move || get_with(addr, "/swap.bin", |_| Outcome::Ok));
        // Replace a few milliseconds into the download.
        std::thread::sleep(Duration::from_millis(5 + 10 * round as u64));
        let tmp = www.join("swap.bin.tmp");
        std::fs::write(&tmp, next).unwrap();
        std::fs::rename(&tmp, www.join("swap.bin")).unwrap();
        let start = Instant::now();
        let (outcome, body) = dl.join().unwrap();
        let outcome = match outcome {
            Outcome::Ok if body == cur => {
                n_old += 1;
                Outcome::Ok
            }
            Outcome::Ok if body == next => {
                n_new += 1;
                Outcome::Ok
            }
            Outcome::Ok => {
                n_mixed += 1;
                Outcome::Corrupt
            }
            o => {
                n_err += 1;
                err_bytes.push(body.len());
                o
            }
        };
        reqs.push(Req {
            start,
            end: Instant::now(),
            outcome,
        });
    }
    let after = h
        .rss_kb_and_fds()
        .expect("httpd's /proc/PID/status and fd/ are readable");
    let mut row = Row::from_reqs(
        "file replaced (rename over) during download",
        &reqs,
        Instant::now(),
        before,
        after,
    );
    row.recover = Some(Duration::ZERO);
    // After the replacement the new content is served.
    let last = if reqs.len() % 2 == 0 {
        old.as_slice()
    } else {
        new.as_slice()
    };
    let after_swap = get(h.addr(), "/swap.bin", last);
    row.note = format!(
        "{n_old} old bytes, {n_new} new bytes, {n_err} errors (truncated bodies of {err_bytes:?} \
         bytes), {n_mixed} silently mixed; next download {after_swap:?}"
    );
    if control != Outcome::Ok || after_swap != Outcome::Ok {
        row.note = format!("FAIL: without a concurrent replacement: {control:?}, {after_swap:?}");
    }
    row
}

/// The link between httpd (host) and rustnfs (its own network namespace, joined by a
/// veth pair on a private /30) set down for 2 s under load, then up.
fn link_cut(tmp: &Path, www: &Path, want: &Arc<Vec<u8>>) -> Option<Row> {
    let ip = common::require_tool("ip")?;
    let ns = Netns::create(&ip)?;
    let addr = SocketAddr::from((ns.inner_addr, common::free_port()));
    let nfs = ServerProc::start(www, addr, Some(&ns.name), &tmp.join("rustnfs-ns.log"));
    let h = start_httpd(
        &format!("nfs://{}:{}/", ns.inner_addr_str(), addr.port()),
        &tmp.join("httpd-ns.log"),
    );
    let host_if = ns.host_if.clone();
    let set = |state: &str| {
        common::run_ok(Command::new(&ip).args(["link", "set", &host_if, state]));
    };
    let row = under_load(
        "link httpd↔rustnfs down 2 s (veth)",
        &h,
        want,
        &mut || set("down"),
        &mut || set("up"),
    );
    drop(h);
    drop(nfs);
    Some(row)
}

/// A network namespace with a veth pair, removed on drop.
struct Netns {
    ip: std::path::PathBuf,
    name: String,
    host_if: String,
    inner_addr: [u8; 4],
}

impl Netns {
    fn create(ip: &Path) -> Option<Netns> {
        let id = std::process::id() % 10000;
        let name = format!("slkj{id}");
        let host_if = format!("slkjh{id}");
        let ns_if = format!("slkjn{id}");
        // A /30 of the benchmarking range 198.18.0.0/15 (RFC 2544), picked per process.
        let third = (id % 250) as u8;
        let base = [198, 18, third, 4];
        let host_addr = format!("198.18.{third}.5/30");
        let inner = [base[0], base[1], base[2], 6];
        let ns = Netns {
            ip: ip.to_path_buf(),
            name: name.clone(),
            host_if: host_if.clone(),
            inner_addr: inner,
        };
        let inner_cidr = format!("{}/30", ns.inner_addr_str());
        let steps: Vec<Vec<&str>> = vec![
            vec!["netns", "add", &name],
            vec![
                "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if,
            ],
            vec!["link", "set", &ns_if, "netns", &name],
            vec!["addr", "add", &host_addr, "dev", &host_if],
            vec!["link", "set", &host_if, "up"],
            vec!["-n", &name, "addr", "add", &inner_cidr, "dev", &ns_if],
            vec!["-n", &name, "link", "set", &ns_if, "up"],
            vec!["-n", &name, "link", "set", "lo", "up"],
        ];
        for s in steps {
            let out = Command::new(ip).args(&s).output().ok()?;
            if !out.status.success() {
                let msg = format!(
                    "ip {}: {}",
                    s.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                if lab::in_ci() {
                    panic!("network namespace setup failed in CI: {msg}");
                }
                lab::skip::skip(&format!("link-cut fault: {msg}"));
                return None;
            }
        }
        Some(ns)
    }

    fn inner_addr_str(&self) -> String {
        let a = self.inner_addr;
        format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new(&self.ip)
            .args(["link", "del", &self.host_if])
            .output();
        let _ = Command::new(&self.ip)
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// The export on an 8 MiB tmpfs filled by NFS writes: the write that does not fit must
/// fail with NFS3ERR_NOSPC, and every acknowledged byte (and an earlier file) stays intact.
fn disk_full(tmp: &Path) -> Option<Row> {
    let mnt = tmp.join("small");
    std::fs::create_dir(&mnt).unwrap();
    let out = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=8m",
            "servelab-test",
            mnt.to_str().unwrap(),
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        let msg = format!(
            "mount tmpfs: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        if lab::in_ci() {
            panic!("disk-full fault needs a tmpfs mount in CI: {msg}");
        }
        lab::skip::skip(&format!("disk-full fault: {msg}"));
        return None;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).output();
        }
    }
    let _um = Unmount(mnt.clone());
    let keep = lab::dataset::pseudo_random_bytes(1 << 20, 99);
    std::fs::write(mnt.join("keep.bin"), &keep).unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], common::free_port()));
    let nfs = ServerProc::start(&mnt, addr, None, &tmp.join("rustnfs-full.log"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut row = Row {
        fault: "export disk full (8 MiB tmpfs) during NFS writes".into(),
        requests: 0,
        failed: 0,
        hung: 0,
        corrupt: 0,
        recover: None,
        httpd_before: (0, 0),
        httpd_after: (0, 0),
        note: String::new(),
    };
    let keep_path = &mnt.join("keep.bin");
    let mut recovered_at = None;
    let recovered = &mut recovered_at;
    let note = rt.block_on(async {
        let mut c = match Conn::connect(addr, "/", Duration::from_secs(10)).await {
            Ok(c) => c,
            Err(e) => return format!("FAIL: connect: {e}"),
        };
        let root = c.root.clone();
        let fh = match c.create(&root, "fill.bin").await {
            Ok(fh) => fh,
            Err(e) => return format!("FAIL: CREATE: {e}"),
        };
        let chunk = 256 << 10;
        let mut acked = 0u64;
        let mut first_err = None;
        for i in 0..64u64 {
            let data = lab::dataset::pseudo_random_bytes(chunk, 1000 + i);
            match c
                .write(&fh, i * chunk as u64, &data, stable_how::FILE_SYNC)
                .await
            {
                Ok(r) if r.count as usize == chunk => acked += chunk as u64,
                Ok(r) => {
                    first_err = Some(format!("short WRITE: {} of {chunk}", r.count));
                    break;
                }
                Err(e) => {
                    first_err = Some(match &e {
                        CallError::Status(s) => format!("{s:?}"),
                        CallError::Transport(t) => format!("transport: {t}"),
                    });
                    let nospc = matches!(e, CallError::Status(nfsstat3::NFS3ERR_NOSPC));
                    if !nospc {
                        return format!(
                            "FAIL: the write that did not fit answered {}",
                            first_err.unwrap()
                        );
                    }
                    break;
                }
            }
        }
        let Some(err) = first_err else {
            return "FAIL: 16 MiB fitted on an 8 MiB tmpfs".into();
        };
        // Every acknowledged chunk reads back intact.
        for i in 0..acked / chunk as u64 {
            let want = lab::dataset::pseudo_random_bytes(chunk, 1000 + i);
            match c.read(&fh, i * chunk as u64, chunk).await {
                Ok(got) if got == want => {}
                Ok(_) => return format!("FAIL: acknowledged chunk {i} differs after ENOSPC"),
                Err(e) => return format!("FAIL: READ after ENOSPC: {e}"),
            }
        }
        // The earlier file is intact; freeing it (on the server's disk) makes room, and
        // the write that failed succeeds when retried.
        if !std::fs::read(keep_path).is_ok_and(|k| k == keep) {
            return format!("FAIL: keep.bin changed; {acked} bytes acknowledged, then {err}");
        }
        let _ = std::fs::remove_file(keep_path);
        let freed = Instant::now();
        let data = lab::dataset::pseudo_random_bytes(chunk, 1000 + acked / chunk as u64);
        match c.write(&fh, acked, &data, stable_how::FILE_SYNC).await {
            Ok(r) if r.count as usize == chunk => *recovered = Some(freed.elapsed()),
            Ok(r) => return format!("FAIL: retried WRITE wrote {} of {chunk}", r.count),
            Err(e) => return format!("FAIL: retried WRITE after freeing space: {e}"),
        }
        format!("{acked} bytes acknowledged, then {err}; all intact; retry after freeing space ok")
    });
    row.note = note;
    row.recover = recovered_at;
    drop(nfs);
    Some(row)
}
