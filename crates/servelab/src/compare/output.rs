//! A comparison's files: `report.json`, `report.md` and the SVG plots, written by
//! `servelab compare` and again, from `report.json` alone, by `servelab report DIR`
//! (report.html, which may hold the container comparison too, is [`crate::page`]'s).

use std::path::Path;

use anyhow::Context as _;

use super::model::Report;
use super::{markdown, plots};

/// Writes `report.json`, `report.md` and the SVG plots into `dir`.
pub fn write_outputs(report: &Report, dir: &Path) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(report)?;
    std::fs::write(dir.join("report.json"), json).context("cannot write report.json")?;
    let md = markdown::render(report);
    std::fs::write(dir.join("report.md"), &md).context("cannot write report.md")?;
    crate::html::write_figures(&plots::figures(report), dir)?;
    Ok(())
}
