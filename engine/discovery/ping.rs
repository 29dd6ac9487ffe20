//! Host discovery: which targets are up before their ports are scanned.
//!
//! In: the targets and a [`HostPlan`] (nmap's `-P*` probes). Out: `host`
//! events (`up` at once, `down` when asked for) and, for each host that
//! answers, its ports handed to the port scan the moment it answers. What
//! always holds: a host that never answers costs no port probe, and an
//! on-link host is asked by ARP/NDP only (as nmap does on Ethernet).
//!
//! The raw scans run discovery in their own threads (`syn::run`, with
//! [`PingCookie`] validating the answers); the socket scans ask with
//! connections ([`socket_ping`] to the `-PS`/`-PA` ports, else 80 and
//! 443), as unprivileged nmap does.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::syn::cookie::{Cookie, SPORT_BASE};
use super::syn::frame::Ping;
use super::syn::reply::Reply;
use crate::error::{Error, ErrorKind, Result};
use crate::findings::{HostEvent, HostState, Proto, Reason};
use crate::pipeline::Ctx;
use crate::targets::TargetSpace;

/// One discovery probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PingProbe {
    /// `-PE`, `-PP`, `-PM`.
    Icmp(Ping),
    /// `-PS<port>`: a SYN; a SYN-ACK or a RST means up.
    Syn(u16),
    /// `-PA<port>`: a bare ACK; a RST means up.
    Ack(u16),
    /// `-PU<port>`: an empty datagram; an answer or a port unreachable means up.
    Udp(u16),
}

impl PingProbe {
    /// Whether the probe exists for this address family (ICMPv6 has no
    /// timestamp or mask request).
    pub fn applies(self, ip: IpAddr) -> bool {
        !(ip.is_ipv6() && matches!(self, PingProbe::Icmp(Ping::Timestamp | Ping::Mask)))
    }
}

/// nmap's default TCP port for `-PS` and `-PA` given without ports.
pub const DEFAULT_TCP_PING: u16 = 80;
/// nmap's default port for `-PU` given without ports.
pub const DEFAULT_UDP_PING: u16 = 40_125;
/// Most discovery probes per host.
pub const MAX_PROBES: usize = 64;

/// How hosts are found up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPlan {
    /// Sent to every host that is not on-link, in this order.
    pub probes: Vec<PingProbe>,
    /// Only discovery: no port is scanned (`-sn`).
    pub ping_only: bool,
    /// Report hosts found down too (`-v`), not only count them.
    pub report_down: bool,
}

impl HostPlan {
    /// nmap's default as root: ICMP echo, SYN to 443, ACK to 80, ICMP timestamp.
    pub fn nmap_default() -> HostPlan {
        HostPlan {
            probes: vec![
                PingProbe::Icmp(Ping::Echo),
                PingProbe::Syn(443),
                PingProbe::Ack(80),
                PingProbe::Icmp(Ping::Timestamp),
            ],
            ping_only: false,
            report_down: false,
        }
    }

