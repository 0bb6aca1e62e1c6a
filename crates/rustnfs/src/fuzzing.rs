//! The entry the `rustnfs_request` fuzz target drives: a client's bytes through the guard's per-record path.
//!
//! Not an API: `#[doc(hidden)]`, for fuzz/fuzz_targets/rustnfs_request.rs and its seed
//! writer. [`Target::answer`] takes the bytes a client sends on one connection (record
//! marks included), reads them into records with the guard's own bounded reader and
//! takes each record through the guard's own per-record path (`guard::step`: `oncrpc`
//! call decoding — an undecodable record closes the connection —, the header checks,
//! READ on the copy path — the sendfile path differs only in how the bytes leave —, then
//! `crate::nfs::Dispatcher::dispatch_tailed`). The export is a temporary
//! directory made once per process, with a sentinel file beside it (outside the export)
//! that the target checks is never read, changed or named.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use latency::Registry;

use crate::config::Config;
use crate::fs::DirFs;
use crate::guard::{self, Guard, Step};
use crate::nfs::read3;
use crate::rpc::NFS_PROG;
use oncrpc::msg as rpcmsg;

/// Bytes of the sentinel file outside the export; they must never appear in a reply.
pub const SENTINEL: &[u8] = b"rustnfs-fuzz sentinel: outside the export, never served 5f1c9a";

/// A wire file handle is this long; [`PLACEHOLDERS`] are too, so swapping keeps lengths.
pub const HANDLE_LEN: usize = crate::fs::handle::WIRE_LEN;

/// What the placeholders stand for, in order: the export's root, `file` (a few KiB),
/// `dir`, `dir/inner`, `outlink` (a symlink to the sentinel), `abslink` (a symlink to
/// `/etc`), `empty`.
pub const OBJECTS: [&str; 7] = [
    "",
    "file",
    "dir",
    "dir/inner",
    "outlink",
    "abslink",
    "empty",
];

/// Fuzz inputs cannot know this process's handles (inode and birth time of a fresh
/// directory), so they name them by placeholder: `FUZZ-HANDLE-PLACEHOLDR-` and the
/// object's index, 24 bytes. [`Target::substitute`] swaps them for the real handles.
pub fn placeholder(i: usize) -> [u8; HANDLE_LEN] {
    let mut b = *b"FUZZ-HANDLE-PLACEHOLDR-0";
    b[HANDLE_LEN - 1] = b'0' + i as u8;
    b
}

/// The server state a fuzz run answers with (made once per process).
pub struct Target {
    /// The server over the current export (remade after each checked input).
    export: std::sync::Mutex<Export>,
    /// The temporary directory holding the export and the sentinel; removed on drop.
    dir: PathBuf,
    outside: PathBuf,
    sentinel: PathBuf,
    rt: tokio::runtime::Runtime,
    /// Everything outside the export as it was at start.
    start: Snapshot,
}

/// Fuzz inputs of NFSv4 minor versions 1 and 2 cannot know the session the fresh
/// server made either: they name it by this placeholder (16 bytes, a `sessionid4`), which
/// [`Target::substitute`] swaps for the real one.
pub const SESSION_PLACEHOLDER: [u8; 16] = *b"FUZZ-SESSION-ID!";

/// One export as made by [`Export::fresh`], the server over it, and the NFSv4.2 session
/// made on it (slot 0 expects sequence id 1).
struct Export {
    guard: Guard,
    handles: Vec<[u8; HANDLE_LEN]>,
    session: [u8; 16],
}

impl Export {
    /// (Re)makes the fixture tree at `export` and opens a server over it: a fresh
    /// `DirFs` (no cached nodes or descriptors), so every input starts from the same state.
    fn fresh(export: &Path, sentinel: &Path) -> std::io::Result<Export> {
        match std::fs::remove_dir_all(export) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        std::fs::create_dir_all(export.join("dir/inner"))?;
        std::fs::write(export.join("file"), b"fuzz file contents\n".repeat(200))?;
        std::fs::write(export.join("empty"), b"")?;
        std::fs::write(export.join("dir/small"), b"small")?;
        std::os::unix::fs::symlink(sentinel, export.join("outlink"))?;
        std::os::unix::fs::symlink("/etc", export.join("abslink"))?;
        std::os::unix::fs::symlink("../../outside", export.join("dir/uplink"))?;
        let config = Config::new(export);
        let registry = Registry::new("rustnfs_fuzz");
        let fs = DirFs::open(&config, registry.clone())
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let handles = OBJECTS
            .iter()
            .map(|p| {
                let mut fh = fs.root_fh();
                for name in p.split('/').filter(|n| !n.is_empty()) {
                    fh = match fs.lookup(&fh, name.as_bytes()).0 {
                        Ok((fh, _)) => fh,
                        Err(s) => {
                            let e = format!("fixture object {p}: {s:?}");
                            return Err(std::io::Error::other(e));
                        }
                    };
                }
                let mut b = [0; HANDLE_LEN];
                b.copy_from_slice(&fs.wire(&fh).data);
                Ok(b)
            })
            .collect::<std::io::Result<_>>()?;
        let budget = oncrpc::Budget::new(config.max_buffer_bytes.max(2 * config.max_record));
        let (_tx, stopping) = tokio::sync::watch::channel(false);
        let guard = Guard {
            nfs: crate::nfs::Dispatcher::new(fs.clone(), registry.clone(), 2049),
            config: Arc::new(config),
            fs: fs.into(),
            registry,
            permits: Arc::new(tokio::sync::Semaphore::new(1)),
            stopping,
            buffers: crate::buffers::ReplyBuffers::new(budget.clone()),
            budget,
            closed: Default::default(),
            slots: Default::default(),
            slow_calls: tokio::sync::Semaphore::new(super::guard::SLOW_CALLS_AT_ONCE),
            bulk: super::guard::BulkLane::none(),
        };
        let session = open_session(&guard)?;
        Ok(Export {
            guard,
            handles,
            session,
        })
    }

