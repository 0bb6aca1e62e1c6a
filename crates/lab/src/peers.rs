//! Third-party peers started next to our servers when the machine has them: nginx, h2o
//! and Apache serving the dataset over HTTP, NFS-Ganesha exporting it over NFSv3.
//!
//! Each is started in the foreground from a configuration written into a private
//! directory, on free loopback ports, and stopped when its [`ExternalServer`] is dropped.
//! The configurations are the ones in `shared/notes/baselines.md`, tried on a 2-core
//! Debian 12 machine.

use std::fmt;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::process::Supervised;
use crate::{LabError, Result, find_program, free_port, is_root};

/// The peers `compare` knows how to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Baseline {
    Nginx,
    Apache,
    H2o,
    Ganesha,
    KernelNfs,
}

impl Baseline {
    pub const ALL: [Baseline; 5] = [
        Baseline::Nginx,
        Baseline::Apache,
        Baseline::H2o,
        Baseline::Ganesha,
        Baseline::KernelNfs,
    ];

    pub fn parse(name: &str) -> Option<Baseline> {
        match name.trim().to_ascii_lowercase().as_str() {
            "nginx" => Some(Baseline::Nginx),
            "apache" | "apache2" | "httpd-apache" => Some(Baseline::Apache),
            "h2o" => Some(Baseline::H2o),
            "ganesha" | "nfs-ganesha" => Some(Baseline::Ganesha),
            "kernel-nfs" | "knfs" | "kernel" => Some(Baseline::KernelNfs),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Baseline::Nginx => "nginx",
            Baseline::Apache => "apache",
            Baseline::H2o => "h2o",
            Baseline::Ganesha => "ganesha",
            Baseline::KernelNfs => "kernel-nfs",
        }
    }

    /// Where the program is, or why this baseline cannot run here.
    pub fn detect(self) -> Result<PathBuf> {
        match self {
            Baseline::Nginx => find_program("nginx").ok_or_else(|| {
                LabError::Missing("nginx is not installed (apt-get install nginx)".into())
            }),
            Baseline::Apache => find_program("apache2").ok_or_else(|| {
                LabError::Missing("apache2 is not installed (apt-get install apache2)".into())
            }),
            Baseline::H2o => detect_h2o(),
            Baseline::Ganesha => {
                let ganesha = find_program("ganesha.nfsd").ok_or_else(|| {
                    LabError::Missing(
                        "NFS-Ganesha is not installed (apt-get install nfs-ganesha nfs-ganesha-vfs)"
                            .into(),
                    )
                })?;
                find_program("rpcbind").ok_or_else(|| {
                    LabError::Missing(
                        "rpcbind is not installed; Ganesha 4 aborts without it (apt-get install rpcbind)"
                            .into(),
                    )
                })?;
                if !Path::new("/usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so").exists()
                    && !Path::new("/usr/lib/ganesha/libfsalvfs.so").exists()
                {
                    return Err(LabError::Missing(
                        "Ganesha's VFS backend is missing (apt-get install nfs-ganesha-vfs)".into(),
                    ));
                }
                Ok(ganesha)
            }
            Baseline::KernelNfs => {
                let helper = find_program("mount.nfs").ok_or_else(|| {
                    LabError::Missing(
                        "no kernel NFS client on this machine (mount.nfs not found; apt-get install nfs-common where the kernel has NFS)"
                            .into(),
                    )
                })?;
                let has_fs = std::fs::read_to_string("/proc/filesystems")
                    .is_ok_and(|t| t.lines().any(|l| l.trim_end().ends_with("\tnfs")));
                if !has_fs {
                    return Err(LabError::Missing(
                        "the kernel has no NFS client (no `nfs` in /proc/filesystems)".into(),
                    ));
                }
                if !is_root() {
                    return Err(LabError::Missing("mounting NFS needs root".into()));
                }
                Ok(helper)
            }
        }
    }
}

