//! What httpd serves and under which limits, and the user's response shaping checked
//! once at start-up into header values (`Shaping`).

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::header::{self, HeaderName, HeaderValue};

/// Where the files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// A local directory (or a kernel-mounted NFS path).
    Local { root: PathBuf },
    /// An NFS export (v3, 4.0, 4.1 or 4.2) through the built-in client: `nfs://HOST[:PORT]/EXPORT[//PATH]`
    /// (see `nfsclient::NfsUrl`); the path inside the export, if any, is the served root.
    Nfs { url: String },
}

/// Which NFS version the backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NfsVersionChoice {
    /// What the URL's `version=` says (NFSv3 when it says nothing).
    Url,
    /// As a kernel mount without `vers=`: 4.2, 4.1, 4.0, then 3, the first the server
    /// serves (`--nfs-version auto`, the command line's default).
    Auto,
    /// This version, whatever the URL says (`--nfs-version 3|4.0|4.1|4.2`).
    Exact(nfsclient::NfsVersion),
}

/// Where access log lines (one JSON object per request) go.
#[derive(Clone)]
pub enum AccessLog {
    Stdout,
    File(PathBuf),
    /// Any writer, e.g. a shared buffer in tests.
    Writer(Arc<Mutex<Box<dyn Write + Send>>>),
}

impl std::fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccessLog::Stdout => write!(f, "Stdout"),
            AccessLog::File(p) => write!(f, "File({})", p.display()),
            AccessLog::Writer(_) => write!(f, "Writer(..)"),
        }
    }
}

/// How access log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AccessLogFormat {
    /// One JSON object per request, with the phase times (the default).
    #[default]
    Json,
    /// The Combined Log Format (Apache's and nginx's default), which log tools read.
    Combined,
}

/// How responses are shaped beyond the protocol: what nginx users set in a `location`.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Serve `F.br`, `F.zst` or `F.gz` beside `F` when the request's `Accept-Encoding`
    /// allows it (`--precompressed`).
    pub precompressed: bool,
    /// `Cache-Control` of successful file responses (`--cache-control`).
    pub cache_control: Option<String>,
    /// `Cache-Control` by file extension (without the dot), before `cache_control`.
    pub cache_control_by_ext: Vec<(String, String)>,
    /// Headers added to every response (`--header NAME:VALUE`), after httpd's own.
    pub headers: Vec<(String, String)>,
    /// Send `Server-Timing` (phase times); off for production (`--server-timing=false`).
    pub server_timing: bool,
    /// Answer 404 for any path with a component starting with `.` (`--hide-dotfiles`).
    pub hide_dotfiles: bool,
    /// Most parts of a `multipart/byteranges` answer, after coalescing; a request with
    /// more gets the whole file.
    pub max_ranges: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            precompressed: false,
            cache_control: None,
            cache_control_by_ext: Vec::new(),
            headers: Vec::new(),
            server_timing: true,
            hide_dotfiles: false,
            max_ranges: 16,
        }
    }
}

/// Headers a user may not set with `--header`: they frame the message or describe one
/// particular body, so a fixed value would corrupt responses.
const RESERVED: [HeaderName; 7] = [
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::CONNECTION,
    header::CONTENT_RANGE,
    header::CONTENT_ENCODING,
    header::CONTENT_TYPE,
    header::ETAG,
];

/// A configuration httpd cannot serve with; each says what to change.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A limit outside the range httpd accepts.
    #[error("{field} must be {rule}")]
    Limit {
        field: &'static str,
        rule: &'static str,
    },
    /// A `--cache-control`, `--cache-control-for` or `--header` value that is not a valid
    /// header value.
    #[error("{flag} {value:?}: not a valid header value")]
    HeaderValue { flag: &'static str, value: String },
    /// A `--header` name that is not a valid header name.
    #[error("--header {0:?}: not a valid header name")]
    HeaderName(String),
    /// A `--header` httpd sets per response.
    #[error("--header {0}: httpd sets this header per response; it cannot be fixed")]
    Reserved(HeaderName),
    /// A `--cache-control-for` extension that is empty or holds a `/`.
    #[error("--cache-control-for {0:?}: give EXT=VALUE, e.g. html=no-cache")]
    Extension(String),
}

/// [`HttpOptions`] as header values, checked.
#[derive(Debug, Clone)]
pub(crate) struct Shaping {
    pub precompressed: bool,
    pub server_timing: bool,
    pub hide_dotfiles: bool,
    pub max_ranges: usize,
    cache_control: Option<HeaderValue>,
    /// (extension in lowercase, value), looked up before `cache_control`.
    cache_control_by_ext: Vec<(String, HeaderValue)>,
    /// Added to every response, replacing httpd's own header of the same name.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl Default for Shaping {
    fn default() -> Self {
        Shaping::new(&HttpOptions::default()).expect("the defaults are valid")
    }
}

