//! The NFSv4 target (`nfs://host/path?version=4&nfsport=P`; `version=4.1` and `4.2` for
//! those minor versions): every worker opens one connection, sets up a client id
//! (SETCLIENTID, SETCLIENTID_CONFIRM; in 4.1 and 4.2 EXCHANGE_ID, CREATE_SESSION of one
//! slot and RECLAIM_COMPLETE, then every COMPOUND starts with that slot's SEQUENCE, not
//! asking the reply kept, as a Linux client sends READ) and walks the
//! path from the pseudo-root (PUTROOTFH, LOOKUP…), then runs the read workload (OPEN
//! the file, READs through it in order, one COMPOUND of PUTFH + READ per operation) or
//! the metadata mix (per file: OPEN with create, CLOSE, GETATTR, REMOVE — what `touch`,
//! `stat` and `rm` cost a v4 client), each operation recorded under its own name.
//!
//! A small client of our own, as the v3 target has `nfsclient`: the COMPOUNDs it sends
//! are few and fixed, the replies are read with bounds (a reply record over
//! [`MAX_REPLY`] is an error, not an allocation). The write workload is v3 only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nfsclient::NfsUrl;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::plan::{LoadPlan, NfsWorkload};
use crate::sample::{ErrorKind, Instants, OpError, OpOk};
use crate::worker::{Target, Worker};

/// The largest reply record read: a 1 MiB READ and its headers, with room.
const MAX_REPLY: usize = (1 << 20) + (64 << 10);

// NFSv4.0 operation numbers (RFC 7530).
const OP_CLOSE: u32 = 4;
const OP_GETATTR: u32 = 9;
const OP_GETFH: u32 = 10;
const OP_LOOKUP: u32 = 15;
const OP_OPEN: u32 = 18;
const OP_OPEN_CONFIRM: u32 = 20;
const OP_PUTFH: u32 = 22;
const OP_PUTROOTFH: u32 = 24;
const OP_READ: u32 = 25;
const OP_REMOVE: u32 = 28;
const OP_SETCLIENTID: u32 = 35;
const OP_SETCLIENTID_CONFIRM: u32 = 36;
const OP_EXCHANGE_ID: u32 = 42;
const OP_CREATE_SESSION: u32 = 43;
const OP_DESTROY_SESSION: u32 = 44;
const OP_SEQUENCE: u32 = 53;
const OP_DESTROY_CLIENTID: u32 = 57;
const OP_RECLAIM_COMPLETE: u32 = 58;
const NFS4ERR_COMPLETE_ALREADY: u32 = 10054;

/// The `version=` values that ask for NFSv4, with their minor version.
const VERSIONS: [(&str, u32); 4] = [("4", 0), ("4.0", 0), ("4.1", 1), ("4.2", 2)];

/// The NFSv4 minor version an `nfs://` URL asks for (`version=4`, `4.0`, `4.1`, `4.2`).
fn minor_of(url: &str) -> Option<u32> {
    let (_, q) = url.split_once('?')?;
    q.split('&').find_map(|kv| {
        let v = kv.strip_prefix("version=")?;
        VERSIONS
            .iter()
            .find(|(name, _)| *name == v)
            .map(|(_, m)| *m)
    })
}

/// Whether an `nfs://` URL asks for NFSv4 (see [`minor_of`]).
pub(crate) fn wants_v4(url: &str) -> bool {
    minor_of(url).is_some()
}

pub(crate) struct Nfs4Target {
    url: NfsUrl,
    workload: NfsWorkload,
    block: u32,
    verify: Option<u32>,
    files: u64,
    timeout: Duration,
    /// The minor version every COMPOUND carries.
    minor: u32,
    /// The CRC-32 of the first complete pass over the file (read workload).
    first_crc: Mutex<Option<u32>>,
}

