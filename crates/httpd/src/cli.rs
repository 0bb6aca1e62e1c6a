//! httpd's command line as a library, so the `httpd` binary and `servelab httpd` (the
//! multi-call form used by `servelab compare` and the container images) share it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::config::NfsVersionChoice;
use crate::{Config, Error};

/// Everything [`crate::run`] needs (the shape rustnfs's `run` takes too).
pub type RunConfig = service::RunConfig<Config>;

/// A static file server for a local directory or an NFS export (NFSv3, 4.0, 4.1 or 4.2), timing every request.
///
/// Every flag can also come from an environment variable: HTTPD_ and the flag's name in
/// capitals with `_` for `-` (HTTPD_LISTEN, HTTPD_NFS, HTTPD_NFS_TIMEOUT, ...); a flag on
/// the command line wins. Switches take true/false, 1/0, yes/no there.
#[derive(Parser, Debug)]
#[command(name = "httpd", version)]
pub struct Args {
    /// Address to listen on, e.g. 127.0.0.1:8080 or [::]:80.
    #[arg(long, default_value = "127.0.0.1:8080", env = "HTTPD_LISTEN")]
    pub listen: SocketAddr,
    /// Serve this local directory.
    #[arg(long, env = "HTTPD_ROOT", conflicts_with = "nfs",
          required_unless_present_any = ["nfs", "healthcheck"])]
    pub root: Option<PathBuf>,
    /// Serve this NFS export: nfs://HOST[:PORT]/EXPORT[//PATH][?nfsport=N&mountport=N]
    /// (v3, 4.0, 4.1 or 4.2: see --nfs-version).
    #[arg(long, env = "HTTPD_NFS")]
    pub nfs: Option<String>,
    /// Serve Prometheus /metrics and /metrics.json on this address.
    #[arg(long, env = "HTTPD_METRICS")]
    pub metrics: Option<SocketAddr>,
    /// Write one JSON line per request with phase times to FILE, or `-` for stdout.
    #[arg(long, value_name = "FILE|-", env = "HTTPD_ACCESS_LOG")]
    pub access_log: Option<String>,
    /// Access log line format: json (one object per request, with phase times) or
    /// combined (the Combined Log Format of Apache and nginx, for log tools).
    #[arg(long, value_name = "json|combined", default_value = "json",
          env = "HTTPD_ACCESS_LOG_FORMAT", value_parser = parse_log_format)]
    pub access_log_format: crate::config::AccessLogFormat,
    /// Serve F.br, F.zst or F.gz beside F when the client's Accept-Encoding allows it,
    /// with Content-Encoding, Vary: Accept-Encoding and an ETag per encoding.
    #[arg(long, env = "HTTPD_PRECOMPRESSED",
          num_args = 0..=1, default_value = "false", default_missing_value = "true",
          value_parser = parse_bool)]
    pub precompressed: bool,
    /// Cache-Control of successful file responses (200, 206, 304), e.g. "max-age=3600".
    #[arg(long, value_name = "VALUE", env = "HTTPD_CACHE_CONTROL")]
    pub cache_control: Option<String>,
    /// Cache-Control for one file extension, before --cache-control (repeatable; several
    /// in the environment variable go on separate lines), e.g. html=no-cache.
    #[arg(long, value_name = "EXT=VALUE", env = "HTTPD_CACHE_CONTROL_FOR",
          value_delimiter = '\n', value_parser = parse_ext_arg)]
    pub cache_control_for: Vec<(String, String)>,
    /// A header for every response (repeatable; several in the environment variable go
    /// on separate lines), e.g. "X-Content-Type-Options: nosniff". Replaces httpd's own
    /// header of that name; framing headers (Content-Length, ...) are refused.
    #[arg(long, value_name = "NAME:VALUE", env = "HTTPD_HEADER",
          value_delimiter = '\n', value_parser = parse_header_arg)]
    pub header: Vec<(String, String)>,
    /// Send Server-Timing (the meta and read phase times) with every response; turn off
    /// in production to say less about the server's internals.
    #[arg(long, env = "HTTPD_SERVER_TIMING",
          num_args = 0..=1, default_value = "true", default_missing_value = "true",
          value_parser = parse_bool)]
    pub server_timing: bool,
    /// Answer 404 for any path with a component starting with "." (.git, .env, ...),
    /// and leave such entries out of listings.
    #[arg(long, env = "HTTPD_HIDE_DOTFILES",
          num_args = 0..=1, default_value = "false", default_missing_value = "true",
          value_parser = parse_bool)]
    pub hide_dotfiles: bool,
    /// Most parts of a multipart/byteranges answer (after coalescing overlapping or
    /// unsorted ranges); a request for more gets the whole file.
    #[arg(long, default_value_t = 16, env = "HTTPD_MAX_RANGES")]
    pub max_ranges: usize,
    /// Tokio worker threads (default: one per CPU).
    #[arg(long, env = "HTTPD_WORKERS")]
    pub workers: Option<usize>,
    /// List directories that have no index.html (otherwise 403): HTML, or JSON with
    /// ?format=json.
    #[arg(long, env = "HTTPD_LIST",
          num_args = 0..=1, default_value = "false", default_missing_value = "true",
          value_parser = parse_bool)]
    pub list: bool,
    /// Follow symlinks that point outside the root (local backend).
    #[arg(long, env = "HTTPD_FOLLOW_SYMLINKS",
          num_args = 0..=1, default_value = "false", default_missing_value = "true",
          value_parser = parse_bool)]
    pub follow_symlinks: bool,
    /// Most simultaneous connections; at the cap the oldest idle connection (of the
    /// address holding the most) is closed for the newcomer, else newcomers wait.
    #[arg(long, default_value_t = 10_000, env = "HTTPD_MAX_CONNECTIONS")]
    pub max_connections: usize,
    /// Seconds a client has to send its request headers (also the keep-alive idle limit).
    #[arg(long, default_value_t = 30, env = "HTTPD_HEADER_TIMEOUT")]
    pub header_timeout: u64,
    /// Seconds a connection may move no byte before it is closed.
    #[arg(long, default_value_t = 60, env = "HTTPD_IDLE_TIMEOUT")]
    pub idle_timeout: u64,
    /// Send local files with read + write instead of sendfile (for comparison).
    #[arg(long, env = "HTTPD_NO_SENDFILE",
          num_args = 0..=1, default_value = "false", default_missing_value = "true",
          value_parser = parse_bool)]
    pub no_sendfile: bool,
    /// Let hyper answer every request, also the plain keep-alive GET/HEAD of small cached
    /// files the fast path answers with the same bytes (for comparison).
    #[arg(long, env = "HTTPD_NO_FAST_PATH",
          num_args = 0..=1, default_value = "false", default_missing_value = "true",
          value_parser = parse_bool)]
    pub no_fast_path: bool,
    /// NFS: move READ data from the NFS socket through pipes to the client's socket with
    /// splice(2) instead of copying it through httpd's memory: less CPU and memory for
    /// httpd (the serving processes' figure), more for a loopback client on receive (see
    /// the README's design notes); on by default, `--nfs-splice=off` copies.
    #[arg(long, env = "HTTPD_NFS_SPLICE",
          num_args = 0..=1, default_value = "true", default_missing_value = "true",
          value_parser = parse_bool)]
    pub nfs_splice: bool,
    /// Local: milliseconds the open-file cache answers a path (descriptor, metadata, and
    /// the bytes of files up to 64 KiB unchanged for a second) before it looks at the
    /// file again, like nginx's open_file_cache valid time; 0 = off (every request opens
    /// and stats the file).
    #[arg(long, default_value_t = 1000, env = "HTTPD_OPEN_FILE_CACHE_MS")]
    pub open_file_cache_ms: u64,
    /// NFS: the protocol version: 3, 4.0, 4.1, 4.2, or auto (as a kernel mount without
    /// vers=: 4.2 first, then 4.1, 4.0, 3). Default: the URL's version=, else auto.
    #[arg(long, env = "HTTPD_NFS_VERSION", value_parser = parse_nfs_version)]
    pub nfs_version: Option<NfsVersionChoice>,
    /// NFS: connections in the client pool.
    #[arg(long, default_value_t = 8, env = "HTTPD_NFS_CONNECTIONS")]
    pub nfs_connections: usize,
    /// NFS: milliseconds looked-up handles and attributes are reused (0 = never).
    #[arg(long, default_value_t = 1000, env = "HTTPD_NFS_ATTR_TTL_MS")]
    pub nfs_attr_ttl_ms: u64,
    /// NFS: cache file data in memory, at most SIZE bytes (e.g. 256M, 1G; 0 = off),
    /// revalidated on every request like a kernel mount's close-to-open.
    #[arg(long, value_name = "SIZE", default_value = "0", env = "HTTPD_NFS_DATA_CACHE",
          value_parser = crate::storage::data_cache::parse_size)]
    pub nfs_data_cache: u64,
    /// NFS: keep the data cache's copies as unlinked O_TMPFILE files in DIR (on disk, in
    /// the page cache) instead of memory (memfds); SIZE then bounds their bytes. On a
    /// large-folio file system such as ext4, sendfile from them costs less CPU. Needs
    /// --nfs-data-cache; checked at start-up by creating one.
    #[arg(long, value_name = "DIR", env = "HTTPD_NFS_DATA_CACHE_DIR")]
    pub nfs_data_cache_dir: Option<PathBuf>,
    /// NFS: seconds before an unanswered NFS call fails the request with 504.
    #[arg(long, default_value_t = 5, env = "HTTPD_NFS_TIMEOUT")]
    pub nfs_timeout: u64,
    /// Do not serve: send `HEAD /` to the --listen address (0.0.0.0 / [::] → loopback),
    /// print one line, exit 0 on any HTTP answer within 3 s, else 1. For container health
    /// checks (`HEALTHCHECK CMD ["/httpd", "--healthcheck"]`).
    #[arg(long)]
    pub healthcheck: bool,
}

