//! Parsing of target terms: addresses, CIDR blocks, ranges and hostnames.
//!
//! In: one term as the user typed it (`198.18.0.2`, `198.19.0.0/24`,
//! `198.18.0.1-20`, `10.0.0-3.1-254`, `198.18.0.1-198.18.1.5`, `2001:2::/120`,
//! `localhost`). Out: address key ranges, or a hostname still to resolve.
//! Anything that looks like an IPv4 address but is not one is an error, never
//! a hostname, so `300.1.1.1` is refused rather than looked up in DNS.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, ToSocketAddrs};

use super::addrs::{key, KeyRange};
use crate::error::{Error, ErrorKind, Result};

/// Largest number of addresses one term may name (a /64 of IPv6 is too many).
pub const MAX_TERM_ADDRESSES: u128 = 1 << 40;

/// A parsed target term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Term {
    Ranges(Vec<KeyRange>),
    Host(String),
}

fn bad(term: &str, why: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::TargetSpec, format!("invalid target '{term}': {why}"))
}

/// Parses one target term.
pub fn parse_term(term: &str) -> Result<Term> {
    let t = term.trim();
    if t.is_empty() {
        return Err(Error::new(ErrorKind::TargetSpec, "empty target"));
    }
    if let Some((addr, prefix)) = t.split_once('/') {
        return cidr(t, addr, prefix).map(|r| Term::Ranges(vec![r]));
    }
    if t.contains(':') {
        return ipv6(t).map(|r| Term::Ranges(vec![r]));
    }
    if t.bytes().all(|b| b.is_ascii_digit() || b == b'.' || b == b'-' || b == b'*') {
        return ipv4(t).map(Term::Ranges);
    }
    hostname(t).map(|()| Term::Host(t.to_ascii_lowercase()))
}

fn cidr(term: &str, addr: &str, prefix: &str) -> Result<KeyRange> {
    let prefix: u32 = prefix.parse().map_err(|_| bad(term, format!("prefix length '{prefix}' is not a number")))?;
    let ip: IpAddr = addr.parse().map_err(|_| {
        if addr.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            bad(term, format!("'{addr}' is not an IPv4 address"))
        } else {
            bad(term, "a CIDR block needs an IP address before the '/'")
        }
    })?;
    let (bits, base) = match ip {
        IpAddr::V4(a) => (32, u128::from(u32::from(a))),
        IpAddr::V6(a) => (128, u128::from(a)),
    };
    if prefix > bits {
        let family = if bits == 32 { "IPv4" } else { "IPv6" };
        return Err(bad(term, format!("prefix length {prefix} is out of range for {family} (0-{bits})")));
    }
    let host_bits = bits - prefix;
    if host_bits >= 64 || (1u128 << host_bits) > MAX_TERM_ADDRESSES {
        return Err(bad(term, format!("a /{prefix} is too many addresses to scan")));
    }
    let mask = (1u128 << host_bits) - 1;
    let lo = base & !mask;
    let hi = lo | mask;
    Ok(match ip {
        IpAddr::V4(_) => (key(v4(lo)), key(v4(hi))),
        IpAddr::V6(_) => (lo, hi),
    })
}

fn v4(n: u128) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(n as u32))
}

fn ipv6(term: &str) -> Result<KeyRange> {
    if let Some((a, b)) = term.split_once('-') {
        let lo: Ipv6Addr = a.parse().map_err(|_| bad(term, format!("'{a}' is not an IPv6 address")))?;
        let hi: Ipv6Addr = b.parse().map_err(|_| bad(term, format!("'{b}' is not an IPv6 address")))?;
        let (lo, hi) = (u128::from(lo), u128::from(hi));
        if lo > hi {
            return Err(bad(term, "the range's first address is above its last"));
        }
        if hi - lo >= MAX_TERM_ADDRESSES {
            return Err(bad(term, "the range is too many addresses to scan"));
        }
        return Ok((lo, hi));
    }
    let a: Ipv6Addr = term.parse().map_err(|_| bad(term, "not an IPv6 address"))?;
    let k = key(IpAddr::V6(a));
    Ok((k, k))
}