/// The one launcher of baselines: which HTTP peers a comparison runs beside ours, and how
/// any baseline is started. `compare` and `bench` read these instead of matching on the
/// variants themselves, so a new HTTP peer is its variant plus one line in
/// [`Baseline::HTTP_PEERS`] and one arm in [`Baseline::start`].
impl Baseline {
    /// HTTP servers serving the dataset from local disk beside ours, in report order.
    pub const HTTP_PEERS: &'static [Baseline] = &[Baseline::Nginx, Baseline::Apache, Baseline::H2o];

    /// Starts this baseline on `root` (served or exported): the one call for every peer.
    /// NFS-Ganesha serves NFSv3 and NFSv4.0 ([`start_ganesha_v4`]), so NFS-level runs have
    /// their control over both; the kernel NFS client is not a server we start.
    pub fn start(self, root: &Path) -> Result<ExternalServer> {
        match self {
            Baseline::Nginx => start_nginx(root),
            Baseline::Apache => start_apache(root),
            Baseline::H2o => start_h2o(root),
            Baseline::Ganesha => start_ganesha_v4(root),
            Baseline::KernelNfs => Err(LabError::Missing(
                "the kernel NFS client is mounted, not started: run httpd --root on the mount"
                    .into(),
            )),
        }
    }
}

impl fmt::Display for Baseline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A running third-party server; stopped (SIGTERM, 5 s, SIGKILL) on drop.
pub struct ExternalServer {
    pub addr: SocketAddr,
    /// The second port of servers that have one (Ganesha's MOUNT port).
    pub extra_port: Option<u16>,
    /// The directory it serves or exports.
    root: PathBuf,
    /// How it was started, to start it again on the same ports ([`ExternalServer::restart`]).
    launch: Launch,
    // Field order matters: the child stops before its work directory goes.
    child: Supervised,
    _workdir: tempfile::TempDir,
}

impl ExternalServer {
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// The directory it serves (HTTP) or exports (NFS).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// SIGKILL now, as a crash would; its ports and configuration are kept for
    /// [`ExternalServer::restart`].
    pub fn kill(&mut self) {
        self.child.kill();
    }

    /// Starts it again on the same ports with the same configuration (after
    /// [`ExternalServer::kill`], or stopping a running one first) and waits until it
    /// accepts. Ganesha's restart holds the start-up lock and retries like its start.
    pub fn restart(&mut self) -> Result<()> {
        self.child.kill();
        let _lock = self.launch.serialised.then(ganesha_lock).transpose()?;
        let mut last = None;
        for _ in 0..self.launch.attempts() {
            match self.launch.start() {
                Ok(child) => {
                    self.child = child;
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("at least one attempt was made"))
    }
}

/// A program, its arguments and the ports that must accept before it counts as up.
struct Launch {
    name: &'static str,
    program: PathBuf,
    args: Vec<std::ffi::OsString>,
    log: PathBuf,
    ready: Vec<SocketAddr>,
    /// Whether start-ups hold the cross-process Ganesha lock and are retried.
    serialised: bool,
}

impl Launch {
    fn attempts(&self) -> usize {
        if self.serialised { 3 } else { 1 }
    }

    /// Starts the server and waits until it accepts on every ready port or exits, or
    /// 15 s pass.
    fn start(&self) -> Result<Supervised> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = Supervised::spawn(self.name, &mut cmd, Some(&self.log))?
            .with_grace(Duration::from_secs(5));
        child.wait_ready(&self.ready, Duration::from_secs(15))?;
        Ok(child)
    }
}

/// Starts nginx serving `root` on a free loopback port (sendfile on, 2 workers).
pub fn start_nginx(root: &Path) -> Result<ExternalServer> {
    let program = Baseline::Nginx.detect()?;
    let dir = workdir("nginx")?;
    let port = free_port()?;
    let d = dir.path().display();
    let conf = format!(
        "worker_processes 2;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\ndaemon off;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  sendfile on; tcp_nopush on;\n  keepalive_requests 1000000;\n\
         \x20 client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;\n\
         \x20 uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
         \x20 types {{ text/html html; application/octet-stream bin; }}\n\
         \x20 server {{ listen 127.0.0.1:{port}; root {}; }}\n}}\n",
        root.display()
    );
    let conf_path = dir.path().join("nginx.conf");
    write_config(&conf_path, &conf)?;
    let args = vec![
        "-c".into(),
        conf_path.into(),
        "-e".into(),
        dir.path().join("error.log").into(),
    ];
    finish_start("nginx", program, args, dir, root, (port, None), "error.log")
}

