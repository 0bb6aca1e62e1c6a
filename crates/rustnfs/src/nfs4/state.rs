//! NFSv4.0 state (RFC 7530 §9): client ids and their leases, open and lock owners with
//! their seqids (and the last reply, for retransmissions), open and lock stateids, and
//! the byte-range lock table. All in memory, behind one lock held only while state is
//! read or changed (never across file-system work that can block).
//!
//! # Lease, expiry, grace
//! - Every client gets a [`LEASE_SECS`] lease (90 s, knfsd's and Ganesha's default).
//!   RENEW and every operation that names the client's state renew it. A client silent
//!   for longer loses everything — its opens, locks and owners are freed by
//!   [`State::sweep`], run at the start of COMPOUNDs at most once a second — so another
//!   client's conflicting lock is no longer refused.
//! - No grace period: the server keeps no state on disk, so after a restart it cannot
//!   tell a true reclaim from a false one, and a grace period would only delay every
//!   client's opens by a lease for nothing. It runs graceless: reclaims (OPEN with
//!   CLAIM_PREVIOUS, LOCK with `reclaim`) are `NFS4ERR_NO_GRACE`, and clients re-open
//!   and re-lock as new (the Linux client does this on its own). The price, documented:
//!   after a restart another client may take a lock first that the old holder then
//!   cannot get back.
//! - No delegations are ever given (every OPEN answers `OPEN_DELEGATE_NONE`), so no
//!   callback path is needed; the callback a client names in SETCLIENTID is ignored.
//!
//! # Bounds
//! Clients, owners, stateids and locks per file are capped ([`MAX_CLIENTS`] and the
//! rest): beyond them a request is `NFS4ERR_RESOURCE`, never an unbounded table.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::proto::{self, Status};
use crate::fs::Fh;

/// The lease time every client gets, in seconds.
pub const LEASE_SECS: u32 = 90;
const LEASE: Duration = Duration::from_secs(LEASE_SECS as u64);

pub const MAX_CLIENTS: usize = 4096;
pub const MAX_OWNERS: usize = 65_536;
pub const MAX_STATEIDS: usize = 65_536;
pub const MAX_LOCKS_PER_FILE: usize = 4096;

/// OPEN4_SHARE_ACCESS_READ / _WRITE.
pub const ACCESS_READ: u32 = 1;
pub const ACCESS_WRITE: u32 = 2;

/// A `stateid4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stateid {
    pub seqid: u32,
    pub other: [u8; 12],
}

impl Stateid {
    /// The anonymous stateid (all zeros): I/O without an open.
    pub fn is_anonymous(&self) -> bool {
        self.seqid == 0 && self.other == [0; 12]
    }
    /// The READ bypass stateid (all ones).
    pub fn is_bypass(&self) -> bool {
        self.seqid == u32::MAX && self.other == [0xff; 12]
    }
    /// An `other` of all zeros or all ones with any other seqid: reserved, never given
    /// out, `BAD_STATEID` (RFC 7530 §9.1.4.3).
    pub fn is_reserved(&self) -> bool {
        self.other == [0; 12] || self.other == [0xff; 12]
    }
}

/// An open or lock owner: which client, and its opaque name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OwnerKey {
    pub lock: bool,
    pub clientid: u64,
    pub owner: Vec<u8>,
}

/// What the server remembers of an owner.
struct Owner {
    /// The last seqid it used; `None` until its first seqid-consuming request.
    seqid: Option<u32>,
    /// Open owners start unconfirmed (OPEN4_RESULT_CONFIRM) until OPEN_CONFIRM.
    confirmed: bool,
    /// The last reply to a seqid-consuming request (the operation's result bytes and
    /// the current filehandle it left), sent again for a retransmission of it.
    last: Option<(Vec<u8>, Option<Fh>)>,
}

/// One client id.
struct Client {
    /// The client's `nfs_client_id4.id`.
    id: Vec<u8>,
    /// Its boot verifier: a new one means the client rebooted.
    verf: [u8; 8],
    /// The verifier SETCLIENTID_CONFIRM must present.
    confirm: [u8; 8],
    confirmed: bool,
    renewed: Instant,
}

