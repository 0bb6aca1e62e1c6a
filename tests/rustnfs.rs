//! End-to-end tests of rustnfs: libnfs-utils (`nfs-ls`, `nfs-cat`, `nfs-cp`) and a raw
//! ONC RPC client against the server started in-process on 127.0.0.1:0.
//!
//! The raw client sends what libnfs cannot express (`..`, names with `/`, handles of
//! symlinks, forged handles, oversized record marks, garbage), so each jail and bad-input
//! test fails if the corresponding protection is removed.

use std::collections::HashSet;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{self, Nfsd};
use crate::support::libnfs::{self, nfs_cat};
use crate::support::rpc::*;
use crate::support::tree::Tree;

// ---- real clients --------------------------------------------------------------------------

#[test]
fn libnfs_tools_list_read_and_write_through_every_url_form() {
    if !libnfs::available() {
        return;
    }
    let tree = Tree::new();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let want = std::fs::read(tree.export().join("testfile.bin")).unwrap();

    let ls = common::run_ok(Command::new("nfs-ls").arg(nfsd.url("/")));
    let ls = String::from_utf8_lossy(&ls.stdout);
    for name in ["index.html", "testfile.bin", "small.bin"] {
        assert!(ls.contains(name), "nfs-ls lacks {name}:\n{ls}");
    }

    // The 10 MiB file through the URL forms clients use: the export root as `/` plus a
    // file (`//file`), the export's own absolute path (`host:/srv/share`), and libnfs
    // 4.0's empty MOUNT path (`/file`; libnfs needs auto-traverse-mounts=0 for it).
    let abs = format!(
        "{}/testfile.bin",
        tree.export().canonicalize().unwrap().display()
    );
    for url in [
        nfsd.url("//testfile.bin"),
        nfsd.url(&abs),
        nfsd.url("/testfile.bin") + "&auto-traverse-mounts=0",
    ] {
        let got = nfs_cat(&url);
        assert!(
            got == want,
            "{url}: read {} bytes differing from the file",
            got.len()
        );
    }

    // nfs-cp up: byte-identical on disk. And down again.
    let upload = lab::dataset::pseudo_random_bytes(3 << 20, 5);
    let src = tree.dir.path().join("upload.bin");
    std::fs::write(&src, &upload).unwrap();
    common::run_ok(
        Command::new("nfs-cp")
            .arg(&src)
            .arg(nfsd.url("//uploaded.bin")),
    );
    assert!(std::fs::read(tree.export().join("uploaded.bin")).unwrap() == upload);
    let back = tree.dir.path().join("back.bin");
    common::run_ok(
        Command::new("nfs-cp")
            .arg(nfsd.url("//uploaded.bin"))
            .arg(&back),
    );
    assert!(std::fs::read(&back).unwrap() == upload);

    // Every procedure was timed, as a whole RPC and as file-system work.
    let snap = nfsd.registry.snapshot();
    let read = snap.get(&latency::Key::new("READ", "total", "ok")).unwrap();
    assert!(
        read.count() >= 30 && read.bytes >= 3 * (10 << 20),
        "READ total: {read:?}"
    );
    let vfs = snap.get(&latency::Key::new("READ", "vfs", "ok")).unwrap();
    assert_eq!(vfs.bytes, 3 * (10 << 20) + (3 << 20));
    assert!(snap.get(&latency::Key::new("WRITE", "vfs", "ok")).is_some());
    assert!(snap.get(&latency::Key::new("MNT", "total", "ok")).is_some());
    nfsd.stop().unwrap();
}

#[test]
fn metrics_endpoint_serves_prometheus_text_and_json() {
    let tree = Tree::new();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let fh = rpc.lookup(&root, b"small.bin").unwrap();
    assert_eq!(rpc.read(&fh, 0, 4096).unwrap().len(), 4096);

    let metrics = nfsd.metrics().unwrap();
    // The whole response as text: head, blank line, body.
    let get = |path: &str| {
        let r = lab::http::request(
            metrics.addr,
            format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
            Duration::from_secs(5),
            Duration::from_secs(20),
        )
        .unwrap();
        format!("{}\r\n\r\n{}", r.head, String::from_utf8_lossy(&r.body))
    };
    // A READ is recorded once its reply has left, which can be just after the client
    // has it: wait for the record (bounded, 2 s).
    let read_vfs = "{op=\"READ\",phase=\"vfs\",status=\"ok\"";
    let mut text = get("/metrics");
    for _ in 0..40 {
        if text.contains(read_vfs) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        text = get("/metrics");
    }
    let (json, missing) = (get("/metrics.json"), get("/nope"));
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.contains(
            "rustnfs_nfs_duration_seconds_bucket{op=\"READ\",phase=\"vfs\",status=\"ok\""
        ),
        "{text}"
    );
    assert!(
        json.starts_with("HTTP/1.1 200") && json.contains("\"READ\""),
        "{json}"
    );
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    metrics.stop().unwrap();
}

#[test]
fn read_only_export_refuses_writes_with_rofs() {
    let tree = Tree::new();
    let mut config = tree.config();
    config.read_only = true;
    let before = std::fs::read(tree.export().join("small.bin")).unwrap();
    let nfsd = Nfsd::start(config).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let fh = rpc.lookup(&root, b"small.bin").unwrap();
    assert_eq!(rpc.write(&fh, 0, b"overwrite", 2).0, NFS3ERR_ROFS);
    assert_eq!(rpc.create(&root, b"new.txt"), Err(NFS3ERR_ROFS));
    assert_eq!(rpc.mkdir(&root, b"newdir"), NFS3ERR_ROFS);
    assert_eq!(rpc.remove(&root, b"small.bin"), NFS3ERR_ROFS);
    assert_eq!(
        std::fs::read(tree.export().join("small.bin")).unwrap(),
        before
    );
    assert!(!tree.export().join("new.txt").exists());
    // Reads still work.
    assert_eq!(rpc.read(&fh, 0, 100).unwrap().len(), 100);

    if libnfs::available() {
        let src = tree.dir.path().join("up.bin");
        std::fs::write(&src, b"x").unwrap();
        let out = Command::new("nfs-cp")
            .arg(&src)
            .arg(nfsd.url("//up.bin"))
            .output()
            .unwrap();
        assert!(
            !out.status.success(),
            "nfs-cp to a read-only export succeeded"
        );
        assert!(!tree.export().join("up.bin").exists());
    }
}