impl Args {
    /// Validates the flags into a server [`Config`].
    pub fn to_config(&self) -> Result<Config, Error> {
        let args = self;
        let mut cfg = match (&args.root, &args.nfs) {
            (Some(root), None) => {
                match std::fs::metadata(root) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => {
                        return Err(Error::NotADirectory {
                            path: root.clone(),
                            reason: "not a directory",
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Err(Error::NotADirectory {
                            path: root.clone(),
                            reason: "no such directory",
                        });
                    }
                    Err(source) => {
                        return Err(Error::Root {
                            path: root.clone(),
                            source,
                        });
                    }
                }
                Config::local(root)
            }
            (None, Some(url)) => {
                let parsed = nfsclient::NfsUrl::parse(url).map_err(Error::Url)?;
                let mut cfg = Config::nfs(url);
                cfg.nfs_version = nfs_version_of(&parsed, url, args.nfs_version)?;
                cfg
            }
            _ => {
                return Err(Error::Usage(
                    "give exactly one of --root DIR or --nfs nfs://...",
                ));
            }
        };
        cfg.list_dirs = args.list;
        cfg.access_log_format = args.access_log_format;
        cfg.http = crate::config::HttpOptions {
            precompressed: args.precompressed,
            cache_control: args.cache_control.clone(),
            cache_control_by_ext: args.cache_control_for.clone(),
            headers: args.header.clone(),
            server_timing: args.server_timing,
            hide_dotfiles: args.hide_dotfiles,
            max_ranges: args.max_ranges,
        };
        cfg.follow_symlinks = args.follow_symlinks;
        cfg.max_connections = args.max_connections;
        cfg.header_timeout = Duration::from_secs(args.header_timeout);
        cfg.idle_timeout = Duration::from_secs(args.idle_timeout);
        cfg.sendfile = !args.no_sendfile;
        cfg.fast_path = !args.no_fast_path;
        cfg.nfs_splice = args.nfs_splice;
        cfg.open_file_cache = Duration::from_millis(args.open_file_cache_ms);
        cfg.nfs_connections = args.nfs_connections;
        cfg.nfs_attr_ttl = Duration::from_millis(args.nfs_attr_ttl_ms);
        cfg.nfs_timeout = Duration::from_secs(args.nfs_timeout);
        if args.nfs_data_cache > 0 && args.nfs.is_none() {
            return Err(Error::Usage(
                "--nfs-data-cache caches an NFS backend: give --nfs too",
            ));
        }
        cfg.nfs_data_cache = args.nfs_data_cache;
        if args.nfs_data_cache_dir.is_some() && args.nfs_data_cache == 0 {
            return Err(Error::Usage(
                "--nfs-data-cache-dir holds the data cache's copies: give --nfs-data-cache SIZE too",
            ));
        }
        cfg.nfs_data_cache_dir = args.nfs_data_cache_dir.clone();
        cfg.access_log = args.access_log.as_deref().map(|p| match p {
            "-" => crate::AccessLog::Stdout,
            p => crate::AccessLog::File(p.into()),
        });
        cfg.validate()?;
        Ok(cfg)
    }

    /// Builds the runtime (`--workers`) and serves until SIGINT/SIGTERM; with
    /// `--healthcheck`, probes the server instead and prints one line (`Err` = unhealthy).
    pub fn run(self) -> Result<(), Error> {
        if self.healthcheck {
            return self.healthcheck();
        }
        let cfg = self.to_config()?;
        tune_malloc();
        let mut rt = tokio::runtime::Builder::new_multi_thread();
        if let Some(n) = self.workers {
            if n == 0 {
                return Err(Error::Usage("--workers must be at least 1"));
            }
            rt.worker_threads(n);
        }
        let rt = rt.enable_all().build().map_err(Error::Runtime)?;
        rt.block_on(crate::run(RunConfig {
            listen: self.listen,
            metrics: self.metrics,
            server: cfg,
        }))
    }
}

impl Args {
    /// `--healthcheck`: see [`crate::health::probe`].
    pub fn healthcheck(&self) -> Result<(), Error> {
        let probe = |addr| crate::health::probe(addr, crate::health::TIMEOUT);
        service::healthcheck(self.listen, probe)
            .map_err(Error::Runtime)?
            .map_err(Error::Unhealthy)
    }
}

/// One line for an error and its causes, for a binary's last words: [`crate::Chain`]'s.
pub fn error_line(err: &(dyn std::error::Error + 'static)) -> String {
    crate::Chain(err).to_string()
}

pub use service::init_logging;

/// A switch's value from the environment (or `--list=VALUE`): true/false, 1/0, yes/no, on/off.
/// `--nfs-version`: `3`, `4` (4.0), `4.0`, `4.1`, `4.2` or `auto`.
fn parse_nfs_version(text: &str) -> Result<NfsVersionChoice, String> {
    match text {
        "auto" => Ok(NfsVersionChoice::Auto),
        v => nfsclient::NfsVersion::parse(v)
            .map(NfsVersionChoice::Exact)
            .ok_or_else(|| format!("{v:?} is not an NFS version: give 3, 4.0, 4.1, 4.2 or auto")),
    }
}

/// The version to speak: `--nfs-version` when given (it must agree with a `version=` in
/// the URL), else the URL's `version=`, else auto.
fn nfs_version_of(
    parsed: &nfsclient::NfsUrl,
    url: &str,
    flag: Option<NfsVersionChoice>,
) -> Result<NfsVersionChoice, Error> {
    let in_url = url
        .split_once('?')
        .is_some_and(|(_, q)| q.split('&').any(|kv| kv.starts_with("version=")));
    match (flag, in_url) {
        (None, false) => Ok(NfsVersionChoice::Auto),
        (None, true) => Ok(NfsVersionChoice::Url),
        (Some(choice), false) => Ok(choice),
        (Some(choice), true) => {
            let agrees = match choice {
                NfsVersionChoice::Auto => parsed.version.is_none(),
                NfsVersionChoice::Exact(v) => parsed.version == Some(v),
                NfsVersionChoice::Url => true,
            };
            if !agrees {
                return Err(Error::Usage(
                    "--nfs-version and the --nfs URL's version= disagree: give the version once",
                ));
            }
            Ok(choice)
        }
    }
}

fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" | "y" => Ok(true),
        "" | "0" | "false" | "no" | "off" | "n" => Ok(false),
        _ => Err(format!(
            "{text:?} is not a boolean (true/false, 1/0, yes/no)"
        )),
    }
}

