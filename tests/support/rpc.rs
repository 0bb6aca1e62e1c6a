//! A minimal ONC RPC / XDR client for NFSv3 and MOUNT, written by hand so a test can send
//! what a real client cannot express (`..`, names with `/`, handles of symlinks, forged
//! handles, raw credentials): XDR builders, a reply reader and one blocking connection.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::common::Nfsd;

/// A raw RPC client connected to an in-process [`Nfsd`].
pub(crate) trait RawRpc {
    fn rpc(&self) -> Rpc;
}

impl RawRpc for Nfsd {
    fn rpc(&self) -> Rpc {
        Rpc::connect(self.addr)
    }
}

pub(crate) const NFS: u32 = 100_003;
pub(crate) const MOUNT: u32 = 100_005;
pub(crate) const NFS3_OK: u32 = 0;
pub(crate) const NFS3ERR_NOENT: u32 = 2;
pub(crate) const NFS3ERR_ROFS: u32 = 30;
pub(crate) const NFS3ERR_STALE: u32 = 70;
pub(crate) const NFS3ERR_BADHANDLE: u32 = 10001;

/// XDR words and opaques for raw calls (also used by the hostile-client tests).
#[derive(Default)]
pub(crate) struct Xdr(pub(crate) Vec<u8>);

impl Xdr {
    pub(crate) fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub(crate) fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub(crate) fn opaque(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(&(b.len() as u32).to_be_bytes());
        self.0.extend_from_slice(b);
        self.0.resize(self.0.len().div_ceil(4) * 4, 0);
        self
    }
    /// An sattr3 that sets nothing.
    pub(crate) fn no_sattr(self) -> Self {
        self.u32(0).u32(0).u32(0).u32(0).u32(0).u32(0)
    }
}

pub(crate) struct Reply<'a> {
    b: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reply<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Self {
        Reply { b, pos: 0 }
    }
    pub(crate) fn u32(&mut self) -> u32 {
        let v = u32::from_be_bytes(self.b[self.pos..self.pos + 4].try_into().unwrap());
        self.pos += 4;
        v
    }
    pub(crate) fn u64(&mut self) -> u64 {
        (u64::from(self.u32()) << 32) | u64::from(self.u32())
    }
    pub(crate) fn opaque(&mut self) -> Vec<u8> {
        let n = self.u32() as usize;
        let v = self.b[self.pos..self.pos + n].to_vec();
        self.pos += n.div_ceil(4) * 4;
        v
    }
    pub(crate) fn skip(&mut self, n: usize) {
        self.pos += n;
    }
    /// post_op_attr: returns the fileid when attributes follow.
    pub(crate) fn post_op_attr(&mut self) -> Option<u64> {
        if self.u32() == 0 {
            return None;
        }
        self.skip(4 * 5 + 8 * 2 + 8 + 8);
        let fileid = self.u64();
        self.skip(8 * 3);
        Some(fileid)
    }
}

pub(crate) struct Rpc {
    s: TcpStream,
    xid: u32,
    /// The AUTH_SYS identity sent (root unless a test changes it).
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

impl Rpc {
    pub(crate) fn connect(addr: SocketAddr) -> Rpc {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Rpc {
            s,
            xid: 0x1000,
            uid: 0,
            gid: 0,
        }
    }

    /// Sends a call; returns the reply's accept status and the body after it.
    pub(crate) fn call_raw(
        &mut self,
        prog: u32,
        proc_: u32,
        args: &[u8],
    ) -> std::io::Result<(u32, Vec<u8>)> {
        self.xid += 1;
        // AUTH_UNIX: stamp, machine name, uid, gid, no extra groups.
        let cred = Xdr::default()
            .u32(1)
            .opaque(b"e2e")
            .u32(self.uid)
            .u32(self.gid)
            .u32(0)
            .0;
        let msg = Xdr::default()
            .u32(self.xid)
            .u32(0)
            .u32(2)
            .u32(prog)
            .u32(3)
            .u32(proc_)
            .u32(1)
            .opaque(&cred)
            .u32(0)
            .u32(0)
            .0;
        let mut call = msg;
        call.extend_from_slice(args);
        oncrpc::record::write_blocking(&mut self.s, &call)?;
        let body = oncrpc::record::read_blocking(&mut self.s, 4 << 20)?;
        let mut r = Reply::new(&body);
        assert_eq!(r.u32(), self.xid, "reply xid");
        assert_eq!(r.u32(), 1, "a REPLY");
        assert_eq!(r.u32(), 0, "MSG_ACCEPTED");
        r.u32();
        r.opaque();
        let accept = r.u32();
        Ok((accept, body[r.pos..].to_vec()))
    }

