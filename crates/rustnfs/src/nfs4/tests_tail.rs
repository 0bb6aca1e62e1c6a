//! READ tails in process (`tail`): which COMPOUNDs leave their READ data to the front
//! door, that the head and the data read from the file make exactly the reply the copy
//! path builds, and exactly-once on a session slot — a tailed reply is not kept (its
//! retransmission is `RETRY_UNCACHED_REP`), a reply the client asked kept is copied
//! and sent again byte for byte.

use std::os::unix::fs::FileExt;

use super::proto::{self, op};
use super::tests::{Reply, compound, op, putroot, root, stateid};
use super::tests41::{sequence, session};
use super::xdr;
use super::*;

const SIZE: usize = 3 * 1024 * 1024 + 6;

fn content() -> Vec<u8> {
    (0..SIZE as u32)
        .map(|i| (i * 31 + i / 4099) as u8)
        .collect()
}

fn server_with_big_file() -> (tempfile::TempDir, Nfs4) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("big"), content()).unwrap();
    let s = super::tests::server(tmp.path());
    (tmp, s)
}

fn read(offset: u64, count: u32) -> Vec<u8> {
    op(op::READ, |v| {
        stateid(v, (0, [0; 12]));
        xdr::u64(v, offset);
        xdr::u32(v, count);
    })
}

fn lookup_big() -> Vec<u8> {
    op(op::LOOKUP, |v| xdr::opaque(v, b"big"))
}

/// `args` answered with tails taken, as the front door answers them: the reply as the
/// client receives it (a tail's data read from its file and padded after the head),
/// and the tail's length if there was one.
fn run_tailed(s: &Nfs4, args: &[u8]) -> (Vec<u8>, Option<usize>) {
    let mut out = Vec::new();
    let (_, tail) = s
        .call_tailed(1, &root(), Conn::LOCAL, args, &mut out, true)
        .ok()
        .expect("a COMPOUND result");
    assert!(
        out.len() <= Nfs4::reply_bound(args, true),
        "the head within its bound"
    );
    let Some(t) = tail else {
        return (out, None);
    };
    let at = out.len();
    out.resize(at + t.len, 0);
    t.file.read_exact_at(&mut out[at..], t.offset).unwrap();
    out.resize(out.len() + t.pad(), 0);
    (out, Some(t.len))
}

/// The copy path's reply to `args` (tails not taken).
fn run_copied(s: &Nfs4, args: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    s.call_tailed(1, &root(), Conn::LOCAL, args, &mut out, false)
        .ok()
        .expect("a COMPOUND result");
    out
}

/// READ's result after its status: eof and the data.
fn read_result(r: &mut Reply) -> (bool, Vec<u8>) {
    assert_eq!(r.op(op::READ), proto::OK, "READ");
    let eof = r.u32() == 1;
    (eof, r.opaque())
}

/// (offset, count, whether the data leaves as a tail): whole 1 MiB READs, every pad
/// length, a short READ at the end of the file (copied), and one past it.
const READS: [(u64, u32, bool); 7] = [
    (0, 1 << 20, true),
    (5000, 5001, true),
    (7, 4097, true),
    (1 << 20, 4098, true),
    (2 * 1024 * 1024 + 9, 1 << 20, true),
    (SIZE as u64 - 100, 1 << 20, false),
    (SIZE as u64 + 5, 1 << 20, false),
];

