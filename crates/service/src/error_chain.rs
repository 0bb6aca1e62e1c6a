//! How an error reads in one line: its own text, then each cause's (`: ` between them),
//! I/O errors as short lowercase phrases. Every layer's `Display` says only what that
//! layer knows, so nothing is said twice; the servers' logs and last words use this.

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

    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("--listen 127.0.0.1:80")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[derive(Debug)]
    struct Two(Outer);

    impl fmt::Display for Two {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the outer layer")
        }
    }

    impl std::error::Error for Two {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn each_layer_once_io_errors_short() {
        let in_use = std::io::Error::from(std::io::ErrorKind::AddrInUse);
        let e = Two(Outer(in_use));
        assert_eq!(
            Chain(&e).to_string(),
            "the outer layer: --listen 127.0.0.1:80: address already in use"
        );
        let refused = std::io::Error::from_raw_os_error(111);
        assert_eq!(Chain(&refused).to_string(), "Connection refused");
    }
}
