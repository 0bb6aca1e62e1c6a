//! `nfs://` URLs: host, ports, export and the path inside the export.
//!
//! Accepted forms (the libnfs conventions, so URLs work with `nfs-cat` and friends too):
//! - `nfs://HOST[:PORT]/EXPORT` — the whole path is the export (`/srv/share`), no path.
//! - `nfs://HOST[:PORT]/EXPORT//PATH` — a `//` separates the export from the path inside
//!   it: `nfs://h/srv/share//dir/f.bin` is export `/srv/share`, path `dir/f.bin`;
//!   `nfs://h//f.bin` is export `/`, path `f.bin`.
//! - Query parameters: `version=3|4.0|4.1|4.2|auto` (`4` is 4.0; default 3; `auto`
//!   negotiates newest first, as a kernel mount does), `nfsport=N`, `mountport=N`,
//!   `uid=N`, `gid=N` (the AUTH_UNIX identity; default: this process's).
//!
//! HOST is an IPv4 address, a bracketed IPv6 literal (`[::1]`), `localhost` (127.0.0.1)
//! or a host name (`rustnfs`, `nfs.example.org`): a name is kept as given and resolved
//! each time the client opens a connection, so a server that comes back on a new address
//! (a restarted container) is found again. Ports: `:PORT` or `nfsport` sets the NFS port; the MOUNT port defaults to
//! the NFS port (a server such as rustnfs answers both on one port); with neither given
//! both are 2049. NFS-Ganesha listens for MOUNT on its own port: give `mountport`.
//!
//! Without `//`, [`NfsUrl::export_is_explicit`] is false and [`crate::Client::connect`]
//! tries the whole path as the export, then each parent, like libnfs does, so
//! `nfs://h/srv/share/dir/f.bin` finds export `/srv/share` and path `dir/f.bin`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

use crate::Error;
use crate::version::NfsVersion;

/// The default NFS (and MOUNT) port when the URL gives none.
pub const DEFAULT_PORT: u16 = 2049;

/// The server part of an `nfs://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// An address literal (`localhost` is parsed as 127.0.0.1).
    Ip(IpAddr),
    /// A host name, resolved at connect time (`tokio::net::lookup_host`).
    Name(String),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Ip(ip) => ip.fmt(f),
            Host::Name(n) => f.write_str(n),
        }
    }
}

/// A parsed `nfs://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NfsUrl {
    /// The server: an address, or a name resolved on every new connection.
    pub host: Host,
    /// Port of the NFS program.
    pub nfs_port: u16,
    /// Port of the MOUNT program.
    pub mount_port: u16,
    /// The export to MOUNT, absolute (`/srv/share`, or `/`).
    pub export: String,
    /// The path inside the export, without leading `/` (empty for the export root).
    pub path: String,
    /// True when the split between export and path was given (`//`) or set with
    /// [`NfsUrl::with_export`]; false when the whole path is a guess at the export.
    pub export_is_explicit: bool,
    /// The protocol version to speak (`version=`; 3 when not given); `None`
    /// (`version=auto`) negotiates as a kernel mount does: 4.2, 4.1, 4.0, then 3.
    pub version: Option<NfsVersion>,
    /// AUTH_UNIX uid sent with every call.
    pub uid: u32,
    /// AUTH_UNIX gid sent with every call.
    pub gid: u32,
}

fn bad(url: &str, reason: impl Into<String>) -> Error {
    Error::BadUrl {
        url: url.to_string(),
        reason: reason.into(),
    }
}

