//! NFS-Ganesha (VFS FSAL, NFSv3 over TCP on 127.0.0.1) as the control server of the
//! kernel-client and fault tests; killed on drop.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;

/// A running Ganesha exporting one directory read-write (no root squash).
pub struct Ganesha {
    dir: tempfile::TempDir,
    pub export: PathBuf,
    pub nfs_port: u16,
    pub mount_port: u16,
    pid: Option<i32>,
}

impl Ganesha {
    /// Starts Ganesha on `export`, or `None` (after `SKIP:`) when it is not installed;
    /// under CI missing is a failure.
    pub fn start(export: &Path) -> Option<Ganesha> {
        common::require_tool("ganesha.nfsd")?;
        let rpcbind = common::require_tool("rpcbind")?;
        // Ganesha 4.3 aborts when it cannot register with rpcbind. rpcbind is shared by
        // every test on the machine: start it if it is not running (a second `rpcbind -w`
        // just fails), never stop it.
        let _ = Command::new(rpcbind)
            .arg("-w")
            .stderr(Stdio::null())
            .status();
        let mut g = Ganesha {
            dir: tempfile::tempdir().unwrap(),
            export: export.to_path_buf(),
            nfs_port: common::free_port(),
            mount_port: common::free_port(),
            pid: None,
        };
        g.launch();
        Some(g)
    }

    /// (Re)starts the server on the same ports, e.g. after [`Ganesha::kill`].
    pub fn launch(&mut self) {
        let conf = self.dir.path().join("ganesha.conf");
        std::fs::write(
            &conf,
            format!(
                "NFS_CORE_PARAM {{ Protocols = 3; NFS_Port = {}; MNT_Port = {}; NLM_Port = {}; \
                 Rquota_Port = {}; Bind_addr = 127.0.0.1; Enable_NLM = false; Enable_RQUOTA = false; }}\n\
                 NFSV4 {{ Graceless = true; }}\n\
                 EXPORT {{ Export_Id = 1; Path = {}; Pseudo = /export; Access_Type = RW; \
                 Squash = No_Root_Squash; Protocols = 3; Transports = TCP; SecType = sys; \
                 FSAL {{ Name = VFS; }} }}\nLOG {{ Default_Log_Level = WARN; }}\n",
                self.nfs_port,
                self.mount_port,
                common::free_port(),
                common::free_port(),
                self.export.display()
            ),
        )
        .unwrap();
        // Two Ganeshas registering with rpcbind at the same instant make one abort:
        // serialise start-ups across test processes with a file lock, and retry.
        let lock = std::fs::File::create("/tmp/servelab-ganesha-start.lock").unwrap();
        // SAFETY: flock on a descriptor we own; released when `lock` drops.
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
        for _ in 0..3 {
            if self.try_launch(&conf) {
                return;
            }
            self.kill();
        }
        panic!(
            "ganesha did not start: {}",
            std::fs::read_to_string(self.dir.path().join("ganesha.log")).unwrap_or_default()
        );
    }

    fn try_launch(&mut self, conf: &Path) -> bool {
        let pidfile = self.dir.path().join("ganesha.pid");
        let _ = std::fs::remove_file(&pidfile);
        let ok = Command::new("ganesha.nfsd")
            .arg("-f")
            .arg(conf)
            .arg("-L")
            .arg(self.dir.path().join("ganesha.log"))
            .arg("-p")
            .arg(&pidfile)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return false;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(pid) = std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                self.pid = Some(pid);
            }
            let up = |p| {
                TcpStream::connect_timeout(
                    &SocketAddr::from(([127, 0, 0, 1], p)),
                    Duration::from_millis(200),
                )
                .is_ok()
            };
            if self.pid.is_some() && up(self.nfs_port) && up(self.mount_port) {
                return true;
            }
            let dead = self.pid.is_some_and(|p| !alive(p));
            if dead || Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the Ganesha this value started (and only it) and waits for it to exit.
    /// The export as an `nfs://` URL in libnfs's form (what httpd's `--nfs` takes).
    pub fn url(&self) -> String {
        format!(
            "nfs://127.0.0.1{}?version=3&nfsport={}&mountport={}",
            self.export.display(),
            self.nfs_port,
            self.mount_port
        )
    }

    pub fn kill(&mut self) {
        if let Some(pid) = self.pid.take() {
            // SAFETY: kill(2) of the process this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

impl Drop for Ganesha {
    fn drop(&mut self) {
        self.kill();
    }
}

/// True while `pid` exists and is not a zombie (a daemon's parent may never reap it).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}
