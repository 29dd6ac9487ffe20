//! Targets: what to scan and in which order.
//!
//! In: target terms, exclusions and a port list, already parsed and resolved
//! by the caller (see [`spec`] and [`ports`]). Out: a [`ScanOrder`], an
//! iterator of `(address, port)` pairs.
//!
//! What always holds: the order is a keyed permutation of the whole
//! `addresses x ports` index space (so neither hosts nor ports are hit in
//! sequence), every index of a shard is produced exactly once, excluded
//! addresses are not in the space at all, and the same seed, shard and start
//! give the same order.

pub mod addrs;
pub mod permute;
pub mod ports;
pub mod spec;

use std::net::IpAddr;
use std::sync::Arc;

pub use addrs::AddrSet;
pub use permute::Permutation;
pub use ports::{parse_ports, top_ports, PortList, Proto};
pub use spec::{parse_term, resolve, Family, Term};

use crate::error::{Error, ErrorKind, Result};

/// Largest index space one scan may have.
pub const MAX_SPACE: u64 = 1 << 61;

/// `--shard K/N`: this scanner takes positions `K-1, K-1+N, K-1+2N, ...`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 1-based.
    pub k: u64,
    pub n: u64,
}

impl Shard {
    pub const WHOLE: Shard = Shard { k: 1, n: 1 };

    /// Parses `K/N` with `1 <= K <= N`.
    pub fn parse(s: &str) -> Result<Shard> {
        let bad = || Error::new(ErrorKind::Config, format!("invalid shard '{s}': expected K/N with 1 <= K <= N"));
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (k, n): (u64, u64) = (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if k == 0 || n == 0 || k > n {
            return Err(bad());
        }
        Ok(Shard { k, n })
    }
}

/// The addresses and ports of a scan (cheap to clone).
#[derive(Clone, Debug)]
pub struct TargetSpace {
    addrs: Arc<AddrSet>,
    ports: Arc<[u16]>,
    len: u64,
}

impl TargetSpace {
    /// The included addresses minus the excluded ones, times the ports.
    pub fn new(include: &AddrSet, exclude: &AddrSet, ports: Vec<u16>) -> Result<TargetSpace> {
        let addrs = include.subtract(exclude);
        if addrs.is_empty() {
            let why = if include.is_empty() { "no targets to scan" } else { "every target is excluded" };
            return Err(Error::new(ErrorKind::TargetSpec, why));
        }
        if ports.is_empty() {
            return Err(Error::new(ErrorKind::PortSpec, "no ports to scan"));
        }
        let len =
            addrs.len().checked_mul(ports.len() as u128).filter(|&n| n <= u128::from(MAX_SPACE)).ok_or_else(|| {
                Error::new(
                    ErrorKind::Config,
                    format!("{} addresses x {} ports is too large a scan", addrs.len(), ports.len()),
                )
            })? as u64;
        Ok(TargetSpace { addrs: Arc::new(addrs), ports: ports.into(), len })
    }

    pub fn addrs(&self) -> &AddrSet {
        &self.addrs
    }

    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// Number of `(address, port)` pairs.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The index of a pair, if it is in the space (the inverse of `pair`).
    pub fn index_of(&self, ip: IpAddr, port: u16) -> Option<u64> {
        let a = self.addrs.index_of(ip)?;
        let p = self.ports.binary_search(&port).ok()?;
        u64::try_from(a * self.ports.len() as u128 + p as u128).ok()
    }

    /// The pair behind an index of the space.
    pub fn pair(&self, index: u64) -> (IpAddr, u16) {
        let n = self.ports.len() as u64;
        let addr = self.addrs.get(u128::from(index / n)).expect("index inside the space");
        (addr, self.ports[(index % n) as usize])
    }

    /// The scan order for a seed and shard, starting at position `start`
    /// (0 for a new scan, the position reached for a resumed one).
    pub fn order(&self, seed: u64, shard: Shard, start: u64) -> ScanOrder {
        let first = start.saturating_mul(shard.n).saturating_add(shard.k - 1);
        ScanOrder { space: self.clone(), perm: Permutation::new(self.len, seed), next: first, step: shard.n }
    }

    /// Number of pairs a shard visits in all.
    pub fn shard_len(&self, shard: Shard) -> u64 {
        let offset = shard.k - 1;
        if self.len <= offset {
            0
        } else {
            (self.len - offset).div_ceil(shard.n)
        }
    }
}

/// The pairs of one shard in permuted order.
#[derive(Clone, Debug)]
pub struct ScanOrder {
    space: TargetSpace,
    perm: Permutation,
    next: u64,
    step: u64,
}

impl ScanOrder {
    /// The space this order walks.
    pub fn space(&self) -> &TargetSpace {
        &self.space
    }

    /// How many pairs this order has produced so far, counted within the shard
    /// (what a resumed scan passes back as `start`).
    pub fn position(&self) -> u64 {
        self.next / self.step
    }

    /// Deals the rest of this order round-robin into `parts` orders (one per
    /// worker); together they produce exactly the pairs this one would have.
    pub fn split(self, parts: u64) -> Vec<ScanOrder> {
        let parts = parts.max(1);
        (0..parts)
            .map(|i| ScanOrder {
                next: self.next.saturating_add(i.saturating_mul(self.step)),
                step: self.step.saturating_mul(parts),
                ..self.clone()
            })
            .collect()
    }
}

impl Iterator for ScanOrder {
    type Item = (IpAddr, u16);

