//! `servelab diff OLD NEW`: two comparison runs (their `report.json`, or the run
//! directories holding them) compared row by row — every figure's change with its
//! interval and significance ([`model`]), printed as Markdown and written as `diff.md`
//! and `diff.html` beside NEW's report ([`markdown`]); rows whose conditions differ are
//! refused with the reason; `--fail-on-regression PCT` exits non-zero when a figure got
//! worse beyond its interval by more than PCT percent, for a CI job.

pub mod markdown;
pub mod model;

use std::path::{Path, PathBuf};

use clap::Args;

use crate::compare::model::Report;

/// Compare two `servelab compare` runs: every figure's change with its interval and a
/// significance call; writes diff.md and diff.html beside NEW's report.json.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The earlier run: its directory or its report.json.
    pub old: PathBuf,
    /// The later run: its directory or its report.json (diff.md and diff.html go there).
    pub new: PathBuf,
    /// Flag changes for the worse beyond their interval and beyond this many percent.
    #[arg(long, default_value_t = 5.0, value_name = "PCT")]
    pub threshold: f64,
    /// Exit with status 3 when any figure got worse beyond its interval by more than
    /// PCT percent.
    #[arg(long, value_name = "PCT")]
    pub fail_on_regression: Option<f64>,
}

/// What stops a diff.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a servelab compare report.json")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--{option} {value}: give a percentage between 0 and 1000")]
    Percent { option: &'static str, value: f64 },
    #[error(
        "{count} figures got worse by more than {pct} % beyond their interval (see the ⚠ rows)"
    )]
    Regression { count: usize, pct: f64 },
}

impl DiffError {
    /// The exit status: 3 for a regression (the CI's signal), 1 for anything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            DiffError::Regression { .. } => 3,
            _ => 1,
        }
    }
}

/// A run's report.json, from its directory or the file itself.
pub fn load(given: &Path) -> Result<(Report, PathBuf), DiffError> {
    let path = if given.is_dir() {
        given.join("report.json")
    } else {
        given.to_path_buf()
    };
    let text = std::fs::read_to_string(&path).map_err(|source| DiffError::Read {
        path: path.clone(),
        source,
    })?;
    let report = serde_json::from_str(&text).map_err(|source| DiffError::Parse {
        path: path.clone(),
        source,
    })?;
    Ok((report, path))
}

fn percent(option: &'static str, value: f64) -> Result<f64, DiffError> {
    if value.is_finite() && (0.0..=1000.0).contains(&value) {
        Ok(value)
    } else {
        Err(DiffError::Percent { option, value })
    }
}

/// Loads both runs, prints the diff, writes diff.md and diff.html beside NEW.
pub fn run(args: DiffArgs) -> Result<(), DiffError> {
    let threshold = percent("threshold", args.threshold)?;
    let fail = args
        .fail_on_regression
        .map(|p| percent("fail-on-regression", p))
        .transpose()?;
    let (old, _) = load(&args.old)?;
    let (new, new_path) = load(&args.new)?;
    let names = (
        args.old.display().to_string(),
        args.new.display().to_string(),
    );
    let diff = model::compare(&old, &new, names, threshold);
    let md = markdown::render(&diff);
    print!("{md}");
    let dir = new_path.parent().unwrap_or(Path::new("."));
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| DiffError::Write { path, source })
    };
    write("diff.md", &md)?;
    write("diff.html", &crate::html::render("servelab diff", &md, &[]))?;
    if let Some(pct) = fail {
        let count = diff.regressions(pct).count();
        if count > 0 {
            return Err(DiffError::Regression { count, pct });
        }
    }
    Ok(())
}
