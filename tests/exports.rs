//! Exports files (issue 35 §3) end to end: the rustnfs binary serving a three-export
//! exports(5) file — listed by `showmount -e` (nfs-common's, through rpcbind, and the
//! project's own `rustnfs --showmount`), reloaded on SIGHUP while clients of the other
//! exports keep reading, and mounted by the Linux kernel client over NFSv3 and NFSv4,
//! each export with its own options (`ro`, `all_squash`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common;
use crate::support::kvm::Vm;
use crate::support::rpc::{NFS3ERR_STALE, Rpc};
use crate::support::server::ServerProc;

/// Three exported directories `a`, `b`, `c` (each holding `data`) and an exports file.
struct Three {
    tmp: tempfile::TempDir,
    file: PathBuf,
}

/// What each export's `data` file holds.
fn content(d: &str) -> Vec<u8> {
    format!("{d} data ").repeat(1000).into_bytes()
}

impl Three {
    fn new(lines: &str) -> Three {
        let tmp = tempfile::tempdir().unwrap();
        for d in ["a", "b", "c"] {
            let dir = tmp.path().join(d);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("data"), content(d)).unwrap();
            // World-writable: the squashed identities write here.
            std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
                .unwrap();
        }
        let t = Three {
            file: tmp.path().join("exports"),
            tmp,
        };
        t.write(lines);
        t
    }

    fn path(&self, d: &str) -> String {
        self.tmp.path().join(d).display().to_string()
    }

    /// Writes the exports file, `{a}` standing for the path of `a`, and so on.
    fn write(&self, lines: &str) {
        let mut text = lines.to_string();
        for d in ["a", "b", "c"] {
            text = text.replace(&format!("{{{d}}}"), &self.path(d));
        }
        std::fs::write(&self.file, text).unwrap();
    }

    fn log(&self) -> PathBuf {
        self.tmp.path().join("rustnfs.log")
    }

    /// The rustnfs binary serving the file on loopback, logging at info.
    fn serve(&self) -> ServerProc {
        self.serve_with(&[])
    }

    /// [`serve`](Self::serve) with more options.
    fn serve_with(&self, more: &[String]) -> ServerProc {
        let addr: SocketAddr = format!("127.0.0.1:{}", common::free_port())
            .parse()
            .unwrap();
        ServerProc::binary("rustnfs", "rustnfs", addr)
            .args(more.iter().cloned())
            .args(["--exports".into(), self.file.display().to_string()])
            .args(["--listen".to_string(), addr.to_string()])
            .env_remove("NO_ROOT_SQUASH")
            .rust_log("info")
            .log(&self.log())
            .start()
    }
}

/// The three exports every test starts with: `a` read-only, `b` read-write with every
/// caller squashed to 1234:1234, `c` read-write.
const THREE: &str = "\
# three exports, as a kernel nfsd user writes them
{a} 127.0.0.0/8(ro,sync,no_subtree_check) 10.0.0.0/8(ro)
{b} *(rw,all_squash,anonuid=1234,anongid=1234,sync)
{c} -rw 127.0.0.1 192.168.0.0/255.255.0.0(ro)
";

/// The listing `showmount -e` prints for [`THREE`] (paths padded to the longest).
fn expected_listing(t: &Three, host: &str) -> String {
    let (a, b, c) = (t.path("a"), t.path("b"), t.path("c"));
    format!(
        "Export list for {host}:\n{a} 127.0.0.0/8,10.0.0.0/8\n{b} *\n{c} 127.0.0.1,192.168.0.0/255.255.0.0\n"
    )
}

/// `showmount -e` lists every export of a three-export file, with its clients: the
/// project's own client (`rustnfs --showmount`, MOUNT on the NFS port), and nfs-common's
/// through rpcbind (`--rpcbind`), in a network and mount namespace of its own with its
/// own rpcbind — the host's is shared with NFS-Ganesha and must not be touched.
#[test]
fn showmount_lists_every_export_of_a_three_export_file() {
    let t = Three::new(THREE);
    let server = t.serve();
    let addr = server.addr().to_string();
    let bin = common::workspace_bin("rustnfs", "rustnfs");
    let out = common::run_ok(Command::new(&bin).args(["--showmount", &addr]));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        expected_listing(&t, &addr)
    );
    drop(server);
    for tool in ["showmount", "rpcbind", "rpcinfo", "unshare", "ip"] {
        if common::require_tool(tool).is_none() {
            return;
        }
    }
    // In the namespace: a private /run for rpcbind's socket, loopback up, rpcbind, then
    // rustnfs registering with it on the standard port, then nfs-common's showmount;
    // after rustnfs stops, its registrations are gone.
    let script = r#"
