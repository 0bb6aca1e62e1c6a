//! The records the state tables are made of — an owner, a file's shared state and its
//! byte-range locks, a session and its slots — kept apart from the tables' behaviour
//! (`clients`, `owners`, `files`, `sessions`), which the parent module's `State` glues
//! together.

use std::collections::HashMap;
use std::sync::Arc;

use crate::fs::Fh;

/// OPEN4_SHARE_ACCESS_READ / _WRITE (and the same bits for denies).
pub const ACCESS_READ: u32 = 1;
pub const ACCESS_WRITE: u32 = 2;

/// What the server remembers of an owner.
#[derive(Debug, Default)]
pub struct Owner {
    /// The last seqid it used; `None` until its first seqid-consuming request.
    pub seqid: Option<u32>,
    /// Open owners start unconfirmed (OPEN4_RESULT_CONFIRM) until OPEN_CONFIRM.
    pub confirmed: bool,
    /// The last reply to a seqid-consuming request (the operation's result bytes and
    /// the current filehandle it left), sent again for a retransmission of it.
    pub last: Option<(Box<[u8]>, Option<Fh>)>,
    /// Its stateid on each file (one per owner and file).
    pub files: HashMap<Fh, u32>,
}

/// One byte-range lock: `[start, end)`, `end == u64::MAX` meaning to the end of file.
#[derive(Debug, Clone)]
pub struct Lock {
    pub client: u64,
    /// The lock owner's name (shared with its entry in the client's record).
    pub owner: Arc<[u8]>,
    pub start: u64,
    pub end: u64,
    pub write: bool,
}

impl Lock {
    pub fn is_of(&self, client: u64, owner: &[u8]) -> bool {
        self.client == client && *self.owner == *owner
    }
}

/// The shared state of one file.
#[derive(Debug, Default)]
pub struct File {
    /// Opens holding READ access, WRITE access, denying READ, denying WRITE.
    pub access: [u32; 2],
    pub deny: [u32; 2],
    pub locks: Vec<Lock>,
}

impl File {
    pub fn is_unused(&self) -> bool {
        self.access == [0, 0] && self.deny == [0, 0] && self.locks.is_empty()
    }

    pub fn count(counts: &mut [u32; 2], bits: u32, up: bool) {
        for (i, bit) in [ACCESS_READ, ACCESS_WRITE].into_iter().enumerate() {
            if bits & bit != 0 {
                counts[i] = if up {
                    counts[i] + 1
                } else {
                    counts[i].saturating_sub(1)
                };
            }
        }
    }

    pub fn bits(counts: &[u32; 2]) -> u32 {
        (if counts[0] > 0 { ACCESS_READ } else { 0 })
            | (if counts[1] > 0 { ACCESS_WRITE } else { 0 })
    }
}

/// A `channel_attrs4` (CREATE_SESSION).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Channel {
    pub headerpad: u32,
    pub max_request: u32,
    pub max_response: u32,
    pub max_response_cached: u32,
    pub max_ops: u32,
    pub max_requests: u32,
}

/// One slot: the sequence id of its last request, whether it is being answered, and
/// its reply when it was kept.
#[derive(Debug, Default)]
pub struct Slot {
    pub seqid: u32,
    pub busy: bool,
    pub reply: Option<Box<[u8]>>,
    /// What the request looked like ([`request_print`]), to tell a retransmission
    /// from another request reusing the slot's sequence id (`SEQ_FALSE_RETRY`).
    pub print: u64,
}

/// One session.
#[derive(Debug)]
pub struct Session {
    pub id: [u8; 16],
    /// The fore channel as granted.
    pub fore: Channel,
    pub slots: Vec<Slot>,
    /// Connections bound to it (ids of the guard's connections).
    pub conns: Vec<u64>,
}
