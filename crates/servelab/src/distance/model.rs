//! The distance sweep as data: which points run ([`PointSpec`], [`plan`]), what each
//! measured ([`Runs`]) and how it compares with B at the same offered load
//! ([`DistancePoint`]), all in `report.json` under `distance`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::experiment::link::LinkSpec;
use crate::stats::{self, Comparison};

/// Round-trip times of the sweep, in microseconds.
pub const SWEEP_RTT_US: [u64; 4] = [0, 100, 500, 2000];
/// Link rates of the sweep, in bits per second.
pub const SWEEP_RATES: [u64; 2] = [1_000_000_000, 10_000_000_000];
/// The one point a default `compare` measures: a typical LAN.
pub const DEFAULT_POINT: PointSpec = PointSpec {
    rtt_us: 500,
    rate_bits_per_sec: Some(1_000_000_000),
};
/// The share of the lowest capacity every point is offered (A's slowest point must keep
/// up, or "at equal load" compares a queue with a server).
pub const LOAD_SHARE: f64 = 0.5;

/// One point of the sweep: a round-trip time and a rate (none: loopback, no link).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointSpec {
    pub rtt_us: u64,
    pub rate_bits_per_sec: Option<u64>,
}

impl PointSpec {
    /// The emulated link of this point: half the round trip each way; `None` for
    /// loopback without a link.
    pub fn link(&self) -> Option<LinkSpec> {
        (self.rate_bits_per_sec.is_some() || self.rtt_us > 0).then(|| LinkSpec {
            rate_bits_per_sec: self.rate_bits_per_sec,
            delay: Duration::from_micros(self.rtt_us / 2),
        })
    }

    /// `0.5 ms RTT, 1 Gbit/s` / `loopback`.
    pub fn label(&self) -> String {
        match self.rate_bits_per_sec {
            None if self.rtt_us == 0 => "loopback, no link".into(),
            rate => format!(
                "{} ms RTT, {}",
                self.rtt_us as f64 / 1000.0,
                rate.map_or("unlimited".into(), rate_text)
            ),
        }
    }

    /// Requests per second of a file of `bytes` the link can carry at most (`None`:
    /// unlimited).
    pub fn ceiling_per_sec(&self, bytes: u64) -> Option<f64> {
        let rate = self.rate_bits_per_sec? as f64;
        (bytes > 0).then(|| rate / (bytes as f64 * 8.0))
    }
}

/// `1 Gbit/s`, `100 Mbit/s`.
pub fn rate_text(bits: u64) -> String {
    if bits.is_multiple_of(1_000_000_000) {
        format!("{} Gbit/s", bits / 1_000_000_000)
    } else {
        format!("{} Mbit/s", bits as f64 / 1e6)
    }
}

/// The points of a run: the sweep (loopback, then every rate × RTT) or the one default.
pub fn plan(sweep: bool) -> Vec<PointSpec> {
    if !sweep {
        return vec![DEFAULT_POINT];
    }
    let mut v = vec![PointSpec {
        rtt_us: 0,
        rate_bits_per_sec: None,
    }];
    for rate in SWEEP_RATES {
        for rtt_us in SWEEP_RTT_US {
            v.push(PointSpec {
                rtt_us,
                rate_bits_per_sec: Some(rate),
            });
        }
    }
    v
}

/// The offered rate of every point: [`LOAD_SHARE`] of the lowest of B's and A's
/// closed-loop capacities and of what the slowest link can carry.
pub fn offered_rate(lower_capacity: f64, points: &[PointSpec], file_bytes: u64) -> f64 {
    points
        .iter()
        .filter_map(|p| p.ceiling_per_sec(file_bytes))
        .fold(lower_capacity, f64::min)
        * LOAD_SHARE
}

/// What one stack measured at the offered rate, one entry per run that counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Runs {
    pub p50_ms: Vec<f64>,
    pub p99_ms: Vec<f64>,
    /// CPU of every serving process per request (ms), from the same runs.
    pub cpu_ms_per_request: Vec<f64>,
    pub achieved_per_sec: Vec<f64>,
    /// Failed requests over all runs.
    pub failed: u64,
    /// Runs left out because the machine was busy.
    pub busy_runs: usize,
}

impl Runs {
    pub fn p50(&self) -> Option<f64> {
        stats::median_of(&self.p50_ms)
    }
    pub fn p99(&self) -> Option<f64> {
        stats::median_of(&self.p99_ms)
    }
    pub fn cpu(&self) -> Option<f64> {
        stats::median_of(&self.cpu_ms_per_request)
    }
}

