//! A raw NFSv4 client written by hand, so a test can send exactly the COMPOUNDs it
//! chooses — special stateids, floods of owners and client ids, retransmitted session
//! slots — to rustnfs and to NFS-Ganesha alike: an operation builder, a reply reader
//! that walks the results in order, and one blocking connection (from any loopback
//! address) with an AUTH_SYS identity. Minor version 1 and 2 COMPOUNDs start with the
//! SEQUENCE of the connection's session when it has one.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use oncrpc::msg::{self, OpaqueAuth, flavor};
use oncrpc::record;

pub(crate) const NFS: u32 = 100_003;

/// Operation numbers (RFC 7531, RFC 8881, RFC 7862).
pub(crate) mod op {
    pub(crate) const ACCESS: u32 = 3;
    pub(crate) const CLOSE: u32 = 4;
    pub(crate) const GETATTR: u32 = 9;
    pub(crate) const GETFH: u32 = 10;
    pub(crate) const LOCK: u32 = 12;
    pub(crate) const LOOKUP: u32 = 15;
    pub(crate) const OPEN: u32 = 18;
    pub(crate) const OPEN_CONFIRM: u32 = 20;
    pub(crate) const PUTFH: u32 = 22;
    pub(crate) const PUTROOTFH: u32 = 24;
    pub(crate) const READ: u32 = 25;
    pub(crate) const RENEW: u32 = 30;
    pub(crate) const SAVEFH: u32 = 32;
    pub(crate) const SETATTR: u32 = 34;
    pub(crate) const SETCLIENTID: u32 = 35;
    pub(crate) const SETCLIENTID_CONFIRM: u32 = 36;
    pub(crate) const WRITE: u32 = 38;
    pub(crate) const BIND_CONN_TO_SESSION: u32 = 41;
    pub(crate) const EXCHANGE_ID: u32 = 42;
    pub(crate) const CREATE_SESSION: u32 = 43;
    pub(crate) const DESTROY_SESSION: u32 = 44;
    pub(crate) const FREE_STATEID: u32 = 45;
    pub(crate) const SECINFO_NO_NAME: u32 = 52;
    pub(crate) const SEQUENCE: u32 = 53;
    pub(crate) const TEST_STATEID: u32 = 55;
    pub(crate) const DESTROY_CLIENTID: u32 = 57;
    pub(crate) const RECLAIM_COMPLETE: u32 = 58;
    pub(crate) const ALLOCATE: u32 = 59;
    pub(crate) const COPY: u32 = 60;
    pub(crate) const DEALLOCATE: u32 = 62;
    pub(crate) const SEEK: u32 = 69;
}

/// Statuses (`nfsstat4`) the tests name.
pub(crate) mod st {
    pub(crate) const OK: u32 = 0;
    pub(crate) const NOTSUPP: u32 = 10004;
    pub(crate) const DELAY: u32 = 10008;
    pub(crate) const SHARE_DENIED: u32 = 10015;
    pub(crate) const LOCKED: u32 = 10012;
    pub(crate) const RESOURCE: u32 = 10018;
    pub(crate) const STALE_CLIENTID: u32 = 10022;
    pub(crate) const BAD_STATEID: u32 = 10025;
    pub(crate) const BADSESSION: u32 = 10052;
    pub(crate) const SEQ_MISORDERED: u32 = 10063;
    pub(crate) const RETRY_UNCACHED_REP: u32 = 10068;
    pub(crate) const OP_NOT_IN_SESSION: u32 = 10071;
}

/// A `stateid4`.
pub(crate) type Stateid = (u32, [u8; 12]);
/// The anonymous stateid (all zeros) and the READ bypass stateid (all ones).
pub(crate) const ANONYMOUS: Stateid = (0, [0; 12]);
pub(crate) const BYPASS: Stateid = (u32::MAX, [0xff; 12]);

/// OPEN4_SHARE_ACCESS_* and OPEN4_SHARE_DENY_*.
pub(crate) const READ: u32 = 1;
pub(crate) const WRITE: u32 = 2;
pub(crate) const BOTH: u32 = 3;