#[test]
fn address_outside_allow_is_refused_at_connect() {
    let tree = Tree::new();
    let mut config = tree.config();
    config.allow = rustnfs::cli::parse_allow("10.0.0.0/8").unwrap();
    let nfsd = Nfsd::start(config).unwrap();
    let mut s = TcpStream::connect(nfsd.addr).unwrap();
    assert!(
        closed_within(&mut s, Duration::from_secs(5)),
        "127.0.0.1 was not refused"
    );
    let mut rpc = nfsd.rpc();
    assert!(
        rpc.call_raw(MOUNT, 0, &[]).is_err(),
        "a refused client got an answer"
    );
    if libnfs::available() {
        let out = Command::new("nfs-ls").arg(nfsd.url("/")).output().unwrap();
        assert!(
            !out.status.success(),
            "nfs-ls through a refused address succeeded"
        );
    }
    drop(nfsd);

    // The same export allowing loopback serves it.
    let mut config = tree.config();
    config.allow = rustnfs::cli::parse_allow("127.0.0.0/8").unwrap();
    let nfsd = Nfsd::start(config).unwrap();
    assert!(nfsd.rpc().mount("/").is_ok());
}

#[test]
fn mount_accepts_root_empty_and_the_exports_own_path() {
    let tree = Tree::new();
    std::fs::create_dir(tree.export().join("sub")).unwrap();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    assert_eq!(rpc.mount("").unwrap(), root, "empty MOUNT path");
    let abs = tree.export().canonicalize().unwrap();
    assert_eq!(
        rpc.mount(abs.to_str().unwrap()).unwrap(),
        root,
        "absolute path"
    );
    assert_eq!(rpc.mount(&format!("{}/", abs.display())).unwrap(), root);
    let sub = rpc.mount("/sub").unwrap();
    assert_eq!(rpc.lookup(&root, b"sub").unwrap(), sub);
    assert_eq!(rpc.mount("/nonexistent"), Err(2));
    assert!(rpc.mount("/../outside").is_err());
}

// ---- the jail -------------------------------------------------------------------------------

#[test]
fn lookup_dotdot_at_the_root_stays_at_the_root() {
    let tree = Tree::new();
    std::fs::create_dir(tree.export().join("sub")).unwrap();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let root_id = rpc.getattr(&root).unwrap();
    let up = rpc.lookup(&root, b"..").unwrap();
    assert_eq!(
        rpc.getattr(&up).unwrap(),
        root_id,
        "`..` of the root left the export"
    );
    // From it, the outside directory is not reachable.
    assert!(rpc.lookup(&up, b"outside").is_err());
    // `..` of a subdirectory is the root; `.` is itself.
    let sub = rpc.lookup(&root, b"sub").unwrap();
    let sub_up = rpc.lookup(&sub, b"..").unwrap();
    assert_eq!(rpc.getattr(&sub_up).unwrap(), root_id);
    assert_eq!(rpc.lookup(&sub, b".").unwrap(), sub);
    assert_eq!(rpc.lookup(&root, b"../outside"), Err(13), "a name with '/'");
    assert!(rpc.lookup(&root, b"sub/../../outside").is_err());
}

#[test]
fn names_with_slash_or_dots_are_refused_for_every_change() {
    let tree = Tree::new();
    std::fs::create_dir(tree.export().join("sub")).unwrap();
    let before = tree.outside_listing();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let sub = rpc.lookup(&root, b"sub").unwrap();
    for bad in [
        &b"../x"[..],
        b"../outside/x",
        b"a/b",
        b".",
        b"..",
        b"",
        b"x\0y",
    ] {
        let name = String::from_utf8_lossy(bad);
        assert!(rpc.create(&sub, bad).is_err(), "CREATE {name:?}");
        assert_ne!(rpc.mkdir(&sub, bad), NFS3_OK, "MKDIR {name:?}");
        assert_ne!(
            rpc.symlink(&sub, bad, b"/etc/passwd"),
            NFS3_OK,
            "SYMLINK {name:?}"
        );
        assert_ne!(
            rpc.rename(&root, b"index.html", &sub, bad),
            NFS3_OK,
            "RENAME to {name:?}"
        );
        assert_ne!(
            rpc.rename(&sub, bad, &root, b"stolen"),
            NFS3_OK,
            "RENAME from {name:?}"
        );
        assert_ne!(rpc.remove(&sub, bad), NFS3_OK, "REMOVE {name:?}");
    }
    assert_eq!(rpc.remove(&sub, b"../../outside/secret.txt"), 13);
    assert_eq!(
        tree.outside_listing(),
        before,
        "something changed outside the export"
    );
    assert!(tree.outside().join("secret.txt").exists());
    assert!(tree.export().join("index.html").exists());
    // Good names still work.
    assert!(rpc.create(&sub, b"fine.txt").is_ok());
    assert_eq!(rpc.rename(&sub, b"fine.txt", &root, b"moved.txt"), NFS3_OK);
    assert!(tree.export().join("moved.txt").exists());
}

#[test]
fn symlinks_are_never_followed_by_the_server() {
    let tree = Tree::new();
    let outside = tree.outside();
    std::os::unix::fs::symlink(&outside, tree.export().join("escape")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), tree.export().join("secret")).unwrap();
    std::os::unix::fs::symlink("../outside", tree.export().join("relative")).unwrap();
    let before = tree.outside_listing();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();

    // LOOKUP returns the link itself; READLINK shows its text (clients resolve it).
    let secret = rpc.lookup(&root, b"secret").unwrap();
    assert_eq!(
        rpc.readlink(&secret).unwrap(),
        outside.join("secret.txt").to_str().unwrap().as_bytes()
    );
    // READ on a symlink's handle does not read the target.
    let read = rpc.read(&secret, 0, 100);
    assert!(read.is_err(), "READ through a symlink returned {read:?}");
    for link in [&b"escape"[..], b"relative"] {
        let fh = rpc.lookup(&root, link).unwrap();
        // Used as a directory, the link is not one: nothing beyond it is reachable.
        assert!(
            rpc.lookup(&fh, b"secret.txt").is_err(),
            "LOOKUP through a symlink"
        );
        assert!(
            rpc.list(&fh, true, 8192).is_err(),
            "READDIRPLUS through a symlink"
        );
        assert!(
            rpc.list(&fh, false, 8192).is_err(),
            "READDIR through a symlink"
        );
        assert!(
            rpc.create(&fh, b"planted").is_err(),
            "CREATE through a symlink"
        );
        assert_ne!(rpc.mkdir(&fh, b"planted-dir"), NFS3_OK);
        assert_ne!(rpc.remove(&fh, b"secret.txt"), NFS3_OK);
        assert_ne!(rpc.rename(&fh, b"secret.txt", &root, b"stolen"), NFS3_OK);
    }
    // A symlink created through NFS pointing outside is stored, never followed.
    assert_eq!(
        rpc.symlink(&root, b"mine", b"../outside/secret.txt"),
        NFS3_OK
    );
    let mine = rpc.lookup(&root, b"mine").unwrap();
    assert!(rpc.read(&mine, 0, 100).is_err());
    assert_ne!(rpc.write(&mine, 0, b"pwned", 2).0, NFS3_OK);
    assert_eq!(tree.outside_listing(), before);
    assert_eq!(
        std::fs::read(outside.join("secret.txt")).unwrap(),
        b"TOP SECRET\n"
    );
}

