//! [`Client`]: one MOUNT (v3) or lease (v4), then a pool of connections with timeouts
//! and reconnects; each procedure runs over v3 here or over `crate::v4`.
//!
//! `nfs3_client` runs one call at a time per connection, so throughput comes from several
//! connections: each call leases one from the pool (`crate::pool`, up to
//! [`ClientConfig::connections`]), which also reconnects after a server restart and
//! retries an idempotent call once. Each call has a deadline covering the wait for a
//! connection, connecting and the call itself: a dead or hung server gives
//! [`Error::Unreachable`] / [`Error::Timeout`] fast, never a hang. This file holds the
//! procedures: MOUNT and FSINFO at connect, then one method per NFS call.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use nfs3_client::nfs3_types::nfs3::{
    self, COMMIT3args, CREATE3args, FSINFO3args, GETATTR3args, LOOKUP3args, MKDIR3args, Nfs3Option,
    Nfs3Result, READ3args, READDIR3args, READDIRPLUS3args, READLINK3args, REMOVE3args, RMDIR3args,
    WRITE3args, cookieverf3, createhow3, diropargs3, filename3, nfs_fh3, nfsstat3, sattr3,
    stable_how,
};
use nfs3_client::nfs3_types::rpc::{auth_unix, opaque_auth};
use nfs3_client::nfs3_types::xdr_codec::Opaque;
use nfs3_client::{MountError, RpcError};
use parking_lot::RwLock;
use tokio::time::Instant;

use crate::fastread::{RawConn, ReadOutcome};
use crate::finish::FinishOnDrop;
use crate::pool::{Conn, Pool, connect_tcp, pool_call};
use crate::reply::{LookedUp, PipedReply, ReadReply, Written};
use crate::splice::PipedOutcome;
use crate::v4::V4;
use crate::{Attr, DirEntry, Error, NfsUrl, NfsVersion};

pub use crate::pool::ClientConfig;

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
    /// The connections, their permits, timeouts and credential.
    pool: Pool,
    /// The export's root handle; replaced by [`Client::remount`].
    root: RwLock<nfs_fh3>,
    /// Largest READ / WRITE the server accepts (FSINFO).
    rtmax: AtomicU32,
    wtmax: AtomicU32,
    /// Serialises re-MOUNTs so a burst of stale errors mounts once.
    remount: tokio::sync::Mutex<()>,
    /// The version spoken.
    version: NfsVersion,
    /// The NFSv4 side, with its own pool, when the version is 4.x (the v3 pool then
    /// stays empty).
    v4: Option<V4>,
}

impl Inner {
    /// The NFSv4 side (only called where [`Client::v4`] was checked).
    fn v4_side(&self) -> &V4 {
        self.v4.as_ref().expect("an NFSv4 client")
    }
}

/// Runs one RPC on a pooled `nfs3_client` connection (see [`pool_call`]).
macro_rules! nfs_call {
    ($self:expr, $op:expr, $idempotent:expr, |$c:ident| $body:expr) => {
        pool_call!(&$self.inner.pool, Conn, $op, $idempotent, |$c| $body)
    };
}

fn status_err<T>(op: &'static str, status: nfsstat3) -> Result<T, Error> {
    Err(Error::Status { op, status })
}

impl Client {
    /// Connects in the URL's version ([`NfsUrl::version`]); with `version=auto`, as a
    /// kernel mount without `vers=` does: 4.2, then 4.1, then 4.0 while the server
    /// refuses the minor version or NFSv4 itself, then v3. As mount.nfs does, a path
    /// that NFSv4's namespace does not have (a server whose v4 root is the export
    /// itself, while the URL names the export's path for MOUNT) also falls back to v3.
    pub async fn connect(url: &NfsUrl, cfg: ClientConfig) -> Result<Client, Error> {
        let Some(version) = url.version else {
            for v in [NfsVersion::V4_2, NfsVersion::V4_1, NfsVersion::V4_0] {
                match Client::connect_v4(url, cfg.clone(), v).await {
                    Err(e) if e.is_version_refused() => {
                        tracing::debug!(version = %v, error = %e, "NFS version refused, trying the next");
                    }
                    Err(e) if e.is_not_found() => {
                        tracing::debug!(version = %v, error = %e, "path not in the NFSv4 namespace, trying NFSv3");
                        break;
                    }
                    Ok(client) if !client.has_url_path(url).await => {
                        tracing::debug!(version = %v, "path not in the NFSv4 namespace, trying NFSv3");
                        let _ = client.close().await;
                        break;
                    }
                    other => return other,
                }
            }
            return Client::connect_v3(url, cfg).await;
        };
        match version {
            NfsVersion::V3 => Client::connect_v3(url, cfg).await,
            v => Client::connect_v4(url, cfg, v).await,
        }
    }

