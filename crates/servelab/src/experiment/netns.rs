//! The kernel-shaped wire under [`super::link`]: a veth pair from the host into a network
//! namespace of this process's own, with `tc … tbf` limiting the rate in each direction.
//!
//! The namespace has no name: a thread `unshare(2)`s into it and this process keeps a
//! descriptor of it, so it lives only while the process holds that descriptor (or a socket
//! in it). Dropping a [`Wire`] deletes the veth pair at once; if the process dies instead
//! (Ctrl-C, SIGKILL) the kernel frees the namespace with the last descriptor and the pair
//! with it, so nothing is left behind under any name. Needs root (CAP_NET_ADMIN to make
//! the pair, CAP_SYS_ADMIN to make the namespace).
//!
//! Why these settings (measured on this machine with iperf3 through the pair):
//! - MTU 65520, as on loopback: with 1500 a 5 Gbit/s tbf carried 4.5 Gbit/s, with 65520
//!   4.9 — fewer packets per byte for the two shared cores. The rate, not the frame size,
//!   is what the link emulates.
//! - burst max(256 KiB, 1 ms at the rate): 64 KiB held 1 Gbit/s to 0.81 and 5 Gbit/s to
//!   2.3 (a TSO frame is 64 KiB, so the bucket must hold several); 256 KiB gave
//!   1.00/0.98/0.97 of 100 Mbit/s, 1 and 5 Gbit/s.
//! - latency 5 ms (the queue tbf keeps): a bigger queue only delays.
//!
//! `netem` (and every other delaying qdisc) is not in these kernels, so the wire has no
//! delay of its own; the link adds it in user space.
//!
//! Without a rate the wire is the unshaped control of the kernel path: a server started
//! inside the namespace ([`Wire::enter_before_exec`]) is reached across the veth pair by
//! kernel forwarding alone — no qdisc, no relay.

use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::AsRawFd as _;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// One veth pair into a namespace of our own; the pair is deleted on drop.
pub struct Wire {
    /// The host end's interface name (`slk<pid>_<n>`, or another prefix), deleted on
    /// drop.
    pub host_if: String,
    /// The namespace end's address (the host end is the one below it, in a /30 of
    /// 10.200.0.0/14 nothing else on the host uses): what a listener there binds.
    pub ns_ip: Ipv4Addr,
    /// Keeps the namespace alive; the kernel frees it when this closes (and every
    /// socket in it has).
    ns: File,
}

/// Names links uniquely within this process.
static NEXT: AtomicU32 = AtomicU32::new(0);

impl Wire {
    /// A veth pair to a new namespace, each end limited to `rate_bits_per_sec` by tbf
    /// (none: unlimited).
    pub fn create(rate_bits_per_sec: Option<u64>) -> io::Result<Wire> {
        Self::create_named("slk", rate_bits_per_sec)
    }

    /// [`Wire::create`] with the host end named `<prefix><pid>_<n>` (at most 4 bytes of
    /// prefix: an interface name holds 15).
    pub fn create_named(prefix: &str, rate_bits_per_sec: Option<u64>) -> io::Result<Wire> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "a network namespace and a veth pair need root",
            ));
        }
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let host_if = format!("{prefix}{}_{}", pid % 1_000_000, n % 1000);
        let (host_ip, ns_ip) = free_subnet(pid, n)?;
        let ns = new_namespace()?;
        let ns_path = format!("/proc/{pid}/fd/{}", ns.as_raw_fd());
        run(
            "ip",
            &[
                "link", "add", "name", &host_if, "type", "veth", "peer", "name", "wire0", "netns",
                &ns_path,
            ],
        )?;
        let wire = Wire { host_if, ns_ip, ns };
        wire.configure_end(&wire.host_if, host_ip, rate_bits_per_sec)?;
        wire.in_namespace(|| wire.configure_end("wire0", ns_ip, rate_bits_per_sec))?;
        Ok(wire)
    }

    /// Address, MTU, up, and the rate limit on this end's egress.
    fn configure_end(&self, dev: &str, ip: Ipv4Addr, rate: Option<u64>) -> io::Result<()> {
        run("ip", &["addr", "add", &format!("{ip}/30"), "dev", dev])?;
        run("ip", &["link", "set", dev, "mtu", "65520", "up"])?;
        if let Some(rate) = rate {
            let burst = (rate / 8 / 1000).max(256 * 1024);
            run(
                "tc",
                &[
                    "qdisc",
                    "add",
                    "dev",
                    dev,
                    "root",
                    "tbf",
                    "rate",
                    &format!("{rate}bit"),
                    "burst",
                    &burst.to_string(),
                    "latency",
                    "5ms",
                ],
            )?;
        }
        Ok(())
    }

    /// Runs `f` on a thread inside the namespace: sockets it creates and programs it
    /// starts belong to the namespace.
    pub fn in_namespace<T: Send>(&self, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
        let fd = self.ns.as_raw_fd();
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns on this thread only, with a namespace descriptor we hold.
                if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                f()
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
        })
    }

    /// Makes `cmd`'s process start inside the namespace (its sockets, and so its
    /// listeners, belong to it). The child holds the namespace as long as it runs.
    pub fn enter_before_exec(&self, cmd: &mut Command) {
        use std::os::unix::process::CommandExt as _;
        let fd = self.ns.as_raw_fd();
        // SAFETY: the closure runs between fork and exec and only calls setns(2), which
        // is async-signal-safe, on a descriptor this process holds open (fork copied it).
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// The host end's address (the one below the namespace end's).
    pub fn host_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.ns_ip) - 1)
    }

    /// A listener on the namespace end (port 0: any free one).
    pub fn listen(&self) -> io::Result<TcpListener> {
        let addr = SocketAddr::from((self.ns_ip, 0));
        self.in_namespace(|| TcpListener::bind(addr))
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        // Deleting one end deletes both; the namespace goes when `ns` (and the last
        // socket in it) closes.
        let _ = run("ip", &["link", "del", &self.host_if]);
    }
}

