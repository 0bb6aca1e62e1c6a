//! The `file://` target: sequential reads of a file, sequential writes into a file per
//! worker, or a bonnie++ -n style metadata mix (create / stat / unlink of many small
//! files) in a subdirectory per worker — plain system calls, no external tools, so it
//! runs the same on the host and inside a FROM-scratch container through a bind mount.
//!
//! Every worker runs on its own OS thread and calls the file system directly (blocking,
//! as fio's psync engine does): a hop to a blocking pool would add more than a `stat`
//! costs. A system call cannot be cancelled, so `--timeout` counts an operation that
//! took longer as a timeout once it returns; it cannot interrupt one that never does.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::plan::{LoadPlan, NfsWorkload};
use crate::sample::{ErrorKind, Instants, OpError, OpOk};
use crate::worker::{Target, Worker};

/// A write workload's file wraps back to offset 0 at this size, so a long run does not
/// fill the file system (the same bound as the NFS write workload).
const WRITE_WRAP: u64 = 256 << 20;

pub(crate) struct FileTarget {
    path: PathBuf,
    workload: NfsWorkload,
    block: usize,
    verify: Option<u32>,
    files: u64,
    timeout: Duration,
    /// The CRC-32 of the first complete pass over the file (read workload).
    first_crc: Mutex<Option<u32>>,
}

impl FileTarget {
    /// Checks before any traffic that the path is what the workload needs.
    pub fn new(path: &Path, plan: &LoadPlan) -> Result<Self, crate::Error> {
        let workload = plan.options.nfs_workload;
        let meta = std::fs::metadata(path)
            .map_err(|e| crate::Error::Plan(format!("file://{}: {e}", path.display())))?;
        match workload {
            NfsWorkload::Read if !meta.is_file() => {
                return Err(crate::Error::Plan(format!(
                    "file://{} is not a regular file (the read workload reads one)",
                    path.display()
                )));
            }
            NfsWorkload::Write | NfsWorkload::Metadata if !meta.is_dir() => {
                return Err(crate::Error::Plan(format!(
                    "file://{} is not a directory (write/metadata create files in one)",
                    path.display()
                )));
            }
            _ => {}
        }
        Ok(FileTarget {
            path: path.to_path_buf(),
            workload,
            block: plan.options.block_size,
            verify: plan.options.verify_crc32,
            files: plan.options.nfs_files.max(1),
            timeout: plan.options.timeout,
            first_crc: Mutex::new(None),
        })
    }

    pub fn checksum(&self) -> Option<u32> {
        *self.first_crc.lock()
    }

    fn op_name(&self) -> &'static str {
        match self.workload {
            NfsWorkload::Read => "read",
            NfsWorkload::Write => "write",
            NfsWorkload::Metadata => "create",
        }
    }
}

fn io_error(op: &'static str, path: &Path, e: &std::io::Error) -> OpError {
    OpError::new(op, ErrorKind::Io, format!("{}: {e}", path.display()))
}

/// What each workload keeps between operations.
enum State {
    Read {
        file: File,
        len: u64,
        offset: u64,
        crc: crc32fast::Hasher,
        buf: Vec<u8>,
    },
    Write {
        path: PathBuf,
        file: File,
        offset: u64,
        data: Vec<u8>,
    },
    Metadata {
        dir: PathBuf,
        names: Vec<PathBuf>,
        step: u64,
    },
}

pub(crate) struct FileWorker {
    target: Arc<FileTarget>,
    state: State,
}

impl Target for Arc<FileTarget> {
    type Worker = FileWorker;