/// One point of the sweep and how A there compares with B at the same load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DistancePoint {
    pub spec: PointSpec,
    /// How the link was built here (netns+tbf, relay…), as the link reports it.
    pub path: String,
    pub runs: Runs,
    /// A's median p50 minus B's, with its interval (two runs a side or more).
    pub p50_minus_b_ms: Option<Comparison>,
    pub p99_minus_b_ms: Option<Comparison>,
    /// A's CPU per request over B's.
    pub cpu_over_b: Option<Comparison>,
}

impl DistancePoint {
    /// The point with its comparisons against `b`'s runs.
    pub fn new(spec: PointSpec, path: String, runs: Runs, b: &Runs) -> DistancePoint {
        let two = |a: &[f64], b: &[f64]| a.len() >= 2 && b.len() >= 2;
        DistancePoint {
            p50_minus_b_ms: two(&runs.p50_ms, &b.p50_ms)
                .then(|| stats::difference(&runs.p50_ms, &b.p50_ms))
                .flatten(),
            p99_minus_b_ms: two(&runs.p99_ms, &b.p99_ms)
                .then(|| stats::difference(&runs.p99_ms, &b.p99_ms))
                .flatten(),
            cpu_over_b: two(&runs.cpu_ms_per_request, &b.cpu_ms_per_request)
                .then(|| stats::ratio(&runs.cpu_ms_per_request, &b.cpu_ms_per_request))
                .flatten(),
            spec,
            path,
            runs,
        }
    }
}

/// The distance runs of one `compare`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Distance {
    /// `--distance`: the whole sweep; otherwise the one default point.
    pub sweep: bool,
    pub file: String,
    pub file_bytes: u64,
    /// Every point (and B) was offered this rate, open loop.
    pub offered_per_sec: f64,
    pub seconds_each: f64,
    pub rounds: usize,
    /// Wall time of the whole phase, stacks started and stopped included.
    pub elapsed_s: f64,
    /// B at the same rate, in the same rounds.
    pub b: Runs,
    pub points: Vec<DistancePoint>,
    /// Points that could not start or run, with the reason.
    pub failures: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_and_the_default_point() {
        let sweep = plan(true);
        assert_eq!(sweep.len(), 9);
        assert_eq!(sweep[0].link(), None);
        assert_eq!(sweep[0].label(), "loopback, no link");
        let lan = sweep
            .iter()
            .find(|p| p.rtt_us == 500 && p.rate_bits_per_sec == Some(10_000_000_000))
            .unwrap();
        assert_eq!(lan.label(), "0.5 ms RTT, 10 Gbit/s");
        // Half the round trip each way.
        assert_eq!(lan.link().unwrap().delay, Duration::from_micros(250));
        assert_eq!(plan(false), vec![DEFAULT_POINT]);
    }

    #[test]
    fn the_offered_rate_keeps_below_the_slowest_link() {
        // 10 MiB over 1 Gbit/s: 11.9 req/s at most; half of that is offered even when
        // the closed loops ran faster.
        let ten_mib = 10 << 20;
        let r = offered_rate(40.0, &plan(true), ten_mib);
        assert!((r - 1e9 / (ten_mib as f64 * 8.0) / 2.0).abs() < 1e-9, "{r}");
        // Without a link, half the lower capacity.
        assert_eq!(offered_rate(40.0, &plan(true)[..1], ten_mib), 20.0);
    }

    #[test]
    fn a_point_is_compared_with_b_only_with_two_runs_a_side() {
        let b = Runs {
            p50_ms: vec![10.0, 11.0, 12.0],
            p99_ms: vec![20.0, 21.0, 22.0],
            cpu_ms_per_request: vec![2.0, 2.0, 2.0],
            ..Runs::default()
        };
        let a = Runs {
            p50_ms: vec![15.0, 16.0, 17.0],
            p99_ms: vec![30.0, 31.0, 32.0],
            cpu_ms_per_request: vec![8.0, 8.0, 8.0],
            ..Runs::default()
        };
        let p = DistancePoint::new(DEFAULT_POINT, "relay".into(), a.clone(), &b);
        assert_eq!(p.p50_minus_b_ms.unwrap().estimate, 5.0);
        assert_eq!(p.p99_minus_b_ms.unwrap().estimate, 10.0);
        assert_eq!(p.cpu_over_b.unwrap().estimate, 4.0);
        let one = Runs {
            p50_ms: vec![15.0],
            ..a
        };
        assert_eq!(
            DistancePoint::new(DEFAULT_POINT, "relay".into(), one, &b).p50_minus_b_ms,
            None
        );
    }
}
