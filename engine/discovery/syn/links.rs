//! Where each target's probes go: one interface, a source address and the
//! next hop's MAC address per target.
//!
//! Routes are asked of the kernel once per /24 (IPv4) or /64 (IPv6) block of
//! the targets. Behind a gateway, one MAC serves the whole block. On-link
//! targets each need their own, which only an answer to a request of this
//! scan gives: with host discovery, the discovery of each host asks
//! (ARP/NDP from the raw engine, [`super::hosts`]); a scan that takes every
//! host as up (`-Pn`) asks them all first ([`Links::ask_neighbours`]), or
//! takes a confirmed entry of the neighbour table (REACHABLE, PERMANENT).
//! An unconfirmed entry (STALE and the like, which anyone's forged ARP
//! request makes) is never used. Every target must leave through the same
//! interface.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::frame::Hop;
use super::machine::{Machine, Pace, Seen};
use super::neighbour;
use crate::error::{Error, ErrorKind, Result};
use crate::raw::packet::{Checksum, PacketSocket, BATCH, FRAME};
use crate::raw::route::{self, Route};
use crate::targets::addrs::{addr, key};
use crate::targets::AddrSet;

/// Most on-link hosts asked by ARP/NDP in a scan (the check comes before
/// any packet is sent).
pub const MAX_ON_LINK: usize = 1 << 15;

