//! What clients share per file: the share reservations of every open (counted per
//! access and deny bit, so an OPEN's check costs the same however many opens there
//! are), and the byte-range locks of every client (a list of at most
//! `locks_per_file`); and the stateids that make them, kept in their clients' records.

use std::sync::Arc;

use super::limits::Kind;
use super::records::{File, Lock};
use super::{OwnerKey, Sid, State, Stateid};
use crate::fs::Fh;
use crate::nfs4::proto::{self, Status};

impl State {
    /// The share denies every open of `fh` holds together: what I/O without an open of
    /// its own must respect.
    pub fn share_denied(&self, fh: &Fh) -> u32 {
        self.files.get(fh).map_or(0, |f| File::bits(&f.deny))
    }

    /// Whether an OPEN by `key` for `access`/`deny` conflicts with the other opens of
    /// `fh` (the owner's own open of it does not count).
    pub fn share_conflict(&self, fh: &Fh, key: &OwnerKey, access: u32, deny: u32) -> bool {
        let Some(f) = self.files.get(fh) else {
            return false;
        };
        let (mut acc, mut den) = (f.access, f.deny);
        if let Some(s) = self.own_open(fh, key) {
            File::count(&mut acc, s.access, false);
            File::count(&mut den, s.deny, false);
        }
        File::bits(&den) & access != 0 || File::bits(&acc) & deny != 0
    }

    /// The open stateid `key` holds on `fh`.
    fn own_open(&self, fh: &Fh, key: &OwnerKey) -> Option<&Sid> {
        let c = self.clients.get(&key.clientid)?;
        let (_, o) = c.owner(false, &key.owner)?;
        c.stateids.get(o.files.get(fh)?)
    }

    fn share(&mut self, fh: Fh, access: u32, deny: u32) {
        let f = self.files.entry(fh).or_default();
        File::count(&mut f.access, access, true);
        File::count(&mut f.deny, deny, true);
    }

    pub(super) fn unshare(&mut self, fh: &Fh, access: u32, deny: u32) {
        if let Some(f) = self.files.get_mut(fh) {
            File::count(&mut f.access, access, false);
            File::count(&mut f.deny, deny, false);
            if f.is_unused() {
                self.files.remove(fh);
            }
        }
    }

    /// The stateid of `key` on `fh`, made (and counted) when there is none: its number.
    fn stateid_of(&mut self, key: &OwnerKey, fh: Fh, open: Option<u32>) -> Result<u32, Status> {
        let (name, made_owner) = self.ensure_owner(key)?;
        let c = self.clients.get(&key.clientid).expect("ensured");
        if let Some(n) = c.owners(key.lock)[&name].files.get(&fh) {
            return Ok(*n);
        }
        if let Err(s) = self.charge(key.clientid, Kind::Stateid, 1) {
            if made_owner {
                self.drop_owner(key);
            }
            return Err(s);
        }
        let c = self.clients.get_mut(&key.clientid).expect("ensured");
        c.next_sid = c.next_sid.wrapping_add(1);
        let n = c.next_sid;
        c.stateids.insert(
            n,
            Sid {
                lock: key.lock,
                owner: name.clone(),
                fh,
                seqid: 0,
                access: 0,
                deny: 0,
                open,
            },
        );
        c.owners_mut(key.lock)
            .get_mut(&name)
            .expect("ensured")
            .files
            .insert(fh, n);
        Ok(n)
    }

    /// OPEN: the open stateid of `key` on `fh` (made when none), its access and deny
    /// widened by these, its seqid advanced. Returns it and its number.
    pub fn open_stateid(
        &mut self,
        key: &OwnerKey,
        fh: Fh,
        access: u32,
        deny: u32,
    ) -> Result<(Stateid, u32), Status> {
        let n = self.stateid_of(key, fh, None)?;
        let s = &self.clients[&key.clientid].stateids[&n];
        let (old_access, old_deny) = (s.access, s.deny);
        self.set_share(key.clientid, n, old_access | access, old_deny | deny);
        let sid = self.bump(key.clientid, n).expect("just made");
        Ok((sid, n))
    }

    /// OPEN_DOWNGRADE: access and deny narrowed to these (each a subset of what the
    /// stateid holds, else `INVAL`), the seqid advanced.
    pub fn downgrade(
        &mut self,
        cid: u64,
        n: u32,
        access: u32,
        deny: u32,
    ) -> Result<Stateid, Status> {
        let s = self.get(cid, n).ok_or(proto::BAD_STATEID)?;
        if access == 0 || access & !s.access != 0 || deny & !s.deny != 0 {
            return Err(proto::INVAL);
        }
        self.set_share(cid, n, access, deny);
        self.bump(cid, n).ok_or(proto::BAD_STATEID)
    }

    fn set_share(&mut self, cid: u64, n: u32, access: u32, deny: u32) {
        let Some(s) = self
            .clients
            .get_mut(&cid)
            .and_then(|c| c.stateids.get_mut(&n))
        else {
            return;
        };
        let (fh, old_access, old_deny) = (s.fh, s.access, s.deny);
        s.access = access;
        s.deny = deny;
        self.unshare(&fh, old_access, old_deny);
        self.share(fh, access, deny);
    }