/// The operations of one COMPOUND, encoded as they are added.
#[derive(Default, Clone)]
pub(crate) struct Ops {
    pub(crate) buf: Vec<u8>,
    pub(crate) count: u32,
}

fn put_u32(v: &mut Vec<u8>, w: u32) {
    v.extend_from_slice(&w.to_be_bytes());
}

fn put_u64(v: &mut Vec<u8>, w: u64) {
    v.extend_from_slice(&w.to_be_bytes());
}

fn put_opaque(v: &mut Vec<u8>, b: &[u8]) {
    put_u32(v, b.len() as u32);
    v.extend_from_slice(b);
    v.resize(v.len().div_ceil(4) * 4, 0);
}

fn put_stateid(v: &mut Vec<u8>, s: Stateid) {
    put_u32(v, s.0);
    v.extend_from_slice(&s.1);
}

impl Ops {
    pub(crate) fn new() -> Ops {
        Ops::default()
    }

    /// Any operation: its number, then `args` as they are.
    pub(crate) fn raw(mut self, code: u32, args: &[u8]) -> Ops {
        put_u32(&mut self.buf, code);
        self.buf.extend_from_slice(args);
        self.count += 1;
        self
    }

    fn with(self, code: u32, f: impl FnOnce(&mut Vec<u8>)) -> Ops {
        let mut a = Vec::new();
        f(&mut a);
        self.raw(code, &a)
    }

