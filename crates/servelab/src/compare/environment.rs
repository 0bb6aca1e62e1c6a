//! What the machine was when a comparison ran: CPU, memory, kernel, versions, cache state.

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
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
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

/// Versions of the peers a comparison may use, each asked the way it answers.
fn tool_versions() -> Vec<(String, String)> {
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
    fn captures_this_machine() {
        let env = Environment::capture("warm".into());
        assert!(env.cores >= 1);
        assert!(env.memory_bytes > 0);
        assert!(!env.kernel.is_empty());
        assert_eq!(env.started_utc.len(), 20);
    }
}
