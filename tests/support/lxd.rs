//! LXD for the deployment tests: `lxc/lxd-deploy.sh down` on drop, and one LXD user at
//! a time.

use std::process::{Command, Stdio};

use crate::support::docker::repo;

/// Runs `lxd-deploy.sh down` for our prefix when dropped: teardown also on panic.
pub struct LxdDown(pub String);

impl Drop for LxdDown {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("lxc/lxd-deploy.sh"))
            .arg("down")
            .env("PREFIX", &self.0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// One LXD user at a time among these tests: the script stops a daemon it started when
/// no instance is left, which must not happen under another test's instance.
pub static LXD_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