    pub(crate) fn putrootfh(self) -> Ops {
        self.raw(op::PUTROOTFH, &[])
    }
    pub(crate) fn putfh(self, fh: &[u8]) -> Ops {
        self.with(op::PUTFH, |a| put_opaque(a, fh))
    }
    pub(crate) fn getfh(self) -> Ops {
        self.raw(op::GETFH, &[])
    }
    pub(crate) fn savefh(self) -> Ops {
        self.raw(op::SAVEFH, &[])
    }
    pub(crate) fn lookup(self, name: &[u8]) -> Ops {
        self.with(op::LOOKUP, |a| put_opaque(a, name))
    }
    /// GETATTR of a bitmap given as words.
    pub(crate) fn getattr(self, words: &[u32]) -> Ops {
        self.with(op::GETATTR, |a| {
            put_u32(a, words.len() as u32);
            for w in words {
                put_u32(a, *w);
            }
        })
    }
    pub(crate) fn read(self, sid: Stateid, offset: u64, count: u32) -> Ops {
        self.with(op::READ, |a| {
            put_stateid(a, sid);
            put_u64(a, offset);
            put_u32(a, count);
        })
    }
    /// WRITE, FILE_SYNC.
    pub(crate) fn write(self, sid: Stateid, offset: u64, data: &[u8]) -> Ops {
        self.with(op::WRITE, |a| {
            put_stateid(a, sid);
            put_u64(a, offset);
            put_u32(a, 2);
            put_opaque(a, data);
        })
    }
    /// SETATTR of the size alone.
    pub(crate) fn setattr_size(self, sid: Stateid, size: u64) -> Ops {
        self.with(op::SETATTR, |a| {
            put_stateid(a, sid);
            put_u32(a, 1);
            put_u32(a, 1 << 4);
            let mut v = Vec::new();
            put_u64(&mut v, size);
            put_opaque(a, &v);
        })
    }
    /// SETATTR of raw attributes: a bitmap (words) and their values.
    pub(crate) fn setattr(self, sid: Stateid, words: &[u32], vals: &[u8]) -> Ops {
        self.with(op::SETATTR, |a| {
            put_stateid(a, sid);
            put_u32(a, words.len() as u32);
            for w in words {
                put_u32(a, *w);
            }
            put_opaque(a, vals);
        })
    }
    pub(crate) fn setclientid(self, verf: [u8; 8], id: &[u8]) -> Ops {
        self.with(op::SETCLIENTID, |a| {
            a.extend_from_slice(&verf);
            put_opaque(a, id);
            put_u32(a, 0x4000_0000);
            put_opaque(a, b"tcp");
            put_opaque(a, b"127.0.0.1.3.4");
            put_u32(a, 1);
        })
    }
    pub(crate) fn setclientid_confirm(self, cid: u64, verf: [u8; 8]) -> Ops {
        self.with(op::SETCLIENTID_CONFIRM, |a| {
            put_u64(a, cid);
            a.extend_from_slice(&verf);
        })
    }
    pub(crate) fn renew(self, cid: u64) -> Ops {
        self.with(op::RENEW, |a| put_u64(a, cid))
    }
    /// OPEN by name in the current directory; `create` makes it (UNCHECKED, mode
    /// 0666). Minor version 0 seqids; later minor versions ignore them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        self,
        seqid: u32,
        access: u32,
        deny: u32,
        cid: u64,
        owner: &[u8],
        create: bool,
        name: &[u8],
    ) -> Ops {
        self.open_how(seqid, access, deny, cid, owner, create.then_some(0), name)
    }

    /// OPEN by name with `how`: `None` (no create), `Some(0)` UNCHECKED4 or `Some(1)`
    /// GUARDED4, both with mode 0666.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open_how(
        self,
        seqid: u32,
        access: u32,
        deny: u32,
        cid: u64,
        owner: &[u8],
        how: Option<u32>,
        name: &[u8],
    ) -> Ops {
        self.with(op::OPEN, |a| {
            put_u32(a, seqid);
            put_u32(a, access);
            put_u32(a, deny);
            put_u64(a, cid);
            put_opaque(a, owner);
            match how {
                Some(how) => {
                    put_u32(a, 1); // OPEN4_CREATE
                    put_u32(a, how);
                    put_u32(a, 2);
                    put_u32(a, 0);
                    put_u32(a, 1 << (33 - 32)); // mode
                    let mut v = Vec::new();
                    put_u32(&mut v, 0o666);
                    put_opaque(a, &v);
                }
                None => put_u32(a, 0), // OPEN4_NOCREATE
            }
            put_u32(a, 0); // CLAIM_NULL
            put_opaque(a, name);
        })
    }
    pub(crate) fn open_confirm(self, sid: Stateid, seqid: u32) -> Ops {
        self.with(op::OPEN_CONFIRM, |a| {
            put_stateid(a, sid);
            put_u32(a, seqid);
        })
    }
    pub(crate) fn close(self, seqid: u32, sid: Stateid) -> Ops {
        self.with(op::CLOSE, |a| {
            put_u32(a, seqid);
            put_stateid(a, sid);
        })
    }
    /// LOCK (write or read) for a new lock owner, from an open stateid.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn lock_new(
        self,
        write: bool,
        offset: u64,
        length: u64,
        open_seqid: u32,
        open: Stateid,
        cid: u64,
        owner: &[u8],
    ) -> Ops {
        self.with(op::LOCK, |a| {
            put_u32(a, if write { 2 } else { 1 });
            put_u32(a, 0);
            put_u64(a, offset);
            put_u64(a, length);
            put_u32(a, 1);
            put_u32(a, open_seqid);
            put_stateid(a, open);
            put_u32(a, 0);
            put_u64(a, cid);
            put_opaque(a, owner);
        })
    }
    /// LOCK with an existing lock stateid.
    pub(crate) fn lock_existing(
        self,
        write: bool,
        offset: u64,
        length: u64,
        sid: Stateid,
        seqid: u32,
    ) -> Ops {
        self.with(op::LOCK, |a| {
            put_u32(a, if write { 2 } else { 1 });
            put_u32(a, 0);
            put_u64(a, offset);
            put_u64(a, length);
            put_u32(a, 0);
            put_stateid(a, sid);
            put_u32(a, seqid);
        })
    }
    pub(crate) fn exchange_id(self, verf: [u8; 8], owner: &[u8], flags: u32) -> Ops {
        self.with(op::EXCHANGE_ID, |a| {
            a.extend_from_slice(&verf);
            put_opaque(a, owner);
            put_u32(a, flags);
            put_u32(a, 0); // SP4_NONE
            put_u32(a, 0); // no implementation id
        })
    }
    /// CREATE_SESSION asking `slots` slots and `cached` bytes of reply cache per slot.
    pub(crate) fn create_session(self, cid: u64, seq: u32, slots: u32, cached: u32) -> Ops {
        self.with(op::CREATE_SESSION, |a| {
            put_u64(a, cid);
            put_u32(a, seq);
            put_u32(a, 0);
            for (req, resp, cached, ops, slots) in
                [(1 << 20, 1 << 20, cached, 16, slots), (4096, 4096, 0, 2, 1)]
            {
                put_u32(a, 0);
                put_u32(a, req + 1024);
                put_u32(a, resp + 1024);
                put_u32(a, cached);
                put_u32(a, ops);
                put_u32(a, slots);
                put_u32(a, 0);
            }
            put_u32(a, 0x4000_0000);
            put_u32(a, 1);
            put_u32(a, 0); // AUTH_NONE for the callback
        })
    }
    pub(crate) fn sequence(self, session: [u8; 16], seq: u32, slot: u32, cache: bool) -> Ops {
        self.with(op::SEQUENCE, |a| {
            a.extend_from_slice(&session);
            put_u32(a, seq);
            put_u32(a, slot);
            put_u32(a, slot);
            put_u32(a, u32::from(cache));
        })
    }
    pub(crate) fn destroy_session(self, session: [u8; 16]) -> Ops {
        self.with(op::DESTROY_SESSION, |a| a.extend_from_slice(&session))
    }
    pub(crate) fn destroy_clientid(self, cid: u64) -> Ops {
        self.with(op::DESTROY_CLIENTID, |a| put_u64(a, cid))
    }
    pub(crate) fn reclaim_complete(self) -> Ops {
        self.with(op::RECLAIM_COMPLETE, |a| put_u32(a, 0))
    }
}