/// Where h2o is, or why it cannot run here ([`Baseline::H2o`]'s detection).
pub fn detect_h2o() -> Result<PathBuf> {
    find_program("h2o")
        .ok_or_else(|| LabError::Missing("h2o is not installed (apt-get install h2o)".into()))
}

/// The first line of `program --version` (h2o: `h2o version 2.2.5`), or `None` when it
/// cannot be run or says nothing.
pub fn program_version(program: &Path) -> Option<String> {
    let out = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    // nginx prints its version on stderr, h2o on stdout.
    let text = [out.stdout, out.stderr].concat();
    let line = String::from_utf8_lossy(&text)
        .lines()
        .next()?
        .trim()
        .to_string();
    (!line.is_empty()).then_some(line)
}

/// Starts h2o serving `root` on a free loopback port: 2 threads (one per core here, as
/// nginx's 2 workers), no access log, no on-the-fly compression, its defaults otherwise
/// (sendfile for files, keep-alive). Run as root, it keeps root rather than switching to
/// `nobody`, who could not read a test's private directory.
pub fn start_h2o(root: &Path) -> Result<ExternalServer> {
    let program = detect_h2o()?;
    let dir = workdir("h2o")?;
    let port = free_port()?;
    let d = dir.path().display();
    let user = if is_root() { "user: root\n" } else { "" };
    let conf = format!(
        "listen:\n  host: 127.0.0.1\n  port: {port}\nnum-threads: 2\n{user}\
         pid-file: {d}/h2o.pid\nerror-log: {d}/error.log\ncompress: OFF\n\
         hosts:\n  default:\n    paths:\n      /:\n        file.dir: {}\n",
        root.display()
    );
    let conf_path = dir.path().join("h2o.conf");
    write_config(&conf_path, &conf)?;
    let args = vec!["-c".into(), conf_path.into()];
    finish_start("h2o", program, args, dir, root, (port, None), "error.log")
}

/// Starts Apache 2.4 (event MPM, sendfile on) serving `root` on a free loopback port.
pub fn start_apache(root: &Path) -> Result<ExternalServer> {
    let program = Baseline::Apache.detect()?;
    let dir = workdir("apache")?;
    let port = free_port()?;
    let d = dir.path().display();
    let r = root.display();
    let user = if is_root() {
        "User www-data\nGroup www-data\n"
    } else {
        ""
    };
    let conf = format!(
        "ServerRoot \"/etc/apache2\"\nPidFile {d}/apache.pid\nDefaultRuntimeDir {d}\n\
         Mutex file:{d} default\nListen 127.0.0.1:{port}\n\
         LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so\n\
         LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so\n\
         LoadModule mime_module /usr/lib/apache2/modules/mod_mime.so\n\
         LoadModule dir_module /usr/lib/apache2/modules/mod_dir.so\n\
         ServerName localhost\n{user}ErrorLog {d}/error.log\nDocumentRoot \"{r}\"\n\
         <Directory \"{r}\">\n  Require all granted\n</Directory>\n\
         TypesConfig /etc/mime.types\nEnableSendfile On\nMaxKeepAliveRequests 0\n"
    );
    let conf_path = dir.path().join("apache.conf");
    write_config(&conf_path, &conf)?;
    // Apache's children run as www-data: they must be able to enter the work directory.
    make_traversable(dir.path());
    let args = vec!["-f".into(), conf_path.into(), "-DFOREGROUND".into()];
    finish_start(
        "apache",
        program,
        args,
        dir,
        root,
        (port, None),
        "error.log",
    )
}

