//! The operations on state: SETCLIENTID, OPEN / OPEN_CONFIRM / OPEN_DOWNGRADE / CLOSE,
//! LOCK / LOCKT / LOCKU / RELEASE_LOCKOWNER, and the stateid check READ, WRITE and
//! SETATTR make. The tables themselves are in `state`; what the file system does (the
//! create of OPEN) is `DirFs`'s, outside the state lock.

use nfs3_types::nfs3::{Nfs3Option, createhow3, createverf3, ftype3, sattr3, wcc_data};

use super::args::{Claim, How, Locker, OpenArgs, Owner};
use super::attr;
use super::ops::{check_name, cinfo};
use super::proto::{self, Status};
use super::state::{ACCESS_READ, ACCESS_WRITE, Found, Lock, OwnerKey, Seq, State, Stateid};
use super::xdr;
use super::{Ctx, Nfs4, cur};

/// What a stateid is checked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Io {
    Read,
    Write,
    /// SETATTR of the size.
    Truncate,
}
use crate::fs::Fh;

fn put_stateid(out: &mut Vec<u8>, sid: Stateid) {
    xdr::u32(out, sid.seqid);
    xdr::fixed(out, &sid.other);
}

/// The `[start, end)` of a lock request (`end == u64::MAX`: to the end of the file).
fn range(offset: u64, length: u64) -> Result<(u64, u64), Status> {
    match length {
        0 => Err(proto::INVAL),
        u64::MAX => Ok((offset, u64::MAX)),
        l => offset
            .checked_add(l)
            .map(|end| (offset, end))
            .ok_or(proto::INVAL),
    }
}

/// A `LOCK4denied`: who holds what.
fn denied(out: &mut Vec<u8>, l: &Lock) {
    xdr::u64(out, l.start);
    xdr::u64(
        out,
        if l.end == u64::MAX {
            u64::MAX
        } else {
            l.end - l.start
        },
    );
    xdr::u32(out, if l.write { 2 } else { 1 });
    xdr::u64(out, l.client);
    xdr::opaque(out, &l.owner);
}

/// The seqid check of a request: a retransmission is answered from the owner's last
/// reply; the next seqid goes ahead, and its reply will be remembered (`Ctx::seq`).
/// Returns `false` when the operation is answered already (a replay).
fn sequence(st: &State, cx: &mut Ctx<'_>, key: &OwnerKey, seqid: u32) -> Result<bool, Status> {
    match st.seq_check(key, seqid) {
        Seq::Bad => Err(proto::BAD_SEQID),
        Seq::Replay(reply, fh) => {
            cx.replay = Some(reply);
            if fh.is_some() {
                cx.cur = fh;
            }
            Ok(false)
        }
        Seq::Go => {
            cx.seq = Some((key.clone(), seqid));
            Ok(true)
        }
    }
}

impl Nfs4 {
    pub(super) fn setclientid(
        &self,
        cx: &Ctx<'_>,
        verf: [u8; 8],
        id: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let (cid, confirm) = self.state.lock().setclientid(verf, id, cx.addr, cx.now)?;
        xdr::u64(out, cid);
        xdr::fixed(out, &confirm);
        Ok(())
    }

    /// The stateid check of READ, WRITE and SETATTR(size). A special stateid (RFC 7530
    /// §9.1.4.3: all zeros, anonymous; all ones, READ bypass) opens nothing, so it meets
    /// every share reservation on the file as an OPEN for that access would: a READ
    /// against a deny of READ and a WRITE against a deny of WRITE are `LOCKED`, a size
    /// change against a deny of WRITE is `SHARE_DENIED` (NFS-Ganesha's answers; knfsd
    /// says `LOCKED` for both); the bypass stateid reads past a deny of READ, as the RFC
    /// allows and both do, and is the anonymous one for writing. Byte-range locks are
    /// advisory here (OPEN answers `OPEN4_RESULT_LOCKTYPE_POSIX`), as on knfsd and
    /// Ganesha: they refuse conflicting LOCKs, never I/O. Any other stateid must be an
    /// open or lock stateid of this file of a seqid not newer than the current one
    /// (older ones are accepted: the Linux client reads with the stateid it had while
    /// an OPEN upgrades it). Writing needs an open with write access (`OPENMODE`);
    /// reading is allowed with any open, as knfsd allows it.
    pub(super) fn check_io(
        &self,
        cx: &Ctx<'_>,
        sid: &Stateid,
        fh: &Fh,
        io: Io,
    ) -> Result<(), Status> {
        if sid.is_anonymous() || sid.is_bypass() {
            let denied = self.state.lock().share_denied(fh);
            return match io {
                Io::Read if sid.is_bypass() => Ok(()),
                Io::Read if denied & ACCESS_READ != 0 => Err(proto::LOCKED),
                Io::Write if denied & ACCESS_WRITE != 0 => Err(proto::LOCKED),
                Io::Truncate if denied & ACCESS_WRITE != 0 => Err(proto::SHARE_DENIED),
                _ => Ok(()),
            };
        }
        if sid.is_reserved() {
            return Err(proto::BAD_STATEID);
        }
        let mut st = self.state.lock();
        let f = st.stateid(sid, fh, false, cx.now)?;
        let access = match f.sid.open {
            Some(open) => st.get(f.clientid, open).map_or(0, |o| o.access),
            None => f.sid.access,
        };
        if io != Io::Read && access & ACCESS_WRITE == 0 {
            return Err(proto::OPENMODE);
        }
        Ok(())
    }

