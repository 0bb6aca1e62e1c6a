//! Command-line and environment options, turned into a validated [`RunConfig`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;

use crate::Error;
use ipnet::IpNet;

use crate::config::{Config, Squash, parse_bool};

/// rustnfs: an instrumented userspace NFSv3 and NFSv4 (4.0, 4.1, 4.2) server.
///
/// Exports one directory (--export, with --read-only, --allow and the squash flags), or
/// the exports of an exports(5) file (--exports; without either, /etc/exports when it
/// exists). NFSv3, NFSv4, MOUNT and a portmapper answer on one TCP port, so NFSv3
/// clients pass it as both `port=` and `mountport=`; NFSv4 clients mount `host:/` (one
/// export, or the exports file's pseudo-filesystem). Environment variables use the names
/// of the popular NFS server images (SHARED_DIRECTORY, READ_ONLY, PERMITTED).
#[derive(Debug, Parser)]
#[command(name = "rustnfs", version, after_long_help = crate::nfs4::limits_help())]
pub struct Args {
    /// Directory to export (clients see it as `/`): one export, its options given by
    /// --read-only, --allow, --squash and --no-root-squash.
    #[arg(long, env = "SHARED_DIRECTORY")]
    pub export: Option<PathBuf>,
    /// Exports file in exports(5) syntax: several exports, each with its clients
    /// (hosts, networks, `*`) and options (rw, ro, root_squash, all_squash, anonuid,
    /// sec=sys, fsid=, ...; the README lists every option). Read again on SIGHUP.
    /// Without --export or --exports, /etc/exports is read when it exists.
    #[arg(long, env = "RUSTNFS_EXPORTS", value_name = "FILE")]
    pub exports: Option<PathBuf>,
    /// The directory exported (as --export) when neither --export, --exports nor
    /// /etc/exports names one: the container image's /nfs-share.
    #[arg(long, env = "RUSTNFS_DEFAULT_EXPORT", value_name = "DIR")]
    pub default_export: Option<PathBuf>,
    /// Address and port to serve on; IPv6 as `[::]:2049`.
    #[arg(long, env = "RUSTNFS_LISTEN", default_value = "0.0.0.0:2049")]
    pub listen: SocketAddr,
    /// Refuse every change with NFS3ERR_ROFS (env: true/1/yes). With --export only.
    #[arg(long, env = "READ_ONLY", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub read_only: Option<bool>,
    /// Client networks allowed to connect: comma-separated CIDRs or addresses; `*` = all
    /// (the default). With --export only.
    #[arg(long, env = "PERMITTED")]
    pub allow: Option<String>,
    /// Act as this `UID:GID` for every client (all_squash; e.g. 1000:1000): new files
    /// get this owner and permissions are this identity's. With --export only.
    #[arg(long, env = "SQUASH", conflicts_with = "no_root_squash")]
    pub squash: Option<String>,
    /// Let client root act as root. By default uid/gid 0 act as 65534 (root_squash).
    /// With --export only.
    #[arg(long, env = "NO_ROOT_SQUASH", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub no_root_squash: Option<bool>,
    /// Let MKNOD make character and block devices (refused with NFS3ERR_PERM otherwise).
    #[arg(long, env = "ALLOW_DEVICE_NODES", default_value = "false", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub allow_device_nodes: bool,
    /// Serve NFS calls made with AUTH_NONE, as nobody (65534). By default they are
    /// refused with AUTH_TOOWEAK (NULL, MOUNT and the portmapper take AUTH_NONE always).
    #[arg(long, env = "ALLOW_AUTH_NONE", default_value = "false", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub allow_auth_none: bool,
    /// Make every WRITE stable before its reply (FILE_SYNC), as if clients asked for it;
    /// by default UNSTABLE writes are answered from the page cache until COMMIT.
    #[arg(long, env = "SYNC", default_value = "false", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub sync: bool,
    /// Serve Prometheus `/metrics` and `/metrics.json` on this address.
    #[arg(long, env = "RUSTNFS_METRICS")]
    pub metrics: Option<SocketAddr>,
    /// Most client connections served at once; at the cap the oldest idle connection (of
    /// the address holding the most) is closed for the newcomer, which is closed at accept
    /// only when none is idle.
    #[arg(long, env = "RUSTNFS_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,
    /// Bytes all connections together may buffer (requests being received, READ replies
    /// being sent); at least 2 MiB. Suffixes K, M, G (powers of 1024).
    #[arg(long, env = "RUSTNFS_MAX_BUFFER_BYTES", default_value = "64M", value_parser = parse_size)]
    pub max_buffer_bytes: usize,
    /// Close a connection that sends nothing for this many seconds.
    #[arg(long, env = "RUSTNFS_IDLE_TIMEOUT", default_value_t = 300)]
    pub idle_timeout: u64,
    /// The NFSv4 lease in seconds (2–3600): a client that renews nothing for this long
    /// loses its opens and locks, and their memory is given back.
    #[arg(long, env = "RUSTNFS_NFS4_LEASE", default_value_t = 90,
          value_parser = clap::value_parser!(u64).range(2..=3600))]
    pub nfs4_lease: u64,
    /// Register NFS (v3, v4) and MOUNT (v3) on this server's port with the host's
    /// rpcbind (its local socket, /run/rpcbind.sock), as NFS-Ganesha does: then
    /// `showmount -e HOST` lists the exports and clients mount without port= and
    /// mountport=. Fails to start when another NFS server holds them.
    #[arg(long, env = "RUSTNFS_RPCBIND", default_value = "false", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool)]
    pub rpcbind: bool,
    /// Do not serve: print the export list of the server at `HOST[:PORT]` (MOUNT's
    /// EXPORT on the NFS port, no rpcbind needed; port 2049 when none is given; the
    /// --listen address when no HOST is), as `showmount -e` prints it.
    #[arg(long, value_name = "HOST[:PORT]", num_args = 0..=1, default_missing_value = "")]
    pub showmount: Option<String>,
    /// Do not serve: send an RPC NULL call to NFSv3 on the --listen address (0.0.0.0 /
    /// [::] → loopback), print one line, exit 0 when it is accepted within 3 s, else 1.
    /// For container health checks (`HEALTHCHECK CMD ["/rustnfs", "--healthcheck"]`).
    #[arg(long)]
    pub healthcheck: bool,
}

