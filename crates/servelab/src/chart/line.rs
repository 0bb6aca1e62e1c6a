//! Line charts: series of points (with an optional spread bar each), the legend in its own
//! column to the right of the data, tick labels thinned until they cannot touch.

use std::fmt::Write as _;

use super::axis::{Axis, Range, value_text};
use super::style::{WIDTH, style};
use super::svg::{self, Anchor, Doc, FONT, TITLE_FONT};

/// One point; `spread` is the lowest–highest (or CI) of `y`, drawn as a vertical bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub spread: Option<(f64, f64)>,
    /// How the hover names `x` (e.g. "p99" or "100 clients"); the number otherwise.
    pub x_label: Option<String>,
}

impl Point {
    pub fn new(x: f64, y: f64) -> Self {
        Point {
            x,
            y,
            spread: None,
            x_label: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    pub title: String,
    /// One short line under the title (what the figures are: medians of N runs, …).
    pub subtitle: Option<String>,
    pub x: Axis,
    pub y: Axis,
    /// Ticks of the x axis with their labels, where the numbers are not what a reader
    /// wants (percentiles drawn on a "nines" axis); fitted 1–2–5 ticks otherwise.
    pub x_ticks: Option<Vec<(f64, String)>>,
    /// The unit a hover gives `y` in ("ms", "req/s").
    pub y_unit: String,
    pub series: Vec<Series>,
}

const LEGEND_WIDTH: f64 = 260.0;
const LEGEND_SAMPLE: f64 = 30.0;
const TOP: f64 = 64.0;
const BOTTOM: f64 = 62.0;
const MIN_PLOT_HEIGHT: f64 = 300.0;
/// Markers drawn on one series at the most.
const MAX_MARKERS: usize = 16;

/// Where the plot area sits in the picture and how values map onto it.
struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    height: f64,
    x_range: Range,
    y_range: Range,
}

impl Frame {
    fn x(&self, v: f64) -> f64 {
        self.x_range.map(v, self.x0, self.x1)
    }

    fn y(&self, v: f64) -> f64 {
        self.y_range.map(v, self.y1, self.y0)
    }
}

impl LineChart {
    pub fn to_svg(&self) -> String {
        // The legend: one entry per series, its name wrapped to the column.
        let legend: Vec<Vec<String>> = self
            .series
            .iter()
            .map(|s| svg::wrap(&s.name, LEGEND_WIDTH - LEGEND_SAMPLE - 14.0, FONT))
            .collect();
        let legend_height: f64 = legend
            .iter()
            .map(|l| l.len() as f64 * FONT * 1.25 + 8.0)
            .sum();
        let f = self.frame(MIN_PLOT_HEIGHT.max(legend_height));
        let mut doc = Doc::new(f.height, &self.title);
        self.titles_and_axes(&mut doc, &f);
        for (i, s) in self.series.iter().enumerate() {
            doc.raw(&self.series_svg(i, s, &f));
        }
        draw_legend(&mut doc, &legend, f.y0);
        doc.finish()
    }

    /// The y range from every point and spread (from zero on a linear axis).
    fn y_range(&self) -> Range {
        Range::fit(
            self.y.scale,
            self.series.iter().flat_map(|s| {
                s.points.iter().flat_map(|p| {
                    let (lo, hi) = p.spread.unwrap_or((p.y, p.y));
                    [p.y, lo, hi]
                })
            }),
            self.y.scale == super::axis::Scale::Linear,
        )
    }

