//! Targets: what to scan and in which order.
//!
//! In: target terms, exclusions and a port list, already parsed and resolved
//! by the caller (see [`spec`] and [`crate::ports`]). Out: a [`ScanOrder`], an
//! iterator of `(address, port)` pairs.
//!
//! What always holds: the order is a keyed permutation of the whole
//! `addresses x ports` index space (so neither hosts nor ports are hit in
//! sequence), every index of a shard is produced exactly once, excluded
//! addresses are not in the space at all, and the same seed, shard and start
//! give the same order.

pub mod addrs;
pub mod permute;
pub mod spec;

use std::net::IpAddr;
use std::sync::Arc;

pub use addrs::AddrSet;
pub use permute::Permutation;
pub use spec::{is_hostname, parse_term, pick_family, resolve, system_addresses, Family, Term};

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
    /// Walked in index order (each address's ports in turn, nmap's -r)
    /// instead of a keyed permutation.
    sequential: bool,
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
        Ok(TargetSpace { addrs: Arc::new(addrs), ports: ports.into(), len, sequential: false })
    }

    /// Walks the space in order: every port of the first address in
    /// ascending order, then the next address (nmap's -r).
    pub fn in_sequence(self, yes: bool) -> TargetSpace {
        TargetSpace { sequential: yes, ..self }
    }

    /// Walked in order (`-r`) rather than keyed.
    pub fn is_sequential(&self) -> bool {
        self.sequential
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
    /// (0 for a new scan).
    pub fn order(&self, seed: u64, shard: Shard, start: u64) -> ScanOrder {
        let first = start.saturating_mul(shard.n).saturating_add(shard.k - 1);
        self.order_from(seed, vec![Segment { next: first, step: shard.n }])
    }

    /// The scan order that walks what is left of an earlier one: the
    /// segments a [`Progress`] reported (a resumed scan).
    pub fn order_from(&self, seed: u64, segments: Vec<Segment>) -> ScanOrder {
        let perm = if self.sequential { Permutation::identity(self.len) } else { Permutation::new(self.len, seed) };
        let segs: Vec<Segment> = segments.into_iter().filter(|s| s.step > 0 && s.next < perm.len()).collect();
        ScanOrder {
            space: self.clone(),
            perm,
            segs: segs.into(),
            cur: 0,
            next: 0,
            first: Arc::from([]),
            first_at: 0,
            track: None,
        }
        .rewound()
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

/// Part of a scan order: permutation positions `next, next + step, ...`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Segment {
    pub next: u64,
    pub step: u64,
}

impl Segment {
    /// Positions left in a permutation of `len`.
    pub fn remaining(&self, len: u64) -> u64 {
        if self.next >= len {
            0
        } else {
            (len - self.next).div_ceil(self.step)
        }
    }
}

/// Where every part of a scan order has got to, readable while the scan
/// runs and after it stops: what a resumed scan must still do. An order
/// that walks hosts (host discovery, then each host's ports) takes a host
/// before it is done with it: the scan names the hosts a stop left
/// unfinished ([`Progress::redo`]), and a resumed scan takes them again
/// first.
#[derive(Debug, Default)]
pub struct Progress {
    parts: std::sync::Mutex<Vec<Arc<PartState>>>,
    redo: std::sync::Mutex<Vec<IpAddr>>,
}

#[derive(Debug)]
struct PartState {
    segs: Arc<[Segment]>,
    cur: std::sync::atomic::AtomicUsize,
    next: std::sync::atomic::AtomicU64,
    /// The part's hosts to take before its segments, and how many it took.
    first: Arc<[IpAddr]>,
    first_at: std::sync::atomic::AtomicUsize,
}

impl Progress {
    /// The segments not yet walked, over all parts.
    pub fn remaining(&self, len: u64) -> Vec<Segment> {
        use std::sync::atomic::Ordering::Acquire;
        let parts = self.parts.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for p in parts.iter() {
            let cur = p.cur.load(Acquire);
            for (i, s) in p.segs.iter().enumerate().skip(cur) {
                let seg = if i == cur { Segment { next: p.next.load(Acquire), step: s.step } } else { *s };
                if seg.remaining(len) > 0 {
                    out.push(seg);
                }
            }
        }
        out
    }

    /// A host taken from the order but left unfinished by a stop (its
    /// discovery given up, or ports of it not probed).
    pub fn redo(&self, ip: IpAddr) {
        self.redo.lock().unwrap_or_else(|e| e.into_inner()).push(ip);
    }

    /// The hosts a resumed scan takes first: those named by [`Self::redo`]
    /// and those of an order's own first hosts not yet taken, sorted, once
    /// each.
    pub fn hosts_to_redo(&self) -> Vec<IpAddr> {
        use std::sync::atomic::Ordering::Acquire;
        let mut out = self.redo.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for p in self.parts.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            out.extend(p.first.iter().skip(p.first_at.load(Acquire)));
        }
        out.sort_by_key(|ip| (ip.is_ipv6(), addrs::key(*ip)));
        out.dedup();
        out
    }
}