#[test]
fn a_directory_swapped_for_a_symlink_does_not_lead_outside() {
    let tree = Tree::new();
    let export = tree.export();
    std::fs::create_dir(export.join("dir")).unwrap();
    std::fs::write(export.join("dir/inside.txt"), b"inside").unwrap();
    let before = tree.outside_listing();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let dir = rpc.lookup(&root, b"dir").unwrap();

    // Between calls, someone swaps `dir` for a symlink to the outside.
    std::fs::rename(export.join("dir"), export.join("dir-moved")).unwrap();
    std::os::unix::fs::symlink(tree.outside(), export.join("dir")).unwrap();

    // The old handle still means the same directory (now `dir-moved`), never the target.
    assert!(rpc.lookup(&dir, b"secret.txt").is_err());
    let inside = rpc.lookup(&dir, b"inside.txt").unwrap();
    assert_eq!(rpc.read(&inside, 0, 100).unwrap(), b"inside");
    let _ = rpc.create(&dir, b"planted");
    assert!(!tree.outside().join("planted").exists());
    // The new name is a symlink: not a directory to the server.
    let link = rpc.lookup(&root, b"dir").unwrap();
    assert!(rpc.lookup(&link, b"secret.txt").is_err());
    assert!(rpc.create(&link, b"planted2").is_err());
    assert_eq!(tree.outside_listing(), before);
}

// ---- handles -----------------------------------------------------------------------------

