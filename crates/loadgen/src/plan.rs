//! What to run: the target URL, the schedule, concurrency and options, validated once.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use crate::Error;

/// A parsed target: which protocol, where, and what to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetUrl {
    /// `http://host[:port]/path?query` (default port 80).
    Http {
        /// The host as written (an IPv6 literal without brackets), for `Host:` and reports.
        host: String,
        port: u16,
        /// Path and query, always starting with `/`.
        path: String,
    },
    /// `tcp://host:port`, a `servelab tcp-server`.
    Tcp { host: String, port: u16 },
    /// `nfs://host[:port]/export/path[?nfsport=&mountport=&version=3]`, kept as text and
    /// parsed by `nfsclient` so both crates agree on the libnfs forms; `version=4.0`,
    /// `4.1`, `4.2` (`4` is 4.0) run every workload over NFSv4 (the path from the
    /// pseudo-root), `auto` negotiates as a kernel mount does.
    Nfs { url: String },
    /// `file:///absolute/path` (or `file://localhost/…`): a file to read or a directory
    /// to write or run the metadata mix in, on this machine's file systems.
    File { path: std::path::PathBuf },
}

impl TargetUrl {
    /// Parses `http://`, `tcp://` and `nfs://` URLs; anything else is a clear error.
    pub fn parse(url: &str) -> Result<Self, Error> {
        let bad = |why: &str| Error::Url {
            url: url.to_string(),
            reason: why.to_string(),
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("expected scheme://, e.g. http://127.0.0.1:8080/file"))?;
        match scheme.to_ascii_lowercase().as_str() {
            "http" => {
                let (authority, path) = match rest.find(['/', '?']) {
                    Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
                    Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
                    None => (rest, "/".to_string()),
                };
                let path = path.split('#').next().unwrap_or("/").to_string();
                if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
                    return Err(bad("the path contains spaces or control characters"));
                }
                let (host, port) =
                    split_authority(authority, Some(80)).map_err(|w| bad(&w.to_string()))?;
                Ok(TargetUrl::Http { host, port, path })
            }
            "tcp" => {
                let authority = rest.trim_end_matches('/');
                if authority.contains('/') {
                    return Err(bad("a tcp:// URL has no path"));
                }
                let (host, port) =
                    split_authority(authority, None).map_err(|w| bad(&w.to_string()))?;
                Ok(TargetUrl::Tcp { host, port })
            }
            "nfs" => {
                if rest.is_empty() || rest.starts_with('/') {
                    return Err(bad("nfs:// needs a host"));
                }
                Ok(TargetUrl::Nfs {
                    url: url.to_string(),
                })
            }
            "file" => {
                let path = rest.strip_prefix("localhost").unwrap_or(rest);
                if !path.starts_with('/') {
                    return Err(bad(
                        "file:// takes an absolute path (file:///tmp/dir); no host but localhost",
                    ));
                }
                let path = percent_decode(path).ok_or_else(|| bad("a bad %-escape in the path"))?;
                Ok(TargetUrl::File { path: path.into() })
            }
            "https" => Err(bad("HTTPS is not supported; use http://")),
            other => Err(bad(&format!(
                "unknown scheme {other:?}; use http://, nfs://, tcp:// or file://"
            ))),
        }
    }

    /// A short name for reports: `http`, `tcp` or `nfs`.
    pub fn kind(&self) -> &'static str {
        match self {
            TargetUrl::Http { .. } => "http",
            TargetUrl::Tcp { .. } => "tcp",
            TargetUrl::Nfs { .. } => "nfs",
            TargetUrl::File { .. } => "file",
        }
    }
}

/// Decodes `%XX` escapes (a URL's way of writing spaces and the like in a path).
fn percent_decode(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    let s = String::from_utf8(out).ok()?;
    (!s.contains('\0')).then_some(s)
}

/// What is wrong with a URL's `host:port`.
#[derive(Debug, thiserror::Error)]
enum AuthorityProblem {
    #[error("user:password@ is not supported")]
    UserInfo,
    #[error("unclosed [ in an IPv6 literal")]
    Unclosed,
    #[error("{0:?} is not an IPv6 address")]
    NotIpv6(String),
    #[error("expected :port after ]")]
    AfterBracket,
    #[error("IPv6 literals must be written in brackets: [::1]:8080")]
    Unbracketed,
    #[error("the host is empty")]
    EmptyHost,
    #[error("{0:?} is not a port number (1-65535)")]
    BadPort(String),
    #[error("a port is required, e.g. tcp://127.0.0.1:5201")]
    NoPort,
}

