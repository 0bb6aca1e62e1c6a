//! An emulated network link: a userspace TCP relay that adds a one-way delay and limits
//! the rate, so scenario A's NFS traffic can cross "a real network" on one machine.
//!
//! Kernel `tc netem` is not available on these machines, so the relay does it in
//! userspace. Each direction of each connection is a reader that timestamps chunks and a
//! writer that releases them `delay` later, no faster than the link's rate allows. The
//! rate is shared by all connections in one direction, as on one physical link. The
//! relay's own cost is measured by running it unshaped (`rate=unlimited,delay=0`) as a
//! control row.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

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

impl FromStr for LinkSpec {
    type Err = String;

    /// `rate=1gbit,delay=2ms` (either part may be left out; units as `tc` writes them:
    /// bit, kbit, mbit, gbit; us, ms, s).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut spec = LinkSpec::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: expected key=value (rate=1gbit,delay=1ms)"))?;
            match key.trim() {
                "rate" => spec.rate_bits_per_sec = parse_rate(value.trim())?,
                "delay" | "latency" => spec.delay = parse_delay(value.trim())?,
                other => return Err(format!("unknown link setting `{other}` (use rate, delay)")),
            }
        }
        Ok(spec)
    }
}

fn parse_rate(v: &str) -> Result<Option<u64>, String> {
    if v == "unlimited" || v == "0" {
        return Ok(None);
    }
    let lower = v.to_ascii_lowercase();
    let (num, mult) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|(unit, m)| lower.strip_suffix(unit).map(|n| (n, *m)))
        .ok_or_else(|| format!("rate `{v}`: use a unit of bit, kbit, mbit or gbit"))?;
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("rate `{v}` is not a number"))?;
    if !(n.is_finite() && n > 0.0) {
        return Err(format!("rate `{v}` must be positive"));
    }
    Ok(Some((n * mult) as u64))
}

fn parse_delay(v: &str) -> Result<Duration, String> {
    let lower = v.to_ascii_lowercase();
    let (num, scale) = [("us", 1e-6), ("ms", 1e-3), ("s", 1.0)]
        .iter()
        .find_map(|(unit, m)| lower.strip_suffix(unit).map(|n| (n, *m)))
        .ok_or_else(|| format!("delay `{v}`: use a unit of us, ms or s"))?;
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("delay `{v}` is not a number"))?;
    if !(n.is_finite() && (0.0..=10.0 / scale).contains(&n)) {
        return Err(format!("delay `{v}` must be between 0 and 10 s"));
    }
    Ok(Duration::from_secs_f64(n * scale))
}

/// A running relay; stops accepting when dropped (open connections end with their peers).
pub struct Relay {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The moment the shared link is next free, per direction.
#[derive(Default)]
struct LinkClock {
    free_at: Mutex<Option<Instant>>,
}

impl LinkClock {
    /// Reserves the link for `bytes` at `rate` and returns when the last bit has left.
    fn reserve(&self, bytes: usize, rate_bits: u64, now: Instant) -> Instant {
        let wire = Duration::from_secs_f64(bytes as f64 * 8.0 / rate_bits as f64);
        let mut free_at = self.free_at.lock();
        let start = free_at.map_or(now, |t| t.max(now));
        let done = start + wire;
        *free_at = Some(done);
        done
    }
}

/// Starts a relay on `listen` forwarding every connection to `upstream` through `spec`.
pub async fn start(
    listen: SocketAddr,
    upstream: SocketAddr,
    spec: LinkSpec,
) -> std::io::Result<Relay> {
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let up_clock = Arc::new(LinkClock::default());
    let down_clock = Arc::new(LinkClock::default());
    let task = tokio::spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else {
                continue;
            };
            let (up, down) = (up_clock.clone(), down_clock.clone());
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    return; // dropping `client` tells it the far side is unreachable
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                let a = tokio::spawn(pump(cr, sw, spec, up));
                let b = tokio::spawn(pump(sr, cw, spec, down));
                let _ = tokio::join!(a, b);
            });
        }
    });
    Ok(Relay { addr, task })
}

/// Copies one direction, releasing each chunk `delay` after it arrived and no faster than
/// the link's rate.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    spec: LinkSpec,
    clock: Arc<LinkClock>,
) {
    // Bounded: a slow link pushes back on the sender instead of buffering without limit.
    let (tx, mut rx) = mpsc::channel::<(Instant, Bytes)>(64);
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let chunk = Bytes::copy_from_slice(&buf[..n]);
                    if tx.send((Instant::now(), chunk)).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    while let Some((arrived, chunk)) = rx.recv().await {
        let mut release = arrived + spec.delay;
        if let Some(rate) = spec.rate_bits_per_sec {
            release = release.max(clock.reserve(chunk.len(), rate, Instant::now()));
        }
        if release > Instant::now() {
            tokio::time::sleep_until(release).await;
        }
        if to.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
    reader.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print() {
        let s: LinkSpec = "rate=1gbit,delay=2ms".parse().unwrap();
        assert_eq!(s.rate_bits_per_sec, Some(1_000_000_000));
        assert_eq!(s.delay, Duration::from_millis(2));
        assert_eq!(s.to_string(), "rate=1gbit,delay=2000us");
        let s: LinkSpec = "rate=100mbit".parse().unwrap();
        assert_eq!(s.delay, Duration::ZERO);
        assert_eq!(
            "delay=500us".parse::<LinkSpec>().unwrap().rate_bits_per_sec,
            None
        );
        assert!("rate=fast".parse::<LinkSpec>().is_err());
        assert!("rate=-1mbit".parse::<LinkSpec>().is_err());
        assert!("speed=1gbit".parse::<LinkSpec>().is_err());
        assert!("delay=1h".parse::<LinkSpec>().is_err());
    }

    async fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn delay_applies_each_way() {
        let upstream = echo_server().await;
        let spec: LinkSpec = "delay=20ms".parse().unwrap();
        let relay = start("127.0.0.1:0".parse().unwrap(), upstream, spec)
            .await
            .unwrap();
        let mut s = TcpStream::connect(relay.addr).await.unwrap();
        let t = std::time::Instant::now();
        s.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).await.unwrap();
        let rtt = t.elapsed();
        assert_eq!(&buf, b"ping");
        assert!(rtt >= Duration::from_millis(40), "rtt {rtt:?}");
        assert!(rtt < Duration::from_millis(500), "rtt {rtt:?}");
    }

    #[tokio::test]
    async fn rate_limits_throughput() {
        let upstream = echo_server().await;
        // 80 Mbit/s = 10 MB/s each way: 2 MB takes at least ~0.2 s.
        let spec: LinkSpec = "rate=80mbit".parse().unwrap();
        let relay = start("127.0.0.1:0".parse().unwrap(), upstream, spec)
            .await
            .unwrap();
        let s = TcpStream::connect(relay.addr).await.unwrap();
        let (mut r, mut w) = s.into_split();
        let payload = vec![7u8; 2_000_000];
        let t = std::time::Instant::now();
        let writer = tokio::spawn(async move { w.write_all(&payload).await.unwrap() });
        let mut got = vec![0u8; 2_000_000];
        r.read_exact(&mut got).await.unwrap();
        writer.await.unwrap();
        let took = t.elapsed();
        assert!(got.iter().all(|&b| b == 7));
        assert!(took >= Duration::from_millis(180), "took {took:?}");
    }
}