#[test]
fn handles_survive_a_restart_and_forged_ones_are_refused() {
    let tree = Tree::new();
    std::fs::create_dir_all(tree.export().join("a/b")).unwrap();
    std::fs::write(tree.export().join("a/b/deep.txt"), b"deep file").unwrap();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let a = rpc.lookup(&root, b"a").unwrap();
    let b = rpc.lookup(&a, b"b").unwrap();
    let deep = rpc.lookup(&b, b"deep.txt").unwrap();
    let small = rpc.lookup(&root, b"small.bin").unwrap();
    drop(rpc);
    nfsd.stop().unwrap();

    // A new process knows none of these inodes yet: it finds them again.
    std::fs::remove_file(tree.export().join("small.bin")).unwrap();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    assert_eq!(rpc.read(&deep, 0, 100).unwrap(), b"deep file");
    assert!(rpc.lookup(&b, b"deep.txt").is_ok());
    assert_eq!(rpc.mount("/").unwrap(), root, "the root handle changed");
    // Deleted since: stale, not an error of the server.
    assert_eq!(rpc.getattr(&small), Err(NFS3ERR_STALE));
    assert_eq!(rpc.read(&small, 0, 10), Err(NFS3ERR_STALE));

    // Forged handles: right shape with an unknown inode, wrong generation, wrong length.
    let mut forged = deep.clone();
    forged[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(rpc.getattr(&forged), Err(NFS3ERR_STALE));
    let mut other_gen = deep.clone();
    other_gen[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(rpc.getattr(&other_gen), Err(NFS3ERR_BADHANDLE));
    assert_eq!(rpc.getattr(&deep[..10]), Err(NFS3ERR_BADHANDLE));
    assert!(rpc.getattr(&[]).is_err());
    // Still serving after all that.
    assert_eq!(rpc.read(&deep, 5, 100).unwrap(), b"file");
}

// ---- directories ---------------------------------------------------------------------------

#[test]
fn readdir_and_readdirplus_page_100k_entries_exactly() {
    let tree = Tree::new();
    let big = tree.export().join("big");
    std::fs::create_dir(&big).unwrap();
    let n = 100_000;
    for i in 0..n {
        std::fs::File::create(big.join(format!("entry-{i:06}"))).unwrap();
    }
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let dir = rpc.lookup(&root, b"big").unwrap();
    let want: HashSet<Vec<u8>> = (0..n)
        .map(|i| format!("entry-{i:06}").into_bytes())
        .collect();
    for (plus, maxcount) in [(true, 32 * 1024), (false, 16 * 1024)] {
        let started = Instant::now();
        let names = rpc.list(&dir, plus, maxcount).unwrap();
        let unique: HashSet<Vec<u8>> = names.iter().cloned().collect();
        assert_eq!(
            names.len(),
            n,
            "plus={plus}: {} names (duplicates or gaps)",
            names.len()
        );
        assert!(unique == want, "plus={plus}: the names differ");
        eprintln!(
            "listed {n} entries (plus={plus}) in {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn write_is_on_disk_and_as_stable_as_asked() {
    let tree = Tree::new();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let fh = rpc.create(&root, b"w.bin").unwrap();
    let data = lab::dataset::pseudo_random_bytes(1 << 20, 3);
    // Asked UNSTABLE, answered UNSTABLE (COMMIT makes it stable); FILE_SYNC as asked.
    assert_eq!(rpc.write(&fh, 0, &data, 0), (NFS3_OK, 0));
    assert_eq!(rpc.write(&fh, 1 << 20, b"tail", 2), (NFS3_OK, 2));
    let on_disk = std::fs::read(tree.export().join("w.bin")).unwrap();
    assert_eq!(on_disk.len(), (1 << 20) + 4);
    assert!(on_disk[..1 << 20] == data[..] && &on_disk[1 << 20..] == b"tail");
    // COMMIT is implemented (nfsserve answered PROC_UNAVAIL).
    let body = rpc.call(NFS, 21, Xdr::default().opaque(&fh).u64(0).u32(0));
    assert_eq!(Reply::new(&body).u32(), NFS3_OK);
    // FSSTAT carries the real file system's figures, not constants.
    let body = rpc.call(NFS, 18, Xdr::default().opaque(&root));
    let mut r = Reply::new(&body);
    assert_eq!(r.u32(), NFS3_OK);
    r.post_op_attr();
    let (tbytes, fbytes, abytes) = (r.u64(), r.u64(), r.u64());
    assert!(
        tbytes > 0 && fbytes <= tbytes && abytes <= fbytes,
        "{tbytes} {fbytes} {abytes}"
    );
    assert_ne!(tbytes, 1 << 40, "a constant");
    assert_eq!(rpc.remove(&root, b"w.bin"), NFS3_OK);
    assert_eq!(rpc.getattr(&fh), Err(NFS3ERR_STALE));
    assert_eq!(rpc.lookup(&root, b"w.bin"), Err(NFS3ERR_NOENT));
    nfsd.stop().unwrap();
    // --sync: asked UNSTABLE, answered FILE_SYNC (synced before the reply).
    let mut config = tree.config();
    config.sync_writes = true;
    let nfsd = Nfsd::start(config).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let fh = rpc.create(&root, b"s.bin").unwrap();
    assert_eq!(rpc.write(&fh, 0, b"synced", 0), (NFS3_OK, 2));
}

// ---- bad input -----------------------------------------------------------------------------

#[test]
fn a_2gib_record_mark_closes_the_connection_without_allocating() {
    let tree = Tree::new();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let rss_before = lab::sampler::rss_bytes(std::process::id()).unwrap() / 1024;
    let mut conns = Vec::new();
    for _ in 0..4 {
        let mut s = TcpStream::connect(nfsd.addr).unwrap();
        // Last fragment, 0x7fff_fff0 bytes claimed, a few sent.
        s.write_all(&0xffff_fff0u32.to_be_bytes()).unwrap();
        s.write_all(&[0u8; 64]).unwrap();
        conns.push(s);
    }
    for s in &mut conns {
        assert!(
            closed_within(s, Duration::from_secs(5)),
            "a 2 GiB claim was not refused"
        );
    }
    let grown =
        (lab::sampler::rss_bytes(std::process::id()).unwrap() / 1024).saturating_sub(rss_before);
    // Unguarded, each claim makes the engine zero-fill 2 GiB; other tests run in this
    // process too, so the bound leaves them room.
    assert!(grown < 512 * 1024, "RSS grew by {grown} KiB");
    // A large claim split over fragments is refused too.
    let mut s = TcpStream::connect(nfsd.addr).unwrap();
    for _ in 0..3 {
        let _ = s.write_all(&0x0060_0000u32.to_be_bytes());
        let _ = s.write_all(&vec![0u8; 0x60_0000]);
    }
    assert!(closed_within(&mut s, Duration::from_secs(5)));
    // Others are still served.
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let fh = rpc.lookup(&root, b"testfile.bin").unwrap();
    assert_eq!(rpc.read(&fh, 0, 1 << 20).unwrap().len(), 1 << 20);
}

#[test]
fn garbage_and_half_sent_requests_close_only_their_connection() {
    let tree = Tree::new();
    let mut config = tree.config();
    config.request_timeout = Duration::from_secs(1);
    let nfsd = Nfsd::start(config).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();

    // Bytes that are no RPC call at all.
    let mut g = TcpStream::connect(nfsd.addr).unwrap();
    g.write_all(b"\x80\x00\x00\x10GET / HTTP/1.1\r\n").unwrap();
    assert!(
        closed_within(&mut g, Duration::from_secs(5)),
        "garbage was not refused"
    );
    // Raw noise without a sensible record mark.
    let mut g = TcpStream::connect(nfsd.addr).unwrap();
    g.write_all(&lab::dataset::pseudo_random_bytes(4096, 1))
        .unwrap();
    assert!(closed_within(&mut g, Duration::from_secs(5)));
    // A call with truncated arguments gets GARBAGE_ARGS, the connection stays usable.
    let (accept, _) = rpc
        .call_raw(NFS, 6, &[0, 0, 0, 8, 1])
        .unwrap_or((99, vec![]));
    assert!(
        accept == 4 || accept == 99,
        "truncated args: accept {accept}"
    );

    // Half a request, then silence: closed after the request timeout.
    let mut h = TcpStream::connect(nfsd.addr).unwrap();
    h.write_all(&0x8000_0100u32.to_be_bytes()).unwrap();
    h.write_all(&[0u8; 10]).unwrap();
    let started = Instant::now();
    let mut other = nfsd.rpc();
    assert!(other.mount("/").is_ok(), "another client was blocked");
    assert!(
        closed_within(&mut h, Duration::from_secs(5)),
        "a half-sent request hung"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let mut fresh = nfsd.rpc();
    assert!(fresh.lookup(&root, b"index.html").is_ok());
}

#[test]
fn thousands_of_idle_connections_do_not_stop_the_others() {
    let tree = Tree::new();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    // Client and server ends both live in this process: two descriptors per connection.
    let limit = rustnfs::raise_nofile_limit().unwrap_or(1024);
    let n = 2000.min((limit.saturating_sub(600) / 2) as usize);
    if n < 2000 {
        eprintln!("open-file limit {limit}: {n} idle connections instead of 2,000");
    }
    let mut idle = Vec::new();
    for _ in 0..n {
        idle.push(TcpStream::connect(nfsd.addr).unwrap());
    }
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let fh = rpc.lookup(&root, b"testfile.bin").unwrap();
    let want = std::fs::read(tree.export().join("testfile.bin")).unwrap();
    let mut got = Vec::new();
    while got.len() < want.len() {
        got.extend(rpc.read(&fh, got.len() as u64, 1 << 20).unwrap());
    }
    assert!(got == want);
    if libnfs::available() {
        assert!(nfs_cat(&nfsd.url("//testfile.bin")) == want);
    }
    drop(idle);

    // With a connection cap, idle connections are closed after the idle timeout, so the
    // cap cannot be held forever; over the cap, connections are closed at accept.
    let mut config = tree.config();
    config.max_connections = 8;
    config.idle_timeout = Duration::from_secs(1);
    let nfsd = Nfsd::start(config).unwrap();
    let mut idle: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect(nfsd.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut over = TcpStream::connect(nfsd.addr).unwrap();
    assert!(
        closed_within(&mut over, Duration::from_secs(2)),
        "over the cap, not closed"
    );
    for s in &mut idle {
        assert!(
            closed_within(s, Duration::from_secs(5)),
            "idle connection kept"
        );
    }
    assert!(nfsd.rpc().mount("/").is_ok());
}

#[test]
fn shutdown_is_graceful_and_serve_returns() {
    let tree = Tree::new();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    assert!(rpc.lookup(&root, b"index.html").is_ok());
    let registry = nfsd.registry.clone();
    nfsd.stop().unwrap();
    let table = latency::table::render(&registry.snapshot());
    assert!(table.contains("LOOKUP") && table.contains("MNT"), "{table}");
    assert!(!Path::new("/nonexistent").exists());
}

#[test]
fn squash_gives_new_objects_the_squash_owner() {
    use std::os::unix::fs::MetadataExt;
    let tree = Tree::new();
    if std::fs::metadata(tree.export().join("index.html"))
        .unwrap()
        .uid()
        != 0
    {
        common::skip("squashing to another uid needs root");
        return;
    }
    // Acting as 65534 (all_squash), the export must let 65534 create.
    use std::os::unix::fs::PermissionsExt;
    let open = std::fs::Permissions::from_mode(0o777);
    std::fs::set_permissions(tree.export(), open).unwrap();
    let mut config = tree.config();
    config.squash = rustnfs::config::Squash::All(65534, 65533);
    let nfsd = Nfsd::start(config).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    rpc.create(&root, b"made.txt").unwrap();
    assert_eq!(rpc.mkdir(&root, b"made-dir"), NFS3_OK);
    assert_eq!(rpc.symlink(&root, b"made-link", b"made.txt"), NFS3_OK);
    for name in ["made.txt", "made-dir", "made-link"] {
        let m = std::fs::symlink_metadata(tree.export().join(name)).unwrap();
        assert_eq!((m.uid(), m.gid()), (65534, 65533), "{name}");
    }
}

/// READ over a socket (the guard's data path; the copy path is the unit test
/// `read_is_refused_without_read_permission`) checks read
/// permission as knfsd does: a raw client that skips ACCESS and sends READ for a
/// root-only file as uid 1000 gets NFS3ERR_ACCES; the owner reads its own 0600 file.
#[test]
fn raw_read_without_read_permission_is_refused() {
    use crate::support::nfs3::{CallError, Conn};
    use std::os::unix::fs::PermissionsExt;
    let tree = Tree::new();
    let export = tree.export();
    if unsafe { libc::geteuid() } != 0 {
        common::skip("reading as another uid needs a server that can act as its callers (root)");
        return;
    }
    for (name, owner) in [("secret.txt", 0), ("mine.txt", 1000)] {
        std::fs::write(export.join(name), name).unwrap();
        std::os::unix::fs::chown(export.join(name), Some(owner), Some(owner)).unwrap();
        std::fs::set_permissions(export.join(name), std::fs::Permissions::from_mode(0o600))
            .unwrap();
    }
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], nfsd.port()));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = Conn::connect_as(addr, "/", (1000, 1000), Duration::from_secs(5))
            .await
            .unwrap();
        let root = c.root.clone();
        let secret = c.lookup(&root, "secret.txt").await.unwrap();
        match c.read(&secret, 0, 64).await {
            Err(CallError::Status(s)) => assert_eq!(
                s,
                nfs3_client::nfs3_types::nfs3::nfsstat3::NFS3ERR_ACCES,
                "uid 1000 reading root's 0600 file"
            ),
            other => panic!("uid 1000 read root's 0600 file: {other:?}"),
        }
        let mine = c.lookup(&root, "mine.txt").await.unwrap();
        assert_eq!(c.read(&mine, 0, 64).await.unwrap(), b"mine.txt");
    });
}

// ---- rustnfs --healthcheck (the built binary) ----------------------------------------------

/// Runs `rustnfs --healthcheck ARGS` without SHARED_DIRECTORY; returns (exit code,
/// stdout + stderr, elapsed).
fn healthcheck(args: &[&str]) -> (i32, String, Duration) {
    let bin = common::workspace_bin("rustnfs", "rustnfs");
    common::run_timed(
        Command::new(bin)
            .arg("--healthcheck")
            .args(args)
            .env_remove("SHARED_DIRECTORY")
            .env_remove("RUSTNFS_LISTEN")
            .env_remove("RUST_LOG"),
    )
}

#[test]
fn healthcheck_flag_reports_healthy_and_unhealthy() {
    let dir = tempfile::tempdir().unwrap();
    let nfsd = Nfsd::start(rustnfs::Config::new(dir.path())).unwrap();
    // Healthy: NULL to NFS v3 accepted; the image's 0.0.0.0:PORT is probed on loopback.
    for listen in [nfsd.addr.to_string(), format!("0.0.0.0:{}", nfsd.port())] {
        let (code, text, _) = healthcheck(&["--listen", &listen]);
        assert_eq!(code, 0, "{listen}: {text}");
        assert_eq!(text.lines().count(), 1, "one line: {text}");
        assert!(
            text.starts_with("healthy: nfs://127.0.0.1:") && text.contains("NULL accepted"),
            "{text}"
        );
    }
    nfsd.stop().unwrap();

    // A server whose allowlist leaves out loopback closes the probe's connection.
    let mut cfg = rustnfs::Config::new(dir.path());
    cfg.allow = rustnfs::cli::parse_allow("10.0.0.0/8").unwrap();
    let denied = Nfsd::start(cfg).unwrap();
    let (code, text, _) = healthcheck(&["--listen", &denied.addr.to_string()]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("unhealthy") && text.contains("no reply"),
        "{text}"
    );
    denied.stop().unwrap();

    // Nothing listening: fast. An HTTP server is not an NFS server.
    let port = common::free_port();
    let (code, text, took) = healthcheck(&["--listen", &format!("127.0.0.1:{port}")]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("connect failed"), "{text}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = silent.local_addr().unwrap().to_string();
    let (code, text, took) = healthcheck(&["--listen", &listen]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("no answer within 3s"), "{text}");
    assert!(took < Duration::from_secs(6), "{took:?}");
    drop(silent);
}

// ---- what the Linux kernel client needs (issue 10 §2), as raw RPC -------------------------

fn mtime_of(p: &Path) -> (i64, i64) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).unwrap();
    (m.mtime(), m.mtime_nsec())
}