/// Everything [`crate::run`] needs (the shape httpd's `run` takes too).
pub type RunConfig = service::RunConfig<Config>;

/// The exports file read when no export is named (kernel nfsd's).
pub const ETC_EXPORTS: &str = "/etc/exports";

/// What the options say is exported.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Exported {
    /// One directory, with the one-export flags.
    One(PathBuf),
    /// An exports file.
    File(PathBuf),
}

impl Args {
    /// The one-export flags given (each names its flag and variable).
    fn one_export_flags(&self) -> Vec<&'static str> {
        [
            ("--read-only (READ_ONLY)", self.read_only.is_some()),
            ("--allow (PERMITTED)", self.allow.is_some()),
            ("--squash (SQUASH)", self.squash.is_some()),
            (
                "--no-root-squash (NO_ROOT_SQUASH)",
                self.no_root_squash.is_some(),
            ),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }

    /// Which exports the options name: `--exports FILE`; else `--export DIR`; else
    /// `etc_exports` when it exists; else `--default-export DIR`. An exports file with
    /// one-export flags, or with `--export`, is refused: each would silently lose.
    fn exported(&self, etc_exports: &Path) -> Result<Exported, Error> {
        let flags = self.one_export_flags();
        let with_file = |file: &Path, how: &str| {
            if flags.is_empty() {
                return Ok(Exported::File(file.to_path_buf()));
            }
            let verb = if flags.len() == 1 { "applies" } else { "apply" };
            Err(Error::Config(format!(
                "{} {verb} only to one --export directory, and {how}: give each export's options in the file (ro, rw, root_squash, no_root_squash, all_squash, anonuid=, anongid=), or name the directory with --export (SHARED_DIRECTORY)",
                flags.join(", "),
            )))
        };
        match (&self.exports, &self.export) {
            (Some(file), Some(dir)) => Err(Error::Config(format!(
                "--exports {} and --export {} (SHARED_DIRECTORY) both name what is exported: give one (an exports line '{} *(rw)' exports the directory too)",
                file.display(),
                dir.display(),
                dir.display()
            ))),
            (Some(file), None) => with_file(
                file,
                &format!("the exports come from --exports {}", file.display()),
            ),
            (None, Some(dir)) => {
                if etc_exports.exists() {
                    tracing::warn!(
                        "--export {} (SHARED_DIRECTORY) names the export: {} is not read",
                        dir.display(),
                        etc_exports.display()
                    );
                }
                Ok(Exported::One(dir.clone()))
            }
            (None, None) if etc_exports.exists() => with_file(
                etc_exports,
                &format!(
                    "with neither --export nor --exports the exports come from {}",
                    etc_exports.display()
                ),
            ),
            (None, None) => match &self.default_export {
                Some(dir) => Ok(Exported::One(dir.clone())),
                None => Err(Error::Config(format!(
                    "nothing to export: give --export DIR (SHARED_DIRECTORY) or --exports FILE (RUSTNFS_EXPORTS), or write {}",
                    etc_exports.display()
                ))),
            },
        }
    }