    /// LOCK: the lock stateid of `key` on `fh` (made from open stateid `open` when
    /// none), its seqid advanced.
    pub fn lock_stateid(&mut self, key: &OwnerKey, fh: Fh, open: u32) -> Result<Stateid, Status> {
        let n = self.stateid_of(key, fh, Some(open))?;
        self.bump(key.clientid, n).ok_or(proto::BAD_STATEID)
    }

    /// Whether a lock owner of a lock stateid made from open stateid `n` still holds a
    /// lock on `fh` (CLOSE refuses with `LOCKS_HELD`).
    pub fn open_holds_locks(&self, cid: u64, n: u32, fh: &Fh) -> bool {
        let (Some(c), Some(f)) = (self.clients.get(&cid), self.files.get(fh)) else {
            return false;
        };
        c.stateids
            .values()
            .filter(|s| s.open == Some(n))
            .any(|s| f.locks.iter().any(|l| l.is_of(cid, &s.owner)))
    }

    /// CLOSE (and the end of an owner): removes a stateid, and an open stateid's lock
    /// stateids with it.
    pub fn remove_stateid(&mut self, cid: u64, n: u32) {
        let Some(c) = self.clients.get_mut(&cid) else {
            return;
        };
        let Some(s) = c.stateids.remove(&n) else {
            return;
        };
        if let Some(o) = c.owners_mut(s.lock).get_mut(&s.owner) {
            o.files.remove(&s.fh);
        }
        let locks: Vec<u32> = if s.open.is_none() {
            c.stateids
                .iter()
                .filter(|(_, l)| l.open == Some(n))
                .map(|(k, _)| *k)
                .collect()
        } else {
            Vec::new()
        };
        self.refund(cid, Kind::Stateid, 1);
        if s.open.is_none() && !s.lock {
            self.unshare(&s.fh, s.access, s.deny);
        }
        for k in locks {
            self.remove_stateid(cid, k);
        }
    }

    /// The first lock on `fh` of another owner that conflicts with `[start, end)`.
    pub fn conflict(
        &self,
        fh: &Fh,
        key: &OwnerKey,
        start: u64,
        end: u64,
        write: bool,
    ) -> Option<&Lock> {
        self.files.get(fh)?.locks.iter().find(|l| {
            !l.is_of(key.clientid, &key.owner)
                && l.start < end
                && start < l.end
                && (write || l.write)
        })
    }

    /// Sets (`Some(write)`) or clears (`None`) `[start, end)` for lock owner `key` on
    /// `fh`, POSIX style: the owner's own overlapping ranges are split or replaced. Over
    /// a cap (the file's list, the owner's client, address or all) it is `RESOURCE` and
    /// nothing changes.
    pub fn set_range(
        &mut self,
        fh: Fh,
        key: &OwnerKey,
        start: u64,
        end: u64,
        write: Option<bool>,
    ) -> Result<(), Status> {
        let cid = key.clientid;
        let owner = self
            .clients
            .get(&cid)
            .and_then(|c| c.owner(true, &key.owner))
            .map_or_else(|| Arc::from(key.owner.as_slice()), |(n, _)| n.clone());
        // First what the change would do (nothing is touched if it is refused): the
        // owner's ranges it overlaps go, the parts of them outside it stay.
        let overlaps = |l: &Lock| l.is_of(cid, &owner) && l.start < end && start < l.end;
        let old: &[Lock] = self.files.get(&fh).map_or(&[], |f| &f.locks);
        let (mut removed, mut pieces) = (0usize, Vec::new());
        for l in old.iter().filter(|l| overlaps(l)) {
            removed += 1;
            if l.start < start {
                pieces.push(Lock {
                    end: start,
                    ..l.clone()
                });
            }
            if end < l.end {
                pieces.push(Lock {
                    start: end,
                    ..l.clone()
                });
            }
        }
        if let Some(write) = write {
            pieces.push(Lock {
                client: cid,
                owner: owner.clone(),
                start,
                end,
                write,
            });
        }
        if old.len() - removed + pieces.len() > self.limits.locks_per_file {
            return Err(proto::RESOURCE);
        }
        let (before, after) = (removed, pieces.len());
        if after > before {
            self.charge(cid, Kind::Lock, after - before)?;
        } else {
            self.refund(cid, Kind::Lock, before - after);
        }
        let f = self.files.entry(fh).or_default();
        if removed > 0 {
            f.locks.retain(|l| !overlaps(l));
        }
        f.locks.extend(pieces);
        if f.is_unused() {
            self.files.remove(&fh);
        }
        if let Some(c) = self.clients.get_mut(&cid) {
            let held = c.lock_files.entry(fh).or_default();
            *held = *held + after - before;
            if *held == 0 {
                c.lock_files.remove(&fh);
            }
        }
        Ok(())
    }
}
