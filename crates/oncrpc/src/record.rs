//! Record marking (RFC 5531 §11): each record is one or more fragments, each preceded by a
//! 4-byte mark whose top bit says "last fragment" and whose low 31 bits give its length.
//!
//! The reader never trusts a mark: the length is checked against the record limit before
//! a byte is allocated, fragments are summed against the same limit, and without a budget
//! grant for it the buffer grows only as bytes actually arrive (doubling, so memory stays
//! within twice what was sent). With a shared [`Budget`], a record's claimed length is
//! granted before its bytes are read, so no record ever waits for budget while holding
//! part of it; a last fragment whose length is granted is then allocated at that length
//! at once (no copies of growing; the pages of a large allocation become resident only as
//! the bytes arrive). A record no longer than the connection's own share
//! ([`RecordReader::share`]) takes nothing from the budget: however many marks claim the
//! whole budget, every small call (a LOOKUP, a READ call) is still read and answered.
//!
//! A connection may hand the reader its last record back as a spare
//! ([`RecordReader::read_reusing`]): its buffer, and the budget that buffer already
//! holds, serve the next record, so back-to-back large calls (1 MiB WRITEs) do not map,
//! fault in and unmap a fresh buffer each.

use std::io::{Read, Write};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::budget::{Budget, Exceeded, Grant};

/// The mark's "last fragment" bit.
pub const LAST_FRAGMENT: u32 = 0x8000_0000;
/// The mark's length bits.
pub const LENGTH_MASK: u32 = 0x7fff_ffff;
/// Bytes of a mark.
pub const MARK_LEN: usize = 4;
/// First allocation of a record, and the smallest growth step.
const FIRST_CHUNK: usize = 16 * 1024;

/// The mark of a single, last fragment of `len` bytes.
///
/// # Panics
/// If `len` does not fit in 31 bits (no record we build comes near it).
pub fn mark(len: usize) -> [u8; 4] {
    assert!(len <= LENGTH_MASK as usize, "fragment of {len} bytes");
    (LAST_FRAGMENT | len as u32).to_be_bytes()
}

/// Starts a record built in place: appends a placeholder mark and returns where it is.
pub fn begin(buf: &mut Vec<u8>) -> usize {
    let at = buf.len();
    buf.extend_from_slice(&[0; MARK_LEN]);
    at
}

/// Ends a record started by [`begin`] at `at`: its mark now covers everything after it.
pub fn finish(buf: &mut [u8], at: usize) {
    let len = buf.len() - at - MARK_LEN;
    buf[at..at + MARK_LEN].copy_from_slice(&mark(len));
}

/// `body` as one record (mark + body) in one buffer, so it leaves in one write.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(MARK_LEN + body.len());
    v.extend_from_slice(&mark(body.len()));
    v.extend_from_slice(body);
    v
}

/// Writes `body` as one record.
pub async fn write(w: &mut (impl AsyncWrite + Unpin), body: &[u8]) -> std::io::Result<()> {
    w.write_all(&frame(body)).await
}

/// Writes `body` as one record (blocking).
pub fn write_blocking(w: &mut impl Write, body: &[u8]) -> std::io::Result<()> {
    w.write_all(&frame(body))
}

