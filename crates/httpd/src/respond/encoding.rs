//! Precompressed variants (`--precompressed`, like nginx's `gzip_static` and
//! static-web-server's `--compression-static`): `F.br`, `F.zst` or `F.gz` beside `F`,
//! chosen by the request's `Accept-Encoding`.
//!
//! The client's q-values decide first (q=0 refuses a coding); among equal ones the
//! server prefers br, then zstd, then gzip (smallest first). A variant is used only when
//! it is a regular file; each gets its own ETag (the file's, with the coding appended
//! inside the quotes: `conditional::variant_tag`), so a cache never takes one coding's bytes
//! for another's.

use http::HeaderMap;
use http::header;

use super::conditional::header_list;
use crate::storage::{Entry, Kind, Storage};

/// (content-coding, file suffix), in the server's order of preference.
const CODINGS: [(&str, &str); 3] = [("br", ".br"), ("zstd", ".zst"), ("gzip", ".gz")];

/// The q-value `accept` (an `Accept-Encoding` value) gives `coding`, in thousandths.
fn quality(accept: &str, coding: &str) -> u16 {
    let mut star = None;
    for item in accept.split(',') {
        let mut parts = item.split(';').map(str::trim);
        let name = parts.next().unwrap_or("");
        let q = parts
            .find_map(|p| {
                let (k, v) = p.split_once('=')?;
                k.trim()
                    .eq_ignore_ascii_case("q")
                    .then(|| parse_q(v.trim()))
            })
            .unwrap_or(Some(1000));
        let Some(q) = q else { continue };
        if name.eq_ignore_ascii_case(coding)
            || (coding == "gzip" && name.eq_ignore_ascii_case("x-gzip"))
        {
            return q;
        }
        if name == "*" {
            star = Some(q);
        }
    }
    star.unwrap_or(0)
}

/// An RFC 9110 §12.4.2 qvalue (`0`, `0.5`, `1.000`) in thousandths; `None` if invalid.
fn parse_q(v: &str) -> Option<u16> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_val = format!("{frac:0<3}").parse::<u16>().ok()?;
    match int {
        "0" => Some(frac_val),
        "1" if frac_val == 0 => Some(1000),
        _ => None,
    }
}

/// The codings `headers` accepts, best first.
fn accepted(headers: &HeaderMap) -> Vec<&'static str> {
    let Some(accept) = header_list(headers, header::ACCEPT_ENCODING) else {
        return Vec::new();
    };
    let mut ranked: Vec<(u16, usize, &'static str)> = CODINGS
        .iter()
        .enumerate()
        .map(|(i, (c, _))| (quality(&accept, c), i, *c))
        .filter(|(q, _, _)| *q > 0)
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    ranked.into_iter().map(|(_, _, c)| c).collect()
}

/// The best precompressed variant of `dir/name` the request accepts, with its coding.
pub(super) async fn variant(
    storage: &dyn Storage,
    headers: &HeaderMap,
    dir: &[String],
    name: &str,
) -> Option<(Entry, &'static str)> {
    for coding in accepted(headers) {
        let suffix = CODINGS.iter().find(|(c, _)| *c == coding)?.1;
        let mut path = dir.to_vec();
        path.push(format!("{name}{suffix}"));
        // A missing variant (or any error looking it up) serves the original.
        if let Ok(e) = storage.open(&path).await
            && e.meta.kind == Kind::File
        {
            return Some((e, coding));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ae(v: &str) -> Vec<&'static str> {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT_ENCODING, v.parse().unwrap());
        accepted(&h)
    }

    #[test]
    fn codings_by_quality_then_server_preference() {
        assert_eq!(ae("gzip, deflate, br, zstd"), ["br", "zstd", "gzip"]);
        assert_eq!(ae("gzip;q=1.0, br;q=0.5"), ["gzip", "br"]);
        assert_eq!(ae("br;q=0, *"), ["zstd", "gzip"]);
        assert_eq!(ae("identity"), Vec::<&str>::new());
        assert_eq!(ae("x-gzip"), ["gzip"]);
        assert_eq!(ae("gzip;q=2"), Vec::<&str>::new());
        assert_eq!(ae("GZIP;Q=0.001"), ["gzip"]);
        assert_eq!(accepted(&HeaderMap::new()), Vec::<&str>::new());
    }
}
