//! Bytes from socket to socket through a pipe with splice(2), never through user space:
//! the unshaped direction's [`pump`], and the pipe and splice calls the shaper is built
//! from (on the workspace's one wrapper, the `splice` crate).

use std::net::TcpStream;
use std::os::fd::{AsFd as _, BorrowedFd};

use splice::{Mode, Pipe, splice};

/// Moves bytes socket → pipe → socket without copying them through user space.
pub fn pump(from: &TcpStream, to: &TcpStream) -> std::io::Result<()> {
    let pipe = Pipe::new(false)?;
    // A 1 MiB pipe lets one splice carry what a fast sender has queued; failure leaves
    // the default size.
    let _ = pipe.resize(1 << 20);
    loop {
        let n = splice(from.as_fd(), pipe.writer(), 1 << 20, Mode::Blocking)?;
        if n == 0 {
            return Ok(());
        }
        let mut left = n;
        while left > 0 {
            match splice(pipe.reader(), to.as_fd(), left, Mode::Blocking)? {
                0 => return Err(std::io::ErrorKind::WriteZero.into()),
                m => left -= m,
            }
        }
    }
}

/// A pipe for one shaped direction of `size` bytes, or 1 MiB (or the default) when the
/// limits refuse that.
pub fn shaper_pipe(size: usize) -> std::io::Result<Pipe> {
    let pipe = Pipe::new(false)?;
    if pipe.resize(size).is_err() {
        let _ = pipe.resize(1 << 20);
    }
    Ok(pipe)
}

/// Waits until `fd` is ready for `events` (or has hung up), at most `timeout_ms`
/// (-1: no limit).
fn wait_fd(fd: BorrowedFd<'_>, events: i16, timeout_ms: i32) {
    use std::os::fd::AsRawFd as _;
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    // SAFETY: poll on one pollfd we own, for a descriptor borrowed for the call.
    unsafe { libc::poll(&mut p, 1, timeout_ms) };
}

/// Splices socket → pipe without blocking inside the kernel: a blocking splice from a
/// socket holds the pipe's lock while it waits for data, which would stall the writer
/// draining the same pipe (and, for a request/response protocol, deadlock). Waits with
/// poll(2) instead. `Ok(0)` is end of stream.
pub fn splice_in(
    from: BorrowedFd<'_>,
    pipe_write: BorrowedFd<'_>,
    len: usize,
) -> std::io::Result<usize> {
    loop {
        // SPLICE_F_NONBLOCK covers only the pipe: a blocking socket still blocks (with
        // the pipe locked, so the writer could not drain what is already queued), so
        // wait — without a time limit — until there is data or the peer has gone.
        wait_fd(from, libc::POLLIN, -1);
        match splice(from, pipe_write, len, Mode::NonBlocking) {
            Ok(n) => return Ok(n),
            // No data yet, or the pipe is full: wait for room, then for data.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                wait_fd(pipe_write, libc::POLLOUT, 50)
            }
            Err(e) => return Err(e),
        }
    }
}

/// One splice(2) call (blocking, retried on EINTR); `Ok(0)` is end of stream.
pub fn splice_once(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> std::io::Result<usize> {
    splice(from, to, len, Mode::Blocking)
}
