//! Request path → safe, decoded components relative to the served root.
//!
//! Refused with 400: a path not starting with `/`, bad or non-UTF-8 percent escapes,
//! an encoded `/` (`%2f`) or `\` (`%5c`), a raw backslash, NUL bytes, control
//! characters, `.` or `..` components in any spelling (`%2e%2e`). Empty components
//! (`//`) are skipped, so `//etc/passwd` is `etc/passwd` under the root.

/// Why a path was refused (the response is always 400).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPath(pub &'static str);

/// Longest single component (as `NAME_MAX`).
const NAME_MAX: usize = 255;

/// Decodes and checks `raw` (the URI path, without query).
pub fn components(raw: &str) -> Result<Vec<String>, BadPath> {
    if !raw.starts_with('/') {
        return Err(BadPath("path must start with /"));
    }
    let mut out = Vec::new();
    for seg in raw.split('/') {
        if seg.is_empty() {
            continue;
        }
        let decoded = decode(seg)?;
        if decoded == "." || decoded == ".." {
            return Err(BadPath("dot segments are not allowed"));
        }
        if decoded.len() > NAME_MAX {
            return Err(BadPath("path component too long"));
        }
        out.push(decoded);
    }
    Ok(out)
}

fn decode(seg: &str) -> Result<String, BadPath> {
    let b = seg.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = if b[i] == b'%' {
            let h = b
                .get(i + 1..i + 3)
                .ok_or(BadPath("truncated percent escape"))?;
            let v = (hex(h[0]).ok_or(BadPath("bad percent escape"))? << 4)
                | hex(h[1]).ok_or(BadPath("bad percent escape"))?;
            i += 3;
            if v == b'/' {
                return Err(BadPath("encoded slash"));
            }
            v
        } else {
            i += 1;
            b[i - 1]
        };
        if c == b'\\' {
            return Err(BadPath("backslash"));
        }
        if c == 0 || c < 0x20 || c == 0x7f {
            return Err(BadPath("control character or NUL"));
        }
        out.push(c);
    }
    String::from_utf8(out).map_err(|_| BadPath("path is not UTF-8"))
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Percent-encodes a name for use in an `href` (listing links).
pub fn encode_component(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for &c in name.as_bytes() {
        if c.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&c) {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_encoded() {
        assert_eq!(components("/").unwrap(), Vec::<String>::new());
        assert_eq!(components("/a/b%20c/").unwrap(), ["a", "b c"]);
        assert_eq!(components("//etc/passwd").unwrap(), ["etc", "passwd"]);
        assert_eq!(components("/%C3%A9t%C3%A9").unwrap(), ["été"]);
    }

    #[test]
    fn escapes_refused() {
        for p in [
            "/../etc/passwd",
            "/a/../../x",
            "/%2e%2e/x",
            "/%2E%2E/x",
            "/.%2e/x",
            "/./x",
            "/a%2f..%2fx",
            "/a%2F..",
            "/a\\..\\x",
            "/a%5c..",
            "/a%00b",
            "/a%0ab",
            "/%ff",
            "/%zz",
            "/%2",
            "a/b",
        ] {
            assert!(components(p).is_err(), "{p} was accepted");
        }
    }

    #[test]
    fn encodes_for_links() {
        assert_eq!(encode_component("a b/é?"), "a%20b%2F%C3%A9%3F");
    }
}
