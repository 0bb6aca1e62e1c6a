//! The deployment paths for real: the FROM-scratch images, docker/compose.yml's scenarios,
//! the Swarm stack, the Kubernetes manifests and lxc/run-local.sh.
//!
//! Docker is optional (issue 6): without a reachable engine these tests print `SKIP` and
//! pass, in CI too. The images are built once per run by `docker/build.sh` (static
//! binaries in `<target>/static`, a separate cargo target directory). Every container,
//! network, stack and bridge gets a name with this process's id, and a Drop guard removes
//! it, so the tests run beside each other and beside other test runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{OnceLock, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use serde_yaml::Value;

use crate::common;

/// The image tag the tests build and run (not `latest`, to leave a user's images alone).
const TAG: &str = "e2e";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A name unique to this process and call: containers, networks, projects.
fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs a command, returning its output (never panics on a failing status).
fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Runs a command and returns its trimmed stdout; panics with stderr on failure.
fn run_text(cmd: &mut Command) -> String {
    let out = common::run_ok(cmd.stdin(Stdio::null()));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn docker(args: &[&str]) -> Command {
    let mut c = Command::new("docker");
    c.args(args);
    c
}

/// True when a Docker engine answers.
fn engine_answers() -> bool {
    Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success())
}

/// True when a Docker engine answers; otherwise prints SKIP (in CI too: Docker is optional).
fn docker_available(test: &str) -> bool {
    let ok = engine_answers();
    if !ok {
        eprintln!("SKIP {test}: no Docker engine here (Docker is optional, see docker/README.md)");
    }
    ok
}

/// Polls `f` every 200 ms until it returns Some or `limit` passes.
fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Commands run in reverse order when dropped: teardown also on panic.
#[derive(Default)]
struct Cleanup(Vec<Command>);

impl Cleanup {
    fn push(&mut self, cmd: Command) {
        self.0.push(cmd);
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        while let Some(mut cmd) = self.0.pop() {
            let _ = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// What `docker/build.sh` produced.
struct Built {
    /// The static binaries (for the host side of the tests).
    bin_dir: PathBuf,
    /// `docker/build.sh`'s output: one `image NAME:TAG BYTES (..)` line per image.
    sizes: BTreeMap<String, u64>,
}

/// Builds the static binaries and the three images once per test run.
fn built() -> &'static Built {
    static BUILT: OnceLock<Result<Built, String>> = OnceLock::new();
    let result = BUILT.get_or_init(|| {
        // <target>/debug/deps/tests-HASH -> <target>
        let exe = std::env::current_exe().unwrap();
        let target = exe.ancestors().nth(3).unwrap().to_path_buf();
        let static_dir = target.join("static");
        let start = Instant::now();
        let out = run(Command::new(repo().join("docker/build.sh"))
            .env("TAG", TAG)
            .env("STATIC_TARGET_DIR", &static_dir)
            // Without an engine (the lxc test's fallback), only the static binaries.
            .env("BINS_ONLY", if engine_answers() { "" } else { "1" }));
        if !out.status.success() {
            return Err(format!(
                "docker/build.sh failed: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        eprintln!("docker/build.sh took {:.1?}:\n{text}", start.elapsed());
        let sizes = text
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                (w.next()? == "image").then_some(())?;
                let name = w.next()?.split(':').next()?.to_string();
                Some((name, w.next()?.parse().ok()?))
            })
            .collect();
        let triple = run_text(Command::new("rustc").arg("-vV"))
            .lines()
            .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
            .unwrap();
        Ok(Built {
            bin_dir: static_dir.join(triple).join("release-static"),
            sizes,
        })
    });
    match result {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    }
}

fn image(name: &str) -> String {
    format!("{name}:{TAG}")
}

/// A data directory with the original dataset, readable and writable by the images'
/// default user (65534), so the containers run without root.
fn dataset() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    common::write_dataset(dir.path());
    chown_tree(dir.path(), 65534);
    dir
}

fn chown_tree(dir: &Path, id: u32) {
    std::os::unix::fs::chown(dir, Some(id), Some(id)).unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            chown_tree(&path, id);
        } else {
            std::os::unix::fs::chown(&path, Some(id), Some(id)).unwrap();
        }
    }
}

/// `docker stats --no-stream` memory of one container, in bytes.
fn container_memory(name: &str) -> u64 {
    let text = run_text(&mut docker(&[
        "stats",
        "--no-stream",
        "--format",
        "{{.MemUsage}}",
        name,
    ]));
    parse_size(text.split('/').next().unwrap_or("").trim())
        .unwrap_or_else(|| panic!("cannot read docker stats memory from {text:?}"))
}