    /// `bytes` with every placeholder replaced by its object's real handle, and the
    /// session placeholder by the session's id.
    fn substitute(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        let n = SESSION_PLACEHOLDER.len();
        let mut i = 0;
        while i + n <= out.len() {
            if out[i..i + n] == SESSION_PLACEHOLDER {
                out[i..i + n].copy_from_slice(&self.session);
                i += n;
            } else {
                i += 1;
            }
        }
        let mut i = 0;
        while i + HANDLE_LEN <= out.len() {
            let hit = (0..self.handles.len()).find(|&k| out[i..i + HANDLE_LEN] == placeholder(k));
            match hit {
                Some(k) => {
                    out[i..i + HANDLE_LEN].copy_from_slice(&self.handles[k]);
                    i += HANDLE_LEN;
                }
                None => i += 1,
            }
        }
        out
    }
}

/// Caps the size of any file this process writes (RLIMIT_FSIZE) at `bytes`, with
/// SIGXFSZ ignored so a call past it fails with EFBIG (NFS3ERR_FBIG / NFS4ERR_FBIG)
/// instead of killing the process. For the fuzz targets only: an NFSv4.2 ALLOCATE or a
/// SETATTR size is real work on the export's disk, and one fuzz run filled 36 GB of
/// /tmp with a single ALLOCATEd file before this cap.
pub fn limit_file_size(bytes: u64) -> std::io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: plain setrlimit/signal calls with valid arguments; SIG_IGN has no handler.
    unsafe {
        if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    Ok(())
}

impl Target {
    /// Makes the temporary directory (export and sentinel) and the server over it.
    pub fn new() -> std::io::Result<Target> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("rustnfs-fuzz-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let outside = dir.join("outside");
        std::fs::create_dir_all(&outside)?;
        let sentinel = outside.join("sentinel");
        std::fs::write(&sentinel, SENTINEL)?;
        let export = Export::fresh(&dir.join("export"), &sentinel)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()?;
        let start = snapshot_of(&dir, &outside, &sentinel);
        Ok(Target {
            start,
            export: std::sync::Mutex::new(export),
            dir,
            outside,
            sentinel,
            rt,
        })
    }

    /// The export's directory.
    pub fn export(&self) -> PathBuf {
        self.dir.join("export")
    }

    /// The directory beside the export holding the sentinel.
    pub fn outside(&self) -> &Path {
        &self.outside
    }

    /// The sentinel file.
    pub fn sentinel(&self) -> &Path {
        &self.sentinel
    }

    /// Answers the records in `stream` (placeholders substituted) as one connection would:
    /// one entry per record read, `(the call's xid if its header decoded, the reply)`. Reading stops
    /// where the guard would close the connection (a bad record mark, an oversized or
    /// truncated record, a record that is not an RPC call).
    pub fn answer(&self, stream: &[u8]) -> Vec<(Option<u32>, Vec<u8>)> {
        let mut export = self.export.lock().unwrap_or_else(|p| p.into_inner());
        // Each input gets a session of its own, whose slot 0 expects sequence id 1.
        if let Ok(id) = renew_session(&export.guard, &export.session) {
            export.session = id;
        }
        answer_stream(&self.rt, &export.guard, &export.substitute(stream))
    }
}

fn answer_stream(
    rt: &tokio::runtime::Runtime,
    guard: &Guard,
    stream: &[u8],
) -> Vec<(Option<u32>, Vec<u8>)> {
    let reader = guard::record_reader(guard);
    let mut rd = stream;
    let mut replies = Vec::new();
    rt.block_on(async {
        while let Ok(Some(record)) = reader.read(&mut rd).await {
            match answer_record(guard, &record) {
                Some(r) => replies.push(r),
                None => break,
            }
        }
    });
    replies
}

/// What the sentinel looked like at start: its bytes, inode, mode, size and times.
type Snapshot = (Vec<u8>, u64, u32, u64, i64, i64, Vec<std::ffi::OsString>);

fn snapshot(t: &Target) -> Snapshot {
    snapshot_of(&t.dir, &t.outside, &t.sentinel)
}

fn snapshot_of(dir: &Path, outside: &Path, sentinel: &Path) -> Snapshot {
    use std::os::unix::fs::MetadataExt;
    let bytes = std::fs::read(sentinel).expect("the sentinel is readable");
    let m = std::fs::metadata(sentinel).expect("the sentinel exists");
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .and_then(|d| d.map(|e| e.map(|e| e.file_name())).collect())
        .expect("the fixture directory lists");
    names.extend(
        std::fs::read_dir(outside)
            .and_then(|d| {
                d.map(|e| e.map(|e| e.file_name()))
                    .collect::<Result<Vec<_>, _>>()
            })
            .expect("the outside directory lists"),
    );
    names.sort();
    (
        bytes,
        m.ino(),
        m.mode(),
        m.size(),
        m.mtime(),
        m.ctime(),
        names,
    )
}

