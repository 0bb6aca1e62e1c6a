//! The connection's socket as hyper sees it: `sendfile`/`splice` for marker frames, idle
//! timeout.
//!
//! Writes: runs of ordinary slices go out with `writev`; a marker slice (see
//! [`crate::body`]) takes the front job of the connection's [`SendQueue`] and sends its
//! bytes from the kernel — a file range with `sendfile(2)`, pipes filled by an NFS READ
//! with `splice(2)` — reporting the bytes as written so hyper's accounting stays exact. Idle: when a read or write has been pending for `idle` with no byte moved
//! in either direction, the next poll fails with `TimedOut` and hyper closes the
//! connection (a client that stops reading a large body, or goes silent).

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use splice::Mode;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use crate::body::{SendQueue, Source, is_marker};

pub(crate) struct ConnIo {
    stream: TcpStream,
    queue: SendQueue,
    idle: Duration,
    /// A pending read fails after this long without progress (at most `idle`): the fast
    /// path's header timeout between keep-alive requests (hyper keeps its own).
    read_limit: Duration,
    last_progress: Instant,
    /// Allocated on the first pending I/O, then only reset.
    sleep: Option<Pin<Box<Sleep>>>,
    /// TCP_CORK is set while a sendfile body is going out, so the headers and the file
    /// leave in full-sized segments (nginx's `tcp_nopush`); cleared when the queue drains.
    corked: bool,
}

impl ConnIo {
    pub(crate) fn new(stream: TcpStream, queue: SendQueue, idle: Duration) -> ConnIo {
        queue.progressed();
        ConnIo {
            stream,
            queue,
            idle,
            read_limit: idle,
            last_progress: Instant::now(),
            sleep: None,
            corked: false,
        }
    }

    /// Pending reads fail after `limit` without progress (`None`: after `idle`).
    pub(crate) fn set_read_limit(&mut self, limit: Option<Duration>) {
        self.read_limit = limit.map_or(self.idle, |l| l.min(self.idle));
    }