/// A COMPOUND's reply, read in order: the status, then each operation's number and
/// status (checked with [`Res::op`]), then what the test knows that operation returns.
pub(crate) struct Res {
    pub(crate) buf: Vec<u8>,
    pub(crate) pos: usize,
    pub(crate) status: u32,
    pub(crate) count: u32,
}

impl Res {
    pub(crate) fn new(buf: Vec<u8>) -> Res {
        let mut r = Res {
            buf,
            pos: 0,
            status: 0,
            count: 0,
        };
        r.status = r.u32();
        r.opaque();
        r.count = r.u32();
        r
    }
    pub(crate) fn u32(&mut self) -> u32 {
        let v = u32::from_be_bytes(self.buf[self.pos..self.pos + 4].try_into().unwrap());
        self.pos += 4;
        v
    }
    pub(crate) fn u64(&mut self) -> u64 {
        (u64::from(self.u32()) << 32) | u64::from(self.u32())
    }
    pub(crate) fn fixed<const N: usize>(&mut self) -> [u8; N] {
        let v = self.buf[self.pos..self.pos + N].try_into().unwrap();
        self.pos += N.div_ceil(4) * 4;
        v
    }
    pub(crate) fn opaque(&mut self) -> Vec<u8> {
        let n = self.u32() as usize;
        let v = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n.div_ceil(4) * 4;
        v
    }
    pub(crate) fn stateid(&mut self) -> Stateid {
        (self.u32(), self.fixed())
    }
    pub(crate) fn bitmap(&mut self) -> Vec<u32> {
        let n = self.u32();
        (0..n).map(|_| self.u32()).collect()
    }
    /// The next operation's status; its number must be `code`.
    pub(crate) fn op(&mut self, code: u32) -> u32 {
        assert!(
            self.pos + 8 <= self.buf.len(),
            "no result for operation {code}: the COMPOUND's status is {}",
            self.status
        );
        assert_eq!(self.u32(), code, "operation number in the reply");
        self.u32()
    }
    /// The status of the `n`-th operation's result (0-based) for operations whose
    /// results before it carry nothing but their status.
    pub(crate) fn skip_ops(&mut self, n: usize) {
        for _ in 0..n {
            self.u32();
            assert_eq!(self.u32(), st::OK, "an operation before the one looked at");
        }
    }
    /// Skips an OPEN's result after its status: stateid, change_info, rflags, attrset,
    /// delegation (none). Returns (stateid, rflags).
    pub(crate) fn open_result(&mut self) -> (Stateid, u32) {
        let sid = self.stateid();
        self.pos += 4 + 8 + 8;
        let rflags = self.u32();
        self.bitmap();
        let deleg = self.u32();
        assert_eq!(deleg, 0, "no delegation");
        (sid, rflags)
    }
}

