//! The container comparison's files: `containers.md`, `containers.json` and the SVG
//! plots, written into a run's directory.

use std::path::Path;

use anyhow::Context as _;

use super::model::ContainerReport;
use super::{markdown, plots};

/// Writes containers.json, containers.md and the plots.
pub fn write(r: &ContainerReport, dir: &Path) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(r)?;
    std::fs::write(dir.join("containers.json"), json).context("cannot write containers.json")?;
    write_renderings(r, dir)
}

/// Writes containers.md and the plots (what `servelab report DIR` renders again).
pub fn write_renderings(r: &ContainerReport, dir: &Path) -> anyhow::Result<()> {
    let md = markdown::render(r);
    std::fs::write(dir.join("containers.md"), &md).context("cannot write containers.md")?;
    crate::html::write_figures(&plots::figures(r), dir)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::containers::model::{Point, ScaleRow};

    fn p(rps: f64) -> Point {
        Point::at_rate(rps)
    }

    #[test]
    fn scaling_plots_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let r = ContainerReport {
            scaling: [1usize, 10, 100]
                .iter()
                .flat_map(|c| {
                    [Some(1), Some(2)].into_iter().map(move |cpus| ScaleRow {
                        scenario: "B".into(),
                        place: "host".into(),
                        cpus,
                        clients: *c,
                        median: p(*c as f64 * 100.0),
                    })
                })
                .collect(),
            ..Default::default()
        };
        write(&r, dir.path()).unwrap();
        let md = std::fs::read_to_string(dir.path().join("containers.md")).unwrap();
        assert!(md.contains("| B | host | 2 | 100 | 10000 |"), "{md}");
        let svg = std::fs::read_to_string(dir.path().join("scaling-throughput.svg")).unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("B, host, 2 CPUs"),
            "{svg}"
        );
        assert!(dir.path().join("containers.json").exists());
    }
}
