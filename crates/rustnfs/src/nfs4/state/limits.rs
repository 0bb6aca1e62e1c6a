//! How much NFSv4 state one client, one address and all clients together may make the
//! server hold, and the counters that are checked against it.
//!
//! Every kind of state a client creates is counted three times — in its client record,
//! in its address's, and in the server's total — and a request that would take any of
//! the three over its cap is refused (`NFS4ERR_RESOURCE` in v4.0, `NFS4ERR_DELAY` in
//! v4.1+, as knfsd answers a failed state allocation) and changes nothing. So one
//! client, or many client ids from one address, fills its own share and no more; only
//! many addresses together can reach the total.
//!
//! # Memory
//! The largest each entry can be (a 1 KiB owner name, the reply a v4.0 owner keeps for
//! a retransmission, 1.5 KiB at most), with the tables' overhead, measured on the
//! release build (see the README's table): about 3 KiB per owner, 200 bytes per
//! stateid, 120 bytes per lock, 1.5 KiB per client record, and per session its slots'
//! reply cache. [`Limits::bytes`] turns caps into the bound the README states.

use std::fmt;

/// One kind of counted state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Client records (confirmed or not).
    Client,
    /// Client records not yet confirmed (SETCLIENTID without its CONFIRM, EXCHANGE_ID
    /// without a CREATE_SESSION).
    Unconfirmed,
    /// Open and lock owners.
    Owner,
    /// Open and lock stateids.
    Stateid,
    /// Byte-range locks.
    Lock,
    /// NFSv4.1 sessions.
    Session,
}

const KINDS: usize = 6;

impl Kind {
    fn index(self) -> usize {
        self as usize
    }
    pub const ALL: [Kind; KINDS] = [
        Kind::Client,
        Kind::Unconfirmed,
        Kind::Owner,
        Kind::Stateid,
        Kind::Lock,
        Kind::Session,
    ];
    /// The name the README and `--help` use.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Client => "client ids",
            Kind::Unconfirmed => "unconfirmed client ids",
            Kind::Owner => "open and lock owners",
            Kind::Stateid => "stateids",
            Kind::Lock => "byte-range locks",
            Kind::Session => "sessions (v4.1+)",
        }
    }
    /// The most bytes one entry of this kind holds, its tables' share included (what
    /// the memory bound is computed from).
    pub fn entry_bytes(self) -> usize {
        match self {
            Kind::Client => 1536,
            Kind::Unconfirmed => 0,
            Kind::Owner => 3 * 1024,
            Kind::Stateid => 200,
            Kind::Lock => 120,
            Kind::Session => SESSION_BYTES,
        }
    }
}

/// Slots per session and reply bytes cached per slot: what a session may hold.
pub const SLOTS_MAX: u32 = 32;
pub const SLOT_CACHE_MAX: u32 = 4096;
const SESSION_BYTES: usize = (SLOTS_MAX as usize) * (SLOT_CACHE_MAX as usize + 64) + 512;

/// Counts of each kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage([usize; KINDS]);

impl Usage {
    pub fn get(&self, k: Kind) -> usize {
        self.0[k.index()]
    }
    pub fn add(&mut self, k: Kind, n: usize) {
        self.0[k.index()] += n;
    }
    pub fn sub(&mut self, k: Kind, n: usize) {
        let v = &mut self.0[k.index()];
        *v = v.saturating_sub(n);
    }
    /// Takes `other`'s counts away (a client record leaving its address and the total).
    pub fn sub_all(&mut self, other: &Usage) {
        for k in Kind::ALL {
            self.sub(k, other.get(k));
        }
    }
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|n| *n == 0)
    }
}

/// Caps of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps([usize; KINDS]);

impl Caps {
    pub fn get(&self, k: Kind) -> usize {
        self.0[k.index()]
    }
}

