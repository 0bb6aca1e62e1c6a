//! NFSv4.1's operations (RFC 8881 §18.35–18.50): EXCHANGE_ID, CREATE_SESSION, SEQUENCE,
//! DESTROY_SESSION, BIND_CONN_TO_SESSION, DESTROY_CLIENTID, RECLAIM_COMPLETE,
//! SECINFO_NO_NAME, TEST_STATEID, FREE_STATEID (where in a COMPOUND each may stand is
//! `args::order`). The tables are `state::sessions`'.

use super::args::{self, Channel, Op};
use super::proto::{self, Status};
use super::state::Stateid;
use super::state::sessions::{Created, Sequenced};
use super::xdr::{self, Dec};
use super::{Ctx, Nfs4, cur, resolve};

/// The largest request this server reads: a 1 MiB WRITE and its COMPOUND.
const REQUEST_MAX: u32 = (1 << 20) + 16 * 1024;

/// The `eia_flags` a client may send (EXCHGID4_FLAG_SUPP_MOVED_REFER, _MIGR,
/// BIND_PRINC_STATEID, the pNFS roles, UPD_CONFIRMED_REC_A).
const EXCHANGE_FLAGS: u32 = 0x1 | 0x2 | 0x100 | 0x7_0000 | 0x4000_0000;

fn channel(out: &mut Vec<u8>, c: &Channel) {
    for w in [
        c.headerpad,
        c.max_request,
        c.max_response,
        c.max_response_cached,
        c.max_ops,
        c.max_requests,
    ] {
        xdr::u32(out, w);
    }
    xdr::u32(out, 0); // no ca_rdma_ird
}

impl Nfs4 {
    /// The session's client (the COMPOUND's SEQUENCE found it).
    fn session_client(cx: &Ctx<'_>) -> Result<u64, Status> {
        cx.slot.map(|s| s.clientid).ok_or(proto::OP_NOT_IN_SESSION)
    }

    pub(super) fn exec_session(
        &self,
        o: &Op<'_>,
        cx: &mut Ctx<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        match *o {
            Op::ExchangeId {
                verf,
                owner,
                flags,
                protect,
            } => self.exchange_id(cx, verf, owner, flags, protect, out),
            Op::CreateSession {
                clientid,
                seq,
                flags,
                fore,
                back,
            } => self.create_session(cx, clientid, seq, flags, &fore, &back, out),
            Op::Sequence {
                session,
                seqid,
                slot,
                highest,
                cache,
            } => self.sequence(cx, &session, seqid, slot, highest, cache, out),
            Op::DestroySession(id) => self.state.lock().destroy_session(&id),
            Op::BindConn { session, dir } => {
                // No back channel is offered (no delegations, no callbacks).
                if dir != 1 && dir != 3 {
                    return Err(proto::INVAL);
                }
                self.state.lock().bind_conn(&session, cx.conn, cx.now)?;
                xdr::fixed(out, &session);
                xdr::u32(out, 1); // CDFS4_FORE
                xdr::bool(out, false);
                Ok(())
            }
            Op::DestroyClientid(cid) => self.state.lock().destroy_clientid(cid),
            Op::ReclaimComplete => {
                let cid = Self::session_client(cx)?;
                self.state.lock().reclaim_complete(cid)
            }
            Op::SecinfoNoName(style) => self.secinfo_no_name(cx, style, out),
            Op::TestStateid(raw, n) => {
                let cid = Self::session_client(cx)?;
                let st = self.state.lock();
                let mut d = Dec::new(raw);
                xdr::u32(out, n);
                for _ in 0..n {
                    let (Ok(seqid), Ok(other)) = (d.u32(), d.fixed()) else {
                        return Err(proto::BADXDR);
                    };
                    xdr::u32(out, st.test_stateid(cid, &Stateid { seqid, other }));
                }
                Ok(())
            }
            Op::FreeStateid(sid) => {
                let cid = Self::session_client(cx)?;
                let sid = resolve(cx, &sid)?;
                self.state.lock().free_stateid(cid, &sid)
            }
            _ => Err(proto::SERVERFAULT),
        }
    }

