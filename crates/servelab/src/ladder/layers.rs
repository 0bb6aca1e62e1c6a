//! The host's network layers of the ladder, one added at a time: loopback → a network
//! namespace over a veth pair → the same pair's host end in a Linux bridge (as lxdbr0 /
//! docker0) → bridge plus a published port (iptables DNAT in `nat OUTPUT`, as Docker
//! publishes one). A [`Net`] is one layer built for one server: where the server binds
//! inside, how a process is started inside, where a client connects.
//!
//! Everything made here is named `slL…<pid>_<n>` (veth host end `slLv…`, bridge
//! `slLb…`, the DNAT rule's comment `slL<pid>_<n>`), carries only the run's own traffic
//! (a /30 no other interface uses), and is removed on drop — also when Ctrl-C unwinds
//! the run. The namespace has no name: the kernel frees it with its last descriptor.
//! What a killed run (SIGKILL) leaves behind, [`sweep_stale`] removes at the next start.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::experiment::netns::Wire;

/// Prefix of every interface and rule the ladder makes.
pub const PREFIX: &str = "slL";

/// One host layer of the ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Loopback,
    Veth,
    Bridge,
    BridgeNat,
}

impl Layer {
    /// The host layers, in the order they are added.
    pub const HOST: [Layer; 4] = [
        Layer::Loopback,
        Layer::Veth,
        Layer::Bridge,
        Layer::BridgeNat,
    ];

    /// The short name the report gives the rung.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Loopback => "loopback",
            Layer::Veth => "veth",
            Layer::Bridge => "bridge",
            Layer::BridgeNat => "bridge+NAT",
        }
    }

    /// What the rung adds, for the report.
    pub fn what(self) -> &'static str {
        match self {
            Layer::Loopback => "host loopback (127.0.0.1), no namespace",
            Layer::Veth => "a network namespace over a veth pair (MTU 65520)",
            Layer::Bridge => {
                "the veth pair's host end in a Linux bridge, the host's address on the bridge"
            }
            Layer::BridgeNat => {
                "the bridge plus a published port: the client connects to the host's address, iptables DNAT (nat OUTPUT) sends it into the namespace"
            }
        }
    }
}