    /// Whether the URL's path (without an explicit `//` export) is in this client's
    /// namespace; only a "not found" answer says no (another error is the caller's to
    /// meet at its first call).
    async fn has_url_path(&self, url: &NfsUrl) -> bool {
        let path = url.full_path();
        let path = path.trim_matches('/');
        if url.export_is_explicit || path.is_empty() {
            return true;
        }
        !matches!(self.lookup_path(path).await, Err(e) if e.is_not_found())
    }

    /// NFSv4.x: the lease (and session) set up, the export's handle found from the
    /// server's root, its READ and WRITE limits read. Without `//` in the URL the whole
    /// path is walked from the root (v4 has no MOUNT to find where the export ends).
    async fn connect_v4(
        url: &NfsUrl,
        cfg: ClientConfig,
        version: NfsVersion,
    ) -> Result<Client, Error> {
        let minor = version.minor().expect("a v4 version");
        let cred = opaque_auth::auth_unix(&auth_unix_of(url));
        let mut url = url.clone();
        if !url.export_is_explicit {
            url.path = url.full_path().trim_matches('/').to_string();
            url.export = "/".to_string();
            url.export_is_explicit = true;
        }
        url.version = Some(version);
        let v4 = V4::new(
            minor,
            Pool::new(&url, cfg.clone(), cred.clone()),
            auth_sys_body(url.uid, url.gid),
        );
        v4.session.ensure(&v4).await?;
        let root = v4.root_of(&url.export).await?;
        let (rtmax, wtmax) = v4.limits(&root).await?;
        let cap = |v: u64| v.clamp(4096, 1 << 20) as u32;
        let client = Client {
            inner: Arc::new(Inner {
                pool: Pool::new(&url, cfg, cred),
                url,
                root: RwLock::new(root),
                rtmax: AtomicU32::new(cap(rtmax)),
                wtmax: AtomicU32::new(cap(wtmax)),
                remount: tokio::sync::Mutex::new(()),
                version,
                v4: Some(v4),
            }),
        };
        tracing::debug!(url = %client.inner.url, "NFSv4 export reached");
        Ok(client)
    }

