//! Unit tests of the dispatcher: procedure-level RPC errors, and replies decoded with
//! `nfs3_types`.

use std::io::Cursor;

use nfs3_types::nfs3::{READ3res, nfsstat3};
use nfs3_types::xdr_codec::Unpack;

use super::xdr::word;
use super::*;
use crate::config::Config;

fn server(dir: &std::path::Path) -> Dispatcher {
    let registry = Registry::new("t");
    let fs = DirFs::open(&Config::new(dir), registry.clone()).unwrap();
    Dispatcher::new(fs, registry, 2049, None)
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
    d.dispatch(&call, rec, &mut out);
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
    let wire = d.fs.root_fh().to_wire(d.fs.generation());
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
    let wire = fh.to_wire(d.fs.generation());
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
    assert_eq!(read::allowed(&attr, &who(1000, 1), false) & all, rw);
    assert_eq!(read::allowed(&attr, &who(5, 100), false), ACCESS3_READ);
    assert_eq!(read::allowed(&attr, &who(5, 5), false), 0);
    assert_eq!(read::allowed(&attr, &who(0, 0), false), rw);
    assert_eq!(read::allowed(&attr, &who(0, 0), true), ACCESS3_READ);
    let exe = fattr3 {
        mode: 0o755,
        ..attr
    };
    assert_eq!(
        read::allowed(&exe, &who(5, 5), false),
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
