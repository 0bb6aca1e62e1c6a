//! A comparison's files: `report.json`, `report.md`, the SVG plots and `report.html`,
//! written by `servelab compare` and again, from `report.json` alone, by `servelab
//! report DIR`.

use std::path::Path;

use anyhow::Context as _;

use super::model::Report;
use super::{markdown, plots};

/// Writes `report.json`, `report.md`, the SVG plots and `report.html` into `dir`.
pub fn write_outputs(report: &Report, dir: &Path) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(report)?;
    std::fs::write(dir.join("report.json"), json).context("cannot write report.json")?;
    let md = markdown::render(report);
    std::fs::write(dir.join("report.md"), &md).context("cannot write report.md")?;
    let figures = plots::figures(report);
    crate::html::write_figures(&figures, dir)?;
    let title = format!(
        "servelab compare — {} — {}",
        report.environment.hostname, report.environment.started_utc
    );
    crate::html::write_report(dir, &title, &md, &figures)?;
    Ok(())
}