const NFS3ERR_EXIST: u32 = 17;

#[test]
fn setattr_sets_times_from_the_client_and_the_server_clock() {
    use std::os::unix::fs::MetadataExt;
    // `touch -d` (client time) and `touch` (server time) of an existing file and
    // directory; both were NFS3ERR_INVAL when glibc's utimensat(fd, NULL) was used.
    let tree = Tree::new();
    std::fs::create_dir(tree.export().join("d")).unwrap();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    for name in ["index.html", "d"] {
        let fh = rpc.lookup(&root, name.as_bytes()).unwrap();
        let path = tree.export().join(name);
        let at = Sattr {
            atime: Some(Some((1_000_000_000, 5))),
            mtime: Some(Some((1_234_567_890, 123_456_789))),
            ..Sattr::default()
        };
        assert_eq!(rpc.setattr(&fh, at), NFS3_OK, "{name}: client time");
        assert_eq!(mtime_of(&path), (1_234_567_890, 123_456_789), "{name}");
        assert_eq!(std::fs::metadata(&path).unwrap().atime(), 1_000_000_000);
        let now = Sattr {
            atime: Some(None),
            mtime: Some(None),
            ..Sattr::default()
        };
        assert_eq!(rpc.setattr(&fh, now), NFS3_OK, "{name}: server time");
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert!(
            (mtime_of(&path).0 - wall).abs() < 60,
            "{name}: mtime is now"
        );
    }
}

