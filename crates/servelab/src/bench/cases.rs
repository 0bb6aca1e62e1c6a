//! The matrix one repeat runs, as one list of [`Case`]s: HTTP cases on every HTTP
//! server, NFS cases on every NFS server, nfs-cat, the load generators on nginx and the
//! single TCP stream. The repeats rotate through the list, and each case rotates its
//! servers and tools.

use super::bootset;
use super::options::{BenchOptions, Group};

/// An HTTP case of the matrix.
#[derive(Debug, Clone, Copy)]
pub struct HttpCase {
    pub large: bool,
    pub keepalive: bool,
    pub concurrency: usize,
}

impl HttpCase {
    /// How long to measure: 100 clients each fetching 10 MiB keep ~1 GiB in flight, and
    /// both wrk and loadgen drop requests unfinished at the end, so that case runs 3×
    /// longer than the others to complete several rounds.
    pub fn seconds(&self, base: f64) -> f64 {
        if self.large && self.concurrency >= 100 {
            base * 3.0
        } else {
            base
        }
    }

    pub fn label(&self) -> String {
        format!(
            "{} {} c={}",
            if self.large { "10MiB" } else { "4KiB" },
            if self.keepalive {
                "keep-alive"
            } else {
                "close"
            },
            self.concurrency
        )
    }
}

/// An NFS case of the matrix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NfsCase {
    SeqRead(usize),
    Metadata(usize),
    BootSet,
}

impl NfsCase {
    pub fn label(&self) -> String {
        match self {
            NfsCase::SeqRead(c) => format!("seq read 10MiB c={c}"),
            NfsCase::Metadata(c) => format!("metadata c={c}"),
            NfsCase::BootSet => format!("boot set c={}", bootset::CLIENTS),
        }
    }
    pub fn clients(&self) -> usize {
        match self {
            NfsCase::SeqRead(c) | NfsCase::Metadata(c) => *c,
            NfsCase::BootSet => bootset::CLIENTS,
        }
    }
}

/// One slot of a repeat.
#[derive(Debug, Clone, Copy)]
pub enum Case {
    /// Every HTTP server, each with every HTTP load generator.
    Http(HttpCase),
    /// Every NFS server with our load generator.
    Nfs(NfsCase),
    /// Every NFS server with libnfs's `nfs-cat` reading the large file.
    NfsCat,
    /// The load generators side by side on nginx, 4 KiB keep-alive at this concurrency.
    Loadgen(usize),
    /// One TCP stream on loopback: ours against iperf3.
    Tcp,
}

/// The cases of one repeat for the chosen groups, in the order of the first repeat.
/// `--quick` runs fewer, with c = 10 and two connections on the large file, so a debug
/// build completes requests within its short measurements.
pub fn matrix(opts: &BenchOptions, nfs_cat: bool, nginx: bool) -> Vec<Case> {
    let mut cases = Vec::new();
    if opts.wants(Group::Http) {
        cases.extend(http_cases(opts.quick).into_iter().map(Case::Http));
    }
    if opts.wants(Group::Nfs) {
        cases.extend(nfs_cases(opts.quick).into_iter().map(Case::Nfs));
        if nfs_cat {
            cases.push(Case::NfsCat);
        }
    }
    if opts.wants(Group::Loadgen) {
        if nginx {
            let concurrency: &[usize] = if opts.quick { &[10] } else { &[10, 100] };
            cases.extend(concurrency.iter().map(|&c| Case::Loadgen(c)));
        }
        cases.push(Case::Tcp);
    }
    cases
}

fn http_cases(quick: bool) -> Vec<HttpCase> {
    let case = |large, keepalive, concurrency| HttpCase {
        large,
        keepalive,
        concurrency,
    };
    if quick {
        return vec![
            case(false, true, 10),
            case(false, false, 10),
            case(true, true, 2),
        ];
    }
    let mut v = Vec::new();
    for large in [false, true] {
        for keepalive in [true, false] {
            for concurrency in [10, 100] {
                v.push(case(large, keepalive, concurrency));
            }
        }
    }
    v
}

fn nfs_cases(quick: bool) -> Vec<NfsCase> {
    if quick {
        vec![NfsCase::SeqRead(1), NfsCase::Metadata(1), NfsCase::BootSet]
    } else {
        vec![
            NfsCase::SeqRead(1),
            NfsCase::SeqRead(16),
            NfsCase::Metadata(1),
            NfsCase::Metadata(16),
            NfsCase::BootSet,
        ]
    }
}