impl Target {
    /// The fuzz target's whole check: answers `input` (placeholders substituted) and
    /// panics if a reply is not one whole RPC reply record carrying its call's xid, if a
    /// reply holds the sentinel's bytes, or if anything outside the export changed.
    /// Returns the replies, and remakes the export for the next input.
    pub fn check(&self, input: &[u8]) -> Vec<(Option<u32>, Vec<u8>)> {
        let replies = self.answer(input);
        for (xid, rec) in &replies {
            assert!(rec.len() >= 4, "a reply record without its mark");
            let mark = u32::from_be_bytes([rec[0], rec[1], rec[2], rec[3]]);
            assert_eq!(
                mark & 0x8000_0000,
                0x8000_0000,
                "a reply in one last fragment"
            );
            assert_eq!(
                (mark & 0x7fff_ffff) as usize,
                rec.len() - 4,
                "reply mark length"
            );
            let h = rpcmsg::decode_reply(&rec[4..])
                .unwrap_or_else(|e| panic!("the reply does not decode as an RPC reply: {e}"));
            if let Some(xid) = xid {
                assert_eq!(h.xid, *xid, "the reply carries the call's xid");
            }
            assert!(
                !rec.windows(SENTINEL.len()).any(|w| w == SENTINEL),
                "a reply holds the sentinel's bytes (outside the export)"
            );
        }
        assert_eq!(
            snapshot(self),
            self.start,
            "something outside the export changed"
        );
        replies
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Ends session `old` (an input may have ended it already) and makes a new one.
fn renew_session(guard: &Guard, old: &[u8; 16]) -> std::io::Result<[u8; 16]> {
    let mut args = Xdr::default().opaque(b"").u32(2).u32(1).u32(44);
    args.0.extend_from_slice(old);
    let rec = call(1, NFS_PROG, 4, 1, 0, args);
    let _ = answer_record(guard, &rec[4..]);
    open_session(guard)
}

/// EXCHANGE_ID and CREATE_SESSION (minor version 2) on a fresh server: the session id.
fn open_session(guard: &Guard) -> std::io::Result<[u8; 16]> {
    let compound = |op: Xdr| {
        let mut x = Xdr::default().opaque(b"").u32(2).u32(1);
        x.0.extend_from_slice(&op.0);
        x
    };
    // The first operation's result, after the mark, the RPC header and the COMPOUND's
    // status, empty tag, count, operation number and status.
    let result = |args: Xdr| -> std::io::Result<Vec<u8>> {
        let rec = call(1, NFS_PROG, 4, 1, 0, compound(args));
        let (_, reply) = answer_record(guard, &rec[4..])
            .ok_or_else(|| std::io::Error::other("the session call was refused"))?;
        let at = 4 + rpcmsg::ACCEPTED_HEADER_LEN + 4 * 5;
        match reply.get(at - 4..at) {
            Some([0, 0, 0, 0]) => Ok(reply[at..].to_vec()),
            _ => Err(std::io::Error::other("the session call failed")),
        }
    };
    let ok = result(
        Xdr::default()
            .u32(42)
            .fixed(&[1; 8])
            .opaque(b"fuzz client")
            .u32(0)
            .u32(0)
            .u32(0),
    )?;
    let (cid, seq) = (&ok[..8], &ok[8..12]);
    let mut args = Xdr::default().u32(43).fixed(cid).fixed(seq).u32(0);
    for (cached, slots) in [(4096, 8), (0, 1)] {
        for w in [0, 1 << 20, 1 << 20, cached, 16, slots, 0] {
            args = args.u32(w);
        }
    }
    let ok = result(args.u32(0x4000_0000).u32(0))?;
    let mut id = [0u8; 16];
    id.copy_from_slice(&ok[..16]);
    Ok(id)
}

/// Where the fuzzed calls come from (a client on loopback, from an unprivileged port).
const FUZZ_PEER: std::net::SocketAddr =
    std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 40000);

/// One record through the guard's own per-record path ([`guard::step`]), each step
/// answered as the guard answers it (v3 READ on the copy path: the sendfile path differs
/// only in how the data bytes leave; an NFSv4 READ tail read from its file); `None`: the
/// guard closes the connection.
fn answer_record(guard: &Guard, record: &[u8]) -> Option<(Option<u32>, Vec<u8>)> {
    match guard::step(record, guard.config.allow_auth_none) {
        Step::Close => None,
        Step::Refuse { xid, rejection, .. } => Some((Some(xid), rejection.record(xid))),
        Step::Read { header, args } => {
            let mut reply = Vec::with_capacity(read3::reply_capacity(&args));
            let _call = crate::exports::CallScope::enter(crate::exports::CallFrom {
                peer: Some(FUZZ_PEER),
                v4: false,
            });
            let _scope = crate::identity::Scope::enter(guard.nfs.caller(&header));
            read3::reply(&guard.fs, header.xid, &args, &mut reply);
            Some((Some(header.xid), reply))
        }
        Step::Dispatch(header) => {
            // As the guard dispatches (tails taken): an NFSv4 READ that ends its COMPOUND
            // leaves its data out of the reply, read here from its file as `sendfile`
            // would send it.
            let mut reply = Vec::new();
            let tail = guard
                .nfs
                .dispatch_tailed(&header, record, &mut reply, (FUZZ_PEER, 0), true);
            if let Some(t) = tail {
                let bound = crate::nfs::Dispatcher::reply_bound(&header, record, true);
                assert!(reply.len() <= bound, "a READ tail's head over its bound");
                use std::os::unix::fs::FileExt;
                let at = reply.len();
                reply.resize(at + t.len, 0);
                // A file that shrank meanwhile: the guard would close the connection.
                t.file.read_exact_at(&mut reply[at..], t.offset).ok()?;
                reply.resize(reply.len() + t.pad(), 0);
            }
            Some((Some(header.xid), reply))
        }
    }
}

/// XDR for the seeds, written by hand (RFC 1813's argument layouts) so a seed can also
/// carry what `nfs3_types` would refuse to build.
#[derive(Default)]
struct Xdr(Vec<u8>);

impl Xdr {
    fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn opaque(self, b: &[u8]) -> Self {
        self.u32(b.len() as u32).fixed(b)
    }
    fn fixed(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self.0.resize(self.0.len().next_multiple_of(4), 0);
        self
    }
    /// The handle of [`OBJECTS`]`[k]`, by placeholder.
    fn fh(self, k: usize) -> Self {
        self.opaque(&placeholder(k))
    }
    fn dirop(self, k: usize, name: &str) -> Self {
        self.fh(k).opaque(name.as_bytes())
    }
    /// An sattr3 setting the mode (if given) and nothing else.
    fn sattr(self, mode: Option<u32>) -> Self {
        let x = match mode {
            Some(m) => self.u32(1).u32(m),
            None => self.u32(0),
        };
        x.u32(0).u32(0).u32(0).u32(0).u32(0)
    }
}

/// One call record (mark included) with an AUTH_SYS credential for `uid`/`gid`.
fn call(xid: u32, prog: u32, vers: u32, proc_: u32, uid: u32, args: Xdr) -> Vec<u8> {
    let cred = Xdr::default()
        .u32(7)
        .opaque(b"fuzz")
        .u32(uid)
        .u32(uid)
        .u32(1)
        .u32(100)
        .0;
    let mut body = Vec::new();
    rpcmsg::encode_call(
        &mut body,
        xid,
        prog,
        vers,
        proc_,
        rpcmsg::OpaqueAuth {
            flavor: 1,
            body: &cred,
        },
    );
    body.extend_from_slice(&args.0);
    oncrpc::record::frame(&body)
}

/// The `rustnfs_nfs4` fuzz target's input as a connection's bytes: `args` (a COMPOUND's
/// arguments: tag, minor version, operations) in one NFSv4 COMPOUND call record as root,
/// so the fuzzer spends its mutations on the operations rather than on the RPC header
/// (which `rustnfs_request` covers).
pub fn nfs4_call(args: &[u8]) -> Vec<u8> {
    let mut x = Xdr::default();
    x.0.extend_from_slice(args);
    call(4, NFS_PROG, 4, 1, 0, x)
}

/// Whether `input` carries the sentinel's bytes itself: over NFSv4 a client's own bytes
/// come back (the COMPOUND tag is echoed, a LOCK denied names the holder's owner), so
/// the sentinel check would only find what the input put there (the first
/// `rustnfs_nfs4` run stopped on exactly that: the sentinel as the tag).
pub fn holds_sentinel(input: &[u8]) -> bool {
    input.windows(SENTINEL.len()).any(|w| w == SENTINEL)
}

/// COMPOUND arguments for the `rustnfs_nfs4` seed corpus (fed through [`nfs4_call`]):
/// the operations a client's mount, reads, writes, opens, locks and changes use, on the
/// fixture's objects (handles by placeholder), attempts to leave the export, and the
/// sessions, stateid and file-space operations of minor versions 1 and 2 (the session
/// by [`SESSION_PLACEHOLDER`]).
pub fn nfs4_seeds() -> Vec<(String, Vec<u8>)> {
    let mut v = nfs4_files_seeds();
    v.extend(nfs4_state_seeds());
    v.extend(nfs4_session_seeds());
    v.into_iter().map(|(n, b)| (n.to_string(), b)).collect()
}

/// The attribute bits a Linux client asks (RFC 7530).
const ALL_ATTRS: [u32; 2] = [0x0010_011a | 0x0030_0000, 0x00b0_a23a | 0x0080_0000];

/// A COMPOUND's arguments: tag, minor version, operations.
fn compound4(minor: u32, ops: Vec<Xdr>) -> Vec<u8> {
    let mut x = Xdr::default()
        .opaque(b"seed")
        .u32(minor)
        .u32(ops.len() as u32);
    for o in ops {
        x.0.extend_from_slice(&o.0);
    }
    x.0
}

fn op(n: u32) -> Xdr {
    Xdr::default().u32(n)
}

fn bitmap(x: Xdr) -> Xdr {
    x.u32(2).u32(ALL_ATTRS[0]).u32(ALL_ATTRS[1])
}

fn anon(x: Xdr) -> Xdr {
    x.u32(0).fixed(&[0; 12])
}

/// v4.0: mounting, walking, reading, writing, opening.
fn nfs4_files_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let compound = |ops| compound4(0, ops);
    vec![
        ("mount", compound(vec![op(24), op(10), bitmap(op(9))])),
        (
            "setclientid",
            compound(vec![
                op(35)
                    .fixed(&[1; 8])
                    .opaque(b"Linux NFSv4.0 fuzz")
                    .u32(0x4000_0000)
                    .opaque(b"tcp")
                    .opaque(b"127.0.0.1.200.1")
                    .u32(1),
            ]),
        ),
        (
            "confirm",
            compound(vec![op(36).u64(1).fixed(&[1; 8]), op(30).u64(1)]),
        ),
        (
            "readdir",
            compound(vec![
                op(22).fh(0),
                bitmap(op(26).u64(0).fixed(&[0; 8]).u32(4096).u32(32768)),
            ]),
        ),
        (
            "read_file",
            compound(vec![
                op(22).fh(1),
                anon(op(25)).u64(0).u32(4096),
                op(9).u32(1).u32(0x18),
            ]),
        ),
        (
            "write_file",
            compound(vec![
                op(22).fh(1),
                anon(op(38)).u64(3).u32(2).opaque(b"fuzz"),
                op(5).u64(0).u32(0),
            ]),
        ),
        (
            "lookup_walk",
            compound(vec![
                op(24),
                op(15).opaque(b"dir"),
                op(15).opaque(b"inner"),
                op(16),
                op(16),
                op(10),
            ]),
        ),
        (
            "lookup_escape",
            compound(vec![
                op(24),
                op(15).opaque(b".."),
                op(15).opaque(b"outlink"),
                op(27),
            ]),
        ),
        (
            "open_create",
            compound(vec![
                op(22).fh(2),
                op(18)
                    .u32(1)
                    .u32(3)
                    .u32(0)
                    .u64(1)
                    .opaque(b"open id:fuzz")
                    .u32(1)
                    .u32(0)
                    .u32(1)
                    .u32(1 << 4)
                    .opaque(&0u64.to_be_bytes())
                    .u32(0)
                    .opaque(b"new"),
                op(10),
                op(4).u32(2).u32(1).fixed(&[0; 12]),
            ]),
        ),
    ]
}

