//! The tree the httpd fuzz targets serve: small and empty files, one above the servers'
//! 1 KiB inline limit (sent with sendfile), an index.html, a directory to list, and
//! symlinks inside the root and out of it (to a file that must never be sent).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Content of a file just outside the served root: it must never be in a reply.
pub const SECRET: &[u8] = b"SECRET-OUTSIDE-THE-ROOT";

/// Writes the tree under `dir`; returns the root to serve.
pub fn write(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("dir")).unwrap();
    std::fs::create_dir_all(root.join("list/sub")).unwrap();
    std::fs::write(dir.join("secret.txt"), SECRET).unwrap();
    let big: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let files: [(&str, &[u8]); 5] = [
        ("a.txt", b"hello, world\n"),
        ("empty", b""),
        ("big.bin", &big),
        ("dir/index.html", b"<p>index</p>\n"),
        ("list/x y.txt", b"x\n"),
    ];
    for (name, data) in files {
        std::fs::write(root.join(name), data).unwrap();
    }
    std::os::unix::fs::symlink("../secret.txt", root.join("out")).unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("in")).unwrap();
    // The open-file cache keeps the bytes of a file (and the fast path answers it) only
    // once its ctime is a second old.
    std::thread::sleep(Duration::from_millis(1100));
    root
}
