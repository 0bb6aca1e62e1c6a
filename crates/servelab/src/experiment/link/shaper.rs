//! The shaped direction of the relay: a reader splices what arrives into a pipe and
//! books it on the link's shared clock (the rate), a writer splices each piece on when
//! the link has carried it plus the delay, sleeping on the high-resolution timer.

use std::net::TcpStream;
use std::os::fd::AsFd as _;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::pipe::{shaper_pipe, splice_in, splice_once};
use super::spec::LinkSpec;

/// The moment the shared link is next free, per direction.
#[derive(Default)]
pub struct LinkClock {
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

/// Bytes a delay-only direction's pipe holds when the process may exceed
/// `fs.pipe-max-size` (root); 1 MiB otherwise. The writer keeps up with the reader there
/// (a delay holds only rate × delay, ~160 KiB at 5 Gbit/s and 250 µs), so the pipe queues
/// nothing in steady state; the room is for the moments a busy machine wakes the writer
/// late — with 1 MiB (1.7 ms at 5 Gbit/s) those stalled the sender, and 5 Gbit/s behind
/// tbf fell to ~3 Gbit/s at load 15; with 8 MiB it held 4.65. A rate-limiting direction
/// keeps 1 MiB: there the pipe is the link's queue, and 8 MiB would be 0.7 s at 100 Mbit/s.
const DELAY_PIPE: usize = 8 << 20;

/// The reader thread splices what arrives into a pipe and books it on the link as it
/// arrives (so the link's clock runs ahead while earlier bytes wait out their delay);
/// this thread splices each piece on at `carried + delay`. No byte enters user space.
/// When this relay limits the rate, the pipe (1 MiB, about 1.7 ms at 5 Gbit/s — a
/// switch's buffer, not bufferbloat) pushes back on the sender when the link is slower
/// than it; when it only delays, the pipe is [`DELAY_PIPE`].
pub fn pump(from: Option<TcpStream>, to: &TcpStream, spec: LinkSpec, clock: Arc<LinkClock>) {
    let Some(from) = from else { return };
    let size = if spec.rate_bits_per_sec.is_some() {
        1 << 20
    } else {
        DELAY_PIPE
    };
    let Ok(pipe) = shaper_pipe(size) else { return };
    let pipe = Arc::new(pipe);
    let (tx, rx) = mpsc::channel::<(Instant, usize)>();
    let reader = {
        let pipe = pipe.clone();
        std::thread::Builder::new()
            .name("link-read".into())
            .spawn(move || {
                while let Ok(n) = splice_in(from.as_fd(), pipe.writer(), 1 << 20) {
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
            match splice_once(pipe.reader(), to.as_fd(), left) {
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