    pub(crate) fn call(&mut self, prog: u32, proc_: u32, args: Xdr) -> Vec<u8> {
        let (accept, body) = self.call_raw(prog, proc_, &args.0).unwrap();
        assert_eq!(accept, 0, "RPC accept status for prog {prog} proc {proc_}");
        body
    }

    pub(crate) fn mount(&mut self, path: &str) -> Result<Vec<u8>, u32> {
        let body = self.call(MOUNT, 1, Xdr::default().opaque(path.as_bytes()));
        let mut r = Reply::new(&body);
        match r.u32() {
            0 => Ok(r.opaque()),
            e => Err(e),
        }
    }

    pub(crate) fn lookup(&mut self, dir: &[u8], name: &[u8]) -> Result<Vec<u8>, u32> {
        let body = self.call(NFS, 3, Xdr::default().opaque(dir).opaque(name));
        let mut r = Reply::new(&body);
        match r.u32() {
            0 => Ok(r.opaque()),
            e => Err(e),
        }
    }

    pub(crate) fn getattr(&mut self, fh: &[u8]) -> Result<u64, u32> {
        let body = self.call(NFS, 1, Xdr::default().opaque(fh));
        let mut r = Reply::new(&body);
        match r.u32() {
            0 => {
                r.skip(4 * 5 + 8 * 2 + 8 + 8);
                Ok(r.u64())
            }
            e => Err(e),
        }
    }

    pub(crate) fn read(&mut self, fh: &[u8], offset: u64, count: u32) -> Result<Vec<u8>, u32> {
        let body = self.call(NFS, 6, Xdr::default().opaque(fh).u64(offset).u32(count));
        let mut r = Reply::new(&body);
        let status = r.u32();
        r.post_op_attr();
        if status != 0 {
            return Err(status);
        }
        let _count = r.u32();
        let _eof = r.u32();
        Ok(r.opaque())
    }

    /// Returns (status, committed).
    pub(crate) fn write(&mut self, fh: &[u8], offset: u64, data: &[u8], stable: u32) -> (u32, u32) {
        let args = Xdr::default()
            .opaque(fh)
            .u64(offset)
            .u32(data.len() as u32)
            .u32(stable)
            .opaque(data);
        let body = self.call(NFS, 7, args);
        let mut r = Reply::new(&body);
        let status = r.u32();
        if status != 0 {
            return (status, 0);
        }
        // wcc_data: pre_op_attr (bool + 24 bytes) and post_op_attr.
        if r.u32() == 1 {
            r.skip(24);
        }
        r.post_op_attr();
        let _count = r.u32();
        (status, r.u32())
    }

    /// CREATE, UNCHECKED, setting no attribute.
    pub(crate) fn create(&mut self, dir: &[u8], name: &[u8]) -> Result<Vec<u8>, u32> {
        self.create_how(dir, name, 0, Sattr::default(), [0; 8])
    }

    pub(crate) fn status_of(&mut self, proc_: u32, args: Xdr) -> u32 {
        let body = self.call(NFS, proc_, args);
        Reply::new(&body).u32()
    }

    pub(crate) fn mkdir(&mut self, dir: &[u8], name: &[u8]) -> u32 {
        self.status_of(9, Xdr::default().opaque(dir).opaque(name).no_sattr())
    }

    pub(crate) fn symlink(&mut self, dir: &[u8], name: &[u8], target: &[u8]) -> u32 {
        let args = Xdr::default()
            .opaque(dir)
            .opaque(name)
            .no_sattr()
            .opaque(target);
        self.status_of(10, args)
    }

    pub(crate) fn remove(&mut self, dir: &[u8], name: &[u8]) -> u32 {
        self.status_of(12, Xdr::default().opaque(dir).opaque(name))
    }

    pub(crate) fn rename(&mut self, from: &[u8], fname: &[u8], to: &[u8], tname: &[u8]) -> u32 {
        let args = Xdr::default()
            .opaque(from)
            .opaque(fname)
            .opaque(to)
            .opaque(tname);
        self.status_of(14, args)
    }

    pub(crate) fn readlink(&mut self, fh: &[u8]) -> Result<Vec<u8>, u32> {
        let body = self.call(NFS, 5, Xdr::default().opaque(fh));
        let mut r = Reply::new(&body);
        let status = r.u32();
        r.post_op_attr();
        if status != 0 {
            return Err(status);
        }
        Ok(r.opaque())
    }

