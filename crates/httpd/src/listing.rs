//! The directory listing (`--list`): HTML, or JSON with `?format=json`; names sorted
//! (by bytes), directories first, in both.

use std::fmt::Write as _;

use crate::path::encode_component;
use crate::storage::ListEntry;

fn sort(entries: &mut [ListEntry]) {
    entries.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));
}

/// The JSON listing: `[{"name", "type": "dir"|"file", "size", "mtime" (Unix seconds),
/// "modified" (HTTP date)}, …]`, in the HTML listing's order.
pub fn render_json(mut entries: Vec<ListEntry>) -> String {
    sort(&mut entries);
    let items: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| {
            let secs = e
                .mtime
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            serde_json::json!({
                "name": e.name,
                "type": if e.is_dir { "dir" } else { "file" },
                "size": if e.is_dir { 0 } else { e.size },
                "mtime": secs,
                "modified": httpdate::fmt_http_date(e.mtime),
            })
        })
        .collect();
    let mut text = serde_json::Value::Array(items).to_string();
    text.push('\n');
    text
}

/// Renders a listing of `url_path` (which ends in `/`).
pub fn render(url_path: &str, mut entries: Vec<ListEntry>) -> String {
    sort(&mut entries);
    let title = escape(url_path);
    let mut out = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Index of {title}</title></head>\n<body><h1>Index of {title}</h1>\n<table>\n<tr><th>Name</th><th>Last modified</th><th>Size</th></tr>\n"
    );
    if url_path != "/" {
        out.push_str("<tr><td><a href=\"../\">../</a></td><td></td><td>-</td></tr>\n");
    }
    for e in entries {
        let slash = if e.is_dir { "/" } else { "" };
        let size = if e.is_dir {
            "-".to_string()
        } else {
            e.size.to_string()
        };
        let _ = writeln!(
            out,
            "<tr><td><a href=\"{}{slash}\">{}{slash}</a></td><td>{}</td><td>{size}</td></tr>",
            encode_component(&e.name),
            escape(&e.name),
            httpdate::fmt_http_date(e.mtime),
        );
    }
    out.push_str("</table>\n</body></html>\n");
    out
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn escapes_and_sorts() {
        let e = |name: &str, is_dir| ListEntry {
            name: name.into(),
            is_dir,
            size: 3,
            mtime: UNIX_EPOCH,
        };
        let html = render("/a/", vec![e("z.txt", false), e("<b>", true)]);
        assert!(html.contains("href=\"%3Cb%3E/\">&lt;b&gt;/</a>"));
        assert!(html.find("&lt;b&gt;").unwrap() < html.find("z.txt").unwrap());
        assert!(html.contains("../"));
        let json: serde_json::Value = serde_json::from_str(&render_json(vec![
            e("b", false),
            e("a", false),
            e("z", true),
        ]))
        .unwrap();
        let names: Vec<&str> = json
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["z", "a", "b"]);
        assert_eq!(json[0]["type"], "dir");
    }
}