    /// OPEN of a regular file by name (CLAIM_NULL), creating it as asked (UNCHECKED,
    /// GUARDED, EXCLUSIVE — the verifier kept in the times, as for v3). Reclaims
    /// (CLAIM_PREVIOUS) are `NO_GRACE`: this server runs graceless (see `state`).
    pub(super) fn open(
        &self,
        cx: &mut Ctx<'_>,
        a: &OpenArgs<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let key = OwnerKey {
            lock: false,
            clientid: a.owner.clientid,
            owner: a.owner.owner.to_vec(),
        };
        {
            let mut st = self.state.lock();
            st.renew(key.clientid, cx.now)?;
            if !sequence(&st, cx, &key, a.seqid)? {
                return Ok(());
            }
            st.forget_unconfirmed(&key);
        }
        let dir = cur(cx)?;
        if !(1..=3).contains(&a.access) || a.deny > 3 {
            return Err(proto::INVAL);
        }
        let name = match a.claim {
            Claim::Null(name) => name,
            Claim::Previous => return Err(proto::NO_GRACE),
            Claim::DelegateCur => return Err(proto::BAD_STATEID),
            Claim::DelegatePrev => return Err(proto::RECLAIM_BAD),
        };
        self.dir(&dir)?;
        check_name(name)?;
        let (fh, wcc, attrset) = self.open_file(cx, &dir, name, a)?;
        let (sid, confirm) = {
            let mut st = self.state.lock();
            if st.share_conflict(&fh, &key, a.access, a.deny) {
                tracing::debug!(owner = ?key.owner, "OPEN refused by a share reservation");
                return Err(proto::SHARE_DENIED);
            }
            let (sid, _) = st.open_stateid(&key, fh, a.access, a.deny)?;
            (sid, !st.confirmed(&key))
        };
        put_stateid(out, sid);
        cinfo(out, &wcc);
        // OPEN4_RESULT_LOCKTYPE_POSIX, and OPEN4_RESULT_CONFIRM for a new owner.
        xdr::u32(out, 4 | if confirm { 2 } else { 0 });
        xdr::bitmap(out, attrset);
        xdr::u32(out, 0); // OPEN_DELEGATE_NONE
        cx.cur = Some(fh);
        Ok(())
    }

