//! The connection pool under [`crate::Client`]: one permit per connection that may exist,
//! idle connections of three kinds under those permits (`nfs3_client`'s, for every
//! NFSv3 procedure, the zero-copy READ path's `fastread` connections, and NFSv4's), and
//! one checkout/settle path for every call of any kind.
//!
//! A call leases an idle connection (or opens one) within its deadline and settles it
//! afterwards: back to the idle list when the connection is still at a message
//! boundary; dropped, with every idle one of every kind (a server restart kills them
//! all), when its transport died — and then, for an idempotent call on a reused
//! connection, retried once on a fresh one, so the first call after a restart succeeds.

use std::net::SocketAddr;
use std::time::Duration;

use nfs3_client::nfs3_types::rpc::opaque_auth;
use nfs3_client::{Nfs3Client, RpcError};
use parking_lot::Mutex;
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

use crate::fastread::RawConn;
use crate::rpc_io::RpcIo;
use crate::url::{Host, endpoint};
use crate::v4::conn::V4Conn;
use crate::{Error, NfsUrl, Unreachable};

/// An `nfs3_client` connection: every procedure but the zero-copy READ.
pub(crate) type Conn = Nfs3Client<RpcIo<TcpStream>>;

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

/// The pool of one mounted export's NFS connections.
pub(crate) struct Pool {
    host: Host,
    port: u16,
    /// `host:port` as errors name it.
    addr: String,
    pub cfg: ClientConfig,
    /// AUTH_UNIX credential sent with every call.
    pub cred: opaque_auth<'static>,
    /// Connections not in use; popped by a call, pushed back when it settles well.
    idle: Mutex<Vec<Conn>>,
    /// Idle connections of the zero-copy READ path (same permits as `idle`).
    raw_idle: Mutex<Vec<RawConn>>,
    /// Idle NFSv4 connections (a v4 client uses only these).
    v4_idle: Mutex<Vec<V4Conn>>,
    /// One permit per connection that may exist.
    permits: Semaphore,
}

/// A kind of connection the pool holds.
pub(crate) trait Pooled: Sized {
    /// The pool's idle list of this kind.
    fn idle(pool: &Pool) -> &Mutex<Vec<Self>>;
    /// A new connection of this kind over a connected stream.
    fn open(stream: TcpStream, pool: &Pool) -> Self;
}

impl Pooled for Conn {
    fn idle(pool: &Pool) -> &Mutex<Vec<Self>> {
        &pool.idle
    }
    fn open(stream: TcpStream, pool: &Pool) -> Self {
        Nfs3Client::new_with_auth(
            RpcIo::new(stream),
            pool.cred.clone(),
            opaque_auth::default(),
        )
    }
}

impl Pooled for V4Conn {
    fn idle(pool: &Pool) -> &Mutex<Vec<Self>> {
        &pool.v4_idle
    }
    fn open(stream: TcpStream, _: &Pool) -> Self {
        V4Conn::new(stream)
    }
}

impl Pooled for RawConn {
    fn idle(pool: &Pool) -> &Mutex<Vec<Self>> {
        &pool.raw_idle
    }
    fn open(stream: TcpStream, _: &Pool) -> Self {
        RawConn::new(stream)
    }
}

/// A leased connection with its pool permit.
pub(crate) struct Lease<'a, C> {
    pub conn: C,
    reused: bool,
    _permit: SemaphorePermit<'a>,
}

/// Runs one RPC on a leased connection of kind `$kind` with the pool's deadline and
/// retry rules: `|c| body` is the call on `c: &mut $kind`.
macro_rules! pool_call {
    ($pool:expr, $kind:ty, $op:expr, $idempotent:expr, |$c:ident| $body:expr) => {{
        let pool: &$crate::pool::Pool = $pool;
        let deadline = tokio::time::Instant::now() + pool.cfg.call_timeout;
        let mut retried = false;
        loop {
            let mut lease = pool.checkout::<$kind>($op, deadline).await?;
            let $c = &mut lease.conn;
            let res = tokio::time::timeout_at(deadline, $body).await;
            match pool.settle($op, lease, res, $idempotent && !retried) {
                Ok(Some(v)) => break Ok::<_, $crate::Error>(v),
                Ok(None) => retried = true,
                Err(e) => break Err(e),
            }
        }
    }};
}
pub(crate) use pool_call;

impl Pool {
    pub fn new(url: &NfsUrl, cfg: ClientConfig, cred: opaque_auth<'static>) -> Pool {
        Pool {
            host: url.host.clone(),
            port: url.nfs_port,
            addr: url.nfs_endpoint(),
            permits: Semaphore::new(cfg.connections.max(1)),
            cfg,
            cred,
            idle: Mutex::new(Vec::new()),
            raw_idle: Mutex::new(Vec::new()),
            v4_idle: Mutex::new(Vec::new()),
        }
    }

    /// Leases a connection of kind `C`: waits for a permit, then pops an idle one or
    /// connects, all before `deadline`.
    pub async fn checkout<C: Pooled>(
        &self,
        op: &'static str,
        deadline: Instant,
    ) -> Result<Lease<'_, C>, Error> {
        let permit = tokio::time::timeout_at(deadline, self.permits.acquire())
            .await
            .map_err(|_| self.timeout(op))?
            .expect("the pool semaphore is never closed");
        if let Some(conn) = C::idle(self).lock().pop() {
            return Ok(Lease {
                conn,
                reused: true,
                _permit: permit,
            });
        }
        let limit = deadline.min(Instant::now() + self.cfg.connect_timeout);
        let stream = connect_tcp(&self.host, self.port, limit).await?;
        Ok(Lease {
            conn: C::open(stream, self),
            reused: false,
            _permit: permit,
        })
    }

    /// Returns the connection to the pool or drops it; `Ok(None)` asks for a retry.
    pub fn settle<C: Pooled, T>(
        &self,
        op: &'static str,
        lease: Lease<'_, C>,
        res: Result<Result<T, RpcError>, tokio::time::error::Elapsed>,
        may_retry: bool,
    ) -> Result<Option<T>, Error> {
        match res {
            Ok(Ok(v)) => {
                C::idle(self).lock().push(lease.conn);
                Ok(Some(v))
            }
            Ok(Err(e)) if e.is_connection_reusable() => {
                // Decoding errors come after the whole record was read: the connection
                // is still at a message boundary.
                C::idle(self).lock().push(lease.conn);
                Err(Error::Rpc { op, source: e })
            }
            Ok(Err(e)) => {
                // The transport is dead; the server probably went away, so the idle
                // connections of every kind are dead too.
                self.idle.lock().clear();
                self.raw_idle.lock().clear();
                self.v4_idle.lock().clear();
                if lease.reused && may_retry {
                    tracing::debug!(op, addr = %self.addr, error = %e, "NFS connection lost, retrying on a new one");
                    return Ok(None);
                }
                let source = match e {
                    RpcError::Io(io) => io,
                    other => std::io::Error::other(other.to_string()),
                };
                Err(Error::ConnectionLost {
                    op,
                    addr: self.addr.clone(),
                    source,
                })
            }
            Err(_) => Err(self.timeout(op)),
        }
    }

    fn timeout(&self, op: &'static str) -> Error {
        Error::Timeout {
            op,
            addr: self.addr.clone(),
            after: self.cfg.call_timeout,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Client;

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
