//! The Linux kernel NFS client as a test client: Debian's own kernel booted under qemu
//! with a busybox initramfs, mounting a server on the host's loopback and running the
//! file-work battery (`battery.sh`), whose results come back on the serial console.
//!
//! qemu's user network maps the guest's 10.0.2.2 to the host's 127.0.0.1, so a server
//! bound to 127.0.0.1:P is mounted as `10.0.2.2:/path` with `port=P,mountport=P`. The
//! initramfs is built from the installed kernel's modules and busybox-static at test time
//! and cached under the target directory, keyed by kernel version and by the content of
//! everything that goes into it.

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use lab::process::Supervised;

use crate::common;

/// The battery run inside the VM; its `ITEMS="…"` line is the list of items.
pub const BATTERY: &str = include_str!("battery.sh");
/// The VM's `/init`.
const INIT: &str = include_str!("vm-init.sh");
/// The fcntl lock helper (busybox has no fcntl-lock tool), built statically.
const LOCKHOLD: &str = include_str!("lockhold.c");
/// The utimensat helper (exact UTIME_NOW / UTIME_OMIT / 64-bit times), built statically.
const UTIMES: &str = include_str!("utimes.c");
/// Scripts a test runs instead of the battery (`Vm::run_script`), by name: the VM's
/// `/init` runs `/NAME.sh` when the kernel command line says `servelab_script=NAME`.
const SCRIPTS: &[(&str, &str)] = &[("exports", include_str!("vm-exports.sh"))];
/// The NFSv3 and NFSv4 clients and what they need, in the order the battery needs
/// them; their dependencies (from `modules.dep`) are loaded first whatever this order
/// says. `nfsv4` needs `dns_resolver` (`modinfo -F depends nfsv4`).
const MODULES: &[&str] = &[
    "e1000",
    "netfs",
    "fscache",
    "sunrpc",
    "grace",
    "lockd",
    "nfs_acl",
    "nfs",
    "nfsv3",
    "dns_resolver",
    "nfsv4",
];
/// busybox-static's binary (Debian's dynamic busybox lives at the same path only when
/// busybox-static is absent; it is rejected below).
const BUSYBOX: &str = "/bin/busybox";

/// An installed kernel: its version and the image qemu boots.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub version: String,
    pub image: PathBuf,
}

impl Kernel {
    /// The newest kernel with both `/lib/modules/VERSION` and `/boot/vmlinuz-VERSION`.
    pub fn find() -> Option<Kernel> {
        let mut versions: Vec<String> = std::fs::read_dir("/lib/modules")
            .ok()?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|v| Path::new(&format!("/boot/vmlinuz-{v}")).is_file())
            .collect();
        versions.sort_by_key(|v| version_key(v));
        let version = versions.pop()?;
        Some(Kernel {
            image: PathBuf::from(format!("/boot/vmlinuz-{version}")),
            version,
        })
    }

    fn modules_dir(&self) -> PathBuf {
        PathBuf::from(format!("/lib/modules/{}", self.version))
    }
}

/// Sorts "6.1.0-57-amd64" after "6.1.0-9-amd64": numbers compare as numbers.
fn version_key(v: &str) -> Vec<u64> {
    v.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap_or(0))
        .collect()
}

/// Everything a VM run needs: the kernel, qemu and the initramfs (built once per run).
#[derive(Debug, Clone)]
pub struct Vm {
    pub kernel: Kernel,
    pub qemu: PathBuf,
    pub initramfs: PathBuf,
}