/// Parses docker's human sizes (`1.234MiB`, `512KiB`, `3.1GiB`, `900B`, `2.5MB`).
fn parse_size(text: &str) -> Option<u64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = text.split_at(split);
    let mult = match unit {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        _ => return None,
    };
    Some((num.trim().parse::<f64>().ok()? * mult) as u64)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Samples a container's memory every 250 ms while `work` runs; returns the peak.
fn peak_memory_during<T>(names: &[&str], work: impl FnOnce() -> T) -> (T, Vec<u64>) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let samplers: Vec<_> = names
        .iter()
        .map(|n| {
            let (n, stop) = (n.to_string(), stop.clone());
            std::thread::spawn(move || {
                let mut peak = 0;
                while !stop.load(Ordering::Relaxed) {
                    // A container may be gone when a failing test unwinds: no panic here.
                    let out = run(&mut docker(&[
                        "stats",
                        "--no-stream",
                        "--format",
                        "{{.MemUsage}}",
                        &n,
                    ]));
                    let text = String::from_utf8_lossy(&out.stdout);
                    if let Some(bytes) = parse_size(text.split('/').next().unwrap_or("").trim()) {
                        peak = peak.max(bytes);
                    }
                    std::thread::sleep(Duration::from_millis(250));
                }
                peak
            })
        })
        .collect();
    let out = work();
    stop.store(true, Ordering::Relaxed);
    (
        out,
        samplers.into_iter().map(|s| s.join().unwrap()).collect(),
    )
}

/// GET over HTTP/1.0 with curl; returns the body.
fn http_get(url: &str) -> Vec<u8> {
    common::run_ok(Command::new("curl").args(["-fsS", "--max-time", "30", url])).stdout
}

/// The requests and failed requests a `servelab load --json` file reports, and the JSON.
fn load_counts(json: &Path) -> (u64, u64, serde_json::Value) {
    let text = std::fs::read_to_string(json)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", json.display()));
    let v: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", json.display()));
    let field = |k: &str| {
        v[k].as_u64()
            .unwrap_or_else(|| panic!("no {k} in {}: {text:.400}", json.display()))
    };
    (field("requests"), field("failed"), v)
}

// ---- the rustnfs image ------------------------------------------------------------------

#[test]
fn rustnfs_image_is_small_and_serves_nfs_cat_and_nfs_cp_from_the_host() {
    if !docker_available("rustnfs image") || common::require_tool("nfs-cat").is_none() {
        return;
    }
    let built = built();
    for (name, size) in &built.sizes {
        eprintln!("image {name}: {:.2} MB", *size as f64 / 1e6);
    }
    let size = built.sizes["rustnfs"];
    assert!(
        size < 10_000_000,
        "rustnfs image is {size} bytes, over the 10 MB bar"
    );

    let data = dataset();
    let name = unique("servelab-e2e-nfs-");
    let mut cleanup = Cleanup::default();
    cleanup.push(docker(&["rm", "-f", &name]));
    let volume = format!("{}:/nfs-share", data.path().display());
    // The README's one-liner, with an ephemeral host port on loopback.
    run_text(&mut docker(&[
        "run",
        "-d",
        "--name",
        &name,
        "-p",
        "127.0.0.1::2049",
        "-v",
        &volume,
        "-e",
        "SHARED_DIRECTORY=/nfs-share",
        &image("rustnfs"),
    ]));
    let port = run_text(&mut docker(&["port", &name, "2049/tcp"]));
    let port: u16 = port.rsplit(':').next().unwrap().parse().unwrap();
    let url = |path: &str| {
        format!("nfs://127.0.0.1/nfs-share/{path}?version=3&nfsport={port}&mountport={port}")
    };

    // Served: nfs-cat from the host reads the same bytes.
    let want = std::fs::read(data.path().join("testfile.bin")).unwrap();
    let got = wait_for(Duration::from_secs(15), "rustnfs in its container", || {
        let out = run(Command::new("nfs-cat").arg(url("testfile.bin")));
        out.status.success().then_some(out.stdout)
    });
    assert!(
        got == want,
        "nfs-cat read {} bytes, not the file's {}",
        got.len(),
        want.len()
    );

    // Written: nfs-cp from the host lands in the bind-mounted directory, as uid 65534.
    let upload = common::pseudo_random_bytes(300_000, 99);
    let src = data.path().join("..").join(format!("{name}.upload"));
    std::fs::write(&src, &upload).unwrap();
    let cp = run(Command::new("nfs-cp").arg(&src).arg(url("uploaded.bin")));
    std::fs::remove_file(&src).unwrap();
    assert!(
        cp.status.success(),
        "nfs-cp failed: {}",
        String::from_utf8_lossy(&cp.stderr)
    );
    assert_eq!(
        std::fs::read(data.path().join("uploaded.bin")).unwrap(),
        upload
    );

    // Memory: idle, then while 4 clients read the 10 MiB file 5 times each.
    let idle = container_memory(&name);
    let (_, peaks) = peak_memory_during(&[&name], || {
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let u = url("testfile.bin");
                std::thread::spawn(move || {
                    for _ in 0..5 {
                        let out = run(Command::new("nfs-cat").arg(&u));
                        assert!(out.status.success() && out.stdout.len() == 10 << 20);
                    }
                })
            })
            .collect();
        readers.into_iter().for_each(|r| r.join().unwrap());
    });
    eprintln!(
        "FIGURE rustnfs container memory: idle {:.2} MiB, under load (4 readers) {:.2} MiB \
         (original kernel-NFS image: 28 MB)",
        mib(idle),
        mib(peaks[0])
    );
    assert!(
        idle > 0 && peaks[0] < 512 << 20,
        "implausible memory: {idle} / {}",
        peaks[0]
    );
}

