//! `--rpcbind`: registering NFS (v3, v4) and MOUNT (v3) on the server's TCP port with
//! the host's rpcbind, as NFS-Ganesha does, so that `showmount -e HOST` and a plain
//! `mount HOST:/path` (no `port=`, `mountport=`) find the server.
//!
//! Through rpcbind's local socket (`/run/rpcbind.sock`, where rpcbind knows the caller
//! by its uid and accepts its registrations) with rpcbind version 3's SET and UNSET.
//! Registration is all or nothing: a program rpcbind refuses (another NFS server —
//! kernel nfsd, Ganesha — registered it first) undoes the others and stops the start.
//! The registrations are removed at shutdown.

use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use oncrpc::msg::{OpaqueAuth, flavor};

use crate::rpc::{MOUNT_PROG, NFS_PROG};
use crate::rpcclient::{self, CallError, Client};

/// Where rpcbind listens for local callers.
pub const SOCKET: &str = "/run/rpcbind.sock";
const RPCBIND_PROG: u32 = 100_000;
const RPCBIND_VERS: u32 = 3;
const SET: u32 = 1;
const UNSET: u32 = 2;

/// What this server registers: (program, version).
const PROGRAMS: [(u32, u32, &str); 3] = [
    (NFS_PROG, 3, "NFS v3"),
    (NFS_PROG, 4, "NFS v4"),
    (MOUNT_PROG, 3, "MOUNT v3"),
];

/// Why the registration failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcbindError {
    #[error("--rpcbind: cannot reach rpcbind at {} (is rpcbind running?)", path.display())]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--rpcbind: rpcbind at {}", path.display())]
    Call { path: PathBuf, source: CallError },
    #[error(
        "--rpcbind: rpcbind refused to register {what} ({netid}): another server has it (`rpcinfo -p` lists them; stop that server, or run without --rpcbind and give clients port= and mountport=)"
    )]
    Refused {
        what: &'static str,
        netid: &'static str,
    },
}

/// The registrations made; [`Registration::remove`] takes them back.
#[derive(Debug)]
pub struct Registration {
    socket: PathBuf,
    made: Vec<(u32, u32, &'static str)>,
}

/// Registers every program on `listen`'s port (TCP; `tcp6` too when listening on IPv6)
/// with the rpcbind at `socket`.
pub fn register(socket: &Path, listen: SocketAddr) -> Result<Registration, RpcbindError> {
    let mut client = connect(socket)?;
    let (netids, port): (&[&'static str], u16) = match listen {
        SocketAddr::V4(a) => (&["tcp"], a.port()),
        SocketAddr::V6(a) => (&["tcp", "tcp6"], a.port()),
    };
    let mut reg = Registration {
        socket: socket.to_path_buf(),
        made: Vec::new(),
    };
    for (prog, vers, what) in PROGRAMS {
        for &netid in netids {
            match set(
                &mut client,
                SET,
                (prog, vers, netid),
                &universal(netid, port),
            ) {
                Ok(true) => reg.made.push((prog, vers, netid)),
                other => {
                    let _ = reg.remove_with(&mut client);
                    return Err(match other {
                        Ok(_) => RpcbindError::Refused { what, netid },
                        Err(source) => RpcbindError::Call {
                            path: socket.to_path_buf(),
                            source,
                        },
                    });
                }
            }
        }
    }
    Ok(reg)
}

impl Registration {
    /// Unregisters what was registered (at shutdown).
    pub fn remove(mut self) -> Result<(), RpcbindError> {
        let mut client = connect(&self.socket)?;
        self.remove_with(&mut client)
    }

    fn remove_with(&mut self, client: &mut Client<UnixStream>) -> Result<(), RpcbindError> {
        for (prog, vers, netid) in std::mem::take(&mut self.made) {
            set(client, UNSET, (prog, vers, netid), "").map_err(|source| RpcbindError::Call {
                path: self.socket.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

fn connect(socket: &Path) -> Result<Client<UnixStream>, RpcbindError> {
    let stream = UnixStream::connect(socket).map_err(|source| RpcbindError::Connect {
        path: socket.to_path_buf(),
        source,
    })?;
    let _ = stream.set_read_timeout(Some(rpcclient::TIMEOUT));
    let _ = stream.set_write_timeout(Some(rpcclient::TIMEOUT));
    Ok(Client::new(stream))
}

/// RPCBPROC_SET or UNSET of `rpcb { prog, vers, netid, addr, owner }`; rpcbind answers
/// a boolean. The owner is rpcbind's to fill in from the socket's credentials.
fn set(
    client: &mut Client<UnixStream>,
    proc_: u32,
    (prog, vers, netid): (u32, u32, &str),
    addr: &str,
) -> Result<bool, CallError> {
    let mut args = Vec::new();
    rpcclient::put_u32(&mut args, prog);
    rpcclient::put_u32(&mut args, vers);
    rpcclient::put_str(&mut args, netid);
    rpcclient::put_str(&mut args, addr);
    rpcclient::put_str(&mut args, "rustnfs");
    let body = rpcclient::auth_sys_body();
    let cred = OpaqueAuth {
        flavor: flavor::AUTH_SYS,
        body: &body,
    };
    let res = client.call((RPCBIND_PROG, RPCBIND_VERS, proc_), cred, &args)?;
    Ok(res.get(..4) == Some(&[0, 0, 0, 1][..]))
}

/// The universal address of every local address on `port` (RFC 5665): rpcbind answers
/// each client with the address it reached rpcbind on.
fn universal(netid: &str, port: u16) -> String {
    let host = if netid == "tcp6" { "::" } else { "0.0.0.0" };
    format!("{host}.{}.{}", port >> 8, port & 0xff)
}

#[cfg(test)]
mod tests {
    #[test]
    fn universal_addresses() {
        assert_eq!(super::universal("tcp", 2049), "0.0.0.0.8.1");
        assert_eq!(super::universal("tcp6", 20049), "::.78.81");
    }
}
