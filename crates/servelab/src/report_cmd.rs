//! `servelab report`: re-render a saved comparison, or merge load-generator JSON files.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::Args;

use crate::compare::model::Report;

/// Re-render `report.md`, `report.html` and the plots of a saved `servelab compare` run from its
/// `report.json` (and `containers.md` and its plots from `containers.json`, when the run
/// has one); or, with `--merge`, merge `servelab load --json` files exactly.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run directory (`results/<date>-<host>`) or its `report.json`.
    #[arg(required_unless_present = "merge", conflicts_with = "merge")]
    pub dir: Option<PathBuf>,
    /// Merge these `servelab load --json` files (e.g. from replicated load generators)
    /// into one result, histograms included.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub merge: Vec<PathBuf>,
    /// With --merge: also write the merged result as JSON here.
    #[arg(long, value_name = "FILE", requires = "merge")]
    pub json: Option<PathBuf>,
}

pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    if !args.merge.is_empty() {
        let merged = loadgen::merge_files(&args.merge).context("cannot merge the load results")?;
        print!("{}", merged.render_text());
        if let Some(path) = &args.json {
            merged
                .write_json(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        return Ok(());
    }
    let Some(given) = args.dir else {
        bail!("give a run directory or --merge FILES");
    };
    let (dir, json_path) = if given.is_dir() {
        (given.clone(), given.join("report.json"))
    } else {
        (
            given
                .parent()
                .map(PathBuf::from)
                .unwrap_or_else(|| ".".into()),
            given.clone(),
        )
    };
    let text = std::fs::read_to_string(&json_path)
        .with_context(|| format!("cannot read {}", json_path.display()))?;
    let mut report: Report = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a servelab compare report", json_path.display()))?;
    // The answer is a function of the rows: recomputed, so a report written before the
    // answer section existed (or by an older servelab) gets today's.
    report.answer = crate::compare::answer::compute(&report);
    crate::compare::output::write_outputs(&report, &dir)?;
    let containers = crate::containers::model::ContainerReport::read(&dir);
    if let Some(c) = &containers {
        crate::containers::output::write_renderings(c, &dir)?;
    }
    crate::page::write(&dir, Some(&report), containers.as_ref())?;
    print!("{}", crate::compare::markdown::render(&report));
    println!(
        "\nRe-rendered: {}/report.md, report.html and the SVG plots.",
        dir.display()
    );
    Ok(())
}
