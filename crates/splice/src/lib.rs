//! One safe wrapper around `splice(2)` and the pipes it moves bytes through, for every
//! crate of the workspace that passes bytes between descriptors without copying them
//! through user space: nfsclient (NFS socket → pipes), httpd (pipes → HTTP client
//! socket) and servelab's link relay (socket → pipe → socket).
//!
//! # Layout
//! - [`Pipe`]: a pipe that owns both its ends (closed on drop), created close-on-exec,
//!   blocking or not, with its capacity asked for ([`Pipe::resize`]).
//! - [`splice`]: one `splice(2)` call between two descriptors the caller keeps open, with
//!   no offsets (sockets and pipes), retried on `EINTR`; [`Mode`] says whether the
//!   pipe side may block.
//!
//! Nothing here waits for readiness: a caller on an event loop (tokio's `try_io`) or with
//! `poll(2)` decides how to wait after [`std::io::ErrorKind::WouldBlock`].

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Whether a [`splice`] may block on the pipe side (`SPLICE_F_NONBLOCK`). A socket end
/// blocks or not by its own `O_NONBLOCK` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The call may wait for room in (or data from) the pipe.
    Blocking,
    /// `SPLICE_F_NONBLOCK`: a full (or empty) pipe answers `WouldBlock`.
    NonBlocking,
}

/// Moves up to `len` bytes from `from` to `to` (one of them a pipe) without copying
/// them through user space; `Ok(0)` is the end of `from`'s stream. `EINTR` is retried;
/// every other error, `WouldBlock` included, is the caller's.
pub fn splice(
    from: BorrowedFd<'_>,
    to: BorrowedFd<'_>,
    len: usize,
    mode: Mode,
) -> io::Result<usize> {
    let flags = match mode {
        Mode::Blocking => libc::SPLICE_F_MOVE,
        Mode::NonBlocking => libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
    };
    loop {
        // SAFETY: both descriptors are borrowed, so they stay open for the call; null
        // offsets, as sockets and pipes have none.
        let n = unsafe {
            libc::splice(
                from.as_raw_fd(),
                std::ptr::null_mut(),
                to.as_raw_fd(),
                std::ptr::null_mut(),
                len,
                flags,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A pipe that owns both ends; dropping it closes them.
#[derive(Debug)]
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    /// A new close-on-exec pipe; `nonblocking` sets `O_NONBLOCK` on both ends.
    pub fn new(nonblocking: bool) -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        let flags = libc::O_CLOEXEC | if nonblocking { libc::O_NONBLOCK } else { 0 };
        // SAFETY: pipe2 writes two descriptors into the array we pass.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), flags) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Pipe { read, write })
    }

    /// Asks for a capacity of `bytes` (`F_SETPIPE_SZ`); returns the capacity the kernel
    /// set (a power-of-two number of pages, at least `bytes`). Above
    /// `/proc/sys/fs/pipe-max-size`, or past the user's pipe quota, it fails and the pipe
    /// keeps its capacity.
    pub fn resize(&self, bytes: usize) -> io::Result<usize> {
        let want = libc::c_int::try_from(bytes)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pipe size over 2 GiB"))?;
        // SAFETY: fcntl on a descriptor we own.
        let n = unsafe { libc::fcntl(self.write.as_raw_fd(), libc::F_SETPIPE_SZ, want) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// The capacity now (`F_GETPIPE_SZ`).
    pub fn capacity(&self) -> io::Result<usize> {
        // SAFETY: fcntl on a descriptor we own.
        let n = unsafe { libc::fcntl(self.write.as_raw_fd(), libc::F_GETPIPE_SZ) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// The read end.
    pub fn reader(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    /// The write end.
    pub fn writer(&self) -> BorrowedFd<'_> {
        self.write.as_fd()
    }

    /// Both ends, read end first, for a caller that keeps one longer than the other.
    pub fn into_ends(self) -> (OwnedFd, OwnedFd) {
        (self.read, self.write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    fn socket_pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn bytes_go_socket_to_pipe_to_socket_unchanged() {
        let (mut tx, rx) = socket_pair();
        let (out, mut sink) = socket_pair();
        let pipe = Pipe::new(false).unwrap();
        let payload: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let p = payload.clone();
        let writer = std::thread::spawn(move || {
            tx.write_all(&p).unwrap();
        });
        let mut moved = 0;
        while moved < payload.len() {
            let n = splice(rx.as_fd(), pipe.writer(), 1 << 16, Mode::Blocking).unwrap();
            assert!(n > 0);
            let mut left = n;
            while left > 0 {
                left -= splice(pipe.reader(), out.as_fd(), left, Mode::Blocking).unwrap();
            }
            moved += n;
        }
        writer.join().unwrap();
        drop(out);
        let mut got = Vec::new();
        sink.read_to_end(&mut got).unwrap();
        assert_eq!(got, payload);
    }

    #[test]
    fn an_empty_nonblocking_pipe_would_block_and_a_closed_writer_is_end_of_stream() {
        let pipe = Pipe::new(true).unwrap();
        let (out, _sink) = socket_pair();
        let err = splice(pipe.reader(), out.as_fd(), 4096, Mode::NonBlocking).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock, "{err}");
        let (read, write) = pipe.into_ends();
        drop(write);
        assert_eq!(
            splice(read.as_fd(), out.as_fd(), 4096, Mode::NonBlocking).unwrap(),
            0
        );
    }

    #[test]
    fn a_full_nonblocking_pipe_would_block_while_the_socket_still_has_data() {
        let pipe = Pipe::new(true).unwrap();
        let cap = pipe.capacity().unwrap();
        let (mut tx, rx) = socket_pair();
        rx.set_nonblocking(true).unwrap();
        tx.set_nonblocking(true).unwrap();
        // Fill the socket until the sender would block.
        let mut sent = 0;
        while let Ok(n) = tx.write(&[1u8; 64 << 10]) {
            sent += n;
        }
        let mut held = 0;
        let err = loop {
            match splice(rx.as_fd(), pipe.writer(), 1 << 20, Mode::NonBlocking) {
                Ok(n) => held += n,
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock, "{err}");
        // A pipe buffer may hold more than a page of a socket's data, so `held` can
        // exceed the nominal capacity; but the pipe filled before the socket emptied.
        assert!(held >= cap.min(sent), "{held} of {cap}");
        let mut waiting: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int.
        assert_eq!(
            unsafe { libc::ioctl(rx.as_raw_fd(), libc::FIONREAD, &mut waiting) },
            0
        );
        assert!(
            waiting > 0,
            "{held} spliced of {sent}, nothing left in the socket"
        );
    }

    #[test]
    fn resize_grows_the_capacity_and_refuses_absurd_sizes() {
        let pipe = Pipe::new(false).unwrap();
        let got = pipe.resize(256 << 10).unwrap();
        assert!(got >= 256 << 10, "{got}");
        assert_eq!(pipe.capacity().unwrap(), got);
        assert!(pipe.resize(usize::MAX).is_err());
        assert_eq!(pipe.capacity().unwrap(), got);
    }

    #[test]
    fn a_bad_descriptor_is_an_error_not_a_panic() {
        let pipe = Pipe::new(false).unwrap();
        // Splicing into a pipe's read end is EBADF.
        let err = splice(pipe.writer(), pipe.reader(), 1, Mode::NonBlocking).unwrap_err();
        assert!(err.raw_os_error().is_some(), "{err}");
    }
}
