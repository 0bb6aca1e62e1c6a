//! The byte stream under `nfs3_client`: a closed connection is an error, and a reply
//! record larger than [`MAX_RECORD`] is refused before anything is allocated for it.
//!
//! `nfs3_client` 0.9 loops on `read` until its buffer is full and treats `Ok(0)` as
//! progress, so a server closing mid-reply made a call spin on the CPU until its
//! deadline; and it allocates a zeroed buffer of whatever length the 4-byte record
//! header says (up to 2 GiB) before reading. This wrapper sees every byte it reads, so it
//! knows where each record header is.

use nfs3_client::io::{AsyncRead, AsyncWrite};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Largest reply record accepted (as the zero-copy READ path: a 1 MiB READ with room).
pub(crate) const MAX_RECORD: u32 = crate::fastread::MAX_RECORD as u32;

/// A tokio stream as `nfs3_client` I/O, with the two checks above.
pub(crate) struct RpcIo<T> {
    inner: T,
    /// Bytes of the current record fragment still to come; 0 = at a record header.
    remaining: u32,
    head: [u8; 4],
    head_have: usize,
}

impl<T> RpcIo<T> {
    pub(crate) fn new(inner: T) -> RpcIo<T> {
        RpcIo {
            inner,
            remaining: 0,
            head: [0; 4],
            head_have: 0,
        }
    }
}

impl<T: tokio::io::AsyncRead + Unpin + Send> AsyncRead for RpcIo<T> {
    async fn async_read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let at_head = self.remaining == 0;
        let want = if at_head {
            4 - self.head_have
        } else {
            self.remaining as usize
        };
        let cap = want.min(buf.len());
        let n = self.inner.read(&mut buf[..cap]).await?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "NFS server closed the connection inside a reply",
            ));
        }
        if at_head {
            self.head[self.head_have..self.head_have + n].copy_from_slice(&buf[..n]);
            self.head_have += n;
            if self.head_have == 4 {
                self.head_have = 0;
                let len = u32::from_be_bytes(self.head) & 0x7fff_ffff;
                if len > MAX_RECORD {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("NFS reply record of {len} bytes exceeds {MAX_RECORD}"),
                    ));
                }
                self.remaining = len;
            }
        } else {
            self.remaining -= n as u32;
        }
        Ok(n)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin + Send> AsyncWrite for RpcIo<T> {
    async fn async_write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn eof_inside_a_reply_is_an_error() {
        let mut io = RpcIo::new(&[0x80, 0, 0, 8, 1, 2][..]);
        let mut head = [0u8; 4];
        io.async_read_exact(&mut head).await.unwrap();
        let mut body = [0u8; 8];
        let err = io.async_read_exact(&mut body).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof, "{err}");
    }

    #[tokio::test]
    async fn oversized_record_refused_at_its_header() {
        let mut io = RpcIo::new(&[0xff, 0xff, 0xff, 0xff, 0, 0][..]);
        let mut head = [0u8; 4];
        let err = io.async_read_exact(&mut head).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{err}");
        assert!(err.to_string().contains("2147483647 bytes"), "{err}");
    }

    #[tokio::test]
    async fn records_in_a_row_pass_through() {
        let wire = [0x80, 0, 0, 4, 9, 9, 9, 9, 0x80, 0, 0, 0];
        let mut io = RpcIo::new(&wire[..]);
        let mut got = [0u8; 12];
        io.async_read_exact(&mut got).await.unwrap();
        assert_eq!(got, wire);
    }
}
