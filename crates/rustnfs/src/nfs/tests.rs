//! Unit tests of the dispatcher: procedure-level RPC errors, and replies decoded with
//! `nfs3_types`.

use std::io::Cursor;

use nfs3_types::nfs3::{READ3res, nfsstat3};
use nfs3_types::xdr_codec::Unpack;

use super::xdr::word;
use super::*;
use crate::config::Config;
use crate::fs::DirFs;
use crate::identity::Squash;
use crate::rpc::{MOUNT_PROG, PMAP_PROG};

/// Where the test calls come from.
const PEER: std::net::SocketAddr =
    std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 40000);

fn server(dir: &std::path::Path) -> Dispatcher {
    let registry = Registry::new("t");
    let fs = DirFs::open(&Config::new(dir), registry.clone()).unwrap();
    Dispatcher::new(fs, registry, 2049)
}

/// A call record: header (RPC version `rpcvers`), credential `cred` (flavour + body),
/// AUTH_NONE verifier, then `args`.
fn call_with(rpcvers: u32, prog: u32, vers: u32, proc_: u32, cred: &[u8], args: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    for w in [9u32, 0, rpcvers, prog, vers, proc_] {
        word(&mut r, w);
    }
    r.extend_from_slice(cred);
    for w in [0u32, 0] {
        word(&mut r, w);
    }
    r.extend_from_slice(args);
    r
}

/// AUTH_SYS as root.
fn root_cred() -> Vec<u8> {
    let mut body = Vec::new();
    for w in [0u32, 0, 0, 0, 0] {
        word(&mut body, w); // stamp, empty machine name, uid, gid, no groups
    }
    let mut c = Vec::new();
    word(&mut c, 1);
    word(&mut c, body.len() as u32);
    c.extend_from_slice(&body);
    c
}

/// Dispatches and returns (reply_stat, accept_stat or reject detail, body after it).
fn run(d: &Dispatcher, rec: &[u8]) -> (u32, u32, Vec<u8>) {
    let call = rpcmsg::decode_call(rec).unwrap();
    let mut out = Vec::new();
    d.dispatch(&call, rec, &mut out, PEER);
    // One whole record, as a client reads it.
    let mut wire = &out[..];
    let reply = record::read_blocking(&mut wire, out.len()).unwrap();
    assert!(wire.is_empty(), "record mark");
    let w = |i: usize| u32::from_be_bytes(reply[i * 4..4 + i * 4].try_into().unwrap());
    assert_eq!((w(0), w(1)), (9, 1), "xid and REPLY");
    if w(2) == 1 {
        return (1, w(3), reply[16..].to_vec());
    }
    (0, w(5), reply[24..].to_vec())
}

fn fh_args(d: &Dispatcher) -> Vec<u8> {
    let mut a = Vec::new();
    let wire = d.fs.root_fh().to_wire();
    word(&mut a, wire.len() as u32);
    a.extend_from_slice(&wire);
    a
}

#[test]
fn rpc_errors_follow_rfc_5531() {
    let tmp = tempfile::tempdir().unwrap();
    let d = server(tmp.path());
    let cred = root_cred();
    let fh = fh_args(&d);
    // GETATTR works; with a byte too many, or cut short, it is GARBAGE_ARGS.
    let (rs, accept, body) = run(&d, &call_with(2, NFS_PROG, 3, 1, &cred, &fh));
    assert_eq!((rs, accept, &body[..4]), (0, 0, &[0u8; 4][..]));
    let mut long = fh.clone();
    long.extend_from_slice(&[0; 4]);
    assert_eq!(run(&d, &call_with(2, NFS_PROG, 3, 1, &cred, &long)).1, 4);
    assert_eq!(
        run(&d, &call_with(2, NFS_PROG, 3, 1, &cred, &fh[..10])).1,
        4
    );
    // A 4 GiB name length: garbage, nothing allocated.
    let mut lookup = fh.clone();
    word(&mut lookup, u32::MAX);
    assert_eq!(run(&d, &call_with(2, NFS_PROG, 3, 3, &cred, &lookup)).1, 4);
    // An unknown procedure. (The header checks — RPC version, credential, program,
    // version — are the front door's: `guard::tests::admit_follows_rfc_5531`.)
    assert_eq!(run(&d, &call_with(2, NFS_PROG, 3, 22, &cred, &[])).1, 3);
    assert_eq!(run(&d, &call_with(2, MOUNT_PROG, 3, 6, &cred, &[])).1, 3);
    // AUTH_NONE and AUTH_SYS are both answered.
    assert_eq!(run(&d, &call_with(2, NFS_PROG, 3, 0, &[0; 8], &[])).1, 0);
    assert_eq!(run(&d, &call_with(2, NFS_PROG, 3, 0, &cred, &[])).1, 0);
}