/// Why a layer could not be built or removed.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("cannot make the namespace and its veth pair")]
    Wire(#[source] std::io::Error),
    #[error("cannot run `{command}`")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
    #[error("no free port to publish")]
    Port(#[source] lab::LabError),
}

/// Names layers uniquely within this process.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// Runs a configuration command; its stderr becomes the error.
fn run(program: &str, args: &[&str]) -> Result<(), LayerError> {
    let command = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|source| LayerError::Spawn {
            command: command.clone(),
            source,
        })?;
    if out.status.success() {
        return Ok(());
    }
    Err(LayerError::Command {
        command,
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

/// A Linux bridge of ours, deleted on drop.
struct Bridge {
    name: String,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = run("ip", &["link", "del", &self.name]);
    }
}

/// One DNAT rule in `nat OUTPUT`, deleted on drop.
struct Dnat {
    rule: Vec<String>,
}

impl Drop for Dnat {
    fn drop(&mut self) {
        let mut args = vec!["-t", "nat", "-D", "OUTPUT"];
        args.extend(self.rule.iter().map(String::as_str));
        let _ = run("iptables", &args);
    }
}

/// One layer built for one server.
pub struct Net {
    pub layer: Layer,
    /// Where a server inside binds.
    pub inside_ip: Ipv4Addr,
    tag: String,
    // Drop order: the rule, the pair (and its namespace), then the bridge.
    dnats: Vec<Dnat>,
    wire: Option<Wire>,
    bridge: Option<Bridge>,
}

impl Net {
    /// Builds `layer` (loopback builds nothing). Needs root for every other layer.
    pub fn create(layer: Layer) -> Result<Net, LayerError> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed) % 1000;
        let tag = format!("{PREFIX}{}_{n}", std::process::id() % 1_000_000);
        let mut net = Net {
            layer,
            inside_ip: Ipv4Addr::LOCALHOST,
            tag,
            dnats: Vec::new(),
            wire: None,
            bridge: None,
        };
        if layer == Layer::Loopback {
            return Ok(net);
        }
        let wire = Wire::create_named("slLv", None).map_err(LayerError::Wire)?;
        net.inside_ip = wire.ns_ip;
        let host_if = wire.host_if.clone();
        let host_ip = format!("{}/30", wire.host_ip());
        net.wire = Some(wire);
        if matches!(layer, Layer::Bridge | Layer::BridgeNat) {
            let name = net.tag.replacen(PREFIX, "slLb", 1);
            run("ip", &["link", "add", "name", &name, "type", "bridge"])?;
            net.bridge = Some(Bridge { name: name.clone() });
            run("ip", &["addr", "del", &host_ip, "dev", &host_if])?;
            run("ip", &["link", "set", &host_if, "master", &name])?;
            run("ip", &["addr", "add", &host_ip, "dev", &name])?;
            run("ip", &["link", "set", &name, "mtu", "65520", "up"])?;
        }
        Ok(net)
    }

    /// Makes `cmd`'s process start inside the layer (nothing to do on loopback).
    pub fn enter(&self, cmd: &mut Command) {
        if let Some(w) = &self.wire {
            w.enter_before_exec(cmd);
        }
    }

    /// Where a client on the host reaches a server listening at `inside_ip:port`: the
    /// same address, or with NAT a published port on the host's address that a DNAT
    /// rule sends inside.
    pub fn publish(&mut self, port: u16) -> Result<SocketAddr, LayerError> {
        let inside = SocketAddr::from((self.inside_ip, port));
        let (Layer::BridgeNat, Some(w)) = (self.layer, &self.wire) else {
            return Ok(inside);
        };
        let host_ip = w.host_ip();
        let published = lab::free_port().map_err(LayerError::Port)?;
        let rule: Vec<String> = [
            "-d",
            &format!("{host_ip}/32"),
            "-p",
            "tcp",
            "--dport",
            &published.to_string(),
            "-m",
            "comment",
            "--comment",
            &self.tag,
            "-j",
            "DNAT",
            "--to-destination",
            &inside.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut args = vec!["-t", "nat", "-I", "OUTPUT"];
        args.extend(rule.iter().map(String::as_str));
        run("iptables", &args)?;
        self.dnats.push(Dnat { rule });
        Ok(SocketAddr::from((host_ip, published)))
    }

    /// The names this layer made (interfaces, rule comment), for the leak test.
    #[cfg(test)]
    pub fn names(&self) -> Vec<String> {
        let mut v = vec![self.tag.clone()];
        v.extend(self.wire.as_ref().map(|w| w.host_if.clone()));
        v.extend(self.bridge.as_ref().map(|b| b.name.clone()));
        v
    }
}

impl Net {
    /// A listener inside the layer (tests: a server without a program).
    #[cfg(test)]
    fn listen_inside(&self, port: u16) -> std::io::Result<std::net::TcpListener> {
        let addr = SocketAddr::from((self.inside_ip, port));
        match &self.wire {
            Some(w) => w.in_namespace(|| std::net::TcpListener::bind(addr)),
            None => std::net::TcpListener::bind(SocketAddr::from((self.inside_ip, 0))),
        }
    }
}

/// Whether a leftover named `<prefix><pid>_<n>` belongs to a process that is gone.
fn owner_gone(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .and_then(|rest| rest.split('_').next())
        .and_then(|pid| pid.parse::<u32>().ok())
        .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
}

/// Removes bridges, veth ends and DNAT rules of ours whose process is gone (a run
/// killed with SIGKILL cannot remove them itself). Pids are kept modulo 10^6 in the
/// names, so a live process whose pid matches keeps its leftovers: never someone else's.
pub fn sweep_stale() {
    if let Ok(out) = Command::new("ip").args(["-o", "link", "show"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some(name) = line
                .split(": ")
                .nth(1)
                .map(|n| n.split('@').next().unwrap_or(n))
            else {
                continue;
            };
            if owner_gone(name, "slLb") || owner_gone(name, "slLv") {
                let _ = run("ip", &["link", "del", name]);
            }
        }
    }
    if let Ok(out) = Command::new("iptables")
        .args(["-t", "nat", "-S", "OUTPUT"])
        .output()
    {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let ours = line.split_whitespace().any(|w| owner_gone(w, PREFIX));
            if let (true, Some(rule)) = (ours, line.strip_prefix("-A OUTPUT ")) {
                let mut args = vec!["-t", "nat", "-D", "OUTPUT"];
                args.extend(rule.split_whitespace());
                let _ = run("iptables", &args);
            }
        }
    }
}