#[test]
fn exclusive_create_retransmission_succeeds_and_other_modes_behave() {
    let tree = Tree::new();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let none = Sattr::default();
    // EXCLUSIVE: created; the same verifier again (a retransmission) succeeds with the
    // same file; another verifier is EXIST (RFC 1813 §3.3.8).
    let v1 = *b"verif-01";
    let fh = rpc.create_how(&root, b"x.lock", 2, none, v1).unwrap();
    assert_eq!(rpc.create_how(&root, b"x.lock", 2, none, v1).unwrap(), fh);
    assert_eq!(
        rpc.create_how(&root, b"x.lock", 2, none, *b"verif-02"),
        Err(NFS3ERR_EXIST)
    );
    // The client's follow-up SETATTR sets the real mode and times.
    let real = Sattr {
        mode: Some(0o640),
        atime: Some(None),
        mtime: Some(None),
        ..Sattr::default()
    };
    assert_eq!(rpc.setattr(&fh, real), NFS3_OK);
    let m = std::fs::metadata(tree.export().join("x.lock")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(m.permissions().mode() & 0o7777, 0o640);
    // An existing name: EXCLUSIVE and GUARDED are EXIST, UNCHECKED applies the
    // attributes (size 0 truncates, as `echo > f` does).
    assert_eq!(
        rpc.create_how(&root, b"index.html", 2, none, v1),
        Err(NFS3ERR_EXIST)
    );
    assert_eq!(
        rpc.create_how(&root, b"index.html", 1, none, [0; 8]),
        Err(NFS3ERR_EXIST)
    );
    let trunc = Sattr {
        size: Some(0),
        ..Sattr::default()
    };
    rpc.create_how(&root, b"index.html", 0, trunc, [0; 8])
        .unwrap();
    assert_eq!(
        std::fs::metadata(tree.export().join("index.html"))
            .unwrap()
            .len(),
        0
    );
    // GUARDED of a new name creates it with the mode asked (not trimmed by a umask).
    let mode = Sattr {
        mode: Some(0o666),
        ..Sattr::default()
    };
    rpc.create_how(&root, b"g.txt", 1, mode, [0; 8]).unwrap();
    let m = std::fs::metadata(tree.export().join("g.txt")).unwrap();
    assert_eq!(m.permissions().mode() & 0o7777, 0o666);
}

#[test]
fn setattr_size_grows_and_shrinks_and_refuses_2_pow_63() {
    let tree = Tree::new();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let fh = rpc.create(&root, b"t.bin").unwrap();
    let path = tree.export().join("t.bin");
    assert_eq!(rpc.write(&fh, 0, b"0123456789", 2).0, NFS3_OK);
    let size = |n| Sattr {
        size: Some(n),
        mtime: Some(None),
        ..Sattr::default()
    };
    assert_eq!(rpc.setattr(&fh, size(100_000)), NFS3_OK, "grow");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 100_000);
    assert_eq!(rpc.setattr(&fh, size(3)), NFS3_OK, "shrink");
    assert_eq!(std::fs::read(&path).unwrap(), b"012");
    // 2^63 and above cannot be a size: FBIG (was IO), and the file is unchanged.
    for n in [1u64 << 63, u64::MAX] {
        assert_eq!(rpc.setattr(&fh, size(n)), 27, "{n}");
    }
    assert_eq!(std::fs::read(&path).unwrap(), b"012");
    // A directory has no size.
    let sub = rpc.mkdir(&root, b"dir");
    assert_eq!(sub, NFS3_OK);
    let dir = rpc.lookup(&root, b"dir").unwrap();
    assert_eq!(rpc.setattr(&dir, size(0)), 21);
}

#[test]
fn link_makes_hard_links_inside_the_export_only() {
    use std::os::unix::fs::MetadataExt;
    let tree = Tree::new();
    let outside = tree.outside();
    std::os::unix::fs::symlink(outside.join("secret.txt"), tree.export().join("secret")).unwrap();
    std::fs::create_dir(tree.export().join("sub")).unwrap();
    let before = tree.outside_listing();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let sub = rpc.lookup(&root, b"sub").unwrap();
    let file = rpc.lookup(&root, b"index.html").unwrap();
    assert_eq!(rpc.link(&file, &sub, b"hard.html"), NFS3_OK);
    let a = std::fs::metadata(tree.export().join("index.html")).unwrap();
    let b = std::fs::metadata(tree.export().join("sub/hard.html")).unwrap();
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2));
    assert_eq!(rpc.link(&file, &sub, b"hard.html"), NFS3ERR_EXIST);
    // The target name is one checked component, like every new name.
    for bad in [
        &b"../x"[..],
        b"../../outside/x",
        b"a/b",
        b".",
        b"..",
        b"",
        b"x\0y",
    ] {
        assert_ne!(rpc.link(&file, &sub, bad), NFS3_OK, "{bad:?}");
    }
    // A symlink is linked as itself, never its target outside.
    let link = rpc.lookup(&root, b"secret").unwrap();
    assert_eq!(rpc.link(&link, &sub, b"secret2"), NFS3_OK);
    let l = std::fs::symlink_metadata(tree.export().join("sub/secret2")).unwrap();
    assert!(l.file_type().is_symlink());
    assert_eq!(
        std::fs::metadata(outside.join("secret.txt"))
            .unwrap()
            .nlink(),
        1
    );
    // Directories cannot be linked; forged sources are refused.
    assert_ne!(rpc.link(&sub, &root, b"subdir2"), NFS3_OK);
    let mut forged = file.clone();
    let n = forged.len();
    forged[n - 1] ^= 0x55;
    assert_ne!(rpc.link(&forged, &sub, b"forged"), NFS3_OK);
    assert_eq!(tree.outside_listing(), before);
}