/// A session of minor version 1 or 2: its id and each slot's next sequence id.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    pub(crate) id: [u8; 16],
    pub(crate) next: Vec<u32>,
}

/// One connection speaking NFSv4 as `uid`/`gid`.
pub(crate) struct V4 {
    pub(crate) s: TcpStream,
    xid: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    /// The minor version COMPOUNDs carry.
    pub(crate) minor: u32,
    /// The session whose SEQUENCE starts each COMPOUND (minor versions 1 and 2).
    pub(crate) session: Option<Session>,
}

impl V4 {
    pub(crate) fn connect(addr: SocketAddr) -> V4 {
        let s = TcpStream::connect(addr).unwrap();
        V4::on(s)
    }

    /// A connection to `to` from the loopback address `from` (127.0.0.x).
    pub(crate) fn connect_from(from: Ipv4Addr, to: SocketAddr) -> std::io::Result<V4> {
        Ok(V4::on(connect_from(from, to)?))
    }

    fn on(s: TcpStream) -> V4 {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        V4 {
            s,
            xid: 0x9000,
            uid: 0,
            gid: 0,
            minor: 0,
            session: None,
        }
    }

    /// Sends one RPC of NFSv4 procedure `proc_` with `args`; returns the reply's
    /// procedure result (after the accepted header). Panics on an RPC-level refusal.
    pub(crate) fn call(&mut self, proc_: u32, args: &[u8]) -> std::io::Result<Vec<u8>> {
        self.send(proc_, args)?;
        self.recv()
    }

    pub(crate) fn send(&mut self, proc_: u32, args: &[u8]) -> std::io::Result<u32> {
        self.xid += 1;
        let mut cred = Vec::new();
        put_u32(&mut cred, 0);
        put_opaque(&mut cred, b"nfs4-raw");
        put_u32(&mut cred, self.uid);
        put_u32(&mut cred, self.gid);
        put_u32(&mut cred, 0);
        let mut m = Vec::new();
        msg::encode_call(
            &mut m,
            self.xid,
            NFS,
            4,
            proc_,
            OpaqueAuth {
                flavor: flavor::AUTH_SYS,
                body: &cred,
            },
        );
        m.extend_from_slice(args);
        record::write_blocking(&mut self.s, &m)?;
        Ok(self.xid)
    }

    pub(crate) fn recv(&mut self) -> std::io::Result<Vec<u8>> {
        let rec = record::read_blocking(&mut self.s, 8 << 20)?;
        let h = msg::decode_reply(&rec).map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        assert_eq!(h.status, Ok(()), "the call was accepted");
        Ok(rec[h.body..].to_vec())
    }

    /// The COMPOUND arguments of `ops` at this connection's minor version, with the
    /// session's SEQUENCE first (slot 0) when there is a session.
    pub(crate) fn args(&mut self, ops: &Ops) -> Vec<u8> {
        let ops = match self.session.as_mut() {
            Some(s) => {
                let seq = s.next[0];
                s.next[0] = seq.wrapping_add(1);
                let mut all = Ops::new().sequence(s.id, seq, 0, true);
                all.buf.extend_from_slice(&ops.buf);
                all.count += ops.count;
                all
            }
            None => ops.clone(),
        };
        let mut a = Vec::new();
        put_opaque(&mut a, b"");
        put_u32(&mut a, self.minor);
        put_u32(&mut a, ops.count);
        a.extend_from_slice(&ops.buf);
        a
    }

    /// Sends a COMPOUND of `ops` and reads its reply; a session's SEQUENCE result is
    /// checked and skipped.
    pub(crate) fn compound(&mut self, ops: &Ops) -> Res {
        let args = self.args(ops);
        let body = self.call(1, &args).expect("a COMPOUND reply");
        let mut r = Res::new(body);
        if self.session.is_some() {
            let s = r.op(op::SEQUENCE);
            assert_eq!(s, st::OK, "SEQUENCE");
            r.pos += 16 + 4 * 5;
        }
        r
    }

