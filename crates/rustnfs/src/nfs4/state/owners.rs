//! Open and lock owners, each kept in its client's record, and the seqid rules of
//! NFSv4.0 (RFC 7530 §9.1.7): the next seqid goes ahead, the last one again is a
//! retransmission answered with the owner's last reply, anything else is
//! `BAD_SEQID`. An owner is counted against its client's caps from its first
//! seqid-consuming request.

use std::collections::HashMap;
use std::sync::Arc;

use super::limits::Kind;
use super::records::Owner;
use super::{Client, OwnerKey, Seq, State};
use crate::fs::Fh;
use crate::nfs4::proto::{self, Status};

impl Client {
    pub(super) fn owners(&self, lock: bool) -> &HashMap<Arc<[u8]>, Owner> {
        if lock {
            &self.lock_owners
        } else {
            &self.open_owners
        }
    }

    pub(super) fn owners_mut(&mut self, lock: bool) -> &mut HashMap<Arc<[u8]>, Owner> {
        if lock {
            &mut self.lock_owners
        } else {
            &mut self.open_owners
        }
    }

    /// The owner's entry and its shared name.
    pub(super) fn owner(&self, lock: bool, name: &[u8]) -> Option<(&Arc<[u8]>, &Owner)> {
        self.owners(lock).get_key_value(name)
    }
}

impl State {
    fn owner(&self, key: &OwnerKey) -> Option<&Owner> {
        self.clients
            .get(&key.clientid)?
            .owners(key.lock)
            .get(key.owner.as_slice())
    }

    fn owner_mut(&mut self, key: &OwnerKey) -> Option<&mut Owner> {
        self.clients
            .get_mut(&key.clientid)?
            .owners_mut(key.lock)
            .get_mut(key.owner.as_slice())
    }

    /// The owner's shared name, making its entry when there is none (counted; `RESOURCE`
    /// over the caps). Returns the name and whether it was made now.
    pub fn ensure_owner(&mut self, key: &OwnerKey) -> Result<(Arc<[u8]>, bool), Status> {
        let c = self
            .clients
            .get(&key.clientid)
            .ok_or(proto::STALE_CLIENTID)?;
        if let Some((name, _)) = c.owner(key.lock, &key.owner) {
            return Ok((name.clone(), false));
        }
        let v41 = c.v41;
        self.charge(key.clientid, Kind::Owner, 1)?;
        let name: Arc<[u8]> = key.owner.as_slice().into();
        let owner = Owner {
            // Lock owners, and every owner in v4.1+, need no OPEN_CONFIRM.
            confirmed: key.lock || v41,
            ..Owner::default()
        };
        self.clients
            .get_mut(&key.clientid)
            .expect("checked")
            .owners_mut(key.lock)
            .insert(name.clone(), owner);
        Ok((name, true))
    }

    /// Forgets an owner that holds nothing (made by a request that then failed).
    pub fn drop_owner(&mut self, key: &OwnerKey) {
        let empty = self
            .owner(key)
            .is_some_and(|o| o.files.is_empty() && o.seqid.is_none());
        if empty {
            self.remove_owner(key);
        }
    }

    /// The seqid check of a request from `key` (RFC 7530 §9.1.7): the next seqid (or any
    /// seqid from an owner not seen yet) goes ahead, the last one again is a replay.
    pub fn seq_check(&self, key: &OwnerKey, seqid: u32) -> Seq {
        match self.owner(key) {
            None | Some(Owner { seqid: None, .. }) => Seq::Go,
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
                    Seq::Replay(reply.to_vec(), *fh)
                } else {
                    Seq::Bad
                }
            }
        }
    }

    /// Records that `key` used `seqid` for a request answered with `reply` (making the
    /// owner on its first request).
    pub fn seq_done(
        &mut self,
        key: &OwnerKey,
        seqid: u32,
        reply: Vec<u8>,
        fh: Option<Fh>,
    ) -> Result<(), Status> {
        self.ensure_owner(key)?;
        let o = self.owner_mut(key).expect("ensured");
        o.seqid = Some(seqid);
        o.last = Some((reply.into_boxed_slice(), fh));
        Ok(())
    }

    /// Gives a new lock owner its first seqid (LOCK with `open_to_lock_owner4`).
    pub fn seq_seed(&mut self, key: &OwnerKey, seqid: u32) -> Result<(), Status> {
        self.ensure_owner(key)?;
        let o = self.owner_mut(key).expect("ensured");
        if o.seqid.is_none() {
            o.seqid = Some(seqid);
        }
        Ok(())
    }

    /// Whether an open owner has been confirmed (unknown owners are not).
    pub fn confirmed(&self, key: &OwnerKey) -> bool {
        self.owner(key).is_some_and(|o| o.confirmed)
    }

    pub fn set_confirmed(&mut self, key: &OwnerKey) {
        if let Some(o) = self.owner_mut(key) {
            o.confirmed = true;
        }
    }

    /// An open owner that is known but was never confirmed is forgotten with its state:
    /// a new OPEN from it starts over (RFC 7530 §16.18.5).
    pub fn forget_unconfirmed(&mut self, key: &OwnerKey) {
        if self.owner(key).is_some_and(|o| !o.confirmed) {
            self.remove_owner(key);
        }
    }

    /// RELEASE_LOCKOWNER: forgets a lock owner and its stateids; `LOCKS_HELD` while it
    /// still holds a lock.
    pub fn release_lockowner(&mut self, key: &OwnerKey) -> Result<(), Status> {
        let Some(c) = self.clients.get(&key.clientid) else {
            return Ok(());
        };
        if c.owner(true, &key.owner).is_none() {
            return Ok(());
        }
        let holds = c.lock_files.keys().any(|fh| {
            self.files.get(fh).is_some_and(|f| {
                f.locks
                    .iter()
                    .any(|l| l.client == key.clientid && *l.owner == *key.owner)
            })
        });
        if holds {
            return Err(proto::LOCKS_HELD);
        }
        self.remove_owner(key);
        Ok(())
    }

    /// Removes an owner and its stateids (the caller has seen it holds no lock).
    fn remove_owner(&mut self, key: &OwnerKey) {
        let Some(c) = self.clients.get_mut(&key.clientid) else {
            return;
        };
        let Some(o) = c.owners_mut(key.lock).remove(key.owner.as_slice()) else {
            return;
        };
        self.refund(key.clientid, Kind::Owner, 1);
        for n in o.files.into_values() {
            self.remove_stateid(key.clientid, n);
        }
    }
}
