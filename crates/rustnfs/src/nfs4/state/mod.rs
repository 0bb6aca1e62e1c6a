//! NFSv4 state (RFC 7530 §9, RFC 8881 §8): client records and their leases, open and
//! lock owners with their seqids (and the last reply, for retransmissions), open and
//! lock stateids, per-file share reservations and byte-range locks. All in memory,
//! behind one lock held only while state is read or changed (never across file-system
//! work that can block).
//!
//! # Keyed by client
//! Each client record holds its own owners and stateids; a stateid's `other` and a
//! session id carry the client they belong to, so finding state never looks at another
//! client's. What clients share is kept per file (`files`): the share reservation
//! counts every OPEN checks in O(1), and the file's byte-range locks (at most
//! [`Limits::locks_per_file`]). Freeing a client (a lease run out, a rebooted client's
//! old record, a replaced unconfirmed one) visits only its own state and the files it
//! holds locks on. Every kind of state is counted and capped per client, per address
//! and in total (`limits`).
//!
//! - `clients`: SETCLIENTID, SETCLIENTID_CONFIRM, RENEW; the lease sweep; freeing a
//!   client.
//! - `owners`: owners and the seqid rules of v4.0.
//! - `files`: stateids, share reservations and the byte-range lock table.
//! - `sessions`: NFSv4.1's EXCHANGE_ID records, sessions and their slots.
//! - `records`: what the tables hold (owners, a file's shared state, locks, sessions).
//!
//! # Lease, expiry, grace
//! - Every client gets a lease ([`DEFAULT_LEASE`], 90 s, knfsd's and Ganesha's default;
//!   `--nfs4-lease`). RENEW and every operation that names the client's state renew it.
//!   A client silent for longer loses everything — its opens, locks and owners are
//!   freed by [`State::sweep`], run at the start of COMPOUNDs at most once a second —
//!   so another client's conflicting lock is no longer refused, and the memory is
//!   given back.
//! - No grace period: the server keeps no state on disk, so after a restart it cannot
//!   tell a true reclaim from a false one, and a grace period would only delay every
//!   client's opens by a lease for nothing. It runs graceless: reclaims (OPEN with
//!   CLAIM_PREVIOUS, LOCK with `reclaim`) are `NFS4ERR_NO_GRACE`, and clients re-open
//!   and re-lock as new (the Linux client does this on its own). The price, documented:
//!   after a restart another client may take a lock first that the old holder then
//!   cannot get back.
//! - No delegations are ever given (every OPEN answers `OPEN_DELEGATE_NONE`), so no
//!   callback path is needed; the callback a client names in SETCLIENTID is ignored.

mod clients;
mod files;
pub mod limits;
mod owners;
mod records;
pub mod sessions;

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::proto::{self, Status};
use crate::fs::Fh;
use limits::{Kind, Limits, Usage};
pub use records::{ACCESS_READ, ACCESS_WRITE, Lock};
use records::{File, Owner, Session};

/// The lease every client gets unless the server is told otherwise.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(90);

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

/// An open or lock owner as a request names it: which client, and its opaque name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OwnerKey {
    pub lock: bool,
    pub clientid: u64,
    pub owner: Vec<u8>,
}

/// An open or lock stateid, as the tables keep it.
#[derive(Debug, Clone)]
pub struct Sid {
    /// Whose: the owner's name (shared with the owner's entry), and whether it is a
    /// lock owner.
    pub lock: bool,
    pub owner: Arc<[u8]>,
    pub fh: Fh,
    pub seqid: u32,
    /// Share access and deny (open stateids; 0 in lock stateids).
    pub access: u32,
    pub deny: u32,
    /// A lock stateid's open stateid (its number within the client).
    pub open: Option<u32>,
}

/// A stateid found by [`State::stateid`]: its client, its number there, and a copy.
#[derive(Debug, Clone)]
pub struct Found {
    pub clientid: u64,
    pub n: u32,
    pub sid: Sid,
}

impl Found {
    /// The owner that holds it, as requests name owners.
    pub fn owner_key(&self) -> OwnerKey {
        OwnerKey {
            lock: self.sid.lock,
            clientid: self.clientid,
            owner: self.sid.owner.to_vec(),
        }
    }
}

/// What a seqid check found.
pub enum Seq {
    /// Go ahead (the next seqid, or the first of a new owner).
    Go,
    /// A retransmission of the last request: send its reply again.
    Replay(Vec<u8>, Option<Fh>),
    Bad,
}