/// Splits `host:port` or `[v6]:port`; `default_port` applies when no port is written.
fn split_authority(
    authority: &str,
    default_port: Option<u16>,
) -> Result<(String, u16), AuthorityProblem> {
    if authority.contains('@') {
        return Err(AuthorityProblem::UserInfo);
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (v6, after) = rest.split_once(']').ok_or(AuthorityProblem::Unclosed)?;
        v6.parse::<std::net::Ipv6Addr>()
            .map_err(|_| AuthorityProblem::NotIpv6(v6.to_string()))?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or(AuthorityProblem::AfterBracket)?),
        };
        (v6.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => return Err(AuthorityProblem::Unbracketed),
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err(AuthorityProblem::EmptyHost);
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| AuthorityProblem::BadPort(p.to_string()))?,
        None => default_port.ok_or(AuthorityProblem::NoPort)?,
    };
    Ok((host, port))
}

/// Resolves `host:port` to the first address (IP literals need no resolver).
pub(crate) fn resolve(host: &str, port: u16) -> Result<SocketAddr, Error> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| Error::Resolve(host.to_string()))
}

/// How many operations to run and when to start each one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    /// A closed loop: exactly this many operations, each worker starting its next one as
    /// soon as the previous ended (ab's `-n`).
    Count(u64),
    /// A closed loop for this long (wrk's `-d`); operations still running at the end are
    /// abandoned and not counted, as wrk does.
    Duration(Duration),
    /// An open loop at `per_second` operations per second, for `count` operations or for
    /// `duration` (whichever is given). Every operation is timed from its *intended* start
    /// (`t0 + i / rate`), so a stalled server shows up in the percentiles instead of
    /// silently slowing the generator down (coordinated omission, wrk2).
    Rate {
        per_second: f64,
        count: Option<u64>,
        duration: Option<Duration>,
    },
}

impl Schedule {
    /// The period between intended starts under a fixed rate.
    pub fn interval(&self) -> Option<Duration> {
        match self {
            Schedule::Rate { per_second, .. } => Some(Duration::from_secs_f64(1.0 / per_second)),
            _ => None,
        }
    }

    /// Builds a schedule from the CLI's `-n`, `-z` and `-q`, rejecting nonsense.
    pub fn from_flags(
        count: Option<u64>,
        duration: Option<Duration>,
        rate: Option<f64>,
        default: Schedule,
    ) -> Result<Schedule, Error> {
        if count == Some(0) {
            return Err(Error::Plan("-n must be at least 1".into()));
        }
        if duration == Some(Duration::ZERO) {
            return Err(Error::Plan("-z must be longer than 0".into()));
        }
        match (count, duration, rate) {
            (_, _, Some(r)) if !(r.is_finite() && r > 0.0 && r <= 10_000_000.0) => {
                Err(Error::Plan(format!(
                    "-q {r} is not a rate between 0 and 10,000,000 per second"
                )))
            }
            (Some(_), Some(_), _) => Err(Error::Plan("give either -n or -z, not both".into())),
            (count, duration, Some(per_second)) => Ok(Schedule::Rate {
                per_second,
                count,
                duration: if count.is_none() && duration.is_none() {
                    Some(Duration::from_secs(10))
                } else {
                    duration
                },
            }),
            (Some(n), None, None) => Ok(Schedule::Count(n)),
            (None, Some(d), None) => Ok(Schedule::Duration(d)),
            (None, None, None) => Ok(default),
        }
    }

    /// The expected run time, when known in advance (drives the progress bar).
    pub fn expected_duration(&self) -> Option<Duration> {
        match *self {
            Schedule::Count(_) => None,
            Schedule::Duration(d) => Some(d),
            Schedule::Rate {
                per_second,
                count,
                duration,
            } => duration.or(count.map(|n| Duration::from_secs_f64(n as f64 / per_second))),
        }
    }
}

/// What an NFS or file run does on each worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NfsWorkload {
    /// Sequential READs of `block` bytes through the file named by the URL, wrapping at
    /// its end; each worker starts at offset 0.
    #[default]
    Read,
    /// Sequential WRITEs of `block` bytes into a file per worker created next to (or
    /// inside, when the URL names a directory) the URL's path, removed at the end.
    Write,
    /// bonnie++ -n style: CREATE, GETATTR and REMOVE of many small files in the URL's
    /// directory, one procedure per operation.
    Metadata,
}

