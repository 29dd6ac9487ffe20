//! Where each target's probes go: one interface, a source address and the
//! next hop's MAC address per target.
//!
//! Routes are asked of the kernel once per /24 (IPv4) or /64 (IPv6) block of
//! the targets. Behind a gateway, one MAC serves the whole block; on-link
//! targets each need their own, resolved by ARP/NDP before the scan starts
//! (a host that never answers is down: its probes are not sent). Every
//! target must leave through the same interface.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use super::frame::Hop;
use crate::error::{Error, ErrorKind, Result};
use crate::net::route::{self, Route};
use crate::targets::addrs::{addr, key};
use crate::targets::AddrSet;

/// Most on-link hosts resolved by ARP/NDP before a scan (the check comes
/// before any packet is sent).
pub const MAX_ON_LINK: usize = 1 << 15;

/// Most addresses looked up one by one, in /24 blocks whose first address
/// has no route (a host route may lead to others): a /16's worth.
const SPLIT_LOOKUPS: u128 = 1 << 16;

/// Overrides from the command line.
#[derive(Clone, Debug, Default)]
pub struct LinkOptions {
    /// `-e IFACE`.
    pub iface: Option<String>,
    /// `-S ADDR`.
    pub src: Option<IpAddr>,
}

#[derive(Clone, Debug)]
enum Block {
    /// Every target of the block goes through this hop.
    All(Hop),
    /// On-link: each target has its own entry in `hosts`.
    PerHost,
    /// No route for the block's first address, but one for some others
    /// (host routes): each target has its own entry in `hosts`, `None`
    /// where the kernel has no route.
    Split,
    /// The kernel has no route (or the gateway never answered ARP/NDP): the
    /// first target of the block, and why.
    Unreachable(IpAddr, String),
}

/// The resolved paths of a scan's targets.
#[derive(Clone, Debug)]
pub struct Links {
    pub ifindex: u32,
    pub ifname: String,
    /// The targets are this machine's own addresses (reached through loopback).
    pub loopback: bool,
    blocks: HashMap<(bool, u128), Block>,
    hosts: HashMap<u128, Option<Hop>>,
}

fn block_of(k: u128) -> (bool, u128) {
    match addr(k) {
        IpAddr::V4(_) => (false, k >> 8),
        IpAddr::V6(_) => (true, k >> 64),
    }
}

fn block_start(b: (bool, u128)) -> u128 {
    if b.0 {
        b.1 << 64
    } else {
        b.1 << 8
    }
}

fn block_end(b: (bool, u128)) -> u128 {
    if b.0 {
        (b.1 << 64) | u128::from(u64::MAX)
    } else {
        (b.1 << 8) | 0xff
    }
}

impl Links {
    /// The hop for a target; `Err(reason)` if it cannot be reached.
    pub fn hop(&self, ip: IpAddr) -> std::result::Result<Hop, &str> {
        let k = key(ip);
        match self.blocks.get(&block_of(k)) {
            Some(Block::All(h)) => Ok(*h),
            Some(Block::PerHost) => self.hosts.get(&k).copied().flatten().ok_or("no ARP/NDP answer"),
            Some(Block::Split) => self.hosts.get(&k).copied().flatten().ok_or("no route"),
            Some(Block::Unreachable(_, why)) => Err(why.as_str()),
            None => Err("not a target"),
        }
    }

    /// For an on-link target (asked by ARP/NDP): `Some` with the MAC
    /// address that answered, or `Some(None)` if none did; `None` for a
    /// target behind a gateway or unreachable.
    pub fn neighbour(&self, ip: IpAddr) -> Option<Option<[u8; 6]>> {
        let k = key(ip);
        match self.blocks.get(&block_of(k)) {
            Some(Block::PerHost) => Some(self.hosts.get(&k).copied().flatten().map(|h| h.dst_mac)),
            _ => None,
        }
    }

    /// Blocks of targets with no usable route: a target in each, and why.
    pub fn unreachable(&self) -> impl Iterator<Item = (IpAddr, &str)> {
        self.blocks.values().filter_map(|block| match block {
            Block::Unreachable(ip, why) => Some((*ip, why.as_str())),
            _ => None,
        })
    }

    /// Resolves every target of `addrs`.
    pub fn resolve(addrs: &AddrSet, opts: &LinkOptions, arp_timeout: Duration) -> Result<Links> {
        Links::resolve_within(addrs, opts, arp_timeout, SPLIT_LOOKUPS)
    }

