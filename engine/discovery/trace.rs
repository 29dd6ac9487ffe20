//! Traceroute on the raw engine, as nmap 7.93's traceroute.cc does it.
//!
//! In: the hosts to trace, each with the port nmap would choose (an open
//! or closed TCP port gets SYN probes, a UDP port an empty datagram) and
//! the TTL its answers came with, if known; the resolved [`Links`]; a
//! timeout per hop; a stop callback. Out: per host, the hops (address and
//! round trip, or silence) and whether its first hops are another host's
//! ("Hops 1-N are the same as for X").
//!
//! Each host's probes go out with growing TTLs, all of a host's TTLs in
//! flight at once: from the distance its answers' TTL suggests (nmap's
//! `initial_ttl` of 10 without one) down to 1, then up from there until
//! the target itself answers. An ICMP time exceeded (or unreachable) from
//! a router, quoting our probe, ends a hop; so does the target's own
//! answer (SYN-ACK, RST, UDP, ICMP port unreachable). The probe's token
//! rides in its source port (nmap's `token ^ global_id`), and a TCP
//! probe's sequence number is keyed too, so a quote is known as ours.
//! Hops are kept in a cache by (TTL, address) shared between hosts: a
//! host that meets a hop another host found already follows that host
//! below it and stops probing lower TTLs.
//!
//! [`Tracer`] is the whole algorithm with no I/O and the time passed in
//! (driven on a simulated clock in the tests); [`run`] sends its probes
//! and feeds it what [`parse`] makes of the frames that come back.
//!
//! What always holds: at most [`MAX_TTL`] hops a host, at most
//! [`MAX_IN_FLIGHT`] probes unanswered at once, each TTL tried at most
//! `1 + MAX_RESENDS` times, each try waited for `timeout`; so a trace
//! ends, and a stop ends it sooner with what was found. Directly
//! connected targets get one probe (the hop is the target; nmap sends
//! none and takes the port scan's round trip), loopback targets none, as
//! in nmap. Hostile frames are only parsed, every length checked first.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use pnet_packet::ethernet::{EtherTypes, EthernetPacket};
use pnet_packet::icmp::IcmpPacket;
use pnet_packet::icmpv6::Icmpv6Packet;
use pnet_packet::ip::IpNextHeaderProtocols;
use pnet_packet::ipv4::{self, Ipv4Packet};
use pnet_packet::ipv6::Ipv6Packet;
use pnet_packet::tcp::{self, TcpFlags, TcpPacket};
use pnet_packet::udp::{self, UdpPacket};

use super::syn::frame::{self, Hop, Template, MAX_UDP_PROBE};
use super::syn::Links;
use crate::findings::{Proto, TraceHop};
use crate::raw::packet::{Checksum, PacketSocket, BATCH, FRAME};

const ETH: usize = 14;
const IP4: usize = 20;
const IP6: usize = 40;

/// A UDP checksum as sent: a computed 0 goes out as 0xffff (RFC 768).
fn nonzero(c: u16) -> u16 {
    if c == 0 {
        0xffff
    } else {
        c
    }
}

/// The highest TTL probed when the target never answers (nmap's `MAX_TTL`).
pub const MAX_TTL: u8 = 30;
/// Most probes unanswered at once, over all hosts (nmap's
/// `MAX_OUTSTANDING_PROBES`).
pub const MAX_IN_FLIGHT: usize = 10;
/// Most resends of a probe that timed out (nmap's `MAX_RESENDS`).
pub const MAX_RESENDS: u8 = 2;
/// Where a host with no distance known starts counting down (nmap's
/// `initial_ttl`).
pub const INITIAL_TTL: u8 = 10;

/// A host to trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceTarget {
    pub ip: IpAddr,
    /// The port the probes go to (nmap's choice: the scan's best port).
    pub port: u16,
    pub proto: Proto,
    /// The port is open. Either way a TCP port gets SYN probes (nmap's
    /// probe for an open or a closed port of a SYN scan) and the target's
    /// SYN-ACK or RST ends the trace; kept for the caller's account.
    pub open: bool,
    /// The TTL (IPv6: hop limit) the host's answers came with.
    pub ttl_seen: Option<u8>,
}

