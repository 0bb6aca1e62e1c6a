//! READ into kernel pipes: the reply's data moves from the NFS socket with `splice(2)` and
//! never enters user space.
//!
//! The RPC and READ headers of a reply (≈ 130 bytes) are read into a small buffer, field by
//! field, never past the start of the data; the data (up to `rtmax`) is then spliced from
//! the socket into pipes, and the caller hands the pipes' read ends on — httpd splices
//! them into the HTTP client's socket, so a downloaded byte is never copied by httpd.
//! On loopback the pages that rustnfs `sendfile`d from its page cache are the pages that
//! reach the HTTP client's socket.
//!
//! Records may come in several fragments; the reader follows fragment boundaries through
//! headers and data alike. A pipe holds a bounded number of buffers (one per socket
//! buffer fragment, often less than a page each on a real network), so when a pipe is
//! full while the socket still has data, the next part goes into a new pipe. Any reply
//! that is not a successful READ (an NFS error status, a denied or failed RPC) is read
//! whole and decoded by the same path as [`crate::fastread`], so errors are identical.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use ::splice::{Mode, Pipe};

use nfs3_client::RpcError;
use nfs3_client::nfs3_types::nfs3::READ3args;
use nfs3_client::nfs3_types::rpc::opaque_auth;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use crate::Attr;
use crate::fastread::{self, MAX_RECORD, RawConn, ReadOutcome};

/// The capacity asked of each pipe: one 1 MiB READ fits when its buffers are full pages
/// (`/proc/sys/fs/pipe-max-size` is 1 MiB by default, so unprivileged processes get it).
const PIPE_BYTES: usize = 1 << 20;

/// Most pipes one READ may fill before it is taken for a broken connection.
const MAX_PARTS: usize = 256;

/// One pipe's read end and the bytes waiting in it.
#[derive(Debug)]
pub struct PipePart {
    pub read: OwnedFd,
    pub len: usize,
}

/// The data of one or more READ replies, waiting in pipes in file order.
#[derive(Debug, Default)]
pub struct PipedData {
    pub parts: Vec<PipePart>,
}

impl PipedData {
    /// Bytes held in all pipes.
    pub fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len).sum()
    }

    /// No bytes held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends another READ's data (its parts come after these in the file).
    pub fn append(&mut self, more: PipedData) {
        self.parts.extend(more.parts);
    }
}

/// What a piped READ answered.
pub(crate) enum PipedOutcome {
    Data {
        data: PipedData,
        eof: bool,
        attr: Option<Attr>,
    },
    /// Not a successful READ: the whole reply, decoded as the copying path does.
    Other(ReadOutcome),
}

/// A new pipe (both ends non-blocking) of `bytes` capacity where the limits allow.
fn new_pipe(bytes: usize) -> io::Result<(OwnedFd, OwnedFd)> {
    let pipe = Pipe::new(true)?;
    // A smaller pipe only means more parts (the per-user pipe quota may refuse the size).
    let _ = pipe.resize(bytes);
    Ok(pipe.into_ends())
}

/// Bytes waiting in a socket's receive queue.
fn bytes_waiting(sock: RawFd) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int.
    if unsafe { libc::ioctl(sock, libc::FIONREAD, &mut n) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n.max(0) as usize)
}

/// One `splice(2)` call, non-blocking on both ends.
fn splice_once(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    ::splice::splice(from, to, len, Mode::NonBlocking)
}

/// Reads one RPC record from a socket across its fragments, without reading past what
/// it is asked for.
struct RecordIn<'a> {
    stream: &'a mut TcpStream,
    /// Bytes left in the current fragment.
    frag_left: usize,
    /// The current fragment is the record's last.
    last: bool,
    /// Bytes of the record so far (bounded by [`MAX_RECORD`]).
    total: usize,
    /// Capacity asked of each new pipe ([`PIPE_BYTES`]; tests make it small).
    pipe_bytes: usize,
}