#[test]
fn read_reply_decodes_with_nfs3_types() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("f"), b"hello world").unwrap();
    let d = server(tmp.path());
    let (fh, _) = d.fs.lookup(&d.fs.root_fh(), b"f").0.unwrap();
    let wire = fh.to_wire();
    let mut a = Vec::new();
    word(&mut a, 24);
    a.extend_from_slice(&wire);
    a.extend_from_slice(&6u64.to_be_bytes());
    word(&mut a, 100);
    let (_, accept, body) = run(&d, &call_with(2, NFS_PROG, 3, 6, &root_cred(), &a));
    assert_eq!(accept, 0);
    let (res, n) = READ3res::unpack(&mut Cursor::new(&body[..])).unwrap();
    assert_eq!(n, body.len());
    let ok = res.unwrap();
    assert_eq!((ok.count, ok.eof, &ok.data[..]), (5, true, &b"world"[..]));
    // A forged handle (a generation this export never had) is a status, not an RPC error.
    a[4..12].fill(0xff);
    let (_, accept, body) = run(&d, &call_with(2, NFS_PROG, 3, 6, &root_cred(), &a));
    assert_eq!(accept, 0);
    match READ3res::unpack(&mut Cursor::new(&body[..])).unwrap().0 {
        Nfs3Result::Err((s, _)) => assert_eq!(s, nfsstat3::NFS3ERR_BADHANDLE),
        Nfs3Result::Ok(_) => panic!("a forged generation must not read"),
    }
}

#[test]
fn access_follows_the_mode_bits_of_the_caller() {
    use nfs3_types::nfs3::{ACCESS3_EXECUTE, ACCESS3_MODIFY, ACCESS3_READ, fattr3, ftype3};
    let attr = fattr3 {
        type_: ftype3::NF3REG,
        mode: 0o640,
        nlink: 1,
        uid: 1000,
        gid: 100,
        size: 0,
        used: 0,
        rdev: Default::default(),
        fsid: 0,
        fileid: 1,
        atime: Default::default(),
        mtime: Default::default(),
        ctime: Default::default(),
    };
    let who = |uid, gid| Caller {
        uid,
        gid,
        gids: vec![],
    };
    let all = u32::MAX;
    let rw = ACCESS3_READ | ACCESS3_MODIFY | nfs3_types::nfs3::ACCESS3_EXTEND;
    assert_eq!(crate::fs::allowed(&attr, &who(1000, 1), false) & all, rw);
    assert_eq!(crate::fs::allowed(&attr, &who(5, 100), false), ACCESS3_READ);
    assert_eq!(crate::fs::allowed(&attr, &who(5, 5), false), 0);
    assert_eq!(crate::fs::allowed(&attr, &who(0, 0), false), rw);
    assert_eq!(crate::fs::allowed(&attr, &who(0, 0), true), ACCESS3_READ);
    let exe = fattr3 {
        mode: 0o755,
        ..attr
    };
    assert_eq!(
        crate::fs::allowed(&exe, &who(5, 5), false),
        ACCESS3_READ | ACCESS3_EXECUTE
    );
}

