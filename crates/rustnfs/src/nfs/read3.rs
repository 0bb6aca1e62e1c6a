//! READ (NFSv3 procedure 6), once: its arguments, its reply head and the copy path's
//! whole reply. The guard's two data paths (data sent from the file with `sendfile`, or
//! copied into a budgeted reply buffer) and the dispatcher all answer READ through here;
//! they differ only in how the data bytes reach the socket.

use nfs3_types::nfs3::{READ3res, READ3resfail, READ3resok, fattr3, nfsstat3, post_op_attr};
use nfs3_types::xdr_codec::{Opaque, Pack};
use oncrpc::msg::{self as rpcmsg, AcceptStat};
use oncrpc::record;

use super::xdr::{Args, Decoded};
use crate::exports::Exports;
use crate::fs::MAX_IO;
use crate::status::status_label;

/// READ3args, the handle borrowed from the call's record. Decoded bounded: the handle
/// is at most 64 bytes and must be in the record (`nfs3_types`' `READ3args::unpack`
/// allocates the handle's claimed length, up to 4 GiB, before reading it — found by the
/// `rustnfs_request` fuzz target).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadArgs<'a> {
    pub fh: &'a [u8],
    pub offset: u64,
    pub count: u32,
}

impl<'a> ReadArgs<'a> {
    /// READ's arguments, which must fill `a` exactly (else GARBAGE_ARGS).
    pub fn decode(a: &mut Args<'a>) -> Decoded<Self> {
        let fh = a.fh()?;
        let offset = a.u64()?;
        let count = a.u32()?;
        a.end()?;
        Ok(ReadArgs { fh, offset, count })
    }

    /// [`ReadArgs::decode`] of a call's argument bytes.
    pub fn parse(args: &'a [u8]) -> Decoded<Self> {
        Self::decode(&mut Args::new(args))
    }

    /// The data bytes a reply may carry (the client's count, at most [`MAX_IO`]).
    pub fn max_data(&self) -> u32 {
        self.count.min(MAX_IO)
    }
}

/// Bytes of a successful READ3res before its data: status, post_op_attr with attributes,
/// count, eof and the data opaque's length word (the size of a `READ3res::Ok` with empty
/// data, so it follows the XDR definitions rather than a hand count).
pub(crate) fn ok_head_len() -> usize {
    READ3res::Ok(READ3resok {
        file_attributes: post_op_attr::Some(zero_fattr()),
        count: 0,
        eof: false,
        data: Opaque::borrowed(&[]),
    })
    .packed_size()
}

fn zero_fattr() -> fattr3 {
    use nfs3_types::nfs3::{ftype3, nfstime3, specdata3};
    let t = nfstime3 {
        seconds: 0,
        nseconds: 0,
    };
    fattr3 {
        type_: ftype3::NF3REG,
        mode: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        size: 0,
        used: 0,
        rdev: specdata3 {
            specdata1: 0,
            specdata2: 0,
        },
        fsid: 0,
        fileid: 0,
        atime: t,
        mtime: t,
        ctime: t,
    }
}

/// Room a READ reply record for `a` needs: mark, RPC header, READ3res head, data, pad.
pub(crate) fn reply_capacity(a: &ReadArgs<'_>) -> usize {
    record::MARK_LEN + rpcmsg::ACCEPTED_HEADER_LEN + ok_head_len() + a.max_data() as usize + 3
}

/// XDR pads an opaque of `n` bytes with this many zeros.
pub(crate) fn pad(n: usize) -> usize {
    (4 - n % 4) % 4
}

/// Packs the head of a successful READ3res (see [`ok_head_len`]) into `w`; the `n` data
/// bytes and their pad follow it. Returns the bytes packed.
fn pack_ok_head(
    mut w: impl std::io::Write,
    attr: fattr3,
    n: u32,
    eof: bool,
) -> Result<usize, nfs3_types::xdr_codec::Error> {
    Ok(nfsstat3::NFS3_OK.pack(&mut w)?
        + post_op_attr::Some(attr).pack(&mut w)?
        + n.pack(&mut w)?
        + eof.pack(&mut w)?
        // The data opaque's length word.
        + n.pack(&mut w)?)
}

/// Appends the READ3res for `a` to `out` (after the accepted reply header): the data is
/// read in place after a head of known size, and the head is packed over it afterwards.
/// Returns the status label for the metrics.
pub(crate) fn put_result(fs: &Exports, a: &ReadArgs<'_>, out: &mut Vec<u8>) -> &'static str {
    let res_at = out.len();
    let fail = |out: &mut Vec<u8>, s: nfsstat3, attr: Option<fattr3>| {
        out.truncate(res_at);
        let res: READ3res<'_> = READ3res::Err((
            s,
            READ3resfail {
                file_attributes: attr.map_or(post_op_attr::None, post_op_attr::Some),
            },
        ));
        // Packing into a Vec cannot fail.
        let _ = res.pack(out);
        status_label(s)
    };
    let fh = match fs.decode(a.fh) {
        Ok(fh) => fh,
        Err(s) => return fail(out, s, None),
    };
    let data_at = res_at + ok_head_len();
    out.resize(data_at, 0);
    match fs.read_into(&fh, a.offset, a.count, out) {
        Ok((attr, n, eof)) => {
            out.extend_from_slice(&[0; 3][..pad(n as usize)]);
            let packed = pack_ok_head(&mut out[res_at..data_at], attr, n, eof);
            debug_assert_eq!(packed.ok(), Some(data_at - res_at));
            "ok"
        }
        Err((s, attr)) => fail(out, s, attr),
    }
}

