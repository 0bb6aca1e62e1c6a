//! The user's response shaping, validated once at start-up: `Cache-Control` (global and
//! by extension), custom headers, the `Server-Timing` switch, hidden dotfiles, the range
//! bound and precompressed variants.

use http::header::{self, HeaderName, HeaderValue};

use crate::config::HttpOptions;

/// Headers a user may not set with `--header`: they frame the message or describe one
/// particular body, so a fixed value would corrupt responses.
const RESERVED: [HeaderName; 7] = [
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::CONNECTION,
    header::CONTENT_RANGE,
    header::CONTENT_ENCODING,
    header::CONTENT_TYPE,
    header::ETAG,
];

/// [`HttpOptions`] as header values, checked.
#[derive(Debug, Clone)]
pub(crate) struct Shaping {
    pub precompressed: bool,
    pub server_timing: bool,
    pub hide_dotfiles: bool,
    pub max_ranges: usize,
    cache_control: Option<HeaderValue>,
    /// (extension in lowercase, value), looked up before `cache_control`.
    cache_control_by_ext: Vec<(String, HeaderValue)>,
    /// Added to every response, replacing httpd's own header of the same name.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl Default for Shaping {
    fn default() -> Self {
        Shaping::new(&HttpOptions::default()).expect("the defaults are valid")
    }
}

impl Shaping {
    /// Checks `opts`; the error names the flag and the bad value.
    pub(crate) fn new(opts: &HttpOptions) -> Result<Shaping, String> {
        let value = |flag: &str, v: &str| {
            HeaderValue::from_str(v.trim())
                .map_err(|_| format!("{flag} {v:?}: not a valid header value"))
        };
        let cache_control = match &opts.cache_control {
            Some(v) => Some(value("--cache-control", v)?),
            None => None,
        };
        let mut by_ext = Vec::new();
        for (ext, v) in &opts.cache_control_by_ext {
            let ext = ext.trim().trim_start_matches('.').to_ascii_lowercase();
            if ext.is_empty() || ext.contains('/') {
                return Err(format!(
                    "--cache-control-for {ext:?}: give EXT=VALUE, e.g. html=no-cache"
                ));
            }
            by_ext.push((ext, value("--cache-control-for", v)?));
        }
        let mut headers = Vec::new();
        for (name, v) in &opts.headers {
            let name = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| format!("--header {name:?}: not a valid header name"))?;
            if RESERVED.contains(&name) {
                return Err(format!(
                    "--header {name}: httpd sets this header per response; it cannot be fixed"
                ));
            }
            headers.push((name, value("--header", v)?));
        }
        Ok(Shaping {
            precompressed: opts.precompressed,
            server_timing: opts.server_timing,
            hide_dotfiles: opts.hide_dotfiles,
            max_ranges: opts.max_ranges.max(1),
            cache_control,
            cache_control_by_ext: by_ext,
            headers,
        })
    }

    /// The `Cache-Control` of a successful response for the file `name`.
    pub(crate) fn cache_control(&self, name: &str) -> Option<HeaderValue> {
        // The stored extensions are lowercase: compared without a lowercased copy.
        if let Some((_, ext)) = name.rsplit_once('.')
            && let Some((_, v)) = self
                .cache_control_by_ext
                .iter()
                .find(|(e, _)| e.eq_ignore_ascii_case(ext))
        {
            return Some(v.clone());
        }
        self.cache_control.clone()
    }
}

/// `NAME:VALUE` (the `--header` syntax) → (name, value).
pub fn parse_header_arg(text: &str) -> Result<(String, String), String> {
    match text.split_once(':') {
        Some((n, v)) if !n.trim().is_empty() => Ok((n.trim().to_string(), v.trim().to_string())),
        _ => Err(format!(
            "{text:?}: give NAME:VALUE, e.g. \"X-Content-Type-Options: nosniff\""
        )),
    }
}

/// `EXT=VALUE` (the `--cache-control-for` syntax) → (extension, value).
pub fn parse_ext_arg(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((e, v)) if !e.trim().is_empty() && !v.trim().is_empty() => {
            Ok((e.trim().to_string(), v.trim().to_string()))
        }
        _ => Err(format!("{text:?}: give EXT=VALUE, e.g. html=no-cache")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_refused_naming_the_flag() {
        let mut o = HttpOptions {
            headers: vec![("Content-Length".into(), "5".into())],
            ..Default::default()
        };
        assert!(Shaping::new(&o).unwrap_err().contains("content-length"));
        o.headers = vec![("X bad".into(), "v".into())];
        assert!(Shaping::new(&o).unwrap_err().contains("--header"));
        o.headers = vec![("X-Frame-Options".into(), "DENY".into())];
        o.cache_control = Some("bad\nvalue".into());
        assert!(Shaping::new(&o).unwrap_err().contains("--cache-control"));
        assert!(parse_header_arg("novalue").is_err());
        assert_eq!(
            parse_header_arg("X-A: b: c").unwrap(),
            ("X-A".into(), "b: c".into())
        );
        assert!(parse_ext_arg("html").is_err());
    }

    #[test]
    fn extension_overrides_win() {
        let o = HttpOptions {
            cache_control: Some("max-age=60".into()),
            cache_control_by_ext: vec![(".HTML".into(), "no-cache".into())],
            ..Default::default()
        };
        let s = Shaping::new(&o).unwrap();
        assert_eq!(s.cache_control("a/index.Html").unwrap(), "no-cache");
        assert_eq!(s.cache_control("x.bin").unwrap(), "max-age=60");
        assert_eq!(Shaping::default().cache_control("x.bin"), None);
    }
}