#[test]
fn getport_answers_the_public_port_for_nfs_and_mount_only() {
    let tmp = tempfile::tempdir().unwrap();
    let d = server(tmp.path());
    let getport = |prog: u32, vers: u32, prot: u32| {
        let mut a = Vec::new();
        for w in [prog, vers, prot, 0] {
            word(&mut a, w);
        }
        let (rs, accept, body) = run(&d, &call_with(2, PMAP_PROG, 2, 3, &[0; 8], &a));
        assert_eq!((rs, accept, body.len()), (0, 0, 4));
        u32::from_be_bytes(body[..4].try_into().unwrap())
    };
    assert_eq!(getport(NFS_PROG, 3, 6), 2049);
    assert_eq!(getport(MOUNT_PROG, 3, 6), 2049);
    assert_eq!(getport(NFS_PROG, 4, 6), 0);
    assert_eq!(getport(NFS_PROG, 3, 17), 0);
    assert_eq!(getport(100_227, 3, 6), 0);
    // A mapping cut short is GARBAGE_ARGS.
    let mut short = Vec::new();
    for w in [NFS_PROG, 3, 6] {
        word(&mut short, w);
    }
    assert_eq!(
        run(&d, &call_with(2, PMAP_PROG, 2, 3, &[0; 8], &short)).1,
        4
    );
}

/// AUTH_SYS as `uid`/`gid` with `gids`.
fn sys_cred(uid: u32, gid: u32, gids: &[u32]) -> Vec<u8> {
    let mut body = Vec::new();
    for w in [0u32, 0, uid, gid, gids.len() as u32] {
        word(&mut body, w);
    }
    for &g in gids {
        word(&mut body, g);
    }
    let mut c = Vec::new();
    word(&mut c, 1);
    word(&mut c, body.len() as u32);
    c.extend_from_slice(&body);
    c
}

/// The export as a dispatcher with `squash`, on a fresh 0755 directory owned by root
/// with a 0777 `pub` and a sticky 01777 `tmp` inside.
fn acting_server(squash: Squash) -> Option<(tempfile::TempDir, Dispatcher)> {
    use std::os::unix::fs::PermissionsExt;
    if let Err(why) = crate::identity::capability() {
        eprintln!("SKIP: cannot act as a caller here: {why}");
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path();
    let mode = |path: &std::path::Path, m| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(m)).unwrap()
    };
    mode(p, 0o755);
    std::fs::create_dir(p.join("pub")).unwrap();
    mode(&p.join("pub"), 0o777);
    std::fs::create_dir(p.join("tmp")).unwrap();
    mode(&p.join("tmp"), 0o1777);
    std::fs::write(p.join("rootfile"), b"r").unwrap();
    mode(&p.join("rootfile"), 0o644);
    let registry = Registry::new("t");
    let mut config = Config::new(p);
    config.squash = squash;
    let fs = DirFs::open(&config, registry.clone()).unwrap();
    assert!(fs.acts_as_caller());
    Some((tmp, Dispatcher::new(fs, registry, 2049)))
}

fn dirop(d: &Dispatcher, dir: &[u8], name: &str) -> Vec<u8> {
    use nfs3_types::nfs3::{diropargs3, filename3, nfs_fh3};
    use nfs3_types::xdr_codec::Opaque;
    let mut a = Vec::new();
    super::xdr::put(
        &mut a,
        &diropargs3 {
            dir: nfs_fh3 {
                data: Opaque::owned(dir.to_vec()),
            },
            name: filename3(Opaque::owned(name.as_bytes().to_vec())),
        },
    );
    let _ = d;
    a
}

fn wire(d: &Dispatcher, path: &str) -> Vec<u8> {
    let mut fh = d.fs.root_fh();
    for c in path.split('/').filter(|c| !c.is_empty()) {
        fh = d.fs.lookup(&fh, c.as_bytes()).0.unwrap().0;
    }
    fh.to_wire().to_vec()
}

/// The nfsstat3 of a reply body.
fn status(body: &[u8]) -> u32 {
    u32::from_be_bytes(body[..4].try_into().unwrap())
}

