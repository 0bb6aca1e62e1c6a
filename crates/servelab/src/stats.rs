//! The one statistics module of `compare`, `bench`, the container comparison and
//! `servelab diff`: medians and spreads over repeats, Δ %, bootstrap confidence intervals
//! of a ratio or a difference of medians with the confidence they really have, and the
//! significance call every comparison sentence makes.
//!
//! Why the bootstrap: repeats are few (3–10) and their distribution unknown (a busy
//! neighbour makes a long tail), so no normal approximation is safe; resampling each
//! side's repeats with replacement and taking percentiles of the resampled statistic
//! makes no assumption about the shape. But with few repeats it covers the truth less
//! often than its nominal level: [`coverage`] says how often, by repeat count (found by
//! simulation), and which percentiles reach 95 % where any do. Every interval carries
//! its repeat counts, so its label is [`Comparison::confidence`], never a blanket 95 %.
//! The resampler is seeded so one report.json always gives the same interval.

pub mod coverage;

/// Median of `v` (sorted in place); `None` for an empty list.
pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Median of a slice without reordering it.
pub fn median_of(v: &[f64]) -> Option<f64> {
    median(&mut v.to_vec())
}

/// Lowest and highest value; `None` for an empty list.
pub fn spread(v: &[f64]) -> Option<(f64, f64)> {
    let lo = v.iter().copied().reduce(f64::min)?;
    let hi = v.iter().copied().reduce(f64::max)?;
    Some((lo, hi))
}

/// How much `value` differs from `reference`, in percent of the reference; `None` when
/// the reference is zero or not finite.
pub fn delta_pct(value: f64, reference: f64) -> Option<f64> {
    (reference != 0.0 && reference.is_finite() && value.is_finite())
        .then(|| (value - reference) / reference * 100.0)
}

/// A confidence interval (its confidence: [`Comparison::confidence`]).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

impl Interval {
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }

    /// Half the width relative to `centre` (0.1 = ±10 %); infinite when the centre is 0.
    pub fn relative_half_width(&self, centre: f64) -> f64 {
        if centre == 0.0 {
            return f64::INFINITY;
        }
        (self.high - self.low) / 2.0 / centre.abs()
    }
}

/// Resamples drawn by every bootstrap here: enough that the 2.5th percentile moves by
/// well under 1 % between seeds, few enough to cost milliseconds.
pub const RESAMPLES: usize = 4000;

/// A small deterministic generator (splitmix64): the bootstrap needs uniform indices,
/// not cryptographic quality, and a fixed seed keeps reports reproducible.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn index(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The median of one resample (with replacement) of `v`, using `buf` as scratch.
fn resampled_median(v: &[f64], rng: &mut SplitMix, buf: &mut Vec<f64>) -> f64 {
    buf.clear();
    buf.extend((0..v.len()).map(|_| v[rng.index(v.len())]));
    median(buf).unwrap_or(f64::NAN)
}

/// The `tail`-th and (1 − `tail`)-th percentiles (nearest rank) of `stats`.
fn percentile_interval(mut stats: Vec<f64>, tail: f64) -> Option<Interval> {
    stats.retain(|x| x.is_finite());
    if stats.is_empty() {
        return None;
    }
    stats.sort_by(f64::total_cmp);
    let at = |p: f64| stats[((p * stats.len() as f64).ceil() as usize).clamp(1, stats.len()) - 1];
    Some(Interval {
        low: at(tail),
        high: at(1.0 - tail),
    })
}

/// Bootstrap interval of `f(median(a*), median(b*))` over resamples of each side, cut at
/// the tail [`coverage::tail`] gives for these repeat counts.
fn bootstrap(a: &[f64], b: &[f64], f: impl Fn(f64, f64) -> f64) -> Option<Interval> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut rng = SplitMix(0x5EED_F0A0_B0C0_D0E0 ^ ((a.len() as u64) << 32) ^ (b.len() as u64));
    let (mut ba, mut bb) = (Vec::new(), Vec::new());
    let stats = (0..RESAMPLES)
        .map(|_| {
            let ma = resampled_median(a, &mut rng, &mut ba);
            let mb = resampled_median(b, &mut rng, &mut bb);
            f(ma, mb)
        })
        .collect();
    percentile_interval(stats, coverage::tail(a.len(), b.len()))
}

/// A comparison of one figure between two sides over their repeats.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Comparison {
    /// median(a) / median(b), or median(a) − median(b) for a difference.
    pub estimate: f64,
    /// Its bootstrap interval ([`Comparison::confidence`]).
    pub ci: Interval,
    /// The interval excludes "no difference" (1.0 for a ratio, 0 for a difference).
    pub significant: bool,
    /// Repeats of each side that went in.
    pub n_a: usize,
    pub n_b: usize,
}

/// What an interval says about "no difference".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The interval excludes no difference.
    Differs,
    /// It includes no difference, at [`coverage::FULL`] confidence or more.
    NoDifference,
    /// It includes no difference, but from too few repeats to say there is none.
    Unresolved,
}

impl Comparison {
    /// How often an interval drawn this way covers the true value
    /// ([`coverage::confidence`] at these repeat counts).
    pub fn confidence(&self) -> f64 {
        coverage::confidence(self.n_a, self.n_b)
    }

    /// "95 % CI", "75 % CI".
    pub fn ci_label(&self) -> String {
        format!("{} CI", coverage::label(self.confidence()))
    }

    pub fn verdict(&self) -> Verdict {
        if self.significant {
            Verdict::Differs
        } else if self.confidence() >= coverage::FULL {
            Verdict::NoDifference
        } else {
            Verdict::Unresolved
        }
    }
}

