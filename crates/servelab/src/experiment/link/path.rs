//! Which machinery carries a link in this process ([`LinkPath`]) — the kernel's
//! (`netns+tbf`, a veth pair with `tc tbf`) when namespaces can be made, the userspace
//! relay otherwise — for the shaped link and for its unshaped control, and how the
//! report names each.

use std::sync::OnceLock;

use super::spec::LinkSpec;
use crate::experiment::netns;

/// Which machinery carries a link, named in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkPath {
    /// The userspace relay alone: splice(2), its own rate clock, delay by sleep.
    Relay,
    /// A veth pair into a namespace of this run with `tc tbf` for the rate ([`netns`]);
    /// the relay only crosses into it and adds the delay.
    NetnsTbf,
    /// A rate limit without a delay: the same tbf-limited veth pair, no relay; the
    /// server listens inside the namespace ([`super::Link::inside`]).
    NetnsTbfDirect,
    /// The unshaped control of `NetnsTbf`: the same veth pair, no tbf, no relay; the
    /// server listens inside the namespace.
    Veth,
}

impl LinkPath {
    /// The short name the report prints.
    pub fn name(self) -> &'static str {
        match self {
            LinkPath::Relay => "relay",
            LinkPath::NetnsTbf | LinkPath::NetnsTbfDirect => "netns+tbf",
            LinkPath::Veth => "veth",
        }
    }
}

/// The path the unshaped control of a link of `spec` takes in this process: `veth` when
/// the link runs on `netns+tbf`, the unshaped relay otherwise (a delay alone, or no
/// root).
pub fn control_path(spec: LinkSpec) -> LinkPath {
    if spec.rate_bits_per_sec.is_some() && kernel_path_ready().is_ok() {
        LinkPath::Veth
    } else {
        LinkPath::Relay
    }
}

/// How the unshaped control of a link of `spec` is built, for the report.
pub fn control_note(spec: LinkSpec) -> &'static str {
    note(control_path(spec), LinkSpec::unshaped())
}

/// Whether rate limits can go to the kernel here; probed once per process (a throwaway
/// wire), and the reason it cannot printed once.
pub fn kernel_path_ready() -> Result<(), &'static str> {
    // The probe's outcome, kept for the process: whether the kernel path works, and
    // why not in words for the report (the error itself was printed once).
    static READY: OnceLock<Option<String>> = OnceLock::new();
    match READY.get_or_init(|| match netns::Wire::create(Some(1_000_000_000)) {
        Ok(_) => None,
        Err(e) => {
            crate::experiment::terminal::note(format!(
                "servelab: link: netns+tbf unavailable ({e}); rate limits run in the userspace relay"
            ));
            Some(e.to_string())
        }
    }) {
        None => Ok(()),
        Some(why) => Err(why.as_str()),
    }
}

/// The path compare builds for a link of `spec` in this process: `netns+tbf` for a rate
/// limit when namespaces can be made — with the server inside the namespace and no relay
/// when there is no delay — and the relay otherwise.
pub fn shaped_path(spec: LinkSpec) -> LinkPath {
    match (spec.rate_bits_per_sec, kernel_path_ready()) {
        (Some(_), Ok(())) if spec.delay.is_zero() => LinkPath::NetnsTbfDirect,
        (Some(_), Ok(())) => LinkPath::NetnsTbf,
        _ => LinkPath::Relay,
    }
}

/// How a link of this spec is built in this process, for the report.
pub fn path_note(spec: LinkSpec) -> &'static str {
    note(shaped_path(spec), spec)
}

pub(super) fn note(path: LinkPath, spec: LinkSpec) -> &'static str {
    match (path, spec.is_unshaped(), spec.delay.is_zero()) {
        (LinkPath::Relay, true, _) => "relay: userspace, splice(2) through a pipe",
        (LinkPath::Relay, false, _) => {
            "relay: userspace, splice(2) through a pipe, shared-clock rate, delay by high-resolution sleep"
        }
        (LinkPath::NetnsTbf, _, true) => {
            "netns+tbf: veth into a network namespace, tc tbf rate each way; splice(2) relay into it"
        }
        (LinkPath::NetnsTbf, _, false) => {
            "netns+tbf: veth into a network namespace, tc tbf rate each way; splice(2) relay into it adds the delay by high-resolution sleep"
        }
        (LinkPath::NetnsTbfDirect, _, _) => {
            "netns+tbf: veth into a network namespace, tc tbf rate each way, no relay; the NFS server listens inside"
        }
        (LinkPath::Veth, _, _) => {
            "veth: kernel forwarding over a veth pair into a network namespace (MTU 65520, as the shaped wire), no tbf, no relay; the NFS server listens inside"
        }
    }
}
