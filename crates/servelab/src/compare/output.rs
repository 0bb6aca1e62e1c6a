//! A comparison's files: `report.json`, `report.md`, the SVG plots and `report.html`,
//! written by `servelab compare` and again, from `report.json` alone, by `servelab
//! report DIR`.

use std::path::Path;

use anyhow::Context as _;

use super::model::Report;
use super::{markdown, plots};
use crate::html::Figure;

/// Writes `report.json`, `report.md`, the SVG plots and `report.html` into `dir`.
pub fn write_outputs(report: &Report, dir: &Path) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(report)?;
    std::fs::write(dir.join("report.json"), json).context("cannot write report.json")?;
    let md = markdown::render(report);
    std::fs::write(dir.join("report.md"), &md).context("cannot write report.md")?;
    crate::html::write_figures(&plots::figures(report), dir)?;
    crate::html::write_figures(&crate::containers::report::figures_in(dir), dir)?;
    // A run with containers gets its page again once they are done, with both parts.
    let containers = std::fs::read_to_string(dir.join("containers.md")).ok();
    let containers_figures = containers
        .as_ref()
        .map(|_| crate::containers::report::figures_in(dir))
        .unwrap_or_default();
    write_html(
        Some(report),
        containers
            .as_deref()
            .map(|md| (md, containers_figures.as_slice())),
        dir,
    )
}

/// Writes `report.html`: the comparison's report (when there is one) followed by the
/// container comparison's (when there is one), each plot under the table it draws.
pub fn write_html(
    report: Option<&Report>,
    containers: Option<(&str, &[Figure])>,
    dir: &Path,
) -> anyhow::Result<()> {
    let mut md = String::new();
    let mut figures: Vec<Figure> = Vec::new();
    let mut title = "servelab compare --containers".to_string();
    if let Some(report) = report {
        md.push_str(&markdown::render(report));
        figures.extend(plots::figures(report));
        title = format!(
            "servelab compare — {} — {}",
            report.environment.hostname, report.environment.started_utc
        );
    }
    if let Some((c_md, c_figures)) = containers {
        if md.is_empty() {
            md.push_str(&format!("# {title}\n\n"));
        }
        md.push('\n');
        md.push_str(c_md);
        figures.extend(c_figures.iter().cloned());
    }
    crate::html::write_report(dir, &title, &md, &figures)?;
    Ok(())
}