impl NfsUrl {
    /// Parses `nfs://HOST[:PORT]/EXPORT[//PATH][?query]`; see the module docs.
    pub fn parse(url: &str) -> Result<NfsUrl, Error> {
        let rest = url
            .strip_prefix("nfs://")
            .ok_or_else(|| bad(url, "must start with nfs://"))?;
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        if rest.contains('#') {
            return Err(bad(url, "fragments (#) are not allowed"));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(bad(url, "missing host"));
        }
        if authority.contains('@') {
            return Err(bad(url, "user information (user@host) is not supported"));
        }
        let (host_text, port_text) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| bad(url, "unterminated [IPv6] literal"))?;
            let port = match after {
                "" => None,
                p => Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| bad(url, "junk after ]: expected :PORT"))?,
                ),
            };
            (h, port)
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        let host = if host_text.eq_ignore_ascii_case("localhost") {
            Host::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST))
        } else if authority.starts_with('[') {
            match IpAddr::from_str(host_text) {
                Ok(IpAddr::V6(a)) => Host::Ip(IpAddr::V6(a)),
                Ok(IpAddr::V4(_)) => {
                    return Err(bad(url, "an IPv4 address must not be in brackets"));
                }
                Err(_) => {
                    return Err(bad(url, format!("{host_text:?} is not an IPv6 address")));
                }
            }
        } else if let Ok(ip) = IpAddr::from_str(host_text) {
            Host::Ip(ip)
        } else {
            check_host_name(host_text).map_err(|r| bad(url, r.to_string()))?;
            Host::Name(host_text.to_ascii_lowercase())
        };
        let parse_port = |what: &str, p: &str| -> Result<u16, Error> {
            match p.parse::<u16>() {
                Ok(0) | Err(_) => Err(bad(url, format!("{what} {p:?} is not a port (1-65535)"))),
                Ok(n) => Ok(n),
            }
        };
        let mut nfs_port = port_text.map(|p| parse_port("port", p)).transpose()?;
        let mut mount_port = None;
        let mut uid = None;
        let mut gid = None;
        let mut version = Some(NfsVersion::V3);
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| bad(url, format!("query item {pair:?} is not key=value")))?;
            match k {
                "version" if v == "auto" => version = None,
                "version" => {
                    version = Some(NfsVersion::parse(v).ok_or_else(|| {
                        bad(
                            url,
                            format!(
                                "NFS version {v:?} is not supported (3, 4.0, 4.1, 4.2 or auto)"
                            ),
                        )
                    })?)
                }
                "nfsport" => {
                    let p = parse_port("nfsport", v)?;
                    if nfs_port.is_some_and(|old| old != p) {
                        return Err(bad(url, "both :PORT and nfsport= given, and they differ"));
                    }
                    nfs_port = Some(p);
                }
                "mountport" => mount_port = Some(parse_port("mountport", v)?),
                "uid" => {
                    uid = Some(
                        v.parse()
                            .map_err(|_| bad(url, format!("uid {v:?} is not a number")))?,
                    )
                }
                "gid" => {
                    gid = Some(
                        v.parse()
                            .map_err(|_| bad(url, format!("gid {v:?} is not a number")))?,
                    )
                }
                other => return Err(bad(url, format!("unknown query parameter {other:?}"))),
            }
        }
        let nfs_port = nfs_port.unwrap_or(DEFAULT_PORT);
        let mount_port = mount_port.unwrap_or(nfs_port);

        let path = percent_decode(path).map_err(|r| bad(url, r.to_string()))?;
        if path.contains('\0') {
            return Err(bad(url, "path contains a NUL byte"));
        }
        let (export, inner, explicit) = match path.find("//") {
            Some(i) => (path[..i].to_string(), path[i + 2..].to_string(), true),
            None => (path.clone(), String::new(), false),
        };
        let export = normalize_export(&export);
        let inner = inner.trim_matches('/').to_string();
        for comp in inner.split('/').chain(export.split('/')) {
            if comp == "." || comp == ".." {
                return Err(bad(url, "path components . and .. are not allowed"));
            }
        }
        let (euid, egid) = current_ids();
        Ok(NfsUrl {
            host,
            nfs_port,
            mount_port,
            export,
            path: inner,
            export_is_explicit: explicit,
            version,
            uid: uid.unwrap_or(euid),
            gid: gid.unwrap_or(egid),
        })
    }

    /// Sets the export explicitly (an `--nfs-export` option): the URL's path must start
    /// with it, and the rest becomes the path inside the export.
    pub fn with_export(mut self, export: &str) -> Result<NfsUrl, Error> {
        let export = normalize_export(export);
        let full = self.full_path();
        let rest = if export == "/" {
            Some(full.trim_start_matches('/'))
        } else {
            full.strip_prefix(&export)
                .filter(|r| r.is_empty() || r.starts_with('/'))
        };
        let rest = rest.ok_or_else(|| {
            bad(
                &self.to_string(),
                format!("path {full:?} is not inside export {export:?}"),
            )
        })?;
        self.path = rest.trim_matches('/').to_string();
        self.export = export;
        self.export_is_explicit = true;
        Ok(self)
    }

    /// Export and path joined (`/srv/share/dir/f.bin`).
    pub fn full_path(&self) -> String {
        if self.path.is_empty() {
            self.export.clone()
        } else if self.export == "/" {
            format!("/{}", self.path)
        } else {
            format!("{}/{}", self.export, self.path)
        }
    }

    /// The candidate (export, path) splits tried when the export is not explicit:
    /// the whole path first, then each parent directory down to `/`.
    pub fn export_candidates(&self) -> Vec<(String, String)> {
        if self.export_is_explicit {
            return vec![(self.export.clone(), self.path.clone())];
        }
        let full = self.full_path();
        let comps: Vec<&str> = full.split('/').filter(|c| !c.is_empty()).collect();
        (0..=comps.len())
            .rev()
            .map(|n| {
                let export = format!("/{}", comps[..n].join("/"));
                (export, comps[n..].join("/"))
            })
            .collect()
    }

    /// The NFS program's `host:port`, as given (for messages; see [`crate::Client`] for
    /// the resolution).
    pub fn nfs_endpoint(&self) -> String {
        endpoint(&self.host, self.nfs_port)
    }

    /// The MOUNT program's `host:port`, as given.
    pub fn mount_endpoint(&self) -> String {
        endpoint(&self.host, self.mount_port)
    }
}