    /// The probes that apply to `ip`, with their indices in `probes`.
    pub fn probes_for(&self, ip: IpAddr) -> impl Iterator<Item = (u16, PingProbe)> + '_ {
        self.probes.iter().enumerate().filter(move |(_, p)| p.applies(ip)).map(|(i, p)| (i as u16, *p))
    }

    /// The space of hosts (each address once) that discovery walks.
    pub fn hosts_of(space: &TargetSpace) -> Result<TargetSpace> {
        TargetSpace::new(space.addrs(), &crate::targets::AddrSet::default(), vec![0])
            .map(|s| s.in_sequence(space.is_sequential()))
    }

    /// Adds the probes of one `-P` option (`-PE`, `-PS22,80`...); `arg` is
    /// what follows `-P`.
    pub fn add_option(probes: &mut Vec<PingProbe>, arg: &str) -> Result<()> {
        let (kind, rest) = arg.split_at(arg.chars().next().map_or(0, char::len_utf8));
        let ports = |default: u16| -> Result<Vec<u16>> {
            if rest.is_empty() {
                return Ok(vec![default]);
            }
            let list = crate::ports::parse_ports(rest)
                .map_err(|e| Error::new(ErrorKind::PortSpec, format!("`ping_probe`{kind}{rest}: {e}")))?;
            // Unprefixed ports are in both lists; either holds them all.
            Ok(if list.tcp.is_empty() { list.udp } else { list.tcp })
        };
        let new: Vec<PingProbe> = match kind {
            "E" | "P" | "M" if !rest.is_empty() => {
                return Err(Error::new(ErrorKind::Config, format!("`ping_probe`{kind} takes no ports")));
            }
            "E" => vec![PingProbe::Icmp(Ping::Echo)],
            "P" => vec![PingProbe::Icmp(Ping::Timestamp)],
            "M" => vec![PingProbe::Icmp(Ping::Mask)],
            "S" => ports(DEFAULT_TCP_PING)?.into_iter().map(PingProbe::Syn).collect(),
            "A" => ports(DEFAULT_TCP_PING)?.into_iter().map(PingProbe::Ack).collect(),
            "U" => ports(DEFAULT_UDP_PING)?.into_iter().map(PingProbe::Udp).collect(),
            _ => {
                return Err(Error::new(
                    ErrorKind::Config,
                    format!(
                        "unknown host discovery option `ping_probe`{arg} (known: `skip_discovery` `ping_probe`E `ping_probe`P \
                         `ping_probe`M `ping_probe`S `ping_probe`A `ping_probe`U `ping_probe`R)"
                    ),
                ));
            }
        };
        for p in new {
            if !probes.contains(&p) {
                probes.push(p);
            }
        }
        if probes.len() > MAX_PROBES {
            return Err(Error::new(ErrorKind::Config, format!("more than {MAX_PROBES} host discovery probes")));
        }
        Ok(())
    }
}

/// The keyed cookies of discovery probes: a keyed hash of the addresses
/// and the probe's index gives its source port (or ICMP identifier) and
/// sequence number, which every answer must carry back. Its key is not the
/// port scan's, so an answer to a SYN to 443 never passes for one to port
/// 443's port probe.
#[derive(Clone, Debug)]
pub struct PingCookie {
    cookie: Cookie,
    probes: Arc<[PingProbe]>,
}

impl PingCookie {
    pub fn new(k0: u64, k1: u64, workers: u16, probes: &[PingProbe]) -> PingCookie {
        // Another key than the port scan's.
        let cookie = Cookie::new(k0 ^ 0x7069_6e67_7069_6e67, k1.rotate_left(17), workers);
        PingCookie { cookie, probes: probes.into() }
    }

    /// The sequence number and source port (ICMP identifier) of worker
    /// `worker`'s probe `idx` from `src` to `dst`.
    pub fn probe(&self, src: IpAddr, dst: IpAddr, idx: u16, worker: usize) -> (u32, u16) {
        self.cookie.probe(src, dst, idx, worker)
    }

