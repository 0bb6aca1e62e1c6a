//! A bare NFSv3 client for the crash and fault tests: one connection, one call at a time,
//! and everything a WRITE or COMMIT reply says (stability level, write verifier), which
//! the pooled `nfsclient` deliberately hides.

use std::net::SocketAddr;
use std::time::Duration;

use nfs3_client::nfs3_types::mount::dirpath;
use nfs3_client::nfs3_types::nfs3::{
    COMMIT3args, CREATE3args, GETATTR3args, LOOKUP3args, Nfs3Option, Nfs3Result, READ3args,
    WRITE3args, createhow3, diropargs3, filename3, nfs_fh3, nfsstat3, sattr3, stable_how,
};
use nfs3_client::nfs3_types::rpc::{auth_unix, opaque_auth};
use nfs3_client::nfs3_types::xdr_codec::Opaque;
use nfs3_client::tokio::TokioIo;
use nfs3_client::{MountClient, Nfs3Client};
use tokio::net::TcpStream;

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// The server answered with an NFS error status.
    Status(nfsstat3),
    /// No reply: connection refused, broken or timed out, or an RPC-level error.
    Transport(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Status(s) => write!(f, "{s:?}"),
            CallError::Transport(e) => write!(f, "{e}"),
        }
    }
}

type R<T> = Result<T, CallError>;

/// A mounted export over one TCP connection (MOUNT and NFS on the same port).
pub struct Conn {
    nfs: Nfs3Client<TokioIo<TcpStream>>,
    pub root: nfs_fh3,
    timeout: Duration,
}

/// What a WRITE reply says.
#[derive(Debug, Clone, Copy)]
pub struct WriteReply {
    pub count: u32,
    pub committed: stable_how,
    pub verf: [u8; 8],
}

/// AUTH_SYS as `uid`/`gid` (and only that group).
fn cred(uid: u32, gid: u32) -> opaque_auth<'static> {
    opaque_auth::auth_unix(&auth_unix {
        stamp: 0,
        machinename: Opaque::owned(b"servelab-test".to_vec()),
        uid,
        gid,
        gids: vec![gid],
    })
}

fn transport(e: impl std::fmt::Debug) -> CallError {
    CallError::Transport(format!("{e:?}"))
}

impl Conn {
    /// MOUNTs `export` on `addr` and opens the NFS connection; each call is bounded by
    /// `timeout`.
    pub async fn connect(addr: SocketAddr, export: &str, timeout: Duration) -> R<Conn> {
        Conn::connect_as(addr, export, (0, 0), timeout).await
    }

    /// [`Conn::connect`] with calls made as `(uid, gid)`.
    pub async fn connect_as(
        addr: SocketAddr,
        export: &str,
        (uid, gid): (u32, u32),
        timeout: Duration,
    ) -> R<Conn> {
        let t = |f| tokio::time::timeout(timeout, f);
        let ms = t(TcpStream::connect(addr))
            .await
            .map_err(transport)?
            .map_err(transport)?;
        let mut mc =
            MountClient::new_with_auth(TokioIo::new(ms), cred(uid, gid), opaque_auth::default());
        let ok = tokio::time::timeout(
            timeout,
            mc.mnt(dirpath(Opaque::borrowed(export.as_bytes()))),
        )
        .await
        .map_err(transport)?
        .map_err(transport)?;
        let root = nfs_fh3 {
            data: Opaque::owned(ok.fhandle.0.into_owned()),
        };
        let ns = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(transport)?
            .map_err(transport)?;
        let nfs =
            Nfs3Client::new_with_auth(TokioIo::new(ns), cred(uid, gid), opaque_auth::default());
        Ok(Conn { nfs, root, timeout })
    }

    async fn bounded<T, E: std::fmt::Debug>(
        timeout: Duration,
        f: impl Future<Output = Result<T, E>>,
    ) -> R<T> {
        tokio::time::timeout(timeout, f)
            .await
            .map_err(|_| CallError::Transport(format!("no reply within {timeout:?}")))?
            .map_err(transport)
    }

