//! What an emulated link does ([`LinkSpec`]: a rate, a one-way delay), written and read
//! as `--link` takes it (`rate=1gbit,delay=500us`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What the emulated link does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct LinkSpec {
    /// Bits per second in each direction; `None` is unlimited.
    pub rate_bits_per_sec: Option<u64>,
    /// One-way propagation delay added to every byte.
    pub delay: Duration,
}

impl LinkSpec {
    /// The control: a relay that neither delays nor limits.
    pub fn unshaped() -> Self {
        LinkSpec::default()
    }

    pub fn is_unshaped(&self) -> bool {
        self.rate_bits_per_sec.is_none() && self.delay.is_zero()
    }
}

impl fmt::Display for LinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rate_bits_per_sec {
            Some(r) if r % 1_000_000_000 == 0 => write!(f, "rate={}gbit", r / 1_000_000_000)?,
            Some(r) if r % 1_000_000 == 0 => write!(f, "rate={}mbit", r / 1_000_000)?,
            Some(r) if r % 1_000 == 0 => write!(f, "rate={}kbit", r / 1_000)?,
            Some(r) => write!(f, "rate={r}bit")?,
            None => write!(f, "rate=unlimited")?,
        }
        write!(f, ",delay={}us", self.delay.as_micros())
    }
}

/// What is wrong with a link spec, and what to write instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("`{0}`: expected key=value (rate=1gbit,delay=1ms)")]
    NotKeyValue(String),
    #[error("unknown link setting `{0}` (use rate, delay)")]
    UnknownSetting(String),
    #[error("rate `{0}`: use a unit of bit, kbit, mbit or gbit")]
    RateUnit(String),
    #[error("rate `{0}` is not a number")]
    RateNumber(String),
    #[error("rate `{0}` must be positive")]
    RateNotPositive(String),
    #[error("delay `{0}`: use a unit of us, ms or s")]
    DelayUnit(String),
    #[error("delay `{0}` is not a number")]
    DelayNumber(String),
    #[error("delay `{0}` must be between 0 and 10 s")]
    DelayRange(String),
}

impl FromStr for LinkSpec {
    type Err = SpecError;

    /// `rate=1gbit,delay=2ms` (either part may be left out; units as `tc` writes them:
    /// bit, kbit, mbit, gbit; us, ms, s).
    fn from_str(s: &str) -> Result<Self, SpecError> {
        let mut spec = LinkSpec::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| SpecError::NotKeyValue(part.into()))?;
            match key.trim() {
                "rate" => spec.rate_bits_per_sec = parse_rate(value.trim())?,
                "delay" | "latency" => spec.delay = parse_delay(value.trim())?,
                other => return Err(SpecError::UnknownSetting(other.into())),
            }
        }
        Ok(spec)
    }
}

fn parse_rate(v: &str) -> Result<Option<u64>, SpecError> {
    if v == "unlimited" || v == "0" {
        return Ok(None);
    }
    let lower = v.to_ascii_lowercase();
    let (num, mult) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|(unit, m)| lower.strip_suffix(unit).map(|n| (n, *m)))
        .ok_or_else(|| SpecError::RateUnit(v.into()))?;
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| SpecError::RateNumber(v.into()))?;
    if !(n.is_finite() && n > 0.0) {
        return Err(SpecError::RateNotPositive(v.into()));
    }
    Ok(Some((n * mult) as u64))
}

fn parse_delay(v: &str) -> Result<Duration, SpecError> {
    let lower = v.to_ascii_lowercase();
    let (num, scale) = [("us", 1e-6), ("ms", 1e-3), ("s", 1.0)]
        .iter()
        .find_map(|(unit, m)| lower.strip_suffix(unit).map(|n| (n, *m)))
        .ok_or_else(|| SpecError::DelayUnit(v.into()))?;
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| SpecError::DelayNumber(v.into()))?;
    if !(n.is_finite() && (0.0..=10.0 / scale).contains(&n)) {
        return Err(SpecError::DelayRange(v.into()));
    }
    Ok(Duration::from_secs_f64(n * scale))
}