/// An open or lock stateid.
#[derive(Debug, Clone)]
pub struct Sid {
    pub clientid: u64,
    pub owner: OwnerKey,
    pub fh: Fh,
    pub seqid: u32,
    /// Share access and deny (open stateids; a lock stateid copies its open's).
    pub access: u32,
    pub deny: u32,
    /// A lock stateid's open stateid.
    pub open: Option<[u8; 12]>,
}

/// One byte-range lock: `[start, end)`, `end == u64::MAX` meaning to the end of file.
#[derive(Debug, Clone)]
pub struct Lock {
    pub owner: OwnerKey,
    pub start: u64,
    pub end: u64,
    pub write: bool,
}

/// What a seqid check found.
pub enum Seq {
    /// Go ahead (the next seqid, or the first of a new owner).
    Go,
    /// A retransmission of the last request: send its reply again.
    Replay(Vec<u8>, Option<Fh>),
    Bad,
}

/// All NFSv4 state of this server instance.
pub struct State {
    /// This instance's start (seconds, truncated): the high half of client ids and the
    /// first word of stateids, so ids from before a restart are recognised as stale.
    epoch: u32,
    next: u64,
    clients: HashMap<u64, Client>,
    owners: HashMap<OwnerKey, Owner>,
    stateids: HashMap<[u8; 12], Sid>,
    /// (owner, file) → its stateid: one stateid per open owner and file, and per lock
    /// owner and file.
    by_owner: HashMap<(OwnerKey, Fh), [u8; 12]>,
    pub locks: HashMap<Fh, Vec<Lock>>,
    /// Client ids freed by lease expiry (answered `EXPIRED`, not `STALE_CLIENTID`).
    expired: std::collections::HashSet<u64>,
    last_sweep: Instant,
}

impl State {
    pub fn new(epoch: u32) -> State {
        State {
            epoch,
            next: 1,
            clients: HashMap::new(),
            owners: HashMap::new(),
            stateids: HashMap::new(),
            by_owner: HashMap::new(),
            locks: HashMap::new(),
            expired: Default::default(),
            last_sweep: Instant::now(),
        }
    }

    fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// SETCLIENTID (RFC 7530 §16.33.5, without principals: AUTH_SYS proves nothing): a
    /// confirmed client with the same id and verifier keeps its client id (a callback
    /// update); any other case makes a new unconfirmed record.
    pub fn setclientid(
        &mut self,
        verf: [u8; 8],
        id: &[u8],
        now: Instant,
    ) -> Result<(u64, [u8; 8]), Status> {
        let n = self.fresh();
        let confirm = (n ^ (u64::from(self.epoch) << 32)).to_be_bytes();
        if let Some((&cid, c)) = self
            .clients
            .iter_mut()
            .find(|(_, c)| c.confirmed && c.id == id && c.verf == verf)
        {
            c.confirm = confirm;
            c.renewed = now;
            return Ok((cid, confirm));
        }
        // Unconfirmed records of the same id are replaced.
        let stale: Vec<u64> = self
            .clients
            .iter()
            .filter(|(_, c)| !c.confirmed && c.id == id)
            .map(|(&k, _)| k)
            .collect();
        for k in stale {
            self.purge(k);
        }
        if self.clients.len() >= MAX_CLIENTS {
            return Err(proto::RESOURCE);
        }
        let cid = (u64::from(self.epoch) << 32) | (n & 0xffff_ffff);
        self.clients.insert(
            cid,
            Client {
                id: id.to_vec(),
                verf,
                confirm,
                confirmed: false,
                renewed: now,
            },
        );
        Ok((cid, confirm))
    }

