//! rustnfs: an instrumented userspace NFSv3 and NFSv4 (4.0, 4.1, 4.2) server that
//! exports real directories (one, or an exports(5) file's).
//!
//! # Layout
//! - [`config`]: the validated [`Config`] and parsing of its user-facing spellings.
//! - [`cli`]: flags and environment variables → [`cli::RunConfig`] (used by the binary).
//! - `guard`: the front door every client talks to (allowlist, connection cap,
//!   timeouts, bounded record marking, the RPC header checks); it answers READ (the
//!   procedure whose row says it has a data path) itself and hands every other
//!   admitted call to `nfs`.
//! - `nfs`: the NFSv3, MOUNT and portmapper procedures — bounded XDR decoding, a call
//!   to [`fs`], the reply built with `nfs3_types`, per-procedure timing; `nfs::procs`
//!   holds one row per procedure of every program (name, reply bound, handler,
//!   slow-call class), which the guard, the metrics and the dispatcher read.
//! - `nfs4`: NFSv4.0, 4.1 and 4.2 (program 100003 version 4) on the same port and file
//!   system: COMPOUND with its own bounded XDR, attributes, sessions, and the state of
//!   clients, opens and locks, capped per client, per address and in total (leases; no
//!   grace period, no delegations).
//! - [`fs`]: the exported directory — a jail resolved beneath fds, with restart-stable
//!   handles and an open-file LRU.
//! - [`exports`]: what is exported to whom (`--export`, or an exports(5) file), and the
//!   one door every protocol reaches an export's files through (handles name their
//!   export; NFSv4's pseudo-filesystem joins the exports).
//! - [`health`]: `--healthcheck`, an RPC NULL call to the running server.
//! - [`rpcbind`]: `--rpcbind`, registering with the host's rpcbind; [`showmount`]:
//!   `--showmount`, a server's export list (`rpcclient`: their blocking RPC client).
//! - [`identity`]: acting as the caller — squashing, and the per-thread file-system
//!   identity each change runs with.
//! - [`rpc`]: this server's programs and reply status labels (the wire format is the
//!   `oncrpc` crate's). `sys`: Linux call wrappers.
//! - [`serve_metrics`]: `/metrics` and `/metrics.json` (the `service` crate's endpoint,
//!   shared with httpd).
//!
//! Every call is read, bounded, checked, answered and timed on one path inside the
//! process, on its connection's task (see the README's design notes).

mod buffers;
pub mod cli;
pub mod config;
mod error;
pub mod exports;
pub mod fs;
#[doc(hidden)]
pub mod fuzzing;
mod guard;
pub mod health;
pub mod identity;
mod nfs;
mod nfs4;
pub mod rpc;
pub mod rpcbind;
mod rpcclient;
pub mod showmount;
mod status;
mod sys;

use std::sync::Arc;

use latency::Registry;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tracing::info;

pub use config::Config;
pub use error::{Error, with_causes};
pub use exports::{Exports, ExportsError, Reloaded};
pub use status::nfsstat_from_io;

/// Serves NFSv3, NFSv4 (4.0, 4.1, 4.2), MOUNT and portmap GETPORT on an already-bound `listener` until `shutdown`
/// resolves, recording every call into `registry` (op = procedure, phase `total` for the
/// whole RPC and `vfs` for the file-system work, status `ok` or the error name).
/// On shutdown it stops accepting and lets connections finish their calls (bounded).
pub async fn serve(
    listener: TcpListener,
    config: Config,
    registry: Arc<Registry>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    check_identity(&config)?;
    let exports = Exports::open(&config, registry.clone())?;
    serve_exports(listener, exports, config, registry, shutdown).await
}