/// `host:port`, with an IPv6 address in brackets.
pub(crate) fn endpoint(host: &Host, port: u16) -> String {
    match host {
        Host::Ip(IpAddr::V6(a)) => format!("[{a}]:{port}"),
        h => format!("{h}:{port}"),
    }
}

/// A host that is neither an IP address nor a host name, and why.
#[derive(Debug, thiserror::Error)]
#[error("host {name:?} is not an IP address or host name: {why}")]
struct BadHostName {
    name: String,
    why: &'static str,
}

/// A DNS-style host name: dot-separated labels of letters, digits, `-` and `_` (Docker and
/// Swarm service names such as `lab_rustnfs` have underscores), 253 characters at most.
fn check_host_name(name: &str) -> Result<(), BadHostName> {
    let why = |why: &'static str| BadHostName {
        name: name.to_string(),
        why,
    };
    if name.len() > 253 {
        return Err(why("longer than 253 characters"));
    }
    if name.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(why("looks like an IPv4 address but is not one"));
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(why("empty label or label over 63 characters"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(why("a label starts or ends with '-'"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(why("only letters, digits, '-', '_' and '.' are allowed"));
        }
    }
    Ok(())
}

impl fmt::Display for NfsUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = match &self.host {
            Host::Ip(IpAddr::V6(a)) => format!("[{a}]"),
            h => h.to_string(),
        };
        let path = if self.export_is_explicit && !self.path.is_empty() {
            let export = if self.export == "/" { "" } else { &self.export };
            format!("{export}//{}", self.path)
        } else {
            self.full_path()
        };
        let version = self.version.map_or("auto".to_string(), |v| v.to_string());
        write!(
            f,
            "nfs://{host}:{}{path}?version={version}&nfsport={}&mountport={}",
            self.nfs_port, self.nfs_port, self.mount_port
        )
    }
}

impl FromStr for NfsUrl {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        NfsUrl::parse(s)
    }
}

fn normalize_export(export: &str) -> String {
    let trimmed = export.trim_matches('/');
    let mut out = String::from("/");
    let mut first = true;
    for comp in trimmed.split('/').filter(|c| !c.is_empty()) {
        if !first {
            out.push('/');
        }
        out.push_str(comp);
        first = false;
    }
    out
}

/// What is wrong with a URL path's percent-encoding.
#[derive(Debug, thiserror::Error)]
enum BadEscape {
    #[error("bad percent escape at byte {0}")]
    At(usize),
    #[error("%2F (an encoded /) is not allowed in a path")]
    Slash,
    #[error("path is not UTF-8 after percent-decoding")]
    NotUtf8,
}

fn percent_decode(s: &str) -> Result<String, BadEscape> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or(BadEscape::At(i))?;
            if hex == b'/' {
                return Err(BadEscape::Slash);
            }
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| BadEscape::NotUtf8)
}