/// A difference in ms and its interval in words, labelled with its confidence: "+1.20
/// ms (95 % CI +0.80 to +1.60)", no measurable difference, or not resolved.
pub fn difference_words(d: &Comparison) -> String {
    let (label, lo, hi) = (d.ci_label(), d.ci.low, d.ci.high);
    match d.verdict() {
        Verdict::Differs => format!("{:+.2} ms ({label} {lo:+.2} to {hi:+.2})", d.estimate),
        Verdict::NoDifference => format!(
            "no measurable difference ({:+.2} ms, {label} {lo:+.2} to {hi:+.2})",
            d.estimate
        ),
        Verdict::Unresolved => format!(
            "not resolved ({:+.2} ms; the {label} {lo:+.2} to {hi:+.2} from {} and {} runs includes 0)",
            d.estimate, d.n_a, d.n_b
        ),
    }
}

/// median(a) / median(b) with its interval; `None` when a side is empty or b's median is
/// not positive.
pub fn ratio(a: &[f64], b: &[f64]) -> Option<Comparison> {
    let (ma, mb) = (median_of(a)?, median_of(b)?);
    if mb <= 0.0 {
        return None;
    }
    let ci = bootstrap(a, b, |x, y| x / y)?;
    Some(Comparison {
        estimate: ma / mb,
        significant: !ci.contains(1.0),
        ci,
        n_a: a.len(),
        n_b: b.len(),
    })
}

/// median(a) − median(b) with its interval.
pub fn difference(a: &[f64], b: &[f64]) -> Option<Comparison> {
    let (ma, mb) = (median_of(a)?, median_of(b)?);
    let ci = bootstrap(a, b, |x, y| x - y)?;
    Some(Comparison {
        estimate: ma - mb,
        significant: !ci.contains(0.0),
        ci,
        n_a: a.len(),
        n_b: b.len(),
    })
}

/// Service demand: CPU seconds of every serving process summed, per request, in ms.
/// `None` without requests.
pub fn service_demand_ms(cpu_seconds: &[f64], requests: u64) -> Option<f64> {
    (requests > 0).then(|| cpu_seconds.iter().sum::<f64>() / requests as f64 * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_spreads() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
        assert_eq!(spread(&[3.0, 1.0, 2.0]), Some((1.0, 3.0)));
        assert_eq!(spread(&[]), None);
    }

    #[test]
    fn delta_percent_by_hand() {
        // 117 req/s against 100: +17 %; 80 against 100: −20 %.
        assert!((delta_pct(117.0, 100.0).unwrap() - 17.0).abs() < 1e-9);
        assert!((delta_pct(80.0, 100.0).unwrap() + 20.0).abs() < 1e-9);
        assert_eq!(delta_pct(1.0, 0.0), None);
    }

    #[test]
    fn constant_repeats_give_a_point_interval() {
        let c = ratio(&[5.2, 5.2, 5.2], &[1.3, 1.3, 1.3]).unwrap();
        assert!((c.estimate - 4.0).abs() < 1e-9);
        assert!((c.ci.low - 4.0).abs() < 1e-9 && (c.ci.high - 4.0).abs() < 1e-9);
        assert!(c.significant);
    }

    #[test]
    fn bootstrap_interval_of_three_repeats_by_hand() {
        // Resampling {1, 2, 3} three times with replacement: the median is 1 when at least
        // two draws are 1, P = 3·(1/3)²·(2/3) + (1/3)³ = 7/27 ≈ 26 %, and 3 likewise; both
        // tails exceed 2.5 %, so the interval of median(a*)/median(b) with b constant 1 is
        // exactly [1, 3] and includes 1: no measurable difference.
        let c = ratio(&[1.0, 2.0, 3.0], &[1.0, 1.0, 1.0]).unwrap();
        assert_eq!(c.estimate, 2.0);
        assert_eq!(
            c.ci,
            Interval {
                low: 1.0,
                high: 3.0
            }
        );
        assert!(!c.significant);
        assert!((c.ci.relative_half_width(c.estimate) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn significance_on_synthetic_repeats() {
        // Five repeats each: A costs about four times B, with ±5 % noise — significant.
        let b = [1.00, 1.05, 0.97, 1.02, 0.99];
        let a = [4.1, 3.9, 4.3, 4.0, 4.2];
        let c = ratio(&a, &b).unwrap();
        assert!(c.significant, "{c:?}");
        assert!(c.ci.low > 3.5 && c.ci.high < 4.6, "{c:?}");
        assert!(c.ci.contains(c.estimate));
        // Two samples of the same noisy figure overlapping: no measurable difference.
        let b2 = [100.0, 130.0, 90.0, 120.0, 110.0];
        let a2 = [105.0, 95.0, 125.0, 115.0, 100.0];
        let c2 = ratio(&a2, &b2).unwrap();
        assert!(!c2.significant, "{c2:?}");
        let d = difference(&a2, &b2).unwrap();
        assert!(!d.significant && d.ci.contains(0.0), "{d:?}");
        // The same figures one millisecond apart with little noise: a real difference.
        let d2 = difference(&[2.0, 2.1, 1.9, 2.05], &[1.0, 1.1, 0.9, 1.05]).unwrap();
        assert!(d2.significant && (d2.estimate - 1.0).abs() < 1e-9, "{d2:?}");
    }

    #[test]
    fn service_demand_of_several_processes() {
        // httpd used 2.5 s and rustnfs 2.8 s of CPU serving 100 requests: 53 ms each.
        let d = service_demand_ms(&[2.5, 2.8], 100).unwrap();
        assert!((d - 53.0).abs() < 1e-9);
        assert_eq!(service_demand_ms(&[1.0], 0), None);
    }
}
