//! Where the parts of a container's serving stack are, for the probe: a Docker
//! container's or the LXD instance's cgroup (v2), or its first process (v1 hosts) — so
//! each run's CPU per request covers the whole serving stack, wherever it runs.

use std::path::PathBuf;

use super::docker::docker;

/// The cgroup v2 directory of a running Docker container, when it can be found.
pub fn docker_cgroup(name: &str) -> Option<PathBuf> {
    let id = docker(&["inspect", "-f", "{{.Id}}", name]).ok()?;
    let id = id.trim();
    [
        format!("/sys/fs/cgroup/system.slice/docker-{id}.scope"),
        format!("/sys/fs/cgroup/docker/{id}"),
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.join("cpu.stat").is_file())
}

/// The host PID of a running Docker container's first process (its tree is the
/// container's processes); works on cgroup v1 and v2 alike.
pub fn docker_pid(name: &str) -> Option<u32> {
    let pid: u32 = docker(&["inspect", "-f", "{{.State.Pid}}", name])
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (pid > 0).then_some(pid)
}

/// The host PID of an LXD instance's init (`lxc info`'s `PID:` line).
pub fn lxd_pid(instance: &str) -> Option<u32> {
    let out = std::process::Command::new("lxc")
        .args(["info", instance])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let pid: u32 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("PID:"))?
        .trim()
        .parse()
        .ok()?;
    (pid > 0).then_some(pid)
}

/// The cgroup v2 directory of an LXD instance's payload.
pub fn lxd_cgroup(instance: &str) -> Option<PathBuf> {
    let p = PathBuf::from(format!("/sys/fs/cgroup/lxc.payload.{instance}"));
    p.join("cpu.stat").is_file().then_some(p)
}
