//! `rustnfs --showmount [HOST[:PORT]]`: a server's export list (MOUNT's EXPORT), printed
//! as `showmount -e` prints it. The project's own client for it: it calls MOUNT on the
//! NFS port itself, so it needs neither rpcbind on the server nor nfs-common here.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};

use nfs3_types::mount::exports;
use nfs3_types::xdr_codec::Unpack;
use oncrpc::msg::{OpaqueAuth, flavor};

use crate::rpc::MOUNT_PROG;
use crate::rpcclient::{self, CallError, Client};

/// The port asked when HOST names none.
pub const DEFAULT_PORT: u16 = 2049;

/// Why no list came back.
#[derive(Debug, thiserror::Error)]
pub enum ShowmountError {
    #[error("--showmount {0}: not HOST or HOST:PORT")]
    Target(String),
    #[error("--showmount {target}: cannot resolve it")]
    Resolve {
        target: String,
        source: std::io::Error,
    },
    #[error("--showmount {addr}: cannot connect")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("--showmount {addr}: MOUNT EXPORT")]
    Call { addr: SocketAddr, source: CallError },
    #[error("--showmount {addr}: the export list does not decode")]
    Decode { addr: SocketAddr },
}

/// One export: its path and its clients (empty: everyone).
pub type Listed = (String, Vec<String>);

/// The address `--showmount` asks: `target` (`HOST`, `HOST:PORT`, `[V6]:PORT`), or the
/// server at `listen` when empty (`0.0.0.0` and `[::]` on loopback).
pub fn target(text: &str, listen: SocketAddr) -> Result<SocketAddr, ShowmountError> {
    if text.is_empty() {
        return Ok(crate::health::probe_addr(listen));
    }
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(a);
    }
    let with_port = if text.contains(':') && !text.contains("::") {
        text.to_string()
    } else if text.contains("::") {
        format!("[{text}]:{DEFAULT_PORT}")
    } else {
        format!("{text}:{DEFAULT_PORT}")
    };
    with_port
        .to_socket_addrs()
        .map_err(|source| ShowmountError::Resolve {
            target: text.to_string(),
            source,
        })?
        .next()
        .ok_or_else(|| ShowmountError::Target(text.to_string()))
}

/// MOUNT v3 EXPORT at `addr`.
pub fn list(addr: SocketAddr) -> Result<Vec<Listed>, ShowmountError> {
    let stream = TcpStream::connect_timeout(&addr, rpcclient::TIMEOUT)
        .map_err(|source| ShowmountError::Connect { addr, source })?;
    let _ = stream.set_read_timeout(Some(rpcclient::TIMEOUT));
    let _ = stream.set_write_timeout(Some(rpcclient::TIMEOUT));
    let body = rpcclient::auth_sys_body();
    let cred = OpaqueAuth {
        flavor: flavor::AUTH_SYS,
        body: &body,
    };
    let res = Client::new(stream)
        .call((MOUNT_PROG, 3, 5), cred, &[])
        .map_err(|source| ShowmountError::Call { addr, source })?;
    let (list, _) = exports::unpack(&mut std::io::Cursor::new(&res[..]))
        .map_err(|_| ShowmountError::Decode { addr })?;
    Ok(list
        .0
        .into_iter()
        .map(|e| {
            let dir = String::from_utf8_lossy(e.ex_dir.0.as_ref()).into_owned();
            let groups = e
                .ex_groups
                .0
                .into_iter()
                .map(|g| String::from_utf8_lossy(g.0.as_ref()).into_owned())
                .collect();
            (dir, groups)
        })
        .collect())
}

/// The list as `showmount -e` prints it: a header, then each path (padded to the
/// longest) and its clients joined by commas, `(everyone)` for none.
pub fn render(host: &str, list: &[Listed]) -> String {
    let width = list.iter().map(|(d, _)| d.len()).max().unwrap_or(0);
    let mut out = format!("Export list for {host}:\n");
    for (dir, groups) in list {
        let who = if groups.is_empty() {
            "(everyone)".to_string()
        } else {
            groups.join(",")
        };
        out.push_str(&format!("{dir:<width$} {who}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_rendering() {
        let listen: SocketAddr = "0.0.0.0:2049".parse().unwrap();
        assert_eq!(
            target("", listen).unwrap(),
            "127.0.0.1:2049".parse().unwrap()
        );
        assert_eq!(
            target("10.0.0.5", listen).unwrap(),
            "10.0.0.5:2049".parse().unwrap()
        );
        assert_eq!(
            target("10.0.0.5:20049", listen).unwrap(),
            "10.0.0.5:20049".parse().unwrap()
        );
        assert_eq!(
            target("::1", listen).unwrap(),
            "[::1]:2049".parse().unwrap()
        );
        assert_eq!(target("localhost:7", listen).unwrap().port(), 7);
        let list = vec![
            (
                "/srv/media".to_string(),
                vec!["192.168.1.0/24".into(), "nas.lan".into()],
            ),
            ("/srv/b".to_string(), vec![]),
        ];
        assert_eq!(
            render("nas", &list),
            "Export list for nas:\n/srv/media 192.168.1.0/24,nas.lan\n/srv/b     (everyone)\n"
        );
    }
}