    /// SETCLIENTID_CONFIRM: confirms the record; an older confirmed record of the same
    /// client (it rebooted) is freed with all its state.
    pub fn confirm(&mut self, cid: u64, verf: [u8; 8], now: Instant) -> Result<(), Status> {
        let c = self.clients.get_mut(&cid).ok_or(proto::STALE_CLIENTID)?;
        if c.confirm != verf {
            return Err(proto::STALE_CLIENTID);
        }
        c.confirmed = true;
        c.renewed = now;
        let id = c.id.clone();
        let older: Vec<u64> = self
            .clients
            .iter()
            .filter(|(k, c)| **k != cid && c.id == id)
            .map(|(&k, _)| k)
            .collect();
        for k in older {
            self.purge(k);
        }
        Ok(())
    }

    /// Checks a client id names a confirmed client, and renews its lease.
    pub fn renew(&mut self, cid: u64, now: Instant) -> Result<(), Status> {
        if (cid >> 32) as u32 != self.epoch {
            return Err(proto::STALE_CLIENTID);
        }
        match self.clients.get_mut(&cid) {
            Some(c) if c.confirmed => {
                c.renewed = now;
                Ok(())
            }
            _ if self.expired.contains(&cid) => Err(proto::EXPIRED),
            _ => Err(proto::STALE_CLIENTID),
        }
    }

    /// Frees the state of clients whose lease ran out (at most once a second).
    pub fn sweep(&mut self, now: Instant) {
        if now.duration_since(self.last_sweep) < Duration::from_secs(1) {
            return;
        }
        self.last_sweep = now;
        let gone: Vec<u64> = self
            .clients
            .iter()
            .filter(|(_, c)| now.duration_since(c.renewed) > LEASE)
            .map(|(&k, _)| k)
            .collect();
        for k in gone {
            self.purge(k);
            if self.expired.len() >= MAX_CLIENTS {
                self.expired.clear();
            }
            self.expired.insert(k);
        }
    }

    /// Frees a client and everything it holds.
    fn purge(&mut self, cid: u64) {
        self.clients.remove(&cid);
        self.owners.retain(|k, _| k.clientid != cid);
        self.stateids.retain(|_, s| s.clientid != cid);
        self.by_owner.retain(|(k, _), _| k.clientid != cid);
        for v in self.locks.values_mut() {
            v.retain(|l| l.owner.clientid != cid);
        }
        self.locks.retain(|_, v| !v.is_empty());
    }

    /// The seqid check of a request from `key` (RFC 7530 §9.1.7): the next seqid (or any
    /// seqid from an owner not seen yet) goes ahead, the last one again is a replay.
    pub fn seq_check(&self, key: &OwnerKey, seqid: u32) -> Seq {
        match self.owners.get(key) {
            None => Seq::Go,
            Some(Owner { seqid: None, .. }) => Seq::Go,
            Some(Owner {
                seqid: Some(last),
                last: cached,
                ..
            }) => {
                if seqid == last.wrapping_add(1) {
                    Seq::Go
                } else if seqid == *last
                    && let Some((reply, fh)) = cached
                {
                    Seq::Replay(reply.clone(), *fh)
                } else {
                    Seq::Bad
                }
            }
        }
    }

    /// Records that `key` used `seqid` for a request answered with `reply` (creating the
    /// owner on its first request).
    pub fn seq_done(
        &mut self,
        key: &OwnerKey,
        seqid: u32,
        reply: Vec<u8>,
        fh: Option<Fh>,
    ) -> Result<(), Status> {
        if !self.owners.contains_key(key) && self.owners.len() >= MAX_OWNERS {
            return Err(proto::RESOURCE);
        }
        let o = self.owners.entry(key.clone()).or_insert(Owner {
            seqid: None,
            confirmed: key.lock,
            last: None,
        });
        o.seqid = Some(seqid);
        o.last = Some((reply, fh));
        Ok(())
    }

    /// Whether an open owner has been confirmed (unknown owners are not).
    pub fn confirmed(&self, key: &OwnerKey) -> bool {
        self.owners.get(key).is_some_and(|o| o.confirmed)
    }