/// The whole READ reply record for `a` into `rec` (cleared first): mark, accepted
/// header, [`put_result`]. The copy path's reply.
pub(crate) fn reply(fs: &Exports, xid: u32, a: &ReadArgs<'_>, rec: &mut Vec<u8>) -> &'static str {
    rec.clear();
    let at = record::begin(rec);
    rpcmsg::accepted(rec, xid, AcceptStat::Success);
    let status = put_result(fs, a, rec);
    record::finish(rec, at);
    status
}

/// The start of a successful READ reply record whose `n` data bytes and their pad are
/// sent after it from elsewhere (the file, with `sendfile`): mark (counting the data),
/// accepted header, READ3res head.
pub(crate) fn data_follows_head(
    xid: u32,
    attr: fattr3,
    n: u32,
    eof: bool,
) -> Result<Vec<u8>, nfs3_types::xdr_codec::Error> {
    let mut head = Vec::with_capacity(record::MARK_LEN + rpcmsg::ACCEPTED_HEADER_LEN + 128);
    let at = record::begin(&mut head);
    rpcmsg::accepted(&mut head, xid, AcceptStat::Success);
    pack_ok_head(&mut head, attr, n, eof)?;
    let len = head.len() - at - record::MARK_LEN + n as usize + pad(n as usize);
    head[at..at + record::MARK_LEN].copy_from_slice(&record::mark(len));
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use latency::Registry;
    use nfs3_types::xdr_codec::Unpack;
    use std::io::Cursor;

    /// Decodes a READ reply record the way a client does.
    fn decode(rec: &[u8], xid: u32) -> READ3res<'static> {
        let mut rd = rec;
        let reply = record::read_blocking(&mut rd, rec.len()).unwrap();
        assert!(rd.is_empty(), "record mark");
        let h = rpcmsg::decode_reply(&reply).unwrap();
        assert_eq!((h.xid, h.status), (xid, Ok(())));
        let body = &reply[h.body..];
        let mut cur = Cursor::new(body);
        let (res, n) = READ3res::unpack(&mut cur).unwrap();
        assert_eq!(n, body.len(), "nothing after the READ3res");
        match res {
            READ3res::Ok(ok) => READ3res::Ok(READ3resok {
                file_attributes: ok.file_attributes,
                count: ok.count,
                eof: ok.eof,
                data: Opaque::owned(ok.data.as_ref().to_vec()),
            }),
            READ3res::Err(e) => READ3res::Err(e),
        }
    }

    #[test]
    fn args_fill_the_record_exactly() {
        let mut w = Vec::new();
        for x in [24u32, 0, 0, 0, 0, 0, 0, 0, 7, 0, 9] {
            w.extend_from_slice(&x.to_be_bytes());
        }
        let a = ReadArgs::parse(&w[..w.len() - 4]).unwrap();
        assert_eq!((a.fh.len(), a.offset, a.count), (24, 7, 0));
        assert!(ReadArgs::parse(&w).is_err(), "a trailing word");
        assert!(ReadArgs::parse(&w[..w.len() - 8]).is_err(), "no count");
        let huge = [0xffu8, 0xff, 0xff, 0xf0, 0, 0, 0, 0];
        assert!(ReadArgs::parse(&huge).is_err(), "a handle past the record");
    }

    #[test]
    fn replies_decode_with_read3res_unpack() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..10_001u32).map(|i| (i * 7) as u8).collect();
        std::fs::write(dir.path().join("f"), &data).unwrap();
        let fs = crate::fs::DirFs::open(&Config::new(dir.path()), Registry::new("t")).unwrap();
        let exports = Exports::from(fs.clone());
        let fh = fs.lookup(&fs.root_fh(), b"f").0.unwrap().0;
        let wire = fs.wire(&fh).data.as_ref().to_vec();
        let args = |offset, count, fh| ReadArgs { fh, offset, count };
        let mut rec = Vec::new();
        // Every padding length, a short read at EOF, and a read past the end.
        for (offset, count) in [(0, 4096), (1, 4095), (2, 4094), (3, 4093), (9_000, 4096)] {
            let a = args(offset, count, &wire[..]);
            assert_eq!(reply(&exports, 9, &a, &mut rec), "ok");
            let READ3res::Ok(ok) = decode(&rec, 9) else {
                panic!("READ at {offset} failed")
            };
            let end = (offset as usize + count as usize).min(data.len());
            assert_eq!(ok.data.as_ref(), &data[offset as usize..end]);
            assert_eq!(ok.count as usize, end - offset as usize);
            assert_eq!(ok.eof, end == data.len());
            let post_op_attr::Some(attr) = ok.file_attributes else {
                panic!("no attributes")
            };
            assert_eq!(attr.size, data.len() as u64);
            assert!(rec.len() <= reply_capacity(&a));
            // The sendfile path's head is the copy path's record up to the data.
            let n = end - offset as usize;
            let head = data_follows_head(9, attr, n as u32, ok.eof).unwrap();
            assert_eq!(head.len() + n + pad(n), rec.len());
            assert_eq!(&rec[..head.len()], &head[..]);
        }
        // A forged handle: an error result with no attributes, still well formed.
        let mut bad = wire.clone();
        bad[9] ^= 0xff;
        assert_eq!(
            reply(&exports, 10, &args(0, 10, &bad), &mut rec),
            "NFS3ERR_STALE"
        );
        let READ3res::Err((status, fail)) = decode(&rec, 10) else {
            panic!("a forged handle read")
        };
        assert_eq!(status, nfsstat3::NFS3ERR_STALE);
        assert!(matches!(fail.file_attributes, post_op_attr::None));
        reply(&exports, 11, &args(0, 10, &[1, 2, 3]), &mut rec);
        assert!(matches!(
            decode(&rec, 11),
            READ3res::Err((nfsstat3::NFS3ERR_BADHANDLE, _))
        ));
    }
}
