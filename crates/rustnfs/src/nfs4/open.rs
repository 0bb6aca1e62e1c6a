//! The operations on state: SETCLIENTID, OPEN / OPEN_CONFIRM / OPEN_DOWNGRADE / CLOSE,
//! LOCK / LOCKT / LOCKU / RELEASE_LOCKOWNER, and the stateid check READ, WRITE and
//! SETATTR make. The tables themselves are in `state`; what the file system does (the
//! create of OPEN) is `DirFs`'s, outside the state lock.

use nfs3_types::nfs3::{
    Nfs3Option, createhow3, createverf3, fattr3, ftype3, post_op_attr, pre_op_attr, sattr3,
    wcc_attr, wcc_data,
};

use super::args::{Claim, How, Locker, OpenArgs, Owner};
use super::attr;
use super::ops::{check_name, cinfo};
use super::proto::{self, Status};
use super::state::{ACCESS_READ, ACCESS_WRITE, Found, Lock, OwnerKey, Seq, State, Stateid};
use super::xdr;
use super::{Ctx, Io, Nfs4, cur};

use crate::fs::Fh;

fn put_stateid(out: &mut Vec<u8>, sid: Stateid) {
    xdr::u32(out, sid.seqid);
    xdr::fixed(out, &sid.other);
}

