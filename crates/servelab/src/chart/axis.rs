//! Axes: the range a chart's values are drawn over, its ticks (1–2–5 steps on a linear
//! axis, decades and their 2s and 5s on a log axis), and how numbers are written
//! (thousands separators, no "45000.0").

/// Linear or base-10 logarithmic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scale {
    Linear,
    Log10,
}

/// One axis: its label with units ("requests/s", "latency (ms)") and its scale. A log
/// axis adds "log scale" to its label when drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
}

impl Axis {
    pub fn linear(label: impl Into<String>) -> Self {
        Axis {
            label: label.into(),
            scale: Scale::Linear,
        }
    }

    pub fn log(label: impl Into<String>) -> Self {
        Axis {
            label: label.into(),
            scale: Scale::Log10,
        }
    }

    /// The label as drawn: a log axis says so.
    pub fn title(&self) -> String {
        match self.scale {
            Scale::Linear => self.label.clone(),
            Scale::Log10 => format!("{} — log scale", self.label),
        }
    }
}

/// The drawn range of an axis and its ticks, from the values it must show.
#[derive(Debug, Clone, PartialEq)]
pub struct Range {
    pub scale: Scale,
    pub lo: f64,
    pub hi: f64,
    /// Tick positions with their labels.
    pub ticks: Vec<(f64, String)>,
}

impl Range {
    /// A range holding every finite value of `values` (positive ones only on a log axis),
    /// starting at zero on a linear axis when `from_zero`.
    pub fn fit(scale: Scale, values: impl IntoIterator<Item = f64>, from_zero: bool) -> Self {
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for v in values {
            if v.is_finite() && (scale == Scale::Linear || v > 0.0) {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        match scale {
            Scale::Linear => {
                if !lo.is_finite() {
                    (lo, hi) = (0.0, 1.0);
                }
                if from_zero {
                    lo = lo.min(0.0);
                    hi = hi.max(0.0);
                }
                if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
                    hi = lo + lo.abs().max(1.0);
                }
                let step = nice_step((hi - lo) / 5.0);
                let lo = (lo / step).floor() * step;
                // Room above the highest value for its label or whisker.
                let hi = ((hi + (hi - lo) * 0.04) / step).ceil() * step;
                let ticks = linear_ticks(lo, hi, step);
                Range {
                    scale,
                    lo,
                    hi,
                    ticks,
                }
            }
            Scale::Log10 => {
                if !lo.is_finite() {
                    (lo, hi) = (1.0, 10.0);
                }
                let lo_exp = lo.log10().floor() as i32;
                let mut hi_exp = hi.log10().ceil() as i32;
                if hi_exp <= lo_exp {
                    hi_exp = lo_exp + 1;
                }
                let ticks = log_ticks(lo_exp, hi_exp);
                Range {
                    scale,
                    lo: 10f64.powi(lo_exp),
                    hi: 10f64.powi(hi_exp),
                    ticks,
                }
            }
        }
    }

    /// Where `v` falls between `px_lo` (at `lo`) and `px_hi` (at `hi`); values outside
    /// the range are clamped to its ends.
    pub fn map(&self, v: f64, px_lo: f64, px_hi: f64) -> f64 {
        let t = match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log10 => {
                let v = v.max(self.lo);
                (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
            }
        };
        px_lo + t.clamp(0.0, 1.0) * (px_hi - px_lo)
    }
}

/// 1, 2 or 5 times a power of ten, the smallest at or above `raw`.
fn nice_step(raw: f64) -> f64 {
    let raw = if raw > 0.0 && raw.is_finite() {
        raw
    } else {
        1.0
    };
    let exp = raw.log10().floor();
    let base = 10f64.powf(exp);
    let m = raw / base;
    let nice = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * base
}

fn linear_ticks(lo: f64, hi: f64, step: f64) -> Vec<(f64, String)> {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let n = ((hi - lo) / step).round() as i64;
    (0..=n)
        .map(|k| {
            let v = lo + k as f64 * step;
            // -0 prints as "0".
            let v = if v.abs() < step * 1e-9 { 0.0 } else { v };
            (v, with_separators(v, decimals))
        })
        .collect()
}

fn log_ticks(lo_exp: i32, hi_exp: i32) -> Vec<(f64, String)> {
    let decades = hi_exp - lo_exp;
    // Few decades get their 2s and 5s as well, so a short axis still has several labels.
    let multiples: &[f64] = if decades <= 3 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let mut ticks = Vec::new();
    for e in lo_exp..=hi_exp {
        for &m in multiples {
            let v = m * 10f64.powi(e);
            if e == hi_exp && m > 1.0 {
                break;
            }
            let decimals = (-(e as f64)).max(0.0) as usize;
            ticks.push((v, with_separators(v, decimals)));
        }
    }
    ticks
}

/// `v` with `decimals` decimals and a comma between thousands: 45000 → "45,000".
pub fn with_separators(v: f64, decimals: usize) -> String {
    let text = format!("{:.*}", decimals, v.abs());
    let (int, frac) = match text.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (text.as_str(), None),
    };
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let negative = v < 0.0 && text.chars().any(|c| c.is_ascii_digit() && c != '0');
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    out.push_str(&grouped);
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// A value as a reader wants it in a tooltip or beside a bar: three significant digits,
/// separators from a thousand up ("293", "1.25", "81,500").
pub fn value_text(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    let a = v.abs();
    let decimals = if a >= 100.0 || a == 0.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        // 0.0123 → 3 significant digits.
        (2 - a.log10().floor() as i64).clamp(2, 9) as usize
    };
    with_separators(v, decimals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_carry_separators_and_no_stray_decimals() {
        assert_eq!(with_separators(45000.0, 0), "45,000");
        assert_eq!(with_separators(1234567.891, 2), "1,234,567.89");
        assert_eq!(with_separators(-1500.0, 0), "-1,500");
        assert_eq!(with_separators(-0.0001, 0), "0");
        assert_eq!(value_text(81_512.0), "81,512");
        assert_eq!(value_text(293.4), "293");
        assert_eq!(value_text(12.34), "12.3");
        assert_eq!(value_text(1.234), "1.23");
        assert_eq!(value_text(0.01234), "0.0123");
    }

    #[test]
    fn linear_ticks_are_round_and_cover_the_values() {
        let r = Range::fit(Scale::Linear, [0.0, 44_000.0, 81_500.0], true);
        assert_eq!(r.lo, 0.0);
        assert!(r.hi >= 81_500.0);
        let labels: Vec<&str> = r.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels[..3], ["0", "20,000", "40,000"]);
        assert!(labels.iter().all(|l| !l.contains('.')));
    }