    /// CREATE (UNCHECKED, mode 0644) of `name` in `dir`; returns the handle.
    pub async fn create(&mut self, dir: &nfs_fh3, name: &str) -> R<nfs_fh3> {
        let args = CREATE3args {
            where_: diropargs3 {
                dir: dir.clone(),
                name: filename3(Opaque::borrowed(name.as_bytes())),
            },
            how: createhow3::UNCHECKED(sattr3 {
                mode: Nfs3Option::Some(0o644),
                ..sattr3::default()
            }),
        };
        match Self::bounded(self.timeout, self.nfs.create(&args)).await? {
            Nfs3Result::Ok(ok) => match ok.obj {
                Nfs3Option::Some(fh) => Ok(fh),
                Nfs3Option::None => self.lookup(dir, name).await,
            },
            Nfs3Result::Err((s, _)) => Err(CallError::Status(s)),
        }
    }

    pub async fn lookup(&mut self, dir: &nfs_fh3, name: &str) -> R<nfs_fh3> {
        let args = LOOKUP3args {
            what: diropargs3 {
                dir: dir.clone(),
                name: filename3(Opaque::borrowed(name.as_bytes())),
            },
        };
        match Self::bounded(self.timeout, self.nfs.lookup(&args)).await? {
            Nfs3Result::Ok(ok) => Ok(ok.object),
            Nfs3Result::Err((s, _)) => Err(CallError::Status(s)),
        }
    }

    pub async fn size(&mut self, fh: &nfs_fh3) -> R<u64> {
        let args = GETATTR3args { object: fh.clone() };
        match Self::bounded(self.timeout, self.nfs.getattr(&args)).await? {
            Nfs3Result::Ok(ok) => Ok(ok.obj_attributes.size),
            Nfs3Result::Err((s, _)) => Err(CallError::Status(s)),
        }
    }

    pub async fn write(
        &mut self,
        fh: &nfs_fh3,
        offset: u64,
        data: &[u8],
        stable: stable_how,
    ) -> R<WriteReply> {
        let args = WRITE3args {
            file: fh.clone(),
            offset,
            count: data.len() as u32,
            stable,
            data: Opaque::borrowed(data),
        };
        match Self::bounded(self.timeout, self.nfs.write(&args)).await? {
            Nfs3Result::Ok(ok) => Ok(WriteReply {
                count: ok.count,
                committed: ok.committed,
                verf: ok.verf.0,
            }),
            Nfs3Result::Err((s, _)) => Err(CallError::Status(s)),
        }
    }

    /// COMMIT of the whole file; returns the write verifier.
    pub async fn commit(&mut self, fh: &nfs_fh3) -> R<[u8; 8]> {
        let args = COMMIT3args {
            file: fh.clone(),
            offset: 0,
            count: 0,
        };
        match Self::bounded(self.timeout, self.nfs.commit(&args)).await? {
            Nfs3Result::Ok(ok) => Ok(ok.verf.0),
            Nfs3Result::Err((s, _)) => Err(CallError::Status(s)),
        }
    }

    /// READ of up to `len` bytes at `offset` (several calls when needed, stops at EOF).
    pub async fn read(&mut self, fh: &nfs_fh3, offset: u64, len: usize) -> R<Vec<u8>> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let want = (len - out.len()).min(1 << 20) as u32;
            let args = READ3args {
                file: fh.clone(),
                offset: offset + out.len() as u64,
                count: want,
            };
            match Self::bounded(self.timeout, self.nfs.read(&args)).await? {
                Nfs3Result::Ok(ok) => {
                    out.extend_from_slice(&ok.data);
                    if ok.eof || ok.data.is_empty() {
                        break;
                    }
                }
                Nfs3Result::Err((s, _)) => return Err(CallError::Status(s)),
            }
        }
        Ok(out)
    }
}