    /// The x range from the points, or from the given ticks and the points.
    fn x_range(&self) -> Range {
        let mut x_range = Range::fit(
            self.x.scale,
            self.series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.x)),
            false,
        );
        if let Some(ticks) = &self.x_ticks {
            // The given ticks and the points decide the range, with a margin on each side
            // so the first and last labels stay inside the plot.
            let xs = ticks.iter().map(|t| t.0).chain(
                self.series
                    .iter()
                    .flat_map(|s| s.points.iter().map(|p| p.x)),
            );
            let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(x), hi.max(x))
            });
            if lo.is_finite() && hi > lo {
                let pad = (hi - lo) * 0.06;
                x_range.lo = lo - pad;
                x_range.hi = hi + pad;
            }
            x_range.ticks = ticks.clone();
        }
        x_range
    }

    /// The plot area beside the y labels and left of the legend, `plot_height` high.
    fn frame(&self, plot_height: f64) -> Frame {
        let (x_range, y_range) = (self.x_range(), self.y_range());
        let y_label_width = y_range
            .ticks
            .iter()
            .map(|t| svg::text_width(&t.1, FONT))
            .fold(0.0, f64::max);
        Frame {
            x0: (y_label_width + 44.0).max(70.0),
            x1: WIDTH - LEGEND_WIDTH - 20.0,
            y0: TOP,
            y1: TOP + plot_height,
            height: TOP + plot_height + BOTTOM,
            x_range,
            y_range,
        }
    }

    /// Title, subtitle, grid, ticks and axis titles.
    fn titles_and_axes(&self, doc: &mut Doc, f: &Frame) {
        let (x0, x1, y0, y1) = (f.x0, f.x1, f.y0, f.y1);
        doc.text(
            x0,
            24.0,
            Anchor::Start,
            TITLE_FONT,
            &self.title,
            r#" font-weight="bold""#,
        );
        if let Some(sub) = &self.subtitle {
            doc.text(x0, 44.0, Anchor::Start, FONT, sub, r##" fill="#444444""##);
        }
        for (v, label) in thin(&f.y_range.ticks, |v| f.y(v), FONT * 1.3, |_| FONT) {
            let y = f.y(v);
            doc.line(x0, y, x1, y, "#e5e5e5", 1.0);
            doc.text(x0 - 6.0, y + 4.0, Anchor::End, FONT, &label, "");
        }
        for (v, label) in thin(
            &f.x_range.ticks,
            |v| f.x(v),
            8.0,
            |l| svg::text_width(l, FONT),
        ) {
            let x = f.x(v);
            doc.line(x, y0, x, y1, "#f0f0f0", 1.0);
            doc.line(x, y1, x, y1 + 5.0, "#333333", 1.0);
            doc.text(x, y1 + 19.0, Anchor::Middle, FONT, &label, "");
        }
        doc.line(x0, y1, x1, y1, "#333333", 1.0);
        doc.line(x0, y0, x0, y1, "#333333", 1.0);
        doc.text(
            (x0 + x1) / 2.0,
            f.height - 16.0,
            Anchor::Middle,
            FONT,
            &self.x.title(),
            "",
        );
        let cy = (y0 + y1) / 2.0;
        doc.raw(&format!(
            r#"<text x="18" y="{cy:.1}" text-anchor="middle" font-size="{FONT}" transform="rotate(-90 18 {cy:.1})">{}</text>"#,
            svg::escape(&self.y.title())
        ));
    }

    /// One series as a group the page can toggle: its line, and markers carrying the
    /// hover.
    fn series_svg(&self, i: usize, s: &Series, f: &Frame) -> String {
        let st = style(i);
        let mut g = String::new();
        let _ = write!(
            g,
            r#"<g class="series" data-series="{i}" data-name="{}">"#,
            svg::escape(&s.name)
        );
        let path: Vec<String> = s
            .points
            .iter()
            .enumerate()
            .map(|(k, p)| {
                format!(
                    "{}{:.1},{:.1}",
                    if k == 0 { 'M' } else { 'L' },
                    f.x(p.x),
                    f.y(p.y)
                )
            })
            .collect();
        let _ = write!(
            g,
            r#"<path d="{}" fill="none" stroke="{}" stroke-width="2"{}/>"#,
            path.join(""),
            st.color,
            dash(st.dashed)
        );
        // A long series (memory over time) is marked at a dozen of its points,
        // so markers do not pile into a solid band; those carry the hover.
        let every = s.points.len().div_ceil(MAX_MARKERS).max(1);
        for (k, p) in s.points.iter().enumerate() {
            if k % every == 0 || k + 1 == s.points.len() {
                g.push_str(&self.point_svg(s, p, st, f));
            }
        }
        g.push_str("</g>");
        g
    }

    /// One marker with its spread bar and its hover.
    fn point_svg(&self, s: &Series, p: &Point, st: super::style::Style, f: &Frame) -> String {
        let (x, y) = (f.x(p.x), f.y(p.y));
        let x_text = p.x_label.clone().unwrap_or_else(|| value_text(p.x));
        let mut tip = format!(
            "{}: {} {} at {}",
            s.name,
            value_text(p.y),
            self.y_unit,
            x_text
        );
        let mut g = String::from(r#"<g class="point">"#);
        if let Some((lo, hi)) = p.spread {
            let _ = write!(tip, " (spread {}–{})", value_text(lo), value_text(hi));
            let (ylo, yhi) = (f.y(lo), f.y(hi));
            let _ = write!(
                g,
                r#"<path d="M{x:.1},{ylo:.1}L{x:.1},{yhi:.1}M{:.1},{ylo:.1}L{:.1},{ylo:.1}M{:.1},{yhi:.1}L{:.1},{yhi:.1}" stroke="{}" stroke-width="1.3" fill="none"/>"#,
                x - 4.0,
                x + 4.0,
                x - 4.0,
                x + 4.0,
                st.color
            );
        }
        let _ = write!(g, "<title>{}</title>", svg::escape(&tip));
        g.push_str(&svg::marker(st.marker, x, y, 4.5, st.color));
        g.push_str("</g>");
        g
    }
}

/// The dash attribute of a dashed series' line.
fn dash(dashed: bool) -> &'static str {
    if dashed {
        r#" stroke-dasharray="7 4""#
    } else {
        ""
    }
}

