//! The few SVG pieces every chart is drawn with: an escaped text, a label wrapped to a
//! width, a marker, and the document around them.

use std::fmt::Write as _;

use super::style::{Marker, WIDTH};

/// Font size of tick labels, legends and bar labels.
pub const FONT: f64 = 12.0;
/// Font size of a chart's title.
pub const TITLE_FONT: f64 = 16.0;
/// A generous average glyph width of DejaVu Sans / Arial, as a fraction of the font size:
/// text is wrapped by this estimate, so it must not underestimate.
const GLYPH_WIDTH: f64 = 0.62;

/// Text as SVG/XML character data.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The estimated width of `text` at `font` size.
pub fn text_width(text: &str, font: f64) -> f64 {
    text.chars().count() as f64 * font * GLYPH_WIDTH
}

/// `text` broken at spaces into lines no wider than `width` at `font` size (a single
/// word longer than that is cut, so nothing runs past the width).
pub fn wrap(text: &str, width: f64, font: f64) -> Vec<String> {
    let max_chars = ((width / (font * GLYPH_WIDTH)).floor() as usize).max(4);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word = word.to_string();
        while word.chars().count() > max_chars {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            let head: String = word.chars().take(max_chars).collect();
            word = word.chars().skip(max_chars).collect();
            lines.push(head);
        }
        let needed = line.chars().count() + usize::from(!line.is_empty()) + word.chars().count();
        if needed > max_chars && !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Text anchoring.
#[derive(Debug, Clone, Copy)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn attr(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// An SVG document being written.
pub struct Doc {
    out: String,
}

impl Doc {
    /// A document `height` high, [`WIDTH`] wide, titled for screen readers.
    pub fn new(height: f64, title: &str) -> Self {
        let mut out = String::new();
        let _ = write!(
            out,
            r##"<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Arial, Helvetica, sans-serif" font-size="{f}" role="img"><title>{t}</title><rect class="background" x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>"##,
            w = WIDTH,
            h = height.ceil(),
            f = FONT,
            t = escape(title),
        );
        Doc { out }
    }

    /// Raw SVG markup (already escaped by the caller).
    pub fn raw(&mut self, markup: &str) {
        self.out.push_str(markup);
    }

    /// One line of text at (x, y), y being the baseline.
    pub fn text(&mut self, x: f64, y: f64, anchor: Anchor, size: f64, text: &str, extra: &str) {
        let _ = write!(
            self.out,
            r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{a}" font-size="{size}"{extra}>{t}</text>"#,
            a = anchor.attr(),
            t = escape(text),
        );
    }

    /// Several lines of text, the first baseline at `y`, `line_height` apart.
    pub fn lines(&mut self, x: f64, y: f64, anchor: Anchor, size: f64, lines: &[String]) {
        let line_height = size * 1.25;
        for (i, l) in lines.iter().enumerate() {
            self.text(x, y + i as f64 * line_height, anchor, size, l, "");
        }
    }

    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, width: f64) {
        let _ = write!(
            self.out,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{stroke}" stroke-width="{width}"/>"#
        );
    }

    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

/// A marker of `size` (its half-width) centred at (x, y), filled with `color`.
pub fn marker(m: Marker, x: f64, y: f64, size: f64, color: &str) -> String {
    let s = size;
    match m {
        Marker::Circle => format!(
            r##"<circle cx="{x:.1}" cy="{y:.1}" r="{s:.1}" fill="{color}" stroke="#ffffff" stroke-width="0.8"/>"##
        ),
        Marker::Square => format!(
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}" stroke="#ffffff" stroke-width="0.8"/>"##,
            x - s * 0.9,
            y - s * 0.9,
            s * 1.8,
            s * 1.8
        ),
        Marker::TriangleUp => polygon(
            &[(x, y - s * 1.1), (x + s, y + s * 0.8), (x - s, y + s * 0.8)],
            color,
        ),
        Marker::TriangleDown => polygon(
            &[(x, y + s * 1.1), (x + s, y - s * 0.8), (x - s, y - s * 0.8)],
            color,
        ),
        Marker::Diamond => polygon(
            &[(x, y - s * 1.2), (x + s, y), (x, y + s * 1.2), (x - s, y)],
            color,
        ),
        Marker::Cross => format!(
            r#"<path d="M{:.1},{:.1}L{:.1},{:.1}M{:.1},{:.1}L{:.1},{:.1}" stroke="{color}" stroke-width="2.4" fill="none"/>"#,
            x - s,
            y - s,
            x + s,
            y + s,
            x - s,
            y + s,
            x + s,
            y - s
        ),
    }
}

fn polygon(points: &[(f64, f64)], color: &str) -> String {
    let pts: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect();
    format!(
        r##"<polygon points="{}" fill="{color}" stroke="#ffffff" stroke-width="0.8"/>"##,
        pts.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(escape(r#"A & B <"x">"#), "A &amp; B &lt;&quot;x&quot;&gt;");
    }

    #[test]
    fn wrapping_keeps_every_line_within_the_width() {
        let text = "A (NFS: rustnfs, client cache — like a kernel mount; copies in unlinked files on ext4)";
        let lines = wrap(text, 220.0, 12.0);
        assert!(lines.len() > 1);
        for l in &lines {
            assert!(text_width(l, 12.0) <= 220.0, "{l}");
        }
        assert_eq!(lines.join(" "), text);
        let long = wrap("supercalifragilisticexpialidocious", 60.0, 12.0);
        assert!(long.iter().all(|l| text_width(l, 12.0) <= 60.0));
        assert_eq!(wrap("", 100.0, 12.0), vec![String::new()]);
    }
}
