//! Client records: SETCLIENTID (RFC 7530 §16.33.5, without principals: AUTH_SYS proves
//! nothing), SETCLIENTID_CONFIRM, RENEW, the lease sweep, and freeing a client with
//! everything it holds.
//!
//! A name has at most one confirmed and one unconfirmed record (`names`), so
//! SETCLIENTID finds them without looking at other clients. Each address may hold
//! [`Limits`](super::limits::Limits)' share of unconfirmed records: past it, its
//! oldest unconfirmed record is dropped for the new one (the RFC lets a server drop
//! unconfirmed records at any time; its client gets `STALE_CLIENTID` at CONFIRM and
//! starts over), so a flood of SETCLIENTIDs from one address only ever displaces its
//! own records.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::limits::{Kind, Usage};

/// Entries freed by one sweep past which the allocator is asked to return free memory
/// to the system (the freed entries are small allocations the allocator otherwise
/// keeps).
const TRIM_AFTER: usize = 1024;
use super::{Client, Names, State};
use crate::nfs4::proto::{self, Status};

impl State {
    /// SETCLIENTID from `addr`: a confirmed client with the same name and verifier keeps
    /// its client id (a callback update); any other case makes a new unconfirmed
    /// record, replacing the name's previous unconfirmed one.
    pub fn setclientid(
        &mut self,
        verf: [u8; 8],
        name: &[u8],
        addr: IpAddr,
        now: Instant,
    ) -> Result<(u64, [u8; 8]), Status> {
        let confirm = self.fresh_verifier();
        let names = self.names.get(name).copied().unwrap_or_default();
        if let Some(cid) = names.confirmed
            && let Some(c) = self.clients.get_mut(&cid)
            && c.verf == verf
        {
            c.confirm = confirm;
            c.renewed = now;
            return Ok((cid, confirm));
        }
        if let Some(old) = names.unconfirmed {
            self.purge(old);
        }
        let cid = self.new_client(name, false, addr, now)?;
        let c = self.clients.get_mut(&cid).expect("just made");
        c.verf = verf;
        c.confirm = confirm;
        Ok((cid, confirm))
    }

    /// A verifier nobody can guess from the client id it goes with.
    fn fresh_verifier(&mut self) -> [u8; 8] {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(self.next_client);
        h.finish().to_be_bytes()
    }

    /// Makes an unconfirmed client record for `name` (of EXCHANGE_ID when `v41`) from
    /// `addr`, within the caps: the address's oldest unconfirmed record goes first when
    /// it has made its share.
    pub(super) fn new_client(
        &mut self,
        name: &[u8],
        v41: bool,
        addr: IpAddr,
        now: Instant,
    ) -> Result<u64, Status> {
        let cap = self.limits.per_address.get(Kind::Unconfirmed);
        while self
            .addrs
            .get(&addr)
            .is_some_and(|a| a.usage.get(Kind::Unconfirmed) >= cap)
        {
            let Some(oldest) = self
                .addrs
                .get_mut(&addr)
                .and_then(|a| a.unconfirmed.pop_front())
            else {
                break;
            };
            if self.clients.get(&oldest).is_some_and(|c| !c.confirmed) {
                self.purge(oldest);
            }
        }
        let here = self.addrs.get(&addr).map(|a| a.usage).unwrap_or_default();
        let none = Usage::default();
        for kind in [Kind::Client, Kind::Unconfirmed] {
            // A client record is not its own client's to count: only the address's and
            // the total caps apply.
            if here.get(kind) >= self.limits.per_address.get(kind)
                || !self.limits.fits(kind, 1, &none, &none, &self.total)
            {
                tracing::debug!(%addr, ?kind, "NFSv4 client limit reached");
                return Err(proto::RESOURCE);
            }
        }
        self.next_client = self.next_client.wrapping_add(1);
        let cid = (u64::from(self.epoch) << 32) | u64::from(self.next_client);
        let name: Arc<[u8]> = name.into();
        let mut usage = Usage::default();
        usage.add(Kind::Client, 1);
        usage.add(Kind::Unconfirmed, 1);
        self.clients.insert(
            cid,
            Client {
                name: name.clone(),
                addr,
                verf: [0; 8],
                confirm: [0; 8],
                confirmed: false,
                renewed: now,
                open_owners: HashMap::new(),
                lock_owners: HashMap::new(),
                stateids: HashMap::new(),
                next_sid: 0,
                lock_files: HashMap::new(),
                usage,
                v41,
                sessions: Vec::new(),
                next_session: 0,
                create_seq: 0,
                last_create: None,
                reclaimed: false,
            },
        );
        let a = self.addrs.entry(addr).or_default();
        a.usage.add(Kind::Client, 1);
        a.usage.add(Kind::Unconfirmed, 1);
        a.unconfirmed.push_back(cid);
        self.total.add(Kind::Client, 1);
        self.total.add(Kind::Unconfirmed, 1);
        self.names_of(v41).entry(name).or_default().unconfirmed = Some(cid);
        Ok(cid)
    }

