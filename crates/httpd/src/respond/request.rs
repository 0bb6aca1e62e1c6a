//! What a request must carry before it is answered, and what its body means for the
//! connection.
//!
//! - Host (RFC 9112 §3.2): an HTTP/1.1 request without exactly one `Host` line, or any
//!   request with two, is answered 400 (as nginx does): the server cannot know which
//!   authority it was meant for.
//! - A request body (a GET may carry one; every method other than GET and HEAD gets 405)
//!   is read and dropped when it is small and arrives promptly, so the connection stays
//!   usable (and hyper answers `Expect: 100-continue` with `100 Continue` as it reads);
//!   otherwise it is left unread and the response says `Connection: close`.

use std::time::Duration;

use http::header;
use http::{Request, Version};
use http_body::Body;

/// A body up to this size is read and dropped; a larger one closes the connection.
const DRAIN_MAX: u64 = 64 << 10;

/// How long a small body may take to arrive before the connection is closed instead.
const DRAIN_WITHIN: Duration = Duration::from_secs(5);

/// Why `req` is a bad request, if it is one.
pub(super) fn check(req: &Request<()>) -> Result<(), &'static str> {
    let hosts = req.headers().get_all(header::HOST).iter().count();
    match (hosts, req.version()) {
        (0, Version::HTTP_10 | Version::HTTP_09) | (1, _) => Ok(()),
        (0, _) => Err("HTTP/1.1 request without Host"),
        _ => Err("several Host header lines"),
    }
}

/// Reads and drops `body` when it is at most [`DRAIN_MAX`] bytes and arrives within
/// [`DRAIN_WITHIN`]; false when it was left (partly) unread, so the connection cannot
/// carry another request.
pub(super) async fn drain_body<B: Body + Unpin>(req: &Request<()>, mut body: B) -> bool {
    if body.is_end_stream() {
        return true;
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > DRAIN_MAX) {
        return false;
    }
    let read_all = async {
        let mut seen = 0u64;
        loop {
            let frame = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx));
            match frame.await {
                None => return true,
                Some(Err(_)) => return false,
                Some(Ok(f)) => {
                    if let Some(d) = f.data_ref() {
                        seen += bytes::Buf::remaining(d) as u64;
                        if seen > DRAIN_MAX {
                            return false;
                        }
                    }
                }
            }
        }
    };
    tokio::time::timeout(DRAIN_WITHIN, read_all)
        .await
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(version: Version, hosts: &[&str]) -> Request<()> {
        let mut b = Request::builder().uri("/").version(version);
        for h in hosts {
            b = b.header(header::HOST, *h);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn host_is_required_once_in_http_1_1() {
        assert!(check(&req(Version::HTTP_11, &["a"])).is_ok());
        assert!(check(&req(Version::HTTP_11, &[])).is_err());
        assert!(check(&req(Version::HTTP_11, &["a", "a"])).is_err());
        assert!(check(&req(Version::HTTP_10, &[])).is_ok());
        assert!(check(&req(Version::HTTP_10, &["a", "b"])).is_err());
    }
}
