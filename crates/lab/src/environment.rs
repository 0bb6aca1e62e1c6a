//! What the machine was when a comparison ran — CPU, memory, kernel, versions, cache
//! state — and how busy it was around each run ([`Noise`]).

use std::process::Command;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Environment {
    pub hostname: String,
    pub cpu_model: String,
    pub cores: usize,
    pub memory_bytes: u64,
    pub kernel: String,
    pub os: String,
    pub servelab_version: String,
    /// `name: version` of every baseline program found on the machine.
    pub tools: Vec<(String, String)>,
    /// `warm`, or `cold (caches dropped before each run)`, or why cold was not possible.
    pub cache_state: String,
    /// When the run started, UTC, RFC 3339.
    pub started_utc: String,
}

impl Environment {
    pub fn capture(cache_state: String) -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map(|kb| kb * 1024)
            .unwrap_or(0);
        let os = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                    .map(|v| v.trim_matches('"').to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Environment {
            hostname: hostname(),
            cpu_model,
            cores: crate::machine_cores(),
            memory_bytes,
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            os,
            servelab_version: env!("CARGO_PKG_VERSION").to_string(),
            tools: tool_versions(),
            cache_state,
            started_utc: now_rfc3339(),
        }
    }
}

pub fn hostname() -> String {
    let h = read_trimmed("/proc/sys/kernel/hostname");
    if h.is_empty() { "localhost".into() } else { h }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// How busy the machine was at one moment: the load average and, where the kernel has
/// it, CPU pressure (`/proc/pressure/cpu`: the share of time some runnable task waited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Noise {
    pub load1: f64,
    pub load5: f64,
    pub load15: f64,
    /// `some avg10` of `/proc/pressure/cpu`, percent.
    pub cpu_pressure_avg10: Option<f64>,
    pub cores: usize,
}

/// A run is flagged when the machine had more runnable work than cores around it.
pub const BUSY_LOAD_PER_CORE: f64 = 1.0;

impl Noise {
    pub fn now() -> Noise {
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let mut f = load
            .split_whitespace()
            .map(|v| v.parse::<f64>().unwrap_or(0.0));
        let pressure = std::fs::read_to_string("/proc/pressure/cpu")
            .ok()
            .and_then(|t| parse_pressure_avg10(&t));
        Noise {
            load1: f.next().unwrap_or(0.0),
            load5: f.next().unwrap_or(0.0),
            load15: f.next().unwrap_or(0.0),
            cpu_pressure_avg10: pressure,
            cores: crate::machine_cores(),
        }
    }

    pub fn load_per_core(&self) -> f64 {
        self.load1 / self.cores.max(1) as f64
    }

    /// More than [`BUSY_LOAD_PER_CORE`] runnable tasks per core (1-minute average).
    pub fn busy(&self) -> bool {
        self.load_per_core() > BUSY_LOAD_PER_CORE
    }
}

impl std::fmt::Display for Noise {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "load {:.2} {:.2} {:.2}",
            self.load1, self.load5, self.load15
        )?;
        if let Some(p) = self.cpu_pressure_avg10 {
            write!(f, ", cpu pressure {p:.1} %")?;
        }
        Ok(())
    }
}

/// `some avg10=1.23 avg60=…` → 1.23.
fn parse_pressure_avg10(text: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with("some"))?
        .split_whitespace()
        .find_map(|w| w.strip_prefix("avg10="))?
        .parse()
        .ok()
}

/// Versions of the peers a comparison may use, each asked the way it answers.
pub fn tool_versions() -> Vec<(String, String)> {
    let probes: [(&str, &[&str]); 6] = [
        ("nginx", &["-v"]),
        ("apache2", &["-v"]),
        ("ganesha.nfsd", &["-v"]),
        ("wrk", &["-v"]),
        ("ab", &["-V"]),
        ("iperf3", &["--version"]),
    ];
    probes
        .iter()
        .filter_map(|(name, args)| {
            let out = Command::new(name).args(*args).output().ok()?;
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let line = text
                .lines()
                .find(|l| !l.trim().is_empty())?
                .trim()
                .to_string();
            Some((name.to_string(), line))
        })
        .collect()
}

/// The current time as `YYYY-MM-DDTHH:MM:SSZ`, from the system clock (civil-from-days).
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_422), (2025, 11, 30));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn noise_reads_load_and_pressure() {
        assert_eq!(
            parse_pressure_avg10(
                "some avg10=2.50 avg60=1.00 avg300=0.10 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
            ),
            Some(2.5)
        );
        let n = Noise::now();
        assert!(n.cores >= 1 && n.load1 >= 0.0);
        let busy = Noise {
            load1: 4.5,
            cores: 2,
            ..Noise::default()
        };
        assert!(busy.busy());
        assert!(
            !Noise {
                load1: 1.5,
                cores: 2,
                ..Noise::default()
            }
            .busy()
        );
        assert!(busy.to_string().starts_with("load 4.50"));
    }

    #[test]
    fn captures_this_machine() {
        let env = Environment::capture("warm".into());
        assert!(env.cores >= 1);
        assert!(env.memory_bytes > 0);
        assert!(!env.kernel.is_empty());
        assert_eq!(env.started_utc.len(), 20);
    }
}
