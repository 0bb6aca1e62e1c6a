//! Which file system a directory lives on, as a report must say it: its type and device
//! (from `/proc/self/mountinfo`), and for ext4 whether it keeps a journal.
//!
//! The journal matters to every metadata benchmark. ext4 without one (`s_journal` NULL)
//! makes each create skip the inodes freed in the last 60 s (300 s while their inode
//! table block is dirty: `recently_deleted` in the kernel's `fs/ext4/ialloc.c`), so a
//! create/remove mix gets slower the longer it runs, whichever server drives it. On this
//! project's machines `/tmp` is such a file system, and `recently_deleted` with the
//! block lookups under it took 15–37 % of an NFS server's samples in the metadata mix.

use std::path::{Path, PathBuf};

/// What [`of`] found for a path.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileSystem {
    /// The mount's type as the kernel names it (`ext4`, `tmpfs`, `overlay`, …).
    pub kind: String,
    /// The mount's source (`/dev/vda`, `tmpfs`, …).
    pub source: String,
    /// For ext4 and ext3: whether it has a journal (`/proc/fs/jbd2/<device>-*`); `None`
    /// for other file systems, or when the kernel does not say.
    pub journal: Option<bool>,
}

impl FileSystem {
    /// One phrase for a report: `ext4 (/dev/vda, no journal)`, `tmpfs (tmpfs)`.
    pub fn describe(&self) -> String {
        let journal = match self.journal {
            Some(true) => ", journal",
            Some(false) => ", no journal",
            None => "",
        };
        format!("{} ({}{journal})", self.kind, self.source)
    }

    /// Whether creates here skip recently freed inodes (ext4 without a journal): the
    /// metadata mix then measures the file system's recent deletions too.
    pub fn creates_skip_recent_deletions(&self) -> bool {
        self.kind.starts_with("ext") && self.journal == Some(false)
    }
}

/// The file system `path` is on, or `None` when `/proc/self/mountinfo` has no mount
/// above it (no procfs) or the path does not exist.
pub fn of(path: &Path) -> Option<FileSystem> {
    let path = std::fs::canonicalize(path).ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mount_of(&mountinfo, &path)?;
    let journal = if mount.kind.starts_with("ext") {
        journal_of(
            &mount.device,
            Path::new("/sys/dev/block"),
            Path::new("/proc/fs/jbd2"),
        )
    } else {
        None
    };
    Some(FileSystem {
        kind: mount.kind,
        source: mount.source,
        journal,
    })
}

/// One line of mountinfo, the fields we use.
#[derive(Debug, PartialEq, Eq)]
struct Mount {
    /// `major:minor`.
    device: String,
    point: PathBuf,
    kind: String,
    source: String,
}

/// The mount whose mount point is the longest one containing `path`; of equal ones the
/// last (a later mount hides an earlier one on the same point).
fn mount_of(mountinfo: &str, path: &Path) -> Option<Mount> {
    let mut best: Option<Mount> = None;
    for line in mountinfo.lines() {
        let Some(m) = parse_line(line) else { continue };
        if !path.starts_with(&m.point) {
            continue;
        }
        let deeper = best
            .as_ref()
            .is_none_or(|b| m.point.components().count() >= b.point.components().count());
        if deeper {
            best = Some(m);
        }
    }
    best
}