    /// Which worker's discovery probe `r` answers, and the answer as that
    /// probe's (its `sport` the probe's index): an ICMP reply carrying the
    /// probe's identifier and sequence, a SYN-ACK or RST acknowledging a
    /// SYN, a RST carrying an ACK's acknowledgement, a UDP answer to the
    /// probe's port, or an ICMP error quoting any of them.
    pub fn accepts(&self, r: &Reply) -> Option<(usize, Reply)> {
        if r.dport < SPORT_BASE {
            return None;
        }
        let worker = self.cookie.worker_of(r.dport);
        let check = |idx: usize, ok: &dyn Fn(u32) -> bool| {
            let (seq, sport) = self.probe(r.dst, r.src, idx as u16, worker);
            (sport == r.dport && ok(seq)).then_some((worker, Reply { sport: idx as u16, ..*r }))
        };
        let find = |pred: &dyn Fn(PingProbe) -> bool, ok: &dyn Fn(u32) -> bool| {
            self.probes.iter().enumerate().filter(|(_, p)| pred(**p)).find_map(|(i, _)| check(i, ok))
        };
        match r.icmp {
            Some(why) if why.is_pong() => {
                find(&|p| matches!(p, PingProbe::Icmp(k) if k.reason() == why), &|seq| r.seq == u32::from(seq as u16))
            }
            Some(_) => match r.proto {
                Proto::Tcp => {
                    find(&|p| matches!(p, PingProbe::Syn(x) | PingProbe::Ack(x) if x == r.sport), &|seq| r.seq == seq)
                }
                Proto::Udp => find(&|p| p == PingProbe::Udp(r.sport), &|seq| r.seq == u32::from(seq as u16)),
            },
            None => match r.proto {
                Proto::Tcp => find(&|p| p == PingProbe::Syn(r.sport), &|seq| {
                    (r.is_syn_ack() || r.is_rst()) && r.ack == seq.wrapping_add(1)
                })
                .or_else(|| find(&|p| p == PingProbe::Ack(r.sport), &|seq| r.is_rst() && r.seq == seq)),
                Proto::Udp => find(&|p| p == PingProbe::Udp(r.sport), &|_| true),
            },
        }
    }
}

/// What an accepted answer to a discovery probe says: `Some(reason)` if
/// the host is up. An ICMP error from a router on the way says only that
/// this probe will get no answer.
pub fn up_reason(r: &Reply) -> Option<Reason> {
    match r.icmp {
        Some(why) if why.is_pong() => Some(why),
        Some(_) if r.relayed => None,
        Some(why) => Some(why),
        None if r.proto == Proto::Udp => Some(Reason::UdpResponse),
        None if r.is_syn_ack() => Some(Reason::SynAck),
        None => Some(Reason::Reset),
    }
}

/// A MAC address as nmap writes it (`02:00:5E:10:00:01`).
pub fn mac_text(mac: [u8; 6]) -> String {
    crate::text::hex_upper_sep(&mac, ":")
}

/// The `host` event for `ip`.
pub fn host_event(ctx: &Ctx, ip: IpAddr, state: HostState, reason: Reason, ttl: Option<u8>) -> HostEvent {
    HostEvent { scan_id: ctx.scan_id.clone(), ip, state, reason, ttl, latency: None, mac: None, t: ctx.t() }
}

/// The ports discovery connects to without raw sockets: the `-PS`/`-PA`
/// ports asked, else 80 and 443 (unprivileged nmap's).
pub fn connect_ports(plan: &HostPlan) -> Vec<u16> {
    let asked: Vec<u16> = plan
        .probes
        .iter()
        .filter_map(|p| match p {
            PingProbe::Syn(port) | PingProbe::Ack(port) => Some(*port),
            _ => None,
        })
        .collect();
    if asked.is_empty() {
        vec![80, 443]
    } else {
        asked
    }
}

/// Asks one host whether it is up without raw sockets: loopback addresses
/// are up at once (timed by one connection to the first of `ports`, zero
/// when it draws no answer within 100 ms); others are up if a connection
/// to one of `ports` is accepted or refused within `timeout` (each tried
/// `1 + retries` times). Returns the reason and the latency.
pub async fn socket_ping(ip: IpAddr, ports: &[u16], timeout: Duration, retries: u32) -> Option<(Reason, Duration)> {
    if ip.is_loopback() {
        let t0 = Instant::now();
        let port = ports.first().copied().unwrap_or(80);
        let timed = match knock(SocketAddr::new(ip, port), Duration::from_millis(100)).await {
            Some(_) => t0.elapsed(),
            None => Duration::ZERO,
        };
        return Some((Reason::LocalhostResponse, timed));
    }
    let t0 = Instant::now();
    for _ in 0..=retries {
        let tries = ports.iter().map(|&port| knock(SocketAddr::new(ip, port), timeout));
        if let Some(why) = futures_util::future::join_all(tries).await.into_iter().flatten().next() {
            return Some((why, t0.elapsed()));
        }
    }
    None
}