fn current_ids() -> (u32, u32) {
    // SAFETY: geteuid/getegid have no preconditions and cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_export() {
        let u = NfsUrl::parse("nfs://127.0.0.1:2049/srv/share").unwrap();
        assert_eq!(u.host, Host::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert_eq!((u.nfs_port, u.mount_port), (2049, 2049));
        assert_eq!(u.export, "/srv/share");
        assert_eq!(u.path, "");
        assert!(!u.export_is_explicit);
    }

    #[test]
    fn libnfs_query_and_double_slash() {
        let u = NfsUrl::parse(
            "nfs://localhost/tmp/lab/www//sub/testfile.bin?version=3&nfsport=12049&mountport=12050&uid=0&gid=0",
        )
        .unwrap();
        assert_eq!((u.nfs_port, u.mount_port), (12049, 12050));
        assert_eq!(u.export, "/tmp/lab/www");
        assert_eq!(u.path, "sub/testfile.bin");
        assert!(u.export_is_explicit);
        assert_eq!((u.uid, u.gid), (0, 0));
        let again = NfsUrl::parse(&u.to_string()).unwrap();
        assert_eq!(again, u);
        let root = NfsUrl::parse("nfs://127.0.0.1//f.bin").unwrap();
        assert_eq!((root.export.as_str(), root.path.as_str()), ("/", "f.bin"));
    }

    #[test]
    fn ipv6_and_defaults() {
        let u = NfsUrl::parse("nfs://[::1]:2050/").unwrap();
        assert_eq!(u.host, Host::Ip("::1".parse::<IpAddr>().unwrap()));
        assert_eq!(u.nfs_endpoint(), "[::1]:2050");
        assert_eq!((u.nfs_port, u.mount_port), (2050, 2050));
        assert_eq!(u.export, "/");
        let d = NfsUrl::parse("nfs://10.0.0.1").unwrap();
        assert_eq!((d.nfs_port, d.export.as_str()), (2049, "/"));
        assert!(u.to_string().starts_with("nfs://[::1]:2050/"));
    }

    #[test]
    fn host_names() {
        let u = NfsUrl::parse("nfs://rustnfs:2049/").unwrap();
        assert_eq!(u.host, Host::Name("rustnfs".into()));
        assert_eq!((u.nfs_port, u.export.as_str()), (2049, "/"));
        assert_eq!(u.nfs_endpoint(), "rustnfs:2049");
        let s = NfsUrl::parse("nfs://Lab_RustNFS.svc.cluster.local./srv//f.bin?mountport=20048")
            .unwrap();
        assert_eq!(s.host, Host::Name("lab_rustnfs.svc.cluster.local.".into()));
        assert_eq!(s.mount_endpoint(), "lab_rustnfs.svc.cluster.local.:20048");
        assert_eq!(NfsUrl::parse(&s.to_string()).unwrap(), s);
        let d = NfsUrl::parse("nfs://nfs-1.example.org").unwrap();
        assert_eq!(
            d.to_string(),
            "nfs://nfs-1.example.org:2049/?version=3&nfsport=2049&mountport=2049"
        );
    }

    #[test]
    fn candidates_walk_up() {
        let u = NfsUrl::parse("nfs://127.0.0.1/a/b/c.bin").unwrap();
        let c = u.export_candidates();
        assert_eq!(c[0], ("/a/b/c.bin".into(), "".into()));
        assert_eq!(c[1], ("/a/b".into(), "c.bin".into()));
        assert_eq!(c[3], ("/".into(), "a/b/c.bin".into()));
        let e = u.with_export("/a").unwrap();
        assert_eq!((e.export.as_str(), e.path.as_str()), ("/a", "b/c.bin"));
        assert_eq!(e.export_candidates().len(), 1);
    }

    #[test]
    fn rejects_bad_urls() {
        for bad in [
            "http://127.0.0.1/x",
            "nfs:///x",
            "nfs://exa mple.com/x",
            "nfs://-rustnfs/x",
            "nfs://rust..nfs/x",
            "nfs://rust*nfs/x",
            "nfs://999.1.1.1/x",
            "nfs://[rustnfs]/x",
            "nfs://127.0.0.1:0/x",
            "nfs://127.0.0.1:99999/x",
            "nfs://[::1/x",
            "nfs://[127.0.0.1]/x",
            "nfs://127.0.0.1/x?version=5",
            "nfs://127.0.0.1/x?version=4.3",
            "nfs://127.0.0.1/x?nfsport=abc",
            "nfs://127.0.0.1/x?bogus=1",
            "nfs://127.0.0.1:1/x?nfsport=2",
            "nfs://127.0.0.1/a/../b",
            "nfs://127.0.0.1/a%2Fb",
            "nfs://127.0.0.1/a%00b",
            "nfs://127.0.0.1/a%zz",
            "nfs://u@127.0.0.1/a",
        ] {
            let err = NfsUrl::parse(bad).expect_err(bad);
            assert!(err.to_string().contains("invalid NFS URL"), "{bad}: {err}");
        }
        let u = NfsUrl::parse("nfs://127.0.0.1/a/b").unwrap();
        assert!(u.with_export("/c").is_err());
    }

    #[test]
    fn versions_parse_and_print_back() {
        for (q, want) in [
            ("", Some(NfsVersion::V3)),
            ("?version=3", Some(NfsVersion::V3)),
            ("?version=4", Some(NfsVersion::V4_0)),
            ("?version=4.0", Some(NfsVersion::V4_0)),
            ("?version=4.1", Some(NfsVersion::V4_1)),
            ("?version=4.2", Some(NfsVersion::V4_2)),
            ("?version=auto", None),
        ] {
            let u = NfsUrl::parse(&format!("nfs://127.0.0.1/x{q}")).unwrap();
            assert_eq!(u.version, want, "{q}");
            assert_eq!(NfsUrl::parse(&u.to_string()).unwrap().version, want, "{u}");
        }
        let err = NfsUrl::parse("nfs://127.0.0.1/x?version=4.3").unwrap_err();
        assert!(
            err.to_string().contains("3, 4.0, 4.1, 4.2 or auto"),
            "{err}"
        );
    }
}