    /// EXCHANGE_ID (RFC 8881 §18.35): the client record, without state protection (only
    /// AUTH_SYS is served, so SP4_MACH_CRED has no machine credential to bind, and no
    /// SSV is supported); no pNFS (`USE_NON_PNFS`).
    fn exchange_id(
        &self,
        cx: &Ctx<'_>,
        verf: [u8; 8],
        owner: &[u8],
        flags: u32,
        protect: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        if flags & !EXCHANGE_FLAGS != 0 {
            return Err(proto::INVAL);
        }
        match protect {
            0 => {}
            1 => return Err(proto::INVAL),
            _ => return Err(proto::ENCR_ALG_UNSUPP),
        }
        let e = self
            .state
            .lock()
            .exchange_id(verf, owner, flags, cx.addr, cx.now)?;
        xdr::u64(out, e.clientid);
        xdr::u32(out, e.seq);
        xdr::u32(out, e.flags);
        xdr::u32(out, 0); // SP4_NONE
        xdr::u64(out, 0); // so_minor_id
        xdr::opaque(out, &self.owner); // so_major_id
        xdr::opaque(out, &self.owner); // eir_server_scope
        xdr::u32(out, 0); // no eir_server_impl_id
        Ok(())
    }

    /// CREATE_SESSION (RFC 8881 §18.36): a fore channel as large as asked within this
    /// server's bounds; no back channel (`CONN_BACK_CHAN` never granted) and no
    /// persistent reply cache. A retransmission gets the reply it had.
    #[allow(clippy::too_many_arguments)]
    fn create_session(
        &self,
        cx: &Ctx<'_>,
        clientid: u64,
        seq: u32,
        _flags: u32,
        fore: &Channel,
        back: &Channel,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let mut st = self.state.lock();
        let most = Channel {
            max_request: REQUEST_MAX,
            max_response: super::REPLY_MAX as u32,
            max_ops: args::MAX_OPS,
            ..Channel::default()
        };
        let (id, granted) = match st.create_session(clientid, seq, *fore, most, cx.conn, cx.now)? {
            Created::New(id, granted) => (id, granted),
            Created::Again(reply) => {
                out.extend_from_slice(&reply);
                return Ok(());
            }
        };
        let start = out.len();
        xdr::fixed(out, &id);
        xdr::u32(out, seq);
        xdr::u32(out, 0); // no PERSIST, no CONN_BACK_CHAN, no RDMA
        channel(out, &granted);
        let back = Channel {
            headerpad: 0,
            max_requests: back.max_requests.clamp(1, 1),
            ..*back
        };
        channel(out, &back);
        st.created(clientid, out[start..].to_vec());
        Ok(())
    }

    /// SEQUENCE (RFC 8881 §18.46): the slot's request order, its reply kept for a
    /// retransmission (and sent whole when one comes), the lease renewed.
    #[allow(clippy::too_many_arguments)]
    fn sequence(
        &self,
        cx: &mut Ctx<'_>,
        session: &[u8; 16],
        seqid: u32,
        slot: u32,
        highest: u32,
        cache: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let found = self.state.lock().sequence(
            session,
            seqid,
            slot,
            highest,
            (cx.ops, cx.args_len),
            cx.print,
            cx.conn,
            cx.now,
        )?;
        let s = match found {
            Sequenced::Replay(reply) => {
                cx.replay_all = Some(reply);
                return Ok(());
            }
            Sequenced::Go(s) => s,
        };
        cx.slot = Some(s);
        cx.too_big = if cache {
            proto::REP_TOO_BIG_TO_CACHE
        } else {
            proto::REP_TOO_BIG
        };
        xdr::fixed(out, session);
        xdr::u32(out, seqid);
        xdr::u32(out, slot);
        xdr::u32(out, s.highest);
        xdr::u32(out, s.highest);
        xdr::u32(out, 0); // sr_status_flags: nothing to report
        Ok(())
    }

    /// SECINFO_NO_NAME (RFC 8881 §18.45): the flavours of the current filehandle or of
    /// its parent — AUTH_SYS, as every object here; the current filehandle is consumed.
    fn secinfo_no_name(
        &self,
        cx: &mut Ctx<'_>,
        style: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let fh = cur(cx)?;
        match style {
            0 => {
                self.fs.attr(&fh).map_err(proto::from_v3)?;
            }
            1 => {
                self.dir(&fh)?;
                if fh == self.fs.root_fh() {
                    return Err(proto::NOENT);
                }
            }
            _ => return Err(proto::INVAL),
        }
        xdr::u32(out, 1);
        xdr::u32(out, oncrpc::msg::flavor::AUTH_SYS);
        cx.cur = None;
        Ok(())
    }
}