    /// The file-system part of OPEN: the file found or made, the directory's change
    /// info, and the attributes applied. An existing file opened without EXCLUSIVE or
    /// GUARDED is checked against the caller's rights for the access asked, and only a
    /// size in the create attributes applies to it (the RFC's UNCHECKED4).
    fn open_file(
        &self,
        cx: &Ctx<'_>,
        dir: &Fh,
        name: &[u8],
        a: &OpenArgs<'_>,
    ) -> Result<(Fh, wcc_data, u64), Status> {
        let (found, _) = self.fs.lookup(dir, name);
        let existing = match found {
            Ok(f) => Some(f),
            Err(nfs3_types::nfs3::nfsstat3::NFS3ERR_NOENT) => None,
            Err(s) => return Err(proto::from_v3(s)),
        };
        let unchanged = || -> wcc_data {
            let attr = self.fs.attr(dir).ok();
            wcc_data {
                before: attr
                    .as_ref()
                    .map_or(nfs3_types::nfs3::pre_op_attr::None, |a| {
                        nfs3_types::nfs3::pre_op_attr::Some(nfs3_types::nfs3::wcc_attr {
                            size: a.size,
                            mtime: a.mtime,
                            ctime: a.ctime,
                        })
                    }),
                after: attr.map_or(
                    nfs3_types::nfs3::post_op_attr::None,
                    nfs3_types::nfs3::post_op_attr::Some,
                ),
            }
        };
        match (a.create, existing) {
            (None, None) => Err(proto::NOENT),
            (None | Some(How::Unchecked(_)), Some((fh, fa))) => {
                match fa.type_ {
                    ftype3::NF3REG => {}
                    ftype3::NF3DIR => return Err(proto::ISDIR),
                    ftype3::NF3LNK => return Err(proto::SYMLINK),
                    _ => return Err(proto::INVAL),
                }
                if a.access & ACCESS_WRITE != 0 && self.fs.read_only() {
                    return Err(proto::ROFS);
                }
                let ok = crate::nfs::read::allowed(&fa, cx.caller, self.fs.read_only());
                let need = (if a.access & ACCESS_READ != 0 { 1 } else { 0 })
                    | (if a.access & ACCESS_WRITE != 0 { 4 } else { 0 });
                if ok & need != need {
                    return Err(proto::ACCESS);
                }
                let mut attrset = 0;
                if let Some(How::Unchecked(f)) = a.create {
                    let set = attr::decode_settable(f.mask, f.vals)?;
                    if let Nfs3Option::Some(size) = set.sattr.size {
                        let only_size = sattr3 {
                            size: Nfs3Option::Some(size),
                            ..Default::default()
                        };
                        let (r, _) = self.fs.setattr(&fh, &only_size, None);
                        r.map_err(proto::from_v3)?;
                        attrset = 1 << attr::SIZE;
                    }
                }
                Ok((fh, unchanged(), attrset))
            }
            (Some(How::Guarded(_)), Some(_)) => Err(proto::EXIST),
            (Some(how), _) => {
                let (how3, mask) = match how {
                    How::Unchecked(f) | How::Guarded(f) => {
                        let set = attr::decode_settable(f.mask, f.vals)?;
                        let h = if matches!(how, How::Guarded(_)) {
                            createhow3::GUARDED(set.sattr)
                        } else {
                            createhow3::UNCHECKED(set.sattr)
                        };
                        (h, set.mask)
                    }
                    How::Exclusive(v) => (createhow3::EXCLUSIVE(createverf3(v)), 0),
                };
                let (r, wcc) = self.fs.create(dir, name, &how3);
                let (fh, _) = r.map_err(proto::from_v3)?;
                Ok((fh, wcc, mask))
            }
        }
    }

    pub(super) fn open_confirm(
        &self,
        cx: &mut Ctx<'_>,
        sid: &Stateid,
        seqid: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let fh = cur(cx)?;
        let mut st = self.state.lock();
        // Any seqid of the stateid first, so a retransmission is recognised by its
        // owner's seqid and answered again; then the exact one.
        let f = st.stateid(sid, &fh, false, cx.now)?;
        if f.sid.open.is_some() || f.sid.lock {
            return Err(proto::BAD_STATEID);
        }
        let key = f.owner_key();
        if !sequence(&st, cx, &key, seqid)? {
            return Ok(());
        }
        if st.confirmed(&key) {
            return Err(proto::BAD_STATEID);
        }
        st.stateid(sid, &fh, true, cx.now)?;
        st.set_confirmed(&key);
        let next = st.bump(f.clientid, f.n).ok_or(proto::BAD_STATEID)?;
        put_stateid(out, next);
        Ok(())
    }

    pub(super) fn open_downgrade(
        &self,
        cx: &mut Ctx<'_>,
        sid: &Stateid,
        seqid: u32,
        access: u32,
        deny: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let fh = cur(cx)?;
        let mut st = self.state.lock();
        let f = open_owner(&mut st, sid, &fh, cx)?;
        if !sequence(&st, cx, &f.owner_key(), seqid)? {
            return Ok(());
        }
        st.stateid(sid, &fh, true, cx.now)?;
        put_stateid(out, st.downgrade(f.clientid, f.n, access, deny)?);
        Ok(())
    }