/// v4.0: locks, changes, attributes, and what is refused.
fn nfs4_state_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let compound = |ops| compound4(0, ops);
    let mut v = vec![
        (
            "lock",
            compound(vec![
                op(22).fh(1),
                op(12)
                    .u32(2)
                    .u32(0)
                    .u64(0)
                    .u64(u64::MAX)
                    .u32(1)
                    .u32(2)
                    .u32(1)
                    .fixed(&[0; 12])
                    .u32(0)
                    .u64(1)
                    .opaque(b"lock id:fuzz"),
                op(13).u32(1).u64(0).u64(10).u64(1).opaque(b"other"),
                op(14).u32(2).u32(1).u32(1).fixed(&[0; 12]).u64(0).u64(1),
                op(39).u64(1).opaque(b"lock id:fuzz"),
            ]),
        ),
        (
            "changes",
            compound(vec![
                op(22).fh(2),
                op(6)
                    .u32(2)
                    .opaque(b"sub")
                    .u32(1)
                    .u32(1 << 1)
                    .opaque(&0o755u32.to_be_bytes()),
                op(22).fh(2),
                op(6)
                    .u32(5)
                    .opaque(b"../../x")
                    .opaque(b"ln")
                    .u32(0)
                    .opaque(&[]),
                op(22).fh(2),
                op(32),
                op(22).fh(2),
                op(29).opaque(b"inner").opaque(b"renamed"),
                op(28).opaque(b"renamed"),
                op(22).fh(1),
                op(32),
                op(22).fh(2),
                op(11).opaque(b"hard"),
            ]),
        ),
        (
            "setattr",
            compound(vec![
                op(22).fh(6),
                anon(op(34))
                    .u32(2)
                    .u32(1 << 4)
                    .u32(1 << 1)
                    .opaque(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xa4]),
                op(37).u32(1).u32(1 << 4).opaque(&0u64.to_be_bytes()),
                op(17).u32(1).u32(1 << 4).opaque(&1u64.to_be_bytes()),
            ]),
        ),
        (
            "secinfo_illegal",
            compound(vec![op(24), op(33).opaque(b"dir"), op(40), op(10044)]),
        ),
    ];
    let mut minor = Xdr::default().opaque(b"").u32(3).u32(1);
    minor.0.extend_from_slice(&op(24).0);
    v.push(("minor_version_3", minor.0));
    v
}