    fn next(&mut self) -> Option<(IpAddr, u16)> {
        if self.next >= self.perm.len() {
            return None;
        }
        let v = self.perm.at(self.next);
        self.next += self.step;
        Some(self.space.pair(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn set(terms: &[&str]) -> AddrSet {
        let mut r = Vec::new();
        for t in terms {
            match parse_term(t).unwrap() {
                Term::Ranges(v) => r.extend(v),
                Term::Host(_) => unreachable!(),
            }
        }
        AddrSet::from_ranges(r)
    }

    #[test]
    fn every_pair_once_and_excluded_never() {
        let include = set(&["198.19.0.0/22", "2001:2::/120"]);
        let exclude = set(&["198.19.1.0/24", "198.19.2.7", "2001:2::80-2001:2::ff"]);
        let ports = vec![22, 80, 443];
        let space = TargetSpace::new(&include, &exclude, ports.clone()).unwrap();
        assert_eq!(space.len(), (1024 - 256 - 1 + 128) * 3);
        let mut seen = HashSet::new();
        for (ip, port) in space.order(99, Shard::WHOLE, 0) {
            assert!(!exclude.contains(ip), "excluded {ip} visited");
            assert!(include.contains(ip));
            assert!(ports.contains(&port));
            assert!(seen.insert((ip, port)), "{ip}:{port} visited twice");
        }
        assert_eq!(seen.len() as u64, space.len());
    }

    #[test]
    fn index_of_inverts_pair() {
        let space = TargetSpace::new(&set(&["198.19.0.0/30", "2001:2::1"]), &AddrSet::default(), vec![22, 80]).unwrap();
        for i in 0..space.len() {
            let (ip, port) = space.pair(i);
            assert_eq!(space.index_of(ip, port), Some(i));
        }
        assert_eq!(space.index_of("198.19.0.0".parse().unwrap(), 443), None);
        assert_eq!(space.index_of("198.19.0.9".parse().unwrap(), 80), None);
    }

    #[test]
    fn order_is_not_address_major() {
        let space = TargetSpace::new(&set(&["198.19.0.0/24"]), &AddrSet::default(), (1..=100).collect()).unwrap();
        let first: Vec<_> = space.order(5, Shard::WHOLE, 0).take(100).collect();
        let hosts: HashSet<_> = first.iter().map(|(ip, _)| *ip).collect();
        let ports: HashSet<_> = first.iter().map(|(_, p)| *p).collect();
        assert!(hosts.len() > 50 && ports.len() > 50, "{} hosts, {} ports", hosts.len(), ports.len());
    }

    #[test]
    fn shards_partition_the_space() {
        let space = TargetSpace::new(&set(&["198.19.0.0/24"]), &AddrSet::default(), vec![80, 81, 82]).unwrap();
        let mut all = HashSet::new();
        let mut total = 0;
        for k in 1..=3 {
            let shard = Shard { k, n: 3 };
            let part: Vec<_> = space.order(1, shard, 0).collect();
            assert_eq!(part.len() as u64, space.shard_len(shard));
            total += part.len();
            all.extend(part);
        }
        assert_eq!(total as u64, space.len());
        assert_eq!(all.len() as u64, space.len());
    }

    #[test]
    fn resuming_continues_where_the_order_stopped() {
        let space = TargetSpace::new(&set(&["198.19.0.0/26"]), &AddrSet::default(), vec![1, 2]).unwrap();
        let shard = Shard { k: 2, n: 2 };
        let whole: Vec<_> = space.order(3, shard, 0).collect();
        let mut first = space.order(3, shard, 0);
        let head: Vec<_> = first.by_ref().take(10).collect();
        let tail: Vec<_> = space.order(3, shard, first.position()).collect();
        assert_eq!([head, tail].concat(), whole);
    }

    #[test]
    fn split_orders_cover_the_shard_once() {
        let space = TargetSpace::new(&set(&["198.19.0.0/25"]), &AddrSet::default(), vec![7, 8, 9]).unwrap();
        let shard = Shard { k: 1, n: 2 };
        let whole: HashSet<_> = space.order(4, shard, 0).collect();
        let mut parts = Vec::new();
        for part in space.order(4, shard, 0).split(3) {
            parts.extend(part);
        }
        assert_eq!(parts.len(), whole.len());
        assert_eq!(parts.into_iter().collect::<HashSet<_>>(), whole);
    }

    #[test]
    fn empty_spaces_are_errors() {
        let inc = set(&["198.19.0.0/30"]);
        assert!(TargetSpace::new(&inc, &inc, vec![80]).unwrap_err().to_string().contains("every target is excluded"));
        assert!(TargetSpace::new(&AddrSet::default(), &AddrSet::default(), vec![80]).is_err());
        assert!(TargetSpace::new(&inc, &AddrSet::default(), vec![]).is_err());
        let huge = AddrSet::from_ranges(vec![(0, 1 << 50)]);
        let e = TargetSpace::new(&huge, &AddrSet::default(), (1..=4096).collect()).unwrap_err();
        assert!(e.to_string().contains("too large a scan"), "{e}");
        assert!(TargetSpace::new(&huge, &AddrSet::default(), vec![80]).is_ok(), "2^50 x 1 fits under 2^61");
    }

    #[test]
    fn shard_spec() {
        assert_eq!(Shard::parse("2/3").unwrap(), Shard { k: 2, n: 3 });
        for bad in ["0/3", "4/3", "1", "a/b", "1/0"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }
}