    /// An open owner that is known but was never confirmed is forgotten with its state:
    /// a new OPEN from it starts over (RFC 7530 §16.18.5).
    pub fn forget_unconfirmed(&mut self, key: &OwnerKey) {
        if self.owners.get(key).is_some_and(|o| !o.confirmed) {
            self.owners.remove(key);
            self.stateids.retain(|_, s| &s.owner != key);
            self.by_owner.retain(|(k, _), _| k != key);
        }
    }

    pub fn set_confirmed(&mut self, key: &OwnerKey) {
        if let Some(o) = self.owners.get_mut(key) {
            o.confirmed = true;
        }
    }

    /// The stateid a request names, checked: this instance's, known, of `fh`, and
    /// (when `exact`) of the current seqid; an older seqid is `OLD_STATEID`. Renews the
    /// lease of its client.
    pub fn stateid(
        &mut self,
        sid: &Stateid,
        fh: &Fh,
        exact: bool,
        now: Instant,
    ) -> Result<&mut Sid, Status> {
        if sid.other[..4] != self.epoch.to_be_bytes() {
            return Err(proto::STALE_STATEID);
        }
        let s = self.stateids.get(&sid.other).ok_or(proto::BAD_STATEID)?;
        if s.fh != *fh {
            return Err(proto::BAD_STATEID);
        }
        if sid.seqid > s.seqid {
            return Err(proto::BAD_STATEID);
        }
        if exact && sid.seqid < s.seqid {
            return Err(proto::OLD_STATEID);
        }
        let cid = s.clientid;
        match self.clients.get_mut(&cid) {
            Some(c) => c.renewed = now,
            None => return Err(proto::EXPIRED),
        }
        Ok(self.stateids.get_mut(&sid.other).expect("checked above"))
    }

    /// A stateid by its `other` (for a lock stateid's open).
    pub fn get(&self, other: &[u8; 12]) -> Option<&Sid> {
        self.stateids.get(other)
    }

    /// The stateid of `owner` on `fh`, made with `make` when there is none yet.
    pub fn stateid_for(
        &mut self,
        owner: &OwnerKey,
        fh: Fh,
        make: impl FnOnce() -> Sid,
    ) -> Result<&mut Sid, Status> {
        let key = (owner.clone(), fh);
        if let Some(other) = self.by_owner.get(&key).copied()
            && self.stateids.contains_key(&other)
        {
            return Ok(self.stateids.get_mut(&other).expect("checked"));
        }
        if self.stateids.len() >= MAX_STATEIDS {
            return Err(proto::RESOURCE);
        }
        let n = self.fresh();
        let mut other = [0u8; 12];
        other[..4].copy_from_slice(&self.epoch.to_be_bytes());
        other[4..].copy_from_slice(&n.to_be_bytes());
        self.by_owner.insert(key, other);
        Ok(self.stateids.entry(other).or_insert_with(make))
    }

    /// The `other` of the stateid `owner` holds on `fh`.
    pub fn other_of(&self, owner: &OwnerKey, fh: &Fh) -> Option<&[u8; 12]> {
        self.by_owner.get(&(owner.clone(), *fh))
    }

    /// The lock stateids made from the open stateid `open`.
    pub fn lock_stateids_of(&self, open: &[u8; 12]) -> impl Iterator<Item = &Sid> {
        let open = *open;
        self.stateids.values().filter(move |s| s.open == Some(open))
    }

    /// Gives a new lock owner its first seqid (LOCK with `open_to_lock_owner4`).
    pub fn seq_seed(&mut self, key: &OwnerKey, seqid: u32) -> Result<(), Status> {
        if !self.owners.contains_key(key) && self.owners.len() >= MAX_OWNERS {
            return Err(proto::RESOURCE);
        }
        let o = self.owners.entry(key.clone()).or_insert(Owner {
            seqid: None,
            confirmed: true,
            last: None,
        });
        if o.seqid.is_none() {
            o.seqid = Some(seqid);
        }
        Ok(())
    }