impl Nfs4Target {
    pub fn new(url: &str, plan: &LoadPlan) -> Result<Self, crate::Error> {
        let bad = |reason: String| crate::Error::Url {
            url: url.to_string(),
            reason,
        };
        let minor =
            minor_of(url).ok_or_else(|| bad("version= must be 4, 4.0, 4.1 or 4.2".into()))?;
        // The rest of the URL is read as for v3 (host, ports, path, uid, gid).
        let v3 = VERSIONS.iter().rev().fold(url.to_string(), |u, (v, _)| {
            u.replace(&format!("version={v}"), "version=3")
        });
        let parsed = NfsUrl::parse(&v3).map_err(|e| bad(e.to_string()))?;
        if plan.options.nfs_workload == NfsWorkload::Write {
            return Err(crate::Error::Plan(
                "the NFS write workload is NFSv3 only (version=3)".into(),
            ));
        }
        let block = u32::try_from(plan.options.block_size)
            .ok()
            .filter(|&b| b <= 1 << 20)
            .ok_or_else(|| crate::Error::Plan("--nfs-block must be at most 1 MiB".into()))?;
        Ok(Nfs4Target {
            url: parsed,
            workload: plan.options.nfs_workload,
            block,
            verify: plan.options.verify_crc32,
            files: plan.options.nfs_files.max(1),
            timeout: plan.options.timeout,
            minor,
            first_crc: Mutex::new(None),
        })
    }

    pub fn host(&self) -> String {
        self.url.host.to_string()
    }

    pub fn port(&self) -> u16 {
        self.url.nfs_port
    }

    pub fn path(&self) -> String {
        self.url.full_path()
    }

    pub fn checksum(&self) -> Option<u32> {
        *self.first_crc.lock()
    }
}

/// A COMPOUND being built.
#[derive(Default)]
struct Ops {
    buf: Vec<u8>,
    n: u32,
}

impl Ops {
    fn op(&mut self, code: u32) -> &mut Self {
        self.n += 1;
        self.u32(code)
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn fixed(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self.buf.resize(self.buf.len().next_multiple_of(4), 0);
        self
    }
    fn opaque(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32).fixed(b)
    }
    fn stateid(&mut self, s: &Stateid) -> &mut Self {
        self.u32(s.0).fixed(&s.1)
    }
}

type Stateid = (u32, [u8; 12]);

/// A COMPOUND reply being read; a short reply is `Malformed`.
struct Reply {
    buf: Vec<u8>,
    pos: usize,
    op: &'static str,
}

impl Reply {
    fn take(&mut self, n: usize) -> Result<&[u8], OpError> {
        let b = self
            .buf
            .get(self.pos..self.pos + n)
            .ok_or_else(|| OpError::new(self.op, ErrorKind::Malformed, "short NFSv4 reply"))?;
        self.pos += n;
        Ok(b)
    }
    fn u32(&mut self) -> Result<u32, OpError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, OpError> {
        Ok((u64::from(self.u32()?) << 32) | u64::from(self.u32()?))
    }
    fn opaque(&mut self) -> Result<Vec<u8>, OpError> {
        let n = self.u32()? as usize;
        let v = self.take(n.next_multiple_of(4))?[..n].to_vec();
        Ok(v)
    }
    fn skip(&mut self, n: usize) -> Result<(), OpError> {
        self.take(n).map(drop)
    }
    fn stateid(&mut self) -> Result<Stateid, OpError> {
        let seqid = self.u32()?;
        let mut other = [0u8; 12];
        other.copy_from_slice(self.take(12)?);
        Ok((seqid, other))
    }
    fn bitmap(&mut self) -> Result<(), OpError> {
        let n = self.u32()? as usize;
        self.skip(4 * n.min(8))
    }
    /// The next operation's result: its number checked, its status OK (else `Server`).
    fn ok(&mut self, code: u32) -> Result<(), OpError> {
        let (got, status) = (self.u32()?, self.u32()?);
        if got != code {
            return Err(OpError::new(
                self.op,
                ErrorKind::Malformed,
                format!("reply for operation {got}, expected {code}"),
            ));
        }
        if status != 0 {
            return Err(OpError::new(
                self.op,
                ErrorKind::Server,
                format!("NFSv4 operation {code}: status {status}"),
            ));
        }
        Ok(())
    }
}