/// v4.1 and 4.2: COMPOUNDs in the fuzz session (SEQUENCE, slot 0, sequence id 1) —
/// opens and I/O with the current stateid, stateid tests, SEEK, ALLOCATE, DEALLOCATE,
/// COPY — and the operations that make and end sessions and clients.
fn nfs4_session_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let seq = || {
        op(53)
            .fixed(&SESSION_PLACEHOLDER)
            .u32(1)
            .u32(0)
            .u32(0)
            .u32(1)
    };
    let current = |x: Xdr| x.u32(1).fixed(&[0; 12]);
    let space = |n: u32| anon(op(n)).u64(0).u64(4096);
    vec![
        (
            "v41_open_read_close",
            compound4(
                1,
                vec![
                    seq(),
                    op(22).fh(0),
                    op(18)
                        .u32(0)
                        .u32(3)
                        .u32(0)
                        .u64(0)
                        .opaque(b"open id:fuzz41")
                        .u32(1)
                        .u32(3)
                        .fixed(&[2; 8])
                        .u32(2)
                        .u32(0)
                        .u32(1 << (33 - 32))
                        .opaque(&0o644u32.to_be_bytes())
                        .u32(0)
                        .opaque(b"new41"),
                    current(op(38)).u64(0).u32(2).opaque(b"fuzz"),
                    current(op(25)).u64(0).u32(64),
                    op(55)
                        .u32(2)
                        .u32(1)
                        .fixed(&[0; 12])
                        .u32(0)
                        .fixed(&[0xff; 12]),
                    op(4).u32(0).u32(1).fixed(&[0; 12]),
                    op(52).u32(0),
                ],
            ),
        ),
        (
            "v42_space",
            compound4(
                2,
                vec![
                    seq(),
                    op(22).fh(1),
                    anon(op(69)).u64(0).u32(1),
                    space(59),
                    space(62),
                    op(32),
                    op(22).fh(6),
                    anon(anon(op(60))).u64(0).u64(0).u64(0).u32(1).u32(1).u32(0),
                    op(9)
                        .u32(3)
                        .u32(ALL_ATTRS[0])
                        .u32(ALL_ATTRS[1])
                        .u32((1 << (75 - 64)) | (1 << (79 - 64))),
                ],
            ),
        ),
        (
            "v41_lock_free",
            compound4(
                1,
                vec![
                    seq(),
                    op(22).fh(0),
                    op(18)
                        .u32(0)
                        .u32(3)
                        .u32(0)
                        .u64(0)
                        .opaque(b"o")
                        .u32(0)
                        .u32(0)
                        .opaque(b"file"),
                    current(op(12).u32(2).u32(0).u64(0).u64(10).u32(1).u32(0))
                        .u32(0)
                        .u64(0)
                        .opaque(b"l"),
                    current(op(14).u32(2).u32(0)).u64(0).u64(10),
                    current(op(45)),
                    op(58).u32(0),
                ],
            ),
        ),
        (
            "v41_sessions",
            compound4(
                1,
                vec![
                    op(42)
                        .fixed(&[3; 8])
                        .opaque(b"another")
                        .u32(0)
                        .u32(0)
                        .u32(0),
                ],
            ),
        ),
        (
            "v41_end",
            compound4(
                1,
                vec![
                    seq(),
                    op(41).fixed(&SESSION_PLACEHOLDER).u32(3).u32(0),
                    op(44).fixed(&SESSION_PLACEHOLDER),
                    op(57).u64(1),
                ],
            ),
        ),
    ]
}