/// The pairs of one shard in permuted order: one or more segments, walked
/// one after the other.
#[derive(Clone, Debug)]
pub struct ScanOrder {
    space: TargetSpace,
    perm: Permutation,
    segs: Arc<[Segment]>,
    /// The segment being walked and its next position.
    cur: usize,
    next: u64,
    /// Hosts given before the segments (a resumed scan's unfinished ones),
    /// each with the space's first port, and how many were taken.
    first: Arc<[IpAddr]>,
    first_at: usize,
    track: Option<(Arc<Progress>, Arc<PartState>)>,
}

impl ScanOrder {
    fn rewound(mut self) -> ScanOrder {
        self.cur = 0;
        self.next = self.segs.first().map_or(u64::MAX, |s| s.next);
        self
    }

    /// The space this order walks.
    pub fn space(&self) -> &TargetSpace {
        &self.space
    }

    /// Takes `hosts` (addresses of the space) first, before the segments:
    /// what a resumed scan that walks hosts must take again.
    pub fn with_first(mut self, hosts: Vec<IpAddr>) -> ScanOrder {
        self.first = hosts.into();
        self.first_at = 0;
        self
    }

    /// The progress this order reports to, if tracked.
    pub fn progress(&self) -> Option<Arc<Progress>> {
        self.track.as_ref().map(|(p, _)| p.clone())
    }

    /// Pairs still to come.
    pub fn remaining(&self) -> u64 {
        let len = self.perm.len();
        (self.first.len() - self.first_at) as u64
            + self
                .segs
                .iter()
                .enumerate()
                .skip(self.cur)
                .map(|(i, s)| if i == self.cur { Segment { next: self.next, step: s.step } } else { *s })
                .map(|s| s.remaining(len))
                .sum::<u64>()
    }

    /// How many pairs this order has produced so far, counted within the
    /// shard, for a one-segment order (what `order`'s `start` takes back).
    pub fn position(&self) -> u64 {
        self.segs.first().map_or(0, |s| self.next / s.step)
    }

    /// Reports this order's progress (and that of the parts it is split into) to `p`.
    pub fn tracked(mut self, p: &Arc<Progress>) -> ScanOrder {
        let state = Arc::new(PartState {
            segs: self.segs.clone(),
            cur: std::sync::atomic::AtomicUsize::new(self.cur),
            next: std::sync::atomic::AtomicU64::new(self.next),
            first: self.first.clone(),
            first_at: std::sync::atomic::AtomicUsize::new(self.first_at),
        });
        p.parts.lock().unwrap_or_else(|e| e.into_inner()).push(state.clone());
        self.track = Some((p.clone(), state));
        self
    }

    /// Deals the rest of this order round-robin into `parts` orders (one per
    /// worker); together they produce exactly the pairs this one would have.
    pub fn split(self, parts: u64) -> Vec<ScanOrder> {
        let parts = parts.max(1);
        let rest: Vec<Segment> = self
            .segs
            .iter()
            .enumerate()
            .skip(self.cur)
            .map(|(i, s)| if i == self.cur { Segment { next: self.next, step: s.step } } else { *s })
            .collect();
        let progress = self.track.as_ref().map(|(p, state)| {
            // The whole is now its parts.
            p.parts.lock().unwrap_or_else(|e| e.into_inner()).retain(|x| !Arc::ptr_eq(x, state));
            p.clone()
        });
        (0..parts)
            .map(|i| {
                let segs: Vec<Segment> = rest
                    .iter()
                    .map(|s| Segment {
                        next: s.next.saturating_add(i.saturating_mul(s.step)),
                        step: s.step.saturating_mul(parts),
                    })
                    .collect();
                // The first hosts are dealt round-robin too.
                let first: Vec<IpAddr> =
                    self.first.iter().skip(self.first_at).skip(i as usize).step_by(parts as usize).copied().collect();
                let part = ScanOrder { segs: segs.into(), track: None, ..self.clone() }.rewound().with_first(first);
                match &progress {
                    Some(p) => part.tracked(p),
                    None => part,
                }
            })
            .collect()
    }
}