/// One client record.
struct Client {
    /// The client's `nfs_client_id4.id`.
    name: Arc<[u8]>,
    addr: IpAddr,
    /// Its boot verifier: a new one means the client rebooted.
    verf: [u8; 8],
    /// The verifier SETCLIENTID_CONFIRM must present.
    confirm: [u8; 8],
    confirmed: bool,
    renewed: Instant,
    open_owners: HashMap<Arc<[u8]>, Owner>,
    lock_owners: HashMap<Arc<[u8]>, Owner>,
    /// Its stateids by number (the last word of their `other`).
    stateids: HashMap<u32, Sid>,
    next_sid: u32,
    /// The files it holds byte-range locks on, with how many.
    lock_files: HashMap<Fh, usize>,
    usage: Usage,
    /// Made by EXCHANGE_ID (v4.1+), not SETCLIENTID.
    v41: bool,
    /// v4.1+: its sessions, the CREATE_SESSION sequence id it must send next and the
    /// last CREATE_SESSION reply (for a retransmission), whether it sent
    /// RECLAIM_COMPLETE.
    sessions: Vec<Session>,
    next_session: u32,
    create_seq: u32,
    last_create: Option<Box<[u8]>>,
    reclaimed: bool,
}

/// Who uses a client name: its confirmed record and the one waiting for confirmation
/// (RFC 7530 §16.33.5 allows one of each).
#[derive(Debug, Default, Clone, Copy)]
struct Names {
    confirmed: Option<u64>,
    unconfirmed: Option<u64>,
}

/// What one address holds: its counts, and its unconfirmed client ids oldest first
/// (the first to go when it makes more than its share).
#[derive(Debug, Default)]
struct Address {
    usage: Usage,
    unconfirmed: VecDeque<u64>,
}

/// All NFSv4 state of this server instance.
pub struct State {
    /// This instance's start (truncated): the high half of client ids and the first
    /// word of stateids, so ids from before a restart are recognised as stale.
    epoch: u32,
    next_client: u32,
    lease: Duration,
    limits: Limits,
    clients: HashMap<u64, Client>,
    /// SETCLIENTID's names and EXCHANGE_ID's, kept apart (a v4.0 and a v4.1 mount of
    /// one client are two clients).
    names: HashMap<Arc<[u8]>, Names>,
    names41: HashMap<Arc<[u8]>, Names>,
    addrs: HashMap<IpAddr, Address>,
    files: HashMap<Fh, File>,
    total: Usage,
    /// Client ids freed by lease expiry (answered `EXPIRED`, not `STALE_CLIENTID`),
    /// at most as many as there may be clients.
    expired: HashSet<u64>,
    last_sweep: Instant,
}

impl State {
    pub fn new(epoch: u32, lease: Duration, limits: Limits) -> State {
        State {
            epoch,
            next_client: 0,
            lease,
            limits,
            clients: HashMap::new(),
            names: HashMap::new(),
            names41: HashMap::new(),
            addrs: HashMap::new(),
            files: HashMap::new(),
            total: Usage::default(),
            expired: HashSet::new(),
            last_sweep: Instant::now(),
        }
    }

    /// What all clients hold together.
    #[cfg(test)]
    pub fn total(&self) -> Usage {
        self.total
    }

    /// The client a client id names, if it is of this instance and known.
    fn client_mut(&mut self, cid: u64) -> Option<&mut Client> {
        self.clients.get_mut(&cid)
    }

    /// `STALE_CLIENTID` for another instance's id, `EXPIRED` for one whose lease ran
    /// out, `STALE_CLIENTID` for one never seen.
    pub(super) fn unknown_client(&self, cid: u64) -> Status {
        if (cid >> 32) as u32 == self.epoch && self.expired.contains(&cid) {
            proto::EXPIRED
        } else {
            proto::STALE_CLIENTID
        }
    }

    /// Counts `n` more of `kind` for client `cid` (its record, its address and the
    /// total), or `RESOURCE` when one of them would go over its cap.
    fn charge(&mut self, cid: u64, kind: Kind, n: usize) -> Result<(), Status> {
        let c = self.clients.get(&cid).ok_or(proto::STALE_CLIENTID)?;
        let addr = self.addrs.get(&c.addr).map(|a| a.usage).unwrap_or_default();
        if !self.limits.fits(kind, n, &c.usage, &addr, &self.total) {
            tracing::debug!(cid, ?kind, "NFSv4 state limit reached");
            return Err(proto::RESOURCE);
        }
        let addr = c.addr;
        self.clients
            .get_mut(&cid)
            .expect("checked")
            .usage
            .add(kind, n);
        self.addrs.entry(addr).or_default().usage.add(kind, n);
        self.total.add(kind, n);
        Ok(())
    }

    /// Uncounts `n` of `kind` for client `cid`.
    fn refund(&mut self, cid: u64, kind: Kind, n: usize) {
        let Some(c) = self.clients.get_mut(&cid) else {
            return;
        };
        c.usage.sub(kind, n);
        let addr = c.addr;
        if let Some(a) = self.addrs.get_mut(&addr) {
            a.usage.sub(kind, n);
        }
        self.total.sub(kind, n);
    }