/// One connection with its client id and open owner.
struct Conn {
    stream: TcpStream,
    xid: u32,
    cred: Vec<u8>,
    clientid: u64,
    /// The open owner's next seqid.
    seqid: u32,
    owner: Vec<u8>,
    /// A COMPOUND was sent whose reply was never read (the operation was cancelled): the
    /// connection and the owner's seqid are out of step, so the worker starts over.
    broken: bool,
    /// The minor version; in 4.1 and 4.2 the session and its one slot's next seqid.
    minor: u32,
    session: Option<([u8; 16], u32)>,
}

fn io_error(op: &'static str, e: std::io::Error, timeout: bool) -> OpError {
    let kind = if timeout {
        ErrorKind::Timeout
    } else if matches!(
        e.kind(),
        std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe
    ) {
        ErrorKind::Reset
    } else {
        ErrorKind::Io
    };
    OpError::new(op, kind, e.to_string())
}

impl Conn {
    async fn open(url: &NfsUrl, timeout: Duration, id: usize, minor: u32) -> Result<Conn, OpError> {
        let endpoint = url.nfs_endpoint();
        let stream = tokio::time::timeout(timeout, TcpStream::connect(&endpoint))
            .await
            .map_err(|_| OpError::new("SETCLIENTID", ErrorKind::Timeout, "connect timed out"))?
            .map_err(|e| {
                OpError::new(
                    "SETCLIENTID",
                    ErrorKind::Connect,
                    format!("{endpoint}: {e}"),
                )
            })?;
        let _ = stream.set_nodelay(true);
        let mut cred = Vec::new();
        for w in [0u32, 8] {
            cred.extend_from_slice(&w.to_be_bytes());
        }
        cred.extend_from_slice(b"loadgen\0");
        for w in [url.uid, url.gid, 0] {
            cred.extend_from_slice(&w.to_be_bytes());
        }
        let mut c = Conn {
            stream,
            xid: (std::process::id() << 12) ^ (id as u32) << 20,
            cred,
            clientid: 0,
            seqid: 1,
            // A new open owner for every connection: the client id is the same for a
            // worker started again (same name and verifier), and an owner's seqids
            // would not start over.
            owner: format!(
                "servelab-loadgen {} {id} {}",
                std::process::id(),
                next_owner()
            )
            .into_bytes(),
            broken: false,
            minor,
            session: None,
        };
        let name = format!("servelab-loadgen/{}/{id}", std::process::id());
        let verf = (u64::from(std::process::id()) << 20 | id as u64).to_be_bytes();
        if minor > 0 {
            c.session(name.as_bytes(), verf, timeout).await?;
            return Ok(c);
        }
        let mut o = Ops::default();
        o.op(OP_SETCLIENTID)
            .fixed(&verf)
            .opaque(name.as_bytes())
            .u32(0)
            .opaque(b"tcp")
            .opaque(b"0.0.0.0.0.0")
            .u32(0);
        let mut r = c.call(&o, "SETCLIENTID", timeout).await?;
        r.ok(OP_SETCLIENTID)?;
        c.clientid = r.u64()?;
        let confirm = r.take(8)?.to_vec();
        let mut o = Ops::default();
        o.op(OP_SETCLIENTID_CONFIRM).u64(c.clientid).fixed(&confirm);
        c.call(&o, "SETCLIENTID", timeout)
            .await?
            .ok(OP_SETCLIENTID_CONFIRM)?;
        Ok(c)
    }

