//! A comparison's files: `report.json`, `report.md` and the SVG plots, written by
//! `servelab compare` and again, from `report.json` alone, by `servelab report DIR`.

use std::path::Path;

use anyhow::Context as _;

use super::model::Report;
use super::{markdown, plots};

/// Writes `report.json`, `report.md` and the SVG plots into `dir`.
pub fn write_outputs(report: &Report, dir: &Path) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(report)?;
    std::fs::write(dir.join("report.json"), json).context("cannot write report.json")?;
    std::fs::write(dir.join("report.md"), markdown::render(report))
        .context("cannot write report.md")?;
    plots::write_all(report, dir)?;
    Ok(())
}