/// A host's traceroute.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceResult {
    pub ip: IpAddr,
    /// The port probed; 0 for a directly connected target, whose trace
    /// nmap writes without a port.
    pub port: u16,
    pub proto: Proto,
    /// By TTL, from 1; silent hops without an address. Empty for a
    /// loopback or unreachable target.
    pub hops: Vec<TraceHop>,
    /// The earlier host whose trace this one follows, and up to which hop.
    pub same_as: Option<(IpAddr, u8)>,
}

/// The keys that mark this run's probes: the source port is the token
/// xor `id`, a TCP sequence number is derived from the token and `seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    pub id: u16,
    pub seq: u32,
}

impl Key {
    /// A random key.
    pub fn random() -> Key {
        let mut b = [0u8; 6];
        // Without randomness the probes are still ours: the key only keeps
        // other traceroutes' replies (and guesses) apart.
        let _ = getrandom::fill(&mut b);
        Key { id: u16::from_be_bytes([b[0], b[1]]), seq: u32::from_be_bytes([b[2], b[3], b[4], b[5]]) }
    }

    pub fn sport(self, token: u16) -> u16 {
        token ^ self.id
    }

    pub fn token(self, sport: u16) -> u16 {
        sport ^ self.id
    }

    /// The sequence number of the TCP probe with this token.
    pub fn seq_of(self, token: u16) -> u32 {
        self.seq ^ u32::from(token).wrapping_mul(0x9e37_79b1)
    }
}

/// Writes the probe with `token` at `ttl` to `t.ip` along `hop` into
/// `out` (at least [`MAX_UDP_PROBE`] bytes) and returns its length.
/// `tcp` is the SYN template of the target's address family.
pub fn build(out: &mut [u8], tcp: &Template, hop: &Hop, t: &TraceTarget, ttl: u8, token: u16, key: Key) -> usize {
    let sport = key.sport(token);
    let len = match t.proto {
        Proto::Tcp => tcp.fill(out, hop, t.ip, sport, t.port, key.seq_of(token), token),
        Proto::Udp => frame::fill_udp(out, hop, t.ip, sport, t.port, token, &[]),
    };
    set_ttl(&mut out[..len], ttl);
    len
}

/// Sets a built frame's TTL (IPv4, with the header checksum) or hop limit.
fn set_ttl(frame: &mut [u8], ttl: u8) {
    if frame.len() >= ETH + IP6 && frame[ETH] >> 4 == 6 {
        frame[ETH + 7] = ttl;
    } else if frame.len() >= ETH + IP4 {
        frame[ETH + 8] = ttl;
        frame[ETH + 10] = 0;
        frame[ETH + 11] = 0;
        if let Some(ip) = Ipv4Packet::new(&frame[ETH..]) {
            let c = ipv4::checksum(&ip);
            frame[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
        }
    }
}

/// What came back for one of our probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The probe's target (the quoted destination, or the answer's source).
    pub target: IpAddr,
    pub token: u16,
    /// The port the probe went to, and its protocol.
    pub port: u16,
    pub proto: Proto,
    /// Who answered: a router on the way, or the target.
    pub from: IpAddr,
    /// The answer's own TTL (IPv6: hop limit).
    pub ttl: u8,
}

/// Reads a received frame: an ICMP time exceeded or destination
/// unreachable (v4 or v6) quoting one of our probes, or a target's own
/// TCP (SYN-ACK, RST) or UDP answer to one. `None` for anything else.
pub fn parse(frame: &[u8], sum: Checksum, key: Key) -> Option<Answer> {
    let eth = EthernetPacket::new(frame)?;
    match eth.get_ethertype() {
        EtherTypes::Ipv4 => parse_v4(&frame[ETH..], sum, key),
        EtherTypes::Ipv6 => parse_v6(&frame[ETH..], sum, key),
        _ => None,
    }
}

