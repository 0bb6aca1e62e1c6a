//! docker/compose.yml projects for the deployment tests: one project per test, torn
//! down on drop, and the lock that keeps Swarm mode switches out of their lifetime.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{RwLock, RwLockReadGuard};

use crate::support::docker::{TAG, docker, repo, run, run_text, unique};

/// One docker-compose project from docker/compose.yml, torn down on drop.
pub struct Compose {
    pub project: String,
    pub env: Vec<(String, String)>,
    /// Keeps `swarm init`/`leave` of a parallel test out of this project's lifetime.
    _no_swarm_toggle: RwLockReadGuard<'static, ()>,
}

impl Compose {
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("docker-compose");
        c.arg("-f")
            .arg(repo().join("docker/compose.yml"))
            .args(["-p", &self.project, "--profile", "load", "--profile", "tcp"])
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    /// The project's running containers (ids).
    pub fn running(&self) -> Vec<String> {
        run_text(&mut docker(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=com.docker.compose.project={}", self.project),
        ]))
        .lines()
        .map(str::to_string)
        .collect()
    }

    pub fn container(&self, service: &str) -> String {
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
pub static SWARM_TOGGLE: RwLock<()> = RwLock::new(());

/// Leaves the swarm this test created, and removes the docker_gwbridge network that
/// `swarm init` created and `swarm leave` keeps.
pub struct LeaveSwarm {
    pub had_gwbridge: bool,
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

pub fn compose_project(data: &Path, results: &Path, extra: &[(&str, String)]) -> Compose {
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
