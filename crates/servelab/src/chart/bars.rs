//! Horizontal bar charts: one labelled bar per row (labels wrapped in their own column, so
//! long scenario names never print over each other), a whisker for the spread or CI, the
//! value written beside each bar, one panel per workload with its own scale.

use std::fmt::Write as _;

use super::axis::{Axis, Range, value_text};
use super::line::thin;
use super::style::{WIDTH, style};
use super::svg::{self, Anchor, Doc, FONT, TITLE_FONT};

#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    pub value: f64,
    /// Lowest–highest of the runs, or a confidence interval: drawn as a whisker.
    pub spread: Option<(f64, f64)>,
    /// Which colour the bar takes (the same thing in every panel takes the same colour).
    pub color: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BarPanel {
    pub title: String,
    pub bars: Vec<Bar>,
    /// A vertical reference line (e.g. 1.0 for a ratio, or B's value) with its label.
    pub reference: Option<(f64, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    pub title: String,
    pub subtitle: Option<String>,
    /// The value axis (horizontal), with units.
    pub value_axis: Axis,
    /// The unit a hover and the value label give (e.g. "req/s", "×").
    pub unit: String,
    /// What the whisker means, for the hover ("spread" or "95 % CI").
    pub whisker: String,
    pub panels: Vec<BarPanel>,
}

const LABEL_WIDTH: f64 = 290.0;
const VALUE_ROOM: f64 = 96.0;
const BAR_ROW_MIN: f64 = 30.0;

/// One panel's wrapped bar labels and the height of each bar's row.
struct Layout {
    labels: Vec<Vec<String>>,
    rows: Vec<f64>,
}

impl BarChart {
    pub fn to_svg(&self) -> String {
        // Height first: every panel's rows, its title and its axis.
        let layouts: Vec<Layout> = self.panels.iter().map(layout).collect();
        let top = if self.subtitle.is_some() { 56.0 } else { 40.0 };
        let panel_chrome = 30.0 + 50.0; // panel title above, axis ticks and title below
        let height = top
            + layouts
                .iter()
                .map(|l| l.rows.iter().sum::<f64>() + panel_chrome)
                .sum::<f64>()
            + 10.0;

        let mut doc = Doc::new(height, &self.title);
        doc.text(
            16.0,
            24.0,
            Anchor::Start,
            TITLE_FONT,
            &self.title,
            r#" font-weight="bold""#,
        );
        if let Some(sub) = &self.subtitle {
            doc.text(16.0, 44.0, Anchor::Start, FONT, sub, r##" fill="#444444""##);
        }
        let mut y = top;
        for (panel, l) in self.panels.iter().zip(&layouts) {
            y = self.draw_panel(&mut doc, panel, l, y);
        }
        doc.finish()
    }

    /// One panel from `y` down: its title, axis, bars and reference line; returns where
    /// the next panel starts.
    fn draw_panel(&self, doc: &mut Doc, panel: &BarPanel, l: &Layout, y: f64) -> f64 {
        let (x0, x1) = (LABEL_WIDTH + 24.0, WIDTH - VALUE_ROOM);
        doc.text(
            16.0,
            y + 18.0,
            Anchor::Start,
            13.0,
            &panel.title,
            r#" font-weight="bold""#,
        );
        let range = Range::fit(
            self.value_axis.scale,
            panel
                .bars
                .iter()
                .flat_map(|b| {
                    let (lo, hi) = b.spread.unwrap_or((b.value, b.value));
                    [b.value, lo, hi]
                })
                .chain(panel.reference.as_ref().map(|r| r.0)),
            true,
        );
        let (py0, py1) = (y + 30.0, y + 30.0 + l.rows.iter().sum::<f64>());
        for (v, label) in thin(
            &range.ticks,
            |v| range.map(v, x0, x1),
            8.0,
            |l| svg::text_width(l, FONT),
        ) {
            let x = range.map(v, x0, x1);
            doc.line(x, py0, x, py1, "#ececec", 1.0);
            doc.line(x, py1, x, py1 + 4.0, "#333333", 1.0);
            doc.text(x, py1 + 17.0, Anchor::Middle, FONT, &label, "");
        }
        doc.text(
            (x0 + x1) / 2.0,
            py1 + 36.0,
            Anchor::Middle,
            FONT,
            &self.value_axis.title(),
            "",
        );
        let mut ry = py0;
        for ((bar, lines), row_h) in panel.bars.iter().zip(&l.labels).zip(&l.rows) {
            self.draw_bar(doc, bar, lines, &range, ry + row_h / 2.0, *row_h);
            ry += row_h;
        }
        doc.line(x0, py0, x0, py1, "#333333", 1.0);
        doc.line(x0, py1, x1, py1, "#333333", 1.0);
        if let Some((v, label)) = &panel.reference {
            let x = range.map(*v, x0, x1);
            doc.raw(&format!(
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{py1:.1}" stroke="#555555" stroke-width="1.2" stroke-dasharray="4 3"/>"##,
                py0 - 4.0
            ));
            // Named by the subtitle and by its hover: a label drawn here would meet the
            // panel title or a bar's value.
            doc.raw(&format!(
                r##"<line x1="{x:.1}" y1="{py0:.1}" x2="{x:.1}" y2="{py1:.1}" stroke="#000000" stroke-opacity="0" stroke-width="8"><title>{}: {}</title></line>"##,
                svg::escape(label),
                value_text(*v)
            ));
        }
        py1 + 50.0
    }

    /// One bar centred on `cy`: its label, the bar with its whisker and hover, its value.
    fn draw_bar(
        &self,
        doc: &mut Doc,
        bar: &Bar,
        lines: &[String],
        range: &Range,
        cy: f64,
        row_h: f64,
    ) {
        let (x0, x1) = (LABEL_WIDTH + 24.0, WIDTH - VALUE_ROOM);
        let first_baseline = cy - (lines.len() as f64 - 1.0) * FONT * 1.25 / 2.0 + 4.0;
        doc.lines(LABEL_WIDTH + 12.0, first_baseline, Anchor::End, FONT, lines);
        let st = style(bar.color);
        let bx0 = range.map(range.lo.max(0.0).min(range.hi), x0, x1);
        let bx1 = range.map(bar.value, x0, x1);
        let bh = (row_h - 10.0).min(20.0);
        let mut tip = format!("{}: {} {}", bar.label, value_text(bar.value), self.unit);
        let mut g = String::from(r#"<g class="bar">"#);
        let _ = write!(
            g,
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="{}" fill-opacity="0.85"/>"#,
            bx0.min(bx1),
            cy - bh / 2.0,
            (bx1 - bx0).abs().max(1.0),
            st.color
        );
        let mut text_x = bx1.max(bx0);
        if let Some((lo, hi)) = bar.spread {
            let _ = write!(
                tip,
                " ({} {}–{})",
                self.whisker,
                value_text(lo),
                value_text(hi)
            );
            let (wx0, wx1) = (range.map(lo, x0, x1), range.map(hi, x0, x1));
            let _ = write!(
                g,
                r##"<path d="M{wx0:.1},{cy:.1}L{wx1:.1},{cy:.1}M{wx0:.1},{:.1}L{wx0:.1},{:.1}M{wx1:.1},{:.1}L{wx1:.1},{:.1}" stroke="#222222" stroke-width="1.5" fill="none"/>"##,
                cy - 6.0,
                cy + 6.0,
                cy - 6.0,
                cy + 6.0
            );
            text_x = text_x.max(wx1);
        }
        let _ = write!(g, "<title>{}</title></g>", svg::escape(&tip));
        doc.raw(&g);
        doc.text(
            text_x + 6.0,
            cy + 4.0,
            Anchor::Start,
            FONT,
            &format!("{} {}", value_text(bar.value), self.unit),
            "",
        );
    }
}

/// A panel's labels wrapped to the label column, and each row's height.
fn layout(p: &BarPanel) -> Layout {
    let labels: Vec<Vec<String>> = p
        .bars
        .iter()
        .map(|b| svg::wrap(&b.label, LABEL_WIDTH, FONT))
        .collect();
    let rows = labels
        .iter()
        .map(|l| BAR_ROW_MIN.max(l.len() as f64 * FONT * 1.25 + 10.0))
        .collect();
    Layout { labels, rows }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_carry_labels_values_whiskers_and_hovers() {
        let chart = BarChart {
            title: "Requests/s".into(),
            subtitle: Some("medians of 5 runs; whiskers: lowest–highest".into()),
            value_axis: Axis::linear("requests/s"),
            unit: "req/s".into(),
            whisker: "spread".into(),
            panels: vec![BarPanel {
                title: "10 MiB".into(),
                bars: vec![
                    Bar {
                        label: "B (local)".into(),
                        value: 226.7,
                        spread: Some((210.0, 240.0)),
                        color: 0,
                    },
                    Bar {
                        label: "A (NFS: rustnfs, client cache — like a kernel mount, copies in unlinked files on ext4)".into(),
                        value: 81_500.0,
                        spread: None,
                        color: 1,
                    },
                ],
                reference: Some((226.7, "B".into())),
            }],
        };
        let svg = chart.to_svg();
        assert_eq!(svg.matches(r#"<g class="bar">"#).count(), 2);
        assert!(svg.contains("B (local): 227 req/s (spread 210–240)"));
        assert!(svg.contains("81,500 req/s"));
        assert!(svg.contains("stroke-dasharray"));
        // The long label was wrapped onto several lines.
        assert!(svg.matches("text-anchor=\"end\"").count() >= 3);
    }
}
