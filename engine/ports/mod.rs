//! Port specifications and the port-frequency table.
//!
//! In: nmap's port syntax (`22,80,1000-2000`, `-` for 1-65535, `-1024`,
//! `60000-`, `T:80,U:53`, service names from the table such as `http`), or a
//! count for `--top-ports`. Out: sorted, de-duplicated TCP and UDP port lists.
//! Ports without a `T:`/`U:` prefix apply to every protocol being scanned, as
//! in nmap. Also [`Proto`], the protocol every port event names, and the
//! usual service on a port ([`service_name`]). What always holds: this is a
//! leaf (it imports nothing of the crate but [`crate::error`]), so the target
//! space ([`crate::targets`]) and the events ([`crate::findings`]) both take
//! it without taking each other.

use crate::error::{Error, ErrorKind, Result};

/// The port-frequency table: `port/proto name`, most often open first.
const TABLE: &str = include_str!("top-ports.txt");

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    pub fn as_str(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }

    /// `tcp` or `udp`.
    pub fn parse(s: &str) -> Option<Proto> {
        match s {
            "tcp" => Some(Proto::Tcp),
            "udp" => Some(Proto::Udp),
            _ => None,
        }
    }
}

/// TCP and UDP ports to scan, each sorted and without duplicates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortList {
    pub tcp: Vec<u16>,
    pub udp: Vec<u16>,
}

impl PortList {
    fn finish(mut self) -> PortList {
        for v in [&mut self.tcp, &mut self.udp] {
            v.sort_unstable();
            v.dedup();
        }
        self
    }
}

fn bad(spec: &str, why: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::PortSpec, format!("invalid port spec '{spec}': {why}"))
}

/// Parses a port specification.
pub fn parse_ports(spec: &str) -> Result<PortList> {
    if spec.trim().is_empty() {
        return Err(Error::new(ErrorKind::PortSpec, "empty port spec"));
    }
    let mut out = PortList::default();
    let mut proto: Option<Proto> = None;
    for raw in spec.split(',') {
        let mut item = raw.trim();
        if let Some((p, rest)) = item.split_once(':') {
            proto = Some(match p {
                "T" | "t" => Proto::Tcp,
                "U" | "u" => Proto::Udp,
                "S" | "s" => return Err(bad(spec, "SCTP ports are not supported")),
                _ => return Err(bad(spec, format!("unknown protocol prefix '{p}:' (use T: or U:)"))),
            });
            item = rest.trim();
        }
        if item.is_empty() {
            return Err(bad(spec, "empty item"));
        }
        if item.bytes().next().is_some_and(|b| b.is_ascii_alphabetic()) {
            // A service name: the ports the table gives that name.
            let named = named_ports(item, proto);
            if named.is_empty() {
                return Err(bad(spec, format!("unknown service name '{item}'")));
            }
            for (port, p) in named {
                match p {
                    Proto::Tcp => out.tcp.push(port),
                    Proto::Udp => out.udp.push(port),
                }
            }
            continue;
        }
        let (lo, hi) = item_range(spec, item)?;
        let push = |v: &mut Vec<u16>| v.extend(lo..=hi);
        match proto {
            Some(Proto::Tcp) => push(&mut out.tcp),
            Some(Proto::Udp) => push(&mut out.udp),
            None => {
                push(&mut out.tcp);
                push(&mut out.udp);
            }
        }
    }
    Ok(out.finish())
}

fn item_range(spec: &str, item: &str) -> Result<(u16, u16)> {
    let num = |s: &str| -> Result<u16> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(spec, format!("'{item}' is not a port or range")));
        }
        match s.parse::<u32>() {
            Ok(n) if n <= 65535 => Ok(n as u16),
            _ => Err(bad(spec, format!("port {s} is out of range (0-65535)"))),
        }
    };
    match item.split_once('-') {
        None => num(item).map(|p| (p, p)),
        Some((a, b)) => {
            let lo = if a.is_empty() { 1 } else { num(a)? };
            let hi = if b.is_empty() { 65535 } else { num(b)? };
            if lo > hi {
                return Err(bad(spec, format!("port range {item} is reversed")));
            }
            Ok((lo, hi))
        }
    }
}

