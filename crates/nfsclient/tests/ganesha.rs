//! nfsclient against a real NFS-Ganesha (VFS backend) started by the test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nfsclient::nfs3_types::nfs3::stable_how;
use nfsclient::{Client, ClientConfig, Error, FileKind, NfsUrl};

fn tool(name: &str) -> Option<PathBuf> {
    let found = ["/usr/bin", "/usr/sbin", "/sbin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        if std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false") {
            panic!("{name} is required in CI");
        }
        eprintln!("SKIP: {name} is not installed");
    }
    found
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running Ganesha exporting `dir`; killed on drop.
struct Ganesha {
    dir: tempfile::TempDir,
    export: PathBuf,
    nfs_port: u16,
    mount_port: u16,
    pid: Option<i32>,
}

impl Ganesha {
    fn start() -> Option<Ganesha> {
        let ganesha = tool("ganesha.nfsd")?;
        let rpcbind = tool("rpcbind")?;
        // Ganesha registers with rpcbind and aborts without it; a second `rpcbind -w`
        // while one runs just fails, which is fine. rpcbind is a shared system service
        // and is left running.
        let _ = Command::new(rpcbind).arg("-w").status();
        let dir = tempfile::tempdir().unwrap();
        let export = dir.path().join("export");
        std::fs::create_dir(&export).unwrap();
        let mut g = Ganesha {
            export,
            nfs_port: free_port(),
            mount_port: free_port(),
            pid: None,
            dir,
        };
        g.launch(&ganesha);
        Some(g)
    }

    fn launch(&mut self, bin: &Path) {
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
                free_port(),
                free_port(),
                self.export.display()
            ),
        )
        .unwrap();
        // Two Ganeshas registering with rpcbind at the same instant make one abort
        // ("Cannot register NFS V3"): serialise start-ups across processes, and retry.
        let lock = std::fs::File::create("/tmp/servelab-ganesha-start.lock").unwrap();
        // SAFETY: flock on a file descriptor we own; released when `lock` is dropped.
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
        for attempt in 0..3 {
            if self.try_launch(bin, &conf) {
                return;
            }
            eprintln!("ganesha start attempt {attempt} failed; retrying");
            self.stop();
        }
        panic!(
            "ganesha did not start listening: {}",
            std::fs::read_to_string(self.dir.path().join("ganesha.log")).unwrap_or_default()
        );
    }

    fn try_launch(&mut self, bin: &Path, conf: &Path) -> bool {
        let pidfile = self.dir.path().join("ganesha.pid");
        let _ = std::fs::remove_file(&pidfile);
        let status = Command::new(bin)
            .arg("-f")
            .arg(conf)
            .arg("-L")
            .arg(self.dir.path().join("ganesha.log"))
            .arg("-p")
            .arg(&pidfile)
            .status()
            .unwrap();
        assert!(status.success(), "ganesha.nfsd failed to start");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(pid) = std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                self.pid = Some(pid);
            }
            if self.pid.is_some()
                && std::net::TcpStream::connect(("127.0.0.1", self.nfs_port)).is_ok()
                && std::net::TcpStream::connect(("127.0.0.1", self.mount_port)).is_ok()
            {
                return true;
            }
            let dead = self
                .pid
                .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
            if dead || Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn stop(&mut self) {
        if let Some(pid) = self.pid.take() {
            // SAFETY: plain kill(2) on the pid this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    fn url(&self, path: &str) -> String {
        self.url_on("127.0.0.1", path)
    }

    fn url_on(&self, host: &str, path: &str) -> String {
        format!(
            "nfs://{host}{}{}?version=3&nfsport={}&mountport={}",
            self.export.display(),
            path,
            self.nfs_port,
            self.mount_port
        )
    }
}

