//! The Docker side of `compare --containers`: rustnfs and the two httpd scenarios as
//! containers of the FROM-scratch images (docker/build.sh), addressed by their own IPs on a
//! network of ours (no published port, so no docker-proxy hop), plus `docker stats`,
//! `docker update --cpus` and a FROM-scratch sysbench image.

use anyhow::Context as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// Every object compare creates in Docker is named with this prefix.
pub const PREFIX: &str = "sl-deploy-cmp";
/// The network's /24 (checked unused by Docker when it is created).
const SUBNET: &str = "10.205.148";

pub struct Deployment {
    pub network: String,
    pub rustnfs: Option<String>,
    pub nfs_ip: Option<std::net::IpAddr>,
    pub httpd_a: Option<HttpdContainer>,
    pub httpd_b: Option<HttpdContainer>,
}

/// One httpd container: its name and its base URL on the deployment's network.
#[derive(Debug, Clone)]
pub struct HttpdContainer {
    pub name: String,
    pub url: String,
}

pub fn docker(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("cannot run docker")?;
    if !out.status.success() {
        anyhow::bail!(
            "docker {}: {}",
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Why Docker cannot be used, or None.
pub fn unavailable(images: &[&str]) -> Option<String> {
    if docker(&["info", "--format", "{{.ServerVersion}}"]).is_err() {
        return Some("no Docker engine answers".into());
    }
    for image in images {
        if docker(&["image", "inspect", image]).is_err() {
            return Some(format!("image {image} is missing (run docker/build.sh)"));
        }
    }
    None
}

fn remove_all() {
    for c in ["httpd-a", "httpd-b", "rustnfs"] {
        let _ = docker(&["rm", "-f", &format!("{PREFIX}-{c}")]);
    }
    let _ = docker(&["network", "rm", &format!("{PREFIX}-net")]);
}

impl Deployment {
    /// rustnfs (read-only export of `data`) and httpd-a on it, httpd-b on `data` directly.
    pub fn start(data: &Path, tag: &str, with_nfs: bool) -> anyhow::Result<Deployment> {
        remove_all();
        let network = format!("{PREFIX}-net");
        docker(&[
            "network",
            "create",
            "--subnet",
            &format!("{SUBNET}.0/24"),
            &network,
        ])?;
        let mut d = Deployment {
            network: network.clone(),
            rustnfs: None,
            nfs_ip: None,
            httpd_a: None,
            httpd_b: None,
        };
        let data = data.display().to_string();
        if with_nfs {
            let name = format!("{PREFIX}-rustnfs");
            let ip = format!("{SUBNET}.2");
            docker(&[
                "run",
                "-d",
                "--name",
                &name,
                "--network",
                &network,
                "--ip",
                &ip,
                "-v",
                &format!("{data}:/nfs-share:ro"),
                "-e",
                "READ_ONLY=true",
                &format!("rustnfs:{tag}"),
            ])?;
            d.rustnfs = Some(name);
            d.nfs_ip = ip.parse().ok();
        }
        Ok(d)
    }

    /// Starts one httpd container with `args`.
    pub fn httpd(
        &self,
        which: &str,
        tag: &str,
        data: &Path,
        args: &[String],
    ) -> anyhow::Result<HttpdContainer> {
        let name = format!("{PREFIX}-httpd-{which}");
        let ip = format!("{SUBNET}.{}", if which == "a" { 11 } else { 12 });
        let volume = format!("{}:/www:ro", data.display());
        let mut all: Vec<String> = [
            "run",
            "-d",
            "--name",
            &name,
            "--network",
            &self.network,
            "--ip",
            &ip,
            "-v",
            &volume,
            &format!("httpd:{tag}"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        all.extend(args.iter().cloned());
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        docker(&refs)?;
        Ok(HttpdContainer {
            name,
            url: format!("http://{ip}:8080"),
        })
    }

    /// `docker update --cpus N` (a CFS quota of N CPUs) on every httpd container.
    pub fn set_cpus(&self, n: Option<u32>) -> anyhow::Result<()> {
        let cpus = n.map_or("0".to_string(), |n| n.to_string());
        for c in self.httpd_a.iter().chain(&self.httpd_b) {
            docker(&["update", "--cpus", &cpus, &c.name])?;
        }
        Ok(())
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        remove_all();
    }
}

/// A container's memory as `docker stats` shows it, in bytes.
pub fn stats_memory(name: &str) -> Option<u64> {
    let text = docker(&["stats", "--no-stream", "--format", "{{.MemUsage}}", name]).ok()?;
    lab::sampler::parse_docker_size(text.split('/').next()?.trim())
}

/// The container's cgroup memory peak (cgroup v1 `memory.max_usage_in_bytes`, v2
/// `memory.peak`), where the hierarchy exposes it.
pub fn cgroup_peak(name: &str) -> Option<u64> {
    let id = docker(&["inspect", "-f", "{{.Id}}", name]).ok()?;
    [
        format!("/sys/fs/cgroup/memory/docker/{id}/memory.max_usage_in_bytes"),
        format!("/sys/fs/cgroup/system.slice/docker-{id}.scope/memory.peak"),
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse().ok())
}

/// Builds `sl-deploy-cmp-sysbench` FROM scratch out of a bundle directory (the host's
/// sysbench, its libraries and the loader) and returns the image name.
pub fn sysbench_image(bundle: &Path) -> anyhow::Result<String> {
    let image = format!("{PREFIX}-sysbench:latest");
    let ctx = tempfile::tempdir()?;
    let dst = ctx.path().join("opt-sysbench");
    std::fs::create_dir(&dst)?;
    for entry in std::fs::read_dir(bundle)? {
        let p = entry?.path();
        std::fs::copy(&p, dst.join(p.file_name().unwrap()))?;
    }
    std::fs::write(
        ctx.path().join("Dockerfile"),
        "FROM scratch\nCOPY opt-sysbench /opt/sysbench\nENTRYPOINT [\"/opt/sysbench/ld.so\", \"--library-path\", \"/opt/sysbench\", \"/opt/sysbench/sysbench\"]\n",
    )?;
    let ctx_s = ctx.path().display().to_string();
    let out = Command::new("docker")
        .args(["build", "-q", "-t", &image, &ctx_s])
        .env("DOCKER_BUILDKIT", "0")
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        anyhow::bail!(
            "docker build of the sysbench image: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(image)
}
