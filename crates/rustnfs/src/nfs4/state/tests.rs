//! The state tables on their own: client records, leases, owners and seqids, share
//! counts, byte-range locks, and the caps per client, per address and in total.

use std::net::{IpAddr, Ipv4Addr};

use super::*;

const LEASE: Duration = DEFAULT_LEASE;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

fn owner(c: u64, n: &[u8]) -> OwnerKey {
    OwnerKey {
        lock: true,
        clientid: c,
        owner: n.to_vec(),
    }
}

/// A confirmed client named `name` from `addr`.
fn client(s: &mut State, name: &[u8], addr: IpAddr, t: Instant) -> u64 {
    let (cid, verf) = s.setclientid([1; 8], name, addr, t).unwrap();
    s.confirm(cid, verf, t).unwrap();
    cid
}

#[test]
fn clients_confirm_renew_and_expire() {
    let t0 = Instant::now();
    let mut s = State::new(7, LEASE, Limits::default());
    let (cid, verf) = s.setclientid([1; 8], b"me", ip(1), t0).unwrap();
    assert_eq!(s.renew(cid, t0), Err(proto::STALE_CLIENTID), "unconfirmed");
    assert_eq!(s.confirm(cid, [9; 8], t0), Err(proto::STALE_CLIENTID));
    s.confirm(cid, verf, t0).unwrap();
    s.renew(cid, t0).unwrap();
    // Another epoch's client id is stale.
    assert_eq!(s.renew(cid ^ (1 << 40), t0), Err(proto::STALE_CLIENTID));
    // A lock it holds goes with its lease, and every count with it.
    let fh = Fh::new(1, 2);
    s.ensure_owner(&owner(cid, b"o")).unwrap();
    s.set_range(fh, &owner(cid, b"o"), 0, 10, Some(true))
        .unwrap();
    assert_eq!(s.total().get(Kind::Lock), 1);
    s.sweep(t0 + LEASE + Duration::from_secs(5));
    assert!(s.files.is_empty());
    assert!(s.total().is_empty(), "{:?}", s.total());
    assert!(s.addrs.is_empty());
    assert_eq!(s.renew(cid, t0), Err(proto::EXPIRED));
}

#[test]
fn a_rebooted_client_loses_its_old_state() {
    let t0 = Instant::now();
    let mut s = State::new(7, LEASE, Limits::default());
    let a = client(&mut s, b"me", ip(1), t0);
    s.ensure_owner(&owner(a, b"o")).unwrap();
    s.set_range(Fh::new(1, 2), &owner(a, b"o"), 0, 10, Some(true))
        .unwrap();
    let (b, vb) = s.setclientid([2; 8], b"me", ip(1), t0).unwrap();
    assert_ne!(a, b);
    s.confirm(b, vb, t0).unwrap();
    assert!(s.files.is_empty());
    assert_eq!(s.renew(a, t0), Err(proto::STALE_CLIENTID));
    assert_eq!(s.total().get(Kind::Client), 1);
}

#[test]
fn ranges_split_merge_and_conflict() {
    let t0 = Instant::now();
    let mut s = State::new(1, LEASE, Limits::default());
    let c = client(&mut s, b"c", ip(1), t0);
    let fh = Fh::new(1, 2);
    let (a, b) = (owner(c, b"a"), owner(c, b"b"));
    s.ensure_owner(&a).unwrap();
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
    assert_eq!(s.files[&fh].locks.len(), 2);
    assert_eq!(s.total().get(Kind::Lock), 2);
    // Read locks share.
    s.set_range(fh, &a, 0, u64::MAX, None).unwrap();
    assert!(s.files.is_empty());
    assert_eq!(s.total().get(Kind::Lock), 0);
    s.set_range(fh, &a, 0, u64::MAX, Some(false)).unwrap();
    assert!(s.conflict(&fh, &b, 0, 1, false).is_none());
    assert!(s.conflict(&fh, &b, 5, 6, true).is_some());
    assert_eq!(s.release_lockowner(&a), Err(proto::LOCKS_HELD));
}

#[test]
fn seqids_go_forward_and_replay() {
    let t0 = Instant::now();
    let mut s = State::new(1, LEASE, Limits::default());
    let c = client(&mut s, b"c", ip(1), t0);
    let k = owner(c, b"o");
    assert!(matches!(s.seq_check(&k, 5), Seq::Go));
    s.seq_done(&k, 5, vec![0, 0, 0, 0], None).unwrap();
    assert!(matches!(s.seq_check(&k, 6), Seq::Go));
    assert!(matches!(s.seq_check(&k, 5), Seq::Replay(..)));
    assert!(matches!(s.seq_check(&k, 9), Seq::Bad));
    s.seq_done(&k, u32::MAX, vec![], None).unwrap();
    assert!(matches!(s.seq_check(&k, 0), Seq::Go), "seqids wrap");
}