fn parse_v4(bytes: &[u8], sum: Checksum, key: Key) -> Option<Answer> {
    let ip = Ipv4Packet::new(bytes)?;
    let hl = usize::from(ip.get_header_length()) * 4;
    let total = usize::from(ip.get_total_length());
    if ip.get_version() != 4 || hl < IP4 || total < hl || total > bytes.len() {
        return None;
    }
    if ip.get_fragment_offset() != 0 || ip.get_flags() & 1 != 0 || ipv4::checksum(&ip) != ip.get_checksum() {
        return None;
    }
    let (src, dst) = (ip.get_source(), ip.get_destination());
    let (from, ttl) = (IpAddr::V4(src), ip.get_ttl());
    let body = &bytes[hl..total];
    match ip.get_next_level_protocol() {
        IpNextHeaderProtocols::Icmp => {
            let icmp = IcmpPacket::new(body)?;
            let (ty, code) = (icmp.get_icmp_type().0, icmp.get_icmp_code().0);
            if !((ty == 11 && code == 0) || ty == 3) || body.len() < 8 + IP4 + 8 {
                return None;
            }
            if pnet_packet::icmp::checksum(&icmp) != icmp.get_checksum() {
                return None;
            }
            let q = Ipv4Packet::new(&body[8..])?;
            let qhl = usize::from(q.get_header_length()) * 4;
            if q.get_version() != 4 || qhl < IP4 || body.len() < 8 + qhl + 8 {
                return None;
            }
            let proto = quoted_proto(q.get_next_level_protocol())?;
            let head = &body[8 + qhl..8 + qhl + 8];
            quoted(IpAddr::V4(q.get_destination()), proto, head, q.get_identification(), from, ttl, key)
        }
        IpNextHeaderProtocols::Tcp => {
            let seg = TcpPacket::new(body)?;
            if sum == Checksum::Unchecked && tcp::ipv4_checksum(&seg, &src, &dst) != seg.get_checksum() {
                return None;
            }
            tcp_answer(&seg, from, ttl, key)
        }
        IpNextHeaderProtocols::Udp => {
            let d = UdpPacket::new(body)?;
            let bad = d.get_checksum() != 0 && nonzero(udp::ipv4_checksum(&d, &src, &dst)) != d.get_checksum();
            if usize::from(d.get_length()) != body.len() || (sum == Checksum::Unchecked && bad) {
                return None;
            }
            udp_answer(&d, from, ttl, key)
        }
        _ => None,
    }
}

fn parse_v6(bytes: &[u8], sum: Checksum, key: Key) -> Option<Answer> {
    let ip = Ipv6Packet::new(bytes)?;
    let payload = usize::from(ip.get_payload_length());
    if ip.get_version() != 6 || IP6 + payload > bytes.len() {
        return None;
    }
    let (src, dst) = (ip.get_source(), ip.get_destination());
    let (from, ttl) = (IpAddr::V6(src), ip.get_hop_limit());
    let body = &bytes[IP6..IP6 + payload];
    match ip.get_next_header() {
        IpNextHeaderProtocols::Icmpv6 => {
            let icmp = Icmpv6Packet::new(body)?;
            let (ty, code) = (icmp.get_icmpv6_type().0, icmp.get_icmpv6_code().0);
            if !((ty == 3 && code == 0) || ty == 1) || body.len() < 8 + IP6 + 8 {
                return None;
            }
            if pnet_packet::icmpv6::checksum(&icmp, &src, &dst) != icmp.get_checksum() {
                return None;
            }
            let q = Ipv6Packet::new(&body[8..])?;
            if q.get_version() != 6 {
                return None;
            }
            let proto = quoted_proto(q.get_next_header())?;
            let head = &body[8 + IP6..8 + IP6 + 8];
            quoted(IpAddr::V6(q.get_destination()), proto, head, q.get_flow_label() as u16, from, ttl, key)
        }
        IpNextHeaderProtocols::Tcp => {
            let seg = TcpPacket::new(body)?;
            if sum == Checksum::Unchecked && tcp::ipv6_checksum(&seg, &src, &dst) != seg.get_checksum() {
                return None;
            }
            tcp_answer(&seg, from, ttl, key)
        }
        IpNextHeaderProtocols::Udp => {
            let d = UdpPacket::new(body)?;
            let bad = nonzero(udp::ipv6_checksum(&d, &src, &dst)) != d.get_checksum();
            if usize::from(d.get_length()) != body.len() || (sum == Checksum::Unchecked && bad) {
                return None;
            }
            udp_answer(&d, from, ttl, key)
        }
        _ => None,
    }
}

fn quoted_proto(p: pnet_packet::ip::IpNextHeaderProtocol) -> Option<Proto> {
    match p {
        IpNextHeaderProtocols::Tcp => Some(Proto::Tcp),
        IpNextHeaderProtocols::Udp => Some(Proto::Udp),
        _ => None,
    }
}