/// [`serve`] with the exports already open (the binary opens them first, to refuse a
/// bad exports file before binding anything, and reloads them on SIGHUP).
pub async fn serve_exports(
    listener: TcpListener,
    exports: Exports,
    config: Config,
    registry: Arc<Registry>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let fs = exports;
    let local = listener.local_addr()?;
    let acts_as_caller = config.act_as_caller && identity::capability().is_ok();
    match fs.file() {
        None => info!(
            listen = %local,
            export = %config.export.display(),
            read_only = config.read_only,
            squash = ?config.squash,
            acts_as_caller,
            sync = config.sync_writes,
            "serving NFSv3 and NFSv4.0-4.2 (v3: mount with port={p},mountport={p}; v4: host:/, port={p})",
            p = local.port()
        ),
        Some(file) => {
            info!(
                listen = %local,
                exports = %file.display(),
                acts_as_caller,
                sync = config.sync_writes,
                "serving NFSv3 and NFSv4.0-4.2 (v3: mount host:PATH with port={p},mountport={p}; v4: host:/PATH, port={p})",
                p = local.port()
            );
            for line in fs.describe() {
                info!("export {line}");
            }
        }
    }
    let max = config.max_connections.max(1);
    // Never below one whole record, or that record could never be read.
    let budget = oncrpc::Budget::new(config.max_buffer_bytes.max(2 * config.max_record));
    let permits = Arc::new(Semaphore::new(max));
    let (stop_tx, stopping) = watch::channel(false);
    let nfs = nfs::Dispatcher::new(fs.clone(), registry.clone(), local.port()).with_nfs4(
        nfs4::Settings {
            lease: config.nfs4_lease,
            limits: Default::default(),
        },
    );
    let guard = Arc::new(guard::Guard {
        config: Arc::new(config),
        fs,
        registry,
        nfs,
        permits: permits.clone(),
        stopping,
        buffers: buffers::ReplyBuffers::new(budget.clone()),
        budget,
        closed: Default::default(),
        slots: Default::default(),
        slow_calls: Semaphore::new(guard::SLOW_CALLS_AT_ONCE),
        bulk: guard::BulkLane::start(),
    });
    guard::accept_loop(listener, guard, shutdown).await;
    info!("shutting down: finishing calls in flight");
    let _ = stop_tx.send(true);
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        permits.acquire_many(all),
    )
    .await;
    Ok(())
}

/// Says once, in one line, when the export cannot act as its callers (and serves as
/// itself), and refuses a `--squash` to another identity that could then not be kept:
/// files would be created as the server and left half-made when the chown fails.
fn check_identity(config: &Config) -> Result<(), Error> {
    if !config.act_as_caller {
        return Ok(());
    }
    refuse_squash(config)?;
    let Err(why) = identity::capability() else {
        return Ok(());
    };
    // SAFETY: plain queries of this process's identity.
    let own = unsafe { (libc::geteuid(), libc::getegid()) };
    tracing::warn!(
        "cannot act as the caller ({}): serving as uid {}, the clients check permissions",
        error::with_causes(why),
        own.0
    );
    Ok(())
}

/// The start-up refusal of [`check_identity`] alone (the binary makes it before it
/// binds anything, so the refusal is its one line).
fn refuse_squash(config: &Config) -> Result<(), Error> {
    let Err(why) = identity::capability() else {
        return Ok(());
    };
    // SAFETY: plain queries of this process's identity.
    let own = unsafe { (libc::geteuid(), libc::getegid()) };
    if config.act_as_caller
        && let identity::Squash::All(uid, gid) = config.squash
        && (uid, gid) != own
    {
        return Err(Error::SquashNeedsIdentity {
            uid,
            gid,
            own_uid: own.0,
            own_gid: own.1,
            source: why,
        });
    }
    Ok(())
}

/// Serves `/metrics` and `/metrics.json` from `registry` on `listener` until `shutdown`
/// resolves (the endpoint httpd serves too: capped, one request per connection).
pub async fn serve_metrics(
    listener: TcpListener,
    registry: Arc<Registry>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let limits = service::metrics::Limits::default();
    Ok(service::metrics::serve(listener, registry, limits, shutdown).await?)
}

