//! Bytes from socket to socket through a pipe with splice(2), never through user space:
//! the unshaped direction's [`pump`], and the pipe and splice calls the shaper is built
//! from.

use std::net::TcpStream;
use std::os::fd::AsRawFd as _;

/// Moves bytes socket → pipe → socket without copying them through user space.
pub fn pump(from: &TcpStream, to: &TcpStream) -> std::io::Result<()> {
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
pub struct Pipe {
    pub read: i32,
    pub write: i32,
}

impl Pipe {
    pub fn new(size: i32) -> std::io::Result<Pipe> {
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 writes two descriptors into the array we pass.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fcntl on the pipe just created; on failure the smaller size (or the
        // default) stays.
        unsafe {
            if libc::fcntl(fds[1], libc::F_SETPIPE_SZ, size) < 0 {
                libc::fcntl(fds[1], libc::F_SETPIPE_SZ, 1 << 20);
            }
        }
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
pub fn splice_in(from: i32, pipe_write: i32, len: usize) -> std::io::Result<usize> {
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
pub fn splice_once(from: i32, to: i32, len: usize) -> std::io::Result<usize> {
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