impl Drop for Ganesha {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A name other than `localhost` that /etc/hosts maps to 127.0.0.1 (so the client
/// resolves it), if there is one.
fn loopback_name() -> Option<String> {
    let hosts = std::fs::read_to_string("/etc/hosts").ok()?;
    hosts.lines().find_map(|line| {
        let mut words = line.split('#').next()?.split_whitespace();
        if words.next()? != "127.0.0.1" {
            return None;
        }
        words
            .find(|w| !w.eq_ignore_ascii_case("localhost"))
            .map(str::to_string)
    })
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_lookup_readdir_against_ganesha() {
    let Some(g) = Ganesha::start() else { return };
    let data = pattern(3 << 20);
    std::fs::create_dir(g.export.join("sub")).unwrap();
    std::fs::write(g.export.join("sub/big.bin"), &data).unwrap();

    // The whole path is not an export: the client walks up to the export itself.
    let url = NfsUrl::parse(&g.url("/sub/big.bin")).unwrap();
    let client = Client::connect(&url, ClientConfig::default())
        .await
        .unwrap();
    // Ganesha lets MOUNT take a subdirectory of an export, so the walk stops at sub/.
    assert_eq!(
        client.url().full_path(),
        format!("{}/sub/big.bin", g.export.display())
    );
    assert_eq!(client.path(), "big.bin");

    let (fh, attr) = client.lookup_path(client.path()).await.unwrap();
    let client = Client::connect(&NfsUrl::parse(&g.url("")).unwrap(), ClientConfig::default())
        .await
        .unwrap();
    assert_eq!(client.path(), "");
    assert_eq!(attr.kind, FileKind::File);
    assert_eq!(attr.size, data.len() as u64);
    let mut got = Vec::new();
    let mut off = 0u64;
    loop {
        let r = client.read(&fh, off, client.rtmax()).await.unwrap();
        off += r.data.len() as u64;
        got.extend_from_slice(&r.data);
        if r.eof || r.data.is_empty() {
            break;
        }
    }
    assert_eq!(got, data);

    std::os::unix::fs::symlink("big.bin", g.export.join("sub/link")).unwrap();
    let (lfh, lattr) = client.lookup_path("sub/link").await.unwrap();
    assert_eq!(lattr.kind, FileKind::Symlink);
    assert_eq!(client.readlink(&lfh).await.unwrap(), "big.bin");

    let err = client.lookup_path("sub/missing").await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert!(matches!(
        client.lookup_path("sub/../x").await,
        Err(Error::BadPath { .. })
    ));

    let root = client.root();
    let (dir, _) = client.mkdir(&root, "made", 0o755).await.unwrap();
    let (f, _) = client.create(&dir, "w.bin", 0o644).await.unwrap();
    let n = client
        .write(&f, 0, b"hello nfs", stable_how::FILE_SYNC)
        .await
        .unwrap();
    assert_eq!(n, 9);
    assert_eq!(
        std::fs::read(g.export.join("made/w.bin")).unwrap(),
        b"hello nfs"
    );
    let mut names: Vec<String> = client
        .readdir(&root)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.sort();
    assert_eq!(names, ["made", "sub"]);
    client.remove(&dir, "w.bin").await.unwrap();
    client.rmdir(&root, "made").await.unwrap();
    assert!(!g.export.join("made").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_server_fails_fast_and_client_recovers() {
    let Some(mut g) = Ganesha::start() else {
        return;
    };
    std::fs::write(g.export.join("f.txt"), b"still here").unwrap();
    // Through a host name when /etc/hosts has one for 127.0.0.1: resolved on every new
    // connection, including the reconnects after the restart below.
    let host = loopback_name().unwrap_or_else(|| "127.0.0.1".into());
    let url = NfsUrl::parse(&g.url_on(&host, "//f.txt")).unwrap();
    assert_eq!(url.host.to_string(), host);
    let cfg = ClientConfig {
        connections: 4,
        call_timeout: Duration::from_secs(3),
        connect_timeout: Duration::from_secs(1),
    };
    let client = Client::connect(&url, cfg).await.unwrap();
    let (fh, _) = client.lookup_path("f.txt").await.unwrap();

    g.stop();
    let t = Instant::now();
    let err = client.getattr(&fh).await.unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());

    let bin = tool("ganesha.nfsd").unwrap();
    g.launch(&bin);
    // Ganesha's handles survive a restart; the pool reconnects on the next call.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client.lookup_path("f.txt").await {
            Ok((fh2, attr)) => {
                assert_eq!(attr.size, 10);
                let r = client.read(&fh2, 0, 100).await.unwrap();
                assert_eq!(&r.data[..], b"still here");
                break;
            }
            Err(e) => {
                // Ganesha may answer JUKEBOX/grace for a moment after start.
                assert!(Instant::now() < deadline, "no recovery: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