    /// Validates the options (an `--export` must be a directory; an exports file is
    /// read when the server starts).
    pub fn into_run_config(self) -> Result<RunConfig, Error> {
        self.into_run_config_with(Path::new(ETC_EXPORTS))
    }

    fn into_run_config_with(self, etc_exports: &Path) -> Result<RunConfig, Error> {
        let exported = self.exported(etc_exports)?;
        if let Exported::One(export) = &exported
            && !export.is_dir()
        {
            let what = if export.exists() {
                "not a directory"
            } else {
                "no such directory"
            };
            return Err(Error::Config(format!(
                "--export {}: {what}",
                export.display()
            )));
        }
        if self.max_connections == 0 {
            return Err(Error::Config("--max-connections must be at least 1".into()));
        }
        let mut server = match exported {
            Exported::One(dir) => Config::new(dir),
            Exported::File(file) => {
                let mut c = Config::new("/");
                c.exports_file = Some(file);
                c
            }
        };
        server.read_only = self.read_only.unwrap_or(false);
        server.allow = parse_allow(self.allow.as_deref().unwrap_or("*"))?;
        server.squash = match self.squash.as_deref().map(parse_squash).transpose()? {
            Some((uid, gid)) => Squash::All(uid, gid),
            None if self.no_root_squash == Some(true) => Squash::None,
            None => Squash::Root,
        };
        server.allow_device_nodes = self.allow_device_nodes;
        server.allow_auth_none = self.allow_auth_none;
        server.sync_writes = self.sync;
        server.register_rpcbind = self.rpcbind;
        server.max_connections = self.max_connections;
        if self.max_buffer_bytes < 2 << 20 {
            return Err(Error::Config(format!(
                "--max-buffer-bytes {} is below the 2 MiB one READ or WRITE needs",
                self.max_buffer_bytes
            )));
        }
        server.max_buffer_bytes = self.max_buffer_bytes;
        server.idle_timeout = Duration::from_secs(self.idle_timeout.max(1));
        server.nfs4_lease = Duration::from_secs(self.nfs4_lease);
        Ok(RunConfig {
            listen: self.listen,
            metrics: self.metrics,
            server,
        })
    }
}

/// Parses a byte count: digits with an optional K, M or G suffix (powers of 1024).
fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let (digits, shift) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 10),
        Some('M') => (&t[..t.len() - 1], 20),
        Some('G') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    digits
        .trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("{text:?} is not a byte count (e.g. 64M, 1G, 1048576)"))
}