impl Iterator for ScanOrder {
    type Item = (IpAddr, u16);

    fn next(&mut self) -> Option<(IpAddr, u16)> {
        if let Some(&ip) = self.first.get(self.first_at) {
            self.first_at += 1;
            if let Some((_, st)) = &self.track {
                st.first_at.store(self.first_at, std::sync::atomic::Ordering::Release);
            }
            return Some((ip, self.space.ports().first().copied().unwrap_or(0)));
        }
        let len = self.perm.len();
        while self.next >= len {
            self.cur += 1;
            let seg = self.segs.get(self.cur)?;
            self.next = seg.next;
            if let Some((_, st)) = &self.track {
                st.next.store(self.next, std::sync::atomic::Ordering::Release);
                st.cur.store(self.cur, std::sync::atomic::Ordering::Release);
            }
        }
        let v = self.perm.at(self.next);
        self.next += self.segs[self.cur].step;
        if let Some((_, st)) = &self.track {
            st.next.store(self.next, std::sync::atomic::Ordering::Release);
        }
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
    fn hosts_to_redo_come_first_and_are_kept_until_taken() {
        let hosts = TargetSpace::new(&set(&["198.19.0.0/28"]), &AddrSet::default(), vec![0]).unwrap();
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let redo = vec![ip("198.19.0.3"), ip("198.19.0.9"), ip("198.19.0.12")];
        let progress = Arc::new(Progress::default());
        let order = hosts.order_from(4, vec![Segment { next: 0, step: 2 }]).with_first(redo.clone());
        assert_eq!(order.remaining(), 3 + 8);
        let mut parts = order.tracked(&progress).split(2);
        // Dealt round-robin, before each part's segments.
        assert_eq!(parts[0].next(), Some((redo[0], 0)));
        assert_eq!(parts[1].next(), Some((redo[1], 0)));
        // Not yet taken: still to redo, with what the scan names.
        progress.redo(ip("198.19.0.15"));
        progress.redo(ip("198.19.0.3"));
        assert_eq!(progress.hosts_to_redo(), [ip("198.19.0.3"), redo[2], ip("198.19.0.15")]);
        assert_eq!(parts[0].next(), Some((redo[2], 0)));
        assert_eq!(progress.hosts_to_redo(), [ip("198.19.0.3"), ip("198.19.0.15")]);
        // Then the segments, each position once.
        let rest: HashSet<_> = parts.into_iter().flatten().collect();
        assert_eq!(rest.len(), 8);
    }

    #[test]
    fn an_interrupted_split_order_resumes_with_every_pair_once() {
        let include = set(&["198.19.0.0/24"]);
        let space = TargetSpace::new(&include, &AddrSet::default(), vec![22, 80, 443]).unwrap();
        for (shard, parts) in [(Shard::WHOLE, 4u64), (Shard { k: 2, n: 3 }, 3)] {
            let progress = Arc::new(Progress::default());
            let mut seen: Vec<(IpAddr, u16)> = Vec::new();
            let mut orders = space.order(5, shard, 0).tracked(&progress).split(parts);
            // Each part stops at a different point, as workers do.
            for (i, o) in orders.iter_mut().enumerate() {
                seen.extend(o.by_ref().take(10 + 37 * i));
            }
            let left = progress.remaining(space.len());
            assert!(!left.is_empty());
            // The resumed order is itself split and interrupted once more.
            let again = Arc::new(Progress::default());
            let mut resumed = space.order_from(5, left).tracked(&again).split(2);
            seen.extend(resumed[0].by_ref().take(50));
            let last = again.remaining(space.len());
            for o in space.order_from(5, last) {
                seen.push(o);
            }
            seen.extend(resumed.remove(1).take(0));
            let all: Vec<_> = space.order(5, shard, 0).collect();
            let mut a = all.clone();
            a.sort();
            let mut b = seen.clone();
            b.sort();
            assert_eq!(b.len(), a.len(), "no pair twice, none missing ({shard:?})");
            assert_eq!(b, a);
        }
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