set -e
mount -t tmpfs tmpfs /run
ip link set lo up
rpcbind -f & RPCB=$!
i=0; while [ ! -S /run/rpcbind.sock ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
"$1" --exports "$2" --listen 0.0.0.0:2049 --rpcbind >"$3" 2>&1 & NFSD=$!
i=0; while ! rpcinfo -p 127.0.0.1 2>/dev/null | grep -q mountd && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
showmount -e 127.0.0.1
kill $NFSD; wait $NFSD || true
echo "registered after stop: $(rpcinfo -p 127.0.0.1 | grep -c -e nfs -e mountd || true)"
kill $RPCB; wait $RPCB || true
"#;
    let ns_log = t.tmp.path().join("ns.log");
    let out = common::run_ok(
        Command::new("timeout")
            .args([
                "60", "unshare", "--net", "--mount", "sh", "-c", script, "sh",
            ])
            .arg(&bin)
            .arg(&t.file)
            .arg(&ns_log),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let log = std::fs::read_to_string(&ns_log).unwrap_or_default();
    assert!(
        text.starts_with(&expected_listing(&t, "127.0.0.1")),
        "nfs-common's showmount:\n{text}\nrustnfs:\n{log}"
    );
    assert!(
        text.contains("registered after stop: 0"),
        "{text}\nrustnfs:\n{log}"
    );
}

/// Reads `data` of the export at `path` over one connection until `stop`, then 20
/// times more; every read must return the whole file. Returns the reads made.
fn keep_reading(addr: SocketAddr, path: String, want: Vec<u8>, stop: Arc<AtomicBool>) -> usize {
    let mut rpc = Rpc::connect(addr);
    let root = rpc.mount(&path).unwrap();
    let fh = rpc.lookup(&root, b"data").unwrap();
    let mut reads = 0;
    let mut after = 0;
    while after < 20 {
        let got = rpc.read(&fh, 0, 1 << 20);
        assert_eq!(got.as_deref(), Ok(&want[..]), "read {reads} of {path}");
        reads += 1;
        if stop.load(Ordering::Relaxed) {
            after += 1;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    reads
}

/// Issue 35 §3: a SIGHUP whose file removes one export leaves clients of the others
/// reading, on their own connections, without an error; the removed export's handles
/// are STALE and it can no longer be mounted. A file that does not parse is refused in
/// one line naming the file, the line and what is wrong, and the exports stay.
#[test]
fn a_sighup_that_removes_an_export_leaves_the_others_reading() {
    let t = Three::new(THREE);
    let mut server = t.serve();
    let addr = server.addr();
    let listed = || rustnfs::showmount::list(addr).unwrap();
    assert_eq!(listed().len(), 3);
    let mut c_client = Rpc::connect(addr);
    let c_root = c_client.mount(&t.path("c")).unwrap();
    let c_data = c_client.lookup(&c_root, b"data").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|d| {
            let (path, want, stop) = (t.path(d), content(d), stop.clone());
            std::thread::spawn(move || keep_reading(addr, path, want, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    t.write("{a} 127.0.0.0/8(ro) 10.0.0.0/8(ro)\n{b} *(rw,all_squash,anonuid=1234,anongid=1234)\n");
    let sent = Instant::now();
    server.signal(libc::SIGHUP);
    while listed().len() != 2 {
        assert!(
            sent.elapsed() < Duration::from_secs(10),
            "no reload after SIGHUP"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        let reads = r.join().expect("a reader of a kept export failed");
        assert!(reads > 20, "{reads} reads");
    }
    // The removed export: its handles are stale, its path no longer mounts.
    assert_eq!(c_client.read(&c_data, 0, 10), Err(NFS3ERR_STALE));
    assert!(c_client.mount(&t.path("c")).is_err());
    // A file that does not parse: one line, the previous exports still served.
    t.write("{a} *(rw)\n{b} *(rw,async)\n");
    server.signal(libc::SIGHUP);
    let want = format!("{}:2: option 'async' is not supported", t.file.display());
    let refused = || {
        std::fs::read_to_string(t.log())
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("not reloaded"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let started = Instant::now();
    while refused().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no refusal logged"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let lines = refused();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains(&want), "{}", lines[0]);
    assert_eq!(listed().len(), 2);
    let mut a = Rpc::connect(addr);
    let root = a.mount(&t.path("a")).unwrap();
    let fh = a.lookup(&root, b"data").unwrap();
    assert_eq!(a.read(&fh, 0, 1 << 20).unwrap(), content("a"));
}

/// Issue 35 §3, with the Linux kernel client (qemu): two exports of one file mounted at
/// once — `a` (ro) over NFSv3, `b` (all_squash to 1234:1234) over NFSv4.0 and over
/// NFSv4.2 through the pseudo-filesystem (4.2's ALLOCATE reaching it, squashed) — with
/// their options honoured; all read from the server (page cache dropped) while a SIGHUP
/// removes `c`, without an error, after which `c` mounts over neither version. The choreography: the VM says it is reading by writing
/// `b/.reading`; the host reloads 2 s later and then answers with `a/.reloaded`.
#[test]
fn kernel_client_mounts_two_exports_with_their_options_through_a_reload() {
    let Some(vm) = Vm::require() else {
        return;
    };
    // qemu's user network brings the VM's connections from the host's loopback.
    let t = Three::new(
        "{a} 127.0.0.1(ro)\n{b} 127.0.0.0/8(rw,all_squash,anonuid=1234,anongid=1234)\n{c} *(rw)\n",
    );
    let metrics: SocketAddr = format!("127.0.0.1:{}", common::free_port())
        .parse()
        .unwrap();
    let mut server = t.serve_with(&["--metrics".into(), metrics.to_string()]);
    let addr = server.addr();
    let md5 = |d: &str| {
        let out = common::run_ok(Command::new("md5sum").arg(Path::new(&t.path(d)).join("data")));
        String::from_utf8_lossy(&out.stdout)[..32].to_string()
    };
    let params = vec![
        ("nfsport", addr.port().to_string()),
        ("a", t.path("a")),
        ("b", t.path("b")),
        ("c", t.path("c")),
        ("md5a", md5("a")),
        ("md5b", md5("b")),
    ];
    let run =
        std::thread::spawn(move || vm.run_script("exports", &params, Duration::from_secs(300)));
    let reading = Path::new(&t.path("b")).join(".reading");
    let started = Instant::now();
    while !reading.exists() && !run.is_finished() && started.elapsed() < Duration::from_secs(290) {
        std::thread::sleep(Duration::from_millis(100));
    }
    if reading.exists() {
        // Mid-loop: the VM has read for a while when the exports change.
        std::thread::sleep(Duration::from_secs(2));
        t.write("{a} 127.0.0.1(ro)\n{b} 127.0.0.0/8(rw,all_squash,anonuid=1234,anongid=1234)\n");
        server.signal(libc::SIGHUP);
        let sent = Instant::now();
        while rustnfs::showmount::list(addr).map_or(0, |l| l.len()) != 2 {
            assert!(
                sent.elapsed() < Duration::from_secs(10),
                "no reload after SIGHUP"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::write(Path::new(&t.path("a")).join(".reloaded"), b"").unwrap();
    }
    let vm_run = run.join().unwrap();
    let log = std::fs::read_to_string(t.log()).unwrap_or_default();
    let items: Vec<(&str, &str)> = vm_run
        .console
        .lines()
        .filter_map(|l| l.find("VMX ").map(|i| &l[i + 4..]))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let want = [
        "mount-a-v3",
        "mount-b-v4",
        "mount-b-v42",
        "vers-b-v42",
        "read-a",
        "read-b",
        "read-b-v42",
        "allocate-b-v42",
        "ro-a",
        "squash-by-root",
        "squash-by-u1",
        "read-through-reload",
        "gone-c-v3",
        "gone-c-v4",
    ];
    let report = format!(
        "VM ({:.0?}, timed out: {}):\n{}\nrustnfs log:\n{}",
        vm_run.elapsed,
        vm_run.timed_out,
        items
            .iter()
            .map(|(k, v)| format!("  {k} {v}"))
            .collect::<Vec<_>>()
            .join("\n"),
        lab::process::tail(&log, 30)
    );
    eprintln!("{report}");
    for item in want {
        let got = items.iter().find(|(k, _)| *k == item).map(|(_, v)| *v);
        assert!(
            got.is_some_and(|v| v.starts_with("PASS")),
            "{item}: {got:?}\n{report}"
        );
    }
    assert!(vm_run.console.contains("VMXDONE"), "{report}");
    // The 4.2 mount's fallocate came as ALLOCATE (not written out by the C library's
    // fallback), in a session.
    let text = lab::http::request(
        metrics,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        Duration::from_secs(5),
        Duration::from_secs(20),
    )
    .map(|r| String::from_utf8_lossy(&r.body).into_owned())
    .unwrap_or_default();
    for op in ["NFS4_ALLOCATE", "NFS4_SEQUENCE"] {
        let ok = format!("{{op=\"{op}\",phase=\"total\",status=\"ok\"");
        assert!(text.contains(&ok), "{op} ok not in the server's metrics");
    }
    // On the server's disk too: nothing in a, b's new files owned by the anonymous id.
    assert!(!Path::new(&t.path("a")).join("new").exists());
    for f in ["by-root", "by-u1"] {
        use std::os::unix::fs::MetadataExt;
        let md = std::fs::metadata(Path::new(&t.path("b")).join(f)).unwrap();
        assert_eq!((md.uid(), md.gid()), (1234, 1234), "{f}");
    }
}