    #[test]
    fn small_linear_steps_keep_their_decimals() {
        let r = Range::fit(Scale::Linear, [0.93, 1.07], false);
        assert!(r.ticks.iter().any(|t| t.1 == "1.00" || t.1 == "1.0"));
    }

    #[test]
    fn log_ticks_are_decades_with_2s_and_5s_when_few() {
        let r = Range::fit(Scale::Log10, [0.3, 40.0], false);
        assert_eq!(r.lo, 0.1);
        assert_eq!(r.hi, 100.0);
        let labels: Vec<&str> = r.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(
            labels,
            ["0.1", "0.2", "0.5", "1", "2", "5", "10", "20", "50", "100"]
        );
        let wide = Range::fit(Scale::Log10, [0.01, 5000.0], false);
        let labels: Vec<&str> = wide.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["0.01", "0.1", "1", "10", "100", "1,000", "10,000"]);
    }

    #[test]
    fn map_is_linear_or_logarithmic() {
        let lin = Range::fit(Scale::Linear, [0.0, 100.0], true);
        assert_eq!(lin.map(lin.lo, 0.0, 200.0), 0.0);
        assert_eq!(lin.map(lin.hi, 0.0, 200.0), 200.0);
        let log = Range::fit(Scale::Log10, [1.0, 100.0], false);
        assert!((log.map(10.0, 0.0, 200.0) - 100.0).abs() < 1e-9);
        // Values outside are clamped, never drawn off the plot.
        assert_eq!(log.map(1e6, 0.0, 200.0), 200.0);
    }
}