#[test]
fn mknod_makes_fifos_and_sockets_and_refuses_devices() {
    use std::os::unix::fs::FileTypeExt;
    let tree = Tree::new();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let mknod = |rpc: &mut Rpc, name: &[u8], what: Xdr| {
        let mut args = Xdr::default().opaque(&root).opaque(name);
        args.0.extend_from_slice(&what.0);
        rpc.status_of(11, args)
    };
    let fifo = Xdr::default().u32(7).sattr(Sattr {
        mode: Some(0o600),
        ..Sattr::default()
    });
    assert_eq!(mknod(&mut rpc, b"pipe", fifo), NFS3_OK);
    let m = std::fs::symlink_metadata(tree.export().join("pipe")).unwrap();
    assert!(m.file_type().is_fifo());
    let sock = Xdr::default().u32(6).sattr(Sattr::default());
    assert_eq!(mknod(&mut rpc, b"sock", sock), NFS3_OK);
    assert!(
        std::fs::symlink_metadata(tree.export().join("sock"))
            .unwrap()
            .file_type()
            .is_socket()
    );
    // A character device (1, 3 = /dev/null): PERM (no --allow-device-nodes); a regular
    // "node": BADTYPE.
    let chr = Xdr::default().u32(4).sattr(Sattr::default()).u32(1).u32(3);
    assert_eq!(mknod(&mut rpc, b"null", chr), 1);
    assert!(!tree.export().join("null").exists());
    assert_eq!(mknod(&mut rpc, b"reg", Xdr::default().u32(1)), 10007);
    let fifo = Xdr::default().u32(7).sattr(Sattr::default());
    assert_ne!(mknod(&mut rpc, b"../p", fifo), NFS3_OK);
    // The server never opens a fifo for data.
    let pipe = rpc.lookup(&root, b"pipe").unwrap();
    assert!(rpc.read(&pipe, 0, 10).is_err());
}

#[test]
fn mount_of_a_symlink_or_a_file_is_notdir() {
    let tree = Tree::new();
    std::fs::create_dir(tree.export().join("sub")).unwrap();
    std::os::unix::fs::symlink("sub", tree.export().join("link")).unwrap();
    std::os::unix::fs::symlink(tree.outside(), tree.export().join("out")).unwrap();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    assert!(rpc.mount("/sub").is_ok());
    assert_eq!(rpc.mount("/link"), Err(20));
    assert_eq!(rpc.mount("/out"), Err(20));
    assert_eq!(rpc.mount("/index.html"), Err(20));
    assert_eq!(rpc.mount("/link/x"), Err(20));
}

#[test]
fn rename_replaces_files_and_empty_directories() {
    let tree = Tree::new();
    let e = tree.export();
    std::fs::write(e.join("a"), b"new").unwrap();
    std::fs::write(e.join("b"), b"old").unwrap();
    std::fs::create_dir_all(e.join("d1/inner")).unwrap();
    std::fs::create_dir(e.join("d2")).unwrap();
    std::fs::create_dir_all(e.join("full/x")).unwrap();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    assert_eq!(rpc.rename(&root, b"a", &root, b"b"), NFS3_OK);
    assert_eq!(std::fs::read(e.join("b")).unwrap(), b"new");
    assert!(!e.join("a").exists());
    assert_eq!(
        rpc.rename(&root, b"d1", &root, b"d2"),
        NFS3_OK,
        "over an empty dir"
    );
    assert!(e.join("d2/inner").is_dir());
    assert_eq!(
        rpc.rename(&root, b"d2", &root, b"full"),
        66,
        "over a non-empty dir"
    );
    assert_eq!(
        rpc.rename(&root, b"b", &root, b"full"),
        21,
        "a file over a dir"
    );
    assert_eq!(
        rpc.rename(&root, b"full", &root, b"b"),
        20,
        "a dir over a file"
    );
    // The moved directory's contents are still reachable through it.
    let d2 = rpc.lookup(&root, b"d2").unwrap();
    assert!(rpc.lookup(&d2, b"inner").is_ok());
}

#[test]
fn access_reports_what_the_callers_uid_may_do() {
    use std::os::unix::fs::PermissionsExt;
    let tree = Tree::new();
    let path = tree.export().join("private.txt");
    std::fs::write(&path, b"p").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let owner = std::fs::metadata(&path).map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid()
    });
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let fh = rpc.lookup(&root, b"private.txt").unwrap();
    // READ 1, MODIFY 4, EXTEND 8, EXECUTE 32.
    rpc.uid = owner.unwrap();
    rpc.gid = 12_345;
    assert_eq!(rpc.access(&fh, 1 | 4 | 8 | 32), Ok(1 | 4 | 8), "the owner");
    rpc.uid = 54_321;
    assert_eq!(rpc.access(&fh, 1 | 4 | 8 | 32), Ok(0), "another user");
    // Root reads and writes; nobody executes a file without an execute bit.
    rpc.uid = 0;
    rpc.gid = 0;
    assert_eq!(rpc.access(&fh, 1 | 4 | 32), Ok(1 | 4));
    // A read-only export grants no change.
    let mut cfg = tree.config();
    cfg.read_only = true;
    let ro = Nfsd::start(cfg).unwrap();
    let mut rpc = ro.rpc();
    let root = rpc.mount("/").unwrap();
    let fh = rpc.lookup(&root, b"private.txt").unwrap();
    assert_eq!(rpc.access(&fh, 1 | 4 | 8), Ok(1));
}

#[test]
fn rpc_errors_are_answered_on_the_call_path() {
    let tree = Tree::new();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let mut s = TcpStream::connect(nfsd.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let sys = Xdr::default()
        .u32(1)
        .opaque(&Xdr::default().u32(0).opaque(b"h").u32(0).u32(0).u32(0).0)
        .0;
    // MSG_ACCEPTED (0), verifier AUTH_NONE (0, 0), then the accept status.
    let accept = |w: &[u32]| (w[0], w[3]);
    // Arguments cut short, a 4 GiB name length, trailing bytes: GARBAGE_ARGS (4).
    let fh = Xdr::default().opaque(&root).0;
    assert_eq!(accept(&raw_call(&mut s, NFS, 3, 1, &sys, &fh[..8])), (0, 4));
    let mut lookup = fh.clone();
    lookup.extend_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(accept(&raw_call(&mut s, NFS, 3, 3, &sys, &lookup)), (0, 4));
    let mut long = fh.clone();
    long.extend_from_slice(&[0; 4]);
    assert_eq!(accept(&raw_call(&mut s, NFS, 3, 1, &sys, &long)), (0, 4));
    // An unknown procedure: PROC_UNAVAIL (3); MOUNT v1: PROG_MISMATCH (2) 3..3.
    assert_eq!(accept(&raw_call(&mut s, NFS, 3, 99, &sys, &[])), (0, 3));
    let w = raw_call(&mut s, MOUNT, 1, 0, &sys, &[]);
    assert_eq!((w[0], w[3], w[4], w[5]), (0, 2, 3, 3));
    // An unsupported credential flavour (RPCSEC_GSS, 6) is answered MSG_DENIED (1) /
    // AUTH_ERROR (1), not left without a reply.
    let gss = Xdr::default().u32(6).opaque(b"").0;
    let w = raw_call(&mut s, NFS, 3, 1, &gss, &fh);
    assert_eq!((w[0], w[1]), (1, 1));
    // The connection still serves ordinary calls.
    assert_eq!(accept(&raw_call(&mut s, NFS, 3, 1, &sys, &fh)), (0, 0));
    assert!(rpc.getattr(&root).is_ok());
}

/// Socket inodes of the listening TCP sockets in `pid`'s network namespace.
fn listening_inodes(pid: u32) -> HashSet<u64> {
    let mut out = HashSet::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st ... inode at index 9; state 0A is LISTEN.
            if f.len() > 9 && f[3] == "0A" {
                out.insert(f[9].parse().unwrap_or(0));
            }
        }
    }
    out
}

