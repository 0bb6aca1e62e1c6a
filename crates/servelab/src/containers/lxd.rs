//! The LXD side of `compare --containers`: lxc/lxd-deploy.sh (embedded in the binary, so
//! it runs outside a checkout) brings the instance up and down; `lxc` sets its CPU limit,
//! reads its memory and runs sysbench in it.

use anyhow::Context as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The deployment script itself; `up`/`down` are what a user runs by hand.
const SCRIPT: &str = include_str!("../../../../lxc/lxd-deploy.sh");

/// Object prefix of compare's instance (the script names everything PREFIX-*).
pub const PREFIX: &str = "sl-deploy-c";

/// A running instance from `lxd-deploy.sh up`; `down` on drop.
pub struct Instance {
    pub name: String,
    pub url_a: String,
    pub url_b: String,
    pub path: String,
    script: PathBuf,
    _dir: tempfile::TempDir,
}

/// Where the instance's scenario A reads from: the script's own rustnfs container (Docker)
/// or a host process.
pub struct UpOptions<'a> {
    pub data: &'a Path,
    pub httpd_bin: &'a Path,
    pub rustnfs_bin: Option<&'a Path>,
    pub rustnfs_image: Option<&'a str>,
    pub file: &'a str,
}

impl Instance {
    pub fn up(o: &UpOptions) -> anyhow::Result<Instance> {
        let dir = tempfile::Builder::new()
            .prefix("sl-deploy-lxd-")
            .tempdir()
            .context("cannot create a temporary directory")?;
        let script = dir.path().join("lxd-deploy.sh");
        std::fs::write(&script, SCRIPT).context("cannot write the script")?;
        // A stale instance of an interrupted run would make `up` refuse.
        let _ = script_cmd(&script, &["down"]).output();
        let mut cmd = script_cmd(&script, &["up"]);
        cmd.arg(o.data)
            .env("HTTPD_BIN", o.httpd_bin)
            .env("FILE", o.file)
            .env("SUBNET", "10.201.148")
            .env("INSTALL", "0");
        match (o.rustnfs_image, o.rustnfs_bin) {
            (Some(image), _) => {
                cmd.env("NFS_ON", "docker").env("RUSTNFS_IMAGE", image);
            }
            (None, Some(bin)) => {
                cmd.env("NFS_ON", "host").env("RUSTNFS_BIN", bin);
            }
            (None, None) => anyhow::bail!("no rustnfs image or binary for scenario A"),
        }
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .context("cannot run lxd-deploy.sh")?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            let _ = script_cmd(&script, &["down"]).output();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().last().unwrap_or("").trim().to_string();
            anyhow::bail!("lxd-deploy.sh up failed: {last}");
        }
        let kv: BTreeMap<&str, &str> = stdout.lines().filter_map(|l| l.split_once('=')).collect();
        let get = |k: &str| {
            kv.get(k)
                .map(|v| v.to_string())
                .ok_or_else(|| anyhow::anyhow!("lxd-deploy.sh up printed no {k}"))
        };
        Ok(Instance {
            name: format!("{PREFIX}-web"),
            url_a: get("url_a")?,
            url_b: get("url_b")?,
            path: get("path")?,
            script,
            _dir: dir,
        })
    }

    /// `limits.cpu`: LXD pins the instance to N CPUs (a cpuset), applied live.
    pub fn set_cpus(&self, n: Option<u32>) -> anyhow::Result<()> {
        let mut c = Command::new("lxc");
        match n {
            Some(n) => c.args(["config", "set", &self.name, "limits.cpu", &n.to_string()]),
            None => c.args(["config", "unset", &self.name, "limits.cpu"]),
        };
        run_quiet(&mut c)
    }

    /// The instance's memory from LXD's state (what `lxc info` prints): current and peak.
    pub fn memory(&self) -> anyhow::Result<(u64, u64)> {
        let out = Command::new("lxc")
            .args(["query", &format!("/1.0/instances/{}/state", self.name)])
            .stdin(Stdio::null())
            .output()
            .context("cannot run lxc query")?;
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).context("lxc query printed no JSON")?;
        let m = &v["memory"];
        Ok((
            m["usage"].as_u64().unwrap_or(0),
            m["usage_peak"].as_u64().unwrap_or(0),
        ))
    }

    /// Pushes a sysbench bundle (binary, its libraries, the loader) to /opt/sysbench.
    pub fn push_dir(&self, dir: &Path, target: &str) -> anyhow::Result<()> {
        run_quiet(Command::new("lxc").args(["exec", &self.name, "--", "mkdir", "-p", target]))?;
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            run_quiet(
                Command::new("lxc")
                    .args(["--quiet", "file", "push", "--mode", "0755"])
                    .arg(&path)
                    .arg(format!("{}{target}/{name}", self.name)),
            )?;
        }
        Ok(())
    }

    /// Runs a command in the instance and returns its stdout.
    pub fn exec(&self, args: &[String]) -> anyhow::Result<String> {
        let out = Command::new("lxc")
            .args(["exec", &self.name, "--"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("cannot run lxc exec")?;
        if !out.status.success() {
            anyhow::bail!(
                "lxc exec {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = script_cmd(&self.script, &["down"]).output();
    }
}

fn script_cmd(script: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("bash");
    c.arg(script)
        .args(args)
        .env("PREFIX", PREFIX)
        .stdin(Stdio::null());
    c
}

fn run_quiet(c: &mut Command) -> anyhow::Result<()> {
    let out = c
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {c:?}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "{:?} failed: {}",
            c.get_args().collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Why LXD cannot run here, or None when `lxc`/`lxd` exist and we are root.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (the LXD daemon, a bridge, iptables)".into());
    }
    for tool in ["lxd", "lxc"] {
        if lab::find_program(tool).is_none() {
            return Some(format!("{tool} is not installed (apt-get install -y lxd)"));
        }
    }
    None
}
