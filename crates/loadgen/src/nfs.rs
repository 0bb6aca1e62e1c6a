//! The NFS target, in whichever version the URL names (v3, 4.0, 4.1, 4.2): every worker
//! mounts (v3) or sets up its lease and session (v4) with its own `nfsclient::Client` (one
//! connection), then reads a file sequentially, writes a file of its own, or runs a
//! bonnie++ -n style metadata mix; each operation is recorded under its own name (over
//! v4, CREATE is the OPEN with create and its CLOSE that `touch` sends).
//!
//! The write workload writes UNSTABLE and COMMITs each file at its end (every
//! [`WRITE_FILE`] bytes, and what is left when the run ends), as the kernel client does
//! on close, so a server pays for durability in the figure whether it honours UNSTABLE
//! or syncs every WRITE. COMMIT ops carry the bytes they made stable (the report's
//! "Bytes committed"); a verifier that changed between a file's WRITEs and its COMMIT
//! (the server restarted and lost them) counts the COMMIT as failed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nfsclient::nfs3_types::nfs3::stable_how;
use nfsclient::{Client, ClientConfig, FileHandle, FileKind, NfsUrl};
use parking_lot::Mutex;

use crate::plan::{LoadPlan, NfsWorkload};
use crate::sample::{ErrorKind, Instants, OpError, OpOk};
use crate::worker::{Target, Worker};

/// A write workload's file is this long: at its end it is COMMITted and written again
/// from offset 0, so a long run does not fill the server's disk.
const WRITE_FILE: u64 = 64 << 20;

pub(crate) struct NfsTarget {
    url: NfsUrl,
    workload: NfsWorkload,
    block: u32,
    verify: Option<u32>,
    files: u64,
    timeout: Duration,
    /// The CRC-32 of the first complete pass over the file (read workload).
    first_crc: Mutex<Option<u32>>,
}

