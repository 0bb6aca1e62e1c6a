//! `report.html` of a run directory: the comparison's report (when it ran) followed by
//! the container comparison's (when it ran), each plot under the table it draws — one
//! page for `servelab compare`, `compare --containers` and `servelab report DIR`.

use std::path::Path;

use crate::compare::model::Report;
use crate::containers::model::ContainerReport;
use crate::html::Figure;

/// Writes `report.html` into `dir` from the models that ran.
pub fn write(
    dir: &Path,
    report: Option<&Report>,
    containers: Option<&ContainerReport>,
) -> anyhow::Result<()> {
    let mut md = String::new();
    let mut figures: Vec<Figure> = Vec::new();
    let mut title = "servelab compare --containers".to_string();
    if let Some(report) = report {
        md.push_str(&crate::compare::markdown::render(report));
        figures.extend(crate::compare::plots::figures(report));
        title = format!(
            "servelab compare — {} — {}",
            report.environment.hostname, report.environment.started_utc
        );
    }
    if let Some(c) = containers {
        if md.is_empty() {
            md.push_str(&format!("# {title}\n"));
        }
        md.push('\n');
        md.push_str(&crate::containers::markdown::render(c));
        figures.extend(crate::containers::plots::figures(c));
    }
    crate::html::write_report(dir, &title, &md, &figures)?;
    Ok(())
}