    fn set_cork(&mut self, on: bool) {
        let v: libc::c_int = on.into();
        // SAFETY: setsockopt(2) on our socket with a c_int option value.
        unsafe {
            libc::setsockopt(
                self.stream.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_CORK,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        self.corked = on;
    }

    /// One clock read per socket operation, for both the idle timeout and the queue.
    fn progress(&mut self) {
        let now = Instant::now();
        self.last_progress = now;
        self.queue.progressed_at(now.into_std());
    }

    /// Fails every operation once a stalled body asked for the connection to close.
    fn check_abort(&self) -> io::Result<()> {
        if self.queue.aborted() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "client stopped reading while the stalled budget was full",
            ));
        }
        Ok(())
    }

    /// Called when an operation is pending: fails once nothing has moved for `idle`.
    ///
    /// The timer is re-armed lazily: progress only moves the deadline later, so a timer
    /// still set for an earlier deadline fires early, finds the connection was not idle
    /// that long, and is then reset to the real deadline. Resetting it on every pending
    /// operation (every keep-alive request) took the time driver's lock each time.
    fn poll_idle(&mut self, cx: &mut Context<'_>, limit: Duration) -> Poll<io::Error> {
        self.queue.park(cx.waker());
        loop {
            let deadline = self.last_progress + limit;
            let sleep = self
                .sleep
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
            if sleep.deadline() > deadline {
                // Only a shorter `idle` could do this; honour the earlier deadline.
                sleep.as_mut().reset(deadline);
            }
            match sleep.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) if sleep.deadline() >= deadline => {
                    return Poll::Ready(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "connection idle for too long",
                    ));
                }
                Poll::Ready(()) => sleep.as_mut().reset(deadline),
            }
        }
    }

    /// Sends up to `len` bytes of the front job: `sendfile` from its file, or `splice`
    /// from its front pipe.
    fn poll_sendfile(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<io::Result<usize>> {
        loop {
            let (fd, offset, want) = {
                let q = self.queue.lock();
                let Some(job) = q.front() else {
                    return Poll::Ready(Err(io::Error::other(
                        "sendfile marker without a queued job (internal error)",
                    )));
                };
                let want = (job.remaining as usize).min(len);
                match &job.source {
                    Source::File { file, offset } => {
                        (file.as_raw_fd(), Some(*offset as libc::off_t), want)
                    }
                    Source::Pipes(parts) => {
                        let Some(part) = parts.front() else {
                            return Poll::Ready(Err(io::Error::other(
                                "splice job without bytes (internal error)",
                            )));
                        };
                        (part.read.as_raw_fd(), None, want.min(part.len))
                    }
                }
            };
            ready!(self.stream.poll_write_ready(cx))?;
            let sock = self.stream.as_raw_fd();
            let res = self.stream.try_io(Interest::WRITABLE, || {
                let n = match offset {
                    Some(mut offset) => {
                        // SAFETY: sendfile(2) between two descriptors we keep open for the call.
                        unsafe { libc::sendfile(sock, fd, &mut offset, want) }
                    }
                    None => {
                        // SAFETY: the pipe's read end belongs to the front job, which only
                        // this writer removes from the queue, so it stays open for the call.
                        let pipe = unsafe { BorrowedFd::borrow_raw(fd) };
                        return splice::splice(pipe, self.stream.as_fd(), want, Mode::NonBlocking);
                    }
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match res {
                Ok(0) => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank (or pipe emptied) while being sent",
                    )));
                }
                Ok(n) => {
                    let mut q = self.queue.lock();
                    let job = q.front_mut().expect("job checked above");
                    match &mut job.source {
                        Source::File { offset, .. } => *offset += n as u64,
                        Source::Pipes(parts) => {
                            let part = parts.front_mut().expect("part checked above");
                            part.len -= n;
                            if part.len == 0 {
                                parts.pop_front();
                            }
                        }
                    }
                    job.remaining -= n as u64;
                    if job.remaining == 0 {
                        if job.last {
                            job.timing.set_complete();
                        }
                        q.pop_front();
                        if q.is_empty() {
                            drop(q);
                            // Uncorking pushes out the last partial segment now.
                            self.set_cork(false);
                        }
                    }
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn write_slices(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if !self.corked && bufs.iter().any(|b| is_marker(b)) {
            self.set_cork(true);
        }
        let mut total = 0usize;
        let mut i = 0;
        while i < bufs.len() {
            let start = i;
            while i < bufs.len() && !is_marker(&bufs[i]) {
                i += 1;
            }
            if i > start {
                let run = &bufs[start..i];
                let want: usize = run.iter().map(|b| b.len()).sum();
                match Pin::new(&mut self.stream).poll_write_vectored(cx, run) {
                    Poll::Ready(Ok(n)) => {
                        total += n;
                        if n < want {
                            return Poll::Ready(Ok(total));
                        }
                    }
                    Poll::Ready(Err(e)) if total == 0 => return Poll::Ready(Err(e)),
                    Poll::Pending if total == 0 => return Poll::Pending,
                    _ => return Poll::Ready(Ok(total)),
                }
            }
            if i < bufs.len() {
                let len = bufs[i].len();
                match self.poll_sendfile(cx, len) {
                    Poll::Ready(Ok(n)) => {
                        total += n;
                        if n < len {
                            return Poll::Ready(Ok(total));
                        }
                    }
                    Poll::Ready(Err(e)) if total == 0 => return Poll::Ready(Err(e)),
                    Poll::Pending if total == 0 => return Poll::Pending,
                    _ => return Poll::Ready(Ok(total)),
                }
                i += 1;
            }
        }
        Poll::Ready(Ok(total))
    }
}

impl AsyncRead for ConnIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check_abort()?;
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(r) => {
                this.progress();
                Poll::Ready(r)
            }
            Poll::Pending => match this.poll_idle(cx, this.read_limit) {
                Poll::Ready(e) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for ConnIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check_abort()?;
        match this.write_slices(cx, bufs) {
            Poll::Ready(r) => {
                this.progress();
                Poll::Ready(r)
            }
            Poll::Pending => match this.poll_idle(cx, this.idle) {
                Poll::Ready(e) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check_abort()?;
        Pin::new(&mut this.stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // hyper shuts down after flushing the connection's last response: every job must
        // have met its marker by now. One left over means a marker was copied or lost on
        // the way (the invariant body.rs relies on broke), so the byte stream is wrong.
        let left = this.queue.lock().len();
        if left > 0 {
            tracing::error!(
                jobs = left,
                "sendfile queue not empty after the last response (internal error)"
            );
            return Poll::Ready(Err(io::Error::other(
                "sendfile queue not empty after the last response",
            )));
        }
        Pin::new(&mut this.stream).poll_shutdown(cx)
    }
}
