//! An emulated network link: a userspace TCP relay that adds a one-way delay and limits
//! the rate, so scenario A's NFS traffic can cross "a real network" on one machine.
//!
//! Kernel `tc netem` is not available on these machines (and `tbf`, which is, cannot
//! delay), so the relay does it in userspace, on plain threads rather than an async
//! runtime: tokio's timer ticks in whole milliseconds, which turned a 250 µs delay into
//! ≥ 1 ms and held a 1 Gbit/s link to 0.32 Gbit/s (one 64 KiB chunk per tick).
//!
//! - Unshaped (the control row): each direction is `splice(2)` through a pipe — the
//!   bytes never enter user space, so the relay costs two extra socket hops and little
//!   CPU.
//! - Shaped: each direction is a reader that splices what arrives into a pipe and
//!   books it on the link (`rate`, one clock shared by every connection in that
//!   direction, as on one wire), and a writer that splices it on when the link has
//!   carried it plus `delay`. The writer sleeps on the kernel's high-resolution timer
//!   with a 1 ns timer slack, minus its recent wakeup lateness, so delays are right to
//!   tens of microseconds on average.

use std::fmt;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd as _;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
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
    stop: Arc<AtomicBool>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

/// The emulated link as a scenario holds it: where to connect, and how it is built.
pub struct Link {
    pub addr: SocketAddr,
    pub spec: LinkSpec,
    _relay: Relay,
}

impl Link {
    /// A relay on a free loopback port forwarding to `upstream` through `spec`.
    pub fn start(upstream: SocketAddr, spec: LinkSpec) -> std::io::Result<Link> {
        let relay = start(
            "127.0.0.1:0".parse().expect("a valid address"),
            upstream,
            spec,
        )?;
        Ok(Link {
            addr: relay.addr,
            spec,
            _relay: relay,
        })
    }

    /// Which path carried the traffic, for the report.
    pub fn path_note(&self) -> &'static str {
        path_note(self.spec)
    }
}

/// How a link of this spec is built, for the report.
pub fn path_note(spec: LinkSpec) -> &'static str {
    if spec.is_unshaped() {
        "userspace relay, splice(2) through a pipe"
    } else {
        "userspace relay, splice(2) through a pipe, shared-clock rate, delay by high-resolution sleep"
    }
}

/// The moment the shared link is next free, per direction.
#[derive(Default)]
struct LinkClock {
    free_at: Mutex<Option<Instant>>,
}

impl LinkClock {
    /// Reserves the link for `bytes` at `rate` from `now` on and returns when the last
    /// bit has left.
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
pub fn start(listen: SocketAddr, upstream: SocketAddr, spec: LinkSpec) -> std::io::Result<Relay> {
    let listener = TcpListener::bind(listen)?;
    let addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let up_clock = Arc::new(LinkClock::default());
    let down_clock = Arc::new(LinkClock::default());
    let flag = stop.clone();
    std::thread::Builder::new()
        .name("link-accept".into())
        .spawn(move || {
            for client in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue; // dropping `client` tells it the far side is unreachable
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (up, down) = (up_clock.clone(), down_clock.clone());
                let (c2, s2) = match (client.try_clone(), server.try_clone()) {
                    (Ok(c), Ok(s)) => (c, s),
                    _ => continue,
                };
                direction(client, server, spec, up);
                direction(s2, c2, spec, down);
            }
        })?;
    Ok(Relay { addr, stop })
}

/// Starts carrying one direction, `from` → `to`, on threads of its own.
fn direction(from: TcpStream, to: TcpStream, spec: LinkSpec, clock: Arc<LinkClock>) {
    let _ = std::thread::Builder::new()
        .name("link-pump".into())
        .spawn(move || {
            if spec.is_unshaped() {
                let _ = splice_pump(&from, &to);
            } else {
                shaped_pump(from.try_clone().ok(), &to, spec, clock);
            }
            let _ = to.shutdown(Shutdown::Write);
            let _ = from.shutdown(Shutdown::Read);
        });
}

