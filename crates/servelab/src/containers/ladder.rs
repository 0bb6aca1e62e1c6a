//! The ladder phase of the container comparison: the host rungs of
//! [`crate::ladder`] measured in one rotation with the real containers — B in the LXD
//! instance and in the Docker container, and A's NFS hop into the rustnfs container
//! (httpd on the host reading it by its address on Docker's bridge).

use std::path::Path;

use crate::ladder::run::RungStack;
use crate::ladder::stacks::{A_SIDE, B_SIDE};

use super::Run;

impl Run<'_> {
    pub(super) fn ladder(&mut self, out_dir: &Path) -> anyhow::Result<()> {
        let mut containers = Vec::new();
        for c in &self.cells {
            let (side, description) = match (c.place.as_str(), c.scenario) {
                ("host", _) if c.scenario == "B" => continue,
                ("host", _) => (
                    A_SIDE,
                    "httpd on the host --nfs → rustnfs in its Docker container, by the container's address on docker0 (veth + bridge, no published port)".to_string(),
                ),
                (place, "B") => (
                    B_SIDE,
                    format!("httpd in the {place} container, by its address on its bridge (veth + bridge, no published port; its cgroup's CPU)"),
                ),
                _ => continue,
            };
            if c.stack.parts.is_empty() {
                self.rep.skipped.push(format!(
                    "ladder rung {} {}: no CPU figure for it",
                    c.place, c.scenario
                ));
                continue;
            }
            containers.push(RungStack {
                side,
                layer: if side == A_SIDE {
                    "Docker".into()
                } else {
                    c.place.clone()
                },
                description,
                stack: &c.stack,
            });
        }
        let settings = crate::ladder::settings(self.args, self.w, format!("/{}", self.large_file));
        let log_dir = out_dir.join("logs");
        std::fs::create_dir_all(&log_dir)?;
        let ladder = crate::ladder::run_ladder(
            &settings,
            &self.data,
            &log_dir,
            containers,
            &mut self.progress,
            out_dir,
        )?;
        self.rep.notes.push(format!(
            "the ladder of layers ran {} rungs in {:.0} s: ladder.md",
            ladder.rungs.len(),
            ladder.elapsed_s
        ));
        Ok(())
    }
}
