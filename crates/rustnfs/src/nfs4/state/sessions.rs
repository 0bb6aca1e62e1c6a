//! NFSv4.1 client records and sessions (RFC 8881 §2.10, §18.35–18.37, §18.46): a
//! client record made by EXCHANGE_ID and confirmed by its first CREATE_SESSION, each
//! session a table of slots whose last reply is kept for a retransmission (exactly
//! once: a request that comes again on its slot with the same sequence id gets the
//! reply it had, and runs no second time).
//!
//! Sessions live in their client's record (a session id carries its client, as a
//! stateid does), are counted against the same caps as the rest of its state, and go
//! with it when its lease runs out. A slot keeps a reply of at most the size the
//! client asked to be cached (at most [`SLOT_CACHE_MAX`]): a session holds at most
//! [`SLOTS_MAX`] of them.

use std::net::IpAddr;
use std::time::Instant;

use super::limits::{Kind, SLOT_CACHE_MAX, SLOTS_MAX};
pub use super::records::Channel;
use super::records::{Session, Slot};
use super::{Client, State};
use crate::nfs4::proto::{self, Status};

/// EXCHGID4_FLAG_UPD_CONFIRMED_REC_A, EXCHGID4_FLAG_CONFIRMED_R,
/// EXCHGID4_FLAG_USE_NON_PNFS.
pub const UPD_CONFIRMED_REC: u32 = 0x4000_0000;
pub const CONFIRMED_R: u32 = 0x8000_0000;
pub const USE_NON_PNFS: u32 = 0x0001_0000;

/// What a call's RPC header and AUTH_SYS credential take at most, beside its arguments.
const RPC_CALL_HEADER: usize = 40 + 400 + 8;
/// Most connections remembered as bound to one session (the oldest is forgotten).
const CONNS_MAX: usize = 16;
/// The smallest request and reply a fore channel must allow: a SEQUENCE and a little.
const CHANNEL_MIN: u32 = 256;
/// A fingerprint of a COMPOUND's arguments: their length and first 512 bytes (where a
/// retransmission and a different request sent with the same sequence id differ; the
/// whole of a 1 MiB WRITE is not worth hashing for that).
pub fn request_print(args: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    args.len().hash(&mut h);
    args[..args.len().min(512)].hash(&mut h);
    h.finish()
}

/// What SEQUENCE found.
pub enum Sequenced {
    /// A new request: go ahead (finish the slot with [`State::finish_slot`]).
    Go(SlotRef),
    /// A retransmission of a request answered before: its COMPOUND reply.
    Replay(Vec<u8>),
}

/// A slot being answered: whose, which session, which slot, and how much of its reply
/// may be kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotRef {
    pub clientid: u64,
    pub session: [u8; 16],
    pub slot: u32,
    pub highest: u32,
    pub max_response: u32,
    pub max_cached: u32,
    pub max_ops: u32,
    pub max_request: u32,
}

/// What CREATE_SESSION found: a new session (its id and fore channel), or a
/// retransmission's reply to send again.
pub enum Created {
    New([u8; 16], Channel),
    Again(Vec<u8>),
}

/// What EXCHANGE_ID answers.
pub struct Exchanged {
    pub clientid: u64,
    pub seq: u32,
    pub flags: u32,
}

impl Client {
    fn session_mut(&mut self, id: &[u8; 16]) -> Option<&mut Session> {
        self.sessions.iter_mut().find(|s| s.id == *id)
    }
}

impl State {
    /// EXCHANGE_ID from `addr` (RFC 8881 §18.35.5, without principals: AUTH_SYS proves
    /// nothing): the confirmed record of `name` with the same verifier is the client
    /// again; an update of the confirmed record needs its verifier (`NOT_SAME`) and a
    /// record (`NOENT`); anything else makes a new unconfirmed record, replacing the
    /// name's unconfirmed one — a client that rebooted keeps its old record, and state,
    /// until its first CREATE_SESSION confirms the new one.
    pub fn exchange_id(
        &mut self,
        verf: [u8; 8],
        name: &[u8],
        flags: u32,
        addr: IpAddr,
        now: Instant,
    ) -> Result<Exchanged, Status> {
        let names = self.names41.get(name).copied().unwrap_or_default();
        let confirmed = names
            .confirmed
            .and_then(|cid| Some((cid, self.clients.get(&cid)?.verf)));
        if flags & UPD_CONFIRMED_REC != 0 {
            return match confirmed {
                Some((cid, v)) if v == verf => Ok(self.exchanged(cid, now)),
                Some(_) => Err(proto::NOT_SAME),
                None => Err(proto::NOENT),
            };
        }
        if let Some((cid, v)) = confirmed
            && v == verf
        {
            return Ok(self.exchanged(cid, now));
        }
        if let Some(old) = names.unconfirmed {
            self.purge(old);
        }
        let cid = self.new_client(name, true, addr, now)?;
        let c = self.clients.get_mut(&cid).expect("just made");
        c.verf = verf;
        c.create_seq = 1;
        Ok(Exchanged {
            clientid: cid,
            seq: 1,
            flags: USE_NON_PNFS,
        })
    }