/// `NAME:VALUE` (the `--header` syntax) → (name, value).
fn parse_header_arg(text: &str) -> Result<(String, String), String> {
    match text.split_once(':') {
        Some((n, v)) if !n.trim().is_empty() => Ok((n.trim().to_string(), v.trim().to_string())),
        _ => Err(format!(
            "{text:?}: give NAME:VALUE, e.g. \"X-Content-Type-Options: nosniff\""
        )),
    }
}

/// `EXT=VALUE` (the `--cache-control-for` syntax) → (extension, value).
fn parse_ext_arg(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((e, v)) if !e.trim().is_empty() && !v.trim().is_empty() => {
            Ok((e.trim().to_string(), v.trim().to_string()))
        }
        _ => Err(format!("{text:?}: give EXT=VALUE, e.g. html=no-cache")),
    }
}

fn parse_log_format(text: &str) -> Result<crate::config::AccessLogFormat, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "json" => Ok(crate::config::AccessLogFormat::Json),
        "combined" => Ok(crate::config::AccessLogFormat::Combined),
        _ => Err(format!("{text:?}: give json or combined")),
    }
}

/// Keeps glibc from `mmap`ing and unmapping every 1 MiB NFS READ buffer (and trimming the
/// heap after each): with the defaults, page faults and zeroing of fresh pages took a
/// quarter of the CPU of a large NFS-backed download (perf), and the fix gave +40 % req/s
/// on a 10 MiB file for ~25 MB more resident memory.
///
/// One malloc arena, for both backends:
/// - Freed memory can be given back. With the trim threshold this high, a non-main
///   arena's heap never shrinks on free, and `malloc_trim` (which the server calls after
///   connections close) releases free chunks inside every arena but the top chunk only
///   of the main one. After 10,000 connections that never sent a byte closed, their read
///   buffers had coalesced into the two worker arenas' top chunks: `--root` stayed at
///   26-84 MB (idle: 6 MB) in 8 runs of 10, however long it waited; `--nfs`, with one
///   arena already, came back to 8 MB within a second.
/// - With `--nfs`, READ buffers are allocated on whichever worker runs the READ and freed
///   on whichever wrote the frame, so with an arena per thread each arena kept its own
///   peak of free 1 MiB buffers. Peak RSS over the suite's sequence (4 KiB, then 10 MiB
///   keep-alive c = 10 and 100, new connections c = 10 and 100; 2 rounds, quiet machine):
///   32.5–35.1 MB with the default arenas, 24.7–25.1 MB with one, 31.6–31.9 with two,
///   for req/s within the rounds' spread.
///
/// Small allocations come from glibc's per-thread caches either way.
fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only adjusts allocator thresholds; called before any other thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 8 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 20);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn switches_take_an_optional_boolean() {
        let a =
            Args::try_parse_from(["httpd", "--root", "/", "--list", "--no-sendfile=no"]).unwrap();
        assert!(a.list && !a.no_sendfile && !a.follow_symlinks);
        let a = Args::try_parse_from(["httpd", "--root", "/", "--follow-symlinks=1"]).unwrap();
        assert!(a.follow_symlinks);
        assert!(Args::try_parse_from(["httpd", "--root", "/", "--list=maybe"]).is_err());
        let h = Args::try_parse_from(["httpd", "--healthcheck"]).unwrap();
        assert!(h.healthcheck);
    }

    #[test]
    fn response_shaping_flags_reach_the_config() {
        let a = Args::try_parse_from([
            "httpd",
            "--root",
            "/",
            "--precompressed",
            "--cache-control",
            "max-age=60",
            "--cache-control-for",
            "html=no-cache",
            "--header",
            "X-Frame-Options: DENY",
            "--header",
            "X-Content-Type-Options:nosniff",
            "--server-timing=off",
            "--hide-dotfiles",
            "--access-log-format",
            "combined",
        ])
        .unwrap();
        let cfg = a.to_config().unwrap();
        assert!(cfg.http.precompressed && cfg.http.hide_dotfiles && !cfg.http.server_timing);
        assert_eq!(cfg.http.headers.len(), 2);
        assert_eq!(cfg.http.cache_control_by_ext[0].1, "no-cache");
        assert_eq!(
            cfg.access_log_format,
            crate::config::AccessLogFormat::Combined
        );
        let d = Args::try_parse_from(["httpd", "--root", "/"]).unwrap();
        let cfg = d.to_config().unwrap();
        assert!(cfg.http.server_timing && !cfg.http.precompressed && cfg.http.headers.is_empty());
        let bad = |flag: &str, v: &str| {
            Args::try_parse_from(["httpd", "--root", "/", flag, v])
                .map_err(|e| e.to_string())
                .and_then(|a| a.to_config().map_err(|e| crate::Chain(&e).to_string()))
                .unwrap_err()
        };
        assert!(bad("--header", "Content-Length: 3").contains("content-length"));
        assert!(bad("--header", "nocolon").contains("NAME:VALUE"));
        assert!(bad("--access-log-format", "xml").contains("json or combined"));
        assert!(bad("--max-ranges", "0").contains("max_ranges"));
    }

    #[test]
    fn header_and_extension_arguments_parse() {
        assert!(parse_header_arg("novalue").is_err());
        assert_eq!(
            parse_header_arg("X-A: b: c").unwrap(),
            ("X-A".into(), "b: c".into())
        );
        assert!(parse_ext_arg("html").is_err());
    }

    #[test]
    fn nfs_splice_is_on_unless_turned_off() {
        let url = "nfs://127.0.0.1/export";
        let cfg = |extra: &[&str]| {
            let mut argv = vec!["httpd", "--nfs", url];
            argv.extend(extra);
            Args::try_parse_from(argv).unwrap().to_config().unwrap()
        };
        assert!(cfg(&[]).nfs_splice);
        assert!(cfg(&["--nfs-splice"]).nfs_splice);
        assert!(!cfg(&["--nfs-splice=off"]).nfs_splice);
    }

    #[test]
    fn nfs_version_defaults_to_auto_unless_the_url_names_one() {
        use nfsclient::NfsVersion;
        let cfg = |url: &str, extra: &[&str]| {
            let mut argv = vec!["httpd", "--nfs", url];
            argv.extend(extra);
            Args::try_parse_from(argv).unwrap().to_config()
        };
        let plain = "nfs://127.0.0.1/export";
        assert_eq!(cfg(plain, &[]).unwrap().nfs_version, NfsVersionChoice::Auto);
        assert_eq!(
            cfg(plain, &["--nfs-version", "4.1"]).unwrap().nfs_version,
            NfsVersionChoice::Exact(NfsVersion::V4_1)
        );
        assert_eq!(
            cfg(plain, &["--nfs-version", "3"]).unwrap().nfs_version,
            NfsVersionChoice::Exact(NfsVersion::V3)
        );
        let v3 = "nfs://127.0.0.1/export?version=3";
        assert_eq!(cfg(v3, &[]).unwrap().nfs_version, NfsVersionChoice::Url);
        assert_eq!(
            cfg(v3, &["--nfs-version", "3"]).unwrap().nfs_version,
            NfsVersionChoice::Exact(NfsVersion::V3)
        );
        let err = cfg(v3, &["--nfs-version", "4.2"]).unwrap_err();
        assert!(err.to_string().contains("disagree"), "{err}");
        let bad = Args::try_parse_from(["httpd", "--nfs", plain, "--nfs-version", "4.3"]);
        let err = bad.unwrap_err().to_string();
        assert!(err.contains("3, 4.0, 4.1, 4.2 or auto"), "{err}");
    }

    #[test]
    fn open_file_cache_is_on_for_a_second_by_default_and_zero_turns_it_off() {
        let a = Args::try_parse_from(["httpd", "--root", "/"]).unwrap();
        assert_eq!(
            a.to_config().unwrap().open_file_cache,
            Duration::from_secs(1)
        );
        let a =
            Args::try_parse_from(["httpd", "--root", "/", "--open-file-cache-ms", "0"]).unwrap();
        assert!(a.to_config().unwrap().open_file_cache.is_zero());
    }

    #[test]
    fn data_cache_size_needs_nfs_and_a_size() {
        let nfs = ["httpd", "--nfs", "nfs://127.0.0.1/x", "--nfs-data-cache"];
        let a = Args::try_parse_from(nfs.iter().copied().chain(["256M"])).unwrap();
        assert_eq!(a.to_config().unwrap().nfs_data_cache, 256 << 20);
        assert!(Args::try_parse_from(nfs.iter().copied().chain(["lots"])).is_err());
        let a = Args::try_parse_from(["httpd", "--root", "/", "--nfs-data-cache", "1G"]).unwrap();
        let e = a.to_config().unwrap_err().to_string();
        assert!(e.contains("--nfs-data-cache") && e.contains("--nfs"), "{e}");
        let a = Args::try_parse_from(["httpd", "--root", "/"]).unwrap();
        assert_eq!(a.to_config().unwrap().nfs_data_cache, 0);
    }

    #[test]
    fn data_cache_dir_needs_a_data_cache() {
        let nfs = [
            "httpd",
            "--nfs",
            "nfs://127.0.0.1/x",
            "--nfs-data-cache-dir",
            "/tmp",
        ];
        let a = Args::try_parse_from(nfs).unwrap();
        let e = a.to_config().unwrap_err().to_string();
        assert!(e.contains("--nfs-data-cache SIZE"), "{e}");
        let a =
            Args::try_parse_from(nfs.iter().copied().chain(["--nfs-data-cache", "1M"])).unwrap();
        let cfg = a.to_config().unwrap();
        assert_eq!(cfg.nfs_data_cache_dir.as_deref(), Some(Path::new("/tmp")));
    }
}
