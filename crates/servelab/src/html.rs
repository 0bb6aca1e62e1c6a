//! report.html: one self-contained page per run — the Markdown report rendered to HTML
//! (answer first, as report.md has it), each plot inlined as SVG beside the table it
//! draws, inline CSS and a little inline script (hover values, series toggled from the
//! legend). It fetches nothing: a Content-Security-Policy forbids every request, so it
//! reads the same opened from disk, mailed, or offline; without script every value is
//! still in the tables and in each point's native hover (`<title>`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use pulldown_cmark::{Event, Options, Parser, html};

/// A plot: its SVG, the file it is also written to, and the heading (the Markdown text
/// after `## `) of the section whose table it draws.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub file: String,
    pub heading: String,
    pub svg: String,
}

/// Writes each figure's SVG into `dir`; returns the paths written.
pub fn write_figures(figures: &[Figure], dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    figures
        .iter()
        .map(|f| {
            let path = dir.join(&f.file);
            std::fs::write(&path, &f.svg)
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(path)
        })
        .collect()
}

/// Writes `report.html` into `dir`; returns its path.
pub fn write_report(
    dir: &Path,
    title: &str,
    markdown: &str,
    figures: &[Figure],
) -> anyhow::Result<PathBuf> {
    let path = dir.join("report.html");
    std::fs::write(&path, render(title, markdown, figures))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// The page: `markdown`'s sections in order, each followed by the figures that name its
/// heading; figures naming no section get one of their own at the end, so none is lost.
pub fn render(title: &str, markdown: &str, figures: &[Figure]) -> String {
    let sections = split_sections(markdown);
    let mut used = vec![false; figures.len()];
    let mut body = String::new();
    let mut nav = String::new();
    for (i, s) in sections.iter().enumerate() {
        let id = format!("s{i}");
        if let Some(h) = &s.heading {
            nav.push_str(&format!(
                r##"<li><a href="#{id}">{}</a></li>"##,
                escape(&plain(h))
            ));
        }
        body.push_str(&section_html(&id, s, figures, &mut used));
    }
    let rest: Vec<&Figure> = figures
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(f, _)| f)
        .collect();
    if !rest.is_empty() {
        let id = format!("s{}", sections.len());
        nav.push_str(&format!(r##"<li><a href="#{id}">Plots</a></li>"##));
        body.push_str(&format!(
            r#"<section id="{id}" class="section"><h2>Plots</h2><div class="figures">"#
        ));
        for f in rest {
            body.push_str(&figure_html(f));
        }
        body.push_str("</div></section>");
    }
    page(title, &nav, &body)
}

/// One section as HTML, with the figures that name its heading (not `used` yet) right
/// under its first table, the one they draw.
fn section_html(id: &str, s: &Section, figures: &[Figure], used: &mut [bool]) -> String {
    let class = match &s.heading {
        Some(h) if h.trim_start().to_lowercase().starts_with("the answer") => "answer",
        Some(_) => "section",
        None => "preamble",
    };
    let mut html = markdown_to_html(&s.text);
    if let Some(h) = &s.heading {
        let mine: Vec<usize> = (0..figures.len())
            .filter(|&k| !used[k] && figures[k].heading.trim() == h.trim())
            .collect();
        if !mine.is_empty() {
            let mut block = String::from(r#"<div class="figures">"#);
            for k in mine {
                used[k] = true;
                block.push_str(&figure_html(&figures[k]));
            }
            block.push_str("</div>");
            let at = html
                .find(TABLE_END)
                .map(|i| i + TABLE_END.len())
                .unwrap_or(html.len());
            html.insert_str(at, &block);
        }
    }
    format!(r#"<section id="{id}" class="{class}">{html}</section>"#)
}

/// The whole document around the navigation and the sections.
fn page(title: &str, nav: &str, body: &str) -> String {
    format!(
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="generator" content="servelab">
<title>{title}</title>
<style>{CSS}</style>
</head>
<body>
<nav><strong>Contents</strong><ul>{nav}</ul></nav>
<main>
{body}
</main>
<div id="tip" role="tooltip" hidden></div>
<script>{SCRIPT}</script>
</body>
</html>
"#,
        title = escape(title),
    )
}

fn figure_html(f: &Figure) -> String {
    format!(
        r#"<figure>{}<figcaption>Also written as <a href="{file}">{file}</a>. Click a legend entry to hide or show its series; hover a point or bar for its value.</figcaption></figure>"#,
        f.svg.trim_end(),
        file = escape(&f.file)
    )
}

/// One `## ` or `### ` section of the Markdown (or the text before the first), code
/// fences respected.
struct Section {
    heading: Option<String>,
    text: String,
}

fn split_sections(markdown: &str) -> Vec<Section> {
    let mut out = vec![Section {
        heading: None,
        text: String::new(),
    }];
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let heading = line
            .strip_prefix("## ")
            .or_else(|| line.strip_prefix("### "));
        if !fenced && let Some(h) = heading {
            out.push(Section {
                heading: Some(h.trim().to_string()),
                text: String::new(),
            });
        }
        let last = out.last_mut().expect("never empty");
        last.text.push_str(line);
        last.text.push('\n');
    }
    if out[0].text.trim().is_empty() {
        out.remove(0);
    }
    out
}

/// CommonMark + tables to HTML. Raw HTML in the text (an error message quoting a tag,
/// say) is shown as text, never interpreted; tables scroll on their own when wide.
fn markdown_to_html(text: &str) -> String {
    let mut opts = Options::empty();
    opts.insert(Options::ENABLE_TABLES);
    opts.insert(Options::ENABLE_STRIKETHROUGH);
    let parser = Parser::new_ext(text, opts).map(|e| match e {
        Event::Html(t) | Event::InlineHtml(t) => Event::Text(t),
        e => e,
    });
    let mut out = String::new();
    html::push_html(&mut out, parser);
    out.replace("<table>", r#"<div class="table-wrap"><table>"#)
        .replace("</table>", "</table></div>")
}

const TABLE_END: &str = "</table></div>";

/// A heading's Markdown as plain text for the contents list.
fn plain(heading: &str) -> String {
    heading.replace(['`', '*'], "")
}

fn escape(text: &str) -> String {
    crate::chart::svg::escape(text)
}

const CSS: &str = r#"
:root { color-scheme: light; }
body { margin: 0; font: 15px/1.5 "DejaVu Sans", Arial, Helvetica, sans-serif; color: #1a1a1a; background: #fafafa; display: flex; }
nav { position: sticky; top: 0; align-self: flex-start; max-height: 100vh; overflow-y: auto; width: 230px; flex: none; padding: 16px; box-sizing: border-box; font-size: 13px; border-right: 1px solid #ddd; background: #fff; }
nav ul { padding-left: 16px; margin: 6px 0; }
nav li { margin: 3px 0; }
main { flex: 1; min-width: 0; padding: 8px 28px 40px; max-width: 1400px; }
section { background: #fff; border: 1px solid #e3e3e3; border-radius: 6px; padding: 4px 20px 12px; margin: 16px 0; }
section.preamble { background: transparent; border: none; padding: 0; }
section.answer { border: 2px solid #0072B2; background: #f3f8fc; font-size: 16px; }
h1 { font-size: 24px; margin: 16px 0 4px; }
h2 { font-size: 19px; margin: 16px 0 8px; }
code { background: #f0f0f0; padding: 0 3px; border-radius: 3px; font-size: 90%; }
.table-wrap { overflow-x: auto; margin: 8px 0; }
table { border-collapse: collapse; font-size: 13px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d8d8d8; padding: 3px 8px; }
th { background: #f2f2f2; }
tr:nth-child(even) td { background: #fbfbfb; }
.figures { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 8px 0; max-width: 100%; }
figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 12px; color: #555; }
g.legend-item { cursor: pointer; }
g.legend-item.off { opacity: 0.35; }
g.series.off { display: none; }
#tip { position: fixed; pointer-events: none; background: #222; color: #fff; font-size: 12px; padding: 4px 8px; border-radius: 4px; max-width: 420px; z-index: 10; }
@media print { nav { display: none; } body { display: block; background: #fff; } section { break-inside: avoid; } }
@media (max-width: 800px) { body { display: block; } nav { position: static; width: auto; max-height: none; border: none; } }
"#;

/// Legend toggles and hover values; the page reads the same without it.
const SCRIPT: &str = r#"
(function () {
  document.querySelectorAll('svg.chart g.legend-item').forEach(function (item) {
    item.setAttribute('tabindex', '0');
    item.setAttribute('role', 'button');
    function toggle() {
      var svg = item.closest('svg');
      var n = item.getAttribute('data-series');
      var off = !item.classList.contains('off');
      item.classList.toggle('off', off);
      item.setAttribute('aria-pressed', off ? 'true' : 'false');
      svg.querySelectorAll('g.series[data-series="' + n + '"]').forEach(function (g) {
        g.classList.toggle('off', off);
      });
    }
    item.addEventListener('click', toggle);
    item.addEventListener('keydown', function (e) {
      if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); toggle(); }
    });
  });
  var tip = document.getElementById('tip');
  document.querySelectorAll('svg.chart g.point, svg.chart g.bar').forEach(function (g) {
    var t = g.querySelector('title');
    if (!t) { return; }
    g.addEventListener('mousemove', function (e) {
      tip.textContent = t.textContent;
      tip.hidden = false;
      tip.style.left = (e.clientX + 14) + 'px';
      tip.style.top = (e.clientY + 14) + 'px';
    });
    g.addEventListener('mouseleave', function () { tip.hidden = true; });
  });
})();
"#;

#[cfg(test)]
mod tests {
    use super::*;

    const MD: &str = "# servelab compare — host — now\n\nIntro <b>raw</b>.\n\n## The answer\n\nA cost 4 × B.\n\n## HTTP: `big.bin`\n\n| a | b |\n|---|---:|\n| 1 | 2 |\n\n```\n## not a heading\n```\n\n## Other\n\ntext\n";

    fn fig(heading: &str, file: &str) -> Figure {
        Figure {
            file: file.into(),
            heading: heading.into(),
            svg: format!(r#"<svg class="chart"><title>{file}</title></svg>"#),
        }
    }

    #[test]
    fn figures_go_beside_their_section_and_none_is_lost() {
        let page = render(
            "t",
            MD,
            &[fig("HTTP: `big.bin`", "a.svg"), fig("Nowhere", "b.svg")],
        );
        let http = page.find("<code>big.bin</code>").unwrap();
        let other = page.find("<h2>Other</h2>").unwrap();
        let a = page.find("<title>a.svg</title>").unwrap();
        assert!(http < a && a < other, "a.svg belongs in the HTTP section");
        assert!(
            page.find("</table></div>").unwrap() < a,
            "under the table it draws"
        );
        let plots = page.find("<h2>Plots</h2>").unwrap();
        assert!(page.find("<title>b.svg</title>").unwrap() > plots);
        // The fenced line is code, not a section.
        assert!(page.contains("## not a heading"));
        assert_eq!(page.matches("<section").count(), 5);
    }

    #[test]
    fn the_answer_comes_first_and_is_marked() {
        let page = render("t", MD, &[]);
        let answer = page.find(r#"class="answer""#).unwrap();
        assert!(answer < page.find("<h2>HTTP").unwrap());
        assert!(page.contains(r##"<a href="#s1">The answer</a>"##));
    }

    #[test]
    fn the_page_fetches_nothing_and_interprets_no_raw_html() {
        let page = render("t <x>", MD, &[fig("HTTP: `big.bin`", "a.svg")]);
        assert!(page.contains("default-src 'none'"));
        assert!(page.contains("&lt;b&gt;raw&lt;/b&gt;"));
        assert!(page.contains("<title>t &lt;x&gt;</title>"));
        for banned in ["src=\"http", "href=\"http", "@import", "url("] {
            assert!(!page.contains(banned), "{banned}");
        }
        assert!(page.contains(r#"<div class="table-wrap"><table>"#));
    }
}
