//! Charts as SVG text, drawn for people who paste them into a report: line charts and
//! horizontal bar charts whose legend sits outside the data, whose every series has its
//! own colour *and* marker (Okabe–Ito colours, safe for colour-blind readers), whose log
//! axes say so, whose numbers carry thousands separators, and whose every point answers
//! a hover with its value (`<title>`, no script needed).
//!
//! # Layout
//! - [`axis`]: ticks for linear and log axes, and how numbers are written.
//! - [`style`]: the chart width, and each series' colour, marker and dash.
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
pub mod style;
pub mod svg;

pub use axis::Axis;
pub use bars::{Bar, BarChart, BarPanel};
pub use line::{LineChart, Point, Series};
