//! Content-Type by file extension (the common web types; everything else is binary).

/// The Content-Type for a file name.
pub fn content_type(name: &str) -> &'static str {
    let ext = match name.rsplit_once('.') {
        Some((_, e)) => e,
        None => return "application/octet-stream",
    };
    // Lower-cased on the stack (every known extension is short): no String per request.
    let mut buf = [0u8; 8];
    let Some(lower) = buf.get_mut(..ext.len()) else {
        return "application/octet-stream";
    };
    lower.copy_from_slice(ext.as_bytes());
    lower.make_ascii_lowercase();
    match std::str::from_utf8(lower).unwrap_or("") {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "json" => "application/json",
        "txt" | "text" | "log" | "md" => "text/plain; charset=utf-8",
        "csv" => "text/csv; charset=utf-8",
        "xml" => "application/xml",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ico" => "image/x-icon",
        "avif" => "image/avif",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "otf" => "font/otf",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "tar" => "application/x-tar",
        "wasm" => "application/wasm",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        "mp3" => "audio/mpeg",
        "ogg" => "audio/ogg",
        "wav" => "audio/wav",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn by_extension() {
        assert_eq!(
            super::content_type("index.HTML"),
            "text/html; charset=utf-8"
        );
        assert_eq!(super::content_type("a.tar.gz"), "application/gzip");
        assert_eq!(
            super::content_type("testfile.bin"),
            "application/octet-stream"
        );
        assert_eq!(super::content_type("Makefile"), "application/octet-stream");
    }
}