#[test]
fn changes_run_as_the_caller() {
    use nfs3_types::nfs3::{createhow3, sattr3};
    use std::os::unix::fs::MetadataExt;
    let Some((tmp, d)) = acting_server(Squash::Root) else {
        return;
    };
    let p = tmp.path();
    let root = wire(&d, "");
    let public = wire(&d, "pub");
    let create = |cred: &[u8], dir: &[u8], name: &str| {
        let mut a = dirop(&d, dir, name);
        super::xdr::put(&mut a, &createhow3::UNCHECKED(sattr3::default()));
        run(&d, &call_with(2, NFS_PROG, 3, 8, cred, &a)).2
    };
    let u1000 = sys_cred(1000, 1000, &[1000]);
    // Not in a root-owned 0755 directory; in a 0777 one, the file is the caller's.
    assert_eq!(status(&create(&u1000, &root, "x")), 13, "ACCES");
    assert!(!p.join("x").exists());
    assert_eq!(status(&create(&u1000, &public, "mine")), 0);
    let m = std::fs::metadata(p.join("pub/mine")).unwrap();
    assert_eq!((m.uid(), m.gid()), (1000, 1000));
    // root_squash: client root creates as 65534.
    assert_eq!(status(&create(&root_cred(), &public, "squashed")), 0);
    let m = std::fs::metadata(p.join("pub/squashed")).unwrap();
    assert_eq!((m.uid(), m.gid()), (65534, 65534));
    // Another user may not remove it (sticky rules aside: 1001 does not own it, but
    // pub is 0777 so removal is allowed there); in the sticky tmp it may not.
    let u1001 = sys_cred(1001, 1001, &[]);
    let tmpdir = wire(&d, "tmp");
    assert_eq!(status(&create(&u1000, &tmpdir, "t")), 0);
    let rm = |cred: &[u8], dir: &[u8], name: &str| {
        run(
            &d,
            &call_with(2, NFS_PROG, 3, 12, cred, &dirop(&d, dir, name)),
        )
        .2
    };
    assert_eq!(
        status(&rm(&u1001, &tmpdir, "t")),
        1,
        "PERM: sticky directory"
    );
    assert_eq!(status(&rm(&u1001, &root, "rootfile")), 13, "ACCES");
    assert!(p.join("rootfile").exists() && p.join("tmp/t").exists());
    assert_eq!(status(&rm(&u1000, &tmpdir, "t")), 0, "the owner may");
    // SETATTR mode of root's file by a user: PERM; the owner may set SUID on its own.
    let chmod = |cred: &[u8], path: &str, mode: u32| {
        use nfs3_types::nfs3::{Nfs3Option, SETATTR3args, nfs_fh3, sattrguard3};
        use nfs3_types::xdr_codec::Opaque;
        let mut a = Vec::new();
        let args = SETATTR3args {
            object: nfs_fh3 {
                data: Opaque::owned(wire(&d, path)),
            },
            new_attributes: sattr3 {
                mode: Nfs3Option::Some(mode),
                ..Default::default()
            },
            guard: sattrguard3::None,
        };
        super::xdr::put(&mut a, &args);
        status(&run(&d, &call_with(2, NFS_PROG, 3, 2, cred, &a)).2)
    };
    assert_eq!(chmod(&u1000, "rootfile", 0o4755), 1, "PERM");
    assert_eq!(
        std::fs::metadata(p.join("rootfile")).unwrap().mode() & 0o7777,
        0o644
    );
    assert_eq!(chmod(&u1000, "pub/mine", 0o4755), 0);
    // A write by someone else clears SUID (1001 may write: make it 0666 + SUID).
    assert_eq!(chmod(&u1000, "pub/mine", 0o4666), 0);
    let write = |cred: &[u8], path: &str, stable: u32| {
        let mut a = Vec::new();
        let fh = wire(&d, path);
        word(&mut a, fh.len() as u32);
        a.extend_from_slice(&fh);
        a.extend_from_slice(&0u64.to_be_bytes());
        for w in [3, stable, 3] {
            word(&mut a, w);
        }
        a.extend_from_slice(b"abc\0");
        run(&d, &call_with(2, NFS_PROG, 3, 7, cred, &a)).2
    };
    let body = write(&u1001, "pub/mine", 0);
    assert_eq!(status(&body), 0);
    let mode = std::fs::metadata(p.join("pub/mine")).unwrap().mode() & 0o7777;
    assert_eq!(mode, 0o666, "SUID cleared by a non-owner's write");
    // Not writable by 1001 once 0644; the owner override lets 1000 write its 0444 file.
    assert_eq!(chmod(&u1000, "pub/mine", 0o444), 0);
    assert_eq!(status(&write(&u1001, "pub/mine", 2)), 13);
    assert_eq!(status(&write(&u1000, "pub/mine", 2)), 0);
    assert_eq!(std::fs::read(p.join("pub/mine")).unwrap(), b"abc");
    // No identity left behind on this thread.
    // SAFETY: setfsuid(-1) changes nothing and returns the current fsuid.
    assert_eq!(unsafe { libc::syscall(libc::SYS_setfsuid, u32::MAX) }, 0);
}