/// The caps per client id, per client address, and for all clients together, and
/// byte-range locks per file (each LOCK scans its file's list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub per_client: Caps,
    pub per_address: Caps,
    pub total: Caps,
    pub locks_per_file: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // client, unconfirmed, owner, stateid, lock, session
        Limits {
            per_client: Caps([1, 1, 1024, 4096, 4096, 4]),
            per_address: Caps([64, 16, 4096, 16_384, 16_384, 16]),
            total: Caps([4096, 1024, 32_768, 131_072, 131_072, 512]),
            locks_per_file: 4096,
        }
    }
}

impl Limits {
    /// Whether `n` more of `kind` fit in all three counters.
    pub fn fits(&self, kind: Kind, n: usize, client: &Usage, addr: &Usage, total: &Usage) -> bool {
        client.get(kind) + n <= self.per_client.get(kind)
            && addr.get(kind) + n <= self.per_address.get(kind)
            && total.get(kind) + n <= self.total.get(kind)
    }

    /// The most bytes of state `caps` allow (each kind at its cap, each entry at its
    /// largest).
    pub fn bytes(caps: &Caps) -> usize {
        Kind::ALL
            .iter()
            .map(|k| caps.get(*k) * k.entry_bytes())
            .sum()
    }
}

/// The limits as the README and `--help` print them.
impl fmt::Display for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "| state | per client id | per client address | all clients |"
        )?;
        writeln!(f, "| --- | ---: | ---: | ---: |")?;
        for k in Kind::ALL {
            let per_client = match k {
                Kind::Client | Kind::Unconfirmed => "—".to_string(),
                _ => self.per_client.get(k).to_string(),
            };
            writeln!(
                f,
                "| {} | {per_client} | {} | {} |",
                k.name(),
                self.per_address.get(k),
                self.total.get(k)
            )?;
        }
        writeln!(
            f,
            "| byte-range locks per file | — | — | {} |",
            self.locks_per_file
        )?;
        let mib = |caps: &Caps| Limits::bytes(caps) as f64 / (1024.0 * 1024.0);
        write!(
            f,
            "| memory at most | {:.1} MiB | {:.1} MiB | {:.0} MiB |",
            mib(&self.per_client),
            mib(&self.per_address),
            mib(&self.total)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_nest_and_the_bound_is_stated() {
        let l = Limits::default();
        for k in Kind::ALL {
            assert!(l.per_client.get(k) <= l.per_address.get(k), "{k:?}");
            assert!(l.per_address.get(k) <= l.total.get(k), "{k:?}");
        }
        let mut u = Usage::default();
        u.add(Kind::Owner, 1024);
        assert!(!l.fits(Kind::Owner, 1, &u, &Usage::default(), &Usage::default()));
        assert!(l.fits(Kind::Lock, 1, &u, &u, &u));
        let table = l.to_string();
        assert!(
            table.contains("| open and lock owners | 1024 | 4096 | 32768 |"),
            "{table}"
        );
        assert!(table.contains("| memory at most |"));
    }
}

#[cfg(test)]
mod readme {
    /// The README states the caps `--help` prints, word for word.
    #[test]
    fn the_readme_states_these_limits() {
        let readme = include_str!("../../../README.md");
        let flat: String = readme
            .lines()
            .map(str::trim_start)
            .collect::<Vec<_>>()
            .join("\n");
        let table = super::Limits::default().to_string();
        assert!(
            flat.contains(&table),
            "crates/rustnfs/README.md's limits table differs from the code's:\n{table}"
        );
    }
}

#[cfg(test)]
mod help {
    /// `rustnfs --help` says what it serves (it called itself an NFSv3 server, issue 35
    /// §1) and prints the state caps.
    #[test]
    fn help_names_the_protocols_and_the_caps() {
        use clap::CommandFactory;
        let help = crate::cli::Args::command().render_long_help().to_string();
        assert!(
            help.contains("NFSv3 and NFSv4 (4.0, 4.1, 4.2) server"),
            "{help}"
        );
        assert!(
            help.contains(&super::Limits::default().to_string()),
            "{help}"
        );
    }
}