/// Where Ganesha start-ups are serialised across processes (see [`start_ganesha`]).
const GANESHA_LOCK: &str = "/tmp/servelab-ganesha-start.lock";

/// Starts NFS-Ganesha (VFS backend, NFSv3 over TCP) exporting `root`; starts `rpcbind`
/// first when none runs, since Ganesha 4 aborts if it cannot register.
/// `addr` is the NFS port, `extra_port` the MOUNT port.
///
/// Two Ganeshas registering with rpcbind at the same moment make one of them abort (seen
/// when tests and a comparison run side by side), so start-ups hold an exclusive lock on
/// a shared file, and a failed start is retried on fresh ports (three attempts).
pub fn start_ganesha(root: &Path) -> Result<ExternalServer> {
    start_ganesha_with(root, false, "No_Root_Squash")
}

/// [`start_ganesha`] serving NFSv4 as well (`Protocols = 3, 4`), with `root` as the
/// pseudo-root `/`, so `mount -t nfs4 host:/` mounts it (graceless, as the v3 one).
pub fn start_ganesha_v4(root: &Path) -> Result<ExternalServer> {
    start_ganesha_with(root, true, "No_Root_Squash")
}

/// [`start_ganesha_v4`] with `Squash = Root_Squash` (uid and gid 0 act as 65534, as
/// rustnfs's default and knfsd's `root_squash`): the control for calls made as squashed
/// root.
pub fn start_ganesha_v4_root_squash(root: &Path) -> Result<ExternalServer> {
    start_ganesha_with(root, true, "Root_Squash")
}

fn start_ganesha_with(root: &Path, v4: bool, squash: &str) -> Result<ExternalServer> {
    let program = Baseline::Ganesha.detect()?;
    ensure_rpcbind()?;
    let _lock = ganesha_lock()?;
    let mut last = None;
    for _ in 0..3 {
        match try_start_ganesha(&program, root, v4, squash) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("three attempts were made"))
}

/// Holds [`GANESHA_LOCK`] exclusively until the returned file is dropped.
fn ganesha_lock() -> Result<std::fs::File> {
    let lock = std::fs::File::create(GANESHA_LOCK)
        .map_err(|e| LabError::io(format!("cannot open {GANESHA_LOCK}"), e))?;
    // SAFETY: flock(2) on a descriptor we own; the lock is released when `lock` drops.
    unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
    Ok(lock)
}

fn try_start_ganesha(
    program: &Path,
    root: &Path,
    v4: bool,
    squash: &str,
) -> Result<ExternalServer> {
    // Over v4, owners as numeric strings both ways, as rustnfs and Linux clients with
    // AUTH_SYS use them: Ganesha's default maps through the host's user database and
    // answers uids it has no name for as nobody.
    let (protocols, pseudo, numeric) = if v4 {
        ("3, 4", "/", " Only_Numeric_Owners = true;")
    } else {
        ("3", "/servelab", "")
    };
    let dir = workdir("ganesha")?;
    let nfs_port = free_port()?;
    let mnt_port = free_port()?;
    let nlm_port = free_port()?;
    let rq_port = free_port()?;
    let conf = format!(
        "NFS_CORE_PARAM {{\n Protocols = {protocols};\n NFS_Port = {nfs_port};\n MNT_Port = {mnt_port};\n\
         NLM_Port = {nlm_port};\n Rquota_Port = {rq_port};\n Bind_addr = 127.0.0.1;\n\
         Enable_NLM = false;\n Enable_RQUOTA = false;\n}}\nNFSV4 {{ Graceless = true;{numeric} }}\n\
         NFS_KRB5 {{ Active_krb5 = false; }}\n\
         EXPORT {{\n Export_Id = 1;\n Path = {};\n Pseudo = {pseudo};\n Access_Type = RW;\n\
         Squash = {squash};\n Protocols = {protocols};\n Transports = TCP;\n SecType = sys;\n\
         FSAL {{ Name = VFS; }}\n}}\nLOG {{ Default_Log_Level = WARN; }}\n",
        root.display()
    );
    let conf_path = dir.path().join("ganesha.conf");
    write_config(&conf_path, &conf)?;
    let args = vec![
        "-F".into(),
        "-f".into(),
        conf_path.into(),
        "-L".into(),
        dir.path().join("ganesha.log").into(),
        "-p".into(),
        dir.path().join("ganesha.pid").into(),
    ];
    let program = program.to_path_buf();
    finish_start(
        "ganesha",
        program,
        args,
        dir,
        root,
        (nfs_port, Some(mnt_port)),
        "ganesha.log",
    )
}