/// `36 35 98:0 /root /mnt rw,noatime master:1 - ext4 /dev/vda rw` (proc(5)): the optional
/// fields end at the ` - ` separator.
fn parse_line(line: &str) -> Option<Mount> {
    let (before, after) = line.split_once(" - ")?;
    let fields: Vec<&str> = before.split(' ').collect();
    let mut rest = after.split(' ');
    Some(Mount {
        device: fields.get(2)?.to_string(),
        point: PathBuf::from(unescape(fields.get(4)?)),
        kind: rest.next()?.to_string(),
        source: unescape(rest.next()?),
    })
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the block device `major:minor` has a jbd2 journal: jbd2 names its procfs
/// directory `<device name>-<journal inode>` (`vda-8`); with no jbd2 directory at all,
/// jbd2 is not loaded and nothing has a journal. `None` when the device is unknown or
/// the directory cannot be read.
fn journal_of(device: &str, sys_dev_block: &Path, proc_jbd2: &Path) -> Option<bool> {
    let link = std::fs::read_link(sys_dev_block.join(device)).ok()?;
    let name = link.file_name()?.to_str()?.to_string();
    let journals = match std::fs::read_dir(proc_jbd2) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(false),
        Err(_) => return None,
    };
    let prefix = format!("{name}-");
    Some(journals.filter_map(Result::ok).any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(&prefix))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
23 22 0:21 / /proc rw - proc proc rw
24 22 0:22 / /tmp rw shared:5 - tmpfs tmpfs rw
25 24 0:23 / /tmp/with\\040space rw - tmpfs other rw
26 22 254:16 / /data rw master:1 - ext4 /dev/vdb rw
27 22 0:24 / /data rw - overlay overlay rw
";

    #[test]
    fn the_deepest_and_latest_mount_holds_a_path() {
        let at = |p: &str| mount_of(MOUNTINFO, Path::new(p)).map(|m| (m.kind, m.source));
        let pair = |k: &str, s: &str| Some((k.to_string(), s.to_string()));
        assert_eq!(at("/etc/passwd"), pair("ext4", "/dev/vda"));
        assert_eq!(at("/tmp/x/y"), pair("tmpfs", "tmpfs"));
        assert_eq!(at("/tmp/with space/f"), pair("tmpfs", "other"));
        // Not a component prefix: /tmpfoo is on /.
        assert_eq!(at("/tmpfoo"), pair("ext4", "/dev/vda"));
        // Two mounts on /data: the later one hides the first.
        assert_eq!(at("/data/f"), pair("overlay", "overlay"));
        assert_eq!(
            mount_of(MOUNTINFO, Path::new("/tmp")).unwrap().device,
            "0:22"
        );
    }

    #[test]
    fn a_journal_is_found_by_its_device_name() {
        let tmp = tempfile::tempdir().unwrap();
        let (sys, jbd2) = (tmp.path().join("sys"), tmp.path().join("jbd2"));
        std::fs::create_dir_all(&sys).unwrap();
        std::fs::create_dir_all(jbd2.join("vdb-8")).unwrap();
        std::os::unix::fs::symlink("../../devices/virtual/block/vda", sys.join("254:0")).unwrap();
        std::os::unix::fs::symlink("../../devices/virtual/block/vdb", sys.join("254:16")).unwrap();
        assert_eq!(journal_of("254:0", &sys, &jbd2), Some(false));
        assert_eq!(journal_of("254:16", &sys, &jbd2), Some(true));
        assert_eq!(journal_of("254:32", &sys, &jbd2), None, "unknown device");
        let no_jbd2 = tmp.path().join("no-jbd2");
        assert_eq!(
            journal_of("254:16", &sys, &no_jbd2),
            Some(false),
            "jbd2 not loaded"
        );
        let fs = FileSystem {
            kind: "ext4".into(),
            source: "/dev/vda".into(),
            journal: Some(false),
        };
        assert!(fs.creates_skip_recent_deletions());
        assert_eq!(fs.describe(), "ext4 (/dev/vda, no journal)");
    }

    #[test]
    fn this_machines_temporary_directory_is_described() {
        let tmp = tempfile::tempdir().unwrap();
        let fs = of(tmp.path()).expect("a mount above the temporary directory");
        assert!(!fs.kind.is_empty() && !fs.source.is_empty(), "{fs:?}");
        if !fs.kind.starts_with("ext") {
            assert_eq!(fs.journal, None, "{fs:?}");
        }
        eprintln!("temporary directory: {}", fs.describe());
    }
}