#[test]
fn the_process_listens_on_its_public_port_and_metrics_only() {
    let tree = Tree::new();
    let port = common::free_port();
    let metrics = common::free_port();
    let bin = common::workspace_bin("rustnfs", "rustnfs");
    let mut child = Command::new(bin)
        .args(["--export", tree.export().to_str().unwrap()])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics", &format!("127.0.0.1:{metrics}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until it answers, then make it do work (a mount and a lookup): an engine
    // behind a second port would be listening by then.
    let t = Instant::now();
    let mut rpc = loop {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            drop(s);
            break Rpc::connect(SocketAddr::from(([127, 0, 0, 1], port)));
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "rustnfs did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let root = rpc.mount("/").unwrap();
    assert!(rpc.lookup(&root, b"index.html").is_ok());
    let listening = listening_inodes(pid);
    let mut ours = Vec::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
        let target = std::fs::read_link(fd.unwrap().path()).unwrap_or_default();
        let t = target.to_string_lossy();
        if let Some(ino) = t.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']'))
            && listening.contains(&ino.parse().unwrap_or(0))
        {
            ours.push(ino.to_string());
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        ours.len(),
        2,
        "rustnfs must listen on --listen and --metrics only, found {ours:?}"
    );
}

/// Issue 25 §1.5: `--squash` to another identity by a process that cannot act as the
/// caller (here uid 65534, as the old image ran) is refused at start-up in one line,
/// before anything is served, rather than creating files it cannot give their owner.
#[test]
fn squash_without_identity_switching_is_refused_in_one_line() {
    if !nix_is_root() || common::require_tool("setpriv").is_none() {
        eprintln!("SKIP: needs root and setpriv to start rustnfs as another user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = common::workspace_bin("rustnfs", "rustnfs");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(["--export", dir.path().to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0", "--squash", "1234:5678"])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_eq!(text.trim().lines().count(), 1, "one line: {text}");
    assert!(
        text.contains("--squash 1234:5678 needs acting as the caller")
            && text.contains("running as uid 65534"),
        "{text}"
    );
}

fn nix_is_root() -> bool {
    // SAFETY: a plain query.
    unsafe { libc::geteuid() == 0 }
}

/// Issue 35 §1: a client that sends READs and leaves before their replies are sent (a
/// load generator abandoning what is in flight at the end of a timed run; here 16
/// pipelined 1 MiB READs, more than the socket buffers hold) is the connection's end, not
/// a file-system error. The sendfile path counted each such READ as `READ vfs
/// NFS3ERR_IO` — the unexplained line in the README tour's table.
#[test]
fn a_client_that_leaves_mid_read_is_no_io_error() {
    let tree = Tree::new();
    std::fs::write(tree.export().join("large.bin"), vec![5u8; 16 << 20]).unwrap();
    let nfsd = Nfsd::start(tree.config()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let fh = rpc.lookup(&root, b"large.bin").unwrap();
    let mut s = TcpStream::connect(nfsd.addr).unwrap();
    for i in 0..16u32 {
        // AUTH_SYS root, READ3args { fh, offset, count }.
        let cred = Xdr::default().u32(1).opaque(b"e2e").u32(0).u32(0).u32(0).0;
        let call = Xdr::default()
            .u32(0x2000 + i)
            .u32(0)
            .u32(2)
            .u32(100_003)
            .u32(3)
            .u32(6)
            .u32(1)
            .opaque(&cred)
            .u32(0)
            .u32(0)
            .opaque(&fh)
            .u64(u64::from(i) << 20)
            .u32(1 << 20)
            .0;
        oncrpc::record::write_blocking(&mut s, &call).unwrap();
    }
    // Let the server send what the buffers take, then leave without reading.
    std::thread::sleep(Duration::from_millis(300));
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(10);
    while nfsd.count("READ", "vfs", "ok") == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(nfsd.count("READ", "vfs", "ok") > 0, "no READ was answered");
    assert_eq!(
        nfsd.count("READ", "vfs", "NFS3ERR_IO"),
        0,
        "a client that left counted as a file-system error"
    );
}

/// Issue 31 §5: a connection that sends large WRITEs moves to the bulk lane after the
/// first one (`guard::BulkLane`) and goes on being answered there — WRITE, READ and
/// LOOKUP in turn on the same connection — while a new connection is served as before;
/// the server then stops cleanly with the moved connection still open (its runtime is
/// shut down from the lane's own last task).
#[test]
fn a_writer_moved_to_the_bulk_lane_keeps_being_served() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("w"), b"").unwrap();
    let nfsd = Nfsd::exporting(dir.path()).unwrap();
    let mut rpc = nfsd.rpc();
    let root = rpc.mount("/").unwrap();
    let fh = rpc.lookup(&root, b"w").unwrap();
    let block: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    for i in 0..3u64 {
        assert_eq!(
            rpc.write(&fh, i << 20, &block, 2),
            (NFS3_OK, 2),
            "WRITE {i}"
        );
        let back = rpc.read(&fh, i << 20, 64 << 10).unwrap();
        assert_eq!(back, block[..64 << 10], "READ {i} after the move");
        assert_eq!(rpc.lookup(&root, b"w").unwrap(), fh, "LOOKUP {i}");
    }
    let len = std::fs::metadata(dir.path().join("w")).unwrap().len();
    assert_eq!(len, 3 << 20);
    let mut other = nfsd.rpc();
    let root2 = other.mount("/").unwrap();
    assert_eq!(other.lookup(&root2, b"w").unwrap(), fh);
    nfsd.stop().unwrap();
    drop(rpc);
}