/// The receive buffer of the socket that asks on-link hosts before a scan:
/// room for the answers to a burst of requests.
const ASK_BUFFER: usize = 8 << 20;

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
    /// On-link: each target is reached along this hop with its own MAC
    /// (in `macs` once known; `dst_mac` here is unused).
    OnLink(Hop),
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
    /// The targets of split blocks.
    hosts: HashMap<u128, Option<Hop>>,
    /// The on-link targets, as ranges (at most [`MAX_ON_LINK`] addresses).
    on_link: Vec<(u128, u128)>,
    /// MACs of on-link targets learned before the scan ([`Links::ask_neighbours`]).
    macs: HashMap<u128, [u8; 6]>,
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
            Some(Block::OnLink(h)) => {
                self.macs.get(&k).map(|&dst_mac| Hop { dst_mac, ..*h }).ok_or("no ARP/NDP answer")
            }
            Some(Block::Split) => self.hosts.get(&k).copied().flatten().ok_or("no route"),
            Some(Block::Unreachable(_, why)) => Err(why.as_str()),
            None => Err("not a target"),
        }
    }

    /// An on-link target's MAC, learned after the scan resolved its paths
    /// (host discovery's ARP/NDP answers), for the stages that probe it
    /// after the port scan.
    pub fn learn(&mut self, ip: IpAddr, mac: [u8; 6]) {
        if self.on_link(ip).is_some() && self.macs.len() < MAX_ON_LINK {
            self.macs.insert(key(ip), mac);
        }
    }

    /// For an on-link target: the path to its link (its MAC not filled
    /// in), along which ARP/NDP asks for it; `None` for a target behind a
    /// gateway or unreachable.
    pub fn on_link(&self, ip: IpAddr) -> Option<Hop> {
        match self.blocks.get(&block_of(key(ip))) {
            Some(Block::OnLink(h)) => Some(*h),
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

    /// Resolves the path of every target of `addrs`: routes, source
    /// addresses and gateways' MACs (waiting up to `arp_timeout` for each
    /// gateway). On-link targets' own MACs are not asked here.
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
        let mut links = Links {
            ifindex: 0,
            ifname: String::new(),
            loopback: false,
            blocks: HashMap::new(),
            hosts: HashMap::new(),
            on_link: Vec::new(),
            macs: HashMap::new(),
        };
        let mut gateway_macs: HashMap<IpAddr, Option<[u8; 6]>> = HashMap::new();
        let mut on_link: u128 = 0;
        // Addresses looked up one by one in blocks whose first has no route.
        let mut split_budget = split_lookups;
        for &(lo, hi) in addrs.ranges() {
            let (first, last) = (block_of(lo), block_of(hi));
            let mut b = first;
            loop {
                let rep = addr(lo.max(block_start(b)));
                let block = match lookup(rep, opts) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound && opts.iface.is_some() => {
                        return Err(Error::new(ErrorKind::Config, format!("`link.iface`: {e}")));
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
                            on_link += e - s + 1;
                            if on_link > MAX_ON_LINK as u128 {
                                return Err(Error::new(
                                    ErrorKind::Config,
                                    format!("more than {MAX_ON_LINK} on-link targets for a SYN scan; use `scan_type(Connect)`"),
                                ));
                            }
                            links.on_link.push((s, e));
                            Block::OnLink(Hop { src_mac: r.if_mac, dst_mac: [0; 6], src })
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
        Ok(links)
    }

    /// Learns the MAC of every on-link target that answers, before a scan
    /// that takes every host as up (`-Pn`: its first probe to a host needs
    /// the MAC; with host discovery, discovery asks instead). A confirmed
    /// entry of the neighbour table (REACHABLE, PERMANENT) is taken as it
    /// is; the others are asked by ARP/NDP requests sent on a packet socket
    /// as `pace` allows (rate, window, timeout, tries), whose answers are
    /// read from it. Stops asking, keeping what it learned, once `stop`
    /// says so. A target that never answers keeps no path.
    pub fn ask_neighbours(&mut self, pace: Pace, stop: &dyn Fn() -> bool) -> io::Result<()> {
        if self.on_link.is_empty() {
            return Ok(());
        }
        // Only a speed-up: without it every host is asked.
        let known = route::confirmed_neighbours(self.ifindex).unwrap_or_default();
        let mut ask = Vec::new();
        // Not our own address: a request for it would be a gratuitous ARP.
        let targets = self.on_link.iter().flat_map(|&(lo, hi)| lo..=hi);
        let targets: Vec<u128> = targets.filter(|&k| self.on_link(addr(k)).is_some_and(|h| key(h.src) != k)).collect();
        for k in targets {
            match known.get(&addr(k)) {
                Some(&mac) => {
                    self.macs.insert(k, mac);
                }
                None => ask.push(k),
            }
        }
        if ask.is_empty() {
            return Ok(());
        }
        let sock = PacketSocket::open(self.ifindex)?;
        sock.tune(ASK_BUFFER)?;
        let probes = ask.into_iter().map(|k| (addr(k), neighbour::PROBE));
        let mut m = Machine::new(probes, pace, Instant::now(), Seen::set())
            .share_rtt()
            .quick_probe(neighbour::PROBE, neighbour::FIRST_WAIT);
        let mut frames = vec![vec![0u8; neighbour::MAX_REQUEST]; BATCH];
        let mut lens = [0usize; BATCH];
        let mut bufs = vec![[0u8; FRAME]; BATCH];
        let mut got_lens = [0usize; BATCH];
        let mut sums = [Checksum::Unchecked; BATCH];
        let mut due = Vec::with_capacity(BATCH);
        let mut stopped = false;
        while !m.is_done() {
            if !stopped && stop() {
                stopped = true;
                m.stop();
            }
            let now = Instant::now();
            due.clear();
            m.poll(now, BATCH, &mut due);
            let mut n = 0;
            for &(ip, _) in &due {
                if let Some(hop) = self.on_link(ip) {
                    lens[n] = neighbour::fill_request(&mut frames[n], &hop, ip);
                    n += usize::from(lens[n] > 0);
                }
            }
            super::send_all(&sock, &frames[..n], &lens[..n])?;
            // A full batch out: more may be due at once.
            let wait = if due.len() == BATCH {
                Duration::ZERO
            } else {
                m.next_wakeup(now).map_or(Duration::from_millis(5), |t| t.saturating_duration_since(now))
            };
            let got = sock.recv_batch(&mut bufs, &mut got_lens, &mut sums, wait.min(Duration::from_millis(5)))?;
            let now = Instant::now();
            for i in 0..got {
                let Some(a) = neighbour::parse(&bufs[i][..got_lens[i]], sums[i]) else { continue };
                let asked = self.on_link(a.ip).is_some_and(|hop| a.answers(&hop));
                if asked && m.answered_at(a.ip, neighbour::PROBE, now) {
                    self.macs.insert(key(a.ip), a.mac);
                }
            }
        }
        Ok(())
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
                    "targets leave through two interfaces ({} and {}); scan them separately or pick one with `link.iface`",
                    self.ifname, r.ifname
                ),
            ));
        }
        Ok(())
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
        Some(s) => Err(Error::new(ErrorKind::Config, format!("`link.src` {s} is not of the targets' address family"))),
        None => Ok(r.src),
    }
}

#[cfg(test)]
impl Links {
    /// Links on which every address from `lo` to `hi` is behind the
    /// gateway of `hop`: for tests without a kernel.
    pub(crate) fn routed_for_tests(lo: IpAddr, hi: IpAddr, hop: Hop) -> Links {
        let mut links = Links::on_link_for_tests(lo, hi, hop);
        links.blocks.values_mut().for_each(|b| *b = Block::All(hop));
        links.on_link.clear();
        links
    }

    /// Links on which every address from `lo` to `hi` is on-link along
    /// `hop` (no MAC known yet): for tests without a kernel.
    pub(crate) fn on_link_for_tests(lo: IpAddr, hi: IpAddr, hop: Hop) -> Links {
        let (lo, hi) = (key(lo), key(hi));
        let mut blocks = HashMap::new();
        let (mut b, last) = (block_of(lo), block_of(hi));
        loop {
            blocks.insert(b, Block::OnLink(hop));
            if b == last {
                break;
            }
            b = (b.0, b.1 + 1);
        }
        Links {
            ifindex: 1,
            ifname: "test0".into(),
            loopback: false,
            blocks,
            hosts: HashMap::new(),
            on_link: vec![(lo, hi)],
            macs: HashMap::new(),
        }
    }
}