    /// [`Links::resolve`], looking up at most `split_lookups` addresses one
    /// by one in blocks whose first address has no route; past that, such a
    /// block is unreachable whole.
    pub fn resolve_within(
        addrs: &AddrSet,
        opts: &LinkOptions,
        arp_timeout: Duration,
        split_lookups: u128,
    ) -> Result<Links> {
        let mut links =
            Links { ifindex: 0, ifname: String::new(), loopback: false, blocks: HashMap::new(), hosts: HashMap::new() };
        let mut gateway_macs: HashMap<IpAddr, Option<[u8; 6]>> = HashMap::new();
        let mut on_link: Vec<(IpAddr, Route)> = Vec::new();
        // Addresses looked up one by one in blocks whose first has no route.
        let mut split_budget = split_lookups;
        for &(lo, hi) in addrs.ranges() {
            let (first, last) = (block_of(lo), block_of(hi));
            let mut b = first;
            loop {
                let rep = addr(lo.max(block_start(b)));
                let block = match lookup(rep, opts) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound && opts.iface.is_some() => {
                        return Err(Error::new(ErrorKind::Config, format!("-e: {e}")));
                    }
                    Err(e) if rep.is_ipv4() && split_budget > hi.min(block_end(b)) - lo.max(block_start(b)) => {
                        // A host route may still lead to some of the block.
                        let (s, e2) = (lo.max(block_start(b)), hi.min(block_end(b)));
                        split_budget -= e2 - s + 1;
                        let mut any = false;
                        for k in s..=e2 {
                            let ip = addr(k);
                            let hop = match lookup(ip, opts) {
                                Ok(r) if !r.loopback && r.gateway.is_some() => {
                                    links.use_interface(&r)?;
                                    let gw = r.gateway.unwrap_or(ip);
                                    let mac = *gateway_macs
                                        .entry(gw)
                                        .or_insert_with(|| route::next_hop_mac(&r, ip, arp_timeout).ok());
                                    mac.map(|dst_mac| {
                                        Ok::<_, Error>(Hop { src_mac: r.if_mac, dst_mac, src: source(&r, opts)? })
                                    })
                                    .transpose()?
                                }
                                _ => None,
                            };
                            any |= hop.is_some();
                            links.hosts.insert(k, hop);
                        }
                        if any {
                            Block::Split
                        } else {
                            for k in s..=e2 {
                                links.hosts.remove(&k);
                            }
                            Block::Unreachable(rep, e.to_string())
                        }
                    }
                    Err(e) => Block::Unreachable(rep, e.to_string()),
                    Ok(r) => {
                        links.use_interface(&r)?;
                        let src = source(&r, opts)?;
                        if r.loopback {
                            Block::All(Hop { src_mac: [0; 6], dst_mac: [0; 6], src })
                        } else if let Some(gw) = r.gateway {
                            let mac = *gateway_macs
                                .entry(gw)
                                .or_insert_with(|| route::next_hop_mac(&r, rep, arp_timeout).ok());
                            match mac {
                                Some(dst_mac) => Block::All(Hop { src_mac: r.if_mac, dst_mac, src }),
                                None => Block::Unreachable(rep, format!("no ARP/NDP answer from gateway {gw}")),
                            }
                        } else {
                            let (s, e) = (lo.max(block_start(b)), hi.min(block_end(b)));
                            if on_link.len() as u128 + (e - s + 1) > MAX_ON_LINK as u128 {
                                return Err(Error::new(
                                    ErrorKind::Config,
                                    format!("more than {MAX_ON_LINK} on-link targets for a SYN scan; use -sT"),
                                ));
                            }
                            on_link.extend((s..=e).map(|k| (addr(k), r.clone())));
                            Block::PerHost
                        }
                    }
                };
                links.blocks.insert(b, block);
                if b == last {
                    break;
                }
                b = (b.0, b.1 + 1);
            }
        }
        links.resolve_on_link(on_link, opts, arp_timeout)?;
        Ok(links)
    }

    fn use_interface(&mut self, r: &Route) -> Result<()> {
        if self.ifindex == 0 {
            self.ifindex = r.ifindex;
            self.ifname = r.ifname.clone();
            self.loopback = r.loopback;
        } else if self.ifindex != r.ifindex {
            return Err(Error::new(
                ErrorKind::Config,
                format!(
                    "targets leave through two interfaces ({} and {}); scan them separately or pick one with -e",
                    self.ifname, r.ifname
                ),
            ));
        }
        Ok(())
    }

    /// ARP/NDP for on-link targets: what the neighbour table knows, then one
    /// datagram to each missing host (the kernel resolves it), then polling.
    fn resolve_on_link(&mut self, hosts: Vec<(IpAddr, Route)>, opts: &LinkOptions, timeout: Duration) -> Result<()> {
        let mut missing = self.take_known(hosts, opts)?;
        if missing.is_empty() {
            return Ok(());
        }
        let v4 = UdpSocket::bind("0.0.0.0:0").ok();
        let v6 = UdpSocket::bind("[::]:0").ok();
        for (ip, _) in &missing {
            let sock = if ip.is_ipv4() { &v4 } else { &v6 };
            if let Some(s) = sock {
                let _ = s.send_to(&[0], SocketAddr::new(*ip, 9));
            }
        }
        let deadline = Instant::now() + timeout;
        while !missing.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            missing = self.take_known(missing, opts)?;
        }
        for (ip, _) in missing {
            self.hosts.insert(key(ip), None);
        }
        Ok(())
    }
}

impl Links {
    /// Records the hosts the neighbour table knows; returns the others.
    fn take_known(&mut self, hosts: Vec<(IpAddr, Route)>, opts: &LinkOptions) -> Result<Vec<(IpAddr, Route)>> {
        let mut unknown = Vec::new();
        for (ip, r) in hosts {
            match route::neighbour_mac(r.ifindex, ip).ok().flatten() {
                Some(mac) => {
                    let hop = Hop { src_mac: r.if_mac, dst_mac: mac, src: source(&r, opts)? };
                    self.hosts.insert(key(ip), Some(hop));
                }
                None => unknown.push((ip, r)),
            }
        }
        Ok(unknown)
    }
}

fn lookup(dst: IpAddr, opts: &LinkOptions) -> std::io::Result<Route> {
    match &opts.iface {
        Some(i) => route::route_via(dst, i),
        None => route::route_to(dst),
    }
}

fn source(r: &Route, opts: &LinkOptions) -> Result<IpAddr> {
    match opts.src {
        Some(s) if s.is_ipv4() == r.src.is_ipv4() => Ok(s),
        Some(s) => Err(Error::new(ErrorKind::Config, format!("-S {s} is not of the targets' address family"))),
        None => Ok(r.src),
    }
}
