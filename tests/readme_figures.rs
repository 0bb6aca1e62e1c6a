//! The README's Performance section against the committed results it cites (issue 35 §1:
//! its figures told the second wave's story for days after the reports had moved on).
//!
//! The rule the section is written to: every figure in it is either a quote (a `>` line,
//! whose text after `> ` and an optional `- ` appears word for word in one of the files
//! the section links under `benches/results/`) or a row of a copied table (a `|` line that
//! is a line of one of those files). Prose carries no digits, except inside links (their
//! paths hold dates). So a rerun that changes a figure cannot leave the README behind: the
//! figure is quoted from the new result and the link follows it, or this test fails and
//! names the line.

use std::path::{Path, PathBuf};

/// The text of `## Performance` up to the next `## ` heading, with each line's 1-based
/// number in README.md.
fn performance_section(readme: &str) -> Vec<(usize, &str)> {
    let mut inside = false;
    let mut out = Vec::new();
    for (i, line) in readme.lines().enumerate() {
        if line.starts_with("## ") {
            inside = line.trim() == "## Performance";
            continue;
        }
        if inside {
            out.push((i + 1, line));
        }
    }
    out
}

/// The targets of the Markdown links `[text](target)` on `line`, without `#fragment`s.
fn link_targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(after[..end].split('#').next().unwrap_or(""));
        rest = &after[end..];
    }
    out
}

/// `line` with every link `[text](target)` removed whole, for the digit check.
fn without_links(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|c| open + c) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|e| close + e) else {
            break;
        };
        out.push_str(&rest[..open]);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The committed result files the section links (a directory link reads its README.md).
fn cited_files(repo: &Path, section: &[(usize, &str)]) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    for (n, line) in section {
        for target in link_targets(line) {
            if !target.starts_with("benches/results/") {
                continue;
            }
            let mut path = repo.join(target);
            if path.is_dir() {
                path = path.join("README.md");
            }
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!("README.md:{n}: links {target}, which cannot be read: {e}")
            });
            files.push((path, text));
        }
    }
    files
}

/// What is wrong with one line of the section, if anything.
fn check_line(line: &str, files: &[(PathBuf, String)]) -> Option<String> {
    let trimmed = line.trim();
    if let Some(quote) = trimmed.strip_prefix('>') {
        let quote = quote.trim();
        let quote = quote.strip_prefix("- ").unwrap_or(quote);
        return (!files.iter().any(|(_, text)| text.contains(quote)))
            .then(|| format!("the quote is in none of the results the section links: {quote}"));
    }
    if trimmed.starts_with('|') {
        let separator = trimmed.chars().all(|c| "|-: ".contains(c));
        let copied = files
            .iter()
            .any(|(_, text)| text.lines().any(|l| l.trim() == trimmed));
        return (!separator && !copied)
            .then(|| format!("the table row is a line of none of the linked results: {trimmed}"));
    }
    has_figure(&without_links(trimmed))
        .then(|| format!("a figure outside a quote or a copied table row: {trimmed}"))
}

/// Whether `text` holds a number: a digit not preceded by a letter, digit or dot, so
/// names such as NFSv4.0, iperf3 and h2o are not figures while `4 KiB` and `29 %` are.
fn has_figure(text: &str) -> bool {
    let mut previous = ' ';
    for c in text.chars() {
        if c.is_ascii_digit() && !(previous.is_alphanumeric() || previous == '.') {
            return true;
        }
        previous = c;
    }
    false
}

#[test]
fn readme_performance_quotes_committed_results() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let section = performance_section(&readme);
    assert!(
        !section.is_empty(),
        "README.md has no `## Performance` section"
    );
    let files = cited_files(repo, &section);
    assert!(
        !files.is_empty(),
        "README.md's Performance section links no committed result under benches/results/"
    );
    let problems: Vec<String> = section
        .iter()
        .filter_map(|(n, line)| check_line(line, &files).map(|p| format!("README.md:{n}: {p}")))
        .collect();
    assert!(
        problems.is_empty(),
        "README.md's Performance section is not tied to the results it cites (quote them \
         word for word and link the file):\n{}",
        problems.join("\n")
    );
    let quotes = section
        .iter()
        .filter(|(_, l)| l.trim_start().starts_with('>'))
        .count();
    assert!(quotes > 0, "the Performance section quotes no result");
}

#[test]
fn the_check_refuses_drifted_figures_and_accepts_quoted_ones() {
    let files = vec![(
        PathBuf::from("r.md"),
        "- Serving cost 5.21 × the CPU.\n| a | 1.0 |\n".to_string(),
    )];
    assert_eq!(check_line("> Serving cost 5.21 × the CPU.", &files), None);
    assert_eq!(check_line("> - Serving cost 5.21 × the CPU.", &files), None);
    assert!(check_line("> Serving cost 4.19 × the CPU.", &files).is_some());
    assert_eq!(check_line("| a | 1.0 |", &files), None);
    assert!(check_line("| a | 1.1 |", &files).is_some());
    assert_eq!(check_line("|---|---:|", &files), None);
    assert!(check_line("A beats B by 29 %.", &files).is_some());
    assert!(check_line("on 4 KiB files", &files).is_some());
    assert_eq!(
        check_line("NFSv4.0 rows beside iperf3 and h2o", &files),
        None
    );
    assert_eq!(
        check_line(
            "See [it](benches/results/2026-12-02-answer/report.md).",
            &files
        ),
        None
    );
    assert_eq!(
        link_targets("[a](x/y.md#z) and [b](c)"),
        vec!["x/y.md", "c"]
    );
}