/// Options that shape each operation.
#[derive(Debug, Clone)]
pub struct Options {
    /// Give up on one operation after this long; it counts as a `timeout` failure.
    pub timeout: Duration,
    /// HTTP: reuse connections (HTTP/1.1). Off means ab's default: HTTP/1.0 and a new
    /// connection per request.
    pub keepalive: bool,
    /// HTTP: extra request headers, `Name: value`.
    pub headers: Vec<String>,
    /// HTTP: accept responses whose length differs from the first one (ab `-l`).
    pub variable_length: bool,
    /// TCP and NFS: bytes per write/read operation.
    pub block_size: usize,
    /// TCP: the server sends and the client receives (iperf3 `-R`).
    pub reverse: bool,
    /// NFS: the workload.
    pub nfs_workload: NfsWorkload,
    /// NFS reads: the CRC-32 every complete pass over the file must have.
    pub verify_crc32: Option<u32>,
    /// NFS and file metadata mix: how many files each worker cycles through.
    pub nfs_files: u64,
    /// Run on however the target fails; by default a run stops after
    /// `max(FAILURE_LIMIT, 2 × concurrency)` consecutive failures of one kind.
    pub keep_going: bool,
    /// OS threads running the workers (each a single-threaded event loop, as wrk's
    /// `-t`); 0 means one per CPU, capped at the concurrency.
    pub threads: usize,
    /// Show a progress bar on stderr (only when it is a terminal and the run is > 1 s).
    pub progress: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            timeout: Duration::from_secs(30),
            keepalive: true,
            headers: Vec::new(),
            variable_length: false,
            block_size: 128 * 1024,
            reverse: false,
            nfs_workload: NfsWorkload::Read,
            verify_crc32: None,
            nfs_files: 1000,
            keep_going: false,
            threads: 0,
            progress: false,
        }
    }
}

/// Everything [`crate::run`] needs.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    pub target: TargetUrl,
    pub schedule: Schedule,
    /// Concurrent workers, each with its own connection (ab `-c`, iperf3 `-P`).
    pub concurrency: usize,
    pub options: Options,
}

impl LoadPlan {
    /// A plan with default options; `url` is parsed and checked here.
    pub fn new(url: &str, schedule: Schedule, concurrency: usize) -> Result<Self, Error> {
        let plan = LoadPlan {
            target: TargetUrl::parse(url)?,
            schedule,
            concurrency,
            options: Options::default(),
        };
        plan.validate()?;
        Ok(plan)
    }

    /// Checks the combination of settings; [`crate::run`] calls it again.
    pub fn validate(&self) -> Result<(), Error> {
        if self.concurrency == 0 {
            return Err(Error::Plan("-c must be at least 1".into()));
        }
        if self.concurrency > 100_000 {
            return Err(Error::Plan("-c above 100000 is not supported".into()));
        }
        if let Schedule::Count(n) = self.schedule
            && (n as usize) < self.concurrency
        {
            return Err(Error::Plan(format!(
                "cannot run fewer operations (-n {n}) than workers (-c {}), as ab refuses",
                self.concurrency
            )));
        }
        if self.options.timeout.is_zero() {
            return Err(Error::Plan("--timeout must be longer than 0".into()));
        }
        if self.options.nfs_files == 0 || self.options.nfs_files > 1_000_000 {
            return Err(Error::Plan(
                "--files must be 1 to 1000000 (files per worker in the metadata mix)".into(),
            ));
        }
        if matches!(self.target, TargetUrl::File { .. }) && self.concurrency > 1024 {
            return Err(Error::Plan(
                "file:// runs one thread per worker: -c above 1024 is not supported".into(),
            ));
        }
        if self.options.block_size == 0 || self.options.block_size > 64 << 20 {
            return Err(Error::Plan(
                "the block size must be 1 byte to 64 MiB".into(),
            ));
        }
        for h in &self.options.headers {
            let ok = h
                .split_once(':')
                .is_some_and(|(n, v)| httparse_token(n) && !v.contains(['\r', '\n']));
            if !ok {
                return Err(Error::Plan(format!("header {h:?} is not `Name: value`")));
            }
        }
        Ok(())
    }
}