    /// NFSv3: mounts the URL's export and checks the NFS program answers (FSINFO).
    ///
    /// When the URL does not say where the export ends (no `//`), the whole path is tried
    /// as the export first, then each parent, and the rest becomes [`Client::path`].
    async fn connect_v3(url: &NfsUrl, cfg: ClientConfig) -> Result<Client, Error> {
        let cred = opaque_auth::auth_unix(&auth_unix_of(url));
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
        url.version = Some(NfsVersion::V3);
        let client = Client {
            inner: Arc::new(Inner {
                pool: Pool::new(&url, cfg, cred),
                url,
                root: RwLock::new(root),
                rtmax: AtomicU32::new(1 << 20),
                wtmax: AtomicU32::new(1 << 20),
                remount: tokio::sync::Mutex::new(()),
                version: NfsVersion::V3,
                v4: None,
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

    /// The protocol version spoken.
    pub fn version(&self) -> NfsVersion {
        self.inner.version
    }

    fn v4(&self) -> Option<&V4> {
        self.inner.v4.as_ref()
    }

    /// Runs an NFSv4 call so that a caller that goes away (an HTTP client that
    /// disconnects, a timed run's end) does not cut it off mid-exchange: the call
    /// finishes within its deadline and its session slot stays in step with the server's
    /// (cut off, the slot's sequence id would be unknown and the session set up again).
    /// It runs in the caller's task; only a call its caller dropped moves to a task of
    /// its own ([`FinishOnDrop`]).
    async fn detached<T, F>(&self, call: impl FnOnce(Arc<Inner>) -> F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T, Error>> + Send + 'static,
    {
        FinishOnDrop::new(call(self.inner.clone())).await
    }

    /// Ends this client's NFSv4.1+ session and client id on the server (its state is
    /// freed now, not when its lease runs out); v3 and 4.0 have nothing to end. Calls
    /// after it set the session up again.
    pub async fn close(&self) -> Result<(), Error> {
        match self.v4() {
            Some(v4) => v4.session.destroy(v4).await,
            None => Ok(()),
        }
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
        self.inner.pool.cfg.connections.max(1)
    }

    /// MOUNTs the export again and replaces the root handle (after a server restart
    /// that invalidated handles). Concurrent callers share one MOUNT.
    pub async fn remount(&self) -> Result<nfs_fh3, Error> {
        let before = self.root();
        let _guard = self.inner.remount.lock().await;
        if self.root() != before {
            return Ok(self.root());
        }
        if let Some(v4) = self.v4() {
            let fh = v4.root_of(&self.inner.url.export).await?;
            *self.inner.root.write() = fh.clone();
            return Ok(fh);
        }
        let fh = mount(
            &self.inner.url,
            &self.inner.pool.cred,
            &self.inner.url.export,
            &self.inner.pool.cfg,
        )
        .await?;
        *self.inner.root.write() = fh.clone();
        Ok(fh)
    }

    /// GETATTR.
    pub async fn getattr(&self, fh: &nfs_fh3) -> Result<Attr, Error> {
        if self.v4().is_some() {
            let fh = fh.clone();
            return self
                .detached(|i| async move { i.v4_side().getattr(&fh).await })
                .await;
        }
        let args = GETATTR3args { object: fh.clone() };
        match nfs_call!(self, "GETATTR", true, |c| c.getattr(&args))? {
            Nfs3Result::Ok(ok) => Ok(Attr::from(&ok.obj_attributes)),
            Nfs3Result::Err((s, _)) => status_err("GETATTR", s),
        }
    }

    /// LOOKUP of one name in `dir`; returns the handle and its attributes.
    pub async fn lookup(&self, dir: &nfs_fh3, name: &str) -> Result<(nfs_fh3, Attr), Error> {
        if let Some(v4) = self.v4() {
            return {
                check_name(name)?;
                v4.walk(dir, &[name]).await
            };
        }
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

    /// LOOKUP of `name` in `dir` and, over NFSv4, a READ of the object's first `max`
    /// bytes in the same COMPOUND, sent after the LOOKUP: a small file's open and read
    /// in one round trip. NFSv3 has no COMPOUND: there it is the LOOKUP alone (`head`
    /// is `None`, as it is when the server refused the READ: a directory, a symlink).
    pub async fn lookup_head(
        &self,
        dir: &nfs_fh3,
        name: &str,
        max: u32,
    ) -> Result<LookedUp, Error> {
        check_name(name)?;
        if self.v4().is_none() {
            let (fh, attr) = self.lookup(dir, name).await?;
            return Ok(LookedUp {
                fh,
                attr,
                head: None,
            });
        }
        let (dir, name) = (dir.clone(), name.to_string());
        let max = max.min(self.rtmax());
        self.detached(move |i| async move { i.v4_side().lookup_head(&dir, &name, max).await })
            .await
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
        if self.v4().is_some() {
            let (root, comps): (nfs_fh3, Vec<String>) =
                (self.root(), comps.iter().map(|c| c.to_string()).collect());
            return self
                .detached(|i| async move {
                    let comps: Vec<&str> = comps.iter().map(String::as_str).collect();
                    i.v4_side().walk(&root, &comps).await
                })
                .await;
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
        if let Some(v4) = self.v4() {
            return v4.readlink(fh).await;
        }
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
        if self.v4().is_some() {
            let fh = fh.clone();
            return self
                .detached(move |i| async move { i.v4_side().read(&fh, offset, count).await })
                .await;
        }
        let args = READ3args {
            file: fh.clone(),
            offset,
            count,
        };
        let cred = &self.inner.pool.cred;
        match pool_call!(&self.inner.pool, RawConn, "READ", true, |c| c
            .read(cred, &args))?
        {
            ReadOutcome::Data { data, eof, attr } => Ok(ReadReply { data, eof, attr }),
            ReadOutcome::Status(s) => status_err("READ", s),
        }
    }

    /// READ of up to `count` bytes at `offset` whose data is left in pipes (see
    /// `splice`), for a caller that splices it to another descriptor; the reply may be
    /// shorter (check `eof`).
    pub async fn read_piped(
        &self,
        fh: &nfs_fh3,
        offset: u64,
        count: u32,
    ) -> Result<PipedReply, Error> {
        if self.v4().is_some() {
            let fh = fh.clone();
            return self
                .detached(move |i| async move { i.v4_side().read_piped(&fh, offset, count).await })
                .await;
        }
        let args = READ3args {
            file: fh.clone(),
            offset,
            count,
        };
        let cred = &self.inner.pool.cred;
        match pool_call!(&self.inner.pool, RawConn, "READ", true, |c| c
            .read_piped(cred, &args))?
        {
            PipedOutcome::Data { data, eof, attr } => Ok(PipedReply { data, eof, attr }),
            PipedOutcome::Other(ReadOutcome::Status(s)) => status_err("READ", s),
            PipedOutcome::Other(ReadOutcome::Data { .. }) => Err(Error::Rpc {
                op: "READ",
                source: RpcError::Io(std::io::Error::other("READ reply not understood")),
            }),
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
        self.write_stable(fh, offset, data, stable)
            .await
            .map(|w| w.count)
    }

    /// WRITE of `data` at `offset`, with how stable the server says it is and its write
    /// verifier (a client holding UNSTABLE data resends it when the verifier changes).
    pub async fn write_stable(
        &self,
        fh: &nfs_fh3,
        offset: u64,
        data: &[u8],
        stable: stable_how,
    ) -> Result<Written, Error> {
        let count = u32::try_from(data.len()).map_err(|_| Error::BadPath {
            path: String::new(),
            reason: "write larger than 4 GiB".into(),
        })?;
        if let Some(v4) = self.v4() {
            return v4.write(fh, offset, data, stable).await;
        }
        let args = WRITE3args {
            file: fh.clone(),
            offset,
            count,
            stable,
            data: Opaque::borrowed(data),
        };
        // A WRITE of the same bytes at the same offset is idempotent.
        match nfs_call!(self, "WRITE", true, |c| c.write(&args))? {
            Nfs3Result::Ok(ok) => Ok(Written {
                count: ok.count,
                committed: ok.committed,
                verf: ok.verf.0,
            }),
            Nfs3Result::Err((s, _)) => status_err("WRITE", s),
        }
    }

    /// COMMIT of the whole file (offset 0, count 0): everything written UNSTABLE is
    /// stable when it returns; returns the server's write verifier, to compare with the
    /// WRITEs' (a different one means the server restarted and the data must be resent).
    pub async fn commit(&self, fh: &nfs_fh3) -> Result<[u8; 8], Error> {
        if let Some(v4) = self.v4() {
            return v4.commit(fh).await;
        }
        let args = COMMIT3args {
            file: fh.clone(),
            offset: 0,
            count: 0,
        };
        match nfs_call!(self, "COMMIT", true, |c| c.commit(&args))? {
            Nfs3Result::Ok(ok) => Ok(ok.verf.0),
            Nfs3Result::Err((s, _)) => status_err("COMMIT", s),
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
        if let Some(v4) = self.v4() {
            return v4.create(dir, name, mode).await;
        }
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
        if let Some(v4) = self.v4() {
            return v4.mkdir(dir, name, mode).await;
        }
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
        if let Some(v4) = self.v4() {
            return {
                check_name(name)?;
                v4.remove(dir, name, "REMOVE").await
            };
        }
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
        if let Some(v4) = self.v4() {
            return {
                check_name(name)?;
                v4.remove(dir, name, "RMDIR").await
            };
        }
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
        if let Some(v4) = self.v4() {
            return v4.readdir(dir).await;
        }
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
}

/// The AUTH_UNIX credential of the URL's identity.
fn auth_unix_of(url: &NfsUrl) -> auth_unix {
    auth_unix {
        stamp: 0,
        machinename: Opaque::owned(b"servelab".to_vec()),
        uid: url.uid,
        gid: url.gid,
        gids: vec![url.gid],
    }
}

/// The same credential's body as NFSv4 calls send it (`authsys_parms`).
fn auth_sys_body(uid: u32, gid: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(40);
    for w in [0u32, 8] {
        b.extend_from_slice(&w.to_be_bytes());
    }
    b.extend_from_slice(b"servelab");
    for w in [uid, gid, 1, gid] {
        b.extend_from_slice(&w.to_be_bytes());
    }
    b
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
    let mut stream = stream;
    let res = tokio::time::timeout_at(deadline, crate::mount::mnt(&mut stream, 1, cred, export))
        .await
        .map_err(|_| Error::Timeout {
            op: "MOUNT",
            addr: addr.clone(),
            after: cfg.call_timeout,
        })?;
    match res {
        Ok(handle) => Ok(nfs_fh3 {
            data: Opaque::owned(handle),
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