#[test]
fn share_counts_follow_opens_downgrades_and_closes() {
    let t0 = Instant::now();
    let mut s = State::new(1, LEASE, Limits::default());
    let c = client(&mut s, b"c", ip(1), t0);
    let fh = Fh::new(3, 4);
    let a = OwnerKey {
        lock: false,
        clientid: c,
        owner: b"a".to_vec(),
    };
    let b = OwnerKey {
        owner: b"b".to_vec(),
        ..a.clone()
    };
    let (sid, n) = s.open_stateid(&a, fh, 3, 2).unwrap();
    assert_eq!(sid.seqid, 1);
    assert_eq!(s.share_denied(&fh), 2);
    assert!(
        s.share_conflict(&fh, &b, 2, 0),
        "b wants to write, a denies it"
    );
    assert!(s.share_conflict(&fh, &b, 1, 1), "b denies reads, a reads");
    assert!(
        !s.share_conflict(&fh, &a, 3, 3),
        "a's own open does not count"
    );
    assert!(!s.share_conflict(&fh, &b, 1, 0));
    assert_eq!(s.downgrade(c, n, 1, 0).unwrap().seqid, 2);
    assert_eq!(s.share_denied(&fh), 0);
    assert_eq!(s.downgrade(c, n, 3, 0), Err(proto::INVAL), "not a subset");
    s.remove_stateid(c, n);
    assert!(s.files.is_empty());
    assert_eq!(s.total().get(Kind::Stateid), 0);
}

#[test]
fn each_client_and_address_stays_within_its_caps() {
    let t0 = Instant::now();
    let limits = Limits::default();
    let mut s = State::new(1, LEASE, limits.clone());
    let per_client = limits.per_client.get(Kind::Owner);
    let per_addr = limits.per_address.get(Kind::Owner);
    // One client fills its owners; a second client of the same address goes on until
    // the address's share is full; a client of another address is untouched.
    let mut made = 0;
    let mut clients = 0;
    'fill: loop {
        clients += 1;
        let c = client(&mut s, format!("c{clients}").as_bytes(), ip(2), t0);
        for i in 0.. {
            match s.ensure_owner(&owner(c, format!("o{i}").as_bytes())) {
                Ok(_) => made += 1,
                Err(e) => {
                    assert_eq!(e, proto::RESOURCE);
                    if i == 0 {
                        break 'fill;
                    }
                    assert_eq!(i, per_client);
                    break;
                }
            }
        }
    }
    assert_eq!(made, per_addr);
    let other = client(&mut s, b"other", ip(3), t0);
    s.ensure_owner(&owner(other, b"mine")).unwrap();
    // Unconfirmed client ids: the address's oldest goes first; others are untouched.
    let cap = limits.per_address.get(Kind::Unconfirmed);
    let first = s.setclientid([1; 8], b"u0", ip(4), t0).unwrap();
    for i in 1..cap * 10 {
        s.setclientid([1; 8], format!("u{i}").as_bytes(), ip(4), t0)
            .unwrap();
    }
    assert_eq!(s.addrs[&ip(4)].usage.get(Kind::Unconfirmed), cap);
    assert_eq!(s.confirm(first.0, first.1, t0), Err(proto::STALE_CLIENTID));
    let (v, vv) = s.setclientid([1; 8], b"victim", ip(5), t0).unwrap();
    s.confirm(v, vv, t0).unwrap();
    // Freeing a client gives its counts back to its address and the total.
    let before = s.total().get(Kind::Owner);
    s.purge(other);
    assert_eq!(s.total().get(Kind::Owner), before - 1);
}

#[test]
fn locks_are_capped_per_file_and_per_client_and_a_refusal_changes_nothing() {
    let t0 = Instant::now();
    let limits = Limits::default();
    let mut s = State::new(1, LEASE, limits.clone());
    let c = client(&mut s, b"c", ip(1), t0);
    let o = owner(c, b"o");
    s.ensure_owner(&o).unwrap();
    let per_client = limits.per_client.get(Kind::Lock);
    let mut n = 0u64;
    let refused = loop {
        let fh = Fh::new(10 + n / 1000, 1);
        match s.set_range(fh, &o, 2 * n, 2 * n + 1, Some(true)) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(refused, proto::RESOURCE);
    assert_eq!(n as usize, per_client);
    assert_eq!(s.total().get(Kind::Lock), per_client);
    // Per file: another client can take no more than the file's cap.
    let d = client(&mut s, b"d", ip(2), t0);
    let p = owner(d, b"p");
    s.ensure_owner(&p).unwrap();
    let fh = Fh::new(99, 1);
    let mut k = 0u64;
    while s.set_range(fh, &p, 2 * k, 2 * k + 1, Some(false)).is_ok() {
        k += 1;
    }
    assert_eq!(k as usize, limits.locks_per_file);
    assert_eq!(s.files[&fh].locks.len(), limits.locks_per_file);
}