/// Why the namespace layers cannot be built here.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Unavailable {
    #[error("the namespace layers need root")]
    NotRoot,
    #[error("`{0}` is not installed")]
    Missing(&'static str),
}

/// Whether this process can build the namespace layers, and why not.
pub fn available() -> Result<(), Unavailable> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Unavailable::NotRoot);
    }
    for tool in ["ip", "iptables"] {
        if lab::find_program(tool).is_none() {
            return Err(Unavailable::Missing(tool));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};

    /// Why the namespace layers cannot be tried here, if they cannot.
    fn unavailable() -> Option<String> {
        if let Err(why) = available() {
            return Some(why.to_string());
        }
        match Command::new("ip").args(["netns", "list"]).output() {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(format!(
                "`ip netns list` failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Some(format!("`ip netns` unavailable: {e}")),
        }
    }

    /// Every interface name and the nat OUTPUT rules, as the host has them now.
    fn host_state() -> String {
        let links = std::fs::read_dir("/sys/class/net")
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let rules = Command::new("iptables")
            .args(["-t", "nat", "-S", "OUTPUT"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        format!("{links}\n{rules}")
    }

    /// Root only: each layer carries a connection from the host to a listener inside
    /// it (through the DNAT rule for bridge+NAT), and dropping it leaves no interface
    /// and no rule of its names behind.
    #[test]
    fn every_layer_carries_traffic_and_leaves_nothing_behind() {
        if let Some(why) = unavailable() {
            eprintln!("NOTE: skipped: {why}");
            return;
        }
        for layer in Layer::HOST {
            let mut net = Net::create(layer).unwrap();
            let names = net.names();
            let listener = net.listen_inside(8080).unwrap();
            let addr = net.publish(listener.local_addr().unwrap().port()).unwrap();
            if layer == Layer::BridgeNat {
                assert_ne!(addr.ip(), std::net::IpAddr::V4(net.inside_ip), "{layer:?}");
                assert!(
                    host_state().contains(&names[0]),
                    "the DNAT rule is in place"
                );
            }
            let mut client = std::net::TcpStream::connect(addr).unwrap();
            let (mut server, _) = listener.accept().unwrap();
            client.write_all(b"ping").unwrap();
            let mut got = [0u8; 4];
            server.read_exact(&mut got).unwrap();
            assert_eq!(&got, b"ping", "{layer:?}");
            drop((client, server, listener));
            drop(net);
            let after = host_state();
            for name in names {
                assert!(
                    !after.split_whitespace().any(|w| w == name),
                    "{layer:?}: {name} left behind:\n{after}"
                );
            }
        }
    }

    #[test]
    fn leftovers_of_gone_processes_only() {
        assert!(!owner_gone(
            &format!("slLb{}_0", std::process::id()),
            "slLb"
        ));
        assert!(
            owner_gone("slLb999999_3", "slLb") || std::path::Path::new("/proc/999999").exists()
        );
        assert!(!owner_gone("docker0", "slLb"));
        assert!(!owner_gone("slLbx_1", "slLb"));
    }
}