/// A new network namespace, entered by a short-lived thread and held by descriptor.
fn new_namespace() -> io::Result<File> {
    std::thread::spawn(|| {
        // SAFETY: unshare of the network namespace of this (new, short-lived) thread only.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        File::open("/proc/thread-self/ns/net")
    })
    .join()
    .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
}

/// Runs a configuration command; its stderr becomes the error.
fn run(program: &str, args: &[&str]) -> io::Result<()> {
    let out = Command::new(program).args(args).output().map_err(|e| {
        io::Error::new(e.kind(), format!("{program}: {e} (is iproute2 installed?)"))
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "`{program} {}`: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// A /30 in 10.200.0.0/14 that overlaps no IPv4 network on the host's interfaces.
fn free_subnet(pid: u32, n: u32) -> io::Result<(Ipv4Addr, Ipv4Addr)> {
    let out = Command::new("ip")
        .args(["-4", "-o", "addr", "show"])
        .output()?;
    let used: Vec<(u32, u32)> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|w| {
            let (a, len) = w.split_once('/')?;
            let a: Ipv4Addr = a.parse().ok()?;
            let len: u32 = len.parse().ok()?;
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            Some((u32::from(a) & mask, mask))
        })
        .collect();
    let base = u32::from(Ipv4Addr::new(10, 200, 0, 0));
    for attempt in 0..64u32 {
        // Spread by pid and link number, so concurrent runs rarely even try the same one.
        let k = (pid
            .wrapping_mul(2_654_435_761)
            .wrapping_add(n.wrapping_mul(7919))
            .wrapping_add(attempt.wrapping_mul(104_729)))
            % (1 << 16);
        let net = base + k * 4;
        let overlaps = used
            .iter()
            .any(|&(u, mask)| (net & mask) == u || (u & 0xffff_fffc) == net);
        if !overlaps {
            return Ok((Ipv4Addr::from(net + 1), Ipv4Addr::from(net + 2)));
        }
    }
    Err(io::Error::other("no free /30 in 10.200.0.0/14"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link_exists(name: &str) -> bool {
        std::path::Path::new("/sys/class/net").join(name).exists()
    }

    /// Root only (CI runs as root): the pair exists while the wire does and is gone after
    /// drop; a listener in the namespace is reachable from the host across it.
    #[test]
    fn wire_is_made_and_removed() {
        if unsafe { libc::geteuid() } != 0 {
            let e = Wire::create(None).err().expect("refused without root");
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
            eprintln!("NOTE: not root: only the refusal was checked");
            return;
        }
        let wire = Wire::create(Some(1_000_000_000)).unwrap();
        let name = wire.host_if.clone();
        assert!(link_exists(&name));
        let listener = wire.listen().unwrap();
        let addr = listener.local_addr().unwrap();
        assert_eq!(addr.ip(), std::net::IpAddr::V4(wire.ns_ip));
        let client = std::net::TcpStream::connect(addr).unwrap();
        let (_server, peer) = listener.accept().unwrap();
        let host_ip = Ipv4Addr::from(u32::from(wire.ns_ip) - 1);
        assert_eq!(peer.ip(), std::net::IpAddr::V4(host_ip));
        drop(client);
        drop(wire);
        assert!(!link_exists(&name), "{name} still exists after drop");
    }

    /// Root only: a child started with `enter_before_exec` sees the namespace's end of
    /// the pair, not the host's.
    #[test]
    fn child_starts_inside_the_namespace() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("NOTE: not root: nothing to check");
            return;
        }
        let wire = Wire::create(None).unwrap();
        let mut cmd = Command::new("cat");
        cmd.arg("/proc/self/net/dev");
        wire.enter_before_exec(&mut cmd);
        let out = cmd.output().unwrap();
        let devices = String::from_utf8_lossy(&out.stdout);
        assert!(devices.contains("wire0:"), "{devices}");
        assert!(
            !devices.contains(&format!("{}:", wire.host_if)),
            "{devices}"
        );
    }
}
