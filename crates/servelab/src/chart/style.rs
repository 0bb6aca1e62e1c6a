//! How every chart looks: its width, and each series' colour, marker and dash.

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