    /// 4.1 and 4.2: EXCHANGE_ID, CREATE_SESSION (one slot, a fore channel for 1 MiB
    /// READs and WRITEs, nothing cached) and RECLAIM_COMPLETE (no state to reclaim).
    async fn session(
        &mut self,
        name: &[u8],
        verf: [u8; 8],
        timeout: Duration,
    ) -> Result<(), OpError> {
        let mut o = Ops::default();
        // No flags, SP4_NONE, no implementation id.
        o.op(OP_EXCHANGE_ID)
            .fixed(&verf)
            .opaque(name)
            .u32(0)
            .u32(0)
            .u32(0);
        let mut r = self.call(&o, "SETCLIENTID", timeout).await?;
        r.ok(OP_EXCHANGE_ID)?;
        self.clientid = r.u64()?;
        let seq = r.u32()?;
        let mut o = Ops::default();
        o.op(OP_CREATE_SESSION).u64(self.clientid).u32(seq).u32(0);
        // Fore, then back channel: headerpad, max request, max response, max response
        // cached, max operations, slots, no RDMA.
        for (size, cached, ops) in [((1 << 20) + (64 << 10), 0, 16), (4096, 0, 2)] {
            o.u32(0)
                .u32(size)
                .u32(size)
                .u32(cached)
                .u32(ops)
                .u32(1)
                .u32(0);
        }
        // Callback program, one AUTH_NONE security parameter.
        o.u32(0x4000_0000).u32(1).u32(0);
        let mut r = self.call(&o, "SETCLIENTID", timeout).await?;
        r.ok(OP_CREATE_SESSION)?;
        let mut id = [0u8; 16];
        id.copy_from_slice(r.take(16)?);
        self.session = Some((id, 1));
        let mut o = Ops::default();
        o.op(OP_RECLAIM_COMPLETE).u32(0);
        let mut r = self.call(&o, "SETCLIENTID", timeout).await?;
        // A worker started again is the same client (same name and verifier), whose
        // reclaims were completed already (NFS4ERR_COMPLETE_ALREADY).
        let at = r.pos;
        if r.u32()? == OP_RECLAIM_COMPLETE && r.u32()? == NFS4ERR_COMPLETE_ALREADY {
            return Ok(());
        }
        r.pos = at;
        r.ok(OP_RECLAIM_COMPLETE)
    }

    /// Sends one COMPOUND and reads its reply (after the COMPOUND status and tag, and in
    /// a session the SEQUENCE that starts it).
    async fn call(
        &mut self,
        ops: &Ops,
        op: &'static str,
        timeout: Duration,
    ) -> Result<Reply, OpError> {
        self.xid = self.xid.wrapping_add(1);
        let xid = self.xid;
        let mut body = Vec::with_capacity(64 + ops.buf.len());
        oncrpc::msg::encode_call(
            &mut body,
            xid,
            100_003,
            4,
            1,
            oncrpc::msg::OpaqueAuth {
                flavor: oncrpc::msg::flavor::AUTH_SYS,
                body: &self.cred,
            },
        );
        body.extend_from_slice(&[0, 0, 0, 0]); // empty tag
        body.extend_from_slice(&self.minor.to_be_bytes());
        match self.session {
            Some((id, seq)) => {
                let mut o = Ops::default();
                // Slot 0 of 1, the reply not asked kept.
                o.op(OP_SEQUENCE).fixed(&id).u32(seq).u32(0).u32(0).u32(0);
                body.extend_from_slice(&(ops.n + 1).to_be_bytes());
                body.extend_from_slice(&o.buf);
            }
            None => body.extend_from_slice(&ops.n.to_be_bytes()),
        }
        body.extend_from_slice(&ops.buf);
        self.broken = true;
        let exchange = async {
            self.stream.write_all(&oncrpc::record::frame(&body)).await?;
            read_record(&mut self.stream).await
        };
        let rec = match tokio::time::timeout(timeout, exchange).await {
            Err(_) => return Err(io_error(op, std::io::ErrorKind::TimedOut.into(), true)),
            Ok(Err(e)) => return Err(io_error(op, e, false)),
            Ok(Ok(r)) => r,
        };
        let h = oncrpc::msg::decode_reply(&rec)
            .map_err(|e| OpError::new(op, ErrorKind::Malformed, e.to_string()))?;
        if h.xid != xid {
            return Err(OpError::new(
                op,
                ErrorKind::Malformed,
                "reply to another call",
            ));
        }
        h.status.map_err(|r| {
            OpError::new(op, ErrorKind::Server, format!("RPC refused: {}", r.label()))
        })?;
        self.broken = false;
        let mut r = Reply {
            buf: rec,
            pos: h.body,
            op,
        };
        let _status = r.u32()?;
        r.opaque()?;
        let _count = r.u32()?;
        if let Some((_, seq)) = self.session.as_mut() {
            r.ok(OP_SEQUENCE)?;
            *seq = seq.wrapping_add(1);
            r.skip(16 + 4 * 5)?;
        }
        Ok(r)
    }