    fn exchanged(&mut self, cid: u64, now: Instant) -> Exchanged {
        let c = self.clients.get_mut(&cid).expect("the caller found it");
        c.renewed = now;
        Exchanged {
            clientid: cid,
            seq: c.create_seq,
            flags: USE_NON_PNFS | CONFIRMED_R,
        }
    }

    /// CREATE_SESSION (RFC 8881 §18.36): `seq` must be the client's next (the one before
    /// it is a retransmission, answered with `cached`'s reply); the first confirms the
    /// record. Returns the new session's id and its fore channel as granted, or the
    /// reply to send again.
    /// `most` is what this server can take and build: the largest request, reply and
    /// COMPOUND (the slots and the cached reply are capped here).
    pub fn create_session(
        &mut self,
        cid: u64,
        seq: u32,
        asked: Channel,
        most: Channel,
        conn: u64,
        now: Instant,
    ) -> Result<Created, Status> {
        let c = self
            .clients
            .get(&cid)
            .ok_or_else(|| self.unknown_client(cid))?;
        if !c.v41 {
            return Err(proto::STALE_CLIENTID);
        }
        if seq == c.create_seq.wrapping_sub(1)
            && let Some(reply) = &c.last_create
        {
            return Ok(Created::Again(reply.to_vec()));
        }
        if seq != c.create_seq {
            return Err(proto::SEQ_MISORDERED);
        }
        if asked.max_request < CHANNEL_MIN || asked.max_response < CHANNEL_MIN {
            return Err(proto::TOOSMALL);
        }
        self.charge(cid, Kind::Session, 1)?;
        let fore = Channel {
            headerpad: 0,
            max_request: asked.max_request.min(most.max_request),
            max_response: asked.max_response.min(most.max_response),
            max_response_cached: asked.max_response_cached.min(SLOT_CACHE_MAX),
            max_ops: asked.max_ops.clamp(1, most.max_ops),
            max_requests: asked.max_requests.clamp(1, SLOTS_MAX),
        };
        let c = self.clients.get_mut(&cid).expect("found above");
        c.next_session = c.next_session.wrapping_add(1);
        let mut id = [0u8; 16];
        id[..4].copy_from_slice(&self.epoch.to_be_bytes());
        id[4..8].copy_from_slice(&(cid as u32).to_be_bytes());
        id[8..12].copy_from_slice(&c.next_session.to_be_bytes());
        c.sessions.push(Session {
            id,
            fore,
            slots: (0..fore.max_requests).map(|_| Slot::default()).collect(),
            conns: vec![conn],
        });
        c.renewed = now;
        if !c.confirmed {
            self.mark_confirmed(cid);
        }
        Ok(Created::New(id, fore))
    }

    /// Keeps CREATE_SESSION's reply for a retransmission and moves the client's
    /// expected sequence on.
    pub fn created(&mut self, cid: u64, reply: Vec<u8>) {
        if let Some(c) = self.clients.get_mut(&cid) {
            c.create_seq = c.create_seq.wrapping_add(1);
            c.last_create = Some(reply.into_boxed_slice());
        }
    }

    /// The client a session id names (`BADSESSION` for none).
    fn session_client(&self, id: &[u8; 16]) -> Result<u64, Status> {
        if id[..4] != self.epoch.to_be_bytes() {
            return Err(proto::BADSESSION);
        }
        let low = u32::from_be_bytes([id[4], id[5], id[6], id[7]]);
        let cid = (u64::from(self.epoch) << 32) | u64::from(low);
        match self.clients.get(&cid) {
            Some(c) if c.sessions.iter().any(|s| s.id == *id) => Ok(cid),
            _ => Err(proto::BADSESSION),
        }
    }

