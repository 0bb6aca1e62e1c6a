//! The client's lease on the server: a client id from SETCLIENTID and
//! SETCLIENTID_CONFIRM (4.0), or from EXCHANGE_ID with a session from CREATE_SESSION and
//! RECLAIM_COMPLETE (4.1, 4.2); and for 4.1+ the slot table every COMPOUND's SEQUENCE
//! takes a slot from (as many slots as the pool has connections, or fewer if the
//! server grants fewer).
//!
//! A slot whose call was cancelled or lost after it was sent is *uncertain*: the server
//! may or may not have seen that sequence id. The next call on it sends the following
//! id; `SEQ_MISORDERED` then means the lost call never arrived and `super::V4::compound`
//! steps back once. When the server has forgotten the session (restart:
//! `BADSESSION`, `STALE_CLIENTID`) it is set up again, once for all callers (the
//! epoch tells a caller whether someone else already did).

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::xdr::{Ops, op, status};
use super::{V4, decode_error, expect};
use crate::Error;

/// One slot of the session's fore channel.
#[derive(Debug, Clone, Copy)]
struct Slot {
    id: u32,
    /// The last sequence id the server answered on this slot.
    acked: u32,
    /// A call after `acked` may have reached the server unanswered (cancelled, lost).
    uncertain: bool,
}

#[derive(Debug)]
struct State {
    /// A client id (and for 4.1+ a session) is set up.
    ready: bool,
    clientid: u64,
    session: [u8; 16],
    /// Bumped at every set-up; slots of an older epoch are dropped, not reused.
    epoch: u64,
    free: Vec<Slot>,
    highest: u32,
    /// One permit per slot of this epoch: a caller waits here for a free slot.
    permits: Arc<Semaphore>,
}

/// The lease and slot table of one client.
pub(crate) struct Session {
    state: Mutex<State>,
    /// Serialises set-ups.
    setup: tokio::sync::Mutex<()>,
    /// Slots asked for in CREATE_SESSION.
    want_slots: u32,
    /// `co_ownerid` / `id`: unique per client instance of this process.
    owner: Vec<u8>,
    /// The verifier sent with it (fixed for this instance).
    verifier: [u8; 8],
    /// 4.0's open owner: its name and next seqid (OPENs of one owner are serialised).
    pub open_owner: tokio::sync::Mutex<OpenOwner>,
}

/// An NFSv4.0 open owner.
pub(crate) struct OpenOwner {
    pub name: Vec<u8>,
    pub seqid: u32,
}

/// A slot taken for one COMPOUND; back to the table when dropped.
pub(crate) struct SlotGuard<'a> {
    session: &'a Session,
    slot: Slot,
    /// The sequence id of the call in flight.
    current: u32,
    id: [u8; 16],
    highest: u32,
    epoch: u64,
    _permit: OwnedSemaphorePermit,
}