/// Moves bytes socket → pipe → socket without copying them through user space.
fn splice_pump(from: &TcpStream, to: &TcpStream) -> std::io::Result<()> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array we pass.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let (pr, pw) = (fds[0], fds[1]);
    // A 1 MiB pipe lets one splice carry what a fast sender has queued.
    // SAFETY: fcntl on the pipe we just created; failure leaves the default size.
    unsafe { libc::fcntl(pw, libc::F_SETPIPE_SZ, 1 << 20) };
    let result = (|| loop {
        // SAFETY: splice between descriptors we own; null offsets (sockets and pipes).
        let n = unsafe {
            libc::splice(
                from.as_raw_fd(),
                std::ptr::null_mut(),
                pw,
                std::ptr::null_mut(),
                1 << 20,
                libc::SPLICE_F_MOVE,
            )
        };
        if n == 0 {
            return Ok(());
        }
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let mut left = n as usize;
        while left > 0 {
            // SAFETY: as above.
            let m = unsafe {
                libc::splice(
                    pr,
                    std::ptr::null_mut(),
                    to.as_raw_fd(),
                    std::ptr::null_mut(),
                    left,
                    libc::SPLICE_F_MOVE,
                )
            };
            if m <= 0 {
                let e = std::io::Error::last_os_error();
                if m < 0 && e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            left -= m as usize;
        }
    })();
    // SAFETY: closing the two pipe descriptors created above, once.
    unsafe {
        libc::close(pr);
        libc::close(pw);
    }
    result
}

/// A pipe owned by one shaped direction; both ends closed on drop.
struct Pipe {
    read: i32,
    write: i32,
}

impl Pipe {
    fn new() -> std::io::Result<Pipe> {
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 writes two descriptors into the array we pass.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fcntl on the pipe just created; on failure the default size stays.
        unsafe { libc::fcntl(fds[1], libc::F_SETPIPE_SZ, 1 << 20) };
        Ok(Pipe {
            read: fds[0],
            write: fds[1],
        })
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: closing the two descriptors this value owns, once.
        unsafe {
            libc::close(self.read);
            libc::close(self.write);
        }
    }
}

/// Waits until `fd` is ready for `events` (or has hung up), at most `timeout_ms`
/// (-1: no limit).
fn wait_fd(fd: i32, events: i16, timeout_ms: i32) {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: poll on one pollfd we own.
    unsafe { libc::poll(&mut p, 1, timeout_ms) };
}

/// Splices socket → pipe without blocking inside the kernel: a blocking splice from a
/// socket holds the pipe's lock while it waits for data, which would stall the writer
/// draining the same pipe (and, for a request/response protocol, deadlock). Waits with
/// poll(2) instead. `Ok(0)` is end of stream.
fn splice_in(from: i32, pipe_write: i32, len: usize) -> std::io::Result<usize> {
    loop {
        // SPLICE_F_NONBLOCK covers only the pipe: a blocking socket still blocks (with
        // the pipe locked, so the writer could not drain what is already queued), so
        // wait — without a time limit — until there is data or the peer has gone.
        wait_fd(from, libc::POLLIN, -1);
        // SAFETY: splice between descriptors the caller owns; null offsets.
        let n = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                pipe_write,
                std::ptr::null_mut(),
                len,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = std::io::Error::last_os_error();
        match e.kind() {
            std::io::ErrorKind::Interrupted => {}
            // No data yet, or the pipe is full: wait for room, then for data.
            std::io::ErrorKind::WouldBlock => wait_fd(pipe_write, libc::POLLOUT, 50),
            _ => return Err(e),
        }
    }
}