    /// The handle and type (1 = regular file, 2 = directory) of `path` from the root.
    async fn walk(&mut self, path: &str, timeout: Duration) -> Result<(Vec<u8>, u32), OpError> {
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        let mut o = Ops::default();
        o.op(OP_PUTROOTFH);
        for c in &comps {
            o.op(OP_LOOKUP).opaque(c.as_bytes());
        }
        o.op(OP_GETFH);
        o.op(OP_GETATTR).u32(1).u32(1 << 1); // type
        let mut r = self.call(&o, "LOOKUP", timeout).await?;
        r.ok(OP_PUTROOTFH)?;
        for _ in &comps {
            r.ok(OP_LOOKUP)?;
        }
        r.ok(OP_GETFH)?;
        let fh = r.opaque()?;
        r.ok(OP_GETATTR)?;
        r.bitmap()?;
        let _len = r.u32()?;
        Ok((fh, r.u32()?))
    }

    /// OPEN of `name` in `dir` by this connection's owner (creating it when `create`),
    /// confirmed when the server asks: the file's handle and open stateid.
    async fn open_file(
        &mut self,
        dir: &[u8],
        name: &str,
        create: bool,
        timeout: Duration,
    ) -> Result<(Vec<u8>, Stateid), OpError> {
        let mut o = Ops::default();
        o.op(OP_PUTFH).opaque(dir);
        o.op(OP_OPEN)
            .u32(self.seqid)
            .u32(if create { 3 } else { 1 })
            .u32(0)
            .u64(self.clientid)
            .opaque(&self.owner.clone());
        if create {
            // OPEN4_CREATE, UNCHECKED4, mode 0644.
            o.u32(1).u32(0).u32(2).u32(0).u32(1 << 1).u32(4).u32(0o644);
        } else {
            o.u32(0);
        }
        o.u32(0).opaque(name.as_bytes()); // CLAIM_NULL
        o.op(OP_GETFH);
        let mut r = self.call(&o, "OPEN", timeout).await?;
        self.seqid += 1;
        r.ok(OP_PUTFH)?;
        r.ok(OP_OPEN)?;
        let mut sid = r.stateid()?;
        r.skip(20)?; // change_info4
        let rflags = r.u32()?;
        r.bitmap()?;
        let _delegation = r.u32()?;
        r.ok(OP_GETFH)?;
        let fh = r.opaque()?;
        if rflags & 2 != 0 {
            let mut o = Ops::default();
            o.op(OP_PUTFH).opaque(&fh);
            o.op(OP_OPEN_CONFIRM).stateid(&sid).u32(self.seqid);
            let mut r = self.call(&o, "OPEN", timeout).await?;
            self.seqid += 1;
            r.ok(OP_PUTFH)?;
            r.ok(OP_OPEN_CONFIRM)?;
            sid = r.stateid()?;
        }
        Ok((fh, sid))
    }

    /// 4.1 and 4.2: DESTROY_SESSION and DESTROY_CLIENTID, each alone in its COMPOUND,
    /// so a server's per-address caps on sessions and client ids see the worker leave
    /// (many short runs from one address would otherwise reach them before the lease
    /// frees what they left).
    async fn end_session(&mut self, timeout: Duration) -> Result<(), OpError> {
        let Some((id, _)) = self.session.take() else {
            return Ok(());
        };
        let mut o = Ops::default();
        o.op(OP_DESTROY_SESSION).fixed(&id);
        self.call(&o, "CLOSE", timeout)
            .await?
            .ok(OP_DESTROY_SESSION)?;
        let mut o = Ops::default();
        o.op(OP_DESTROY_CLIENTID).u64(self.clientid);
        self.call(&o, "CLOSE", timeout)
            .await?
            .ok(OP_DESTROY_CLIENTID)
    }

    async fn close(&mut self, fh: &[u8], sid: &Stateid, timeout: Duration) -> Result<(), OpError> {
        let mut o = Ops::default();
        o.op(OP_PUTFH).opaque(fh);
        o.op(OP_CLOSE).u32(self.seqid).stateid(sid);
        let mut r = self.call(&o, "CLOSE", timeout).await?;
        self.seqid += 1;
        r.ok(OP_PUTFH)?;
        r.ok(OP_CLOSE)
    }
}