/// IPv4 forms: `a.b.c.d`, `a.b.c.d-a.b.c.e`, and nmap's per-octet ranges
/// (`198.18.0.1-20`, `10.0-1.*.1`).
fn ipv4(term: &str) -> Result<Vec<KeyRange>> {
    if let Some((a, b)) = term.split_once('-') {
        if let (Ok(lo), Ok(hi)) = (a.parse::<Ipv4Addr>(), b.parse::<Ipv4Addr>()) {
            if lo > hi {
                return Err(bad(term, "the range's first address is above its last"));
            }
            return Ok(vec![(key(lo.into()), key(hi.into()))]);
        }
    }
    let parts: Vec<&str> = term.split('.').collect();
    if parts.len() != 4 {
        return Err(bad(term, "an IPv4 address has four dot-separated octets"));
    }
    let mut octets = [(0u8, 0u8); 4];
    for (slot, part) in octets.iter_mut().zip(&parts) {
        *slot = octet_range(term, part)?;
    }
    // Every combination of the first three octets gives one run of the last.
    let runs: usize = octets[..3].iter().map(|(lo, hi)| usize::from(hi - lo) + 1).product();
    if runs > 1 << 16 {
        return Err(bad(term, "too many octet ranges; use a CIDR block"));
    }
    let mut out = Vec::with_capacity(runs);
    for a in octets[0].0..=octets[0].1 {
        for b in octets[1].0..=octets[1].1 {
            for c in octets[2].0..=octets[2].1 {
                let lo = Ipv4Addr::new(a, b, c, octets[3].0);
                let hi = Ipv4Addr::new(a, b, c, octets[3].1);
                out.push((key(lo.into()), key(hi.into())));
            }
        }
    }
    Ok(out)
}

fn octet_range(term: &str, part: &str) -> Result<(u8, u8)> {
    let num = |s: &str| -> Result<u8> {
        if s.is_empty() || s.len() > 3 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(term, format!("'{part}' is not an octet")));
        }
        let n: u32 = s.parse().map_err(|_| bad(term, format!("'{part}' is not an octet")))?;
        u8::try_from(n).map_err(|_| bad(term, format!("octet {n} is out of range (0-255)")))
    };
    if part == "*" {
        return Ok((0, 255));
    }
    match part.split_once('-') {
        None => num(part).map(|n| (n, n)),
        Some((a, b)) => {
            let lo = if a.is_empty() { 0 } else { num(a)? };
            let hi = if b.is_empty() { 255 } else { num(b)? };
            if lo > hi {
                return Err(bad(term, format!("octet range {part} is reversed")));
            }
            Ok((lo, hi))
        }
    }
}

fn hostname(t: &str) -> Result<()> {
    if !is_hostname(t) {
        return Err(bad(t, "not an address, CIDR block, range or hostname"));
    }
    Ok(())
}

/// Whether `t` is a hostname (the root's dot allowed at its end):
/// dot-separated labels of 1 to 63 letters, digits, hyphens (not first or
/// last) and underscores, 253 bytes at most.
pub fn is_hostname(t: &str) -> bool {
    let ok_label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let name = t.strip_suffix('.').unwrap_or(t);
    name.len() <= 253 && name.split('.').all(ok_label)
}

/// Which address family to take when a name has both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// IPv4 only (A records), as nmap without -6.
    PreferV4,
    /// IPv6 only (AAAA records), with -6.
    OnlyV6,
}

/// Every address of a name (the system resolver's order, duplicates
/// left out): the wanted family's, then the others.
pub fn resolve(name: &str, family: Family) -> Result<(Vec<IpAddr>, Vec<IpAddr>)> {
    pick_family(name, system_addresses(name)?, family)
}

/// Every address the system resolver (`getaddrinfo`: /etc/hosts, DNS) has
/// for a name.
pub fn system_addresses(name: &str) -> Result<Vec<IpAddr>> {
    Ok((name, 0)
        .to_socket_addrs()
        .map_err(|e| Error::with_source(ErrorKind::Resolve, format!("cannot resolve '{name}': {e}"), e))?
        .map(|sa| sa.ip())
        .collect())
}