    /// SETCLIENTID's names, or EXCHANGE_ID's.
    fn names_of(&mut self, v41: bool) -> &mut HashMap<Arc<[u8]>, Names> {
        if v41 {
            &mut self.names41
        } else {
            &mut self.names
        }
    }

    /// SETCLIENTID_CONFIRM: confirms the record; an older confirmed record of the same
    /// name (its client rebooted) is freed with all its state.
    pub fn confirm(&mut self, cid: u64, verf: [u8; 8], now: Instant) -> Result<(), Status> {
        let c = self.clients.get_mut(&cid).ok_or(proto::STALE_CLIENTID)?;
        if c.confirm != verf {
            return Err(proto::STALE_CLIENTID);
        }
        c.renewed = now;
        if c.confirmed {
            return Ok(());
        }
        self.mark_confirmed(cid);
        Ok(())
    }

    /// Confirms client `cid`: it leaves its address's unconfirmed count, becomes its
    /// name's confirmed record, and the record it replaces is freed.
    pub(super) fn mark_confirmed(&mut self, cid: u64) {
        let c = self.clients.get_mut(&cid).expect("the caller found it");
        c.confirmed = true;
        c.usage.sub(Kind::Unconfirmed, 1);
        let (addr, name, v41) = (c.addr, c.name.clone(), c.v41);
        if let Some(a) = self.addrs.get_mut(&addr) {
            a.usage.sub(Kind::Unconfirmed, 1);
            a.unconfirmed.retain(|k| *k != cid);
        }
        self.total.sub(Kind::Unconfirmed, 1);
        let names = self.names_of(v41).entry(name).or_default();
        let older = names.confirmed.replace(cid).filter(|o| *o != cid);
        if names.unconfirmed == Some(cid) {
            names.unconfirmed = None;
        }
        if let Some(older) = older {
            self.purge(older);
        }
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
            _ => Err(self.unknown_client(cid)),
        }
    }

    /// Frees the state of clients whose lease ran out (at most once a second; the only
    /// pass over all clients, and it visits their records, not their state).
    pub fn sweep(&mut self, now: Instant) {
        if now.duration_since(self.last_sweep) < Duration::from_secs(1) {
            return;
        }
        self.last_sweep = now;
        let lease = self.lease;
        let gone: Vec<u64> = self
            .clients
            .iter()
            .filter(|(_, c)| now.duration_since(c.renewed) > lease)
            .map(|(&k, _)| k)
            .collect();
        if gone.is_empty() {
            return;
        }
        let before = self.held();
        for cid in gone {
            self.purge(cid);
            if self.expired.len() >= self.limits.total.get(Kind::Client) {
                self.expired.clear();
            }
            self.expired.insert(cid);
        }
        self.shrink();
        if before - self.held() >= TRIM_AFTER {
            crate::sys::give_back_memory();
        }
    }

    /// Owners, stateids and locks held by all clients.
    fn held(&self) -> usize {
        [Kind::Owner, Kind::Stateid, Kind::Lock]
            .iter()
            .map(|k| self.total.get(*k))
            .sum()
    }

    /// Gives back what emptied tables hold on to (their capacity stays at their
    /// largest otherwise).
    fn shrink(&mut self) {
        fn fit<K: std::hash::Hash + Eq, V>(m: &mut HashMap<K, V>) {
            if m.capacity() > 64 && m.len() < m.capacity() / 4 {
                m.shrink_to_fit();
            }
        }
        fit(&mut self.clients);
        fit(&mut self.names);
        fit(&mut self.names41);
        fit(&mut self.files);
        self.addrs.retain(|_, a| !a.usage.is_empty());
        fit(&mut self.addrs);
    }

    /// Frees a client and everything it holds: its stateids leave their files' share
    /// counts, its locks their files' lists.
    pub(super) fn purge(&mut self, cid: u64) {
        let Some(c) = self.clients.remove(&cid) else {
            return;
        };
        for s in c.stateids.values() {
            if s.open.is_none() && !s.lock {
                self.unshare(&s.fh, s.access, s.deny);
            }
        }
        for fh in c.lock_files.keys() {
            if let Some(f) = self.files.get_mut(fh) {
                f.locks.retain(|l| l.client != cid);
                if f.is_unused() {
                    self.files.remove(fh);
                }
            }
        }
        if let Some(a) = self.addrs.get_mut(&c.addr) {
            a.usage.sub_all(&c.usage);
            if !c.confirmed {
                a.unconfirmed.retain(|k| *k != cid);
            }
        }
        self.total.sub_all(&c.usage);
        let names = self.names_of(c.v41);
        if let Some(n) = names.get_mut(&c.name) {
            if n.confirmed == Some(cid) {
                n.confirmed = None;
            }
            if n.unconfirmed == Some(cid) {
                n.unconfirmed = None;
            }
            if matches!(
                n,
                Names {
                    confirmed: None,
                    unconfirmed: None
                }
            ) {
                names.remove(&c.name);
            }
        }
    }
}