/// Starts the server once (the caller retries) and waits until it accepts on `port`
/// (and `extra_port`) or exits, or 15 s pass.
fn finish_start(
    name: &'static str,
    program: PathBuf,
    args: Vec<std::ffi::OsString>,
    dir: tempfile::TempDir,
    root: &Path,
    (port, extra_port): (u16, Option<u16>),
    log: &str,
) -> Result<ExternalServer> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut ready = vec![addr];
    ready.extend(extra_port.map(|p| SocketAddr::from(([127, 0, 0, 1], p))));
    let launch = Launch {
        name,
        program,
        args,
        log: dir.path().join(log),
        ready,
        serialised: name == "ganesha",
    };
    let child = launch.start()?;
    Ok(ExternalServer {
        addr,
        extra_port,
        root: root.to_path_buf(),
        launch,
        child,
        _workdir: dir,
    })
}

fn write_config(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text)
        .map_err(|e| LabError::io(format!("cannot write {}", path.display()), e))
}

fn ensure_rpcbind() -> Result<()> {
    let port111 = SocketAddr::from(([127, 0, 0, 1], 111));
    if TcpStream::connect_timeout(&port111, Duration::from_millis(300)).is_ok() {
        return Ok(());
    }
    let program = find_program("rpcbind")
        .ok_or_else(|| LabError::Missing("rpcbind is not installed".into()))?;
    // `rpcbind -w` daemonizes and stays up after we exit: other runs reuse it. A second
    // one started at the same moment by another process just fails, so its status is
    // not the verdict — whether port 111 answers is. It keeps no descriptor of ours past
    // stdio: one inherited from the caller (`flock /tmp/bench.lock servelab bench …`)
    // would hold that lock for as long as rpcbind lives.
    let mut rpcbind = Command::new(program);
    rpcbind.arg("-w").stderr(Stdio::null());
    // SAFETY: close_range is async-signal-safe and touches only the child's descriptors.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut rpcbind, || {
            libc::close_range(3, libc::c_uint::MAX, 0);
            Ok(())
        });
    }
    let _ = rpcbind.status();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&port111, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(LabError::Failed(
        "rpcbind was started but does not answer on port 111".into(),
    ))
}

fn workdir(name: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("servelab-{name}-"))
        .tempdir()
        .map_err(|e| LabError::io(format!("cannot create a work directory for {name}"), e))
}

fn make_traversable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h2o_serves_the_root_when_installed() {
        let Ok(program) = detect_h2o() else {
            eprintln!("SKIP: h2o is not installed");
            return;
        };
        let version = program_version(&program).expect("h2o --version");
        assert!(version.starts_with("h2o version "), "{version}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), b"hello h2o").unwrap();
        let server = start_h2o(dir.path()).unwrap();
        let (status, body) =
            crate::http::get(server.addr, "/a.txt", Duration::from_secs(5)).unwrap();
        assert_eq!((status, body.as_slice()), (200, b"hello h2o".as_slice()));
    }

    #[test]
    fn names_parse_back() {
        for b in Baseline::ALL {
            assert_eq!(Baseline::parse(b.name()), Some(b));
        }
        assert_eq!(Baseline::parse("Apache2"), Some(Baseline::Apache));
        assert_eq!(Baseline::parse("iis"), None);
    }
}