    /// Removes a stateid (CLOSE) and the lock stateids that hang off it.
    pub fn remove(&mut self, other: &[u8; 12]) {
        if let Some(s) = self.stateids.remove(other) {
            self.by_owner.remove(&(s.owner.clone(), s.fh));
        }
        let locks: Vec<[u8; 12]> = self
            .stateids
            .iter()
            .filter(|(_, s)| s.open.as_ref() == Some(other))
            .map(|(k, _)| *k)
            .collect();
        for k in locks {
            if let Some(s) = self.stateids.remove(&k) {
                self.by_owner.remove(&(s.owner, s.fh));
            }
        }
    }

    /// The open stateids of other owners on `fh` (share reservations).
    pub fn opens_of(&self, fh: &Fh) -> impl Iterator<Item = &Sid> {
        self.stateids
            .values()
            .filter(move |s| s.fh == *fh && s.open.is_none())
    }

    /// The share denies (`ACCESS_READ` / `ACCESS_WRITE` bits) every open of `fh` holds
    /// together: what I/O without an open of its own must respect.
    pub fn share_denied(&self, fh: &Fh) -> u32 {
        self.opens_of(fh).fold(0, |d, s| d | s.deny)
    }

    /// Whether `owner` holds any lock on `fh` (CLOSE refuses with LOCKS_HELD).
    pub fn holds_locks(&self, fh: &Fh, owner_of: impl Fn(&OwnerKey) -> bool) -> bool {
        self.locks
            .get(fh)
            .is_some_and(|v| v.iter().any(|l| owner_of(&l.owner)))
    }

    /// RELEASE_LOCKOWNER: forgets a lock owner and its stateids; `LOCKS_HELD` while it
    /// still holds a lock.
    pub fn release_lockowner(&mut self, key: &OwnerKey) -> Result<(), Status> {
        if self
            .locks
            .values()
            .any(|v| v.iter().any(|l| &l.owner == key))
        {
            return Err(proto::LOCKS_HELD);
        }
        self.owners.remove(key);
        self.stateids.retain(|_, s| &s.owner != key);
        self.by_owner.retain(|(k, _), _| k != key);
        Ok(())
    }

    /// The first lock on `fh` of another owner that conflicts with `[start, end)`.
    pub fn conflict(
        &self,
        fh: &Fh,
        owner: &OwnerKey,
        start: u64,
        end: u64,
        write: bool,
    ) -> Option<&Lock> {
        self.locks
            .get(fh)?
            .iter()
            .find(|l| &l.owner != owner && l.start < end && start < l.end && (write || l.write))
    }