#[test]
fn writes_are_as_stable_as_asked_and_special_files_are_changed_by_name() {
    use nfs3_types::nfs3::{Nfs3Option, SETATTR3args, WRITE3res, nfs_fh3, sattr3, sattrguard3};
    use nfs3_types::xdr_codec::Opaque;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("f"), b"").unwrap();
    let d = server(tmp.path());
    let cred = root_cred();
    let f = wire(&d, "f");
    for (asked, answered) in [(0, 0), (1, 1), (2, 2)] {
        let mut a = Vec::new();
        word(&mut a, f.len() as u32);
        a.extend_from_slice(&f);
        a.extend_from_slice(&0u64.to_be_bytes());
        for w in [1, asked, 1] {
            word(&mut a, w);
        }
        a.extend_from_slice(b"z\0\0\0");
        let (_, _, body) = run(&d, &call_with(2, NFS_PROG, 3, 7, &cred, &a));
        let res = WRITE3res::unpack(&mut Cursor::new(&body)).unwrap().0;
        let Nfs3Result::Ok(ok) = res else {
            panic!("WRITE failed")
        };
        assert_eq!(ok.committed as u32, answered, "asked {asked}");
        assert_eq!(ok.verf, d.verf);
    }
    // MKNOD: a fifo; REG and an unknown type are BADTYPE; a device is PERM.
    let root = wire(&d, "");
    let mknod = |name: &str, ty: u32, extra: &[u8]| {
        let mut a = dirop(&d, &root, name);
        word(&mut a, ty);
        a.extend_from_slice(extra);
        run(&d, &call_with(2, NFS_PROG, 3, 11, &cred, &a))
    };
    let mut attrs = Vec::new();
    super::xdr::put(&mut attrs, &sattr3::default());
    assert_eq!(status(&mknod("p", 7, &attrs).2), 0);
    let (rs, accept, body) = mknod("r", 1, &[]);
    assert_eq!(
        (rs, accept, status(&body)),
        (0, 0, 10_007),
        "BADTYPE, not GARBAGE_ARGS"
    );
    assert_eq!(status(&mknod("u", 99, &[]).2), 10_007);
    let mut dev = attrs.clone();
    dev.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 3]);
    assert_eq!(
        status(&mknod("c", 4, &dev).2),
        1,
        "PERM without --allow-device-nodes"
    );
    // chmod of the fifo, by name, never opened (an open would block: no writer).
    let mut a = Vec::new();
    let args = SETATTR3args {
        object: nfs_fh3 {
            data: Opaque::owned(wire(&d, "p")),
        },
        new_attributes: sattr3 {
            mode: Nfs3Option::Some(0o600),
            ..Default::default()
        },
        guard: sattrguard3::None,
    };
    super::xdr::put(&mut a, &args);
    assert_eq!(
        status(&run(&d, &call_with(2, NFS_PROG, 3, 2, &cred, &a)).2),
        0
    );
    use std::os::unix::fs::PermissionsExt;
    let m = std::fs::symlink_metadata(tmp.path().join("p")).unwrap();
    assert_eq!(m.permissions().mode() & 0o7777, 0o600);
}