impl<'a> RecordIn<'a> {
    async fn start(stream: &'a mut TcpStream) -> io::Result<RecordIn<'a>> {
        let mut r = RecordIn {
            stream,
            frag_left: 0,
            last: false,
            total: 0,
            pipe_bytes: PIPE_BYTES,
        };
        r.next_fragment().await?;
        Ok(r)
    }

    async fn next_fragment(&mut self) -> io::Result<()> {
        let mut mark = [0u8; 4];
        self.read_exact_raw(&mut mark).await?;
        let mark = u32::from_be_bytes(mark);
        self.last = mark & 0x8000_0000 != 0;
        self.frag_left = (mark & 0x7fff_ffff) as usize;
        self.total += self.frag_left;
        if self.total > MAX_RECORD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "RPC record larger than the READ limit",
            ));
        }
        Ok(())
    }

    /// Fills `buf` from the socket. Every wait for readiness comes after a read that
    /// found the socket empty: a splice into a full pipe may have cleared tokio's
    /// readiness while data was waiting, so readiness alone is not trusted.
    async fn read_exact_raw(&mut self, buf: &mut [u8]) -> io::Result<()> {
        let sock = self.stream.as_raw_fd();
        let mut done = 0;
        while done < buf.len() {
            let rest = &mut buf[done..];
            let read = |rest: &mut [u8]| {
                // SAFETY: read(2) into a buffer we own, at most its length.
                let n = unsafe { libc::read(sock, rest.as_mut_ptr().cast(), rest.len()) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            };
            let res = match read(rest) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.stream.readable().await?;
                    self.stream.try_io(Interest::READABLE, || read(rest))
                }
                other => other,
            };
            match res {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(k) => done += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Makes the current fragment non-empty, or fails at the end of the record.
    async fn ensure(&mut self) -> io::Result<()> {
        while self.frag_left == 0 {
            if self.last {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "READ reply shorter than its headers say",
                ));
            }
            self.next_fragment().await?;
        }
        Ok(())
    }

    /// Appends exactly `n` record bytes to `out`.
    async fn read_into(&mut self, out: &mut Vec<u8>, mut n: usize) -> io::Result<()> {
        while n > 0 {
            self.ensure().await?;
            let take = n.min(self.frag_left);
            let at = out.len();
            out.resize(at + take, 0);
            self.read_exact_raw(&mut out[at..]).await?;
            self.frag_left -= take;
            n -= take;
        }
        Ok(())
    }

    /// Appends the rest of the record to `out`.
    async fn read_rest(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        loop {
            let n = self.frag_left;
            self.read_into(out, n).await?;
            if self.last {
                return Ok(());
            }
            self.next_fragment().await?;
        }
    }

    /// The record is fully read.
    fn at_end(&self) -> bool {
        self.frag_left == 0 && self.last
    }

    /// Moves exactly `n` record bytes into pipes.
    async fn splice_into(&mut self, mut n: usize) -> io::Result<PipedData> {
        let mut data = PipedData::default();
        // The pipe being filled: its read end, bytes in it, its write end.
        let mut pipe: Option<(OwnedFd, usize, OwnedFd)> = None;
        while n > 0 {
            self.ensure().await?;
            let (_, held, write) = match &mut pipe {
                Some(p) => p,
                None => {
                    let (r, w) = new_pipe(self.pipe_bytes)?;
                    pipe.insert((r, 0, w))
                }
            };
            let to = write.as_fd();
            let want = n.min(self.frag_left);
            let res = match splice_once(self.stream.as_fd(), to, want) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if *held > 0 && bytes_waiting(self.stream.as_raw_fd())? > 0 {
                        // The pipe is full while data waits: the rest goes into a new one.
                        if data.parts.len() + 1 >= MAX_PARTS {
                            return Err(io::Error::other("READ data needs too many pipes"));
                        }
                        let (read, len, _) = pipe.take().expect("matched above");
                        data.parts.push(PipePart { read, len });
                        continue;
                    }
                    // The socket is empty: wait (after a splice that found it so).
                    self.stream.readable().await?;
                    self.stream.try_io(Interest::READABLE, || {
                        splice_once(self.stream.as_fd(), to, want)
                    })
                }
                other => other,
            };
            match res {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(k) => {
                    self.frag_left -= k;
                    n -= k;
                    *held += k;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if let Some((read, len, _)) = pipe
            && len > 0
        {
            data.parts.push(PipePart { read, len });
        }
        Ok(data)
    }
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

impl RawConn {
    /// One READ call whose data lands in pipes. `RpcError::Io` means the connection is
    /// unusable (it may be mid-record).
    pub(crate) async fn read_piped(
        &mut self,
        cred: &opaque_auth<'static>,
        args: &READ3args,
    ) -> Result<PipedOutcome, RpcError> {
        let (xid, call) = self.encode_read(cred, args)?;
        self.stream.write_all(&call).await?;
        let mut rec = RecordIn::start(&mut self.stream).await?;
        // xid, message type, reply status, verifier flavour and length.
        let mut head = Vec::with_capacity(160);
        rec.read_into(&mut head, 20).await?;
        let accepted = be32(&head, 4) == 1 && be32(&head, 8) == 0;
        if !accepted {
            rec.read_rest(&mut head).await?;
            return fastread::decode_read(head, xid).map(PipedOutcome::Other);
        }
        let verf_len = be32(&head, 16) as usize;
        if verf_len > 400 {
            return Err(RpcError::Io(io::Error::other("RPC verifier too long")));
        }
        // Verifier body, accept status, NFS status, post_op_attr's flag.
        rec.read_into(&mut head, verf_len.next_multiple_of(4) + 12)
            .await?;
        let at = 20 + verf_len.next_multiple_of(4);
        let (accept, status, has_attr) =
            (be32(&head, at), be32(&head, at + 4), be32(&head, at + 8));
        if accept != 0 || status != 0 || has_attr > 1 {
            rec.read_rest(&mut head).await?;
            return fastread::decode_read(head, xid).map(PipedOutcome::Other);
        }
        // fattr3 (84 bytes) when present, then count, eof and the data's length.
        let attr_len = if has_attr == 1 { 84 } else { 0 };
        rec.read_into(&mut head, attr_len + 12).await?;
        let n = be32(&head, head.len() - 4) as usize;
        if n > args.count as usize {
            return Err(RpcError::Io(io::Error::other(
                "READ reply carries more data than asked for",
            )));
        }
        // The data is still in the socket: any error from here on leaves the connection
        // mid-record, so it is an I/O error (the pool drops the connection).
        let decoded = fastread::decode_read_head(&head, xid)
            .map_err(|e| RpcError::Io(io::Error::other(e.to_string())))?;
        let (attr, eof) = match decoded {
            fastread::Head::Data {
                attr,
                eof,
                len,
                start,
            } if len == n && start == head.len() => (attr, eof),
            _ => {
                return Err(RpcError::Io(io::Error::other(
                    "READ reply headers disagree",
                )));
            }
        };
        let data = rec.splice_into(n).await?;
        let mut pad = Vec::new();
        rec.read_into(&mut pad, n.next_multiple_of(4) - n).await?;
        if !rec.at_end() {
            return Err(RpcError::Io(io::Error::other(
                "READ reply has bytes after its data",
            )));
        }
        Ok(PipedOutcome::Data { data, eof, attr })
    }
}

/// The rest of a reply that is not a successful READ, read whole.
async fn whole(
    mut rec: RecordIn<'_>,
    mut head: Vec<u8>,
) -> io::Result<(Vec<u8>, Option<PipedData>)> {
    rec.read_rest(&mut head).await?;
    Ok((head, None))
}

/// Reads an NFSv4 COMPOUND reply whose last operation is a successful READ (after
/// SEQUENCE when `seq`, and PUTFH) with the data left in pipes: returns the record up
/// to the data (it decodes as the reply's prefix, the data's length word last) and the
/// pipes. Any other reply (an error status anywhere, a tag, a denied call) is read
/// whole and returned without pipes, for the copying decoder. More data than `max`,
/// or bytes after it, is an I/O error (the connection is dropped).
pub(crate) async fn read_v4_piped(
    stream: &mut TcpStream,
    seq: bool,
    max: u32,
) -> io::Result<(Vec<u8>, Option<PipedData>)> {
    let mut rec = RecordIn::start(stream).await?;
    let mut head = Vec::with_capacity(160);
    rec.read_into(&mut head, 20).await?;
    if !(be32(&head, 4) == 1 && be32(&head, 8) == 0) {
        return whole(rec, head).await;
    }
    let verf_len = be32(&head, 16) as usize;
    if verf_len > 400 {
        return Err(io::Error::other("RPC verifier too long"));
    }
    // Verifier body, accept status, then COMPOUND status, tag length, result count.
    rec.read_into(&mut head, verf_len.next_multiple_of(4) + 16)
        .await?;
    let at = 20 + verf_len.next_multiple_of(4);
    if be32(&head, at) != 0 || be32(&head, at + 4) != 0 || be32(&head, at + 8) != 0 {
        return whole(rec, head).await;
    }
    // (operation, status) pairs: SEQUENCE (and its 36-byte result), PUTFH, READ.
    let ops: &[(u32, usize)] = if seq {
        &[(53, 36), (22, 0), (25, 0)]
    } else {
        &[(22, 0), (25, 0)]
    };
    for &(code, body) in ops {
        rec.read_into(&mut head, 8).await?;
        let n = head.len();
        if (be32(&head, n - 8), be32(&head, n - 4)) != (code, 0) {
            return whole(rec, head).await;
        }
        rec.read_into(&mut head, body).await?;
    }
    // eof, the data's length.
    rec.read_into(&mut head, 8).await?;
    let n = be32(&head, head.len() - 4) as usize;
    if n > max as usize {
        return Err(io::Error::other(
            "READ reply carries more data than asked for",
        ));
    }
    let data = rec.splice_into(n).await?;
    let mut pad = Vec::new();
    rec.read_into(&mut pad, n.next_multiple_of(4) - n).await?;
    if !rec.at_end() {
        return Err(io::Error::other("READ reply has bytes after its data"));
    }
    Ok((head, Some(data)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// Reads the bytes back out of the pipes.
    fn drain(data: PipedData) -> Vec<u8> {
        let mut out = Vec::new();
        for p in data.parts {
            let mut f = std::fs::File::from(p.read);
            let mut buf = vec![0u8; p.len];
            std::io::Read::read_exact(&mut f, &mut buf).unwrap();
            out.extend(buf);
        }
        out
    }

    async fn pair() -> (TcpStream, TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (b, _) = l.accept().await.unwrap();
        (a, b)
    }

    /// A record in fragments of `frag` bytes, data spliced across them and across pipes
    /// (the sender's 1-byte writes fill a pipe's buffers one byte each).
    #[tokio::test]
    async fn splices_across_fragments_and_full_pipes() {
        let (mut tx, mut rx) = pair().await;
        let payload: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut body = vec![0xAAu8; 8];
        body.extend(&payload);
        let frag = 70_000;
        let writer = tokio::spawn(async move {
            let chunks: Vec<&[u8]> = body.chunks(frag).collect();
            for (i, c) in chunks.iter().enumerate() {
                let last = if i + 1 == chunks.len() {
                    0x8000_0000
                } else {
                    0
                };
                tx.write_u32(last | c.len() as u32).await.unwrap();
                // Small writes make many small socket buffers on the receiving side.
                for piece in c.chunks(1000) {
                    tx.write_all(piece).await.unwrap();
                }
            }
            tx
        });
        let mut rec = RecordIn::start(&mut rx).await.unwrap();
        // Four pipe buffers per pipe: the data needs many pipes.
        rec.pipe_bytes = 16 << 10;
        let mut head = Vec::new();
        rec.read_into(&mut head, 8).await.unwrap();
        assert_eq!(head, [0xAA; 8]);
        let data = rec.splice_into(payload.len()).await.unwrap();
        assert!(rec.at_end());
        assert_eq!(data.len(), payload.len());
        assert!(data.parts.len() > 4, "{} pipes", data.parts.len());
        let _tx = writer.await.unwrap();
        assert_eq!(drain(data), payload);
    }

    /// A READ reply to `xid`: accepted, NFS status `status`, no attributes, then (for
    /// status 0) count, eof, the data's length as `claimed`, the data and its padding, then
    /// `extra` bytes inside the record.
    fn reply(xid: u32, status: u32, data: &[u8], claimed: u32, extra: usize) -> Vec<u8> {
        let mut r = Vec::new();
        for w in [xid, 1, 0, 0, 0, 0, status, 0] {
            r.extend(w.to_be_bytes());
        }
        if status == 0 {
            for w in [data.len() as u32, 1, claimed] {
                r.extend(w.to_be_bytes());
            }
            r.extend(data);
            r.resize(
                r.len() + (data.len().next_multiple_of(4) - data.len()) + extra,
                0,
            );
        }
        let mut out = (0x8000_0000u32 | r.len() as u32).to_be_bytes().to_vec();
        out.extend(r);
        out
    }

    /// Answers one READ call on `server` with `reply(xid)`.
    async fn answer(mut server: TcpStream, reply: impl FnOnce(u32) -> Vec<u8>) -> TcpStream {
        let call = fastread::read_record(&mut server).await.unwrap();
        let xid = u32::from_be_bytes(call[..4].try_into().unwrap());
        server.write_all(&reply(xid)).await.unwrap();
        server
    }

    async fn piped_read(
        reply: impl FnOnce(u32) -> Vec<u8> + Send + 'static,
    ) -> Result<PipedOutcome, RpcError> {
        let (client, server) = pair().await;
        let srv = tokio::spawn(answer(server, reply));
        let mut conn = RawConn::new(client);
        let args = READ3args {
            file: nfs3_client::nfs3_types::nfs3::nfs_fh3::default(),
            offset: 0,
            count: 1000,
        };
        let out = conn.read_piped(&opaque_auth::default(), &args).await;
        drop(srv.await.unwrap());
        out
    }

    #[tokio::test]
    async fn a_good_reply_lands_in_pipes_and_errors_decode_as_statuses() {
        let data: Vec<u8> = (0..999u32).map(|i| i as u8).collect();
        let d = data.clone();
        match piped_read(move |xid| reply(xid, 0, &d, 999, 0)).await {
            Ok(PipedOutcome::Data { data: got, eof, .. }) => {
                assert!(eof);
                assert_eq!(drain(got), data);
            }
            _ => panic!("expected data"),
        }
        // NFS3ERR_ACCES (13) comes back as that status, not as a transport error.
        match piped_read(|xid| reply(xid, 13, &[], 0, 0)).await {
            Ok(PipedOutcome::Other(ReadOutcome::Status(s))) => assert_eq!(s as u32, 13),
            _ => panic!("expected a status"),
        }
    }

    #[tokio::test]
    async fn hostile_replies_fail_the_connection_not_the_process() {
        // More data than the call asked for.
        let big = vec![7u8; 2000];
        assert!(matches!(
            piped_read(move |xid| reply(xid, 0, &big, 2000, 0)).await,
            Err(RpcError::Io(_))
        ));
        // A length that disagrees with the record (claims 999, sends 10 and ends).
        assert!(
            piped_read(|xid| reply(xid, 0, &[1; 10], 999, 0))
                .await
                .is_err()
        );
        // Bytes after the data inside the record.
        assert!(matches!(
            piped_read(|xid| reply(xid, 0, &[1; 8], 8, 4)).await,
            Err(RpcError::Io(_))
        ));
        // Another call's xid.
        assert!(
            piped_read(|xid| reply(xid ^ 1, 0, &[1; 8], 8, 0))
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_record_that_ends_early_is_an_error() {
        let (mut tx, mut rx) = pair().await;
        tx.write_u32(0x8000_0000 | 4).await.unwrap();
        tx.write_all(&[1, 2, 3, 4]).await.unwrap();
        let mut rec = RecordIn::start(&mut rx).await.unwrap();
        let mut head = Vec::new();
        let err = rec.read_into(&mut head, 8).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    }
}