/// Splits a name's addresses into the family wanted and the rest, refusing
/// a name with none of the wanted family in one line that says what to do.
pub fn pick_family(name: &str, all: Vec<IpAddr>, family: Family) -> Result<(Vec<IpAddr>, Vec<IpAddr>)> {
    let mut wanted = Vec::new();
    let mut others = Vec::new();
    for a in all {
        let list = if a.is_ipv6() == (family == Family::OnlyV6) { &mut wanted } else { &mut others };
        if !list.contains(&a) {
            list.push(a);
        }
    }
    if wanted.is_empty() {
        let why = match (family, others.is_empty()) {
            (_, true) => format!("cannot resolve '{name}': it has no address"),
            (Family::PreferV4, false) => {
                format!("'{name}' has only IPv6 addresses (AAAA records): scan it with `ipv6`")
            }
            (Family::OnlyV6, false) => {
                format!("'{name}' has no IPv6 address (AAAA record), and `ipv6` scans IPv6 only")
            }
        };
        return Err(Error::new(ErrorKind::Resolve, why));
    }
    Ok((wanted, others))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::addrs::addr;

    fn ranges(t: &str) -> Vec<(String, String)> {
        match parse_term(t).unwrap() {
            Term::Ranges(r) => r.into_iter().map(|(a, b)| (addr(a).to_string(), addr(b).to_string())).collect(),
            Term::Host(h) => panic!("{t} parsed as host {h}"),
        }
    }

    fn err(t: &str) -> String {
        let e = parse_term(t).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TargetSpec, "{t}");
        e.to_string()
    }

    #[test]
    fn single_addresses() {
        assert_eq!(ranges("198.18.0.2"), [("198.18.0.2".into(), "198.18.0.2".into())]);
        assert_eq!(ranges("2001:2::2"), [("2001:2::2".into(), "2001:2::2".into())]);
    }

    #[test]
    fn cidr_blocks_include_network_and_broadcast() {
        assert_eq!(ranges("198.19.0.0/24"), [("198.19.0.0".into(), "198.19.0.255".into())]);
        assert_eq!(ranges("198.19.3.77/16"), [("198.19.0.0".into(), "198.19.255.255".into())]);
        assert_eq!(ranges("198.18.0.2/32"), [("198.18.0.2".into(), "198.18.0.2".into())]);
        assert_eq!(ranges("2001:2::/120"), [("2001:2::".into(), "2001:2::ff".into())]);
    }

    #[test]
    fn ranges_in_both_forms() {
        assert_eq!(ranges("198.18.0.1-20"), [("198.18.0.1".into(), "198.18.0.20".into())]);
        assert_eq!(ranges("198.18.0.250-198.18.1.3"), [("198.18.0.250".into(), "198.18.1.3".into())]);
        assert_eq!(ranges("10.0-1.5.*").len(), 2);
        assert_eq!(ranges("2001:2::1-2001:2::9"), [("2001:2::1".into(), "2001:2::9".into())]);
    }

    #[test]
    fn hostnames_are_kept_for_resolution() {
        assert_eq!(parse_term("LocalHost").unwrap(), Term::Host("localhost".into()));
        assert_eq!(parse_term("lab.moonscan.test").unwrap(), Term::Host("lab.moonscan.test".into()));
    }

    #[test]
    fn a_name_gives_the_wanted_family_first_and_says_when_it_has_none() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let both = vec![ip("2001:2::2"), ip("198.18.0.2"), ip("198.18.0.3"), ip("198.18.0.2")];
        let (v4, rest) = pick_family("n", both.clone(), Family::PreferV4).unwrap();
        assert_eq!(v4, [ip("198.18.0.2"), ip("198.18.0.3")], "in the resolver's order, once each");
        assert_eq!(rest, [ip("2001:2::2")]);
        let (v6, rest) = pick_family("n", both, Family::OnlyV6).unwrap();
        assert_eq!((v6, rest.len()), (vec![ip("2001:2::2")], 2));
        let e = pick_family("six.example", vec![ip("2001:2::2")], Family::PreferV4).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Resolve);
        assert!(
            e.to_string().contains("'six.example' has only IPv6 addresses (AAAA records): scan it with `ipv6`"),
            "{e}"
        );
        let e = pick_family("four.example", vec![ip("198.18.0.2")], Family::OnlyV6).unwrap_err();
        assert!(e.to_string().contains("no IPv6 address"), "{e}");
        assert!(pick_family("none.example", Vec::new(), Family::PreferV4).is_err());
    }

    #[test]
    fn bad_terms_are_refused_with_a_reason() {
        assert!(err("300.1.1.1").contains("octet 300 is out of range"));
        assert!(err("198.18.0.0/33").contains("prefix length 33 is out of range for IPv4 (0-32)"));
        assert!(err("2001:2::/129").contains("out of range for IPv6"));
        assert!(err("1.2.3").contains("four dot-separated octets"));
        assert!(err("1.2.3.9-4").contains("reversed"));
        assert!(err("198.18.1.0-198.18.0.0").contains("above its last"));
        assert!(err("2001:2::/32").contains("too many addresses"));
        assert!(err("1.2.3.4/x").contains("not a number"));
        assert!(err("host name!").contains("not an address"));
        assert!(err("-bad.example").contains("not an address"));
        assert!(err("1.2.3.1234").contains("not an octet"));
        assert!(err("*.*.*.*").contains("too many octet ranges"), "2^24 runs of the last octet");
        assert!(parse_term("10.*.*.*").is_ok(), "2^16 runs are allowed");
        assert!(parse_term("").is_err());
    }
}
