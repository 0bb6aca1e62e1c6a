//! Who an export line names: client patterns as exports(5) writes them, and matching a
//! connection's address against them.
//!
//! Supported: `*` (everyone), a single host by address (IPv4 or IPv6, no brackets), an
//! IP network as `address/length` or IPv4 `address/dotted.mask`, and a host name, which
//! is resolved when the file is read (at start and at every reload) to every address it
//! has; the name matches a client connecting from one of them. Refused, because each
//! needs a lookup per connecting client (a reverse DNS or NIS query the server would
//! trust): wildcard names (`*.lan`, `host?`, `host[0-9]`), NIS netgroups (`@group`),
//! and the deprecated `gss/krb5*` clients (no RPCSEC_GSS here either).

use std::net::IpAddr;

use ipnet::IpNet;

use super::problem::Problem;

/// How one client entry matches addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// `*`: every client.
    Anyone,
    /// One host: an address as written, or a name and the addresses it resolved to.
    Host(Vec<IpAddr>),
    /// An IP network.
    Net(IpNet),
}

impl Pattern {
    /// Whether a client at `ip` (IPv4-mapped IPv6 taken as IPv4) is this pattern.
    pub fn matches(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        match self {
            Pattern::Anyone => true,
            Pattern::Host(addrs) => addrs.iter().any(|a| a.to_canonical() == ip),
            Pattern::Net(net) => net.contains(&ip),
        }
    }

    /// exports(5)'s precedence when several entries of one line match: a single host,
    /// then networks, then `*` (lower first); entries of one kind go in line order.
    pub fn rank(&self) -> u8 {
        match self {
            Pattern::Host(_) => 0,
            Pattern::Net(_) => 1,
            Pattern::Anyone => 2,
        }
    }
}

/// Resolves a host name to its addresses (at load time); the server passes the system
/// resolver, tests a table.
pub type Resolver<'a> = &'a dyn Fn(&str) -> std::io::Result<Vec<IpAddr>>;

/// The system resolver (`getaddrinfo`: /etc/hosts, then DNS).
pub fn system_resolver(name: &str) -> std::io::Result<Vec<IpAddr>> {
    use std::net::ToSocketAddrs;
    let mut addrs: Vec<IpAddr> = (name, 0).to_socket_addrs()?.map(|a| a.ip()).collect();
    addrs.sort();
    addrs.dedup();
    if addrs.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no addresses",
        ));
    }
    Ok(addrs)
}

/// Parses one client as written (without its options).
pub fn parse(text: &str, resolve: Resolver<'_>) -> Result<Pattern, Problem> {
    let bad = |why: &'static str| Problem::BadClient {
        client: text.to_string(),
        why,
    };
    if text == "*" {
        return Ok(Pattern::Anyone);
    }
    if text.starts_with('@') {
        return Err(bad(
            "NIS netgroups are not supported (the server would trust a NIS lookup per client); list the hosts or their network",
        ));
    }
    if text.starts_with("gss/") {
        return Err(bad(
            "RPCSEC_GSS (Kerberos) is not supported: only AUTH_SYS (sec=sys) is served",
        ));
    }
    if text.starts_with('=') {
        return Err(bad("WebNFS public handles (=public) are not supported"));
    }
    if text.contains(['[', ']']) {
        return Err(bad(
            "brackets are a wildcard class in exports(5) (write IPv6 addresses without them); wildcards are not supported",
        ));
    }
    if text.contains(['*', '?']) {
        return Err(bad(
            "wildcard host names need a reverse DNS lookup of every client, which rustnfs does not make; give the network instead (e.g. 192.168.1.0/24)",
        ));
    }
    if let Some((addr, mask)) = text.split_once('/') {
        return network(addr, mask).ok_or_else(|| {
            bad("not an address/length or address/netmask network (e.g. 10.0.0.0/8, 192.168.1.0/255.255.255.0, fd00::/64)")
        });
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(Pattern::Host(vec![ip]));
    }
    let valid = text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
    if !valid || text.starts_with(['-', '.']) {
        return Err(bad("not an address, a network or a host name"));
    }
    match resolve(text) {
        Ok(addrs) if !addrs.is_empty() => Ok(Pattern::Host(addrs)),
        Ok(_) => Err(Problem::Unresolved {
            host: text.to_string(),
            why: "it has no addresses".to_string(),
        }),
        Err(e) => Err(Problem::Unresolved {
            host: text.to_string(),
            why: e.to_string(),
        }),
    }
}

