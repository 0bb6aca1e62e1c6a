//! The files every scenario serves: generated reproducibly from a seed, or the user's own;
//! and the one seeded generator ([`Rng`], [`pseudo_random_bytes`]) tests use for their
//! own files, so a failing checksum is reproducible.

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// Name of the large file, as in the original experiment.
pub const LARGE_FILE: &str = "testfile.bin";
/// Name of the small file the small-file workload requests.
pub const SMALL_FILE: &str = "small.bin";

/// What the dataset looks like; recorded in the report.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DatasetInfo {
    pub root: PathBuf,
    /// True when servelab generated it (seeded), false for `--dataset DIR`.
    pub generated: bool,
    pub seed: Option<u64>,
    /// Path (relative to the root) and size of the large file.
    pub large_file: String,
    pub large_bytes: u64,
    /// Path and size of the small file.
    pub small_file: String,
    pub small_bytes: u64,
    /// Number of files in the small-file set (`small/`), used by the NFS metadata run.
    pub small_set_files: usize,
    /// The file system the dataset is on (`None` when the kernel did not say, and in
    /// reports written before it was recorded): the metadata mix measures it too.
    #[serde(default)]
    pub file_system: Option<crate::fsinfo::FileSystem>,
}

/// Sizes of a generated dataset.
#[derive(Debug, Clone, Copy)]
pub struct DatasetSpec {
    pub large_bytes: u64,
    pub small_bytes: u64,
    pub small_set_files: usize,
    pub seed: u64,
}

impl Default for DatasetSpec {
    fn default() -> Self {
        DatasetSpec {
            large_bytes: 10 << 20,
            small_bytes: 4096,
            small_set_files: 200,
            seed: 0x05e7_e1ab,
        }
    }
}

/// Writes `index.html`, the large file, the small file and `small/NNNN.bin` into `root`
/// (which must be empty or absent). The same seed always gives the same bytes. With
/// `small_set_files == 0` there is no `small/` directory (the original experiment's
/// three files, as the end-to-end tests use them).
pub fn generate(root: &Path, spec: DatasetSpec) -> io::Result<DatasetInfo> {
    fs::create_dir_all(root)?;
    if spec.small_set_files > 0 {
        fs::create_dir_all(root.join("small"))?;
    }
    fs::write(
        root.join("index.html"),
        "<!doctype html>\n<title>servelab</title>\n<p>servelab test page.</p>\n",
    )?;
    let mut rng = Rng::new(spec.seed);
    write_random(&root.join(LARGE_FILE), spec.large_bytes, &mut rng)?;
    write_random(&root.join(SMALL_FILE), spec.small_bytes, &mut rng)?;
    for i in 0..spec.small_set_files {
        write_random(
            &root.join("small").join(format!("{i:04}.bin")),
            spec.small_bytes,
            &mut rng,
        )?;
    }
    make_world_readable(root)?;
    Ok(DatasetInfo {
        root: root.to_path_buf(),
        generated: true,
        seed: Some(spec.seed),
        large_file: LARGE_FILE.into(),
        large_bytes: spec.large_bytes,
        small_file: SMALL_FILE.into(),
        small_bytes: spec.small_bytes,
        small_set_files: spec.small_set_files,
        file_system: crate::fsinfo::of(root),
    })
}

/// Describes a user's directory: its largest regular file is the large file, its smallest
/// non-empty one the small file. Fails when the directory has no regular file.
pub fn describe_existing(root: &Path) -> io::Result<DatasetInfo> {
    let mut files: Vec<(u64, String)> = Vec::new();
    for entry in fs::read_dir(root)? {
        let entry = entry?;
        let meta = fs::symlink_metadata(entry.path())?;
        if meta.is_file()
            && meta.len() > 0
            && let Some(name) = entry.file_name().to_str()
        {
            files.push((meta.len(), name.to_string()));
        }
    }
    files.sort();
    let (Some(small), Some(large)) = (files.first().cloned(), files.last().cloned()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} has no non-empty regular file at its top level to serve",
                root.display()
            ),
        ));
    };
    let small_set_files = fs::read_dir(root.join("small"))
        .map(|d| d.filter_map(Result::ok).count())
        .unwrap_or(0);
    Ok(DatasetInfo {
        root: root.to_path_buf(),
        generated: false,
        seed: None,
        large_file: large.1,
        large_bytes: large.0,
        small_file: small.1,
        small_bytes: small.0,
        small_set_files,
        file_system: crate::fsinfo::of(root),
    })
}

/// Lets unprivileged servers (Apache's `www-data`) read the dataset: a temporary directory
/// is created mode 0700.
fn make_world_readable(root: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    for entry in walk(root)? {
        let meta = fs::metadata(&entry)?;
        let mode = if meta.is_dir() { 0o755 } else { 0o644 };
        fs::set_permissions(&entry, fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

fn walk(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = vec![root.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if fs::symlink_metadata(&out[i])?.is_dir() {
            for e in fs::read_dir(&out[i])? {
                out.push(e?.path());
            }
        }
        i += 1;
    }
    Ok(out)
}

fn write_random(path: &Path, len: u64, rng: &mut Rng) -> io::Result<()> {
    let mut f = io::BufWriter::with_capacity(1 << 20, fs::File::create(path)?);
    let mut left = len;
    while left > 0 {
        let word = rng.next().to_le_bytes();
        let n = left.min(8) as usize;
        f.write_all(&word[..n])?;
        left -= n as u64;
    }
    f.flush()
}

/// `len` bytes from [`Rng::new`]`(seed)`, little-endian words: the same bytes
/// [`generate`] writes for a file that starts a fresh generator.
pub fn pseudo_random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next().to_le_bytes());
    }
    out.truncate(len);
    out
}

/// xorshift64: tiny, fast and fully determined by its seed — all a test file (or a
/// test's choice of offsets and lengths) needs. Not for anything secret.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (0 is allowed: the state is forced odd).
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    /// The next 64 pseudo-random bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform enough in `lo..=hi` for picking test parameters.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_bytes() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let spec = DatasetSpec {
            large_bytes: 100_003,
            small_bytes: 100,
            small_set_files: 3,
            seed: 9,
        };
        let info = generate(a.path(), spec).unwrap();
        generate(b.path(), spec).unwrap();
        let read = |d: &Path| fs::read(d.join(LARGE_FILE)).unwrap();
        assert_eq!(read(a.path()), read(b.path()));
        assert_eq!(read(a.path()).len(), 100_003);
        assert_eq!(info.small_set_files, 3);
        assert!(a.path().join("small/0002.bin").exists());

        // A file written alone is the generator's stream from its seed.
        let one = tempfile::tempdir().unwrap();
        let spec1 = DatasetSpec {
            large_bytes: 1003,
            small_bytes: 0,
            small_set_files: 0,
            seed: 9,
        };
        generate(one.path(), spec1).unwrap();
        assert_eq!(read(one.path()), pseudo_random_bytes(1003, 9));
        assert!(!one.path().join("small").exists());

        let described = describe_existing(a.path()).unwrap();
        assert_eq!(described.large_file, LARGE_FILE);
        assert_eq!(described.small_set_files, 3);
    }

    #[test]
    fn empty_directory_is_a_clear_error() {
        let d = tempfile::tempdir().unwrap();
        let err = describe_existing(d.path()).unwrap_err();
        assert!(err.to_string().contains("no non-empty regular file"));
    }
}