impl NfsTarget {
    pub fn new(url: &str, plan: &LoadPlan) -> Result<Self, crate::Error> {
        let url = NfsUrl::parse(url).map_err(|e| crate::Error::Url {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        let block = u32::try_from(plan.options.block_size)
            .ok()
            .filter(|&b| b <= 1 << 20)
            .ok_or_else(|| crate::Error::Plan("--nfs-block must be at most 1 MiB".into()))?;
        Ok(NfsTarget {
            url,
            workload: plan.options.nfs_workload,
            block,
            verify: plan.options.verify_crc32,
            files: plan.options.nfs_files.max(1),
            timeout: plan.options.timeout,
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

    /// Looks the URL's path up once before any worker starts: a path that does not exist
    /// on the export ends the run here, with that message, instead of failing every
    /// operation. A server that cannot be reached is left to the run (its failures are
    /// what it measures).
    pub fn preflight(&self) -> Result<(), crate::Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(crate::Error::Runtime)?;
        let cfg = ClientConfig {
            connections: 1,
            call_timeout: self.timeout,
            connect_timeout: self.timeout.min(Duration::from_secs(5)),
        };
        rt.block_on(async {
            let Ok(client) = Client::connect(&self.url, cfg).await else {
                return Ok(());
            };
            let found = client.lookup_path(client.path()).await;
            let _ = client.close().await;
            match found {
                Err(e) if e.is_not_found() => Err(crate::Error::NoSuchFile {
                    path: client.url().full_path(),
                    source: e,
                }),
                _ => Ok(()),
            }
        })
    }
}

fn op_error(op: &'static str, e: &nfsclient::Error) -> OpError {
    use nfsclient::Error as E;
    let kind = match e {
        E::Unreachable { .. } => ErrorKind::Connect,
        E::Timeout { .. } => ErrorKind::Timeout,
        E::ConnectionLost { .. } => ErrorKind::Reset,
        E::Status { .. }
        | E::Status4 { .. }
        | E::MountDenied { .. }
        | E::BadPath { .. }
        | E::BadUrl { .. } => ErrorKind::Server,
        E::Rpc { .. } | E::Protocol { .. } | E::Decode { .. } => ErrorKind::Malformed,
    };
    OpError::new(op, kind, e.to_string())
}

/// What each workload keeps between operations.
enum State {
    Read {
        fh: FileHandle,
        offset: u64,
        crc: crc32fast::Hasher,
    },
    Write {
        dir: FileHandle,
        name: String,
        fh: FileHandle,
        offset: u64,
        data: Vec<u8>,
        /// Bytes written since the last COMMIT.
        uncommitted: u64,
        /// The verifier of the first WRITE since the last COMMIT.
        verf: Option<[u8; 8]>,
    },
    Metadata {
        dir: FileHandle,
        step: u64,
        handles: Vec<Option<FileHandle>>,
    },
}

pub(crate) struct NfsWorker {
    target: Arc<NfsTarget>,
    client: Client,
    id: usize,
    state: State,
}

impl Target for Arc<NfsTarget> {
    type Worker = NfsWorker;

    fn default_op(&self) -> &'static str {
        match self.workload {
            NfsWorkload::Read => "READ",
            NfsWorkload::Write => "WRITE",
            NfsWorkload::Metadata => "CREATE",
        }
    }

    async fn worker(&self, id: usize, inst: &mut Instants) -> Result<NfsWorker, OpError> {
        let cfg = ClientConfig {
            connections: 1,
            call_timeout: self.timeout,
            connect_timeout: self.timeout.min(Duration::from_secs(5)),
        };
        let client = Client::connect(&self.url, cfg)
            .await
            .map_err(|e| op_error("MOUNT", &e))?;
        inst.connected = Some(Instant::now());
        let path = client.path().to_string();
        let (fh, attr) = client
            .lookup_path(&path)
            .await
            .map_err(|e| op_error("LOOKUP", &e))?;
        let state = match self.workload {
            NfsWorkload::Read => {
                if attr.kind != FileKind::File {
                    return Err(OpError::new(
                        "LOOKUP",
                        ErrorKind::Server,
                        format!("{path:?} is not a regular file (the read workload reads one)"),
                    ));
                }
                State::Read {
                    fh,
                    offset: 0,
                    crc: crc32fast::Hasher::new(),
                }
            }
            NfsWorkload::Write | NfsWorkload::Metadata => {
                if attr.kind != FileKind::Dir {
                    return Err(OpError::new(
                        "LOOKUP",
                        ErrorKind::Server,
                        format!("{path:?} is not a directory (write/metadata create files in one)"),
                    ));
                }
                if self.workload == NfsWorkload::Write {
                    let name = format!("servelab-load-{}-w{id}.bin", std::process::id());
                    let (file, _) = client
                        .create(&fh, &name, 0o644)
                        .await
                        .map_err(|e| op_error("CREATE", &e))?;
                    let data = (0..self.block as usize)
                        .map(|i| (i * 31 % 251) as u8)
                        .collect();
                    State::Write {
                        dir: fh,
                        name,
                        fh: file,
                        offset: 0,
                        data,
                        uncommitted: 0,
                        verf: None,
                    }
                } else {
                    State::Metadata {
                        dir: fh,
                        step: 0,
                        handles: vec![None; self.files as usize],
                    }
                }
            }
        };
        Ok(NfsWorker {
            target: self.clone(),
            client,
            id,
            state,
        })
    }
}

/// COMMITs the file and reports the bytes it made stable; a verifier other than the
/// WRITEs' means the server restarted in between and those bytes were lost.
async fn commit(
    client: &Client,
    fh: &FileHandle,
    uncommitted: &mut u64,
    verf: &mut Option<[u8; 8]>,
) -> Result<OpOk, OpError> {
    let now = client
        .commit(fh)
        .await
        .map_err(|e| op_error("COMMIT", &e))?;
    let lost = verf.is_some_and(|v| v != now);
    let bytes = std::mem::take(uncommitted);
    *verf = None;
    Ok(OpOk {
        op: "COMMIT",
        committed_bytes: if lost { 0 } else { bytes },
        failure: lost.then_some(ErrorKind::Server),
        ..OpOk::default()
    })
}

impl NfsWorker {
    fn meta_name(&self, i: u64) -> String {
        format!("servelab-meta-{}-{}-{i}", std::process::id(), self.id)
    }
}

impl Worker for NfsWorker {
    async fn op(&mut self, inst: &mut Instants) -> Result<OpOk, OpError> {
        let block = self.target.block;
        let files = self.target.files;
        match &mut self.state {
            State::Read { fh, offset, crc } => {
                let reply = self
                    .client
                    .read(fh, *offset, block)
                    .await
                    .map_err(|e| op_error("READ", &e))?;
                inst.first_byte = Some(Instant::now());
                let n = reply.data.len() as u64;
                crc.update(&reply.data);
                *offset += n;
                let mut failure = None;
                if reply.eof || n == 0 {
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
            State::Write {
                fh,
                offset,
                data,
                uncommitted,
                verf,
                ..
            } => {
                if *offset >= WRITE_FILE {
                    // The file's end: COMMIT it (as close does), then write it again.
                    *offset = 0;
                    let r = commit(&self.client, fh, uncommitted, verf).await;
                    inst.first_byte = Some(Instant::now());
                    return r;
                }
                let w = self
                    .client
                    .write_stable(fh, *offset, data, stable_how::UNSTABLE)
                    .await
                    .map_err(|e| op_error("WRITE", &e))?;
                inst.first_byte = Some(Instant::now());
                let n = w.count;
                *offset += u64::from(n);
                if w.committed == stable_how::UNSTABLE {
                    *uncommitted += u64::from(n);
                    verf.get_or_insert(w.verf);
                }
                Ok(OpOk {
                    op: "WRITE",
                    body_bytes: u64::from(n),
                    wire_bytes: u64::from(n),
                    failure: (n as usize != data.len()).then_some(ErrorKind::Length),
                    ..OpOk::default()
                })
            }
            State::Metadata { step, .. } => {
                // Create every file, stat every file, remove every file, again.
                let s = *step;
                *step += 1;
                let file = s % files;
                let name = self.meta_name(file);
                let State::Metadata { dir, handles, .. } = &mut self.state else {
                    unreachable!("matched above");
                };
                let op = match (s / files) % 3 {
                    0 => {
                        let (fh, _) = self
                            .client
                            .create(dir, &name, 0o644)
                            .await
                            .map_err(|e| op_error("CREATE", &e))?;
                        handles[file as usize] = Some(fh);
                        "CREATE"
                    }
                    1 => {
                        let fh = handles[file as usize].clone().ok_or_else(|| {
                            OpError::new("GETATTR", ErrorKind::Server, "file was not created")
                        })?;
                        self.client
                            .getattr(&fh)
                            .await
                            .map_err(|e| op_error("GETATTR", &e))?;
                        "GETATTR"
                    }
                    _ => {
                        handles[file as usize] = None;
                        self.client
                            .remove(dir, &name)
                            .await
                            .map_err(|e| op_error("REMOVE", &e))?;
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
        let r = self.clean_up().await;
        // An NFSv4.1+ session and client id end here, not with their lease.
        let _ = self.client.close().await;
        r
    }
}

impl NfsWorker {
    /// Leaves the export as it was: removes what this worker created (after the COMMIT of
    /// what the last written file holds uncommitted, which is counted).
    async fn clean_up(&mut self) -> Option<Result<OpOk, OpError>> {
        match &self.state {
            State::Read { .. } => None,
            State::Write {
                dir,
                name,
                fh,
                uncommitted,
                verf,
                ..
            } => {
                // The last file's end: what it holds uncommitted is COMMITted and counted.
                let (mut left, mut v) = (*uncommitted, *verf);
                let r = (left > 0).then_some(());
                let r = match r {
                    Some(()) => Some(commit(&self.client, &fh.clone(), &mut left, &mut v).await),
                    None => None,
                };
                let _ = self.client.remove(dir, name).await;
                r
            }
            State::Metadata { dir, handles, .. } => {
                for (i, h) in handles.iter().enumerate() {
                    if h.is_some() {
                        let _ = self.client.remove(dir, &self.meta_name(i as u64)).await;
                    }
                }
                None
            }
        }
    }
}