/// `addr/len` or IPv4 `addr/a.b.c.d` (a contiguous mask); host bits are cleared, as
/// exportfs does.
fn network(addr: &str, mask: &str) -> Option<Pattern> {
    let ip: IpAddr = addr.parse().ok()?;
    let len = match mask.parse::<u8>() {
        Ok(len) => len,
        Err(_) => {
            let (IpAddr::V4(_), Ok(IpAddr::V4(m))) = (ip, mask.parse::<IpAddr>()) else {
                return None;
            };
            let bits = u32::from(m);
            let len = bits.leading_ones();
            // A contiguous mask: ones, then only zeros.
            if bits.checked_shl(len).unwrap_or(0) != 0 {
                return None;
            }
            len as u8
        }
    };
    IpNet::new(ip, len).ok().map(|n| Pattern::Net(n.trunc()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(name: &str) -> std::io::Result<Vec<IpAddr>> {
        match name {
            "nas.lan" => Ok(vec![
                "192.168.1.10".parse().unwrap(),
                "fd00::10".parse().unwrap(),
            ]),
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "Name or service not known",
            )),
        }
    }

    fn p(text: &str) -> Result<Pattern, Problem> {
        parse(text, &hosts)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn patterns_match_as_exports_5_says() {
        assert!(p("*").unwrap().matches(ip("8.8.8.8")));
        let host = p("192.168.1.5").unwrap();
        assert!(host.matches(ip("192.168.1.5")) && host.matches(ip("::ffff:192.168.1.5")));
        assert!(!host.matches(ip("192.168.1.6")));
        for net in [
            "192.168.1.0/24",
            "192.168.1.77/24",
            "192.168.1.0/255.255.255.0",
        ] {
            let n = p(net).unwrap();
            assert_eq!(n, Pattern::Net("192.168.1.0/24".parse().unwrap()), "{net}");
            assert!(n.matches(ip("192.168.1.200")) && !n.matches(ip("192.168.2.1")));
        }
        let v6 = p("fd00:1::/64").unwrap();
        assert!(v6.matches(ip("fd00:1::9")) && !v6.matches(ip("fd00:2::9")));
        assert!(p("::1").unwrap().matches(ip("::1")));
        let named = p("nas.lan").unwrap();
        assert!(named.matches(ip("192.168.1.10")) && named.matches(ip("fd00::10")));
        assert!(!named.matches(ip("192.168.1.11")));
        assert!(p("nas.lan").unwrap().rank() < p("10.0.0.0/8").unwrap().rank());
        assert!(p("10.0.0.0/8").unwrap().rank() < p("*").unwrap().rank());
    }

    /// Every refusal, with the words that say what to change.
    #[test]
    fn refusals_name_what_to_write_instead() {
        let cases = [
            ("@trusted", "'@trusted': NIS netgroups are not supported"),
            (
                "gss/krb5",
                "'gss/krb5': RPCSEC_GSS (Kerberos) is not supported",
            ),
            ("=public", "'=public': WebNFS public handles"),
            ("[fd00::1]", "'[fd00::1]': brackets are a wildcard class"),
            (
                "*.lan",
                "'*.lan': wildcard host names need a reverse DNS lookup",
            ),
            ("host?", "give the network instead (e.g. 192.168.1.0/24)"),
            ("10.0.0.0/33", "'10.0.0.0/33': not an address/length"),
            (
                "10.0.0.0/255.0.255.0",
                "not an address/length or address/netmask",
            ),
            ("fd00::/ffff::", "not an address/length"),
            (
                "bad!name",
                "'bad!name': not an address, a network or a host name",
            ),
            (
                "nowhere.invalid",
                "client 'nowhere.invalid' does not resolve (Name or service not known)",
            ),
        ];
        for (text, want) in cases {
            let e = p(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