impl Args {
    /// Serves until SIGINT/SIGTERM on a new multi-threaded runtime, or with
    /// `--healthcheck` probes the server and prints one line (`Err` = unhealthy).
    pub fn run(self) -> Result<(), Error> {
        if self.healthcheck {
            return self.healthcheck();
        }
        if let Some(target) = &self.showmount {
            let addr = crate::showmount::target(target, self.listen)?;
            let list = crate::showmount::list(addr)?;
            let host = if target.is_empty() {
                addr.to_string()
            } else {
                target.clone()
            };
            print!("{}", crate::showmount::render(&host, &list));
            return Ok(());
        }
        let config = self.into_run_config()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        rt.block_on(crate::run(config))
    }

    /// `--healthcheck`: see [`crate::health::probe`].
    pub fn healthcheck(&self) -> Result<(), Error> {
        let probe = |addr| crate::health::probe(addr, crate::health::TIMEOUT);
        service::healthcheck(self.listen, probe)?.map_err(Error::Unhealthy)
    }
}

/// Parses `--allow` / `PERMITTED`: comma- or space-separated CIDRs or addresses; `*`
/// (or an empty list) means everyone.
pub fn parse_allow(text: &str) -> Result<Vec<IpNet>, Error> {
    let mut nets = Vec::new();
    for item in text
        .split([',', ' ', ';'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        if item == "*" {
            return Ok(Vec::new());
        }
        let net = item
            .parse::<IpNet>()
            .or_else(|_| item.parse::<std::net::IpAddr>().map(IpNet::from))
            .map_err(|_| Error::Config(format!("--allow: {item:?} is not a CIDR or address")))?;
        nets.push(net);
    }
    Ok(nets)
}

/// Parses `--squash` as `UID:GID` (or `UID`, group equal to it): all_squash.
pub fn parse_squash(text: &str) -> Result<(u32, u32), Error> {
    let bad = || Error::Config(format!("--squash: {text:?} is not UID:GID"));
    let (u, g) = text.split_once(':').unwrap_or((text, text));
    Ok((
        u.trim().parse().map_err(|_| bad())?,
        g.trim().parse().map_err(|_| bad())?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flags() {
        let dir = std::env::temp_dir();
        let d = dir.to_str().unwrap();
        let a = Args::try_parse_from([
            "rustnfs",
            "--export",
            d,
            "--listen",
            "[::1]:0",
            "--read-only",
            "--allow",
            "10.0.0.0/8",
            "--squash",
            "1:2",
        ])
        .unwrap();
        let rc = a.into_run_config().unwrap();
        assert!(rc.server.read_only);
        assert_eq!(rc.server.squash, Squash::All(1, 2));
        assert_eq!(rc.server.allow.len(), 1);
        assert!(rc.listen.is_ipv6());
        let a = Args::try_parse_from(["rustnfs", "--export", d, "--read-only", "no"]).unwrap();
        assert_eq!(a.read_only, Some(false));
        let rc = a.into_run_config().unwrap();
        assert_eq!(rc.server.squash, Squash::Root, "root_squash by default");
        assert!(!rc.server.sync_writes && !rc.server.allow_device_nodes);
        assert!(!rc.server.allow_auth_none, "AUTH_NONE refused by default");
        let a = Args::try_parse_from(["rustnfs", "--export", d, "--allow-auth-none"]);
        assert!(a.unwrap().into_run_config().unwrap().server.allow_auth_none);
        let a = Args::try_parse_from(["rustnfs", "--export", d, "--no-root-squash", "--sync"]);
        let rc = a.unwrap().into_run_config().unwrap();
        assert_eq!(rc.server.squash, Squash::None);
        assert!(rc.server.sync_writes);
        let both = [
            "rustnfs",
            "--export",
            d,
            "--no-root-squash",
            "--squash",
            "1:1",
        ];
        assert!(Args::try_parse_from(both).is_err());
        let bad = Args::try_parse_from(["rustnfs", "--export", "/nonexistent/x"]).unwrap();
        assert!(bad.into_run_config().is_err());
        // The probe needs no export.
        assert_eq!(rc.server.max_buffer_bytes, 64 << 20);
        let a = Args::try_parse_from(["rustnfs", "--export", d, "--max-buffer-bytes", "1G"]);
        assert_eq!(a.unwrap().max_buffer_bytes, 1 << 30);
        assert!(
            Args::try_parse_from(["rustnfs", "--export", d, "--max-buffer-bytes", "x"]).is_err()
        );
        let small = Args::try_parse_from(["rustnfs", "--export", d, "--max-buffer-bytes", "1K"]);
        assert!(small.unwrap().into_run_config().is_err());
        let h = Args::try_parse_from(["rustnfs", "--healthcheck", "--listen", "0.0.0.0:1"]);
        assert!(h.unwrap().healthcheck);
    }

    /// Issue 35 §3: `--exports FILE`, or /etc/exports when nothing is named; the
    /// one-export flags stay a shorthand, and mixing the two is refused in one line
    /// that says what to do.
    #[test]
    fn exports_files_and_the_one_export_shorthand() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().to_str().unwrap();
        let file = tmp.path().join("exports");
        let f = file.to_str().unwrap();
        let absent = tmp.path().join("no-etc-exports");
        let rc = |args: &[&str], etc: &Path| {
            let mut all = vec!["rustnfs"];
            all.extend_from_slice(args);
            Args::try_parse_from(all)
                .map_err(|e| Error::Config(e.to_string()))
                .and_then(|a| a.into_run_config_with(etc))
        };
        let one = rc(&["--export", d], &file).unwrap();
        assert_eq!(
            one.server.exports_file, None,
            "--export wins over /etc/exports"
        );
        let from_file = rc(&["--exports", f, "--sync"], &absent).unwrap();
        assert_eq!(
            from_file.server.exports_file.as_deref(),
            Some(file.as_path())
        );
        assert!(
            from_file.server.sync_writes,
            "server-wide flags still apply"
        );
        // Nothing named: the exports file where /etc/exports is, if it exists...
        std::fs::write(&file, "/srv *\n").unwrap();
        let etc = rc(&[], &file).unwrap();
        assert_eq!(etc.server.exports_file.as_deref(), Some(file.as_path()));
        // ...else the image's default directory, else a refusal.
        let default = rc(&["--default-export", d, "--read-only"], &absent).unwrap();
        assert_eq!(
            (default.server.export.as_path(), default.server.read_only),
            (tmp.path(), true)
        );
        let e = rc(&[], &absent).unwrap_err().to_string();
        assert!(e.contains("nothing to export: give --export DIR (SHARED_DIRECTORY) or --exports FILE (RUSTNFS_EXPORTS)"), "{e}");
        let e = rc(&["--exports", f, "--export", d], &absent)
            .unwrap_err()
            .to_string();
        assert!(e.contains("both name what is exported: give one"), "{e}");
        let e = rc(
            &["--exports", f, "--read-only", "--allow", "10.0.0.0/8"],
            &absent,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--read-only (READ_ONLY), --allow (PERMITTED) apply only to one --export directory, and the exports come from --exports"),
            "{e}"
        );
        assert!(
            e.contains("give each export's options in the file (ro, rw"),
            "{e}"
        );
        let e = rc(&["--squash", "1:1"], &file).unwrap_err().to_string();
        assert!(e.contains("--squash (SQUASH) applies only to one --export directory, and with neither --export nor --exports the exports come from"), "{e}");
    }

    #[test]
    fn allow_lists() {
        assert!(parse_allow("*").unwrap().is_empty());
        let n = parse_allow("10.0.0.0/8, 192.168.1.5,::1").unwrap();
        assert_eq!(n.len(), 3);
        let mut c = Config::new("/x");
        c.allow = n;
        assert!(c.allows("10.1.2.3".parse().unwrap()));
        assert!(c.allows("::ffff:10.1.2.3".parse().unwrap()));
        assert!(!c.allows("127.0.0.1".parse().unwrap()));
        assert!(parse_allow("10.0.0.0/33").is_err());
        assert!(parse_allow("nonsense").is_err());
    }

    #[test]
    fn squash_spellings() {
        assert_eq!(parse_squash("65534:65534").unwrap(), (65534, 65534));
        assert_eq!(parse_squash("1000").unwrap(), (1000, 1000));
        assert!(parse_squash("a:b").is_err());
    }
}
