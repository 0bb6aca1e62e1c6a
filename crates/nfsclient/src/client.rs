//! [`Client`]: one MOUNT, then a pool of NFSv3 connections with timeouts and reconnects.
//!
//! `nfs3_client` runs one call at a time per connection, so throughput comes from several
//! connections: each call leases an idle connection (or opens one, up to
//! [`ClientConfig::connections`]) and returns it afterwards. A call that fails with an
//! I/O error drops its connection and every idle one (a server restart kills them all),
//! and a call on a reused connection that turns out dead is retried once on a fresh one
//! when it is idempotent — so the first request after a restart succeeds. Each call has
//! a deadline covering the wait for a connection, connecting and the call itself: a dead
//! or hung server gives [`Error::Unreachable`] / [`Error::Timeout`] fast, never a hang.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nfs3_client::nfs3_types::mount::dirpath;
use nfs3_client::nfs3_types::nfs3::{
    self, CREATE3args, FSINFO3args, GETATTR3args, LOOKUP3args, MKDIR3args, Nfs3Option, Nfs3Result,
    READ3args, READDIR3args, READDIRPLUS3args, READLINK3args, REMOVE3args, RMDIR3args, WRITE3args,
    cookieverf3, createhow3, diropargs3, filename3, nfs_fh3, nfsstat3, sattr3, stable_how,
};
use nfs3_client::nfs3_types::rpc::{auth_unix, opaque_auth};
use nfs3_client::nfs3_types::xdr_codec::Opaque;
use nfs3_client::{MountClient, MountError, Nfs3Client, RpcError};
use parking_lot::{Mutex, RwLock};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

use crate::fastread::{RawConn, ReadOutcome};
use crate::rpc_io::RpcIo;
use crate::url::{Host, endpoint};
use crate::{Attr, DirEntry, Error, NfsUrl, Unreachable};
use bytes::Bytes;

type Conn = Nfs3Client<RpcIo<TcpStream>>;

/// Pool and timeout settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Most connections open at once (= most calls in flight).
    pub connections: usize,
    /// Deadline of one call: waiting for a connection, connecting and the RPC.
    pub call_timeout: Duration,
    /// Deadline of one TCP connect.
    pub connect_timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connections: 8,
            call_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
        }
    }
}

/// A mounted NFSv3 export; cheap to clone (all clones share the pool).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.inner.url.to_string())
            .finish()
    }
}

struct Inner {
    /// The URL with the export that MOUNT accepted and the path inside it.
    url: NfsUrl,
    cfg: ClientConfig,
    /// AUTH_UNIX credential sent with every call.
    cred: opaque_auth<'static>,
    /// Connections not in use; popped by a call, pushed back when it succeeds.
    idle: Mutex<Vec<Conn>>,
    /// Idle connections of the zero-copy READ path (same permits as `idle`).
    raw_idle: Mutex<Vec<RawConn>>,
    /// One permit per connection that may exist.
    permits: Semaphore,
    /// The export's root handle; replaced by [`Client::remount`].
    root: RwLock<nfs_fh3>,
    /// Largest READ / WRITE the server accepts (FSINFO).
    rtmax: AtomicU32,
    wtmax: AtomicU32,
    /// Serialises re-MOUNTs so a burst of stale errors mounts once.
    remount: tokio::sync::Mutex<()>,
}

/// A leased connection with its pool permit.
struct Lease<'a> {
    conn: Conn,
    reused: bool,
    _permit: SemaphorePermit<'a>,
}

/// Runs one RPC on a leased connection with the pool's deadline and retry rules.
macro_rules! nfs_call {
    ($self:expr, $op:expr, $idempotent:expr, |$c:ident| $body:expr) => {{
        let deadline = Instant::now() + $self.inner.cfg.call_timeout;
        let mut retried = false;
        loop {
            let mut lease = $self.checkout($op, deadline).await?;
            let $c = &mut lease.conn;
            let res = tokio::time::timeout_at(deadline, $body).await;
            match $self.settle($op, lease, res, $idempotent && !retried) {
                Ok(Some(v)) => break Ok::<_, Error>(v),
                Ok(None) => retried = true,
                Err(e) => break Err(e),
            }
        }
    }};
}