/// The change info of a directory (or file) that did not change.
fn unchanged(a: &fattr3) -> wcc_data {
    wcc_data {
        before: pre_op_attr::Some(wcc_attr {
            size: a.size,
            mtime: a.mtime,
            ctime: a.ctime,
        }),
        after: post_op_attr::Some(a.clone()),
    }
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
    if cx.minor > 0 {
        // v4.1+: owners' seqids are not used; the session's slot orders requests.
        return Ok(true);
    }
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

/// The client an owner names: in v4.1+ always the session's (the owner's own field is
/// not to be trusted, RFC 8881 §18.16.3), in v4.0 the one named.
fn client_of(cx: &Ctx<'_>, named: u64) -> Result<u64, Status> {
    match (cx.minor, cx.slot) {
        (0, _) => Ok(named),
        (_, Some(s)) => Ok(s.clientid),
        (_, None) => Err(proto::OP_NOT_IN_SESSION),
    }
}

/// In v4.1+, a stateid must be the session's client's (`BAD_STATEID`).
fn owned(cx: &Ctx<'_>, f: &Found) -> Result<(), Status> {
    match cx.slot {
        Some(s) if cx.minor > 0 && s.clientid != f.clientid => Err(proto::BAD_STATEID),
        _ => Ok(()),
    }
}

/// The stateid a request names (v4.1's current stateid resolved), checked as
/// [`State::stateid`] does and owned by the session's client.
fn found(
    st: &mut State,
    cx: &Ctx<'_>,
    sid: &Stateid,
    fh: &Fh,
    exact: bool,
) -> Result<Found, Status> {
    let sid = super::resolve(cx, sid)?;
    let f = st.stateid(&sid, fh, exact, cx.minor > 0, cx.now)?;
    owned(cx, &f)?;
    Ok(f)
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
        let sid = &super::resolve(cx, sid)?;
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
        let f = found(&mut st, cx, sid, fh, false)?;
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
            clientid: client_of(cx, a.owner.clientid)?,
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
        let here = cur(cx)?;
        // v4.1's "want" bits (delegations) are in the upper bits: none is ever given.
        let access = if cx.minor > 0 {
            a.access & 0xff
        } else {
            a.access
        };
        if !(1..=3).contains(&access) || a.deny > 3 {
            return Err(proto::INVAL);
        }
        let (fh, wcc, attrset) = match a.claim {
            Claim::Null(name) => {
                self.dir(&here)?;
                check_name(name)?;
                self.open_file(cx, &here, name, a, access)?
            }
            Claim::Fh if a.create.is_none() => {
                let fa = self.fs.attr(&here).map_err(proto::from_v3)?;
                self.may_open(cx, &here, &fa, access)?;
                (here, unchanged(&fa), 0)
            }
            Claim::Fh => return Err(proto::INVAL),
            Claim::Previous | Claim::DelegatePrevFh => return Err(proto::NO_GRACE),
            Claim::DelegateCur | Claim::DelegateCurFh => return Err(proto::BAD_STATEID),
            Claim::DelegatePrev => return Err(proto::RECLAIM_BAD),
        };
        let (sid, confirm) = {
            let mut st = self.state.lock();
            if st.share_conflict(&fh, &key, access, a.deny) {
                tracing::debug!(owner = ?key.owner, "OPEN refused by a share reservation");
                return Err(proto::SHARE_DENIED);
            }
            let (sid, _) = st.open_stateid(&key, fh, access, a.deny)?;
            (sid, !st.confirmed(&key))
        };
        put_stateid(out, sid);
        cinfo(out, &wcc);
        // OPEN4_RESULT_LOCKTYPE_POSIX, and OPEN4_RESULT_CONFIRM for a new v4.0 owner.
        xdr::u32(out, 4 | if confirm { 2 } else { 0 });
        xdr::bitmap(out, attrset);
        xdr::u32(out, 0); // OPEN_DELEGATE_NONE
        cx.cur = Some(fh);
        cx.current_sid = Some(sid);
        Ok(())
    }

    /// Whether the caller may open a file with these attributes for `access`: a
    /// regular file (`ISDIR`, `SYMLINK`, `INVAL` otherwise), not written on a read-only
    /// export, with the permission the access needs.
    fn may_open(&self, cx: &Ctx<'_>, fh: &Fh, fa: &fattr3, access: u32) -> Result<(), Status> {
        match fa.type_ {
            ftype3::NF3REG => {}
            ftype3::NF3DIR => return Err(proto::ISDIR),
            ftype3::NF3LNK => return Err(proto::SYMLINK),
            _ => return Err(proto::INVAL),
        }
        if access & ACCESS_WRITE != 0 && self.fs.read_only_at(fh) {
            return Err(proto::ROFS);
        }
        let ok = self.fs.allowed(fh, fa, cx.caller);
        let need = (if access & ACCESS_READ != 0 { 1 } else { 0 })
            | (if access & ACCESS_WRITE != 0 { 4 } else { 0 });
        if ok & need != need {
            return Err(proto::ACCESS);
        }
        Ok(())
    }

    /// The file-system part of OPEN by name: the file found or made, the directory's
    /// change info, and the attributes applied. An existing file opened without
    /// EXCLUSIVE or GUARDED is checked against the caller's rights for the access
    /// asked, and only a size in the create attributes applies to it (the RFC's
    /// UNCHECKED4). EXCLUSIVE4_1's attributes are applied after the create (its
    /// verifier is kept in the times, as EXCLUSIVE4's and v3's).
    fn open_file(
        &self,
        cx: &Ctx<'_>,
        dir: &Fh,
        name: &[u8],
        a: &OpenArgs<'_>,
        access: u32,
    ) -> Result<(Fh, wcc_data, u128), Status> {
        let (found, _) = self.fs.lookup(dir, name);
        let existing = match found {
            Ok(f) => Some(f),
            Err(nfs3_types::nfs3::nfsstat3::NFS3ERR_NOENT) => None,
            Err(s) => return Err(proto::from_v3(s)),
        };
        let dir_unchanged = || {
            self.fs
                .attr(dir)
                .map_or_else(|_| wcc_data::default(), |a| unchanged(&a))
        };
        match (a.create, existing) {
            (None, None) => Err(proto::NOENT),
            (None | Some(How::Unchecked(_)), Some((fh, fa))) => {
                self.may_open(cx, &fh, &fa, access)?;
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
                Ok((fh, dir_unchanged(), attrset))
            }
            (Some(How::Guarded(_)), Some(_)) => Err(proto::EXIST),
            (Some(how), _) => {
                let mut after = None;
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
                    // The verifier is kept in the access and modification times, and
                    // `attrset` says so (RFC 7530 §16.16.5): the client then sets them
                    // (to now) itself. Without the bits the Linux client left them
                    // holding the verifier — times years away after every O_EXCL create.
                    How::Exclusive(v) => (createhow3::EXCLUSIVE(createverf3(v)), attr::WRITE_ONLY),
                    How::Exclusive41(v, f) => {
                        let set = attr::decode_settable(f.mask, f.vals)?;
                        if set.mask & !attr::EXCLCREAT != 0 {
                            return Err(proto::INVAL);
                        }
                        after = Some(set);
                        (createhow3::EXCLUSIVE(createverf3(v)), attr::WRITE_ONLY)
                    }
                };
                let (r, wcc) = self.fs.create(dir, name, &how3);
                let (fh, _) = r.map_err(proto::from_v3)?;
                let mut mask = mask;
                if let Some(set) = after.filter(|s| s.mask != 0) {
                    let (r, _) = self.fs.setattr(&fh, &set.sattr, None);
                    r.map_err(proto::from_v3)?;
                    mask |= set.mask;
                }
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
        let f = found(&mut st, cx, sid, &fh, false)?;
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
        found(&mut st, cx, sid, &fh, true)?;
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
        found(&mut st, cx, sid, &fh, true)?;
        let next = st.downgrade(f.clientid, f.n, access, deny)?;
        put_stateid(out, next);
        cx.current_sid = Some(next);
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
        let now = found(&mut st, cx, sid, &fh, true)?;
        if st.open_holds_locks(f.clientid, f.n, &fh) {
            return Err(proto::LOCKS_HELD);
        }
        st.remove_stateid(f.clientid, f.n);
        // v4.1+ answers the invalid special stateid (RFC 8881 §18.2.4), v4.0 the
        // stateid's next seqid.
        let last = if cx.minor > 0 {
            Stateid {
                seqid: u32::MAX,
                other: [0; 12],
            }
        } else {
            Stateid {
                seqid: now.sid.seqid.wrapping_add(1),
                other: now_other(&st, &now),
            }
        };
        put_stateid(out, last);
        cx.current_sid = None;
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
                if cx.minor == 0 && owner.clientid != f.clientid {
                    return Err(proto::INVAL);
                }
                let key = OwnerKey {
                    lock: true,
                    clientid: f.clientid,
                    owner: owner.owner.to_vec(),
                };
                (key, f, Some(lock_seqid))
            }
            Locker::Existing { stateid, seqid } => {
                let f = found(&mut st, cx, &stateid, &fh, false)?;
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
        if let Some(first) = first_seqid.filter(|_| cx.minor == 0) {
            st.seq_seed(&lock_key, first)?;
        }
        put_stateid(out, sid);
        cx.current_sid = Some(sid);
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
        let clientid = client_of(cx, owner.clientid)?;
        st.renew(clientid, cx.now)?;
        let key = OwnerKey {
            lock: true,
            clientid,
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
        let f = found(&mut st, cx, sid, &fh, false)?;
        if f.sid.open.is_none() {
            return Err(proto::BAD_STATEID);
        }
        let key = f.owner_key();
        if !sequence(&st, cx, &key, seqid)? {
            return Ok(());
        }
        let (start, end) = range(offset, length)?;
        st.set_range(fh, &key, start, end, None)?;
        let next = st.bump(f.clientid, f.n).ok_or(proto::BAD_STATEID)?;
        put_stateid(out, next);
        cx.current_sid = Some(next);
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

/// The `other` of a stateid just found (its number within its client).
fn now_other(st: &State, f: &Found) -> [u8; 12] {
    st.other_of(f.clientid, f.n)
}

/// The open stateid of `fh` a request names, with its owner confirmed (any seqid not
/// newer than the current: the exact check follows the seqid check, so a
/// retransmission is recognised first).
fn open_owner(st: &mut State, sid: &Stateid, fh: &Fh, cx: &Ctx<'_>) -> Result<Found, Status> {
    let f = found(st, cx, sid, fh, false)?;
    if f.sid.open.is_some() || f.sid.lock {
        return Err(proto::BAD_STATEID);
    }
    if !st.confirmed(&f.owner_key()) {
        return Err(proto::BAD_STATEID);
    }
    Ok(f)
}
