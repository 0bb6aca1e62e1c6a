//! A temporary tree for jail tests: `<tmp>/export` (the dataset) next to
//! `<tmp>/outside/secret.txt`, which nothing served may ever reach or change.

use std::path::PathBuf;

use crate::common;

/// A temporary tree: `<tmp>/export` (the dataset) next to `<tmp>/outside/secret.txt`.
pub struct Tree {
    pub dir: tempfile::TempDir,
}

impl Tree {
    pub fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        common::write_dataset(&dir.path().join("export"));
        std::fs::create_dir(dir.path().join("outside")).unwrap();
        std::fs::write(dir.path().join("outside/secret.txt"), b"TOP SECRET\n").unwrap();
        Tree { dir }
    }
    pub fn export(&self) -> PathBuf {
        self.dir.path().join("export")
    }
    pub fn outside(&self) -> PathBuf {
        self.dir.path().join("outside")
    }
    pub fn config(&self) -> rustnfs::Config {
        rustnfs::Config::new(self.export())
    }
    /// Everything outside the export, to prove nothing changed there.
    pub fn outside_listing(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .chain(std::fs::read_dir(self.outside()).unwrap())
            .map(|e| e.unwrap().path().display().to_string())
            .collect();
        v.sort();
        v
    }
}