fn status_err<T>(op: &'static str, status: nfsstat3) -> Result<T, Error> {
    Err(Error::Status { op, status })
}

impl Client {
    /// Mounts the URL's export and checks the NFS program answers (FSINFO).
    ///
    /// When the URL does not say where the export ends (no `//`), the whole path is tried
    /// as the export first, then each parent, and the rest becomes [`Client::path`].
    pub async fn connect(url: &NfsUrl, cfg: ClientConfig) -> Result<Client, Error> {
        let cred = opaque_auth::auth_unix(&auth_unix {
            stamp: 0,
            machinename: Opaque::owned(b"servelab".to_vec()),
            uid: url.uid,
            gid: url.gid,
            gids: vec![url.gid],
        });
        let mut first_err = None;
        let mut mounted = None;
        for (export, path) in url.export_candidates() {
            match mount(url, &cred, &export, &cfg).await {
                Ok(fh) => {
                    mounted = Some((export, path, fh));
                    break;
                }
                Err(e @ Error::MountDenied { .. }) => {
                    first_err.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        let Some((export, path, root)) = mounted else {
            return Err(first_err.expect("at least one export candidate"));
        };
        let mut url = url.clone();
        url.export = export;
        url.path = path;
        url.export_is_explicit = true;
        let client = Client {
            inner: Arc::new(Inner {
                url,
                permits: Semaphore::new(cfg.connections.max(1)),
                cfg,
                cred,
                idle: Mutex::new(Vec::new()),
                raw_idle: Mutex::new(Vec::new()),
                root: RwLock::new(root),
                rtmax: AtomicU32::new(1 << 20),
                wtmax: AtomicU32::new(1 << 20),
                remount: tokio::sync::Mutex::new(()),
            }),
        };
        let root = client.root();
        let info = nfs_call!(client, "FSINFO", true, |c| c.fsinfo(&FSINFO3args {
            fsroot: root.clone()
        }))?;
        match info {
            Nfs3Result::Ok(ok) => {
                // Cap at 1 MiB: larger replies gain nothing and cost memory per call.
                let cap = |v: u32| v.clamp(4096, 1 << 20);
                client.inner.rtmax.store(cap(ok.rtmax), Ordering::Relaxed);
                client.inner.wtmax.store(cap(ok.wtmax), Ordering::Relaxed);
            }
            Nfs3Result::Err((status, _)) => return status_err("FSINFO", status),
        }
        tracing::debug!(url = %client.inner.url, "NFS export mounted");
        Ok(client)
    }

    /// The URL as mounted: the export MOUNT accepted, and the path inside it.
    pub fn url(&self) -> &NfsUrl {
        &self.inner.url
    }

    /// The path inside the export that the URL named (may be empty).
    pub fn path(&self) -> &str {
        &self.inner.url.path
    }

    /// The export's root handle.
    pub fn root(&self) -> nfs_fh3 {
        self.inner.root.read().clone()
    }

    /// Largest READ count the server accepts (capped at 1 MiB).
    pub fn rtmax(&self) -> u32 {
        self.inner.rtmax.load(Ordering::Relaxed)
    }

    /// Largest WRITE count the server accepts (capped at 1 MiB).
    pub fn wtmax(&self) -> u32 {
        self.inner.wtmax.load(Ordering::Relaxed)
    }

    /// Most calls that can be in flight at once.
    pub fn connections(&self) -> usize {
        self.inner.cfg.connections.max(1)
    }

    /// MOUNTs the export again and replaces the root handle (after a server restart
    /// that invalidated handles). Concurrent callers share one MOUNT.
    pub async fn remount(&self) -> Result<nfs_fh3, Error> {
        let before = self.root();
        let _guard = self.inner.remount.lock().await;
        if self.root() != before {
            return Ok(self.root());
        }
        let fh = mount(
            &self.inner.url,
            &self.inner.cred,
            &self.inner.url.export,
            &self.inner.cfg,
        )
        .await?;
        *self.inner.root.write() = fh.clone();
        Ok(fh)
    }

    /// GETATTR.
    pub async fn getattr(&self, fh: &nfs_fh3) -> Result<Attr, Error> {
        let args = GETATTR3args { object: fh.clone() };
        match nfs_call!(self, "GETATTR", true, |c| c.getattr(&args))? {
            Nfs3Result::Ok(ok) => Ok(Attr::from(&ok.obj_attributes)),
            Nfs3Result::Err((s, _)) => status_err("GETATTR", s),
        }
    }

    /// LOOKUP of one name in `dir`; returns the handle and its attributes.
    pub async fn lookup(&self, dir: &nfs_fh3, name: &str) -> Result<(nfs_fh3, Attr), Error> {
        check_name(name)?;
        let args = LOOKUP3args {
            what: diropargs3 {
                dir: dir.clone(),
                name: filename3(Opaque::borrowed(name.as_bytes())),
            },
        };
        match nfs_call!(self, "LOOKUP", true, |c| c.lookup(&args))? {
            Nfs3Result::Ok(ok) => {
                let attr = match ok.obj_attributes {
                    Nfs3Option::Some(a) => Attr::from(&a),
                    Nfs3Option::None => self.getattr(&ok.object).await?,
                };
                Ok((ok.object, attr))
            }
            Nfs3Result::Err((s, _)) => status_err("LOOKUP", s),
        }
    }

    /// Walks `path` (`a/b/c`, relative to the export root) with one LOOKUP per component;
    /// an empty path is the root itself. `.` and `..` components are refused. When the
    /// root handle is stale (server restarted with new handles) it re-MOUNTs once.
    pub async fn lookup_path(&self, path: &str) -> Result<(nfs_fh3, Attr), Error> {
        match self.walk(path).await {
            Err(e) if e.is_stale() => {
                self.remount().await?;
                self.walk(path).await
            }
            other => other,
        }
    }

    async fn walk(&self, path: &str) -> Result<(nfs_fh3, Attr), Error> {
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        for c in &comps {
            if *c == "." || *c == ".." {
                return Err(Error::BadPath {
                    path: path.to_string(),
                    reason: ". and .. components are not allowed".into(),
                });
            }
        }
        let mut fh = self.root();
        if comps.is_empty() {
            let attr = self.getattr(&fh).await?;
            return Ok((fh, attr));
        }
        let mut attr = None;
        for c in comps {
            let (next, a) = self.lookup(&fh, c).await?;
            fh = next;
            attr = Some(a);
        }
        Ok((fh, attr.expect("at least one component")))
    }

    /// READLINK: the target of a symlink, as stored (not resolved).
    pub async fn readlink(&self, fh: &nfs_fh3) -> Result<String, Error> {
        let args = READLINK3args {
            symlink: fh.clone(),
        };
        match nfs_call!(self, "READLINK", true, |c| c.readlink(&args))? {
            Nfs3Result::Ok(ok) => Ok(String::from_utf8_lossy(ok.data.as_ref()).into_owned()),
            Nfs3Result::Err((s, _)) => status_err("READLINK", s),
        }
    }

    /// READ of up to `count` bytes at `offset`; the reply may be shorter (check `eof`).
    /// The data is a zero-copy slice of the received record (see `fastread`).
    pub async fn read(&self, fh: &nfs_fh3, offset: u64, count: u32) -> Result<ReadReply, Error> {
        let args = READ3args {
            file: fh.clone(),
            offset,
            count,
        };
        let op = "READ";
        let addr = self.inner.url.nfs_endpoint();
        let timeout = || Error::Timeout {
            op,
            addr: addr.clone(),
            after: self.inner.cfg.call_timeout,
        };
        let deadline = Instant::now() + self.inner.cfg.call_timeout;
        let mut retried = false;
        loop {
            let _permit = tokio::time::timeout_at(deadline, self.inner.permits.acquire())
                .await
                .map_err(|_| timeout())?
                .expect("the pool semaphore is never closed");
            let popped = self.inner.raw_idle.lock().pop();
            let (mut conn, reused) = match popped {
                Some(c) => (c, true),
                None => {
                    let limit = deadline.min(Instant::now() + self.inner.cfg.connect_timeout);
                    let url = &self.inner.url;
                    let stream = connect_tcp(&url.host, url.nfs_port, limit).await?;
                    (RawConn::new(stream), false)
                }
            };
            let res = tokio::time::timeout_at(deadline, conn.read(&self.inner.cred, &args))
                .await
                .map_err(|_| timeout())?;
            match res {
                Ok(outcome) => {
                    self.inner.raw_idle.lock().push(conn);
                    return match outcome {
                        ReadOutcome::Data { data, eof, attr } => Ok(ReadReply { data, eof, attr }),
                        ReadOutcome::Status(s) => status_err(op, s),
                    };
                }
                Err(RpcError::Io(source)) => {
                    self.inner.raw_idle.lock().clear();
                    self.inner.idle.lock().clear();
                    if reused && !retried {
                        retried = true;
                        continue;
                    }
                    return Err(Error::ConnectionLost { op, addr, source });
                }
                Err(e) => {
                    // Decoding errors happen after the whole record was read: the
                    // connection is still at a message boundary.
                    self.inner.raw_idle.lock().push(conn);
                    return Err(Error::Rpc { op, source: e });
                }
            }
        }
    }

    /// WRITE of `data` at `offset`; returns the count the server wrote.
    pub async fn write(
        &self,
        fh: &nfs_fh3,
        offset: u64,
        data: &[u8],
        stable: stable_how,
    ) -> Result<u32, Error> {
        let count = u32::try_from(data.len()).map_err(|_| Error::BadPath {
            path: String::new(),
            reason: "write larger than 4 GiB".into(),
        })?;
        let args = WRITE3args {
            file: fh.clone(),
            offset,
            count,
            stable,
            data: Opaque::borrowed(data),
        };
        // A WRITE of the same bytes at the same offset is idempotent.
        match nfs_call!(self, "WRITE", true, |c| c.write(&args))? {
            Nfs3Result::Ok(ok) => Ok(ok.count),
            Nfs3Result::Err((s, _)) => status_err("WRITE", s),
        }
    }

    /// CREATE (UNCHECKED: an existing file is truncated by the server's rules) with `mode`.
    pub async fn create(
        &self,
        dir: &nfs_fh3,
        name: &str,
        mode: u32,
    ) -> Result<(nfs_fh3, Attr), Error> {
        check_name(name)?;
        let args = CREATE3args {
            where_: diropargs3 {
                dir: dir.clone(),
                name: filename3(Opaque::borrowed(name.as_bytes())),
            },
            how: createhow3::UNCHECKED(sattr3 {
                mode: Nfs3Option::Some(mode),
                ..sattr3::default()
            }),
        };
        match nfs_call!(self, "CREATE", true, |c| c.create(&args))? {
            Nfs3Result::Ok(ok) => {
                self.object_or_lookup(dir, name, ok.obj, ok.obj_attributes)
                    .await
            }
            Nfs3Result::Err((s, _)) => status_err("CREATE", s),
        }
    }

    /// MKDIR with `mode`.
    pub async fn mkdir(
        &self,
        dir: &nfs_fh3,
        name: &str,
        mode: u32,
    ) -> Result<(nfs_fh3, Attr), Error> {
        check_name(name)?;
        let args = MKDIR3args {
            where_: diropargs3 {
                dir: dir.clone(),
                name: filename3(Opaque::borrowed(name.as_bytes())),
            },
            attributes: sattr3 {
                mode: Nfs3Option::Some(mode),
                ..sattr3::default()
            },
        };
        match nfs_call!(self, "MKDIR", false, |c| c.mkdir(&args))? {
            Nfs3Result::Ok(ok) => {
                self.object_or_lookup(dir, name, ok.obj, ok.obj_attributes)
                    .await
            }
            Nfs3Result::Err((s, _)) => status_err("MKDIR", s),
        }
    }

    /// REMOVE of a file.
    pub async fn remove(&self, dir: &nfs_fh3, name: &str) -> Result<(), Error> {
        check_name(name)?;
        let args = REMOVE3args {
            object: diropargs3 {
                dir: dir.clone(),
                name: filename3(Opaque::borrowed(name.as_bytes())),
            },
        };
        match nfs_call!(self, "REMOVE", false, |c| c.remove(&args))? {
            Nfs3Result::Ok(_) => Ok(()),
            Nfs3Result::Err((s, _)) => status_err("REMOVE", s),
        }
    }

    /// RMDIR of an empty directory.
    pub async fn rmdir(&self, dir: &nfs_fh3, name: &str) -> Result<(), Error> {
        check_name(name)?;
        let args = RMDIR3args {
            object: diropargs3 {
                dir: dir.clone(),
                name: filename3(Opaque::borrowed(name.as_bytes())),
            },
        };
        match nfs_call!(self, "RMDIR", false, |c| c.rmdir(&args))? {
            Nfs3Result::Ok(_) => Ok(()),
            Nfs3Result::Err((s, _)) => status_err("RMDIR", s),
        }
    }

    /// Every entry of a directory except `.` and `..`, with attributes and handles when
    /// the server supports READDIRPLUS (plain READDIR otherwise).
    pub async fn readdir(&self, dir: &nfs_fh3) -> Result<Vec<DirEntry>, Error> {
        let mut out = Vec::new();
        let mut cookie = 0;
        let mut verf = cookieverf3::default();
        loop {
            let args = READDIRPLUS3args {
                dir: dir.clone(),
                cookie,
                cookieverf: verf,
                dircount: 64 * 1024,
                maxcount: 256 * 1024,
            };
            match nfs_call!(self, "READDIRPLUS", true, |c| c.readdirplus(&args))? {
                Nfs3Result::Ok(ok) => {
                    verf = ok.cookieverf;
                    let n = ok.reply.entries.0.len();
                    for e in ok.reply.entries.0 {
                        cookie = e.cookie;
                        let name = String::from_utf8_lossy(e.name.as_ref()).into_owned();
                        if name == "." || name == ".." {
                            continue;
                        }
                        out.push(DirEntry {
                            name,
                            fileid: e.fileid,
                            attr: match e.name_attributes {
                                Nfs3Option::Some(a) => Some(Attr::from(&a)),
                                Nfs3Option::None => None,
                            },
                            handle: match e.name_handle {
                                Nfs3Option::Some(h) => Some(h),
                                Nfs3Option::None => None,
                            },
                        });
                    }
                    if ok.reply.eof {
                        return Ok(out);
                    }
                    if n == 0 {
                        return Err(Error::Protocol {
                            op: "READDIRPLUS",
                            what: "entries (empty page without eof)",
                        });
                    }
                }
                Nfs3Result::Err((nfsstat3::NFS3ERR_NOTSUPP, _)) if cookie == 0 => {
                    return self.readdir_plain(dir).await;
                }
                Nfs3Result::Err((s, _)) => return status_err("READDIRPLUS", s),
            }
        }
    }

    async fn readdir_plain(&self, dir: &nfs_fh3) -> Result<Vec<DirEntry>, Error> {
        let mut out = Vec::new();
        let mut cookie = 0;
        let mut verf = cookieverf3::default();
        loop {
            let args = READDIR3args {
                dir: dir.clone(),
                cookie,
                cookieverf: verf,
                count: 64 * 1024,
            };
            match nfs_call!(self, "READDIR", true, |c| c.readdir(&args))? {
                Nfs3Result::Ok(ok) => {
                    verf = ok.cookieverf;
                    let n = ok.reply.entries.0.len();
                    for e in ok.reply.entries.0 {
                        cookie = e.cookie;
                        let name = String::from_utf8_lossy(e.name.as_ref()).into_owned();
                        if name != "." && name != ".." {
                            out.push(DirEntry {
                                name,
                                fileid: e.fileid,
                                attr: None,
                                handle: None,
                            });
                        }
                    }
                    if ok.reply.eof {
                        return Ok(out);
                    }
                    if n == 0 {
                        return Err(Error::Protocol {
                            op: "READDIR",
                            what: "entries (empty page without eof)",
                        });
                    }
                }
                Nfs3Result::Err((s, _)) => return status_err("READDIR", s),
            }
        }
    }

    async fn object_or_lookup(
        &self,
        dir: &nfs_fh3,
        name: &str,
        fh: nfs3::post_op_fh3,
        attr: nfs3::post_op_attr,
    ) -> Result<(nfs_fh3, Attr), Error> {
        match (fh, attr) {
            (Nfs3Option::Some(fh), Nfs3Option::Some(a)) => Ok((fh, Attr::from(&a))),
            (Nfs3Option::Some(fh), Nfs3Option::None) => {
                let a = self.getattr(&fh).await?;
                Ok((fh, a))
            }
            _ => self.lookup(dir, name).await,
        }
    }

    /// Leases a connection: waits for a permit, then pops an idle one or connects.
    async fn checkout(&self, op: &'static str, deadline: Instant) -> Result<Lease<'_>, Error> {
        let addr = self.inner.url.nfs_endpoint();
        let permit = tokio::time::timeout_at(deadline, self.inner.permits.acquire())
            .await
            .map_err(|_| Error::Timeout {
                op,
                addr,
                after: self.inner.cfg.call_timeout,
            })?
            .expect("the pool semaphore is never closed");
        if let Some(conn) = self.inner.idle.lock().pop() {
            return Ok(Lease {
                conn,
                reused: true,
                _permit: permit,
            });
        }
        let limit = deadline.min(Instant::now() + self.inner.cfg.connect_timeout);
        let url = &self.inner.url;
        let stream = connect_tcp(&url.host, url.nfs_port, limit).await?;
        Ok(Lease {
            conn: Nfs3Client::new_with_auth(
                RpcIo::new(stream),
                self.inner.cred.clone(),
                opaque_auth::default(),
            ),
            reused: false,
            _permit: permit,
        })
    }

    /// Returns the connection to the pool or drops it; `Ok(None)` asks for a retry.
    fn settle<T>(
        &self,
        op: &'static str,
        lease: Lease<'_>,
        res: Result<Result<T, RpcError>, tokio::time::error::Elapsed>,
        may_retry: bool,
    ) -> Result<Option<T>, Error> {
        let addr = self.inner.url.nfs_endpoint();
        match res {
            Ok(Ok(v)) => {
                self.inner.idle.lock().push(lease.conn);
                Ok(Some(v))
            }
            Ok(Err(e)) if e.is_connection_reusable() => {
                self.inner.idle.lock().push(lease.conn);
                Err(Error::Rpc { op, source: e })
            }
            Ok(Err(e)) => {
                // The transport is dead; the server probably went away, so the idle
                // connections are dead too.
                self.inner.idle.lock().clear();
                if lease.reused && may_retry {
                    tracing::debug!(op, %addr, error = %e, "NFS connection lost, retrying on a new one");
                    return Ok(None);
                }
                let source = match e {
                    RpcError::Io(io) => io,
                    other => std::io::Error::other(other.to_string()),
                };
                Err(Error::ConnectionLost { op, addr, source })
            }
            Err(_) => Err(Error::Timeout {
                op,
                addr,
                after: self.inner.cfg.call_timeout,
            }),
        }
    }
}

/// The reply to a READ.
#[derive(Debug)]
pub struct ReadReply {
    pub data: Bytes,
    /// The server says the read reached the end of the file.
    pub eof: bool,
    /// Post-operation attributes when the server sent them.
    pub attr: Option<Attr>,
}

fn check_name(name: &str) -> Result<(), Error> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(Error::BadPath {
            path: name.to_string(),
            reason: "not a single file name".into(),
        });
    }
    Ok(())
}

/// Resolves `host` (again on every call, so a server that moved to a new address is
/// found) and connects to the first address that accepts, all before `deadline`.
pub(crate) async fn connect_tcp(
    host: &Host,
    port: u16,
    deadline: Instant,
) -> Result<TcpStream, Error> {
    let endpoint = || endpoint(host, port);
    let addrs = resolve(host, port, deadline)
        .await
        .map_err(|source| Error::Unreachable {
            addr: endpoint(),
            cause: Unreachable::Resolve,
            source,
        })?;
    let mut last = None;
    for addr in addrs {
        match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                // RPCs are small request/response pairs: Nagle would add 40 ms delays.
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(e)) => last = Some((addr, e)),
            Err(_) => {
                last = Some((
                    addr,
                    std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"),
                ));
                break;
            }
        }
    }
    let (addr, source) = last.expect("resolve returns at least one address");
    let addr = match host {
        Host::Ip(_) => endpoint(),
        Host::Name(_) => format!("{} ({addr})", endpoint()),
    };
    Err(Error::Unreachable {
        addr,
        cause: Unreachable::Connect,
        source,
    })
}