/// The NFSv3 procedures of [`seeds`]: (name, procedure, arguments).
fn nfs3_seed_calls() -> Vec<(&'static str, u32, Xdr)> {
    let x = Xdr::default;
    vec![
        ("null", 0, x()),
        ("getattr_root", 1, x().fh(0)),
        ("getattr_outlink", 1, x().fh(4)),
        ("setattr_mode", 2, x().fh(1).sattr(Some(0o644)).u32(0)),
        (
            "setattr_size_guarded",
            2,
            x().fh(6)
                .u32(0)
                .u32(0)
                .u32(0)
                .u32(1)
                .u64(3)
                .u32(1)
                .u32(1)
                .u32(1)
                .u32(5)
                .u32(0),
        ),
        ("lookup_file", 3, x().dirop(0, "file")),
        ("lookup_dotdot", 3, x().dirop(0, "..")),
        ("lookup_dotdot_dir", 3, x().dirop(2, "..")),
        ("lookup_outlink", 3, x().dirop(0, "outlink")),
        ("lookup_uplink", 3, x().dirop(2, "uplink")),
        ("lookup_slash", 3, x().dirop(0, "dir/../..")),
        ("access", 4, x().fh(1).u32(0x3f)),
        ("readlink_outlink", 5, x().fh(4)),
        ("readlink_abslink", 5, x().fh(5)),
        ("read_file", 6, x().fh(1).u64(0).u32(4096)),
        ("read_file_past_end", 6, x().fh(1).u64(1 << 40).u32(16)),
        ("read_outlink", 6, x().fh(4).u64(0).u32(64)),
        ("read_dir", 6, x().fh(2).u64(0).u32(64)),
        (
            "write_file",
            7,
            x().fh(6).u64(0).u32(5).u32(2).opaque(b"hello"),
        ),
        (
            "write_unstable",
            7,
            x().fh(6).u64(9).u32(3).u32(0).opaque(b"abc"),
        ),
        (
            "create_unchecked",
            8,
            x().dirop(2, "new").u32(0).sattr(Some(0o600)),
        ),
        (
            "create_guarded_exists",
            8,
            x().dirop(0, "file").u32(1).sattr(None),
        ),
        (
            "create_exclusive",
            8,
            x().dirop(0, "excl").u32(2).fixed(b"verifier"),
        ),
        (
            "create_through_uplink",
            8,
            x().dirop(2, "uplink/escape").u32(0).sattr(None),
        ),
        ("mkdir", 9, x().dirop(0, "newdir").sattr(Some(0o755))),
        (
            "symlink_out",
            10,
            x().dirop(2, "ln")
                .sattr(None)
                .opaque(b"../../outside/sentinel"),
        ),
        (
            "mknod_fifo",
            11,
            x().dirop(2, "fifo").u32(7).sattr(Some(0o600)),
        ),
        (
            "mknod_chr",
            11,
            x().dirop(2, "chr").u32(4).sattr(None).u32(1).u32(3),
        ),
        ("remove", 12, x().dirop(2, "small")),
        ("remove_outlink", 12, x().dirop(0, "outlink")),
        ("rmdir", 13, x().dirop(2, "inner")),
        ("rename", 14, x().dirop(0, "empty").dirop(2, "moved")),
        ("rename_dotdot", 14, x().dirop(0, "file").dirop(2, "..")),
        ("link", 15, x().fh(1).dirop(2, "hard")),
        ("link_outlink", 15, x().fh(4).dirop(0, "hard2")),
        ("readdir", 16, x().fh(0).u64(0).fixed(&[0; 8]).u32(4096)),
        (
            "readdir_cookie",
            16,
            x().fh(2).u64(3).fixed(&[0; 8]).u32(512),
        ),
        (
            "readdirplus",
            17,
            x().fh(0).u64(0).fixed(&[0; 8]).u32(1024).u32(8192),
        ),
        ("fsstat", 18, x().fh(0)),
        ("fsinfo", 19, x().fh(0)),
        ("pathconf", 20, x().fh(2)),
        ("commit", 21, x().fh(1).u64(0).u32(0)),
        ("unknown_proc", 22, x().fh(0)),
    ]
}