/// The first 8 bytes of a quoted probe's TCP or UDP header (`head`) and
/// its IP id (IPv6: the flow label's low bits): ours if a TCP one carries
/// the sequence number its token's is, a UDP one the token as IP id.
fn quoted(target: IpAddr, proto: Proto, head: &[u8], ip_id: u16, from: IpAddr, ttl: u8, key: Key) -> Option<Answer> {
    let be16 = |i: usize| u16::from_be_bytes([head[i], head[i + 1]]);
    let token = key.token(be16(0));
    let ours = match proto {
        Proto::Tcp => u32::from_be_bytes([head[4], head[5], head[6], head[7]]) == key.seq_of(token),
        Proto::Udp => ip_id == token,
    };
    if !ours {
        return None;
    }
    Some(Answer { target, token, port: be16(2), proto, from, ttl })
}

/// A SYN-ACK or RST acknowledging one of our SYN probes.
fn tcp_answer(seg: &TcpPacket<'_>, from: IpAddr, ttl: u8, key: Key) -> Option<Answer> {
    let off = usize::from(seg.get_data_offset()) * 4;
    let flags = seg.get_flags();
    let synack = flags & (TcpFlags::SYN | TcpFlags::ACK) == TcpFlags::SYN | TcpFlags::ACK;
    if off < 20 || !(synack || flags & TcpFlags::RST != 0) || flags & TcpFlags::ACK == 0 {
        return None;
    }
    let token = key.token(seg.get_destination());
    if seg.get_acknowledgement() != key.seq_of(token).wrapping_add(1) {
        return None;
    }
    Some(Answer { target: from, token, port: seg.get_source(), proto: Proto::Tcp, from, ttl })
}

/// A UDP datagram back to one of our probes' source ports.
fn udp_answer(d: &UdpPacket<'_>, from: IpAddr, ttl: u8, key: Key) -> Option<Answer> {
    let token = key.token(d.get_destination());
    Some(Answer { target: from, token, port: d.get_source(), proto: Proto::Udp, from, ttl })
}

/// The TTL a host most likely sent with, from one seen (nmap's
/// `get_initial_ttl_guess`).
fn initial_ttl_guess(ttl: u8) -> u16 {
    match ttl {
        0..=32 => 32,
        33..=64 => 64,
        65..=128 => 128,
        _ => 255,
    }
}

/// The distance a TTL seen suggests (hops, at least 1).
pub fn distance_of(ttl: u8) -> u8 {
    (initial_ttl_guess(ttl) - u16::from(ttl) + 1).clamp(1, u16::from(MAX_TTL)) as u8
}

/// A probe to send now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    /// Index of the host in the targets.
    pub host: usize,
    pub ttl: u8,
    pub token: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Out for its first try or a resend.
    Active,
    /// Timed out, a resend waiting for room.
    Pending,
    /// Timed out for good; a late answer still counts (as in nmap).
    Expired,
}

#[derive(Clone, Copy, Debug)]
struct Probe {
    token: u16,
    ttl: u8,
    sent: Instant,
    resends: u8,
    phase: Phase,
}

/// One hop a host's own probes found: `None` for a hop that timed out.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Found {
    ip: Option<IpAddr>,
    rtt_ms: Option<f64>,
}

#[derive(Debug)]
struct HostState {
    target: TraceTarget,
    /// Directly connected: a one-hop trace kept out of the shared cache,
    /// as nmap keeps such targets out of its traceroute.
    direct: bool,
    /// Nothing to do (loopback or no route).
    skip: bool,
    current: u8,
    counting_up: bool,
    /// The lowest TTL the target answered at (0: not yet).
    reached: u8,
    sent_ttls: [bool; MAX_TTL as usize + 2],
    probes: Vec<Probe>,
    hops: BTreeMap<u8, Found>,
    /// Follows another host's trace up to this TTL.
    link: Option<(usize, u8)>,
}

impl HostState {
    fn has_more(&self) -> bool {
        !(self.skip
            || (self.direct && self.current > 1)
            || (self.counting_up && ((self.reached > 0 && self.current >= self.reached) || self.current > MAX_TTL)))
    }

    fn is_finished(&self) -> bool {
        !self.has_more() && self.probes.iter().all(|p| p.phase == Phase::Expired)
    }