/// A number for each open owner this process makes.
fn next_owner() -> u64 {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Reads one whole reply record (every fragment), at most [`MAX_REPLY`] bytes.
async fn read_record(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut rec = Vec::new();
    loop {
        let mut mark = [0u8; 4];
        s.read_exact(&mut mark).await?;
        let m = u32::from_be_bytes(mark);
        let len = (m & 0x7fff_ffff) as usize;
        if rec.len() + len > MAX_REPLY {
            return Err(std::io::Error::other(format!(
                "reply record over {MAX_REPLY} bytes"
            )));
        }
        let at = rec.len();
        rec.resize(at + len, 0);
        s.read_exact(&mut rec[at..]).await?;
        if m & 0x8000_0000 != 0 {
            return Ok(rec);
        }
    }
}

/// What each workload keeps between operations.
enum State {
    Read {
        fh: Vec<u8>,
        sid: Stateid,
        offset: u64,
        crc: crc32fast::Hasher,
    },
    Metadata {
        dir: Vec<u8>,
        step: u64,
        /// Per file: its handle and, while open, its open stateid.
        files: Vec<Option<(Vec<u8>, Option<Stateid>)>>,
    },
}

pub(crate) struct Nfs4Worker {
    target: Arc<Nfs4Target>,
    conn: Conn,
    id: usize,
    state: State,
}

impl Target for Arc<Nfs4Target> {
    type Worker = Nfs4Worker;

    fn default_op(&self) -> &'static str {
        match self.workload {
            NfsWorkload::Metadata => "OPEN",
            _ => "READ",
        }
    }

    async fn worker(&self, id: usize, inst: &mut Instants) -> Result<Nfs4Worker, OpError> {
        let t = self.timeout;
        let mut conn = Conn::open(&self.url, t, id, self.minor).await?;
        inst.connected = Some(Instant::now());
        let path = self.url.full_path();
        let state = match self.workload {
            NfsWorkload::Metadata => {
                let (dir, kind) = conn.walk(&path, t).await?;
                if kind != 2 {
                    return Err(OpError::new(
                        "LOOKUP",
                        ErrorKind::Server,
                        format!(
                            "{path:?} is not a directory (the metadata mix creates files in one)"
                        ),
                    ));
                }
                State::Metadata {
                    dir,
                    step: 0,
                    files: vec![None; self.files as usize],
                }
            }
            _ => {
                let (parent, name) = match path.trim_end_matches('/').rsplit_once('/') {
                    Some((p, n)) => (p.to_string(), n.to_string()),
                    None => (String::new(), path.clone()),
                };
                let (dir, _) = conn.walk(&parent, t).await?;
                let (fh, sid) = conn.open_file(&dir, &name, false, t).await?;
                State::Read {
                    fh,
                    sid,
                    offset: 0,
                    crc: crc32fast::Hasher::new(),
                }
            }
        };
        Ok(Nfs4Worker {
            target: self.clone(),
            conn,
            id,
            state,
        })
    }
}

impl Nfs4Worker {
    fn meta_name(&self, i: u64) -> String {
        format!("servelab-meta4-{}-{}-{i}", std::process::id(), self.id)
    }
}