#[test]
fn a_directory_made_in_an_sgid_directory_keeps_sgid_and_the_group() {
    use nfs3_types::nfs3::{Nfs3Option, sattr3};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Some((tmp, d)) = acting_server(Squash::None) else {
        return;
    };
    let g = tmp.path().join("g");
    std::fs::create_dir(&g).unwrap();
    std::os::unix::fs::chown(&g, Some(0), Some(2000)).unwrap();
    std::fs::set_permissions(&g, std::fs::Permissions::from_mode(0o2777)).unwrap();
    let mut a = dirop(&d, &wire(&d, "g"), "sub");
    let attr = sattr3 {
        mode: Nfs3Option::Some(0o755),
        ..Default::default()
    };
    super::xdr::put(&mut a, &attr);
    let u1000 = sys_cred(1000, 1000, &[2000]);
    let (_, _, body) = run(&d, &call_with(2, NFS_PROG, 3, 9, &u1000, &a));
    assert_eq!(status(&body), 0);
    let m = std::fs::metadata(g.join("sub")).unwrap();
    assert_eq!((m.uid(), m.gid()), (1000, 2000));
    assert_eq!(
        m.mode() & 0o7777,
        0o2755,
        "SGID inherited, the asked mode kept"
    );
}

/// READ checks the caller's read permission as knfsd does (a raw client can send READ
/// without the ACCESS and open checks the Linux client makes): the owner always (the
/// owner override), root unless squashed, else the class's read or execute bit.
#[test]
fn read_is_refused_without_read_permission() {
    use std::os::unix::fs::PermissionsExt;
    let Some((tmp, d)) = acting_server(Squash::Root) else {
        return;
    };
    let p = tmp.path();
    let file = |name: &str, uid: u32, gid: u32, mode: u32| {
        std::fs::write(p.join(name), b"data").unwrap();
        std::os::unix::fs::chown(p.join(name), Some(uid), Some(gid)).unwrap();
        std::fs::set_permissions(p.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    };
    file("secret", 0, 0, 0o600);
    file("mine", 1000, 1000, 0o400);
    file("group", 0, 2000, 0o640);
    file("program", 0, 0, 0o711);
    file("public", 0, 0, 0o644);
    let read = |cred: &[u8], name: &str| {
        let fh = wire(&d, name);
        let mut a = Vec::new();
        word(&mut a, fh.len() as u32);
        a.extend_from_slice(&fh);
        a.extend_from_slice(&0u64.to_be_bytes());
        word(&mut a, 4096);
        status(&run(&d, &call_with(2, NFS_PROG, 3, 6, cred, &a)).2)
    };
    let u1000 = sys_cred(1000, 1000, &[1000]);
    let u1001 = sys_cred(1001, 1001, &[2000]);
    let u1002 = sys_cred(1002, 1002, &[]);
    const ACCES: u32 = 13;
    for (who, cred, name, want) in [
        ("1000", &u1000, "secret", ACCES),
        ("squashed root", &root_cred(), "secret", ACCES),
        ("the owner", &u1000, "mine", 0),
        ("1001", &u1001, "mine", ACCES),
        ("a member of its group", &u1001, "group", 0),
        ("1002", &u1002, "group", ACCES),
        ("1002 (execute only)", &u1002, "program", 0),
        ("1002", &u1002, "public", 0),
    ] {
        assert_eq!(read(cred, name), want, "{who} reading {name}");
    }
    // Without root_squash, root reads anything.
    let Some((tmp2, d2)) = acting_server(Squash::None) else {
        return;
    };
    std::fs::write(tmp2.path().join("secret"), b"x").unwrap();
    std::fs::set_permissions(
        tmp2.path().join("secret"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let fh = wire(&d2, "secret");
    let mut a = Vec::new();
    word(&mut a, fh.len() as u32);
    a.extend_from_slice(&fh);
    a.extend_from_slice(&0u64.to_be_bytes());
    word(&mut a, 4096);
    assert_eq!(
        status(&run(&d2, &call_with(2, NFS_PROG, 3, 6, &root_cred(), &a)).2),
        0
    );
}