/// One connection attempt: `syn-ack` when accepted (then closed with a
/// RST: no TIME_WAIT left behind), `conn-refused` when refused, none on
/// silence or another error within `timeout`.
async fn knock(addr: SocketAddr, timeout: Duration) -> Option<Reason> {
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(s)) => {
            let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
            Some(Reason::SynAck)
        }
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Some(Reason::ConnRefused),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::syn::frame::{self, Hop, Template};
    use crate::raw::packet::Checksum;

    #[test]
    fn options_parse_as_nmap_and_bad_ones_are_refused() {
        let mut p = Vec::new();
        for a in ["E", "S", "A22,443", "U", "P", "M", "S"] {
            HostPlan::add_option(&mut p, a).unwrap();
        }
        let want = vec![
            PingProbe::Icmp(Ping::Echo),
            PingProbe::Syn(80),
            PingProbe::Ack(22),
            PingProbe::Ack(443),
            PingProbe::Udp(DEFAULT_UDP_PING),
            PingProbe::Icmp(Ping::Timestamp),
            PingProbe::Icmp(Ping::Mask),
        ];
        assert_eq!(p, want);
        for bad in ["X", "S70000", "E80", "Sfoo", "S1-100"] {
            let mut q = Vec::new();
            let r = HostPlan::add_option(&mut q, bad);
            assert!(r.is_err() || q.len() == 100, "-P{bad}: {r:?}");
        }
        assert!(HostPlan::add_option(&mut Vec::new(), "S1-100").is_err(), "more than 64 probes");
    }

    fn hop(v6: bool) -> Hop {
        let src = if v6 { "2001:2::1" } else { "198.18.0.1" };
        Hop { src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [2, 0, 0, 0, 0, 2], src: src.parse().unwrap() }
    }

    /// Turns an ICMP request frame into the reply the target would send.
    fn pong_of(req: &[u8], v6: bool) -> Vec<u8> {
        let mut f = req.to_vec();
        let ip_len = if v6 { 40 } else { 20 };
        // Swap the addresses.
        let (s, d, n) = if v6 { (14 + 8, 14 + 24, 16) } else { (14 + 12, 14 + 16, 4) };
        let src = f[s..s + n].to_vec();
        let dst = f[d..d + n].to_vec();
        f[s..s + n].copy_from_slice(&dst);
        f[d..d + n].copy_from_slice(&src);
        let at = 14 + ip_len;
        f[at] = match f[at] {
            8 => 0,
            13 => 14,
            17 => 18,
            128 => 129,
            t => t,
        };
        f[at + 2] = 0;
        f[at + 3] = 0;
        if v6 {
            let (sa, da): (std::net::Ipv6Addr, std::net::Ipv6Addr) = (
                <[u8; 16]>::try_from(&f[s..s + 16]).unwrap().into(),
                <[u8; 16]>::try_from(&f[d..d + 16]).unwrap().into(),
            );
            let c = pnet_packet::icmpv6::checksum(&pnet_packet::icmpv6::Icmpv6Packet::new(&f[at..]).unwrap(), &sa, &da);
            f[at + 2..at + 4].copy_from_slice(&c.to_be_bytes());
        } else {
            let c = pnet_packet::icmp::checksum(&pnet_packet::icmp::IcmpPacket::new(&f[at..]).unwrap());
            f[at + 2..at + 4].copy_from_slice(&c.to_be_bytes());
            let mut ip = pnet_packet::ipv4::MutableIpv4Packet::new(&mut f[14..]).unwrap();
            ip.set_checksum(0);
            let c = pnet_packet::ipv4::checksum(&ip.to_immutable());
            ip.set_checksum(c);
        }
        f
    }

    #[test]
    fn icmp_replies_are_taken_only_with_the_probes_id_and_sequence() {
        let plan = HostPlan::nmap_default();
        let c = PingCookie::new(1, 2, 2, &plan.probes);
        for v6 in [false, true] {
            let h = hop(v6);
            let dst: IpAddr = if v6 { "2001:2::2".parse().unwrap() } else { "198.18.0.2".parse().unwrap() };
            for (idx, p) in plan.probes_for(dst) {
                let PingProbe::Icmp(kind) = p else { continue };
                let (seq, id) = c.probe(h.src, dst, idx, 1);
                let mut req = vec![0u8; frame::MAX_PING];
                let n = frame::fill_icmp(&mut req, &h, dst, kind, id, seq as u16).unwrap();
                let reply = pong_of(&req[..n], v6);
                let r = crate::discovery::syn::reply::parse(&reply, Checksum::Unchecked)
                    .expect("a well-formed reply parses");
                assert_eq!(r.icmp, Some(kind.reason()));
                let (w, a) = c.accepts(&r).expect("our reply");
                assert_eq!((w, a.sport, a.src), (1, idx, dst));
                assert_eq!(up_reason(&a), Some(kind.reason()));
                // Another sequence number, or a flipped byte: not ours / not parsed.
                let other = Reply { seq: r.seq ^ 1, ..r };
                assert!(c.accepts(&other).is_none());
                let mut bad = reply.clone();
                let last = bad.len() - 1;
                bad[last] ^= 0x40;
                assert!(crate::discovery::syn::reply::parse(&bad, Checksum::Unchecked).is_none(), "bad checksum");
                // The port scan's cookie never takes a ping's reply.
                assert!(Cookie::new(1, 2, 2).accepts(&r).is_none());
            }
            // No timestamp over IPv6.
            let mut buf = vec![0u8; frame::MAX_PING];
            assert_eq!(frame::fill_icmp(&mut buf, &h, dst, Ping::Timestamp, 1, 1).is_none(), v6);
        }
    }

    #[test]
    fn tcp_answers_to_syn_and_ack_pings_are_told_apart() {
        let plan = HostPlan::nmap_default();
        let c = PingCookie::new(5, 6, 1, &plan.probes);
        let (src, dst): (IpAddr, IpAddr) = ("198.18.0.1".parse().unwrap(), "198.19.3.4".parse().unwrap());
        let (seq443, sp443) = c.probe(src, dst, 1, 0);
        let (seq80, sp80) = c.probe(src, dst, 2, 0);
        let base = Reply {
            proto: Proto::Tcp,
            src: dst,
            dst: src,
            sport: 443,
            dport: sp443,
            seq: 77,
            ack: seq443.wrapping_add(1),
            mask: 0,
            data: (0, 0),
            flags: pnet_packet::tcp::TcpFlags::SYN | pnet_packet::tcp::TcpFlags::ACK,
            ttl: 64,
            window: 0,
            icmp: None,
            relayed: false,
            attempt: 0,
        };
        let (_, a) = c.accepts(&base).unwrap();
        assert_eq!((a.sport, up_reason(&a)), (1, Some(Reason::SynAck)));
        assert!(c.accepts(&Reply { ack: seq443, ..base }).is_none(), "wrong ack");
        let rst = Reply { sport: 80, dport: sp80, seq: seq80, ack: 0, flags: pnet_packet::tcp::TcpFlags::RST, ..base };
        let (_, a) = c.accepts(&rst).unwrap();
        assert_eq!((a.sport, up_reason(&a)), (2, Some(Reason::Reset)));
        assert!(c.accepts(&Reply { seq: seq80 ^ 4, ..rst }).is_none());
        // A router's host unreachable quoting the SYN: accepted, but not up.
        let unreach = Reply { icmp: Some(Reason::HostUnreach), relayed: true, seq: seq443, ..base };
        let (_, a) = c.accepts(&unreach).unwrap();
        assert_eq!(up_reason(&a), None);
        // The same SYN template as the scan's makes the frame.
        let mut f = vec![0u8; frame::MAX_PROBE];
        let n = Template::new(false).fill(&mut f, &hop(false), dst, sp443, 443, seq443, 1);
        assert!(n > 0);
    }
}