    /// SETCLIENTID and SETCLIENTID_CONFIRM (minor version 0): a confirmed client id,
    /// or the status that refused it.
    pub(crate) fn client(&mut self, id: &[u8]) -> Result<u64, u32> {
        let mut r = self.compound(&Ops::new().setclientid(*b"verifier", id));
        match r.op(op::SETCLIENTID) {
            st::OK => {}
            s => return Err(s),
        }
        let cid = r.u64();
        let verf = r.fixed::<8>();
        let mut r = self.compound(&Ops::new().setclientid_confirm(cid, verf));
        match r.op(op::SETCLIENTID_CONFIRM) {
            st::OK => Ok(cid),
            s => Err(s),
        }
    }

    /// OPEN of `name` in the root (creating it when `create`), confirmed when the server
    /// asks (minor version 0): the file's handle and its open stateid, or the status.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        &mut self,
        cid: u64,
        owner: &[u8],
        seqid: u32,
        name: &[u8],
        access: u32,
        deny: u32,
        create: bool,
    ) -> Result<(Vec<u8>, Stateid), u32> {
        let ops = Ops::new()
            .putrootfh()
            .open(seqid, access, deny, cid, owner, create, name)
            .getfh();
        let mut r = self.compound(&ops);
        r.op(op::PUTROOTFH);
        match r.op(op::OPEN) {
            st::OK => {}
            s => return Err(s),
        }
        let (mut sid, rflags) = r.open_result();
        assert_eq!(r.op(op::GETFH), st::OK);
        let fh = r.opaque();
        if rflags & 2 != 0 {
            let mut r = self.compound(
                &Ops::new()
                    .putfh(&fh)
                    .open_confirm(sid, seqid.wrapping_add(1)),
            );
            r.op(op::PUTFH);
            match r.op(op::OPEN_CONFIRM) {
                st::OK => sid = r.stateid(),
                s => return Err(s),
            }
        }
        Ok((fh, sid))
    }

    /// The handle of `name` in the root.
    pub(crate) fn lookup_root(&mut self, name: &[u8]) -> Result<Vec<u8>, u32> {
        let mut r = self.compound(&Ops::new().putrootfh().lookup(name).getfh());
        r.op(op::PUTROOTFH);
        match r.op(op::LOOKUP) {
            st::OK => {}
            s => return Err(s),
        }
        r.op(op::GETFH);
        Ok(r.opaque())
    }

    /// The status of a one-operation-on-a-file COMPOUND: PUTFH `fh`, then `ops`'s last
    /// operation's status (the COMPOUND's).
    pub(crate) fn status_on(&mut self, fh: &[u8], ops: Ops) -> u32 {
        let mut all = Ops::new().putfh(fh);
        all.buf.extend_from_slice(&ops.buf);
        all.count += ops.count;
        self.compound(&all).status
    }

    /// EXCHANGE_ID + CREATE_SESSION at minor version `minor`: the client id and the
    /// session, set on this connection.
    pub(crate) fn session(&mut self, minor: u32, owner: &[u8]) -> Result<u64, u32> {
        self.minor = minor;
        self.session = None;
        let mut r = self.compound(&Ops::new().exchange_id(*b"verifier", owner, 0));
        match r.op(op::EXCHANGE_ID) {
            st::OK => {}
            s => return Err(s),
        }
        let cid = r.u64();
        let seq = r.u32();
        let mut r = self.compound(&Ops::new().create_session(cid, seq, 8, 4096));
        match r.op(op::CREATE_SESSION) {
            st::OK => {}
            s => return Err(s),
        }
        let id = r.fixed::<16>();
        self.session = Some(Session {
            id,
            next: vec![1; 8],
        });
        Ok(cid)
    }
}

/// A TCP connection to `to` from `from` (any port): attacking and legitimate clients
/// from different loopback addresses.
pub(crate) fn connect_from(from: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket calls on a descriptor owned here until handed to TcpStream.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let s = TcpStream::from_raw_fd(fd);
        let sin = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
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
            return Err(std::io::Error::other("loopback IPv4 only"));
        };
        let remote = sin(*to.ip(), to.port());
        if libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(s)
    }
}
