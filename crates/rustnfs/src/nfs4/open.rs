//! The operations on state: SETCLIENTID, OPEN / OPEN_CONFIRM / OPEN_DOWNGRADE / CLOSE,
//! LOCK / LOCKT / LOCKU / RELEASE_LOCKOWNER, and the stateid check READ, WRITE and
//! SETATTR make. The tables themselves are in `state`; what the file system does (the
//! create of OPEN) is `DirFs`'s, outside the state lock.

use nfs3_types::nfs3::{Nfs3Option, createhow3, createverf3, ftype3, sattr3, wcc_data};

use super::args::{Claim, How, Locker, OpenArgs, Owner};
use super::attr;
use super::ops::{check_name, cinfo};
use super::proto::{self, Status};
use super::state::{ACCESS_READ, ACCESS_WRITE, Lock, OwnerKey, Seq, Sid, State, Stateid};
use super::xdr;
use super::{Ctx, Nfs4, cur};
use crate::fs::Fh;

fn put_stateid(out: &mut Vec<u8>, seqid: u32, other: &[u8; 12]) {
    xdr::u32(out, seqid);
    xdr::fixed(out, other);
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
    xdr::u64(out, l.owner.clientid);
    xdr::opaque(out, &l.owner.owner);
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
        let (cid, confirm) = self.state.lock().setclientid(verf, id, cx.now)?;
        xdr::u64(out, cid);
        xdr::fixed(out, &confirm);
        Ok(())
    }

    /// The stateid check of READ, WRITE and SETATTR(size): the anonymous stateid is
    /// allowed (and the READ bypass one for reading); any other must be an open or lock
    /// stateid of this file of a seqid not newer than the current one (older ones are
    /// accepted: the Linux client reads with the stateid it had while an OPEN upgrades
    /// it). Writing needs an open with write access (`OPENMODE`); reading is allowed
    /// with any open, as knfsd allows it.
    pub(super) fn check_io(
        &self,
        cx: &Ctx<'_>,
        sid: &Stateid,
        fh: &Fh,
        write: bool,
    ) -> Result<(), Status> {
        if sid.is_anonymous() {
            return Ok(());
        }
        if sid.is_bypass() {
            return if write {
                Err(proto::BAD_STATEID)
            } else {
                Ok(())
            };
        }
        let mut st = self.state.lock();
        let s = st.stateid(sid, fh, false, cx.now)?;
        let (open, mut access) = (s.open, s.access);
        if let Some(open) = open {
            access = st.get(&open).map_or(0, |o| o.access);
        }
        if write && access & ACCESS_WRITE == 0 {
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
            if let Some(other) = st
                .opens_of(&fh)
                .find(|s| s.owner != key && (s.deny & a.access != 0 || a.deny & s.access != 0))
            {
                tracing::debug!(?other.owner, "OPEN refused by a share reservation");
                return Err(proto::SHARE_DENIED);
            }
            let s = st.stateid_for(&key, fh, || Sid {
                clientid: key.clientid,
                owner: key.clone(),
                fh,
                seqid: 0,
                access: 0,
                deny: 0,
                open: None,
            })?;
            s.seqid = s.seqid.wrapping_add(1);
            s.access |= a.access;
            s.deny |= a.deny;
            let sid = (s.seqid, *other_of(&st, &key, &fh));
            (sid, !st.confirmed(&key))
        };
        put_stateid(out, sid.0, &sid.1);
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
                if a.access & ACCESS_WRITE != 0 && self.fs.read_only_at(&fh) {
                    return Err(proto::ROFS);
                }
                let ok = self.fs.allowed(&fh, &fa, cx.caller);
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
        let s = st.stateid(sid, &fh, false, cx.now)?;
        if s.open.is_some() {
            return Err(proto::BAD_STATEID);
        }
        let key = s.owner.clone();
        if !sequence(&st, cx, &key, seqid)? {
            return Ok(());
        }
        if st.confirmed(&key) {
            return Err(proto::BAD_STATEID);
        }
        st.stateid(sid, &fh, true, cx.now)?;
        st.set_confirmed(&key);
        let s = st.stateid(sid, &fh, true, cx.now)?;
        s.seqid = s.seqid.wrapping_add(1);
        put_stateid(out, s.seqid, &sid.other);
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
        let key = open_owner(&mut st, sid, &fh, cx)?;
        if !sequence(&st, cx, &key, seqid)? {
            return Ok(());
        }
        let s = st.stateid(sid, &fh, true, cx.now)?;
        if access == 0 || access & !s.access != 0 || deny & !s.deny != 0 {
            return Err(proto::INVAL);
        }
        s.access = access;
        s.deny = deny;
        s.seqid = s.seqid.wrapping_add(1);
        put_stateid(out, s.seqid, &sid.other);
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
        let key = open_owner(&mut st, sid, &fh, cx)?;
        if !sequence(&st, cx, &key, seqid)? {
            return Ok(());
        }
        let s = st.stateid(sid, &fh, true, cx.now)?;
        let next = s.seqid.wrapping_add(1);
        let lockers: Vec<OwnerKey> = st
            .lock_stateids_of(&sid.other)
            .map(|s| s.owner.clone())
            .collect();
        if st.holds_locks(&fh, |o| lockers.contains(o)) {
            return Err(proto::LOCKS_HELD);
        }
        st.remove(&sid.other);
        put_stateid(out, next, &sid.other);
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
        let (lock_key, open_other, first_seqid) = match *locker {
            Locker::New {
                open_seqid,
                open_stateid,
                lock_seqid,
                owner,
            } => {
                let okey = open_owner(&mut st, &open_stateid, &fh, cx)?;
                if !sequence(&st, cx, &okey, open_seqid)? {
                    return Ok(());
                }
                if owner.clientid != okey.clientid {
                    return Err(proto::INVAL);
                }
                let key = OwnerKey {
                    lock: true,
                    clientid: owner.clientid,
                    owner: owner.owner.to_vec(),
                };
                (key, open_stateid.other, Some(lock_seqid))
            }
            Locker::Existing { stateid, seqid } => {
                let s = st.stateid(&stateid, &fh, false, cx.now)?;
                let Some(open) = s.open else {
                    return Err(proto::BAD_STATEID);
                };
                let key = s.owner.clone();
                if !sequence(&st, cx, &key, seqid)? {
                    return Ok(());
                }
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
        if let Some(open) = st.get(&open_other)
            && write
            && open.access & ACCESS_WRITE == 0
        {
            // A write lock needs a file open for writing (as fcntl's F_WRLCK does).
            return Err(proto::OPENMODE);
        }
        st.set_range(fh, &lock_key, start, end, Some(write))?;
        let clientid = lock_key.clientid;
        let s = st.stateid_for(&lock_key, fh, || Sid {
            clientid,
            owner: lock_key.clone(),
            fh,
            seqid: 0,
            access: 0,
            deny: 0,
            open: Some(open_other),
        })?;
        s.seqid = s.seqid.wrapping_add(1);
        let seqid = s.seqid;
        let other = *other_of(&st, &lock_key, &fh);
        if let Some(first) = first_seqid {
            st.seq_seed(&lock_key, first)?;
        }
        put_stateid(out, seqid, &other);
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
        let s = st.stateid(sid, &fh, false, cx.now)?;
        if s.open.is_none() {
            return Err(proto::BAD_STATEID);
        }
        let key = s.owner.clone();
        if !sequence(&st, cx, &key, seqid)? {
            return Ok(());
        }
        let (start, end) = range(offset, length)?;
        st.set_range(fh, &key, start, end, None)?;
        let s = st.stateid(sid, &fh, false, cx.now)?;
        s.seqid = s.seqid.wrapping_add(1);
        put_stateid(out, s.seqid, &sid.other);
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

/// The open owner of an open stateid of `fh` (any seqid not newer than the current:
/// the exact check follows the seqid check, so a retransmission is recognised first).
fn open_owner(st: &mut State, sid: &Stateid, fh: &Fh, cx: &Ctx<'_>) -> Result<OwnerKey, Status> {
    let s = st.stateid(sid, fh, false, cx.now)?;
    if s.open.is_some() {
        return Err(proto::BAD_STATEID);
    }
    let key = s.owner.clone();
    if !st.confirmed(&key) {
        return Err(proto::BAD_STATEID);
    }
    Ok(key)
}

/// The `other` of the stateid `key` holds on `fh` (just made or found).
fn other_of<'s>(st: &'s State, key: &OwnerKey, fh: &Fh) -> &'s [u8; 12] {
    st.other_of(key, fh).unwrap_or(&[0; 12])
}
