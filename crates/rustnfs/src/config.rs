//! Validated server configuration, and the parsing of its boolean spellings (the
//! command line's other spellings are parsed in `cli`).

use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;

pub use crate::identity::Squash;

/// How one export is served. Build with [`Config::new`] and adjust the fields.
#[derive(Debug, Clone)]
pub struct Config {
    /// The directory exported as `/`; nothing outside it is reachable. Not used when
    /// `exports_file` is set.
    pub export: PathBuf,
    /// `--exports FILE`: the exports, their clients and options, from an exports(5)
    /// file (reloaded on SIGHUP) instead of `export`, `read_only`, `allow` and `squash`.
    pub exports_file: Option<PathBuf>,
    /// Refuse every change with `NFS3ERR_ROFS`.
    pub read_only: bool,
    /// Client networks allowed to connect; empty means everyone. Checked at accept.
    pub allow: Vec<IpNet>,
    /// How callers' identities map to the identity each call acts with
    /// ([`Squash::Root`] is the binary's default; [`Config::new`] leaves it
    /// [`Squash::None`] for embedders on loopback, such as the test harnesses).
    pub squash: Squash,
    /// Act as the caller (per-thread fsuid/fsgid/groups, see `identity`) when the
    /// process can; when it cannot, the server acts as itself and says so once.
    pub act_as_caller: bool,
    /// Let MKNOD create character and block devices (refused with `NFS3ERR_PERM`
    /// otherwise: a device node in an export is a way into the host).
    pub allow_device_nodes: bool,
    /// Serve NFS calls made with AUTH_NONE, as nobody (65534). Off: they get
    /// `AUTH_ERROR AUTH_TOOWEAK`, as from NFS-Ganesha with `SecType = sys` (an anonymous
    /// client could otherwise make files in every world-writable directory). The NULL
    /// procedure, MOUNT and the portmapper take AUTH_NONE either way: clients probe
    /// with it.
    pub allow_auth_none: bool,
    /// `--sync`: every WRITE reaches stable storage before its reply (FILE_SYNC), whatever
    /// the client asked; otherwise UNSTABLE writes are answered from the page cache and
    /// made stable by COMMIT (RFC 1813 §3.3.7).
    pub sync_writes: bool,
    /// `--rpcbind`: register NFS and MOUNT with the host's rpcbind while serving (the
    /// binary's `run`; `serve` registers nothing).
    pub register_rpcbind: bool,
    /// Connections served at once; at the cap the oldest idle one is closed to make
    /// room, and a newcomer is closed at accept only when none is idle.
    pub max_connections: usize,
    /// A connection that sends no request for this long is closed.
    pub idle_timeout: Duration,
    /// A request whose bytes do not all arrive within this time closes its connection.
    pub request_timeout: Duration,
    /// Largest RPC record accepted (all fragments together). WRITE carries up to 1 MiB.
    pub max_record: usize,
    /// Open files kept for READ/WRITE (an LRU of descriptors).
    pub fd_cache: usize,
    /// Bytes all connections together may buffer (records being received, READ replies
    /// being sent). A record that cannot get budget waits (up to `request_timeout`), then
    /// its connection is closed; one whose client resets meanwhile is dropped at once.
    /// At least `max_record`.
    pub max_buffer_bytes: usize,
    /// The NFSv4 lease: a client that renews nothing for this long loses its state.
    pub nfs4_lease: Duration,
}

impl Config {
    /// Defaults: read-write, everyone allowed, no squash, acting as the caller when the
    /// process can, no device nodes, AUTH_NONE refused, UNSTABLE writes honoured, 4096
    /// connections, 5 min idle.
    pub fn new(export: impl Into<PathBuf>) -> Self {
        Config {
            export: export.into(),
            exports_file: None,
            read_only: false,
            allow: Vec::new(),
            squash: Squash::None,
            act_as_caller: true,
            allow_device_nodes: false,
            allow_auth_none: false,
            sync_writes: false,
            register_rpcbind: false,
            max_connections: 4096,
            idle_timeout: Duration::from_secs(300),
            request_timeout: Duration::from_secs(30),
            max_record: (1 << 20) + 16 * 1024,
            fd_cache: 1024,
            max_buffer_bytes: 64 << 20,
            nfs4_lease: Duration::from_secs(90),
        }
    }

    /// Whether `ip` may connect.
    pub fn allows(&self, ip: std::net::IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.allow.is_empty() || self.allow.iter().any(|net| net.contains(&ip))
    }
}

/// Parses a boolean environment value the way the popular images do.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" | "y" => Ok(true),
        "" | "0" | "false" | "no" | "off" | "n" => Ok(false),
        _ => Err(format!(
            "{text:?} is not a boolean (true/false, 1/0, yes/no)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bools() {
        assert!(parse_bool("Yes").unwrap());
        assert!(!parse_bool("0").unwrap());
        assert!(parse_bool("maybe").is_err());
    }
}