    /// nmap's `next_ttl`: down to 1 over the TTLs not sent yet, then up.
    fn next_ttl(&mut self) {
        if !self.counting_up {
            while self.current > 1 && self.sent_ttls[usize::from(self.current)] {
                self.current -= 1;
            }
            if self.current <= 1 {
                self.current = 1;
                self.counting_up = true;
            }
        }
        if self.counting_up {
            while self.current <= MAX_TTL && self.sent_ttls[usize::from(self.current)] {
                self.current += 1;
            }
        }
    }

    /// Removes the probes matching `which`; returns how many were out.
    fn cancel(&mut self, which: impl Fn(&Probe) -> bool) -> usize {
        let before = self.probes.iter().filter(|p| p.phase == Phase::Active).count();
        self.probes.retain(|p| !which(p));
        before - self.probes.iter().filter(|p| p.phase == Phase::Active).count()
    }

    /// Records a hop its own probe found (a timeout never hides an answer).
    fn insert(&mut self, ttl: u8, found: Found) {
        match self.hops.get_mut(&ttl) {
            Some(h) if h.ip.is_none() => *h = found,
            Some(_) => {}
            None => {
                self.hops.insert(ttl, found);
            }
        }
    }
}

/// nmap's traceroute with no I/O: which probes to send when, and what
/// their answers make of each host's trace.
#[derive(Debug)]
pub struct Tracer {
    hosts: Vec<HostState>,
    by_ip: HashMap<IpAddr, Vec<usize>>,
    /// Hops found, by (TTL, address): the host whose probe found each.
    cache: HashMap<(u8, IpAddr), usize>,
    in_flight: usize,
    next_host: usize,
    next_token: u16,
    timeout: Duration,
    stopped: bool,
}