    /// CLOSE: the open stateid and its lock stateids are freed; refused while one of its
    /// lock owners still holds a lock on the file.
    pub(super) fn close(
        &self,
        cx: &mut Ctx<'_>,
        sid: &Stateid,
        seqid: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let fh = cur(cx)?;
        let mut st = self.state.lock();
        let f = open_owner(&mut st, sid, &fh, cx)?;
        if !sequence(&st, cx, &f.owner_key(), seqid)? {
            return Ok(());
        }
        let now = st.stateid(sid, &fh, true, cx.now)?;
        if st.open_holds_locks(f.clientid, f.n, &fh) {
            return Err(proto::LOCKS_HELD);
        }
        st.remove_stateid(f.clientid, f.n);
        put_stateid(
            out,
            Stateid {
                seqid: now.sid.seqid.wrapping_add(1),
                other: sid.other,
            },
        );
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn lock(
        &self,
        cx: &mut Ctx<'_>,
        write: bool,
        reclaim: bool,
        offset: u64,
        length: u64,
        locker: &Locker<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let fh = cur(cx)?;
        let mut st = self.state.lock();
        let (lock_key, open, first_seqid) = match *locker {
            Locker::New {
                open_seqid,
                open_stateid,
                lock_seqid,
                owner,
            } => {
                let f = open_owner(&mut st, &open_stateid, &fh, cx)?;
                if !sequence(&st, cx, &f.owner_key(), open_seqid)? {
                    return Ok(());
                }
                if owner.clientid != f.clientid {
                    return Err(proto::INVAL);
                }
                let key = OwnerKey {
                    lock: true,
                    clientid: owner.clientid,
                    owner: owner.owner.to_vec(),
                };
                (key, f, Some(lock_seqid))
            }
            Locker::Existing { stateid, seqid } => {
                let f = st.stateid(&stateid, &fh, false, cx.now)?;
                let Some(open) = f.sid.open else {
                    return Err(proto::BAD_STATEID);
                };
                let key = f.owner_key();
                if !sequence(&st, cx, &key, seqid)? {
                    return Ok(());
                }
                let open = Found {
                    n: open,
                    sid: st
                        .get(f.clientid, open)
                        .cloned()
                        .ok_or(proto::BAD_STATEID)?,
                    ..f
                };
                (key, open, None)
            }
        };
        // Checked after the seqid, which a bad range or a reclaim still consumes.
        let (start, end) = range(offset, length)?;
        if reclaim {
            return Err(proto::NO_GRACE);
        }
        if let Some(l) = st.conflict(&fh, &lock_key, start, end, write) {
            denied(out, l);
            return Err(proto::DENIED);
        }
        if write && open.sid.access & ACCESS_WRITE == 0 {
            // A write lock needs a file open for writing (as fcntl's F_WRLCK does).
            return Err(proto::OPENMODE);
        }
        let (_, made) = st.ensure_owner(&lock_key)?;
        let granted = st
            .set_range(fh, &lock_key, start, end, Some(write))
            .and_then(|()| st.lock_stateid(&lock_key, fh, open.n));
        let sid = match granted {
            Ok(sid) => sid,
            Err(e) => {
                if made {
                    st.drop_owner(&lock_key);
                }
                return Err(e);
            }
        };
        if let Some(first) = first_seqid {
            st.seq_seed(&lock_key, first)?;
        }
        put_stateid(out, sid);
        Ok(())
    }

    pub(super) fn lockt(
        &self,
        cx: &Ctx<'_>,
        write: bool,
        offset: u64,
        length: u64,
        owner: &Owner<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let fh = cur(cx)?;
        let (start, end) = range(offset, length)?;
        let mut st = self.state.lock();
        st.renew(owner.clientid, cx.now)?;
        let key = OwnerKey {
            lock: true,
            clientid: owner.clientid,
            owner: owner.owner.to_vec(),
        };
        if let Some(l) = st.conflict(&fh, &key, start, end, write) {
            denied(out, l);
            return Err(proto::DENIED);
        }
        Ok(())
    }

    pub(super) fn locku(
        &self,
        cx: &mut Ctx<'_>,
        sid: &Stateid,
        seqid: u32,
        offset: u64,
        length: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let fh = cur(cx)?;
        let mut st = self.state.lock();
        let f = st.stateid(sid, &fh, false, cx.now)?;
        if f.sid.open.is_none() {
            return Err(proto::BAD_STATEID);
        }
        let key = f.owner_key();
        if !sequence(&st, cx, &key, seqid)? {
            return Ok(());
        }
        let (start, end) = range(offset, length)?;
        st.set_range(fh, &key, start, end, None)?;
        put_stateid(out, st.bump(f.clientid, f.n).ok_or(proto::BAD_STATEID)?);
        Ok(())
    }

    pub(super) fn release_lockowner(&self, cx: &Ctx<'_>, owner: &Owner<'_>) -> Result<(), Status> {
        let mut st = self.state.lock();
        st.renew(owner.clientid, cx.now)?;
        st.release_lockowner(&OwnerKey {
            lock: true,
            clientid: owner.clientid,
            owner: owner.owner.to_vec(),
        })
    }
}

/// The open stateid of `fh` a request names, with its owner confirmed (any seqid not
/// newer than the current: the exact check follows the seqid check, so a
/// retransmission is recognised first).
fn open_owner(st: &mut State, sid: &Stateid, fh: &Fh, cx: &Ctx<'_>) -> Result<Found, Status> {
    let f = st.stateid(sid, fh, false, cx.now)?;
    if f.sid.open.is_some() || f.sid.lock {
        return Err(proto::BAD_STATEID);
    }
    if !st.confirmed(&f.owner_key()) {
        return Err(proto::BAD_STATEID);
    }
    Ok(f)
}