/// Why no record was read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("record of {len} bytes exceeds the {limit}-byte limit")]
    TooLarge { len: usize, limit: usize },
    #[error("idle for {0:?}")]
    Idle(Duration),
    #[error("record not completed within {0:?}")]
    Slow(Duration),
    #[error("buffer budget: {0}")]
    Budget(#[from] Exceeded),
    #[error("connection closed in the middle of a record")]
    Truncated,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl From<RecordError> for std::io::Error {
    fn from(e: RecordError) -> Self {
        match e {
            RecordError::Io(e) => e,
            RecordError::Truncated => std::io::ErrorKind::UnexpectedEof.into(),
            RecordError::Idle(_) | RecordError::Slow(_) => {
                std::io::Error::new(std::io::ErrorKind::TimedOut, e.to_string())
            }
            e => std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
        }
    }
}

/// One whole record, with the budget its buffer holds (returned when it is dropped).
#[derive(Debug)]
pub struct Record {
    pub data: Vec<u8>,
    pub grant: Option<Grant>,
}

impl std::ops::Deref for Record {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

/// How records are read from one peer.
#[derive(Debug, Clone)]
pub struct RecordReader {
    /// Largest record accepted, all fragments together.
    pub max_record: usize,
    /// Longest wait for the first byte of a record (`None`: no limit).
    pub idle_timeout: Option<Duration>,
    /// A record's remaining bytes (and the budget for them) must arrive within this time
    /// of its first byte (`None`: no limit).
    pub record_timeout: Option<Duration>,
    /// Where the record buffers' bytes come from (`None`: unaccounted).
    pub budget: Option<Budget>,
    /// A record of at most this many bytes (one fragment, all its bytes claimed by its
    /// mark) is read into the connection's own share, outside the budget: the budget is
    /// for large records, so marks claiming all of it cannot stop the small calls of
    /// everyone else. The cost is at most this per connection, and only while such a
    /// record is in (its buffer grows with the bytes that arrive).
    pub share: usize,
    /// Allocate each fragment's whole (checked) length at once instead of growing with
    /// the bytes that arrive: for a client reading its own server's replies, where the
    /// copies of growing cost more than a lying peer could.
    pub trust_lengths: bool,
}

impl RecordReader {
    /// A reader with no timeouts and no budget.
    pub fn new(max_record: usize) -> RecordReader {
        RecordReader {
            max_record,
            idle_timeout: None,
            record_timeout: None,
            budget: None,
            share: 0,
            trust_lengths: false,
        }
    }

    /// A reader for a trusted peer's replies: no timeouts, no budget, each fragment
    /// allocated at its (checked) length.
    pub fn trusting(max_record: usize) -> RecordReader {
        RecordReader {
            trust_lengths: true,
            ..RecordReader::new(max_record)
        }
    }

    /// Reads one whole record. `Ok(None)` is a clean end of stream between records.
    pub async fn read(
        &self,
        rd: &mut (impl AsyncRead + Unpin),
    ) -> Result<Option<Record>, RecordError> {
        self.read_watching(rd, || false).await
    }

    /// [`read`](Self::read), and while the record waits for budget (not reading its
    /// socket), asks `peer_gone` every [`GONE_CHECK`]: a `true` (the peer reset the
    /// connection, say) drops the half-read record at once and gives its budget back,
    /// instead of holding it until the record timeout for a peer that will never finish.
    pub async fn read_watching(
        &self,
        rd: &mut (impl AsyncRead + Unpin),
        peer_gone: impl Fn() -> bool,
    ) -> Result<Option<Record>, RecordError> {
        self.read_reusing(rd, peer_gone, None).await
    }

    /// [`read_watching`](Self::read_watching) into `spare`'s buffer (cleared), with the
    /// budget it holds: a record it has room for allocates nothing and takes no more
    /// budget. Hand back only records this reader read (their grant is from its budget).
    pub async fn read_reusing(
        &self,
        rd: &mut (impl AsyncRead + Unpin),
        peer_gone: impl Fn() -> bool,
        spare: Option<Record>,
    ) -> Result<Option<Record>, RecordError> {
        // As much of the first mark as has arrived, in one read (a call's whole mark
        // almost always has): the idle wait ends with its first byte.
        let mut first = [0u8; MARK_LEN];
        let n = match self.idle_timeout {
            Some(t) => tokio::time::timeout(t, rd.read(&mut first))
                .await
                .map_err(|_| RecordError::Idle(t))??,
            None => rd.read(&mut first).await?,
        };
        if n == 0 {
            return Ok(None);
        }
        self.read_after(rd, (first, n), peer_gone, spare)
            .await
            .map(Some)
    }

    /// The rest of a record whose first `n` mark bytes (0 to 4) the caller already read
    /// (`first.0[..first.1]`), as [`read_reusing`](Self::read_reusing) goes on after its
    /// first read: a server that waits for the next call by reading its mark spends one
    /// `recv` per call on the wait and the mark together, not a peek and a read.
    pub async fn read_after(
        &self,
        rd: &mut (impl AsyncRead + Unpin),
        first: ([u8; MARK_LEN], usize),
        peer_gone: impl Fn() -> bool,
        spare: Option<Record>,
    ) -> Result<Record, RecordError> {
        debug_assert!(first.1 <= MARK_LEN, "more than a mark's bytes");
        let rest = self.read_rest(rd, first, &peer_gone, spare);
        match self.record_timeout {
            Some(t) => tokio::time::timeout(t, rest)
                .await
                .map_err(|_| RecordError::Slow(t))?,
            None => rest.await,
        }
    }

    async fn read_rest(
        &self,
        rd: &mut (impl AsyncRead + Unpin),
        (mut hdr, mut have): ([u8; MARK_LEN], usize),
        peer_gone: &impl Fn() -> bool,
        spare: Option<Record>,
    ) -> Result<Record, RecordError> {
        let (mut data, mut grant) = match spare {
            Some(Record { mut data, grant }) => {
                data.clear();
                (
                    data,
                    grant.or_else(|| self.budget.as_ref().map(Budget::grant)),
                )
            }
            None => (Vec::new(), self.budget.as_ref().map(Budget::grant)),
        };
        loop {
            rd.read_exact(&mut hdr[have..]).await.map_err(eof)?;
            have = 0;
            let m = u32::from_be_bytes(hdr);
            let len = (m & LENGTH_MASK) as usize;
            let total = data.len() + len;
            if total > self.max_record {
                return Err(RecordError::TooLarge {
                    len: total,
                    limit: self.max_record,
                });
            }
            // The budget for the whole record is taken before its first byte is read:
            // a record never waits for budget while holding some. (Taken as the bytes
            // arrived, records half-way through could hold all of it between them and
            // each wait for the others, until the record timeout closed them all.) A
            // record in several fragments takes the most a record may be at its first.
            let own_share = data.is_empty() && m & LAST_FRAGMENT != 0 && total <= self.share;
            // The whole record's length is granted: its buffer may be allocated at once.
            let mut granted = false;
            if let Some(g) = grant.as_mut().filter(|_| !own_share) {
                let whole = if m & LAST_FRAGMENT != 0 {
                    total
                } else {
                    self.max_record.min(g.budget().total())
                };
                let add = whole.saturating_sub(g.bytes());
                if add > 0 && !g.try_grow(add) {
                    grow_unless_gone(g, add, peer_gone).await?;
                }
                granted = m & LAST_FRAGMENT != 0;
            }
            while data.len() < total {
                if data.len() == data.capacity() {
                    let want = if self.trust_lengths || granted {
                        total
                    } else {
                        total.min((2 * data.capacity()).max(FIRST_CHUNK))
                    };
                    data.reserve_exact(want - data.len());
                }
                let room = (data.capacity() - data.len()).min(total - data.len());
                let got = (&mut *rd).take(room as u64).read_buf(&mut data).await?;
                if got == 0 {
                    return Err(RecordError::Truncated);
                }
            }
            if m & LAST_FRAGMENT != 0 {
                // Keep what the buffer holds (reserve_exact may round up), no more.
                if let Some(g) = grant.as_mut().filter(|_| !own_share) {
                    if data.capacity() > g.bytes() {
                        let _ = g.try_grow(data.capacity() - g.bytes());
                    }
                    g.shrink_to(data.capacity());
                }
                return Ok(Record { data, grant });
            }
        }
    }
}

/// How often a record waiting for budget asks whether its peer is still there.
pub const GONE_CHECK: Duration = Duration::from_millis(100);

/// Waits for `add` more bytes of budget (keeping its place in the queue), unless
/// `peer_gone` says first that nobody will finish the record.
async fn grow_unless_gone(
    g: &mut Grant,
    add: usize,
    peer_gone: &impl Fn() -> bool,
) -> Result<(), RecordError> {
    let grow = g.grow(add);
    tokio::pin!(grow);
    let mut check = tokio::time::interval(GONE_CHECK);
    check.tick().await;
    loop {
        tokio::select! {
            r = &mut grow => return Ok(r?),
            _ = check.tick() => {
                if peer_gone() {
                    return Err(RecordError::Io(std::io::ErrorKind::ConnectionReset.into()));
                }
            }
        }
    }
}

fn eof(e: std::io::Error) -> RecordError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        RecordError::Truncated
    } else {
        RecordError::Io(e)
    }
}