/// Real calls for the fuzz target's seed corpus: every NFSv3, MOUNT and portmapper
/// procedure with well-formed arguments on the fixture's objects (handles by
/// placeholder), attempts to leave the export, RPC-level refusals, a fragmented record
/// and several records on one connection. `(file name, bytes)`.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    const NFS: u32 = NFS_PROG;
    const MNT: u32 = crate::rpc::MOUNT_PROG;
    const PMAP: u32 = crate::rpc::PMAP_PROG;
    let x = Xdr::default;
    let nfs = nfs3_seed_calls();
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, (name, proc_, args)) in nfs.into_iter().enumerate() {
        out.push((
            format!("nfs_{name}"),
            call(0x100 + i as u32, NFS, 3, proc_, 0, args),
        ));
    }
    let mount: Vec<(&str, u32, Xdr)> = vec![
        ("null", 0, x()),
        ("mnt_root", 1, x().opaque(b"/")),
        ("mnt_export", 1, x().opaque(b"/export")),
        ("mnt_dotdot", 1, x().opaque(b"/../outside")),
        ("dump", 2, x()),
        ("umnt", 3, x().opaque(b"/")),
        ("umntall", 4, x()),
        ("export", 5, x()),
    ];
    for (i, (name, proc_, args)) in mount.into_iter().enumerate() {
        out.push((
            format!("mount_{name}"),
            call(0x200 + i as u32, MNT, 3, proc_, 0, args),
        ));
    }
    let getport = |prog| x().u32(prog).u32(3).u32(6).u32(0);
    out.push(("pmap_null".into(), call(0x300, PMAP, 2, 0, 0, x())));
    out.push((
        "pmap_getport_nfs".into(),
        call(0x301, PMAP, 2, 3, 0, getport(NFS)),
    ));
    out.push((
        "pmap_getport_other".into(),
        call(0x302, PMAP, 2, 3, 0, getport(7)),
    ));
    out.push(("pmap_dump".into(), call(0x303, PMAP, 2, 4, 0, x())));
    // As a user who owns nothing: the permission checks.
    out.push((
        "nfs_read_as_user".into(),
        call(0x400, NFS, 3, 6, 1000, x().fh(1).u64(0).u32(64)),
    ));
    out.push((
        "nfs_write_as_user".into(),
        call(
            0x401,
            NFS,
            3,
            7,
            1000,
            x().fh(1).u64(0).u32(1).u32(2).opaque(b"x"),
        ),
    ));
    // RPC-level refusals (NFSv2, an unknown program, RPC version 3), and AUTH_NONE.
    out.push(("rpc_nfs_v2".into(), call(0x500, NFS, 2, 1, 0, x().fh(0))));
    out.push((
        "rpc_prog_unavail".into(),
        call(0x501, 400_000, 1, 0, 0, x()),
    ));
    let mut rpcvers = call(0x502, NFS, 3, 0, 0, x());
    rpcvers[4 + 11] = 3;
    out.push(("rpc_version_3".into(), rpcvers));
    let mut none = Vec::new();
    rpcmsg::encode_call(
        &mut none,
        0x503,
        NFS,
        3,
        1,
        rpcmsg::OpaqueAuth {
            flavor: 0,
            body: &[],
        },
    );
    none.extend_from_slice(&x().fh(0).0);
    // Refused (AUTH_TOOWEAK) unless `--allow-auth-none`.
    out.push(("rpc_auth_none".into(), oncrpc::record::frame(&none)));
    // One call in two fragments (the first without the last-fragment bit).
    let whole = call(0x600, NFS, 3, 3, 0, x().dirop(0, "dir"));
    let body = &whole[4..];
    let (a, b) = body.split_at(20);
    let mut frag = (a.len() as u32).to_be_bytes().to_vec();
    frag.extend_from_slice(a);
    frag.extend_from_slice(&oncrpc::record::mark(b.len()));
    frag.extend_from_slice(b);
    out.push(("record_fragments".into(), frag));
    // A session: mount, look up, read, write, read back, list.
    let mut session = Vec::new();
    session.extend(call(0x700, MNT, 3, 1, 0, x().opaque(b"/")));
    session.extend(call(0x701, NFS, 3, 3, 0, x().dirop(0, "dir")));
    session.extend(call(
        0x702,
        NFS,
        3,
        7,
        0,
        x().fh(6).u64(0).u32(2).u32(2).opaque(b"hi"),
    ));
    session.extend(call(0x703, NFS, 3, 6, 0, x().fh(1).u64(10).u32(100)));
    session.extend(call(
        0x704,
        NFS,
        3,
        17,
        0,
        x().fh(2).u64(0).fixed(&[0; 8]).u32(512).u32(4096),
    ));
    out.push(("session".into(), session));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every seed is answered, each reply is well formed (the fuzz target's checks), and
    /// the well-formed calls are accepted: the seeds reach the procedures.
    #[test]
    fn fuzz_seeds_are_answered_and_reach_the_procedures() {
        let t = Target::new().unwrap();
        let seeds = seeds();
        assert!(seeds.len() > 60);
        for (name, bytes) in &seeds {
            let replies = t.check(bytes);
            assert!(!replies.is_empty(), "{name}: no reply");
            let accepted = replies
                .iter()
                .all(|(_, r)| rpcmsg::decode_reply(&r[4..]).is_ok_and(|h| h.status.is_ok()));
            let refused = name.starts_with("rpc_") || name == "nfs_unknown_proc";
            assert_eq!(accepted, !refused, "{name}: accepted {accepted}");
        }
        let session = &seeds.iter().find(|(n, _)| n == "session").unwrap().1;
        assert_eq!(t.check(session).len(), 5);
    }

    /// Every v4 seed is answered with one well-formed COMPOUND reply (the fuzz target's
    /// checks), and the whole-COMPOUND ones reach their operations (status OK for the
    /// mount and read seeds).
    #[test]
    fn nfs4_seeds_are_answered() {
        let t = Target::new().unwrap();
        for (name, args) in nfs4_seeds() {
            let replies = t.check(&nfs4_call(&args));
            assert_eq!(replies.len(), 1, "{name}");
            let rec = &replies[0].1;
            let h = rpcmsg::decode_reply(&rec[4..]).unwrap();
            assert!(h.status.is_ok(), "{name}: {:?}", h.status);
            let body = &rec[4 + h.body..];
            let status = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
            if [
                "mount",
                "readdir",
                "read_file",
                "write_file",
                "lookup_walk",
                "v41_open_read_close",
                "v42_space",
                "v41_lock_free",
            ]
            .contains(&name.as_str())
            {
                assert_eq!(status, 0, "{name}: COMPOUND status");
            }
            if name == "minor_version_3" {
                assert_eq!(status, crate::nfs4::proto::MINOR_VERS_MISMATCH);
            }
        }
    }

    /// The largest single allocation this thread made since [`Largest::reset`]: the unit
    /// tests' allocator is the system's, with this one measurement added.
    struct Largest;

    thread_local! {
        static LARGEST: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    impl Largest {
        fn reset() {
            LARGEST.with(|l| l.set(0));
        }
        fn get() -> usize {
            LARGEST.with(|l| l.get())
        }
        fn note(size: usize) {
            let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
        }
    }

    // SAFETY: forwards to the system allocator unchanged.
    unsafe impl std::alloc::GlobalAlloc for Largest {
        unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
            Largest::note(l.size());
            unsafe { std::alloc::System.alloc(l) }
        }
        unsafe fn alloc_zeroed(&self, l: std::alloc::Layout) -> *mut u8 {
            Largest::note(l.size());
            unsafe { std::alloc::System.alloc_zeroed(l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, new: usize) -> *mut u8 {
            Largest::note(new);
            unsafe { std::alloc::System.realloc(p, l, new) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
            unsafe { std::alloc::System.dealloc(p, l) }
        }
    }

    #[global_allocator]
    static ALLOC: Largest = Largest;

    /// Found by `rustnfs_request`: a READ or FSSTAT whose handle claims 4 GiB made the
    /// guard allocate 4 GiB (`nfs3_types`' `Opaque::unpack`) before reading it. Each is
    /// now GARBAGE_ARGS with no allocation beyond the record's size.
    #[test]
    fn fuzz_regression_huge_handle_length_allocates_nothing() {
        let t = Target::new().unwrap();
        for (proc_, rest) in [(6, Xdr::default().u64(0).u32(64)), (18, Xdr::default())] {
            let args = Xdr::default().u32(0xffff_fff0).fixed(&placeholder(1));
            let mut rec = call(9, NFS_PROG, 3, proc_, 0, args);
            rec.extend_from_slice(&rest.0);
            let len = rec.len() - 4;
            rec[..4].copy_from_slice(&oncrpc::record::mark(len));
            Largest::reset();
            let replies = t.answer(&rec);
            let largest = Largest::get();
            assert!(largest < 4 << 20, "proc {proc_}: allocated {largest} bytes");
            assert_eq!(replies.len(), 1);
            let h = rpcmsg::decode_reply(&replies[0].1[4..]).unwrap();
            assert_eq!(
                h.status,
                Err(rpcmsg::Rejection::GarbageArgs),
                "proc {proc_}"
            );
        }
    }

    /// The check notices a reply that names the sentinel's bytes: a READ of a file
    /// inside the export holding them (the property is live, not vacuous).
    #[test]
    #[should_panic(expected = "sentinel")]
    fn fuzz_check_catches_the_sentinel_in_a_reply() {
        let t = Target::new().unwrap();
        std::fs::write(t.export().join("file"), SENTINEL).unwrap();
        t.check(&call(
            1,
            NFS_PROG,
            3,
            6,
            0,
            Xdr::default().fh(1).u64(0).u32(4096),
        ));
    }
}
