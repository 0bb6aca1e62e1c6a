//! Charts as SVG text, drawn for people who paste them into a report: line charts and
//! horizontal bar charts whose legend sits outside the data, whose every series has its
//! own colour *and* marker (Okabe–Ito colours, safe for colour-blind readers), whose log
//! axes say so, whose numbers carry thousands separators, and whose every point answers
//! a hover with its value (`<title>`, no script needed).
//!
//! # Layout
//! - [`axis`]: ticks for linear and log axes, and how numbers are written.
//! - [`svg`]: escaping, wrapping and the few SVG elements everything is drawn with.
//! - [`line`]: [`LineChart`] — series of points, optional spread bars, custom x ticks.
//! - [`bars`]: [`BarChart`] — labelled horizontal bars with spread whiskers, in panels.
//!
//! Why our own and not plotters: plotters' SVG backend writes anonymous shapes, so a
//! browser cannot tell which series a point belongs to (no hover values, no toggling in
//! report.html), and its legend is drawn inside the plotting area. The charts here are
//! plain SVG 1.1 that any browser, `rsvg-convert` or a word processor opens, with series
//! grouped as `<g class="series" data-series="N">` for report.html's script to toggle.

pub mod axis;
pub mod bars;
pub mod line;
pub mod svg;

pub use axis::{Axis, Scale};
pub use bars::{Bar, BarChart, BarPanel};
pub use line::{LineChart, Point, Series};

/// Width of every chart, in SVG user units (pixels when shown at 100 %).
pub const WIDTH: f64 = 960.0;

/// Okabe & Ito's eight colours, distinguishable with the common colour-vision
/// deficiencies; the yellow is darkened so it reads on white.
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#8C7A00", "#000000",
];

/// Marker shapes, cycled with a period (6) prime to the palette's (8), so the first 24
/// series each have their own colour-and-marker pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Marker {
    Circle,
    Square,
    TriangleUp,
    Diamond,
    TriangleDown,
    Cross,
}

const MARKERS: [Marker; 6] = [
    Marker::Circle,
    Marker::Square,
    Marker::TriangleUp,
    Marker::Diamond,
    Marker::TriangleDown,
    Marker::Cross,
];

/// How series `i` is drawn: its colour, its marker, and whether its line is dashed (the
/// second round of colours is, so even colour alone tells the first 16 apart).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Style {
    pub color: &'static str,
    pub marker: Marker,
    pub dashed: bool,
}

pub fn style(i: usize) -> Style {
    Style {
        color: PALETTE[i % PALETTE.len()],
        marker: MARKERS[i % MARKERS.len()],
        dashed: (i / PALETTE.len()) % 2 == 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_24_series_are_told_apart() {
        let styles: Vec<(&str, Marker)> =
            (0..24).map(|i| (style(i).color, style(i).marker)).collect();
        for (i, a) in styles.iter().enumerate() {
            for b in &styles[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert!(!style(7).dashed && style(8).dashed && !style(16).dashed);
    }
}