impl Tracer {
    /// A trace of `targets`; `direct(i)` says the i-th is on-link, `skip(i)`
    /// that it gets no trace (loopback, no route).
    pub fn new(
        targets: &[TraceTarget],
        direct: impl Fn(usize) -> bool,
        skip: impl Fn(usize) -> bool,
        timeout: Duration,
    ) -> Tracer {
        let mut by_ip: HashMap<IpAddr, Vec<usize>> = HashMap::new();
        let hosts = targets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                by_ip.entry(t.ip).or_default().push(i);
                let direct = direct(i);
                let start = if direct { 1 } else { t.ttl_seen.map_or(INITIAL_TTL, distance_of) };
                HostState {
                    target: *t,
                    direct,
                    skip: skip(i),
                    current: start.clamp(1, MAX_TTL),
                    counting_up: false,
                    reached: 0,
                    sent_ttls: [false; MAX_TTL as usize + 2],
                    probes: Vec::new(),
                    hops: BTreeMap::new(),
                    link: None,
                }
            })
            .collect();
        Tracer {
            hosts,
            by_ip,
            cache: HashMap::new(),
            in_flight: 0,
            next_host: 0,
            next_token: 0,
            timeout,
            stopped: false,
        }
    }

    /// Probes unanswered now.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Every host is done (or the trace was stopped).
    pub fn is_done(&self) -> bool {
        self.stopped || self.hosts.iter().all(HostState::is_finished)
    }

    /// Sends nothing more; what was found stays.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// When the next probe out times out.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let probes = self.hosts.iter().flat_map(|h| h.probes.iter());
        probes.filter(|p| p.phase == Phase::Active).map(|p| p.sent + self.timeout).min()
    }

    /// Times out what is due, then gives the probes to send at `now`
    /// (resends first, each host in turn, within [`MAX_IN_FLIGHT`]).
    pub fn poll(&mut self, now: Instant, out: &mut Vec<Due>) {
        if self.stopped {
            return;
        }
        for h in &mut self.hosts {
            for i in 0..h.probes.len() {
                let p = h.probes[i];
                if p.phase == Phase::Active && now.saturating_duration_since(p.sent) >= self.timeout {
                    h.insert(p.ttl, Found { ip: None, rtt_ms: None });
                    self.in_flight = self.in_flight.saturating_sub(1);
                    h.probes[i].phase = if p.resends < MAX_RESENDS { Phase::Pending } else { Phase::Expired };
                }
            }
        }
        let n = self.hosts.len();
        let mut idle = 0;
        while self.in_flight < MAX_IN_FLIGHT && idle < n {
            let i = self.next_host;
            self.next_host = (self.next_host + 1) % n;
            match self.send_next(i, now) {
                Some(s) => {
                    out.push(s);
                    self.in_flight += 1;
                    idle = 0;
                }
                None => idle += 1,
            }
        }
    }

    fn send_next(&mut self, i: usize, now: Instant) -> Option<Due> {
        let h = &mut self.hosts[i];
        if let Some(p) = h.probes.iter_mut().find(|p| p.phase == Phase::Pending) {
            p.resends += 1;
            p.sent = now;
            p.phase = Phase::Active;
            return Some(Due { host: i, ttl: p.ttl, token: p.token });
        }
        h.next_ttl();
        if !h.has_more() {
            return None;
        }
        let (ttl, token) = (h.current, self.next_token);
        self.next_token = self.next_token.wrapping_add(1);
        h.probes.push(Probe { token, ttl, sent: now, resends: 0, phase: Phase::Active });
        h.sent_ttls[usize::from(ttl)] = true;
        Some(Due { host: i, ttl, token })
    }

    /// Takes an answer received at `now`; false if it answers no probe
    /// still unanswered.
    pub fn answer(&mut self, a: &Answer, now: Instant) -> bool {
        let Some(hosts) = self.by_ip.get(&a.target) else { return false };
        let found = hosts.iter().find_map(|&i| {
            let h = &self.hosts[i];
            let ours = h.target.port == a.port && h.target.proto == a.proto;
            let at = h.probes.iter().position(|p| p.token == a.token).filter(|_| ours)?;
            Some((i, at))
        });
        let Some((i, at)) = found else { return false };
        let probe = self.hosts[i].probes[at];
        let h = &mut self.hosts[i];
        if a.from == h.target.ip {
            if h.reached == 0 || probe.ttl < h.reached {
                h.reached = probe.ttl;
            }
            if !h.counting_up {
                // Past the target: skip ahead to its likely distance.
                let d = distance_of(a.ttl);
                if d < h.current {
                    h.current = d;
                }
            }
            self.in_flight = self.in_flight.saturating_sub(h.cancel(|p| p.ttl > probe.ttl));
        }
        let rtt = now.saturating_duration_since(probe.sent).as_secs_f64() * 1e3;
        self.set_hop(i, probe.ttl, a.from, rtt);
        self.in_flight = self.in_flight.saturating_sub(self.hosts[i].cancel(|p| p.token == probe.token));
        true
    }

    /// nmap's `set_host_hop`: a new hop goes in the cache; one found
    /// before (by another host) links this host's trace to that host's.
    fn set_hop(&mut self, i: usize, ttl: u8, from: IpAddr, rtt: f64) {
        let found = Found { ip: Some(from), rtt_ms: Some(rtt) };
        if self.hosts[i].direct {
            self.hosts[i].insert(ttl, found);
            return;
        }
        let owner = match self.cache.get(&(ttl, from)) {
            Some(&o) if o != i && !self.leads_to(o, i) => o,
            Some(_) => {
                self.hosts[i].insert(ttl, found);
                return;
            }
            None => {
                self.cache.insert((ttl, from), i);
                self.hosts[i].insert(ttl, found);
                return;
            }
        };
        let h = &mut self.hosts[i];
        if h.link.is_none_or(|(_, t)| t < ttl) {
            h.link = Some((owner, ttl));
        }
        if !h.counting_up {
            // The other host covers every TTL below: count up from here.
            for s in &mut h.sent_ttls[1..usize::from(ttl)] {
                *s = true;
            }
            h.counting_up = true;
            self.in_flight = self.in_flight.saturating_sub(h.cancel(|p| p.ttl < ttl));
        }
    }

    /// Whether `from`'s trace follows `to`'s, directly or through others.
    fn leads_to(&self, from: usize, to: usize) -> bool {
        let mut at = from;
        for _ in 0..self.hosts.len() {
            match self.hosts[at].link {
                Some((o, _)) if o == to => return true,
                Some((o, _)) => at = o,
                None => return false,
            }
        }
        true
    }

    /// Every host's trace, in the targets' order.
    pub fn results(&self) -> Vec<TraceResult> {
        (0..self.hosts.len())
            .map(|i| {
                let h = &self.hosts[i];
                // A host listed twice follows its own earlier trace, which
                // nmap does not call another host's.
                let same_as =
                    h.link.map(|(o, ttl)| (self.hosts[o].target.ip, ttl)).filter(|&(ip, _)| ip != h.target.ip);
                let mut hops = self.hops_of(i, self.hosts.len());
                if h.direct && h.reached == 0 && !h.skip {
                    // The hop is the target whatever it answered.
                    hops = vec![TraceHop { ttl: 1, ip: Some(h.target.ip), rtt_ms: None, host: None }];
                }
                TraceResult {
                    ip: h.target.ip,
                    port: if h.direct { 0 } else { h.target.port },
                    proto: h.target.proto,
                    hops,
                    same_as,
                }
            })
            .collect()
    }

    /// Host `i`'s hops: the linked host's up to the link, its own above,
    /// none past the target.
    fn hops_of(&self, i: usize, depth: usize) -> Vec<TraceHop> {
        let h = &self.hosts[i];
        let mut by_ttl: BTreeMap<u8, TraceHop> = BTreeMap::new();
        if let Some((o, upto)) = h.link.filter(|_| depth > 0) {
            for hop in self.hops_of(o, depth - 1).into_iter().filter(|hop| hop.ttl <= upto) {
                by_ttl.insert(hop.ttl, hop);
            }
        }
        for (&ttl, f) in &h.hops {
            by_ttl.entry(ttl).or_insert(TraceHop { ttl, ip: f.ip, rtt_ms: f.rtt_ms, host: None });
        }
        by_ttl.into_values().filter(|hop| h.reached == 0 || hop.ttl <= h.reached).collect()
    }
}