    /// The `other` of stateid `n` of client `cid`: this instance, the client, the number.
    pub fn other_of(&self, cid: u64, n: u32) -> [u8; 12] {
        self.other(cid, n)
    }

    fn other(&self, cid: u64, n: u32) -> [u8; 12] {
        let mut o = [0u8; 12];
        o[..4].copy_from_slice(&self.epoch.to_be_bytes());
        o[4..8].copy_from_slice(&(cid as u32).to_be_bytes());
        o[8..].copy_from_slice(&n.to_be_bytes());
        o
    }

    /// The client and number a stateid's `other` names, or why it names none.
    fn locate(&self, other: &[u8; 12]) -> Result<(u64, u32), Status> {
        if other[..4] != self.epoch.to_be_bytes() {
            return Err(proto::STALE_STATEID);
        }
        let low = u32::from_be_bytes([other[4], other[5], other[6], other[7]]);
        let n = u32::from_be_bytes([other[8], other[9], other[10], other[11]]);
        Ok(((u64::from(self.epoch) << 32) | u64::from(low), n))
    }

    /// The stateid a request names, checked: this instance's, known, of `fh`, and
    /// (when `exact`) of the current seqid; an older seqid is `OLD_STATEID`, and in
    /// v4.1+ (`v41`) seqid 0 means the current one. Renews the lease of its client.
    pub fn stateid(
        &mut self,
        sid: &Stateid,
        fh: &Fh,
        exact: bool,
        v41: bool,
        now: Instant,
    ) -> Result<Found, Status> {
        let (cid, n) = self.locate(&sid.other)?;
        let Some(c) = self.clients.get_mut(&cid) else {
            return Err(if self.expired.contains(&cid) {
                proto::EXPIRED
            } else {
                proto::BAD_STATEID
            });
        };
        let s = c.stateids.get(&n).ok_or(proto::BAD_STATEID)?;
        let any = v41 && sid.seqid == 0;
        if s.fh != *fh || (!any && sid.seqid > s.seqid) {
            return Err(proto::BAD_STATEID);
        }
        if exact && !any && sid.seqid < s.seqid {
            return Err(proto::OLD_STATEID);
        }
        let sid = s.clone();
        c.renewed = now;
        Ok(Found {
            clientid: cid,
            n,
            sid,
        })
    }

    /// TEST_STATEID of one stateid of client `cid` (RFC 8881 §18.48): its status as a
    /// READ would see it, without renewing anything.
    pub fn test_stateid(&self, cid: u64, sid: &Stateid) -> Status {
        if sid.is_reserved() {
            return proto::BAD_STATEID;
        }
        let Ok((owner, n)) = self.locate(&sid.other) else {
            return proto::BAD_STATEID;
        };
        match self.get(owner, n) {
            Some(_) if owner != cid => proto::BAD_STATEID,
            Some(s) if sid.seqid != 0 && sid.seqid > s.seqid => proto::BAD_STATEID,
            Some(s) if sid.seqid != 0 && sid.seqid < s.seqid => proto::OLD_STATEID,
            Some(_) => proto::OK,
            None if self.expired.contains(&owner) => proto::EXPIRED,
            None => proto::BAD_STATEID,
        }
    }

    /// FREE_STATEID (RFC 8881 §18.38): a lock stateid whose owner holds no lock on its
    /// file goes; an open stateid, or a lock stateid still locking, is `LOCKS_HELD`.
    pub fn free_stateid(&mut self, cid: u64, sid: &Stateid) -> Result<(), Status> {
        let status = self.test_stateid(cid, sid);
        if status != proto::OK {
            return Err(status);
        }
        let (_, n) = self.locate(&sid.other)?;
        let s = self.get(cid, n).ok_or(proto::BAD_STATEID)?;
        let held = s.open.is_none()
            || self.files.get(&s.fh).is_some_and(|f| {
                f.locks
                    .iter()
                    .any(|l| l.client == cid && l.owner == s.owner)
            });
        if held {
            return Err(proto::LOCKS_HELD);
        }
        self.remove_stateid(cid, n);
        Ok(())
    }

    /// Stateid `n` of client `cid` (a lock stateid's open).
    pub fn get(&self, cid: u64, n: u32) -> Option<&Sid> {
        self.clients.get(&cid)?.stateids.get(&n)
    }

    /// The stateid as the wire carries it.
    pub fn wire(&self, cid: u64, n: u32) -> Option<Stateid> {
        let s = self.get(cid, n)?;
        Some(Stateid {
            seqid: s.seqid,
            other: self.other(cid, n),
        })
    }

    /// Advances stateid `n` of client `cid` to its next seqid; returns it.
    pub fn bump(&mut self, cid: u64, n: u32) -> Option<Stateid> {
        let s = self.client_mut(cid)?.stateids.get_mut(&n)?;
        s.seqid = s.seqid.wrapping_add(1);
        self.wire(cid, n)
    }
}

#[cfg(test)]
mod tests;
