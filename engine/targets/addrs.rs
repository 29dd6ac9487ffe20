//! Address sets: sorted, disjoint, inclusive ranges in one `u128` key space.
//!
//! IPv4 addresses live in the IPv4-mapped block `::ffff:0:0/96`, so one set
//! holds both families and one index maps to one address. Every operation
//! keeps the ranges sorted and merged, so `len` and `get` are exact.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const V4_MAPPED: u128 = 0xffff_0000_0000;

/// The key of an address in the shared space.
pub fn key(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => V4_MAPPED | u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The address behind a key (IPv4-mapped keys come back as IPv4).
pub fn addr(key: u128) -> IpAddr {
    if key >> 32 == V4_MAPPED >> 32 {
        IpAddr::V4(Ipv4Addr::from(key as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(key))
    }
}

/// An inclusive range of keys.
pub type KeyRange = (u128, u128);

/// Sorts and merges ranges in place (overlapping and adjacent ones become
/// one), dropping reversed ones, and gives back the memory saved.
fn merge(ranges: &mut Vec<KeyRange>) {
    ranges.retain(|(lo, hi)| lo <= hi);
    ranges.sort_unstable();
    let mut w = 0;
    for r in 0..ranges.len() {
        let (lo, hi) = ranges[r];
        if w > 0 && lo <= ranges[w - 1].1.saturating_add(1) {
            ranges[w - 1].1 = ranges[w - 1].1.max(hi);
        } else {
            ranges[w] = (lo, hi);
            w += 1;
        }
    }
    ranges.truncate(w);
    ranges.shrink_to_fit();
}

/// Collects ranges one at a time (a target list read as a stream), merging
/// as it goes so that memory follows the distinct ranges, not the lines.
#[derive(Debug, Default)]
pub struct AddrSetBuilder {
    ranges: Vec<KeyRange>,
    merged: usize,
}

impl AddrSetBuilder {
    /// Most distinct ranges a set may have (32 bytes each, and 16 more
    /// once the set is built).
    pub const MAX_RANGES: usize = 4 << 20;
    /// Most ranges added between two merges.
    const UNMERGED: usize = 1 << 20;

    /// Adds a range; an error once the distinct ranges pass [`Self::MAX_RANGES`].
    pub fn push(&mut self, r: KeyRange) -> crate::error::Result<()> {
        self.ranges.push(r);
        if self.ranges.len() >= (2 * self.merged + 65_536).min(self.merged + Self::UNMERGED) {
            self.merge()?;
        }
        Ok(())
    }

    fn merge(&mut self) -> crate::error::Result<()> {
        merge(&mut self.ranges);
        self.merged = self.ranges.len();
        if self.merged > Self::MAX_RANGES {
            let msg = format!("more than {} separate addresses or ranges", Self::MAX_RANGES);
            return Err(crate::error::Error::new(crate::error::ErrorKind::TargetSpec, msg));
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn finish(mut self) -> crate::error::Result<AddrSet> {
        self.merge()?;
        Ok(AddrSet::from_ranges(self.ranges))
    }
}

/// A set of addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddrSet {
    ranges: Vec<KeyRange>,
    /// `offsets[i]` is the number of addresses in `ranges[..i]`.
    offsets: Vec<u128>,
}

impl AddrSet {
    /// Builds a set from ranges in any order, overlapping or not.
    pub fn from_ranges(mut ranges: Vec<KeyRange>) -> AddrSet {
        merge(&mut ranges);
        let merged = ranges;
        let mut offsets = Vec::with_capacity(merged.len());
        let mut total: u128 = 0;
        for (lo, hi) in &merged {
            offsets.push(total);
            total = total.saturating_add(hi - lo).saturating_add(1);
        }
        AddrSet { ranges: merged, offsets }
    }

    /// The addresses of `self` that are not in `other`.
    pub fn subtract(&self, other: &AddrSet) -> AddrSet {
        let mut out = Vec::new();
        let mut cut = other.ranges.iter().peekable();
        for &(lo, hi) in &self.ranges {
            let mut lo = lo;
            let mut open = true;
            // Skip exclusions wholly below this range.
            while let Some(&&(_, ehi)) = cut.peek() {
                if ehi < lo {
                    cut.next();
                } else {
                    break;
                }
            }
            for &(elo, ehi) in cut.clone() {
                if elo > hi {
                    break;
                }
                if elo > lo {
                    out.push((lo, elo - 1));
                }
                if ehi >= hi {
                    open = false;
                    break;
                }
                lo = ehi + 1;
            }
            if open {
                out.push((lo, hi));
            }
        }
        AddrSet::from_ranges(out)
    }

    /// Number of addresses (saturates at `u128::MAX`).
    pub fn len(&self) -> u128 {
        match (self.ranges.last(), self.offsets.last()) {
            (Some((lo, hi)), Some(off)) => off.saturating_add(hi - lo).saturating_add(1),
            _ => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The `index`-th address in ascending key order.
    pub fn get(&self, index: u128) -> Option<IpAddr> {
        let i = self.offsets.partition_point(|&off| off <= index).checked_sub(1)?;
        let (lo, hi) = self.ranges[i];
        let k = lo + (index - self.offsets[i]);
        (k <= hi).then(|| addr(k))
    }

    /// The position of `ip` in ascending key order (the inverse of `get`).
    pub fn index_of(&self, ip: IpAddr) -> Option<u128> {
        let k = key(ip);
        let i = self.ranges.partition_point(|&(lo, _)| lo <= k).checked_sub(1)?;
        let (lo, hi) = self.ranges[i];
        (k <= hi).then(|| self.offsets[i] + (k - lo))
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let k = key(ip);
        let i = self.ranges.partition_point(|&(lo, _)| lo <= k);
        i > 0 && self.ranges[i - 1].1 >= k
    }

    pub fn ranges(&self) -> &[KeyRange] {
        &self.ranges
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> u128 {
        key(s.parse().unwrap())
    }

    #[test]
    fn merges_overlapping_and_adjacent_ranges() {
        let s = AddrSet::from_ranges(vec![(5, 9), (1, 3), (4, 4), (20, 30), (25, 40)]);
        assert_eq!(s.ranges(), &[(1, 9), (20, 40)]);
        assert_eq!(s.len(), 9 + 21);
    }

    #[test]
    fn subtract_cuts_holes_and_edges() {
        let s = AddrSet::from_ranges(vec![(0, 99)]);
        let ex = AddrSet::from_ranges(vec![(0, 4), (10, 19), (50, 50), (95, 200)]);
        let d = s.subtract(&ex);
        assert_eq!(d.ranges(), &[(5, 9), (20, 49), (51, 94)]);
        assert_eq!(d.len(), 5 + 30 + 44);
        for k in 0..100u128 {
            let inside = (5..=9).contains(&k) || (20..=49).contains(&k) || (51..=94).contains(&k);
            assert_eq!(d.contains(addr(k)), inside, "key {k}");
        }
    }

    #[test]
    fn subtract_everything_leaves_nothing() {
        let s = AddrSet::from_ranges(vec![(10, 20), (30, 40)]);
        assert!(s.subtract(&AddrSet::from_ranges(vec![(0, 100)])).is_empty());
    }

    #[test]
    fn get_walks_ranges_in_order() {
        let s = AddrSet::from_ranges(vec![(v4("10.0.0.1"), v4("10.0.0.2")), (v4("10.0.1.0"), v4("10.0.1.0"))]);
        let all: Vec<String> = (0..4).filter_map(|i| s.get(i)).map(|a| a.to_string()).collect();
        assert_eq!(all, ["10.0.0.1", "10.0.0.2", "10.0.1.0"]);
    }

    #[test]
    fn index_of_inverts_get() {
        let s = AddrSet::from_ranges(vec![(10, 20), (40, 40), (100, 200)]);
        for i in 0..s.len() {
            assert_eq!(s.index_of(s.get(i).unwrap()), Some(i));
        }
        assert_eq!(s.index_of(addr(30)), None);
        assert_eq!(s.index_of(addr(201)), None);
    }

    #[test]
    fn ipv4_round_trips_through_the_mapped_space() {
        let ip: IpAddr = "198.18.0.2".parse().unwrap();
        assert_eq!(addr(key(ip)), ip);
        let ip6: IpAddr = "2001:2::2".parse().unwrap();
        assert_eq!(addr(key(ip6)), ip6);
    }

    // Regression: the cap on distinct ranges was checked only when a merge
    // ran, so a list could grow the builder far past it.
    #[test]
    fn the_builder_refuses_too_many_distinct_ranges_and_merges_adjacent_ones() {
        let mut b = AddrSetBuilder::default();
        for k in 0..3_000_000u128 {
            b.push((k, k)).unwrap();
        }
        assert_eq!(b.finish().unwrap().ranges(), [(0, 2_999_999)]);
        let mut b = AddrSetBuilder::default();
        let over = (AddrSetBuilder::MAX_RANGES + 10) as u128;
        let mut err = None;
        for k in 0..over {
            if let Err(e) = b.push((2 * k, 2 * k)) {
                err = Some(e);
                break;
            }
        }
        let err = err.or_else(|| b.finish().err()).expect("the cap trips");
        assert_eq!(err.kind(), crate::error::ErrorKind::TargetSpec);
        assert!(err.to_string().contains("separate addresses"), "{err}");
    }
}