    /// Sets (`Some(write)`) or clears (`None`) `[start, end)` for `owner` on `fh`, POSIX
    /// style: the owner's own overlapping ranges are split or replaced.
    pub fn set_range(
        &mut self,
        fh: Fh,
        owner: &OwnerKey,
        start: u64,
        end: u64,
        write: Option<bool>,
    ) -> Result<(), Status> {
        let v = self.locks.entry(fh).or_default();
        let mut kept = Vec::with_capacity(v.len() + 2);
        for l in v.drain(..) {
            if &l.owner != owner || l.end <= start || end <= l.start {
                kept.push(l);
                continue;
            }
            if l.start < start {
                kept.push(Lock {
                    end: start,
                    ..l.clone()
                });
            }
            if end < l.end {
                kept.push(Lock { start: end, ..l });
            }
        }
        if let Some(write) = write {
            kept.push(Lock {
                owner: owner.clone(),
                start,
                end,
                write,
            });
        }
        if kept.len() > MAX_LOCKS_PER_FILE {
            // Put back what was there: the table is unchanged by a refused request.
            let before: Vec<Lock> = kept
                .iter()
                .filter(|l| {
                    !(write.is_some() && &l.owner == owner && l.start == start && l.end == end)
                })
                .cloned()
                .collect();
            *v = before;
            return Err(proto::RESOURCE);
        }
        *v = kept;
        if v.is_empty() {
            self.locks.remove(&fh);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(c: u64, n: &[u8]) -> OwnerKey {
        OwnerKey {
            lock: true,
            clientid: c,
            owner: n.to_vec(),
        }
    }

    #[test]
    fn clients_confirm_renew_and_expire() {
        let t0 = Instant::now();
        let mut s = State::new(7);
        let (cid, verf) = s.setclientid([1; 8], b"me", t0).unwrap();
        assert_eq!(s.renew(cid, t0), Err(proto::STALE_CLIENTID), "unconfirmed");
        assert_eq!(s.confirm(cid, [9; 8], t0), Err(proto::STALE_CLIENTID));
        s.confirm(cid, verf, t0).unwrap();
        s.renew(cid, t0).unwrap();
        // Another epoch's client id is stale.
        assert_eq!(s.renew(cid ^ (1 << 40), t0), Err(proto::STALE_CLIENTID));
        // A lock it holds goes with its lease.
        let fh = Fh::new(1, 2);
        s.set_range(fh, &owner(cid, b"o"), 0, 10, Some(true))
            .unwrap();
        s.sweep(t0 + Duration::from_secs(LEASE_SECS as u64 + 5));
        assert!(s.locks.is_empty());
        assert_eq!(s.renew(cid, t0), Err(proto::EXPIRED));
    }

    #[test]
    fn a_rebooted_client_loses_its_old_state() {
        let t0 = Instant::now();
        let mut s = State::new(7);
        let (a, va) = s.setclientid([1; 8], b"me", t0).unwrap();
        s.confirm(a, va, t0).unwrap();
        s.set_range(Fh::new(1, 2), &owner(a, b"o"), 0, 10, Some(true))
            .unwrap();
        let (b, vb) = s.setclientid([2; 8], b"me", t0).unwrap();
        assert_ne!(a, b);
        s.confirm(b, vb, t0).unwrap();
        assert!(s.locks.is_empty());
        assert_eq!(s.renew(a, t0), Err(proto::STALE_CLIENTID));
    }

    #[test]
    fn ranges_split_merge_and_conflict() {
        let mut s = State::new(1);
        let fh = Fh::new(1, 2);
        let (a, b) = (owner(1, b"a"), owner(1, b"b"));
        s.set_range(fh, &a, 0, 100, Some(true)).unwrap();
        assert!(s.conflict(&fh, &b, 50, 60, false).is_some());
        assert!(s.conflict(&fh, &b, 100, 200, true).is_none());
        assert!(
            s.conflict(&fh, &a, 0, 10, true).is_none(),
            "own locks never conflict"
        );
        // Unlock the middle: two pieces remain.
        s.set_range(fh, &a, 40, 60, None).unwrap();
        assert!(s.conflict(&fh, &b, 45, 55, true).is_none());
        assert!(s.conflict(&fh, &b, 30, 45, true).is_some());
        assert_eq!(s.locks[&fh].len(), 2);
        // Read locks share.
        s.set_range(fh, &a, 0, u64::MAX, None).unwrap();
        assert!(s.locks.is_empty());
        s.set_range(fh, &a, 0, u64::MAX, Some(false)).unwrap();
        assert!(s.conflict(&fh, &b, 0, 1, false).is_none());
        assert!(s.conflict(&fh, &b, 5, 6, true).is_some());
        assert_eq!(s.release_lockowner(&a), Err(proto::LOCKS_HELD));
    }

    #[test]
    fn seqids_go_forward_and_replay() {
        let mut s = State::new(1);
        let k = owner(1, b"o");
        assert!(matches!(s.seq_check(&k, 5), Seq::Go));
        s.seq_done(&k, 5, vec![0, 0, 0, 0], None).unwrap();
        assert!(matches!(s.seq_check(&k, 6), Seq::Go));
        assert!(matches!(s.seq_check(&k, 5), Seq::Replay(..)));
        assert!(matches!(s.seq_check(&k, 9), Seq::Bad));
        s.seq_done(&k, u32::MAX, vec![], None).unwrap();
        assert!(matches!(s.seq_check(&k, 0), Seq::Go), "seqids wrap");
    }
}