impl Shaping {
    /// Checks `opts`; the error names the flag and the bad value.
    pub(crate) fn new(opts: &HttpOptions) -> Result<Shaping, ConfigError> {
        let value = |flag: &'static str, v: &str| {
            HeaderValue::from_str(v.trim()).map_err(|_| ConfigError::HeaderValue {
                flag,
                value: v.to_string(),
            })
        };
        let cache_control = match &opts.cache_control {
            Some(v) => Some(value("--cache-control", v)?),
            None => None,
        };
        let mut by_ext = Vec::new();
        for (ext, v) in &opts.cache_control_by_ext {
            let ext = ext.trim().trim_start_matches('.').to_ascii_lowercase();
            if ext.is_empty() || ext.contains('/') {
                return Err(ConfigError::Extension(ext));
            }
            by_ext.push((ext, value("--cache-control-for", v)?));
        }
        let mut headers = Vec::new();
        for (name, v) in &opts.headers {
            let name = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| ConfigError::HeaderName(name.clone()))?;
            if RESERVED.contains(&name) {
                return Err(ConfigError::Reserved(name));
            }
            headers.push((name, value("--header", v)?));
        }
        Ok(Shaping {
            precompressed: opts.precompressed,
            server_timing: opts.server_timing,
            hide_dotfiles: opts.hide_dotfiles,
            max_ranges: opts.max_ranges.max(1),
            cache_control,
            cache_control_by_ext: by_ext,
            headers,
        })
    }

    /// Adds the user's `--header`s to a response's fields, replacing httpd's own field of
    /// the same name.
    pub(crate) fn add_headers(&self, fields: &mut http::HeaderMap) {
        for (name, value) in &self.headers {
            fields.insert(name.clone(), value.clone());
        }
    }

    /// The `Cache-Control` of a successful response for the file `name`.
    pub(crate) fn cache_control(&self, name: &str) -> Option<HeaderValue> {
        // The stored extensions are lowercase: compared without a lowercased copy.
        if let Some((_, ext)) = name.rsplit_once('.')
            && let Some((_, v)) = self
                .cache_control_by_ext
                .iter()
                .find(|(e, _)| e.eq_ignore_ascii_case(ext))
        {
            return Some(v.clone());
        }
        self.cache_control.clone()
    }
}

/// Server configuration; [`Config::local`] and [`Config::nfs`] give the defaults.
#[derive(Debug, Clone)]
pub struct Config {
    pub backend: Backend,
    /// Answer a directory without `index.html` with an HTML listing (else 403).
    pub list_dirs: bool,
    /// Follow symlinks that leave the root (local backend). Symlinks that stay inside the
    /// root are always followed, on both backends; over NFS, leaving is always refused.
    pub follow_symlinks: bool,
    /// Most connections open at once. At the cap the oldest idle connection (waiting for
    /// headers or between keep-alive requests; of the address holding the most) is
    /// closed for the newcomer; with none idle, newcomers wait.
    pub max_connections: usize,
    /// Deadline for a request's headers to arrive, counted from when the connection
    /// starts waiting for them (so it also bounds keep-alive idleness between requests).
    pub header_timeout: Duration,
    /// A connection that moves no byte in either direction for this long is closed
    /// (slow readers of a large body included).
    pub idle_timeout: Duration,
    /// Largest request head (request line + headers) accepted; larger gets 431.
    pub max_header_bytes: usize,
    pub access_log: Option<AccessLog>,
    pub access_log_format: AccessLogFormat,
    /// Response shaping (precompressed files, cache and custom headers, ranges).
    pub http: HttpOptions,
    /// Send local file bodies above `inline_limit` with `sendfile(2)` (zero copy) instead
    /// of read + write.
    pub sendfile: bool,
    /// Bodies up to this size are read while preparing the response (one `pread`, or one
    /// NFS READ) and sent from memory.
    pub inline_limit: u64,
    /// Read size for streamed bodies (read + write path, and NFS READ count cap).
    pub chunk_size: usize,
    /// Local: how long the open-file cache serves a path without looking at the file
    /// system (`--open-file-cache-ms`); zero turns the cache off.
    pub open_file_cache: Duration,
    /// NFS: connections in the pool (= most READs in flight).
    pub nfs_connections: usize,
    /// NFS: READs in flight for one large body.
    pub nfs_read_ahead: usize,
    /// NFS: streamed bodies move READ data with `splice(2)`, socket → pipe → socket,
    /// instead of copying it through httpd's memory (`--nfs-splice`).
    pub nfs_splice: bool,
    /// NFS: how long looked-up handles and attributes are reused (0 = always LOOKUP).
    pub nfs_attr_ttl: Duration,
    /// NFS: deadline of one NFS call; a dead server answers 502/503/504 within it.
    pub nfs_timeout: Duration,
    /// NFS: bytes of file data cached in memory, revalidated on every open
    /// (close-to-open); 0 = off (`--nfs-data-cache`).
    pub nfs_data_cache: u64,
    /// NFS: keep the data cache's copies as unlinked `O_TMPFILE` files in this directory
    /// instead of memfds (`--nfs-data-cache-dir`): `sendfile` from a large-folio file
    /// system's page cache costs less CPU than from shmem.
    pub nfs_data_cache_dir: Option<PathBuf>,
    /// NFS: the data cache's counters, for the metrics endpoint (and tests).
    pub nfs_data_cache_stats: Arc<crate::cache_stats::CacheStats>,
    /// NFS: the protocol version to speak (`--nfs-version`).
    pub nfs_version: NfsVersionChoice,
    /// NFS: the version the backend speaks, set once it is connected (start-up line,
    /// `httpd_nfs_protocol_info` in the metrics).
    pub nfs_protocol: Arc<std::sync::OnceLock<nfsclient::NfsVersion>>,
    /// How long shutdown waits for in-flight responses before closing them.
    pub shutdown_grace: Duration,
    /// Answer plain keep-alive GET/HEAD requests for small cached local files before
    /// hyper (the same bytes, less CPU; see `fast.rs`). Off: hyper answers every request.
    pub fast_path: bool,
}