/// Reads one whole record (blocking), at most `max_record` bytes, growing as bytes arrive.
pub fn read_blocking(rd: &mut impl Read, max_record: usize) -> std::io::Result<Vec<u8>> {
    let mut data = Vec::new();
    loop {
        let mut hdr = [0u8; 4];
        rd.read_exact(&mut hdr)?;
        let m = u32::from_be_bytes(hdr);
        let total = data.len() + (m & LENGTH_MASK) as usize;
        if total > max_record {
            return Err(RecordError::TooLarge {
                len: total,
                limit: max_record,
            }
            .into());
        }
        while data.len() < total {
            let step = (total - data.len()).min(data.len().max(FIRST_CHUNK));
            // A zeroed allocation (calloc) and one copy: cheaper than resizing in place,
            // which writes the zeros byte by byte in unoptimised test builds.
            let mut chunk = vec![0u8; step];
            rd.read_exact(&mut chunk)?;
            data.extend_from_slice(&chunk);
        }
        if m & LAST_FRAGMENT != 0 {
            return Ok(data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fragments(parts: &[(&[u8], bool)]) -> Vec<u8> {
        let mut v = Vec::new();
        for (body, last) in parts {
            let m = body.len() as u32 | if *last { LAST_FRAGMENT } else { 0 };
            v.extend_from_slice(&m.to_be_bytes());
            v.extend_from_slice(body);
        }
        v
    }

    #[tokio::test]
    async fn a_record_goes_on_from_the_mark_bytes_its_caller_read() {
        let wire = fragments(&[(b"hello ", false), (b"world", true), (b"next", true)]);
        let r = RecordReader::new(1024);
        for have in 0..=MARK_LEN {
            let mut mark = [0u8; MARK_LEN];
            mark[..have].copy_from_slice(&wire[..have]);
            let mut rd = &wire[have..];
            let rec = r.read_after(&mut rd, (mark, have), || false, None).await;
            assert_eq!(rec.unwrap().data, b"hello world", "{have} mark bytes read");
            // The next record is untouched.
            assert_eq!(r.read(&mut rd).await.unwrap().unwrap().data, b"next");
        }
    }

    #[tokio::test]
    async fn reads_fragments_and_stops_cleanly() {
        let wire = fragments(&[(b"hello ", false), (b"world", true), (b"x", true)]);
        let r = RecordReader::new(64);
        let mut rd = &wire[..];
        assert_eq!(&*r.read(&mut rd).await.unwrap().unwrap(), b"hello world");
        assert_eq!(&*r.read(&mut rd).await.unwrap().unwrap(), b"x");
        assert!(r.read(&mut rd).await.unwrap().is_none());
        let mut blocking = &wire[..];
        assert_eq!(read_blocking(&mut blocking, 64).unwrap(), b"hello world");
    }

    #[tokio::test]
    async fn a_huge_mark_allocates_nothing() {
        // 2 GiB claimed, a few bytes sent: refused from the mark alone.
        let mut wire = (LAST_FRAGMENT | 0x7fff_fff0).to_be_bytes().to_vec();
        wire.extend_from_slice(b"abc");
        let err = RecordReader::new(1 << 20)
            .read(&mut &wire[..])
            .await
            .unwrap_err();
        assert!(matches!(err, RecordError::TooLarge { .. }), "{err}");
        // Fragments are summed against the limit.
        let wire = fragments(&[(&[0; 40], false), (&[0; 40], true)]);
        let err = RecordReader::new(64)
            .read(&mut &wire[..])
            .await
            .unwrap_err();
        assert!(
            matches!(err, RecordError::TooLarge { len: 80, .. }),
            "{err}"
        );
        assert!(read_blocking(&mut &wire[..], 64).is_err());
    }

    #[tokio::test]
    async fn a_record_is_granted_its_claim_before_its_bytes_and_keeps_what_it_holds() {
        // 1 MiB claimed, 100 bytes sent, then the peer goes away.
        let mut wire = (LAST_FRAGMENT | (1 << 20)).to_be_bytes().to_vec();
        wire.extend_from_slice(&[7; 100]);
        let budget = Budget::new(1 << 20);
        let mut r = RecordReader::new(2 << 20);
        r.budget = Some(budget.clone());
        let (mut client, mut server) = tokio::io::duplex(4096);
        client.write_all(&wire).await.unwrap();
        let reader = r.clone();
        let reading = tokio::spawn(async move { reader.read(&mut server).await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(budget.in_use(), 1 << 20, "the claim is granted whole");
        drop(client);
        assert!(matches!(
            reading.await.unwrap(),
            Err(RecordError::Truncated)
        ));
        assert_eq!(budget.in_use(), 0, "the grant comes back");
        // A whole record keeps the budget of its buffer only.
        let wire = fragments(&[(&[1; 300], false), (&[2; 200], true)]);
        let rec = r.read(&mut &wire[..]).await.unwrap().unwrap();
        assert_eq!(rec.len(), 500);
        assert_eq!(budget.in_use(), rec.data.capacity());
        drop(rec);
        assert_eq!(budget.in_use(), 0);
    }

    #[tokio::test]
    async fn a_spare_record_serves_the_next_without_allocating_or_more_budget() {
        let budget = Budget::new(1 << 20);
        let mut r = RecordReader::new(1 << 20);
        r.budget = Some(budget.clone());
        r.share = 1024;
        let wire = fragments(&[(&[1; 300 << 10], true), (&[2; 200 << 10], true)]);
        let mut rd = &wire[..];
        let first = r.read(&mut rd).await.unwrap().unwrap();
        assert_eq!(first.len(), 300 << 10);
        let (ptr, cap) = (first.data.as_ptr(), first.data.capacity());
        assert_eq!(
            budget.in_use(),
            cap,
            "a granted record is allocated once, at its length"
        );
        let second = r
            .read_reusing(&mut rd, || false, Some(first))
            .await
            .unwrap()
            .unwrap();
        assert!(second.iter().all(|&b| b == 2) && second.len() == 200 << 10);
        assert_eq!((second.data.as_ptr(), second.data.capacity()), (ptr, cap));
        assert_eq!(budget.in_use(), cap, "the spare's grant, no more");
        // A clean end gives the spare (and its budget) back.
        assert!(
            r.read_reusing(&mut rd, || false, Some(second))
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(budget.in_use(), 0);
    }

    #[tokio::test]
    async fn records_sharing_too_small_a_budget_finish_one_after_the_other() {
        // Budget for one 40 KiB record, not two. The first is granted its whole claim and
        // finishes while the second waits. (Taken as the bytes arrived, the two held 32
        // and 28 KiB after their first 24 KiB, and each waited for the other's.)
        const LEN: usize = 40 << 10;
        let budget = Budget::new(60 << 10);
        let mut r = RecordReader::new(64 << 10);
        r.budget = Some(budget.clone());
        let mut streams = Vec::new();
        let mut readers = Vec::new();
        for _ in 0..2 {
            let (mut client, mut server) = tokio::io::duplex(64 << 10);
            client.write_all(&mark(LEN)).await.unwrap();
            client.write_all(&[5; 24 << 10]).await.unwrap();
            let r = r.clone();
            readers.push(tokio::spawn(async move {
                r.read(&mut server)
                    .await
                    .map(|rec| rec.map(|rec| rec.len()))
            }));
            streams.push(client);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for c in &mut streams {
            c.write_all(&[5; LEN - (24 << 10)]).await.unwrap();
        }
        for reading in readers {
            let done = tokio::time::timeout(Duration::from_secs(5), reading).await;
            assert_eq!(
                done.expect("both records finish").unwrap().unwrap(),
                Some(LEN)
            );
        }
    }

    #[tokio::test]
    async fn a_small_record_is_read_in_its_connections_share_when_the_budget_is_spent() {
        // Marks claiming the whole budget (held here by one grant) must not stop a small
        // call: it takes nothing from the budget. A larger one still waits for it.
        let budget = Budget::new(1 << 20);
        let all = budget.try_acquire(1 << 20).unwrap();
        let mut r = RecordReader::new(1 << 20);
        r.budget = Some(budget.clone());
        r.share = 1024;
        let wire = fragments(&[(&[3; 1000], true)]);
        let rec = tokio::time::timeout(Duration::from_secs(1), r.read(&mut &wire[..]))
            .await
            .expect("a small record does not wait for budget")
            .unwrap()
            .unwrap();
        assert_eq!((rec.len(), budget.in_use()), (1000, 1 << 20));
        let wire = fragments(&[(&[3; 2000], true)]);
        assert!(
            tokio::time::timeout(Duration::from_millis(100), r.read(&mut &wire[..]))
                .await
                .is_err(),
            "a record over the share waits for budget"
        );
        // A small record in several fragments claims the most a record may be: not
        // in the share.
        let wire = fragments(&[(&[3; 10], false), (&[3; 10], true)]);
        assert!(
            tokio::time::timeout(Duration::from_millis(100), r.read(&mut &wire[..]))
                .await
                .is_err()
        );
        drop(all);
    }

    #[tokio::test]
    async fn timeouts_and_budget_waits_are_bounded() {
        let (_client, mut server) = tokio::io::duplex(64);
        let mut r = RecordReader::new(64);
        r.idle_timeout = Some(Duration::from_millis(20));
        assert!(matches!(
            r.read(&mut server).await,
            Err(RecordError::Idle(_))
        ));
        // A record that cannot get budget waits, then the read fails as slow.
        let budget = Budget::new(1 << 20);
        let _all = budget.try_acquire(1 << 20).unwrap();
        let mut r = RecordReader::new(1 << 20);
        r.budget = Some(budget);
        r.record_timeout = Some(Duration::from_millis(50));
        let wire = fragments(&[(b"data", true)]);
        assert!(matches!(
            r.read(&mut &wire[..]).await,
            Err(RecordError::Slow(_))
        ));
    }

    #[tokio::test]
    async fn a_record_waiting_for_budget_gives_up_when_its_peer_is_gone() {
        let budget = Budget::new(1 << 20);
        let all = budget.try_acquire(1 << 20).unwrap();
        let mut r = RecordReader::new(1 << 20);
        r.budget = Some(budget.clone());
        r.record_timeout = Some(Duration::from_secs(30));
        let wire = fragments(&[(b"data", true)]);
        let mut rd = &wire[..];
        let gone = std::sync::atomic::AtomicBool::new(false);
        let read = r.read_watching(&mut rd, || gone.load(std::sync::atomic::Ordering::Relaxed));
        tokio::pin!(read);
        // Still there: the record keeps waiting.
        assert!(
            tokio::time::timeout(3 * GONE_CHECK, &mut read)
                .await
                .is_err()
        );
        gone.store(true, std::sync::atomic::Ordering::Relaxed);
        let err = tokio::time::timeout(3 * GONE_CHECK, &mut read)
            .await
            .expect("the reset was noticed within a few checks")
            .unwrap_err();
        assert!(
            matches!(&err, RecordError::Io(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
            "{err}"
        );
        drop(all);
        assert_eq!(budget.in_use(), 0, "nothing is left granted");
    }

    #[test]
    fn writer_marks() {
        let mut buf = b"xx".to_vec();
        let at = begin(&mut buf);
        buf.extend_from_slice(b"abc");
        finish(&mut buf, at);
        assert_eq!(&buf[2..6], &(LAST_FRAGMENT | 3).to_be_bytes());
        assert_eq!(frame(b"abc"), &buf[2..]);
    }
}
