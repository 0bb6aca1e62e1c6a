//! An emulated network link: a one-way delay and a rate limit between scenario A's httpd
//! and its NFS server, so A's NFS traffic can cross "a real network" on one machine.
//!
//! Two paths carry it, and the report names the one that ran ([`LinkPath`]):
//! - `netns+tbf` (a rate limit, as root): the kernel limits the rate with `tc … tbf` on a
//!   veth pair into a network namespace of this process ([`crate::experiment::netns`]). With a
//!   delay, a relay listening in the namespace crosses back to the server on loopback
//!   and adds it; without one, the server itself listens inside the namespace and no
//!   relay runs ([`Link::inside`]), so the shaped row differs from the `veth` control by
//!   the tbf alone. tbf holds a single stream at 0.97–1.0 of 100 Mbit/s to 5 Gbit/s; the
//!   relay's own rate clock could not carry 5 Gbit/s on two busy cores.
//! - `relay` (no rate limit, or without root): the userspace relay alone, on loopback.
//!
//! The unshaped control follows the link's path ([`control_path`]), so that shaped row
//! minus control row is what the shaping adds and nothing else:
//! - `veth` (the link is `netns+tbf`): the same veth pair into a namespace, MTU 65520,
//!   with no tbf and no relay — the NFS server runs inside the namespace and the kernel
//!   forwards to it ([`Link::inside`]). On a quiet machine scenario A (10 MiB, a
//!   connection per request) kept 0.93–0.97 of direct through it in compare, and 0.65
//!   through the unshaped relay stand-alone (figures in the crate README).
//! - `relay` (the link is `relay`): the userspace relay, unshaped.
//!
//! Kernel `tc netem` (or any delaying qdisc) is not available on these machines, so the
//! delay is always the relay's, on plain threads rather than an async runtime: tokio's
//! timer ticks in whole milliseconds, which turned a 250 µs delay into ≥ 1 ms and held a
//! 1 Gbit/s link to 0.32 Gbit/s (one 64 KiB chunk per tick).
//!
//! - Unshaped (the control row): each direction is `splice(2)` through a pipe — the
//!   bytes never enter user space, so the relay costs two extra socket hops and little
//!   CPU.
//! - Shaped: each direction is a reader that splices what arrives into a pipe and
//!   books it on the link (`rate`, one clock shared by every connection in that
//!   direction, as on one wire), and a writer that splices it on when the link has
//!   carried it plus `delay`. The writer sleeps on the kernel's high-resolution timer
//!   with a 1 ns timer slack, minus its recent wakeup lateness, so delays are right to
//!   tens of microseconds on average.
//!
//! # Layout
//! - [`spec`]: what the link does (`rate=…,delay=…`).
//! - [`path`]: which machinery carries it here, and its name in the report.
//! - `relay`: the userspace relay's accept loop and its directions.
//! - `pipe`: socket → pipe → socket with splice(2).
//! - `shaper`: the rate clock and the delaying writer.
//! - [`Link`] (here): the link as a scenario holds it.

mod path;
mod pipe;
mod relay;
mod shaper;
mod spec;

use std::net::SocketAddr;

pub use path::{LinkPath, control_note, control_path, kernel_path_ready, path_note, shaped_path};
pub use spec::LinkSpec;

use crate::experiment::netns;
use path::note;

/// The emulated link as a scenario holds it: where to connect, and how it is built.
pub struct Link {
    pub addr: SocketAddr,
    pub spec: LinkSpec,
    pub path: LinkPath,
    // Field order is drop order: the relay stops (its wake-up connection still crosses
    // the wire) before the wire goes. `veth` has no relay.
    _relay: Option<relay::Relay>,
    _wire: Option<netns::Wire>,
}

impl Link {
    /// A link on a free port forwarding to `upstream` through `spec`. A rate limit goes
    /// to the kernel (netns+tbf) when this process may make namespaces; otherwise, or if
    /// making one fails, the relay limits it and says so once on stderr.
    pub fn start(upstream: SocketAddr, spec: LinkSpec) -> std::io::Result<Link> {
        if spec.rate_bits_per_sec.is_some() && kernel_path_ready().is_ok() {
            match Self::start_netns(upstream, spec) {
                Ok(l) => return Ok(l),
                Err(e) => crate::experiment::terminal::note(format!(
                    "servelab: link {spec}: {} failed ({e}); the userspace relay shapes it instead",
                    LinkPath::NetnsTbf.name()
                )),
            }
        }
        Self::start_relay(upstream, spec)
    }

    /// The userspace relay alone, on loopback.
    pub fn start_relay(upstream: SocketAddr, spec: LinkSpec) -> std::io::Result<Link> {
        let relay = relay::start(
            "127.0.0.1:0".parse().expect("a valid address"),
            upstream,
            spec,
        )?;
        Ok(Link {
            addr: relay.addr,
            spec,
            path: LinkPath::Relay,
            _relay: Some(relay),
            _wire: None,
        })
    }

    /// The rate by tbf on a veth pair into a namespace; a relay listening in the
    /// namespace crosses back to `upstream` and adds the delay.
    pub fn start_netns(upstream: SocketAddr, spec: LinkSpec) -> std::io::Result<Link> {
        let wire = netns::Wire::create(spec.rate_bits_per_sec)?;
        let listener = wire.listen()?;
        let relay = relay::serve(
            listener,
            upstream,
            LinkSpec {
                rate_bits_per_sec: None,
                delay: spec.delay,
            },
        )?;
        Ok(Link {
            addr: relay.addr,
            spec,
            path: LinkPath::NetnsTbf,
            _relay: Some(relay),
            _wire: Some(wire),
        })
    }

    /// A link with no relay: `wire`, made with `spec`'s rate (none: the `veth` control),
    /// and a server listening at `server` inside its namespace — a child started with
    /// [`netns::Wire::enter_before_exec`], or a listener from [`netns::Wire::listen`].
    /// Stop that server before dropping the link: the pair goes with the link. `spec`
    /// has no delay: only a relay can add one.
    pub fn inside(wire: netns::Wire, server: SocketAddr, spec: LinkSpec) -> Link {
        debug_assert!(spec.delay.is_zero(), "a link without a relay has no delay");
        Link {
            addr: server,
            spec,
            path: match spec.rate_bits_per_sec {
                Some(_) => LinkPath::NetnsTbfDirect,
                None => LinkPath::Veth,
            },
            _relay: None,
            _wire: Some(wire),
        }
    }

    /// Which path carried the traffic, for the report.
    pub fn path_note(&self) -> &'static str {
        note(self.path, self.spec)
    }
}

#[cfg(test)]
mod tests;