/// One splice(2) call, retried on EINTR; `Ok(0)` is end of stream.
fn splice_once(from: i32, to: i32, len: usize) -> std::io::Result<usize> {
    loop {
        // SAFETY: splice between descriptors the caller owns; null offsets (sockets, pipes).
        let n = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                to,
                std::ptr::null_mut(),
                len,
                libc::SPLICE_F_MOVE,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The reader thread splices what arrives into a pipe and books it on the link as it
/// arrives (so the link's clock runs ahead while earlier bytes wait out their delay);
/// this thread splices each piece on at `carried + delay`. No byte enters user space.
/// The pipe (1 MiB, about 1.7 ms at 5 Gbit/s — a switch's buffer, not bufferbloat)
/// pushes back on the sender when the link is slower than it.
fn shaped_pump(from: Option<TcpStream>, to: &TcpStream, spec: LinkSpec, clock: Arc<LinkClock>) {
    let Some(from) = from else { return };
    let Ok(pipe) = Pipe::new() else { return };
    let pipe = Arc::new(pipe);
    let (tx, rx) = mpsc::channel::<(Instant, usize)>();
    let reader = {
        let pipe = pipe.clone();
        std::thread::Builder::new()
            .name("link-read".into())
            .spawn(move || {
                while let Ok(n) = splice_in(from.as_raw_fd(), pipe.write, 1 << 20) {
                    if n == 0 {
                        break;
                    }
                    let now = Instant::now();
                    let carried = match spec.rate_bits_per_sec {
                        Some(rate) => clock.reserve(n, rate, now),
                        None => now,
                    };
                    if tx.send((carried + spec.delay, n)).is_err() {
                        break;
                    }
                }
            })
    };
    // SAFETY: prctl(PR_SET_TIMERSLACK) on this thread only; 1 ns asks for exact wakeups.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    let mut pending: Option<(Instant, usize)> = None;
    let mut lateness = Duration::ZERO;
    'out: while let Some((release, mut left)) = pending.take().or_else(|| rx.recv().ok()) {
        sleep_until(release, &mut lateness);
        // Everything else already due goes out in the same splice: at 5 Gbit/s a piece
        // is due every few tens of microseconds, and one wakeup per piece is too many
        // on a busy machine.
        let horizon = Instant::now() + Duration::from_micros(50);
        while let Ok((r, n)) = rx.try_recv() {
            if r <= horizon {
                left += n;
            } else {
                pending = Some((r, n));
                break;
            }
        }
        while left > 0 {
            match splice_once(pipe.read, to.as_raw_fd(), left) {
                Ok(0) | Err(_) => break 'out,
                Ok(m) => left -= m,
            }
        }
    }
    // The caller shuts `from` for reading, which ends the reader thread; it holds the
    // pipe until then.
    drop(reader);
}

/// Sleeps until `t` on the kernel's high-resolution timer (the thread's timer slack is
/// 1 ns). A wakeup comes some microseconds late — more on a busy machine — so the sleep
/// ends early by the recent average lateness (`lateness`, kept per writer), which puts
/// releases on time on average. No spinning: on a busy machine a spinning thread only
/// delays the others.
fn sleep_until(t: Instant, lateness: &mut Duration) {
    let now = Instant::now();
    if t <= now {
        return;
    }
    let wanted = t - now;
    let asked = wanted.saturating_sub(*lateness);
    if asked.is_zero() {
        return;
    }
    let start = Instant::now();
    std::thread::sleep(asked);
    let late = start.elapsed().saturating_sub(asked);
    // An exponential average over the last ~8 wakeups, capped so one long stall (the
    // process descheduled) cannot make later releases early by much.
    let late = late.min(Duration::from_micros(200));
    *lateness = (*lateness * 7 + late) / 8;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};

    /// The figure tests measure time and throughput: one at a time, so they do not
    /// measure each other.
    static FIGURES: Mutex<()> = Mutex::new(());

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

    /// Echoes every byte back (the far end of a round trip).
    fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                std::thread::spawn(move || {
                    let _ = s.set_nodelay(true);
                    let mut r = s.try_clone().unwrap();
                    let mut w = s;
                    let _ = std::io::copy(&mut r, &mut w);
                });
            }
        });
        addr
    }

    /// Reads and discards everything; for each connection, sends (bytes, seconds from
    /// the first byte to the end) — what the far end of the link received.
    fn sink_server() -> (SocketAddr, mpsc::Receiver<(u64, f64)>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 256 * 1024];
                    let mut total = 0u64;
                    let mut first: Option<Instant> = None;
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        first.get_or_insert_with(Instant::now);
                        total += n as u64;
                    }
                    let secs = first.map_or(0.0, |t| t.elapsed().as_secs_f64());
                    let _ = tx.send((total, secs));
                });
            }
        });
        (addr, rx)
    }

    /// Median round trips of a 100-byte ping over `a` and over `b`, the pings
    /// alternating between the two so the machine's noise falls on both alike.
    fn paired_rtts(a: SocketAddr, b: SocketAddr, pings: usize) -> (Duration, Duration) {
        let mut conns = [
            TcpStream::connect(a).unwrap(),
            TcpStream::connect(b).unwrap(),
        ];
        let mut times = [Vec::new(), Vec::new()];
        let mut buf = [0u8; 100];
        for i in 0..pings + 3 {
            for (k, s) in conns.iter_mut().enumerate() {
                s.set_nodelay(true).unwrap();
                let t = Instant::now();
                s.write_all(&[i as u8; 100]).unwrap();
                s.read_exact(&mut buf).unwrap();
                assert_eq!(buf[0], i as u8);
                if i >= 3 {
                    times[k].push(t.elapsed());
                }
            }
        }
        let med = |v: &mut Vec<Duration>| {
            v.sort();
            v[v.len() / 2]
        };
        let (x, y) = times.split_at_mut(1);
        (med(&mut x[0]), med(&mut y[0]))
    }

    /// Bits per second the far end received from one stream sent for about `secs`.
    fn stream_bits(addr: SocketAddr, sink: &mpsc::Receiver<(u64, f64)>, secs: f64) -> f64 {
        let mut s = TcpStream::connect(addr).unwrap();
        let chunk = vec![5u8; 128 * 1024];
        let t = Instant::now();
        while t.elapsed().as_secs_f64() < secs {
            s.write_all(&chunk).unwrap();
        }
        drop(s);
        let (bytes, took) = sink.recv_timeout(Duration::from_secs(30)).unwrap();
        bytes as f64 * 8.0 / took
    }

    #[test]
    fn bytes_arrive_intact_both_ways() {
        let _one_at_a_time = FIGURES.lock();
        for spec in ["rate=unlimited", "rate=2gbit,delay=100us", "delay=80ms"] {
            let relay = start(
                "127.0.0.1:0".parse().unwrap(),
                echo_server(),
                spec.parse().unwrap(),
            )
            .unwrap();
            let s = TcpStream::connect(relay.addr).unwrap();
            let mut r = s.try_clone().unwrap();
            let payload: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
            let p2 = payload.clone();
            let mut w = s;
            let writer = std::thread::spawn(move || w.write_all(&p2).unwrap());
            let mut got = vec![0u8; payload.len()];
            r.read_exact(&mut got).unwrap();
            writer.join().unwrap();
            assert!(got == payload, "{spec}: bytes changed in the relay");
            // An idle pause, then a request: it must not wait for more input first (a
            // blocking splice from an idle socket held the pipe and stalled replies).
            std::thread::sleep(Duration::from_millis(150));
            r.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut w = r.try_clone().unwrap();
            let t = Instant::now();
            w.write_all(b"ping").unwrap();
            let mut pong = [0u8; 4];
            r.read_exact(&mut pong).expect("the reply after a pause");
            assert_eq!(&pong, b"ping");
            assert!(
                t.elapsed() < Duration::from_millis(500),
                "{spec}: {:?}",
                t.elapsed()
            );
        }
    }

    /// Issue 12 §2: a delay of D adds 2 × D ± 10 % to a small request's round trip,
    /// against the same shaped path with no delay (so the figure is the delay's alone,
    /// not the few tens of microseconds the shaping threads cost over plain splice).
    #[test]
    fn delay_adds_twice_d_to_a_round_trip() {
        let _one_at_a_time = FIGURES.lock();
        let upstream = echo_server();
        let no_delay = LinkSpec {
            rate_bits_per_sec: Some(1_000_000_000_000),
            delay: Duration::ZERO,
        };
        let control = start("127.0.0.1:0".parse().unwrap(), upstream, no_delay).unwrap();
        for d_us in [250u64, 1000] {
            let spec = LinkSpec {
                rate_bits_per_sec: None,
                delay: Duration::from_micros(d_us),
            };
            let relay = start("127.0.0.1:0".parse().unwrap(), upstream, spec).unwrap();
            let (base, rtt) = paired_rtts(control.addr, relay.addr, 40);
            let added = rtt.saturating_sub(base).as_secs_f64() * 1e6;
            let want = 2.0 * d_us as f64;
            assert!(
                (added - want).abs() <= 0.1 * want,
                "delay {d_us} us added {added:.0} us to the round trip (want {want:.0} ± 10 %); base {base:?}, with delay {rtt:?}"
            );
        }
    }

    /// Issue 12 §2: one TCP stream through `rate=R` carries at least 0.9 × R (and not
    /// much more than R) for 100 Mbit/s, 1 Gbit/s and 5 Gbit/s. On a machine too busy to
    /// relay R at all, the bar is 0.9 × what the same relay without a rate limit carried
    /// just before (side by side), so the test still fails when the rate limiter
    /// regresses (the old one held 1 Gbit/s to 0.32).
    #[test]
    fn rate_is_carried_by_one_stream() {
        let _one_at_a_time = FIGURES.lock();
        let (upstream, sink) = sink_server();
        // The same machinery with no rate limit: what this machine can relay right now.
        let unlimited = LinkSpec {
            rate_bits_per_sec: Some(1_000_000_000_000),
            delay: Duration::from_micros(250),
        };
        let control = start("127.0.0.1:0".parse().unwrap(), upstream, unlimited).unwrap();
        for (rate, secs) in [
            (100_000_000u64, 1.0),
            (1_000_000_000, 0.5),
            (5_000_000_000, 0.5),
        ] {
            let spec = LinkSpec {
                rate_bits_per_sec: Some(rate),
                delay: Duration::from_micros(250),
            };
            let r = rate as f64;
            let ceiling = if rate > 1_000_000_000 {
                stream_bits(control.addr, &sink, secs)
            } else {
                f64::INFINITY
            };
            let relay = start("127.0.0.1:0".parse().unwrap(), upstream, spec).unwrap();
            let got = stream_bits(relay.addr, &sink, secs);
            let bar = 0.9 * r.min(ceiling);
            if ceiling < r {
                eprintln!(
                    "NOTE: {spec}: this machine relayed only {:.2} Gbit/s without a rate limit just now",
                    ceiling / 1e9
                );
            }
            assert!(
                got >= bar && got <= 1.15 * r,
                "{spec}: one stream moved {:.3} Gbit/s (bar {:.3})",
                got / 1e9,
                bar / 1e9
            );
        }
    }

    /// The unshaped control must cost little: one stream through it keeps most of what
    /// loopback carries directly (splice, no user-space copy).
    #[test]
    fn unshaped_relay_is_cheap() {
        let _one_at_a_time = FIGURES.lock();
        let (upstream, sink) = sink_server();
        let relay = start(
            "127.0.0.1:0".parse().unwrap(),
            upstream,
            LinkSpec::unshaped(),
        )
        .unwrap();
        // Interleaved, medians of three: this machine's share of CPU changes by the second.
        let (mut direct, mut relayed) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            direct.push(stream_bits(upstream, &sink, 0.25));
            relayed.push(stream_bits(relay.addr, &sink, 0.25));
        }
        direct.sort_by(f64::total_cmp);
        relayed.sort_by(f64::total_cmp);
        let (direct, relayed) = (direct[1], relayed[1]);
        // Each byte crosses loopback twice through the relay (about half of direct at
        // best); a user-space copy on top fell far lower on this 2-core machine.
        assert!(
            relayed >= 0.2 * direct,
            "relay {:.2} Gbit/s vs direct {:.2} Gbit/s",
            relayed / 1e9,
            direct / 1e9
        );
    }
}