// ---- docker/compose.yml -----------------------------------------------------------------

/// One docker-compose project from docker/compose.yml, torn down on drop.
struct Compose {
    project: String,
    env: Vec<(String, String)>,
    /// Keeps `swarm init`/`leave` of a parallel test out of this project's lifetime.
    _no_swarm_toggle: RwLockReadGuard<'static, ()>,
}

impl Compose {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("docker-compose");
        c.arg("-f")
            .arg(repo().join("docker/compose.yml"))
            .args(["-p", &self.project, "--profile", "load", "--profile", "tcp"])
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    fn container(&self, service: &str) -> String {
        // docker-compose v1 names containers PROJECT_SERVICE_1.
        run_text(&mut docker(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=com.docker.compose.project={}", self.project),
            "--filter",
            &format!("label=com.docker.compose.service={service}"),
        ]))
        .lines()
        .next()
        .unwrap_or_else(|| panic!("no running container for {service}"))
        .to_string()
    }
}

/// Held (read) by compose projects while they run and (write) by `swarm init` / `leave`:
/// while the engine switches swarm mode, its embedded DNS failed a compose container's
/// lookup ("cannot resolve host httpd-a") in parallel runs.
static SWARM_TOGGLE: RwLock<()> = RwLock::new(());

/// Leaves the swarm this test created, and removes the docker_gwbridge network that
/// `swarm init` created and `swarm leave` keeps.
struct LeaveSwarm {
    had_gwbridge: bool,
}

impl Drop for LeaveSwarm {
    fn drop(&mut self) {
        let _toggle = SWARM_TOGGLE.write().unwrap_or_else(|e| e.into_inner());
        let _ = run(&mut docker(&["swarm", "leave", "--force"]));
        if !self.had_gwbridge {
            let _ = run(&mut docker(&["network", "rm", "docker_gwbridge"]));
        }
    }
}

