//! `diff.md`: the two runs compared, as a list of sections ([`SECTIONS`]) over the
//! [`Diff`] — the summary, every figure's change with its interval and call, the rows
//! refused and why, the rows only one run has, what else differs.

use super::model::{Change, Diff};
use crate::doc::{Block, Doc, Section};
use crate::stats::{Verdict, coverage};
use crate::table::Table;

/// The diff, top to bottom.
pub const SECTIONS: &[Section<Diff>] = &[title, summary, changes, refused, unmatched, context];

/// The whole diff as Markdown.
pub fn render(diff: &Diff) -> String {
    Doc::of(diff, SECTIONS).to_markdown()
}

fn title(d: &Diff) -> Vec<Block> {
    vec![Block::Heading(
        1,
        format!(
            "servelab diff — {} ({}) → {} ({})",
            d.old.0, d.old.1, d.new.0, d.new.1
        ),
    )]
}

fn summary(d: &Diff) -> Vec<Block> {
    let t = d.threshold_pct;
    let tested = d.changes.iter().filter(|c| c.ratio.is_some()).count();
    let differs = d
        .changes
        .iter()
        .filter(|c| c.ratio.is_some_and(|r| r.verdict() == Verdict::Differs))
        .count();
    let worse: Vec<String> = d
        .regressions(t)
        .map(|c| format!("{} · {} · {} {}", c.group, c.row, c.figure, pct_words(c)))
        .collect();
    let better = d.changes.iter().filter(|c| c.improvement_beyond(t)).count();
    let mut items = vec![format!(
        "{} figures in both runs, {tested} with repeats on both sides: {differs} changed beyond their interval, {} of them for the worse by more than {t} % (regressions), {better} for the better by more than {t} %.",
        d.changes.len(),
        worse.len()
    )];
    items.extend(worse.into_iter().map(|w| format!("⚠ regression: {w}")));
    if !d.refused.is_empty() {
        items.push(format!(
            "{} rows not compared: their conditions differ (below).",
            d.refused.len()
        ));
    }
    vec![Block::h2("Summary"), Block::List(items)]
}

/// `+12.3 %`.
fn pct_words(c: &Change) -> String {
    c.pct().map_or("n/a".into(), |p| format!("{p:+.1} %"))
}

/// `+12.3 % (+5.0 to +20.1 %, 95 %)`.
fn change_cell(c: &Change) -> String {
    match c.ratio {
        None => format!("{} (medians only, no interval)", pct_words(c)),
        Some(r) => format!(
            "{} ({:+.1} to {:+.1} %, {})",
            pct_words(c),
            (r.ci.low - 1.0) * 100.0,
            (r.ci.high - 1.0) * 100.0,
            coverage::label(r.confidence())
        ),
    }
}

/// What the change means: a regression, better, worse within the threshold, or why
/// there is no call.
fn call(c: &Change, threshold: f64) -> String {
    let Some(r) = c.ratio else {
        return "—".into();
    };
    match r.verdict() {
        Verdict::Differs if c.regression_beyond(threshold) => "⚠ regression".into(),
        Verdict::Differs if c.improvement_beyond(threshold) => "better".into(),
        Verdict::Differs => format!("changed, within {threshold} %"),
        Verdict::NoDifference => "no measurable difference".into(),
        Verdict::Unresolved => format!("not resolved ({} and {} runs)", r.n_b, r.n_a),
    }
}

fn changes(d: &Diff) -> Vec<Block> {
    let mut t = Table::new([
        "Group",
        "Row",
        "Figure",
        "OLD",
        "NEW",
        "Change (CI, its confidence)",
        "Call",
    ])
    .left(3);
    for c in &d.changes {
        t.row([
            c.group.clone(),
            c.row.clone(),
            c.figure.clone(),
            figure(c.old),
            figure(c.new),
            change_cell(c),
            call(c, d.threshold_pct),
        ]);
    }
    vec![
        Block::h2("Every figure, OLD → NEW"),
        Block::text(
            "Medians over each run's repeats; the change is median(NEW) / median(OLD) − 1 with \
             its bootstrap interval from both runs' repeats, labelled with the confidence that \
             interval has at those repeat counts (`stats::coverage`: 75 % from 3 repeats a side, \
             95 % from 6). A regression is a change for the worse beyond the interval and beyond \
             the threshold; the NFS-level and TCP rows keep medians only and get no call.",
        ),
        Block::Table(t),
    ]
}

/// Three significant digits or two decimals, whichever says more.
fn figure(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

fn refused(d: &Diff) -> Vec<Block> {
    if d.refused.is_empty() {
        return Vec::new();
    }
    let items = d
        .refused
        .iter()
        .map(|r| format!("{} · {}: {}", r.group, r.row, r.reasons.join("; ")))
        .collect();
    vec![
        Block::h2("Not compared: conditions differ"),
        Block::text("A figure measured under other conditions is another figure, not a change."),
        Block::List(items),
    ]
}

fn unmatched(d: &Diff) -> Vec<Block> {
    if d.unmatched.is_empty() {
        return Vec::new();
    }
    vec![
        Block::h2("Rows and figures only one run has"),
        Block::List(d.unmatched.clone()),
    ]
}

fn context(d: &Diff) -> Vec<Block> {
    if d.context.is_empty() {
        return vec![
            Block::h2("What else differs"),
            Block::text("Nothing recorded: same machine, version and settings."),
        ];
    }
    vec![
        Block::h2("What else differs"),
        Block::List(d.context.clone()),
    ]
}
