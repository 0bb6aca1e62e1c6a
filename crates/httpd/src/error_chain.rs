//! How an error reads in one line: its own text, then each cause's (`: ` between them),
//! I/O errors as short lowercase phrases. Every layer's `Display` says only what that
//! layer knows, so nothing is said twice; logs and the binaries' last words use this.

use std::fmt;

/// `error` and its causes as one line (see the module docs).
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut next = Some(self.0);
        let mut first = true;
        while let Some(e) = next {
            if !first {
                f.write_str(": ")?;
            }
            first = false;
            match e.downcast_ref::<std::io::Error>() {
                Some(io) => f.write_str(&io_reason(io))?,
                None => write!(f, "{e}")?,
            }
            next = e.source();
        }
        Ok(())
    }
}

/// An I/O error as a short lowercase phrase ("address already in use"), without the
/// `(os error N)` suffix that tells a user nothing more.
pub fn io_reason(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    let text = match e.kind() {
        K::AddrInUse => "address already in use",
        K::AddrNotAvailable => "address not available on this host",
        K::PermissionDenied => "permission denied",
        K::NotFound => "no such file or directory",
        K::NotADirectory => "not a directory",
        _ => {
            let s = e.to_string();
            return match s.find(" (os error ") {
                Some(i) => s[..i].to_string(),
                None => s,
            };
        }
    };
    text.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("--listen 127.0.0.1:80")]
    struct Outer(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("the outer layer")]
    struct Two(#[source] Outer);

    #[test]
    fn each_layer_once_io_errors_short() {
        let e = Two(Outer(std::io::Error::from_raw_os_error(libc::EADDRINUSE)));
        assert_eq!(
            Chain(&e).to_string(),
            "the outer layer: --listen 127.0.0.1:80: address already in use"
        );
        let refused = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(Chain(&refused).to_string(), "Connection refused");
    }
}