impl Drop for Compose {
    fn drop(&mut self) {
        let _ = self
            .cmd(&["down", "-v", "--remove-orphans", "-t", "2"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn compose_project(data: &Path, results: &Path, extra: &[(&str, String)]) -> Compose {
    let mut env = vec![
        ("TAG".to_string(), TAG.to_string()),
        ("DATA_DIR".to_string(), data.display().to_string()),
        ("RESULTS_DIR".to_string(), results.display().to_string()),
        ("A_PUBLISH".to_string(), "127.0.0.1:".to_string()),
        ("B_PUBLISH".to_string(), "127.0.0.1:".to_string()),
    ];
    // A bridge subnet of our own (10.197.<n>.0/24).
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let net = (std::process::id() as usize * 7 + NEXT.fetch_add(1, Ordering::Relaxed)) % 250 + 1;
    env.push(("LAB_SUBNET".into(), format!("10.197.{net}.0/24")));
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
    Compose {
        project: unique("servelabe2e"),
        env,
        _no_swarm_toggle: SWARM_TOGGLE.read().unwrap_or_else(|e| e.into_inner()),
    }
}

#[test]
fn compose_scenario_a_over_the_bridge_serves_the_same_bytes_as_scenario_b() {
    if !docker_available("compose scenarios")
        || !optional_tool("compose scenarios", "docker-compose")
        || common::require_tool("curl").is_none()
    {
        return;
    }
    built();
    let data = dataset();
    let results = tempfile::tempdir().unwrap();
    chown_tree(results.path(), 65534);
    let requests = 40;
    let compose = compose_project(
        data.path(),
        results.path(),
        &[
            ("REQUESTS", requests.to_string()),
            ("CONCURRENCY", "4".to_string()),
        ],
    );
    common::run_ok(&mut compose.cmd(&["up", "-d", "rustnfs", "httpd-a", "httpd-b"]));
    // The images' HEALTHCHECKs (`rustnfs --healthcheck`, `httpd --healthcheck`) pass.
    let started = Instant::now();
    for svc in ["rustnfs", "httpd-a", "httpd-b"] {
        let container = compose.container(svc);
        wait_for(
            Duration::from_secs(30),
            &format!("{svc} to be healthy"),
            || {
                let status = run_text(&mut docker(&[
                    "inspect",
                    "-f",
                    "{{.State.Health.Status}}",
                    &container,
                ]));
                assert_ne!(status, "unhealthy", "{svc} reported unhealthy");
                (status == "healthy").then_some(())
            },
        );
    }
    eprintln!(
        "FIGURE compose health: rustnfs, httpd-a, httpd-b healthy {:.1} s after up",
        started.elapsed().as_secs_f64()
    );
    let published = |svc: &str| {
        let addr = run_text(&mut compose.cmd(&["port", svc, "8080"]));
        format!("http://{addr}")
    };
    let (a, b) = (published("httpd-a"), published("httpd-b"));
    for file in ["index.html", "small.bin", "testfile.bin"] {
        let want = std::fs::read(data.path().join(file)).unwrap();
        let got_a = wait_for(Duration::from_secs(20), "scenario A to serve", || {
            let out = run(Command::new("curl")
                .args(["-fsS", "--max-time", "30"])
                .arg(format!("{a}/{file}")));
            out.status.success().then_some(out.stdout)
        });
        let got_b = http_get(&format!("{b}/{file}"));
        assert!(
            got_a == want,
            "scenario A (NFS over the bridge) served other bytes for {file}"
        );
        assert!(
            got_b == want,
            "scenario B (local disk) served other bytes for {file}"
        );
    }

    // The load generators in their own containers on the same bridge.
    let services = ["rustnfs", "httpd-a", "httpd-b"];
    let containers: Vec<String> = services.iter().map(|s| compose.container(s)).collect();
    let idle: Vec<u64> = containers.iter().map(|c| container_memory(c)).collect();
    let names: Vec<&str> = containers.iter().map(String::as_str).collect();
    let (_, peak) = peak_memory_during(&names, || {
        for svc in ["load-a", "load-b"] {
            common::run_ok(&mut compose.cmd(&["run", "--rm", svc]));
        }
    });
    let (req_a, err_a, _) = load_counts(&results.path().join("scenario-a.json"));
    let (req_b, err_b, _) = load_counts(&results.path().join("scenario-b.json"));
    assert_eq!((req_a, err_a), (requests, 0), "scenario A load");
    assert_eq!((req_b, err_b), (requests, 0), "scenario B load");
    for (i, svc) in services.iter().enumerate() {
        eprintln!(
            "FIGURE compose {svc}: idle {:.2} MiB, under load {:.2} MiB (original: Apache's \
             instance 174 MB, kernel-NFS image 28 MB)",
            mib(idle[i]),
            mib(peak[i])
        );
    }
}

#[test]
fn compose_tcp_over_the_bridge_and_over_the_host_network() {
    if !docker_available("compose tcp") || !optional_tool("compose tcp", "docker-compose") {
        return;
    }
    built();
    let data = tempfile::tempdir().unwrap();
    let results = tempfile::tempdir().unwrap();
    chown_tree(results.path(), 65534);
    let compose = compose_project(
        data.path(),
        results.path(),
        &[
            ("TCP_HOST_PORT", common::free_port().to_string()),
            ("TCP_DURATION", "3s".to_string()),
        ],
    );
    common::run_ok(&mut compose.cmd(&["up", "-d", "tcp-server-bridge", "tcp-server-host"]));
    let mut figures = Vec::new();
    for (variant, svc) in [("bridge", "load-tcp-bridge"), ("host", "load-tcp-host")] {
        common::run_ok(&mut compose.cmd(&["run", "--rm", svc]));
        let json = results.path().join(format!("tcp-{variant}.json"));
        let (_, errors, v) = load_counts(&json);
        assert_eq!(errors, 0, "{variant}: errors");
        let rate = v["bytes_per_second"].as_f64().expect("bytes_per_second");
        assert!(
            v["body_bytes"].as_u64().unwrap() > 0,
            "{variant}: no bytes moved"
        );
        figures.push((variant, rate * 8.0 / 1e9));
    }
    for (variant, gbit) in &figures {
        eprintln!("FIGURE tcp {variant}: {gbit:.2} Gbit/s");
    }
    eprintln!(
        "FIGURE tcp bridge/host ratio: {:.2}",
        figures[0].1 / figures[1].1
    );
    assert!(figures.iter().all(|(_, g)| *g > 0.0));
}

// ---- docker/stack.yml on a single-node Swarm --------------------------------------------

#[test]
fn swarm_stack_scales_to_three_replicas_and_its_merged_report_counts_every_request() {
    if !docker_available("swarm stack")
        || common::require_tool("curl").is_none()
        || !optional_tool("swarm stack", "nsenter")
    {
        return;
    }
    let built = built();
    // Declared before `cleanup`, so the stack is removed before the swarm is left.
    let mut _swarm: Option<LeaveSwarm> = None;
    let mut cleanup = Cleanup::default();
    let state = run_text(&mut docker(&[
        "info",
        "--format",
        "{{.Swarm.LocalNodeState}}",
    ]));
    if state == "inactive" {
        // `swarm init` creates docker_gwbridge and `swarm leave` keeps it: remove it too
        // when it is ours.
        let had_gwbridge = run(&mut docker(&["network", "inspect", "docker_gwbridge"]))
            .status
            .success();
        let _toggle = SWARM_TOGGLE.write().unwrap_or_else(|e| e.into_inner());
        common::run_ok(&mut docker(&[
            "swarm",
            "init",
            "--advertise-addr",
            "127.0.0.1",
        ]));
        _swarm = Some(LeaveSwarm { had_gwbridge });
    } else if state != "active" {
        eprintln!("SKIP swarm stack: this node's swarm state is {state}");
        return;
    }
    // Without IPVS in the kernel (as on the machine this was written on), Swarm's VIPs and
    // routing mesh cannot balance; DNS round robin is Swarm's documented alternative.
    let mesh = Path::new("/proc/net/ip_vs").exists();
    let mode = if mesh { "vip" } else { "dnsrr" };
    eprintln!(
        "swarm endpoint mode: {mode} (routing mesh {})",
        if mesh {
            "on"
        } else {
            "unavailable: no IPVS in this kernel"
        }
    );

    let data = dataset();
    let results = tempfile::tempdir().unwrap();
    let (per_task, loadgens) = (30u64, 2u64);
    for slot in 1..=loadgens {
        std::fs::create_dir(results.path().join(slot.to_string())).unwrap();
    }
    chown_tree(results.path(), 65534);
    let stack = unique("sle2e");
    let network = format!("{stack}_lab");
    let mesh_port = common::free_port().to_string();
    // One `stack deploy`: httpd finds rustnfs by its service name.
    let deploy = |httpd: u64, loadgen: u64| {
        let mut c = docker(&["stack", "deploy", "--resolve-image", "never", "-c"]);
        c.arg(repo().join("docker/stack.yml"));
        if mesh {
            c.arg("-c").arg(repo().join("docker/stack.mesh.yml"));
            c.env("HTTPD_PORT", &mesh_port);
        }
        c.arg(&stack)
            .env("TAG", TAG)
            .env("DATA_DIR", data.path())
            .env("RESULTS_DIR", results.path())
            .env("ENDPOINT_MODE", mode)
            .env("HTTPD_REPLICAS", httpd.to_string())
            .env("LOADGEN_REPLICAS", loadgen.to_string())
            .env("REQUESTS", per_task.to_string())
            .env("CONCURRENCY", "4")
            .env("FILE", "testfile.bin");
        common::run_ok(&mut c);
    };
    cleanup.push(docker(&["network", "rm", &network]));
    cleanup.push({
        // `stack rm` returns before the tasks are gone; wait so the network can go too.
        let mut c = Command::new("sh");
        c.arg("-c").arg(format!(
            "docker stack rm {stack}; for i in $(seq 100); do \
             [ -z \"$(docker ps -aq --filter label=com.docker.stack.namespace={stack})\" ] && break; \
             sleep 0.2; done"
        ));
        c
    });
    // Running and healthy (the images' HEALTHCHECK): an httpd task that started before
    // rustnfs's name resolved exits and is replaced, and never counts.
    let running = |svc: &str| -> Vec<String> {
        run_text(&mut docker(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=com.docker.swarm.service.name={stack}_{svc}"),
            "--filter",
            "status=running",
            "--filter",
            "health=healthy",
        ]))
        .lines()
        .map(str::to_string)
        .collect()
    };
    let ip_of = |container: &str| {
        run_text(&mut docker(&[
            "inspect",
            "-f",
            &format!("{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}"),
            container,
        ]))
    };

    // 1. rustnfs and one httpd replica in one deploy (httpd resolves `rustnfs`);
    //    2. scaled to three.
    deploy(1, 0);
    wait_for(Duration::from_secs(60), "the rustnfs task", || {
        (running("rustnfs").len() == 1).then_some(())
    });
    wait_for(Duration::from_secs(60), "the first httpd replica", || {
        (running("httpd").len() == 1).then_some(())
    });
    common::run_ok(&mut docker(&[
        "service",
        "scale",
        "-d",
        &format!("{stack}_httpd=3"),
    ]));
    let replicas = wait_for(Duration::from_secs(60), "3 httpd replicas", || {
        let r = running("httpd");
        (r.len() == 3).then_some(r)
    });

    // Every replica serves the same bytes through the one export: curl from inside a
    // replica's network namespace (the overlay is not routed to the host).
    let want = std::fs::read(data.path().join("small.bin")).unwrap();
    let pid = run_text(&mut docker(&[
        "inspect",
        "-f",
        "{{.State.Pid}}",
        &replicas[0],
    ]));
    for container in &replicas {
        let url = format!("http://{}:8080/small.bin", ip_of(container));
        let got = wait_for(Duration::from_secs(20), "an httpd replica to serve", || {
            let out = run(Command::new("nsenter")
                .args(["-t", &pid, "-n", "curl", "-fsS", "--max-time", "10"])
                .arg(&url));
            out.status.success().then_some(out.stdout)
        });
        assert!(got == want, "{url} served other bytes");
    }

    // 3. The load generator as a replicated service; each task writes its own JSON.
    deploy(3, loadgens);
    let files: Vec<PathBuf> = (1..=loadgens)
        .map(|slot| results.path().join(slot.to_string()).join("load.json"))
        .collect();
    wait_for(
        Duration::from_secs(120),
        "every loadgen task's JSON",
        || {
            let states = run_text(&mut docker(&[
                "service",
                "ps",
                "--format",
                "{{.CurrentState}}",
                &format!("{stack}_loadgen"),
            ]));
            let complete = states.lines().filter(|l| l.starts_with("Complete")).count() as u64;
            (complete >= loadgens && files.iter().all(|f| f.exists())).then_some(())
        },
    );
    let merged = results.path().join("merged.json");
    let out = common::run_ok(
        Command::new(built.bin_dir.join("servelab"))
            .args(["report", "--merge"])
            .args(&files)
            .arg("--json")
            .arg(&merged),
    );
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    let (requests, failed, v) = load_counts(&merged);
    let mut sum = 0;
    for f in &files {
        let (r, e, _) = load_counts(f);
        assert_eq!((r, e), (per_task, 0), "{}", f.display());
        sum += r;
    }
    assert_eq!(requests, sum, "the merged report counts every request");
    assert_eq!(requests, per_task * loadgens);
    assert_eq!(failed, 0);
    assert_eq!(v["merged_runs"].as_u64(), Some(loadgens));
    eprintln!(
        "FIGURE swarm: {loadgens} loadgen tasks x {per_task} requests of testfile.bin against \
         3 httpd replicas ({mode}) merged to {requests} requests, {:.0} req/s",
        v["requests_per_second"].as_f64().unwrap_or(0.0)
    );
}

// ---- lxc/run-local.sh: httpd in LXC, rustnfs in Docker ----------------------------------

#[test]
fn lxc_httpd_in_an_application_container_reads_rustnfs_in_docker_across_bridges() {
    // Without Docker (or lxc-execute) the script falls back to network namespaces and says
    // so on its `path=` line: this test runs wherever it is root and has `ip` and curl.
    if common::require_tool("curl").is_none() || !optional_tool("lxc run-local", "ip") {
        return;
    }
    if run_text(Command::new("id").arg("-u")) != "0" {
        eprintln!("SKIP lxc run-local: needs root (bridges, iptables, lxc-execute)");
        return;
    }
    let built = built();
    let data = dataset();
    let results = tempfile::tempdir().unwrap();
    // A NET_ID of our own: 1..250 from the pid, not the script's default.
    let net_id = std::process::id() % 250 + 1;
    let out = run(Command::new(repo().join("lxc/run-local.sh"))
        .arg(data.path())
        .env("HTTPD_BIN", built.bin_dir.join("httpd"))
        .env("SERVELAB_BIN", built.bin_dir.join("servelab"))
        .env("RUSTNFS_BIN", built.bin_dir.join("rustnfs"))
        .env("RUSTNFS_IMAGE", image("rustnfs"))
        .env("NET_ID", net_id.to_string())
        .env("REQUESTS", "40")
        .env("RESULTS_DIR", results.path()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "lxc/run-local.sh failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let kv: BTreeMap<&str, &str> = stdout.lines().filter_map(|l| l.split_once('=')).collect();
    eprintln!("lxc/run-local.sh:\n{stdout}");
    eprintln!("FIGURE lxc run-local ran {}", kv["path"]);
    assert_eq!(kv["result"], "ok");
    assert_eq!(kv["sha256_disk"], kv["sha256_served"]);
    assert!(kv["path"].starts_with("httpd:"), "{stdout}");
    let (requests, errors, _) = load_counts(&results.path().join("lxc-load.json"));
    assert_eq!((requests, errors), (40, 0));
    // The bridge and the Docker network are gone again.
    assert!(
        !run(Command::new("ip").args(["link", "show", &format!("slbr{net_id}")]))
            .status
            .success()
    );
}

// ---- docker/k8s/*.yaml against docker/stack.yml (no cluster needed) ---------------------

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.split("\n---\n")
        .map(|d| serde_yaml::from_str(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// An executable on PATH, or None — for optional helpers that are never required.
fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Like `docker_available`: a missing optional tool skips (Docker's tools are optional).
fn optional_tool(test: &str, name: &str) -> bool {
    let found = find_on_path(name).is_some();
    if !found {
        eprintln!("SKIP {test}: {name} is not installed");
    }
    found
}

/// Replaces compose `${VAR:-default}` / `${VAR:?msg}` with the default (or VAR's name).
fn compose_defaults(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let end = rest[i..].find('}').map(|e| i + e).expect("unclosed ${");
        let inner = &rest[i + 2..end];
        out.push_str(match inner.split_once(":-") {
            Some((_, default)) => default,
            None => inner.split(':').next().unwrap(),
        });
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| {
            s.iter()
                .map(|x| x.as_str().expect("a string").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn k8s_manifests_are_valid_and_match_the_swarm_stack() {
    let k8s = repo().join("docker/k8s");
    let mut docs = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&k8s)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for f in &files {
        docs.extend(yaml_docs(f));
    }
    let by_kind = |kind: &str, name: &str| -> Value {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind}/{name} in docker/k8s"))
            .clone()
    };
    for d in &docs {
        assert!(
            d["apiVersion"].is_string() && d["kind"].is_string(),
            "{d:?}"
        );
        assert!(d["metadata"]["name"].is_string(), "{d:?}");
    }

    let stack_text =
        compose_defaults(&std::fs::read_to_string(repo().join("docker/stack.yml")).unwrap());
    let stack: Value = serde_yaml::from_str(&stack_text).unwrap();
    let services = &stack["services"];
    for svc in ["rustnfs", "httpd"] {
        let dep = by_kind("Deployment", svc);
        let pod = &dep["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        // Same image (tag aside), same arguments as the stack's service.
        let stack_image = services[svc]["image"]
            .as_str()
            .unwrap()
            .split(':')
            .next()
            .unwrap()
            .to_string();
        assert_eq!(
            c["image"].as_str().unwrap().split(':').next().unwrap(),
            stack_image
        );
        assert_eq!(
            strings(&c["args"]),
            strings(&services[svc]["command"]),
            "{svc} args"
        );
        // The selector picks the pod, the Service targets it on a declared port.
        let labels = &dep["spec"]["template"]["metadata"]["labels"];
        for (k, v) in dep["spec"]["selector"]["matchLabels"].as_mapping().unwrap() {
            assert_eq!(
                &labels[k], v,
                "{svc}: selector does not match the pod labels"
            );
        }
        let service = by_kind("Service", svc);
        for (k, v) in service["spec"]["selector"].as_mapping().unwrap() {
            assert_eq!(
                &labels[k], v,
                "{svc}: Service selector does not match the pod"
            );
        }
        let port_names: Vec<&str> = c["ports"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        for p in service["spec"]["ports"].as_sequence().unwrap() {
            let target = p["targetPort"].as_str().unwrap();
            assert!(
                port_names.contains(&target),
                "{svc}: Service targets unknown port {target}"
            );
        }
        assert_eq!(pod["securityContext"]["runAsUser"].as_u64(), Some(65534));
        // Environment equal to the stack's.
        let env: BTreeMap<String, String> = c["env"]
            .as_sequence()
            .map(|s| {
                s.iter()
                    .map(|e| {
                        (
                            e["name"].as_str().unwrap().into(),
                            e["value"].as_str().unwrap().into(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let stack_env: BTreeMap<String, String> = services[svc]["environment"]
            .as_mapping()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.as_str().unwrap().into(), v.as_str().unwrap().into()))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            env, stack_env,
            "{svc}: environment differs from docker/stack.yml"
        );
    }
    // The Service names are the host names the stack's commands use.
    assert_eq!(
        services["httpd"]["environment"]["HTTPD_NFS"].as_str(),
        Some("nfs://rustnfs/nfs-share")
    );
    let httpd = by_kind("Deployment", "httpd");
    assert_eq!(
        httpd["spec"]["replicas"].as_u64(),
        services["httpd"]["deploy"]["replicas"].as_u64()
    );

    let job = by_kind("Job", "loadgen");
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    // The same load; only the result file's name differs (slot vs completion index).
    let (job_args, stack_args) = (
        strings(&c["args"]),
        strings(&services["loadgen"]["command"]),
    );
    let cut = |a: &[String]| {
        a.iter()
            .position(|x| x == "--json")
            .map(|i| a[..i].to_vec())
    };
    assert_eq!(cut(&job_args), cut(&stack_args), "loadgen args");
    assert!(cut(&job_args).is_some(), "the Job writes --json");
    assert!(job_args.last().unwrap().contains("$(JOB_COMPLETION_INDEX)"));
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    assert_eq!(
        job["spec"]["completions"].as_u64(),
        services["loadgen"]["deploy"]["replicas"].as_u64()
    );
    let claim =
        job["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"].clone();
    by_kind("PersistentVolumeClaim", claim.as_str().unwrap());

    // A schema check where a validator is installed (`pip install kubernetes-validate`).
    match find_on_path("kubernetes-validate") {
        Some(tool) => {
            let out = run(Command::new(tool)
                .args(["--strict", "--quiet"])
                .args(&files));
            assert!(
                out.status.success(),
                "kubernetes-validate rejected docker/k8s:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            eprintln!("docker/k8s: schema-validated with kubernetes-validate");
        }
        None => eprintln!(
            "docker/k8s: parse and consistency checks only (kubernetes-validate not installed)"
        ),
    }
}

#[test]
fn compose_scenarios_a_and_b_differ_only_in_storage() {
    let text =
        compose_defaults(&std::fs::read_to_string(repo().join("docker/compose.yml")).unwrap());
    let compose: Value = serde_yaml::from_str(&text).unwrap();
    let s = &compose["services"];
    assert_eq!(s["httpd-a"]["image"], s["httpd-b"]["image"]);
    // Configured through HTTPD_* variables, nothing else differs.
    assert_eq!(
        s["httpd-a"]["environment"]["HTTPD_NFS"].as_str(),
        Some("nfs://rustnfs/nfs-share")
    );
    assert_eq!(
        s["httpd-b"]["environment"]["HTTPD_ROOT"].as_str(),
        Some("/www")
    );
    assert_eq!(s["httpd-a"]["command"], s["httpd-b"]["command"]);
    // Both probe themselves; httpd-a waits for an NFS server that answers.
    assert_eq!(s["httpd-a"]["healthcheck"], s["httpd-b"]["healthcheck"]);
    assert!(strings(&s["httpd-a"]["healthcheck"]["test"]).contains(&"--healthcheck".into()));
    assert!(strings(&s["rustnfs"]["healthcheck"]["test"]).contains(&"--healthcheck".into()));
    assert_eq!(
        s["httpd-a"]["depends_on"]["rustnfs"]["condition"],
        "service_healthy"
    );
    let mut a = strings(&s["load-a"]["command"]);
    let mut b = strings(&s["load-b"]["command"]);
    // Same workload except the target host and the result file.
    for cmd in [&mut a, &mut b] {
        for arg in cmd.iter_mut() {
            *arg = arg
                .replace("httpd-a", "httpd-X")
                .replace("httpd-b", "httpd-X");
            *arg = arg
                .replace("scenario-a", "scenario-X")
                .replace("scenario-b", "scenario-X");
        }
    }
    assert_eq!(a, b);
    assert_eq!(s["tcp-server-host"]["network_mode"], "host");
    assert_eq!(s["load-tcp-host"]["network_mode"], "host");
    assert_eq!(s["rustnfs"]["environment"]["READ_ONLY"], "true");
}