fn next_instance() -> u64 {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Session {
    pub fn new(want_slots: u32) -> Session {
        let n = next_instance();
        let pid = std::process::id();
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Session {
            state: Mutex::new(State {
                ready: false,
                clientid: 0,
                session: [0; 16],
                epoch: 0,
                free: Vec::new(),
                highest: 0,
                permits: Arc::new(Semaphore::new(0)),
            }),
            setup: tokio::sync::Mutex::new(()),
            want_slots: want_slots.clamp(1, 64),
            owner: format!("servelab-nfsclient/{pid}/{n}/{start}").into_bytes(),
            verifier: (start ^ (u64::from(pid) << 32) ^ n).to_be_bytes(),
            open_owner: tokio::sync::Mutex::new(OpenOwner {
                name: format!("servelab-open/{pid}/{n}/0").into_bytes(),
                seqid: 0,
            }),
        }
    }

    /// The client id (after [`Session::ensure`]).
    pub fn clientid(&self) -> u64 {
        self.state.lock().clientid
    }

    /// The open owner's name for 4.1+ (no seqids there, one owner serves every OPEN).
    pub fn owner(&self) -> &[u8] {
        &self.owner
    }

    /// Sets the lease up unless it is.
    pub async fn ensure(&self, v4: &V4) -> Result<(), Error> {
        if self.state.lock().ready {
            return Ok(());
        }
        let epoch = self.state.lock().epoch;
        self.recover(v4, epoch).await
    }

    /// Sets the lease up again, unless another caller did since `lost` was current.
    pub async fn recover(&self, v4: &V4, lost: u64) -> Result<(), Error> {
        let _one = self.setup.lock().await;
        {
            let st = self.state.lock();
            if st.epoch != lost && st.ready {
                return Ok(());
            }
        }
        // A session this client gives up on (its slots out of step) is destroyed first:
        // the server bounds the sessions one client holds. After a restart it is gone
        // already, and the error says so.
        let old = {
            let st = self.state.lock();
            (st.ready && v4.minor > 0).then_some(st.session)
        };
        if let Some(id) = old {
            let mut o = Ops::default();
            o.op(op::DESTROY_SESSION).fixed(&id);
            let _ = v4.raw("DESTROY_SESSION", true, &o).await;
        }
        // A server short of state answers DELAY: try again until the call's deadline.
        let deadline = tokio::time::Instant::now() + v4.pool.cfg.call_timeout;
        loop {
            let res = if v4.minor == 0 {
                self.setclientid(v4).await
            } else {
                self.create_session(v4).await
            };
            match res {
                Err(Error::Status {
                    status: nfs3_client::nfs3_types::nfs3::nfsstat3::NFS3ERR_JUKEBOX,
                    ..
                }) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                other => return other,
            }
        }
    }

    /// SETCLIENTID and SETCLIENTID_CONFIRM (RFC 7530 §16.33, §16.34); no callback.
    async fn setclientid(&self, v4: &V4) -> Result<(), Error> {
        let mut o = Ops::default();
        o.op(op::SETCLIENTID)
            .fixed(&self.verifier)
            .opaque(&self.owner)
            .u32(0)
            .opaque(b"tcp")
            .opaque(b"0.0.0.0.0.0")
            .u32(0);
        let a = v4.raw("SETCLIENTID", true, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::SETCLIENTID, "SETCLIENTID")?;
        let clientid = r.u64("clientid").map_err(decode_error("SETCLIENTID"))?;
        let confirm: [u8; 8] = r.fixed("verifier").map_err(decode_error("SETCLIENTID"))?;
        let mut o = Ops::default();
        o.op(op::SETCLIENTID_CONFIRM).u64(clientid).fixed(&confirm);
        let a = v4.raw("SETCLIENTID_CONFIRM", true, &o).await?;
        expect(
            &mut a.reply(),
            op::SETCLIENTID_CONFIRM,
            "SETCLIENTID_CONFIRM",
        )?;
        let mut st = self.state.lock();
        st.clientid = clientid;
        st.epoch += 1;
        st.ready = true;
        Ok(())
    }

    /// EXCHANGE_ID, CREATE_SESSION and RECLAIM_COMPLETE (RFC 8881 §18.35, §18.36,
    /// §18.51): SP4_NONE, no pNFS, no back channel.
    async fn create_session(&self, v4: &V4) -> Result<(), Error> {
        let mut o = Ops::default();
        o.op(op::EXCHANGE_ID)
            .fixed(&self.verifier)
            .opaque(&self.owner)
            .u32(0) // flags
            .u32(0) // SP4_NONE
            .u32(0); // no client implementation id
        let a = v4.raw("EXCHANGE_ID", true, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::EXCHANGE_ID, "EXCHANGE_ID")?;
        let e = decode_error("EXCHANGE_ID");
        let clientid = r.u64("clientid").map_err(&e)?;
        let seq = r.u32("sequenceid").map_err(&e)?;
        let mut o = Ops::default();
        o.op(op::CREATE_SESSION).u64(clientid).u32(seq).u32(0);
        // Fore channel: a 1 MiB READ or WRITE and its headers; one slot per connection.
        let io = (1 << 20) + (64 << 10);
        o.u32(0)
            .u32(io)
            .u32(io)
            .u32(8 << 10)
            .u32(16)
            .u32(self.want_slots)
            .u32(0);
        // Back channel: the smallest the RFC allows (no callbacks are served).
        o.u32(0).u32(4096).u32(4096).u32(0).u32(2).u32(1).u32(0);
        o.u32(0x4000_0000).u32(1).u32(0); // cb_program; one AUTH_NONE security parameter
        let a = v4.raw("CREATE_SESSION", true, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::CREATE_SESSION, "CREATE_SESSION")?;
        let e = decode_error("CREATE_SESSION");
        let id: [u8; 16] = r.fixed("sessionid").map_err(&e)?;
        r.take(8, "sequenceid and flags").map_err(&e)?;
        r.take(20, "fore channel").map_err(&e)?;
        let slots = r.u32("fore channel slots").map_err(&e)?;
        if slots == 0 {
            return Err(Error::Protocol {
                op: "CREATE_SESSION",
                what: "a slot (the server granted none)",
            });
        }
        let n = slots.min(self.want_slots);
        {
            let mut st = self.state.lock();
            st.clientid = clientid;
            st.session = id;
            st.epoch += 1;
            st.highest = n - 1;
            st.free = (0..n)
                .map(|id| Slot {
                    id,
                    acked: 0,
                    uncertain: false,
                })
                .collect();
            st.permits = Arc::new(Semaphore::new(n as usize));
            st.ready = true;
        }
        self.reclaim_complete(v4).await
    }

    /// RECLAIM_COMPLETE: this client has nothing to reclaim, so the server need not keep
    /// it in its grace period (4.1 OPENs wait for it).
    async fn reclaim_complete(&self, v4: &V4) -> Result<(), Error> {
        let after = v4.pool.cfg.call_timeout;
        let deadline = tokio::time::Instant::now() + after;
        let mut slot = self.take_slot("RECLAIM_COMPLETE", deadline, after).await?;
        let mut o = Ops::default();
        slot.begin(&mut o);
        o.op(op::RECLAIM_COMPLETE).u32(0);
        let a = v4.raw("RECLAIM_COMPLETE", true, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::SEQUENCE, "SEQUENCE")?;
        slot.done();
        r.take(36, "SEQUENCE result")
            .map_err(decode_error("SEQUENCE"))?;
        match r
            .op(op::RECLAIM_COMPLETE)
            .map_err(decode_error("RECLAIM_COMPLETE"))?
        {
            status::OK | status::COMPLETE_ALREADY => Ok(()),
            st => Err(super::status_error("RECLAIM_COMPLETE", st)),
        }
    }

    /// DESTROY_SESSION and DESTROY_CLIENTID (4.1+), so the server frees this client's
    /// state now rather than when its lease runs out (a server bounds the state one
    /// address may hold). A 4.0 client id has no such call: it expires with its lease.
    pub async fn destroy(&self, v4: &V4) -> Result<(), Error> {
        let _one = self.setup.lock().await;
        let (ready, id, clientid) = {
            let st = self.state.lock();
            (st.ready, st.session, st.clientid)
        };
        if !ready || v4.minor == 0 {
            return Ok(());
        }
        {
            let mut st = self.state.lock();
            st.ready = false;
            st.epoch += 1;
            st.free.clear();
        }
        let mut o = Ops::default();
        o.op(op::DESTROY_SESSION).fixed(&id);
        let a = v4.raw("DESTROY_SESSION", true, &o).await?;
        expect(&mut a.reply(), op::DESTROY_SESSION, "DESTROY_SESSION")?;
        let mut o = Ops::default();
        o.op(op::DESTROY_CLIENTID).u64(clientid);
        let a = v4.raw("DESTROY_CLIENTID", true, &o).await?;
        expect(&mut a.reply(), op::DESTROY_CLIENTID, "DESTROY_CLIENTID")
    }

    /// A free slot, waited for until `deadline` (calls beyond the slots the server
    /// granted queue here).
    pub async fn take_slot(
        &self,
        name: &'static str,
        deadline: tokio::time::Instant,
        after: std::time::Duration,
    ) -> Result<SlotGuard<'_>, Error> {
        let permits = self.state.lock().permits.clone();
        let permit = tokio::time::timeout_at(deadline, permits.acquire_owned())
            .await
            .map_err(|_| Error::Timeout {
                op: name,
                addr: "a free session slot".into(),
                after,
            })?
            .map_err(|_| Error::Protocol {
                op: name,
                what: "a session slot (the table closed)",
            })?;
        let mut st = self.state.lock();
        let slot = st.free.pop().ok_or(Error::Protocol {
            op: name,
            what: "a free session slot",
        })?;
        Ok(SlotGuard {
            session: self,
            slot,
            current: slot.acked,
            id: st.session,
            highest: st.highest,
            epoch: st.epoch,
            _permit: permit,
        })
    }
}

impl SlotGuard<'_> {
    /// Appends SEQUENCE with the slot's next sequence id to `o`: the one after the last
    /// answered, or after an unanswered call that may have reached the server, the one
    /// after that (`SEQ_MISORDERED` then says it did not: [`SlotGuard::step_back`]).
    /// The slot is uncertain until [`SlotGuard::done`]. Returns whether it was before.
    pub fn begin(&mut self, o: &mut Ops) -> bool {
        let was = self.slot.uncertain;
        let ahead = if was { 2 } else { 1 };
        self.current = self.slot.acked.wrapping_add(ahead);
        self.slot.uncertain = true;
        o.op(op::SEQUENCE)
            .fixed(&self.id)
            .u32(self.current)
            .u32(self.slot.id)
            .u32(self.highest)
            .u32(0); // sa_cachethis: false
        was
    }

    /// The server answered this sequence id.
    pub fn done(&mut self) {
        self.slot.acked = self.current;
        self.slot.uncertain = false;
    }

    /// The server never saw the unanswered call: the next one follows `acked`.
    pub fn step_back(&mut self) {
        self.slot.uncertain = false;
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.session.state.lock();
        if st.epoch == self.epoch {
            st.free.push(self.slot);
        }
    }
}