fn httparse_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses `10s`, `500ms`, `2m`, `1h`, `250us` or a bare number of seconds (`1.5`).
pub fn parse_duration(text: &str) -> Result<Duration, Error> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| Error::Plan(format!("{text:?} is not a duration like 10s or 500ms")))?;
    let secs = match unit.trim() {
        "" | "s" | "sec" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(Error::Plan(format!(
                "{text:?}: unknown unit (use us, ms, s, m or h)"
            )));
        }
    };
    Duration::try_from_secs_f64(secs)
        .map_err(|_| Error::Plan(format!("{text:?} is not a valid duration")))
}

/// Parses a byte size: `4096`, `64k`, `1M`, `128KiB`.
pub fn parse_size(text: &str) -> Result<usize, Error> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: usize = num
        .parse()
        .map_err(|_| Error::Plan(format!("{text:?} is not a size like 4096, 64k or 1M")))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(Error::Plan(format!("{text:?}: unknown size unit"))),
    };
    value
        .checked_mul(mult)
        .ok_or_else(|| Error::Plan(format!("{text:?} is too large")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_http_urls_including_ipv6() {
        assert_eq!(
            TargetUrl::parse("http://127.0.0.1:8081/testfile.bin").unwrap(),
            TargetUrl::Http {
                host: "127.0.0.1".into(),
                port: 8081,
                path: "/testfile.bin".into()
            }
        );
        assert_eq!(
            TargetUrl::parse("http://[::1]:8080/x?y=1#frag").unwrap(),
            TargetUrl::Http {
                host: "::1".into(),
                port: 8080,
                path: "/x?y=1".into()
            }
        );
        assert_eq!(
            TargetUrl::parse("http://localhost").unwrap(),
            TargetUrl::Http {
                host: "localhost".into(),
                port: 80,
                path: "/".into()
            }
        );
        assert_eq!(
            TargetUrl::parse("http://h?q").unwrap(),
            TargetUrl::Http {
                host: "h".into(),
                port: 80,
                path: "/?q".into()
            }
        );
    }

    #[test]
    fn rejects_malformed_urls_clearly() {
        for bad in [
            "127.0.0.1:8080/x",
            "ftp://h/x",
            "https://h/x",
            "http://:80/x",
            "http://h:0/x",
            "http://h:99999/x",
            "http://h:abc/",
            "http://::1/x",
            "http://[::1/x",
            "http://[zz]:80/",
            "http://h/a b",
            "tcp://127.0.0.1",
            "tcp://h:1/path",
            "nfs:///export",
            "file://host/x",
            "file://relative",
            "file:///bad%zz",
        ] {
            let err = TargetUrl::parse(bad).unwrap_err();
            assert!(matches!(err, Error::Url { .. }), "{bad}: {err}");
        }
    }

    #[test]
    fn parses_file_urls() {
        for (url, path) in [
            ("file:///tmp/x", "/tmp/x"),
            ("file://localhost/tmp/x", "/tmp/x"),
            ("FILE:///a%20b/", "/a b/"),
        ] {
            assert_eq!(
                TargetUrl::parse(url).unwrap(),
                TargetUrl::File { path: path.into() }
            );
        }
    }

    #[test]
    fn builds_schedules_from_flags() {
        let d = Schedule::Count(1);
        assert_eq!(Schedule::from_flags(None, None, None, d).unwrap(), d);
        assert_eq!(
            Schedule::from_flags(Some(5), None, None, d).unwrap(),
            Schedule::Count(5)
        );
        assert!(matches!(
            Schedule::from_flags(None, None, Some(100.0), d).unwrap(),
            Schedule::Rate {
                duration: Some(_),
                count: None,
                ..
            }
        ));
        assert!(Schedule::from_flags(Some(5), Some(Duration::from_secs(1)), None, d).is_err());
        assert!(Schedule::from_flags(Some(0), None, None, d).is_err());
        assert!(Schedule::from_flags(None, None, Some(-1.0), d).is_err());
        assert!(Schedule::from_flags(None, None, Some(f64::NAN), d).is_err());
    }

    #[test]
    fn parses_durations_and_sizes() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("10x").is_err());
        assert_eq!(parse_size("128k").unwrap(), 128 << 10);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert!(parse_size("1q").is_err());
    }

    #[test]
    fn plan_validation_rejects_bad_combinations() {
        assert!(LoadPlan::new("http://127.0.0.1/", Schedule::Count(5), 10).is_err());
        assert!(LoadPlan::new("http://127.0.0.1/", Schedule::Count(5), 0).is_err());
        let mut p = LoadPlan::new("http://127.0.0.1/", Schedule::Count(5), 1).unwrap();
        p.options.headers.push("Bad Header".into());
        assert!(p.validate().is_err());
    }
}