    /// Lists a directory completely, page by page (READDIRPLUS when `plus`).
    pub(crate) fn list(
        &mut self,
        dir: &[u8],
        plus: bool,
        maxcount: u32,
    ) -> Result<Vec<Vec<u8>>, u32> {
        let mut names = Vec::new();
        let (mut cookie, mut verf) = (0u64, [0u8; 8]);
        loop {
            let mut args = Xdr::default().opaque(dir).u64(cookie);
            args.0.extend_from_slice(&verf);
            let args = if plus {
                args.u32(maxcount).u32(maxcount)
            } else {
                args.u32(maxcount)
            };
            let body = self.call(NFS, if plus { 17 } else { 16 }, args);
            let mut r = Reply::new(&body);
            let status = r.u32();
            r.post_op_attr();
            if status != 0 {
                return Err(status);
            }
            verf.copy_from_slice(&body[r.pos..r.pos + 8]);
            r.skip(8);
            let mut got = 0;
            while r.u32() == 1 {
                let _fileid = r.u64();
                names.push(r.opaque());
                cookie = r.u64();
                if plus {
                    r.post_op_attr();
                    if r.u32() == 1 {
                        r.opaque();
                    }
                }
                got += 1;
            }
            let eof = r.u32() == 1;
            if eof {
                return Ok(names);
            }
            assert!(got > 0, "a page without entries and without eof");
        }
    }
}

/// Whether the server closed `s` (EOF or reset) within `within`.
pub(crate) fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 64];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

/// An sattr3 XDR: each `Some` sets that attribute; times are `None` (keep), `Some(None)`
/// (the server's clock) or `Some(Some((s, ns)))` (the client's).
#[derive(Default, Clone, Copy)]
pub(crate) struct Sattr {
    pub(crate) mode: Option<u32>,
    pub(crate) size: Option<u64>,
    pub(crate) atime: Option<Option<(u32, u32)>>,
    pub(crate) mtime: Option<Option<(u32, u32)>>,
}

impl Xdr {
    pub(crate) fn sattr(self, a: Sattr) -> Self {
        let x = match a.mode {
            Some(m) => self.u32(1).u32(m),
            None => self.u32(0),
        };
        let x = x.u32(0).u32(0); // uid, gid
        let x = match a.size {
            Some(n) => x.u32(1).u64(n),
            None => x.u32(0),
        };
        let time = |x: Xdr, t: Option<Option<(u32, u32)>>| match t {
            None => x.u32(0),
            Some(None) => x.u32(1),
            Some(Some((s, ns))) => x.u32(2).u32(s).u32(ns),
        };
        let x = time(x, a.atime);
        time(x, a.mtime)
    }
}

impl Rpc {
    pub(crate) fn setattr(&mut self, fh: &[u8], a: Sattr) -> u32 {
        self.status_of(2, Xdr::default().opaque(fh).sattr(a).u32(0))
    }

    /// CREATE with `how` 0 (UNCHECKED), 1 (GUARDED) with `attr`, or 2 (EXCLUSIVE) with
    /// `verf`; returns the handle.
    pub(crate) fn create_how(
        &mut self,
        dir: &[u8],
        name: &[u8],
        how: u32,
        attr: Sattr,
        verf: [u8; 8],
    ) -> Result<Vec<u8>, u32> {
        let args = Xdr::default().opaque(dir).opaque(name).u32(how);
        let mut args = if how == 2 { args } else { args.sattr(attr) };
        if how == 2 {
            args.0.extend_from_slice(&verf);
        }
        let body = self.call(NFS, 8, args);
        let mut r = Reply::new(&body);
        match r.u32() {
            0 => {
                assert_eq!(r.u32(), 1, "handle follows");
                Ok(r.opaque())
            }
            e => Err(e),
        }
    }

    pub(crate) fn link(&mut self, file: &[u8], dir: &[u8], name: &[u8]) -> u32 {
        self.status_of(15, Xdr::default().opaque(file).opaque(dir).opaque(name))
    }

    /// ACCESS: the bits granted of `want`.
    pub(crate) fn access(&mut self, fh: &[u8], want: u32) -> Result<u32, u32> {
        let body = self.call(NFS, 4, Xdr::default().opaque(fh).u32(want));
        let mut r = Reply::new(&body);
        let status = r.u32();
        r.post_op_attr();
        if status != 0 {
            return Err(status);
        }
        Ok(r.u32())
    }
}

/// Sends one call with a raw credential; returns the reply words after the xid and
/// message type (reply_stat, then accept or reject details).
pub(crate) fn raw_call(
    s: &mut TcpStream,
    prog: u32,
    vers: u32,
    proc_: u32,
    cred: &[u8],
    args: &[u8],
) -> Vec<u32> {
    let mut msg = Xdr::default()
        .u32(77)
        .u32(0)
        .u32(2)
        .u32(prog)
        .u32(vers)
        .u32(proc_)
        .0;
    msg.extend_from_slice(cred);
    msg.extend_from_slice(&[0; 8]);
    msg.extend_from_slice(args);
    oncrpc::record::write_blocking(s, &msg).unwrap();
    let body = oncrpc::record::read_blocking(s, 1 << 20).unwrap();
    body.chunks(4)
        .skip(2)
        .map(|c| u32::from_be_bytes(c.try_into().unwrap_or([0; 4])))
        .collect()
}