/// The legend, in its own column right of the plot: never over the data.
fn draw_legend(doc: &mut Doc, legend: &[Vec<String>], y0: f64) {
    let lx = WIDTH - LEGEND_WIDTH;
    let mut ly = y0 + 4.0;
    doc.raw(r#"<g class="legend">"#);
    for (i, lines) in legend.iter().enumerate() {
        let st = style(i);
        let h = lines.len() as f64 * FONT * 1.25 + 8.0;
        let cy = ly + FONT * 0.45;
        let mut item = format!(
            r##"<g class="legend-item" data-series="{i}"><rect x="{:.1}" y="{:.1}" width="{LEGEND_WIDTH}" height="{h:.1}" fill="#ffffff" fill-opacity="0"/>"##,
            lx - 4.0,
            ly - FONT
        );
        let _ = write!(
            item,
            r#"<line x1="{lx:.1}" y1="{cy:.1}" x2="{:.1}" y2="{cy:.1}" stroke="{}" stroke-width="2"{}/>"#,
            lx + LEGEND_SAMPLE,
            st.color,
            dash(st.dashed)
        );
        item.push_str(&svg::marker(
            st.marker,
            lx + LEGEND_SAMPLE / 2.0,
            cy,
            4.5,
            st.color,
        ));
        item.push_str("</g>");
        doc.raw(&item);
        doc.lines(
            lx + LEGEND_SAMPLE + 8.0,
            ly + 4.0,
            Anchor::Start,
            FONT,
            lines,
        );
        ly += h;
    }
    doc.raw("</g>");
}

/// The ticks to label: every one when they fit, otherwise every second, third, … so
/// that neighbouring labels stay `gap` apart (`extent` is a label's size along the axis).
pub(super) fn thin(
    ticks: &[(f64, String)],
    pos: impl Fn(f64) -> f64,
    gap: f64,
    extent: impl Fn(&str) -> f64,
) -> Vec<(f64, String)> {
    for step in 1..=ticks.len().max(1) {
        let kept: Vec<&(f64, String)> = ticks.iter().step_by(step).collect();
        let fits = kept.windows(2).all(|w| {
            let d = (pos(w[1].0) - pos(w[0].0)).abs();
            d >= (extent(&w[0].1) + extent(&w[1].1)) / 2.0 + gap
        });
        if fits {
            return kept.into_iter().cloned().collect();
        }
    }
    ticks.iter().take(1).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(series: usize) -> LineChart {
        LineChart {
            title: "Throughput & p99 <against> clients".into(),
            subtitle: Some("medians of 3 runs".into()),
            x: Axis::log("clients"),
            y: Axis::linear("requests/s"),
            x_ticks: None,
            y_unit: "req/s".into(),
            series: (0..series)
                .map(|i| Series {
                    name: format!("scenario number {i} with a long descriptive name"),
                    points: [1.0, 10.0, 100.0]
                        .iter()
                        .map(|&x| Point {
                            spread: Some((40_000.0, 46_000.0)),
                            ..Point::new(x, 45_000.0 + i as f64)
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn every_series_is_a_group_with_hover_values_and_a_legend_entry() {
        let svg = chart(12).to_svg();
        assert_eq!(svg.matches(r#"<g class="series""#).count(), 12);
        assert_eq!(svg.matches(r#"<g class="legend-item""#).count(), 12);
        assert_eq!(svg.matches(r#"<g class="point">"#).count(), 36);
        assert!(svg.contains("45,000 req/s at 100"), "{svg}");
        assert!(svg.contains("clients — log scale"));
        assert!(svg.contains("Throughput &amp; p99 &lt;against&gt; clients"));
        assert!(!svg.contains("45000.0"));
        // Dashes tell the second round of colours apart.
        assert_eq!(svg.matches("stroke-dasharray").count(), 2 * 4);
    }

    #[test]
    fn a_long_legend_makes_the_chart_taller_not_the_legend_overflow() {
        let short = chart(2).to_svg();
        let long = chart(30).to_svg();
        let height = |s: &str| -> f64 {
            let h = s.split("height=\"").nth(1).unwrap();
            h[..h.find('"').unwrap()].parse().unwrap()
        };
        assert!(height(&long) > height(&short));
    }

    #[test]
    fn crowded_ticks_are_thinned() {
        let ticks: Vec<(f64, String)> = (0..20).map(|i| (i as f64, format!("p{i}0.0"))).collect();
        let kept = thin(&ticks, |v| v * 20.0, 8.0, |l| svg::text_width(l, FONT));
        assert!(kept.len() < 20 && kept.len() > 2);
        let all = thin(&ticks, |v| v * 200.0, 8.0, |l| svg::text_width(l, FONT));
        assert_eq!(all.len(), 20);
    }
}