impl Config {
    /// Defaults for serving a local directory.
    pub fn local(root: impl Into<PathBuf>) -> Config {
        Config::with_backend(Backend::Local { root: root.into() })
    }

    /// Defaults for serving an NFS export (`nfs://...`).
    pub fn nfs(url: impl Into<String>) -> Config {
        Config::with_backend(Backend::Nfs { url: url.into() })
    }

    fn with_backend(backend: Backend) -> Config {
        Config {
            backend,
            list_dirs: false,
            follow_symlinks: false,
            max_connections: 10_000,
            header_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_header_bytes: 16 * 1024,
            access_log: None,
            access_log_format: AccessLogFormat::Json,
            http: HttpOptions::default(),
            sendfile: true,
            inline_limit: 64 * 1024,
            chunk_size: 1 << 20,
            nfs_connections: 8,
            nfs_read_ahead: 4,
            nfs_splice: false,
            nfs_attr_ttl: Duration::from_secs(1),
            open_file_cache: Duration::from_secs(1),
            nfs_timeout: Duration::from_secs(5),
            nfs_data_cache: 0,
            nfs_data_cache_dir: None,
            nfs_data_cache_stats: Arc::default(),
            nfs_version: NfsVersionChoice::Url,
            nfs_protocol: Arc::default(),
            shutdown_grace: Duration::from_secs(30),
            fast_path: true,
        }
    }

    /// Checks ranges and the response shaping; called by [`crate::serve`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        let limits = [
            (self.max_connections == 0, "max_connections", "at least 1"),
            (
                self.max_header_bytes < 1024,
                "max_header_bytes",
                "at least 1024",
            ),
            (
                !(4096..=(16 << 20)).contains(&self.chunk_size),
                "chunk_size",
                "between 4 KiB and 16 MiB",
            ),
            (
                self.inline_limit > (16 << 20),
                "inline_limit",
                "at most 16 MiB",
            ),
            (
                self.nfs_connections == 0 || self.nfs_read_ahead == 0,
                "nfs_connections and nfs_read_ahead",
                "at least 1",
            ),
            (
                self.header_timeout.is_zero() || self.idle_timeout.is_zero(),
                "timeouts",
                "positive",
            ),
            (self.http.max_ranges == 0, "max_ranges", "at least 1"),
        ];
        if let Some(&(_, field, rule)) = limits.iter().find(|(bad, _, _)| *bad) {
            return Err(ConfigError::Limit { field, rule });
        }
        Shaping::new(&self.http)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_refused_naming_the_flag() {
        let mut o = HttpOptions {
            headers: vec![("Content-Length".into(), "5".into())],
            ..Default::default()
        };
        let refused = |o: &HttpOptions| Shaping::new(o).unwrap_err().to_string();
        assert!(refused(&o).contains("content-length"));
        o.headers = vec![("X bad".into(), "v".into())];
        assert!(refused(&o).contains("--header"));
        o.headers = vec![("X-Frame-Options".into(), "DENY".into())];
        o.cache_control = Some("bad\nvalue".into());
        assert!(refused(&o).contains("--cache-control"));
    }

    #[test]
    fn extension_overrides_win() {
        let o = HttpOptions {
            cache_control: Some("max-age=60".into()),
            cache_control_by_ext: vec![(".HTML".into(), "no-cache".into())],
            ..Default::default()
        };
        let s = Shaping::new(&o).unwrap();
        assert_eq!(s.cache_control("a/index.Html").unwrap(), "no-cache");
        assert_eq!(s.cache_control("x.bin").unwrap(), "max-age=60");
        assert_eq!(Shaping::default().cache_control("x.bin"), None);
    }
}