    fn default_op(&self) -> &'static str {
        self.op_name()
    }

    async fn worker(&self, id: usize, _inst: &mut Instants) -> Result<FileWorker, OpError> {
        let op = self.op_name();
        let tag = format!("servelab-load-{}-w{id}", std::process::id());
        let state = match self.workload {
            NfsWorkload::Read => {
                let file = File::open(&self.path).map_err(|e| io_error(op, &self.path, &e))?;
                let len = file
                    .metadata()
                    .map_err(|e| io_error(op, &self.path, &e))?
                    .len();
                State::Read {
                    file,
                    len,
                    offset: 0,
                    crc: crc32fast::Hasher::new(),
                    buf: vec![0; self.block],
                }
            }
            NfsWorkload::Write => {
                let path = self.path.join(format!("{tag}.bin"));
                let file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map_err(|e| io_error(op, &path, &e))?;
                // Not all-zero, so a compressing or deduplicating file system could not
                // flatter the figure.
                let data = (0..self.block).map(|i| (i * 31 % 251) as u8).collect();
                State::Write {
                    path,
                    file,
                    offset: 0,
                    data,
                }
            }
            NfsWorkload::Metadata => {
                let dir = self.path.join(tag);
                std::fs::create_dir(&dir).map_err(|e| io_error(op, &dir, &e))?;
                let names = (0..self.files).map(|i| dir.join(format!("f{i}"))).collect();
                State::Metadata {
                    dir,
                    names,
                    step: 0,
                }
            }
        };
        Ok(FileWorker {
            target: self.clone(),
            state,
        })
    }
}

impl Worker for FileWorker {
    async fn op(&mut self, inst: &mut Instants) -> Result<OpOk, OpError> {
        let started = Instant::now();
        let files = self.target.files;
        let mut out = match &mut self.state {
            State::Read {
                file,
                len,
                offset,
                crc,
                buf,
            } => {
                let n = file
                    .read_at(buf, *offset)
                    .map_err(|e| io_error("read", &self.target.path, &e))?;
                crc.update(&buf[..n]);
                *offset += n as u64;
                let mut failure = None;
                if n == 0 || *offset >= *len {
                    let sum = std::mem::replace(crc, crc32fast::Hasher::new()).finalize();
                    *offset = 0;
                    self.target.first_crc.lock().get_or_insert(sum);
                    if self.target.verify.is_some_and(|want| want != sum) {
                        failure = Some(ErrorKind::Checksum);
                    }
                }
                OpOk {
                    op: "read",
                    body_bytes: n as u64,
                    wire_bytes: n as u64,
                    failure,
                    ..OpOk::default()
                }
            }
            State::Write {
                path,
                file,
                offset,
                data,
            } => {
                let n = file
                    .write_at(data, *offset)
                    .map_err(|e| io_error("write", path, &e))?;
                *offset += n as u64;
                if *offset >= WRITE_WRAP {
                    *offset = 0;
                }
                OpOk {
                    op: "write",
                    body_bytes: n as u64,
                    wire_bytes: n as u64,
                    failure: (n != data.len()).then_some(ErrorKind::Length),
                    ..OpOk::default()
                }
            }
            State::Metadata { names, step, .. } => {
                // Create every file, stat every file, remove every file, again.
                let s = *step;
                *step += 1;
                let path = &names[(s % files) as usize];
                let op = match (s / files) % 3 {
                    0 => {
                        OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .open(path)
                            .map_err(|e| io_error("create", path, &e))?;
                        "create"
                    }
                    1 => {
                        std::fs::metadata(path).map_err(|e| io_error("stat", path, &e))?;
                        "stat"
                    }
                    _ => {
                        std::fs::remove_file(path).map_err(|e| io_error("unlink", path, &e))?;
                        "unlink"
                    }
                };
                OpOk {
                    op,
                    ..OpOk::default()
                }
            }
        };
        inst.first_byte = Some(Instant::now());
        if started.elapsed() > self.target.timeout {
            // It could not be interrupted, but it still took too long.
            let mut e = OpError::new(
                out.op,
                ErrorKind::Timeout,
                format!("took longer than {:?}", self.target.timeout),
            );
            e.wire_bytes = std::mem::take(&mut out.wire_bytes);
            return Err(e);
        }
        Ok(out)
    }
}

impl Drop for FileWorker {
    /// Leaves the directory as it was: whatever this worker created goes, whether the
    /// run ended, the worker failed or the run was abandoned mid-operation.
    fn drop(&mut self) {
        match &self.state {
            State::Read { .. } => {}
            State::Write { path, .. } => {
                let _ = std::fs::remove_file(path);
            }
            State::Metadata { dir, names, .. } => {
                for name in names {
                    let _ = std::fs::remove_file(name);
                }
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}