/// Entries of the frequency table, most frequent first.
fn table() -> impl Iterator<Item = (u16, Proto, &'static str)> {
    TABLE.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).filter_map(|l| {
        let (pp, name) = l.split_once(' ')?;
        let (port, proto) = pp.split_once('/')?;
        let proto = match proto {
            "tcp" => Proto::Tcp,
            "udp" => Proto::Udp,
            _ => return None,
        };
        Some((port.parse().ok()?, proto, name.trim()))
    })
}

fn named_ports(name: &str, proto: Option<Proto>) -> Vec<(u16, Proto)> {
    table()
        .filter(|(_, p, n)| n.eq_ignore_ascii_case(name) && proto.is_none_or(|want| want == *p))
        .map(|(port, p, _)| (port, p))
        .collect()
}

/// The usual service on a port, from the table (`443/tcp` gives `https`).
pub fn service_name(port: u16, proto: &str) -> Option<&'static str> {
    table().find(|(p, pr, _)| *p == port && pr.as_str() == proto).map(|(_, _, name)| name)
}

/// The `n` most frequently open ports of a protocol (fewer if the table is shorter).
pub fn top_ports(proto: Proto, n: usize) -> Vec<u16> {
    let mut v: Vec<u16> = table().filter(|(_, p, _)| *p == proto).map(|(port, _, _)| port).take(n).collect();
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(spec: &str) -> Vec<u16> {
        parse_ports(spec).unwrap().tcp
    }

    fn err(spec: &str) -> String {
        let e = parse_ports(spec).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::PortSpec);
        e.to_string()
    }

    #[test]
    fn lists_and_ranges() {
        assert_eq!(tcp("22,80,1000-1003"), [22, 80, 1000, 1001, 1002, 1003]);
        assert_eq!(tcp("80,22,80"), [22, 80]);
        assert_eq!(tcp(" 443 , 80 "), [80, 443]);
    }

    #[test]
    fn open_ended_ranges_follow_nmap() {
        assert_eq!(tcp("-").len(), 65535);
        assert_eq!(tcp("-").first(), Some(&1));
        assert_eq!(tcp("-3"), [1, 2, 3]);
        assert_eq!(tcp("65534-"), [65534, 65535]);
        assert_eq!(tcp("0"), [0]);
    }

    #[test]
    fn protocol_prefixes_stick_until_changed() {
        let p = parse_ports("22,U:53,161,T:80").unwrap();
        assert_eq!(p.tcp, [22, 80]);
        assert_eq!(p.udp, [22, 53, 161]);
    }

    #[test]
    fn service_names_come_from_the_table() {
        assert!(tcp("ssh").contains(&22));
        assert!(tcp("http,https").contains(&443));
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        assert!(err("70000").contains("port 70000 is out of range"));
        assert!(err("5-1").contains("port range 5-1 is reversed"));
        assert!(err("22,,80").contains("empty item"));
        assert!(err("22x").contains("not a port"));
        assert!(err("X:22").contains("unknown protocol prefix"));
        assert!(err("no-such-service-name").contains("unknown service name"));
        assert!(err("1-99999").contains("out of range"));
        assert!(parse_ports("").is_err());
    }

    #[test]
    fn top_ports_table_is_ordered_and_large_enough() {
        let top = top_ports(Proto::Tcp, 1000);
        assert_eq!(top.len(), 1000, "table must hold 1000 distinct TCP ports");
        let top10 = top_ports(Proto::Tcp, 10);
        for p in [80, 443, 22] {
            assert!(top10.contains(&p), "{p} belongs in the top 10");
        }
        assert_eq!(top_ports(Proto::Tcp, 100).len(), 100);
        assert!(top_ports(Proto::Udp, 100).contains(&53));
        // Every table line parses: no silently dropped entries.
        let lines = TABLE.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).count();
        assert_eq!(table().count(), lines);
    }
}