impl Worker for Nfs4Worker {
    async fn op(&mut self, inst: &mut Instants) -> Result<OpOk, OpError> {
        let t = self.target.timeout;
        if self.conn.broken {
            // The last operation was cancelled mid-exchange: start over on a new
            // connection and client id (the old state expires with its lease).
            let mut fresh = self.target.worker(self.id, inst).await?;
            std::mem::swap(self, &mut fresh);
        }
        let files = self.target.files;
        match &mut self.state {
            State::Read {
                fh,
                sid,
                offset,
                crc,
            } => {
                let mut o = Ops::default();
                o.op(OP_PUTFH).opaque(fh);
                o.op(OP_READ)
                    .stateid(sid)
                    .u64(*offset)
                    .u32(self.target.block);
                let mut r = self.conn.call(&o, "READ", t).await?;
                inst.first_byte = Some(Instant::now());
                r.ok(OP_PUTFH)?;
                r.ok(OP_READ)?;
                let eof = r.u32()? != 0;
                let data = r.opaque()?;
                let n = data.len() as u64;
                crc.update(&data);
                *offset += n;
                let mut failure = None;
                if eof || n == 0 {
                    let sum = std::mem::replace(crc, crc32fast::Hasher::new()).finalize();
                    *offset = 0;
                    self.target.first_crc.lock().get_or_insert(sum);
                    if self.target.verify.is_some_and(|want| want != sum) {
                        failure = Some(ErrorKind::Checksum);
                    }
                }
                Ok(OpOk {
                    op: "READ",
                    body_bytes: n,
                    wire_bytes: n,
                    failure,
                    ..OpOk::default()
                })
            }
            State::Metadata { step, .. } => {
                // Per file: OPEN (create), CLOSE, GETATTR, REMOVE; every file, again.
                let s = *step;
                *step += 1;
                let i = s % files;
                let name = self.meta_name(i);
                let State::Metadata {
                    dir, files: held, ..
                } = &mut self.state
                else {
                    unreachable!("matched above");
                };
                let slot = &mut held[i as usize];
                let missing = |op| OpError::new(op, ErrorKind::Server, "file was not created");
                let op = match (s / files) % 4 {
                    0 => {
                        let (fh, sid) = self.conn.open_file(dir, &name, true, t).await?;
                        *slot = Some((fh, Some(sid)));
                        "OPEN"
                    }
                    1 => {
                        let (fh, sid) = slot.as_mut().ok_or_else(|| missing("CLOSE"))?;
                        let open = sid.take().ok_or_else(|| missing("CLOSE"))?;
                        self.conn.close(fh, &open, t).await?;
                        "CLOSE"
                    }
                    2 => {
                        let (fh, _) = slot.as_ref().ok_or_else(|| missing("GETATTR"))?;
                        let mut o = Ops::default();
                        o.op(OP_PUTFH).opaque(fh);
                        // type, change, size, fileid, mode, numlinks, owner, owner_group,
                        // time_access/metadata/modify: what `stat` needs.
                        o.op(OP_GETATTR)
                            .u32(2)
                            .u32((1 << 1) | (1 << 3) | (1 << 4) | (1 << 20))
                            .u32(
                                (1 << 1)
                                    | (1 << 3)
                                    | (1 << 4)
                                    | (1 << 5)
                                    | (1 << 15)
                                    | (1 << 20)
                                    | (1 << 21),
                            );
                        let mut r = self.conn.call(&o, "GETATTR", t).await?;
                        r.ok(OP_PUTFH)?;
                        r.ok(OP_GETATTR)?;
                        "GETATTR"
                    }
                    _ => {
                        *slot = None;
                        let mut o = Ops::default();
                        o.op(OP_PUTFH).opaque(dir);
                        o.op(OP_REMOVE).opaque(name.as_bytes());
                        let mut r = self.conn.call(&o, "REMOVE", t).await?;
                        r.ok(OP_PUTFH)?;
                        r.ok(OP_REMOVE)?;
                        "REMOVE"
                    }
                };
                inst.first_byte = Some(Instant::now());
                Ok(OpOk {
                    op,
                    ..OpOk::default()
                })
            }
        }
    }

    async fn finish(&mut self) -> Option<Result<OpOk, OpError>> {
        // Leave the export as it was: close what is open, remove what was created.
        let t = self.target.timeout;
        if self.conn.broken {
            return None;
        }
        let (dir, held) = match &self.state {
            State::Read { fh, sid, .. } => {
                let (fh, sid) = (fh.clone(), *sid);
                let _ = self.conn.close(&fh, &sid, t).await;
                let _ = self.conn.end_session(t).await;
                return None;
            }
            State::Metadata { dir, files, .. } => (dir.clone(), files.clone()),
        };
        for (i, f) in held.iter().enumerate() {
            let Some((fh, sid)) = f else { continue };
            if let Some(sid) = sid {
                let _ = self.conn.close(fh, sid, t).await;
            }
            let mut o = Ops::default();
            o.op(OP_PUTFH).opaque(&dir);
            o.op(OP_REMOVE).opaque(self.meta_name(i as u64).as_bytes());
            let _ = self.conn.call(&o, "REMOVE", t).await;
        }
        let _ = self.conn.end_session(t).await;
        None
    }
}