#[test]
fn a_read_that_ends_a_compound_is_sent_whole_after_its_head() {
    let (_tmp, s) = server_with_big_file();
    let data = content();
    for minor in 0..=2 {
        let mut se = (minor > 0).then(|| session(&s, minor, format!("t{minor}").as_bytes()));
        // Slot 0's SEQUENCE, not asking the reply kept.
        let mut ops = |rest: Vec<Vec<u8>>| {
            let mut all = Vec::new();
            if let Some(se) = se.as_mut() {
                all.push(sequence(se.id, se.next, 0, false));
                se.next += 1;
            }
            all.extend(rest);
            compound(minor, &all)
        };
        for (offset, count, tailed) in READS {
            let args = ops(vec![putroot(), lookup_big(), read(offset, count)]);
            let (wire, tail) = run_tailed(&s, &args);
            assert_eq!(tail.is_some(), tailed, "4.{minor} READ {count} at {offset}");
            let mut r = Reply::new(wire.clone());
            assert_eq!(r.status, proto::OK);
            if minor > 0 {
                assert_eq!(r.op(op::SEQUENCE), proto::OK);
                r.skip(16 + 4 * 5);
            }
            r.op(op::PUTROOTFH);
            r.op(op::LOOKUP);
            let (eof, got) = read_result(&mut r);
            // All that was asked, or in a session what its channel's replies hold (the
            // test's: 1 MiB with the headers).
            let start = (offset as usize).min(SIZE);
            let asked = (start + count as usize).min(SIZE);
            let end = start + got.len();
            let what = format!("4.{minor} READ {count} at {offset}: {} bytes", got.len());
            assert!(
                end == asked || (minor > 0 && end < asked && asked - end < 256),
                "{what}"
            );
            assert!(got == data[start..end], "{what}: the file's bytes");
            assert_eq!(eof, end == SIZE, "{what}");
            assert_eq!(r.pos, wire.len(), "nothing after the data and its pad");
            assert_eq!(tail, tailed.then_some(got.len()), "{what}");
            // The copy path's reply, byte for byte (4.0: no SEQUENCE to tell them apart).
            if minor == 0 {
                assert!(
                    wire == run_copied(&s, &args),
                    "{what}: the copy path's reply"
                );
            }
        }
        // READ not last, or two READs: the first is copied, no tail.
        let args = ops(vec![
            putroot(),
            lookup_big(),
            read(0, 1 << 16),
            op(op::GETATTR, |v| xdr::bitmap(v, 1 << 4)),
        ]);
        assert_eq!(run_tailed(&s, &args).1, None, "READ before GETATTR");
        let args = ops(vec![
            putroot(),
            lookup_big(),
            read(0, 9000),
            read(9000, 9000),
        ]);
        let (wire, tail) = run_tailed(&s, &args);
        assert_eq!(tail, Some(9000), "only the last READ");
        let mut r = Reply::new(wire);
        if minor > 0 {
            r.op(op::SEQUENCE);
            r.skip(16 + 4 * 5);
        }
        r.op(op::PUTROOTFH);
        r.op(op::LOOKUP);
        assert!(read_result(&mut r).1 == data[..9000]);
        assert!(read_result(&mut r).1 == data[9000..18000]);
        // A READ that fails has no tail: a directory, no file handle.
        let args = ops(vec![putroot(), read(0, 1 << 20)]);
        let (wire, tail) = run_tailed(&s, &args);
        assert_eq!(tail, None);
        assert_eq!(Reply::new(wire).status, proto::ISDIR);
        let args = ops(vec![read(0, 1 << 20)]);
        assert_eq!(run_tailed(&s, &args).1, None);
    }
}

/// Exactly once over a READ tail (RFC 8881 §2.10.6.1.3): a SEQUENCE + READ whose reply
/// was not asked kept has its data sent as a tail and is not kept, so the same slot and
/// sequence id again is RETRY_UNCACHED_REP (the READ not run again); one asked kept is
/// copied (shortened to what the slot keeps) and answered again byte for byte; a small
/// READ is copied and kept either way.
#[test]
fn a_retransmitted_read_gets_its_kept_reply_or_retry_uncached() {
    let (_tmp, s) = server_with_big_file();
    let data = content();
    for minor in [1, 2] {
        let mut se = session(&s, minor, format!("r{minor}").as_bytes());
        let mut call = |cache: bool, count: u32| {
            let args = compound(
                minor,
                &[
                    sequence(se.id, se.next, 0, cache),
                    putroot(),
                    lookup_big(),
                    read(0, count),
                ],
            );
            se.next += 1;
            args
        };
        // Not asked kept: a tail, then RETRY_UNCACHED_REP, then the next seqid runs.
        let args = call(false, 1 << 20);
        let (first, tail) = run_tailed(&s, &args);
        assert!(tail.is_some_and(|n| n > 1_000_000), "{tail:?}");
        assert_eq!(Reply::new(first).status, proto::OK);
        let (again, tail) = run_tailed(&s, &args);
        assert_eq!(tail, None, "a retransmission reads nothing");
        let mut r = Reply::new(again);
        assert_eq!(r.op(op::SEQUENCE), proto::RETRY_UNCACHED_REP);
        // Asked kept: copied, within the slot's 4096 bytes, sent again whole.
        let args = call(true, 1 << 20);
        let (first, tail) = run_tailed(&s, &args);
        assert_eq!(tail, None, "a reply to keep is whole");
        assert!(first.len() + oncrpc::msg::ACCEPTED_HEADER_LEN <= 4096);
        let mut r = Reply::new(first.clone());
        r.op(op::SEQUENCE);
        r.skip(16 + 4 * 5);
        r.op(op::PUTROOTFH);
        r.op(op::LOOKUP);
        let (eof, got) = read_result(&mut r);
        assert!(!eof && !got.is_empty() && got.len() < 4096, "shortened");
        assert!(got == data[..got.len()]);
        assert!(run_tailed(&s, &args) == (first, None), "the kept reply");
        // A small READ not asked kept: copied and kept all the same.
        let args = call(false, 100);
        let (first, tail) = run_tailed(&s, &args);
        assert_eq!(tail, None);
        assert!(run_tailed(&s, &args) == (first, None), "the kept reply");
    }
}