/// Runs the server as the binary does: opens the exports (an exports file that cannot
/// be served is refused before anything is bound), binds, serves (and metrics), reloads
/// the exports file on SIGHUP, waits for SIGINT or SIGTERM, then prints the
/// per-procedure summary table.
pub async fn run(rc: cli::RunConfig) -> Result<(), Error> {
    refuse_squash(&rc.server)?;
    match raise_nofile_limit() {
        Ok(n) => tracing::debug!("open-file limit {n}"),
        Err(e) => tracing::warn!("cannot raise the open-file limit: {e}"),
    }
    check_identity(&rc.server)?;
    let bind = async |flag, addr| {
        let l = TcpListener::bind(addr).await;
        l.map_err(|source| Error::Bind { flag, addr, source })
    };
    let registry = Registry::new("rustnfs_nfs");
    let exports = Exports::open(&rc.server, registry.clone())?;
    let listener = bind("--listen", rc.listen).await?;
    let stop = service::Stop::new();
    stop.on_signal();
    if exports.file().is_some() {
        reload_on_hangup(exports.clone())?;
    }
    let registered = if rc.server.register_rpcbind {
        let at = listener.local_addr()?;
        let socket = std::path::Path::new(rpcbind::SOCKET);
        let reg = tokio::task::block_in_place(|| rpcbind::register(socket, at))?;
        info!(
            "registered NFS v3, v4 and MOUNT v3 on port {} with rpcbind",
            at.port()
        );
        Some(reg)
    } else {
        None
    };
    let metrics = match rc.metrics {
        Some(addr) => {
            let l = bind("--metrics", addr).await?;
            info!(addr = %l.local_addr()?, "metrics on /metrics and /metrics.json");
            Some(tokio::spawn(serve_metrics(
                l,
                registry.clone(),
                stop.stopped(),
            )))
        }
        None => None,
    };
    let result = serve_exports(
        listener,
        exports,
        rc.server,
        registry.clone(),
        stop.stopped(),
    )
    .await;
    // Also when serving failed at start: no signal would come to end the metrics.
    stop.stop();
    if let Some(reg) = registered
        && let Err(e) = tokio::task::block_in_place(|| reg.remove())
    {
        tracing::warn!("{}", with_causes(&e));
    }
    if let Some(m) = metrics {
        let _ = m.await;
    }
    println!(
        "rustnfs: per-procedure summary\n{}",
        latency::table::render(&registry.snapshot())
    );
    result
}

/// Reads the exports file again at every SIGHUP (off the runtime's workers: directories
/// are opened and host names resolved), and serves it — or says in one line why not
/// and keeps serving the exports it had.
fn reload_on_hangup(exports: Exports) -> Result<(), Error> {
    let mut hangups = service::Hangups::install()?;
    tokio::spawn(async move {
        loop {
            hangups.recv().await;
            let ex = exports.clone();
            match tokio::task::spawn_blocking(move || ex.reload()).await {
                Ok(Ok(r)) => {
                    info!(
                        added = ?r.added,
                        removed = ?r.removed,
                        changed = ?r.changed,
                        unchanged = r.unchanged.len(),
                        "SIGHUP: exports reloaded"
                    );
                    for line in exports.describe() {
                        info!("export {line}");
                    }
                }
                Ok(Err(e)) => tracing::error!(
                    "SIGHUP: exports not reloaded, still serving the previous ones: {}",
                    service::Chain(&e)
                ),
                Err(e) => tracing::error!("SIGHUP: the reload failed: {e}"),
            }
        }
    });
    Ok(())
}

/// Raises this process's soft open-file limit to its hard limit and returns the new soft
/// limit: each client connection is a descriptor, and the open-file cache holds up to
/// 1024 more. [`run`] calls it; embedders serving many clients should too.
pub fn raise_nofile_limit() -> std::io::Result<u64> {
    sys::raise_nofile_limit()
}