impl Vm {
    /// The VM, or `None` (after printing `SKIP:`) when qemu, a kernel or busybox-static is
    /// missing; under CI a missing piece is a failure.
    pub fn require() -> Option<Vm> {
        let qemu = common::require_tool("qemu-system-x86_64")?;
        common::require_tool("cpio")?;
        common::require_tool("cc")?;
        let Some(kernel) = Kernel::find() else {
            let msg = "no kernel with /lib/modules/V and /boot/vmlinuz-V (linux-image-amd64)";
            if lab::in_ci() {
                panic!("{msg} is required in CI (.ci/run installs it)");
            }
            lab::skip::skip(msg);
            return None;
        };
        if let Err(e) = check_static(Path::new(BUSYBOX)) {
            if lab::in_ci() {
                panic!("busybox-static is required in CI (.ci/run installs it): {e}");
            }
            lab::skip::skip(&format!("busybox-static: {e}"));
            return None;
        }
        static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        let initramfs = BUILT
            .get_or_init(|| build_initramfs(&kernel))
            .clone()
            .unwrap_or_else(|e| panic!("cannot build the test initramfs: {e}"));
        Some(Vm {
            kernel,
            qemu,
            initramfs,
        })
    }

    /// Boots the VM, mounts `10.0.2.2:{mount.path}` and runs the battery; returns the
    /// console (cleaned) when the VM powers off or `timeout` passes (the VM is then
    /// killed).
    pub fn run_battery(&self, mount: &MountTarget, dir_entries: usize, timeout: Duration) -> VmRun {
        let append = format!(
            "console=ttyS0 quiet panic=-1 servelab_nfsport={} servelab_mountport={} \
             servelab_path={} servelab_entries={dir_entries} servelab_vers={}",
            mount.nfs_port, mount.mount_port, mount.path, mount.vers
        );
        self.boot(&append, timeout)
    }

    /// Boots the VM to run script `name` of [`SCRIPTS`] (after the modules and the
    /// network are up) with `params` as `servelab_KEY=VALUE` on the kernel command line
    /// (no spaces in values); returns the console as [`Vm::run_battery`] does.
    pub fn run_script(&self, name: &str, params: &[(&str, String)], timeout: Duration) -> VmRun {
        assert!(
            SCRIPTS.iter().any(|(n, _)| *n == name),
            "no VM script {name}"
        );
        let mut append = format!("console=ttyS0 quiet panic=-1 servelab_script={name}");
        for (k, v) in params {
            assert!(
                !v.contains(char::is_whitespace),
                "{k}={v}: a space in a value"
            );
            append.push_str(&format!(" servelab_{k}={v}"));
        }
        self.boot(&append, timeout)
    }