/// The addresses of `host:port`: the literal itself, or a fresh lookup of the name
/// (`getaddrinfo`: /etc/hosts, then DNS) bounded by `deadline`; never empty on success.
pub(crate) async fn resolve(
    host: &Host,
    port: u16,
    deadline: Instant,
) -> std::io::Result<Vec<SocketAddr>> {
    let name = match host {
        Host::Ip(ip) => return Ok(vec![SocketAddr::new(*ip, port)]),
        Host::Name(name) => name.as_str(),
    };
    let found = tokio::time::timeout_at(deadline, tokio::net::lookup_host((name, port)))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "lookup timed out"))??;
    let addrs: Vec<SocketAddr> = found.collect();
    if addrs.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the name has no addresses",
        ));
    }
    Ok(addrs)
}

/// One MOUNT call on its own connection; returns the export's root handle.
async fn mount(
    url: &NfsUrl,
    cred: &opaque_auth<'static>,
    export: &str,
    cfg: &ClientConfig,
) -> Result<nfs_fh3, Error> {
    let addr = url.mount_endpoint();
    let deadline = Instant::now() + cfg.call_timeout;
    let stream = connect_tcp(
        &url.host,
        url.mount_port,
        deadline.min(Instant::now() + cfg.connect_timeout),
    )
    .await?;
    let mut mc =
        MountClient::new_with_auth(RpcIo::new(stream), cred.clone(), opaque_auth::default());
    let res = tokio::time::timeout_at(
        deadline,
        mc.mnt(dirpath(Opaque::borrowed(export.as_bytes()))),
    )
    .await
    .map_err(|_| Error::Timeout {
        op: "MOUNT",
        addr: addr.clone(),
        after: cfg.call_timeout,
    })?;
    match res {
        Ok(ok) => Ok(nfs_fh3 {
            data: Opaque::owned(ok.fhandle.0.into_owned()),
        }),
        Err(MountError::Denied(status)) => Err(Error::MountDenied {
            export: export.to_string(),
            addr,
            status: format!("{status:?}"),
        }),
        Err(MountError::Rpc(RpcError::Io(source))) => Err(Error::ConnectionLost {
            op: "MOUNT",
            addr,
            source,
        }),
        Err(MountError::Rpc(source)) => Err(Error::Rpc {
            op: "MOUNT",
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[tokio::test]
    async fn resolves_names_at_connect_time() {
        let name = Host::Name("localhost".into());
        let addrs = resolve(&name, 2049, soon()).await.unwrap();
        assert!(addrs.iter().all(|a| a.port() == 2049), "{addrs:?}");
        assert!(addrs.iter().any(|a| a.ip().is_loopback()), "{addrs:?}");

        // A listener on 127.0.0.1 is reached through the name even when the resolver lists
        // ::1 first: every address is tried in turn.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let stream = connect_tcp(&name, port, soon()).await.unwrap();
        assert_eq!(stream.peer_addr().unwrap().port(), port);
        let (accepted, _) = listener.accept().await.unwrap();
        assert_eq!(accepted.local_addr().unwrap().port(), port);
    }

    #[tokio::test]
    async fn unknown_name_is_unreachable_with_resolve_cause() {
        let host = Host::Name("no-such-host.invalid".into());
        let t = std::time::Instant::now();
        let deadline = Instant::now() + Duration::from_secs(3);
        let err = connect_tcp(&host, 2049, deadline).await.unwrap_err();
        assert!(err.is_resolve_failure(), "{err}");
        assert!(err.is_unavailable(), "{err}");
        assert!(
            err.to_string()
                .contains("no-such-host.invalid:2049 is unreachable: host name resolution failed"),
            "{err}"
        );
        assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());

        let url = NfsUrl::parse("nfs://no-such-host.invalid/export").unwrap();
        let cfg = ClientConfig {
            call_timeout: Duration::from_secs(3),
            ..ClientConfig::default()
        };
        let err = Client::connect(&url, cfg).await.unwrap_err();
        assert!(err.is_resolve_failure(), "{err}");
    }

    #[tokio::test]
    async fn refused_connect_names_host_and_address() {
        // Bind then drop to get a port nobody listens on.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let err = connect_tcp(&Host::Ip([127, 0, 0, 1].into()), port, soon())
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::Unreachable {
                    cause: Unreachable::Connect,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains(&format!("127.0.0.1:{port}")),
            "{err}"
        );
    }
}