    /// SEQUENCE (RFC 8881 §2.10.6): the next sequence id on a slot is a new request
    /// (the slot is busy until [`finish_slot`](Self::finish_slot)); the same one again
    /// is a retransmission, answered from the slot (`DELAY` while the first is still
    /// being answered, `RETRY_UNCACHED_REP` when its reply was not kept); anything else
    /// is `SEQ_MISORDERED`, and one that reuses the last sequence id for another request
    /// (`print`, its [`request_print`]) `SEQ_FALSE_RETRY`. A COMPOUND of more
    /// operations or bytes (`size`: count and argument bytes) than the channel allows is
    /// `TOO_MANY_OPS` or `REQ_TOO_BIG`. Renews the client's lease and binds the
    /// connection.
    #[allow(clippy::too_many_arguments)]
    pub fn sequence(
        &mut self,
        id: &[u8; 16],
        seqid: u32,
        slot: u32,
        highest: u32,
        size: (usize, usize),
        print: u64,
        conn: u64,
        now: Instant,
    ) -> Result<Sequenced, Status> {
        let cid = self.session_client(id)?;
        let c = self.clients.get_mut(&cid).expect("found");
        c.renewed = now;
        let s = c.session_mut(id).expect("found");
        let n = s.slots.len() as u32;
        if slot >= n {
            return Err(proto::BADSLOT);
        }
        if highest >= n {
            return Err(proto::BAD_HIGH_SLOT);
        }
        if size.0 > s.fore.max_ops as usize {
            return Err(proto::TOO_MANY_OPS);
        }
        // The RPC header and an AUTH_SYS credential come on top of the arguments.
        if size.1 + RPC_CALL_HEADER > s.fore.max_request as usize {
            return Err(proto::REQ_TOO_BIG);
        }
        if !s.conns.contains(&conn) {
            if s.conns.len() >= CONNS_MAX {
                s.conns.remove(0);
            }
            s.conns.push(conn);
        }
        let fore = s.fore;
        let sl = &mut s.slots[slot as usize];
        if seqid == sl.seqid {
            if sl.busy {
                return Err(proto::DELAY);
            }
            if sl.print != print {
                return Err(proto::SEQ_FALSE_RETRY);
            }
            return match &sl.reply {
                Some(r) => Ok(Sequenced::Replay(r.to_vec())),
                None => Err(proto::RETRY_UNCACHED_REP),
            };
        }
        if seqid != sl.seqid.wrapping_add(1) {
            return Err(proto::SEQ_MISORDERED);
        }
        sl.seqid = seqid;
        sl.busy = true;
        sl.reply = None;
        sl.print = print;
        Ok(Sequenced::Go(SlotRef {
            clientid: cid,
            session: *id,
            slot,
            highest: n - 1,
            max_response: fore.max_response,
            max_cached: fore.max_response_cached,
            max_ops: fore.max_ops,
            max_request: fore.max_request,
        }))
    }

    /// The end of a request on its slot: `reply` (the whole COMPOUND result) is kept
    /// when it fits what the client asked to be cached; `None` (a reply whose READ data
    /// is sent after it, from the file) keeps nothing, so a retransmission is
    /// `RETRY_UNCACHED_REP`.
    pub fn finish_slot(&mut self, r: &SlotRef, reply: Option<&[u8]>) {
        let Some(c) = self.clients.get_mut(&r.clientid) else {
            return;
        };
        let Some(s) = c.session_mut(&r.session) else {
            return;
        };
        let Some(sl) = s.slots.get_mut(r.slot as usize) else {
            return;
        };
        sl.busy = false;
        // The cached size as the client counts it includes the RPC reply header.
        sl.reply = reply
            .filter(|reply| reply.len() + oncrpc::msg::ACCEPTED_HEADER_LEN <= r.max_cached as usize)
            .map(Into::into);
    }

    /// DESTROY_SESSION.
    pub fn destroy_session(&mut self, id: &[u8; 16]) -> Result<(), Status> {
        let cid = self.session_client(id)?;
        let c = self.clients.get_mut(&cid).expect("found");
        c.sessions.retain(|s| s.id != *id);
        self.refund(cid, Kind::Session, 1);
        Ok(())
    }

    /// BIND_CONN_TO_SESSION of the fore channel: the session's client.
    pub fn bind_conn(&mut self, id: &[u8; 16], conn: u64, now: Instant) -> Result<u64, Status> {
        let cid = self.session_client(id)?;
        let c = self.clients.get_mut(&cid).expect("found");
        c.renewed = now;
        let s = c.session_mut(id).expect("found");
        if !s.conns.contains(&conn) {
            if s.conns.len() >= CONNS_MAX {
                s.conns.remove(0);
            }
            s.conns.push(conn);
        }
        Ok(cid)
    }

    /// DESTROY_CLIENTID: only a client without sessions and state (`CLIENTID_BUSY`).
    pub fn destroy_clientid(&mut self, cid: u64) -> Result<(), Status> {
        let c = self
            .clients
            .get(&cid)
            .ok_or_else(|| self.unknown_client(cid))?;
        if !c.sessions.is_empty() || !c.stateids.is_empty() {
            return Err(proto::CLIENTID_BUSY);
        }
        self.purge(cid);
        Ok(())
    }

    /// RECLAIM_COMPLETE: once per client (`COMPLETE_ALREADY` after). Nothing is ever
    /// reclaimed here (no grace period), so it only records that the client said so.
    pub fn reclaim_complete(&mut self, cid: u64) -> Result<(), Status> {
        let c = self.clients.get_mut(&cid).ok_or(proto::STALE_CLIENTID)?;
        if std::mem::replace(&mut c.reclaimed, true) {
            return Err(proto::COMPLETE_ALREADY);
        }
        Ok(())
    }
}