/// Traces `targets` (blocking: run it on a thread of its own). Probes go
/// out on `links`' interface; `timeout` is how long each try of a hop is
/// waited for; `stop` is asked between rounds and ends the trace with
/// what was found. Needs CAP_NET_RAW.
pub fn run(
    targets: &[TraceTarget],
    links: &Links,
    timeout: Duration,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<Vec<TraceResult>> {
    let paths: Vec<Option<Hop>> = targets.iter().map(|t| links.hop(t.ip).ok()).collect();
    let mut tracer = Tracer::new(
        targets,
        |i| links.on_link(targets[i].ip).is_some(),
        |i| links.loopback || paths[i].is_none(),
        timeout,
    );
    if tracer.is_done() {
        return Ok(tracer.results());
    }
    let sock = PacketSocket::open(links.ifindex)?;
    sock.tune(1 << 20)?;
    let key = Key::random();
    let templates = [Template::new(false), Template::new(true)];
    let mut frames = vec![vec![0u8; MAX_UDP_PROBE]; MAX_IN_FLIGHT];
    let mut lens = [0usize; MAX_IN_FLIGHT];
    let mut bufs = vec![[0u8; FRAME]; BATCH];
    let mut got_lens = [0usize; BATCH];
    let mut sums = [Checksum::Unchecked; BATCH];
    let mut due = Vec::with_capacity(MAX_IN_FLIGHT);
    while !tracer.is_done() {
        if stop() {
            tracer.stop();
            break;
        }
        let now = Instant::now();
        due.clear();
        tracer.poll(now, &mut due);
        let mut n = 0;
        for s in due.iter().take(MAX_IN_FLIGHT) {
            let t = &targets[s.host];
            let Some(hop) = paths[s.host] else { continue };
            let tcp = &templates[usize::from(t.ip.is_ipv6())];
            lens[n] = build(&mut frames[n], tcp, &hop, t, s.ttl, s.token, key);
            n += 1;
        }
        super::syn::send_all(&sock, &frames[..n], &lens[..n])?;
        let wait = tracer.next_wakeup().map_or(Duration::from_millis(10), |t| t.saturating_duration_since(now));
        let got = sock.recv_batch(&mut bufs, &mut got_lens, &mut sums, wait.min(Duration::from_millis(10)))?;
        let now = Instant::now();
        for k in 0..got {
            if let Some(a) = parse(&bufs[k][..got_lens[k]], sums[k], key) {
                tracer.answer(&a, now);
            }
        }
    }
    Ok(tracer.results())
}

#[cfg(test)]
#[path = "trace_tests.rs"]
mod tests;