    fn boot(&self, append: &str, timeout: Duration) -> VmRun {
        // KVM is opt-in: a /dev/kvm that opens is no proof that guests run (on this
        // machine qemu -accel kvm hangs before the kernel starts).
        let accel = std::env::var("SERVELAB_QEMU_ACCEL").unwrap_or_else(|_| "tcg".into());
        let start = Instant::now();
        // The console and qemu's messages go to files (read once it is gone).
        let out_file = tempfile::NamedTempFile::new().unwrap();
        let err_file = tempfile::NamedTempFile::new().unwrap();
        let mut qemu = Supervised::spawn(
            "qemu",
            Command::new(&self.qemu)
                .args(["-accel", &accel, "-m", "512", "-smp", "1"])
                .args(["-nographic", "-no-reboot"])
                .arg("-kernel")
                .arg(&self.kernel.image)
                .arg("-initrd")
                .arg(&self.initramfs)
                .arg("-append")
                .arg(append)
                .args(["-netdev", "user,id=n0", "-device", "e1000,netdev=n0"])
                .stdin(Stdio::null())
                .stdout(out_file.reopen().unwrap())
                .stderr(err_file.reopen().unwrap()),
            Some(err_file.path()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let deadline = start + timeout;
        let mut timed_out = false;
        loop {
            if qemu.try_wait().is_some() {
                break;
            }
            if Instant::now() > deadline {
                timed_out = true;
                qemu.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        qemu.kill();
        let console = clean_console(&std::fs::read(out_file.path()).unwrap_or_default());
        let stderr = String::from_utf8_lossy(&std::fs::read(err_file.path()).unwrap_or_default())
            .into_owned();
        VmRun {
            console,
            stderr,
            elapsed: start.elapsed(),
            timed_out,
        }
    }
}

/// Where the VM mounts from: the ports on the host's loopback, the path (MOUNT's for
/// v3, the pseudo-file-system's for v4) and the version: `3`, `4.0`, or `4` (plain
/// `-t nfs4`: whatever the client negotiates).
#[derive(Debug, Clone)]
pub struct MountTarget {
    pub nfs_port: u16,
    pub mount_port: u16,
    pub path: String,
    pub vers: &'static str,
}

/// One VM run's output.
#[derive(Debug)]
pub struct VmRun {
    pub console: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub timed_out: bool,
}

/// The console as text: `\r` removed and terminal escape sequences (CSI `ESC [ … final`,
/// and two-byte `ESC x`) stripped.
pub fn clean_console(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {}
            '\u{1b}' => {
                // CSI runs to its final byte; any other escape is two characters.
                if chars.next() == Some('[') {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// One battery item's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub pass: bool,
    pub detail: String,
}

/// What one server did with the battery.
#[derive(Debug, Clone)]
pub struct Battery {
    /// `Ok(())` when the VM mounted the server, else why not.
    pub mounted: Result<(), String>,
    /// Every item of [`items`], in order; items the VM never reported are failures.
    pub items: BTreeMap<String, Outcome>,
    /// `VMERR` lines (module load, umount) — reported, not judged.
    pub errors: Vec<String>,
    /// The VM reached the end of the battery (`VMDONE`) before it was stopped.
    pub done: bool,
    /// Items of [`items`] the VM never reported (they are failures in `items` too).
    pub missing: Vec<String>,
    /// The mount's `vers=` option as the VM's /proc/mounts shows it (`vers=4.0`).
    pub version: Option<String>,
    /// NFSv4 runs: whether the original experiment's mount line (`-t nfs4 -o
    /// nolock,vers=4.0`) mounted and read back the battery's file (`None`: not tried).
    pub original: Option<Result<(), String>>,
}

/// The battery's items, from its `ITEMS="…"` line, in run order.
pub fn items() -> Vec<String> {
    BATTERY
        .lines()
        .find_map(|l| l.strip_prefix("ITEMS=\""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("battery.sh has an ITEMS=\"…\" line")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Parses a cleaned console into a [`Battery`].
pub fn parse(run: &VmRun) -> Battery {
    let mut mounted = Err("the VM never reported a mount result".to_string());
    let mut reported = BTreeMap::new();
    let mut errors = Vec::new();
    let mut done = false;
    let mut version = None;
    let mut original = None;
    for line in run.console.lines() {
        // The firmware's last words ("Booting from ROM...") end without a newline, so the
        // guest's first line can follow them on the same console line: read each line
        // from its first marker on.
        let line = [
            "BATTERY ",
            "VMMOUNT ",
            "VMVERS ",
            "VMORIGINAL ",
            "VMERR ",
            "VMDONE",
        ]
        .iter()
        .filter_map(|m| line.find(m))
        .min()
        .map_or(line, |i| &line[i..]);
        if let Some(rest) = line.strip_prefix("BATTERY ") {
            let mut parts = rest.splitn(3, ' ');
            let (Some(name), Some(verdict)) = (parts.next(), parts.next()) else {
                continue;
            };
            let detail = parts.next().unwrap_or("").trim().to_string();
            reported.insert(
                name.to_string(),
                Outcome {
                    pass: verdict == "PASS",
                    detail,
                },
            );
        } else if let Some(o) = line.strip_prefix("VMORIGINAL ") {
            original = Some(match o.trim() {
                "OK" => Ok(()),
                why => Err(why.to_string()),
            });
        } else if let Some(v) = line.strip_prefix("VMVERS ") {
            version = Some(v.trim().to_string());
        } else if line == "VMMOUNT OK" {
            mounted = Ok(());
        } else if let Some(why) = line.strip_prefix("VMMOUNT FAIL") {
            mounted = Err(format!("mount failed: {}", why.trim()));
        } else if let Some(e) = line.strip_prefix("VMERR ") {
            errors.push(e.to_string());
        } else if line == "VMDONE" {
            done = true;
        }
    }
    let why_missing = if run.timed_out {
        format!("not run: VM killed after {:.0?}", run.elapsed)
    } else if mounted.is_err() {
        "not run: no mount".to_string()
    } else if !done {
        "not run: VM output ended early".to_string()
    } else {
        "not reported".to_string()
    };
    let mut missing = Vec::new();
    let items = items()
        .into_iter()
        .map(|name| {
            let o = reported.remove(&name).unwrap_or_else(|| {
                missing.push(name.clone());
                Outcome {
                    pass: false,
                    detail: why_missing.clone(),
                }
            });
            (name, o)
        })
        .collect();
    Battery {
        mounted,
        items,
        errors,
        done: done && !run.timed_out,
        missing,
        version,
        original,
    }
}

/// Fails with a reason unless `path` is a statically linked ELF (no PT_INTERP): the
/// initramfs has no dynamic loader.
fn check_static(path: &Path) -> Result<(), String> {
    let b = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 {
        return Err(format!("{}: not a 64-bit ELF", path.display()));
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    for i in 0..phnum {
        let o = phoff + i * phentsize;
        let Some(t) = b.get(o..o + 4) else {
            return Err(format!("{}: truncated program headers", path.display()));
        };
        if u32::from_le_bytes(t.try_into().unwrap()) == 3 {
            return Err(format!(
                "{} is dynamically linked (install busybox-static)",
                path.display()
            ));
        }
    }
    Ok(())
}

/// Module name → (path relative to the modules dir, direct and indirect dependencies),
/// from `modules.dep`.
fn module_deps(kernel: &Kernel) -> Result<BTreeMap<String, (String, Vec<String>)>, String> {
    let dep_file = kernel.modules_dir().join("modules.dep");
    let text =
        std::fs::read_to_string(&dep_file).map_err(|e| format!("{}: {e}", dep_file.display()))?;
    let name_of = |p: &str| {
        let file = p.rsplit('/').next().unwrap_or(p);
        file.split(".ko").next().unwrap_or(file).replace('-', "_")
    };
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let Some((path, deps)) = line.split_once(':') else {
            continue;
        };
        let deps = deps.split_whitespace().map(name_of).collect();
        map.insert(name_of(path), (path.to_string(), deps));
    }
    Ok(map)
}

/// `MODULES` and their dependencies, dependencies first.
fn load_order(
    deps: &BTreeMap<String, (String, Vec<String>)>,
) -> Result<Vec<(String, String)>, String> {
    fn visit(
        name: &str,
        deps: &BTreeMap<String, (String, Vec<String>)>,
        seen: &mut HashSet<String>,
        order: &mut Vec<(String, String)>,
    ) -> Result<(), String> {
        if !seen.insert(name.to_string()) {
            return Ok(());
        }
        let Some((path, ds)) = deps.get(name) else {
            // Not a module: built into the kernel (modules.builtin) or absent; the
            // mount says which.
            return Ok(());
        };
        for d in ds {
            visit(d, deps, seen, order)?;
        }
        order.push((name.to_string(), path.clone()));
        Ok(())
    }
    let mut seen = HashSet::new();
    let mut order = Vec::new();
    for m in MODULES {
        visit(m, deps, &mut seen, &mut order)?;
    }
    if !order.iter().any(|(n, _)| n == "nfsv3") {
        return Err("the kernel has no nfsv3 module".into());
    }
    Ok(order)
}

/// Builds (or finds in the cache) the initramfs for `kernel`; returns its path.
fn build_initramfs(kernel: &Kernel) -> Result<PathBuf, String> {
    let deps = module_deps(kernel)?;
    let order = load_order(&deps)?;
    let busybox_meta = std::fs::metadata(BUSYBOX).map_err(|e| format!("{BUSYBOX}: {e}"))?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        INIT,
        BATTERY,
        LOCKHOLD,
        UTIMES,
        SCRIPTS,
        &order,
        busybox_meta.len(),
    )
        .hash(&mut h);
    busybox_meta.modified().ok().hash(&mut h);
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("kernel-vm")
        .join(format!("{}-{:016x}", kernel.version, h.finish()));
    let image = cache.join("initramfs.cpio");
    if image.is_file() {
        return Ok(image);
    }
    std::fs::create_dir_all(&cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    let stage = tempfile::tempdir_in(&cache).map_err(|e| e.to_string())?;
    let root = stage.path().join("root");
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    for d in [
        "bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp", "mnt",
    ] {
        std::fs::create_dir_all(root.join(d)).map_err(|e| io(d, e))?;
    }
    std::fs::copy(BUSYBOX, root.join("bin/busybox")).map_err(|e| io(BUSYBOX, e))?;
    // One link per applet; linking `busybox` onto itself makes the kernel fail to run
    // /init (error -40, ELOOP).
    let list = common::run_ok(Command::new(BUSYBOX).arg("--list-full"));
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        let applet = applet.trim().trim_start_matches('/');
        if applet.is_empty() || applet.rsplit('/').next() == Some("busybox") {
            continue;
        }
        let link = root.join(applet);
        if let Some(parent) = link.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(applet, e))?;
        }
        if !link.exists() {
            std::os::unix::fs::symlink("/bin/busybox", &link).map_err(|e| io(applet, e))?;
        }
    }
    let mods = root.join("lib/mods");
    std::fs::create_dir_all(&mods).map_err(|e| io("lib/mods", e))?;
    let mut names = String::new();
    for (name, rel) in &order {
        let src = kernel.modules_dir().join(rel);
        let dst = mods.join(format!("{name}.ko"));
        let tool = [(".ko.xz", "xz"), (".ko.zst", "zstd"), (".ko.gz", "gzip")]
            .iter()
            .find(|(ext, _)| rel.ends_with(ext))
            .map(|(_, t)| *t);
        match tool {
            Some(tool) => {
                common::require_tool(tool)
                    .ok_or_else(|| format!("{tool} is needed to uncompress {rel}"))?;
                let out = common::run_ok(Command::new(tool).arg("-dc").arg(&src));
                std::fs::write(&dst, out.stdout).map_err(|e| io(name, e))?;
            }
            None => {
                std::fs::copy(&src, &dst).map_err(|e| io(&src.display().to_string(), e))?;
            }
        }
        names.push_str(name);
        names.push('\n');
    }
    std::fs::write(root.join("modules.order"), names).map_err(|e| io("modules.order", e))?;
    std::fs::write(root.join("battery.sh"), BATTERY).map_err(|e| io("battery.sh", e))?;
    for (name, text) in SCRIPTS {
        let file = format!("{name}.sh");
        std::fs::write(root.join(&file), text).map_err(|e| io(&file, e))?;
    }
    for (name, source) in [("lockhold", LOCKHOLD), ("utimes", UTIMES)] {
        let src = stage.path().join(format!("{name}.c"));
        std::fs::write(&src, source).map_err(|e| io(name, e))?;
        common::run_ok(
            Command::new("cc")
                .args(["-static", "-Os", "-o"])
                .arg(root.join("bin").join(name))
                .arg(&src),
        );
    }
    let init = root.join("init");
    std::fs::write(&init, INIT).map_err(|e| io("init", e))?;
    std::fs::set_permissions(&init, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(|e| io("init", e))?;
    // newc is the cpio format the kernel unpacks; an uncompressed archive needs no
    // decompressor in the kernel.
    let tmp = stage.path().join("initramfs.cpio");
    common::run_ok(
        Command::new("sh")
            .arg("-c")
            .arg("find . | LC_ALL=C sort | cpio -o -H newc --quiet > \"$1\"")
            .arg("sh")
            .arg(&tmp)
            .current_dir(&root),
    );
    // Rename into place: another test process may be building the same image.
    std::fs::rename(&tmp, &image).map_err(|e| io("rename", e))?;
    Ok(image)
}
