//! Raw probe frames and reply parsing, with pnet's packet types.
//!
//! A [`Template`] holds the constant part of a TCP probe (Ethernet, IP and
//! TCP headers, with an MSS option on SYN probes), built once per address
//! family and scan type's flags; [`Template::fill`] patches only what
//! differs per target (MACs, addresses, ports, sequence, IP id) and
//! recomputes the checksums. [`fill_udp`] builds a UDP probe around its
//! port's payload, [`fill_icmp`] a host discovery ping. [`parse`] reads a
//! received frame and keeps only well-formed TCP segments, UDP datagrams,
//! ICMP echo, timestamp and mask replies, and ICMP destination-unreachable
//! errors that quote a TCP or UDP probe: every length is checked against the
//! buffer before it is used, and a frame with a wrong checksum is dropped.

use std::net::{IpAddr, Ipv6Addr};

use pnet_packet::ethernet::{EtherTypes, EthernetPacket, MutableEthernetPacket};
use pnet_packet::icmp::IcmpPacket;
use pnet_packet::icmpv6::Icmpv6Packet;
use pnet_packet::ip::IpNextHeaderProtocols;
use pnet_packet::ipv4::{self, Ipv4Packet, MutableIpv4Packet};
use pnet_packet::ipv6::{Ipv6Packet, MutableIpv6Packet};
use pnet_packet::tcp::{self, MutableTcpPacket, TcpFlags, TcpOption, TcpPacket};
use pnet_packet::udp::{self, MutableUdpPacket, UdpPacket};
use pnet_packet::Packet;

use crate::findings::{Proto, Reason};
use crate::net::packet::Checksum;

const ETH: usize = 14;
const IP4: usize = 20;
const IP6: usize = 40;
/// TCP header with one option, MSS (4 bytes), as SYN probes carry.
const TCP: usize = 24;
/// TCP header without options, as the other probes carry.
const TCP_BARE: usize = 20;
const UDP: usize = 8;
/// Longest TCP probe frame.
pub const MAX_PROBE: usize = ETH + IP6 + TCP;
/// Longest UDP payload a raw probe carries (the frame stays within an
/// Ethernet MTU over IPv6).
pub const MAX_UDP_PAYLOAD: usize = 1400;
/// Longest UDP probe frame.
pub const MAX_UDP_PROBE: usize = ETH + IP6 + UDP + MAX_UDP_PAYLOAD;

/// Link-layer and source addressing for probes along one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: IpAddr,
}

/// The constant part of a probe for one address family and set of flags.
#[derive(Clone, Debug)]
pub struct Template {
    frame: [u8; MAX_PROBE],
    len: usize,
    v6: bool,
    /// The probe carries ACK: its acknowledgement number is the cookie too.
    ack: bool,
}

impl Template {
    /// A SYN probe.
    pub fn new(v6: bool) -> Template {
        Template::with_flags(v6, TcpFlags::SYN)
    }

    /// A probe with these TCP flags (an MSS option only with SYN).
    pub fn with_flags(v6: bool, flags: u8) -> Template {
        let mut frame = [0u8; MAX_PROBE];
        let ip_len = if v6 { IP6 } else { IP4 };
        let syn = flags & TcpFlags::SYN != 0;
        let tcp_len = if syn { TCP } else { TCP_BARE };
        let len = ETH + ip_len + tcp_len;
        {
            let mut eth = MutableEthernetPacket::new(&mut frame[..len]).expect("frame fits");
            eth.set_ethertype(if v6 { EtherTypes::Ipv6 } else { EtherTypes::Ipv4 });
        }
        if v6 {
            let mut ip = MutableIpv6Packet::new(&mut frame[ETH..len]).expect("frame fits");
            ip.set_version(6);
            ip.set_payload_length(tcp_len as u16);
            ip.set_next_header(IpNextHeaderProtocols::Tcp);
            ip.set_hop_limit(64);
        } else {
            let mut ip = MutableIpv4Packet::new(&mut frame[ETH..len]).expect("frame fits");
            ip.set_version(4);
            ip.set_header_length(5);
            ip.set_total_length((IP4 + tcp_len) as u16);
            ip.set_ttl(64);
            ip.set_next_level_protocol(IpNextHeaderProtocols::Tcp);
        }
        let mut t = MutableTcpPacket::new(&mut frame[ETH + ip_len..len]).expect("frame fits");
        t.set_data_offset((tcp_len / 4) as u8);
        t.set_flags(flags);
        t.set_window(1024);
        if syn {
            t.set_options(&[TcpOption::mss(1460)]);
        }
        Template { frame, len, v6, ack: flags & TcpFlags::ACK != 0 }
    }

    /// Writes the probe for one target into `out` and returns its length.
    /// The hop's family must match the template's.
    #[allow(clippy::too_many_arguments)]
    pub fn fill(&self, out: &mut [u8], hop: &Hop, dst: IpAddr, sport: u16, dport: u16, seq: u32, ip_id: u16) -> usize {
        let len = self.len;
        let out = &mut out[..len];
        out.copy_from_slice(&self.frame[..len]);
        out[0..6].copy_from_slice(&hop.dst_mac);
        out[6..12].copy_from_slice(&hop.src_mac);
        let ip_len = if self.v6 { IP6 } else { IP4 };
        {
            let mut t = MutableTcpPacket::new(&mut out[ETH + ip_len..]).expect("frame fits");
            t.set_source(sport);
            t.set_destination(dport);
            t.set_sequence(seq);
            if self.ack {
                t.set_acknowledgement(seq);
            }
        }
        match (hop.src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let (iph, tcp_part) = out[ETH..].split_at_mut(IP4);
                let mut ip = MutableIpv4Packet::new(iph).expect("frame fits");
                ip.set_identification(ip_id);
                ip.set_source(s);
                ip.set_destination(d);
                ip.set_checksum(0);
                let c = ipv4::checksum(&ip.to_immutable());
                ip.set_checksum(c);
                let mut t = MutableTcpPacket::new(tcp_part).expect("frame fits");
                t.set_checksum(0);
                let c = tcp::ipv4_checksum(&t.to_immutable(), &s, &d);
                t.set_checksum(c);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let (iph, tcp_part) = out[ETH..].split_at_mut(IP6);
                let mut ip = MutableIpv6Packet::new(iph).expect("frame fits");
                ip.set_flow_label(u32::from(ip_id));
                ip.set_source(s);
                ip.set_destination(d);
                let mut t = MutableTcpPacket::new(tcp_part).expect("frame fits");
                t.set_checksum(0);
                let c = tcp::ipv6_checksum(&t.to_immutable(), &s, &d);
                t.set_checksum(c);
            }
            _ => panic!("hop and target of different address families"),
        }
        len
    }
}

/// Writes a UDP probe carrying `payload` (at most [`MAX_UDP_PAYLOAD`]
/// bytes) into `out` and returns its length. The IP id (IPv4) or flow label
/// (IPv6) is `ip_id`, which ICMP errors quote back.
#[allow(clippy::too_many_arguments)]
pub fn fill_udp(out: &mut [u8], hop: &Hop, dst: IpAddr, sport: u16, dport: u16, ip_id: u16, payload: &[u8]) -> usize {
    let payload = &payload[..payload.len().min(MAX_UDP_PAYLOAD)];
    let udp_len = UDP + payload.len();
    let (len, rest) = headers(out, hop, dst, IpNextHeaderProtocols::Udp, udp_len, ip_id);
    let mut u = MutableUdpPacket::new(rest).expect("frame fits");
    u.set_source(sport);
    u.set_destination(dport);
    u.set_length(udp_len as u16);
    u.set_payload(payload);
    let c = match (hop.src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => udp::ipv4_checksum(&u.to_immutable(), &s, &d),
        (IpAddr::V6(s), IpAddr::V6(d)) => udp::ipv6_checksum(&u.to_immutable(), &s, &d),
        _ => unreachable!("headers checked the families"),
    };
    u.set_checksum(nonzero(c));
    len
}

/// Writes the Ethernet and IP headers of a `payload_len`-byte `proto`
/// payload from `hop` to `dst` (zeroing the frame first); the IP id (IPv4)
/// or flow label (IPv6) is `ip_id`. Returns the frame's length and the
/// payload's room.
fn headers<'a>(
    out: &'a mut [u8],
    hop: &Hop,
    dst: IpAddr,
    proto: pnet_packet::ip::IpNextHeaderProtocol,
    payload_len: usize,
    ip_id: u16,
) -> (usize, &'a mut [u8]) {
    let v6 = dst.is_ipv6();
    let ip_len = if v6 { IP6 } else { IP4 };
    let len = ETH + ip_len + payload_len;
    let out = &mut out[..len];
    out.fill(0);
    out[0..6].copy_from_slice(&hop.dst_mac);
    out[6..12].copy_from_slice(&hop.src_mac);
    let ethertype = if v6 { EtherTypes::Ipv6 } else { EtherTypes::Ipv4 };
    out[12..14].copy_from_slice(&ethertype.0.to_be_bytes());
    let (iph, rest) = out[ETH..].split_at_mut(ip_len);
    match (hop.src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut ip = MutableIpv4Packet::new(iph).expect("frame fits");
            ip.set_version(4);
            ip.set_header_length(5);
            ip.set_total_length((IP4 + payload_len) as u16);
            ip.set_ttl(64);
            ip.set_next_level_protocol(proto);
            ip.set_identification(ip_id);
            ip.set_source(s);
            ip.set_destination(d);
            let c = ipv4::checksum(&ip.to_immutable());
            ip.set_checksum(c);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut ip = MutableIpv6Packet::new(iph).expect("frame fits");
            ip.set_version(6);
            ip.set_payload_length(payload_len as u16);
            ip.set_next_header(proto);
            ip.set_hop_limit(64);
            ip.set_flow_label(u32::from(ip_id));
            ip.set_source(s);
            ip.set_destination(d);
        }
        _ => panic!("hop and target of different address families"),
    }
    (len, rest)
}

/// The ICMP requests host discovery sends (`-PE`, `-PP`, `-PM`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ping {
    Echo,
    Timestamp,
    Mask,
}

impl Ping {
    /// The request's ICMP type (ICMPv6 has only echo).
    fn request_type(self, v6: bool) -> u8 {
        match (self, v6) {
            (Ping::Echo, false) => 8,
            (Ping::Echo, true) => 128,
            (Ping::Timestamp, _) => 13,
            (Ping::Mask, _) => 17,
        }
    }

    /// Bytes after the 8-byte header: three timestamps, or a mask.
    fn body_len(self) -> usize {
        match self {
            Ping::Echo => 0,
            Ping::Timestamp => 12,
            Ping::Mask => 4,
        }
    }

    /// The reason an answer to it gives.
    pub fn reason(self) -> Reason {
        match self {
            Ping::Echo => Reason::EchoReply,
            Ping::Timestamp => Reason::TimestampReply,
            Ping::Mask => Reason::AddressmaskReply,
        }
    }
}

/// Longest ICMP request frame.
pub const MAX_PING: usize = ETH + IP6 + 8 + 12;

/// Writes an ICMP request (`id` and `seq` are what the reply echoes back)
/// into `out` and returns its length; `None` for a timestamp or mask
/// request to an IPv6 target, which ICMPv6 does not have.
pub fn fill_icmp(out: &mut [u8], hop: &Hop, dst: IpAddr, ping: Ping, id: u16, seq: u16) -> Option<usize> {
    let v6 = dst.is_ipv6();
    if v6 && ping != Ping::Echo {
        return None;
    }
    let proto = if v6 { IpNextHeaderProtocols::Icmpv6 } else { IpNextHeaderProtocols::Icmp };
    let (len, msg) = headers(out, hop, dst, proto, 8 + ping.body_len(), seq);
    msg[0] = ping.request_type(v6);
    msg[4..6].copy_from_slice(&id.to_be_bytes());
    msg[6..8].copy_from_slice(&seq.to_be_bytes());
    let c = match (hop.src, dst) {
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            pnet_packet::icmpv6::checksum(&Icmpv6Packet::new(msg).expect("header fits"), &s, &d)
        }
        _ => pnet_packet::icmp::checksum(&IcmpPacket::new(msg).expect("header fits")),
    };
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    Some(len)
}

/// A UDP checksum as sent: a computed 0 goes out as 0xffff (RFC 768), since
/// 0 means "no checksum".
fn nonzero(c: u16) -> u16 {
    if c == 0 {
        0xffff
    } else {
        c
    }
}

/// A received UDP checksum agrees with the one computed (0xffff standing
/// for a computed 0).
fn udp_sum_ok(computed: u16, got: u16) -> bool {
    nonzero(computed) == got
}

/// A TCP segment or UDP datagram that may answer one of our probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    pub proto: Proto,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    /// TCP: the sequence number. An ICMP error quoting a UDP probe: the
    /// probe's IP id (IPv4) or the low 16 bits of its flow label (IPv6). A
    /// UDP answer: the transaction id it echoes, once the receiver has read
    /// it ([`Reply::echo`]).
    pub seq: u32,
    pub ack: u32,
    /// A UDP answer: which bits of `seq` hold an echoed transaction id
    /// (none until the receiver reads one).
    pub mask: u32,
    /// A UDP answer: where its payload lies in the frame.
    pub data: (u16, u16),
    /// TCP flags (SYN, ACK, RST, ...).
    pub flags: u8,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    pub window: u16,
    /// For an ICMP destination unreachable that quotes one of our probes:
    /// why; the other fields are then those of the quoted probe, turned
    /// round as if the target had answered (`seq` is the probe's own).
    /// For an ICMP echo, timestamp or address mask reply: that reply's
    /// reason ([`Reason::is_pong`]), its identifier in `dport`, its
    /// sequence number in `seq` (`sport` 0, `proto` meaningless).
    pub icmp: Option<Reason>,
    /// The ICMP error came from another host than the probe's target (a
    /// router or firewall on the way).
    pub relayed: bool,
}

impl Reply {
    pub fn is_syn_ack(&self) -> bool {
        self.proto == Proto::Tcp
            && self.icmp.is_none()
            && self.flags & (TcpFlags::SYN | TcpFlags::ACK) == TcpFlags::SYN | TcpFlags::ACK
            && self.flags & TcpFlags::RST == 0
    }

    pub fn is_rst(&self) -> bool {
        self.proto == Proto::Tcp && self.icmp.is_none() && self.flags & TcpFlags::RST != 0
    }

    /// A UDP answer's payload, from the frame it was parsed from.
    pub fn payload<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        let (at, n) = (usize::from(self.data.0), usize::from(self.data.1));
        frame.get(at..at + n).unwrap_or(&[])
    }

    /// Reads the `len` bytes (1 to 4) at `at` of a UDP answer's payload
    /// into `seq`, as the transaction id it echoes; an answer too short to
    /// hold them echoes nothing (its mask stays 0 and it cannot match).
    pub fn echo(&mut self, frame: &[u8], at: usize, len: usize) -> bool {
        let p = self.payload(frame);
        let Some(b) = p.get(at..at + len).filter(|_| (1..=4).contains(&len)) else { return false };
        self.seq = b.iter().fold(0u32, |v, &x| v << 8 | u32::from(x));
        self.mask = if len == 4 { u32::MAX } else { (1u32 << (8 * len)) - 1 };
        true
    }
}

/// Parses a received Ethernet frame; `None` for anything that is not a
/// well-formed TCP segment over IPv4 or IPv6.
pub fn parse(frame: &[u8], checksum: Checksum) -> Option<Reply> {
    let eth = EthernetPacket::new(frame)?;
    match eth.get_ethertype() {
        EtherTypes::Ipv4 => parse_v4(&frame[ETH..], checksum),
        EtherTypes::Ipv6 => parse_v6(&frame[ETH..], checksum),
        _ => None,
    }
}

fn parse_v4(bytes: &[u8], checksum: Checksum) -> Option<Reply> {
    let ip = Ipv4Packet::new(bytes)?;
    let hl = usize::from(ip.get_header_length()) * 4;
    let total = usize::from(ip.get_total_length());
    if ip.get_version() != 4 || hl < IP4 || total < hl || total > bytes.len() {
        return None;
    }
    let proto = ip.get_next_level_protocol();
    if ![IpNextHeaderProtocols::Tcp, IpNextHeaderProtocols::Udp, IpNextHeaderProtocols::Icmp].contains(&proto)
        || ip.get_fragment_offset() != 0
        || ip.get_flags() & 1 != 0
    {
        return None;
    }
    if ipv4::checksum(&ip) != ip.get_checksum() {
        return None;
    }
    if proto == IpNextHeaderProtocols::Icmp {
        let (from, to) = (IpAddr::V4(ip.get_source()), IpAddr::V4(ip.get_destination()));
        return icmp_v4(&bytes[hl..total], from, to, ip.get_ttl());
    }
    let (src, dst) = (ip.get_source(), ip.get_destination());
    if proto == IpNextHeaderProtocols::Udp {
        let d = UdpPacket::new(&bytes[hl..total])?;
        if !udp_ok(&d, total - hl)
            || (checksum == Checksum::Unchecked
                && d.get_checksum() != 0
                && !udp_sum_ok(udp::ipv4_checksum(&d, &src, &dst), d.get_checksum()))
        {
            return None;
        }
        return Some(udp_reply(IpAddr::V4(src), IpAddr::V4(dst), &d, ip.get_ttl(), ETH + hl));
    }
    let seg = TcpPacket::new(&bytes[hl..total])?;
    if !tcp_ok(&seg, total - hl) {
        return None;
    }
    if checksum == Checksum::Unchecked && tcp::ipv4_checksum(&seg, &src, &dst) != seg.get_checksum() {
        return None;
    }
    Some(reply(IpAddr::V4(src), IpAddr::V4(dst), &seg, ip.get_ttl()))
}

fn parse_v6(bytes: &[u8], checksum: Checksum) -> Option<Reply> {
    let ip = Ipv6Packet::new(bytes)?;
    let payload = usize::from(ip.get_payload_length());
    if ip.get_version() != 6 || IP6 + payload > bytes.len() {
        return None;
    }
    let (src, dst): (Ipv6Addr, Ipv6Addr) = (ip.get_source(), ip.get_destination());
    match ip.get_next_header() {
        IpNextHeaderProtocols::Tcp => {}
        IpNextHeaderProtocols::Icmpv6 => return icmp_v6(&bytes[IP6..IP6 + payload], src, dst, ip.get_hop_limit()),
        IpNextHeaderProtocols::Udp => {
            let d = UdpPacket::new(&bytes[IP6..IP6 + payload])?;
            // Over IPv6 the UDP checksum is mandatory (RFC 8200 8.1).
            if !udp_ok(&d, payload)
                || (checksum == Checksum::Unchecked
                    && !udp_sum_ok(udp::ipv6_checksum(&d, &src, &dst), d.get_checksum()))
            {
                return None;
            }
            return Some(udp_reply(IpAddr::V6(src), IpAddr::V6(dst), &d, ip.get_hop_limit(), ETH + IP6));
        }
        _ => return None,
    }
    let seg = TcpPacket::new(&bytes[IP6..IP6 + payload])?;
    if !tcp_ok(&seg, payload) {
        return None;
    }
    if checksum == Checksum::Unchecked && tcp::ipv6_checksum(&seg, &src, &dst) != seg.get_checksum() {
        return None;
    }
    Some(reply(IpAddr::V6(src), IpAddr::V6(dst), &seg, ip.get_hop_limit()))
}

/// The TCP header's own length claim fits the segment.
fn tcp_ok(seg: &TcpPacket<'_>, seg_len: usize) -> bool {
    let off = usize::from(seg.get_data_offset()) * 4;
    off >= 20 && off <= seg_len && seg.packet().len() >= 20
}

/// The UDP header's length claim is the datagram's (at least the header).
fn udp_ok(d: &UdpPacket<'_>, len: usize) -> bool {
    usize::from(d.get_length()) == len && len >= UDP
}

/// A UDP datagram whose payload starts `at` bytes into the frame.
fn udp_reply(src: IpAddr, dst: IpAddr, d: &UdpPacket<'_>, ttl: u8, at: usize) -> Reply {
    Reply {
        proto: Proto::Udp,
        src,
        dst,
        sport: d.get_source(),
        dport: d.get_destination(),
        seq: 0,
        ack: 0,
        mask: 0,
        data: ((at + UDP) as u16, (usize::from(d.get_length()) - UDP) as u16),
        flags: 0,
        ttl,
        window: 0,
        icmp: None,
        relayed: false,
    }
}

fn reply(src: IpAddr, dst: IpAddr, seg: &TcpPacket<'_>, ttl: u8) -> Reply {
    Reply {
        proto: Proto::Tcp,
        mask: 0,
        data: (0, 0),
        src,
        dst,
        sport: seg.get_source(),
        dport: seg.get_destination(),
        seq: seg.get_sequence(),
        ack: seg.get_acknowledgement(),
        flags: seg.get_flags(),
        ttl,
        window: seg.get_window(),
        icmp: None,
        relayed: false,
    }
}

/// ICMP destination unreachable (RFC 792), whose data is the probe's IP
/// header and at least the first 8 bytes of its TCP or UDP header.
fn icmp_v4(msg: &[u8], from: IpAddr, to: IpAddr, ttl: u8) -> Option<Reply> {
    let icmp = IcmpPacket::new(msg)?;
    let pong = match icmp.get_icmp_type().0 {
        0 => Some(Ping::Echo),
        14 => Some(Ping::Timestamp),
        18 => Some(Ping::Mask),
        _ => None,
    };
    if let Some(ping) = pong {
        if msg.len() < 8 + ping.body_len() || pnet_packet::icmp::checksum(&icmp) != icmp.get_checksum() {
            return None;
        }
        return Some(pong_reply(ping, from, to, msg, ttl));
    }
    if msg.len() < 8 + IP4 + 8 || icmp.get_icmp_type().0 != 3 {
        return None;
    }
    if pnet_packet::icmp::checksum(&icmp) != icmp.get_checksum() {
        return None;
    }
    let why = match icmp.get_icmp_code().0 {
        0 => Reason::NetUnreach,
        1 => Reason::HostUnreach,
        2 => Reason::ProtoUnreach,
        3 => Reason::PortUnreach,
        9 => Reason::NetProhibited,
        10 => Reason::HostProhibited,
        13 => Reason::AdminProhibited,
        _ => return None,
    };
    let quoted = &msg[8..];
    let ip = Ipv4Packet::new(quoted)?;
    let hl = usize::from(ip.get_header_length()) * 4;
    let proto = match ip.get_next_level_protocol() {
        IpNextHeaderProtocols::Tcp => Proto::Tcp,
        IpNextHeaderProtocols::Udp => Proto::Udp,
        _ => return None,
    };
    if ip.get_version() != 4 || hl < IP4 || quoted.len() < hl + 8 {
        return None;
    }
    let head = &quoted[hl..hl + 8];
    let (src, dst) = (IpAddr::V4(ip.get_source()), IpAddr::V4(ip.get_destination()));
    let r = quoted_reply(proto, src, dst, head, u32::from(ip.get_identification()), ttl, why);
    Some(Reply { relayed: from != dst, ..r })
}

/// ICMPv6 destination unreachable (RFC 4443 3.1): as much of the probe as
/// fits, its IPv6 header first.
fn icmp_v6(msg: &[u8], src: Ipv6Addr, dst: Ipv6Addr, ttl: u8) -> Option<Reply> {
    let icmp = Icmpv6Packet::new(msg)?;
    if icmp.get_icmpv6_type().0 == 129 {
        if msg.len() < 8 || pnet_packet::icmpv6::checksum(&icmp, &src, &dst) != icmp.get_checksum() {
            return None;
        }
        return Some(pong_reply(Ping::Echo, IpAddr::V6(src), IpAddr::V6(dst), msg, ttl));
    }
    if msg.len() < 8 + IP6 + 8 || icmp.get_icmpv6_type().0 != 1 {
        return None;
    }
    if pnet_packet::icmpv6::checksum(&icmp, &src, &dst) != icmp.get_checksum() {
        return None;
    }
    let why = match icmp.get_icmpv6_code().0 {
        0 => Reason::NetUnreach,
        1 | 5 | 6 => Reason::AdminProhibited,
        2 | 3 => Reason::HostUnreach,
        4 => Reason::PortUnreach,
        _ => return None,
    };
    let quoted = &msg[8..];
    let ip = Ipv6Packet::new(quoted)?;
    let proto = match ip.get_next_header() {
        IpNextHeaderProtocols::Tcp => Proto::Tcp,
        IpNextHeaderProtocols::Udp => Proto::Udp,
        _ => return None,
    };
    if ip.get_version() != 6 {
        return None;
    }
    let head = &quoted[IP6..IP6 + 8];
    let (qsrc, qdst) = (IpAddr::V6(ip.get_source()), IpAddr::V6(ip.get_destination()));
    let r = quoted_reply(proto, qsrc, qdst, head, ip.get_flow_label() & 0xffff, ttl, why);
    Some(Reply { relayed: IpAddr::V6(src) != qdst, ..r })
}

/// An ICMP echo, timestamp or mask reply (`msg`, its length checked).
fn pong_reply(ping: Ping, src: IpAddr, dst: IpAddr, msg: &[u8], ttl: u8) -> Reply {
    Reply {
        proto: Proto::Tcp,
        src,
        dst,
        sport: 0,
        dport: u16::from_be_bytes([msg[4], msg[5]]),
        seq: u32::from(u16::from_be_bytes([msg[6], msg[7]])),
        ack: 0,
        mask: 0,
        data: (0, 0),
        flags: 0,
        ttl,
        window: 0,
        icmp: Some(ping.reason()),
        relayed: false,
    }
}

/// The quoted probe (from `probe_src` to `probe_dst`, first 8 bytes of its
/// TCP or UDP header, and its IP id) turned round as a reply from its
/// target. A TCP probe is known by its sequence number, a UDP one (whose
/// first 8 bytes hold nothing of ours but the ports) by its IP id.
fn quoted_reply(
    proto: Proto,
    probe_src: IpAddr,
    probe_dst: IpAddr,
    head: &[u8],
    ip_id: u32,
    ttl: u8,
    why: Reason,
) -> Reply {
    let be16 = |i: usize| u16::from_be_bytes([head[i], head[i + 1]]);
    Reply {
        proto,
        src: probe_dst,
        dst: probe_src,
        sport: be16(2),
        dport: be16(0),
        seq: match proto {
            Proto::Tcp => u32::from_be_bytes([head[4], head[5], head[6], head[7]]),
            Proto::Udp => ip_id,
        },
        ack: 0,
        mask: 0,
        data: (0, 0),
        flags: 0,
        ttl,
        window: 0,
        icmp: Some(why),
        relayed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop4() -> Hop {
        Hop { src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [2, 0, 0, 0, 0, 2], src: "198.18.0.1".parse().unwrap() }
    }

    fn hop6() -> Hop {
        Hop { src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [2, 0, 0, 0, 0, 2], src: "2001:2::1".parse().unwrap() }
    }

    /// A reply frame: the probe with addresses and ports swapped and new flags.
    fn answer(probe: &[u8], flags: u8, ack: u32) -> Vec<u8> {
        let v6 = probe[12] == 0x86;
        let parsed = parse(probe, Checksum::Unchecked).expect("probe parses");
        let hop = Hop { src_mac: [2, 0, 0, 0, 0, 2], dst_mac: [2, 0, 0, 0, 0, 1], src: parsed.dst };
        let mut out = vec![0u8; MAX_PROBE];
        let n = Template::new(v6).fill(&mut out, &hop, parsed.src, parsed.dport, parsed.sport, 777, 1);
        out.truncate(n);
        let ip_len = if v6 { IP6 } else { IP4 };
        let mut t = MutableTcpPacket::new(&mut out[ETH + ip_len..]).unwrap();
        t.set_flags(flags);
        t.set_acknowledgement(ack);
        t.set_checksum(0);
        let c = match (parsed.dst, parsed.src) {
            (IpAddr::V4(s), IpAddr::V4(d)) => tcp::ipv4_checksum(&t.to_immutable(), &s, &d),
            (IpAddr::V6(s), IpAddr::V6(d)) => tcp::ipv6_checksum(&t.to_immutable(), &s, &d),
            _ => unreachable!(),
        };
        t.set_checksum(c);
        out
    }

    #[test]
    fn probes_round_trip_through_the_parser() {
        for (hop, dst) in [(hop4(), "198.19.2.3"), (hop6(), "2001:2::2")] {
            let v6 = hop.src.is_ipv6();
            let mut out = [0u8; MAX_PROBE];
            let n = Template::new(v6).fill(&mut out, &hop, dst.parse().unwrap(), 61_234, 443, 0xdead_beef, 9);
            let r = parse(&out[..n], Checksum::Unchecked).expect("valid probe");
            assert_eq!((r.src, r.dst.to_string()), (hop.src, dst.to_string()));
            assert_eq!((r.sport, r.dport, r.seq), (61_234, 443, 0xdead_beef));
            assert_eq!(r.flags, TcpFlags::SYN);
            assert_eq!(&out[0..6], &hop.dst_mac);
        }
    }

    #[test]
    fn syn_ack_and_rst_are_told_apart() {
        let mut out = [0u8; MAX_PROBE];
        let n = Template::new(false).fill(&mut out, &hop4(), "198.18.0.2".parse().unwrap(), 61_000, 22, 41, 1);
        let sa = parse(&answer(&out[..n], TcpFlags::SYN | TcpFlags::ACK, 42), Checksum::Unchecked).unwrap();
        assert!(sa.is_syn_ack() && !sa.is_rst());
        assert_eq!((sa.sport, sa.dport, sa.ack), (22, 61_000, 42));
        let rst = parse(&answer(&out[..n], TcpFlags::RST | TcpFlags::ACK, 42), Checksum::Unchecked).unwrap();
        assert!(rst.is_rst() && !rst.is_syn_ack());
    }

    #[test]
    fn malformed_frames_are_dropped() {
        let mut out = [0u8; MAX_PROBE];
        let n = Template::new(false).fill(&mut out, &hop4(), "198.18.0.2".parse().unwrap(), 61_000, 22, 41, 1);
        let good = answer(&out[..n], TcpFlags::SYN | TcpFlags::ACK, 42);
        assert!(parse(&good, Checksum::Unchecked).is_some());
        // Every truncation.
        for cut in 0..good.len() {
            assert!(parse(&good[..cut], Checksum::Unchecked).is_none(), "truncated to {cut}");
        }
        // Wrong TCP checksum: dropped when unchecked, kept when the kernel says it never computed it.
        let mut bad = good.clone();
        bad[ETH + IP4 + 16] ^= 0xff;
        assert!(parse(&bad, Checksum::Unchecked).is_none());
        assert!(parse(&bad, Checksum::Unfinished).is_some());
        // Wrong IPv4 header checksum.
        let mut bad = good.clone();
        bad[ETH + 10] ^= 0xff;
        assert!(parse(&bad, Checksum::Valid).is_none());
        // TCP data offset past the segment, and below the minimum.
        for off in [15u8, 2] {
            let mut bad = good.clone();
            bad[ETH + IP4 + 12] = off << 4;
            assert!(parse(&bad, Checksum::Valid).is_none(), "data offset {off}");
        }
        // IP total length past the buffer, and IHL below 5.
        let mut bad = good.clone();
        bad[ETH + 2..ETH + 4].copy_from_slice(&2000u16.to_be_bytes());
        assert!(parse(&bad, Checksum::Valid).is_none());
        let mut bad = good.clone();
        bad[ETH] = 0x44;
        assert!(parse(&bad, Checksum::Valid).is_none());
        // Not TCP, not IP.
        let mut bad = good.clone();
        bad[ETH + 9] = 17;
        assert!(parse(&bad, Checksum::Valid).is_none());
        let mut bad = good;
        bad[12] = 0x08;
        bad[13] = 0x06;
        assert!(parse(&bad, Checksum::Valid).is_none());
    }

    #[test]
    fn other_scan_types_carry_their_flags_and_no_options() {
        for flags in [
            TcpFlags::FIN,
            0,
            TcpFlags::FIN | TcpFlags::PSH | TcpFlags::URG,
            TcpFlags::ACK,
            TcpFlags::FIN | TcpFlags::ACK,
        ] {
            for (hop, dst) in [(hop4(), "198.18.0.2"), (hop6(), "2001:2::2")] {
                let v6 = hop.src.is_ipv6();
                let mut out = [0u8; MAX_PROBE];
                let n = Template::with_flags(v6, flags).fill(&mut out, &hop, dst.parse().unwrap(), 61_001, 80, 77, 1);
                assert_eq!(n, ETH + if v6 { IP6 } else { IP4 } + TCP_BARE);
                let r = parse(&out[..n], Checksum::Unchecked).expect("valid probe");
                assert_eq!((r.flags, r.seq), (flags, 77));
                // With ACK set, the acknowledgement number is the cookie too.
                assert_eq!(r.ack, if flags & TcpFlags::ACK != 0 { 77 } else { 0 });
            }
        }
    }

    /// An ICMP destination unreachable from `from` quoting `probe` (its IP
    /// header and the first 8 bytes of TCP), as a router or the target sends.
    fn unreachable(probe: &[u8], from: IpAddr, code: u8) -> Vec<u8> {
        let v6 = probe[12] == 0x86;
        let ip_len = if v6 { IP6 } else { IP4 };
        let quoted = &probe[ETH..ETH + ip_len + 8];
        let mut icmp = vec![if v6 { 1 } else { 3 }, code, 0, 0, 0, 0, 0, 0];
        icmp.extend_from_slice(quoted);
        let to = parse(probe, Checksum::Unchecked).unwrap().src;
        let mut f = probe[..ETH].to_vec();
        f.swap(0, 6);
        match (from, to) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let c = pnet_packet::icmp::checksum(&IcmpPacket::new(&icmp).unwrap());
                icmp[2..4].copy_from_slice(&c.to_be_bytes());
                let mut ip = vec![0u8; IP4];
                {
                    let mut h = MutableIpv4Packet::new(&mut ip).unwrap();
                    h.set_version(4);
                    h.set_header_length(5);
                    h.set_total_length((IP4 + icmp.len()) as u16);
                    h.set_ttl(63);
                    h.set_next_level_protocol(IpNextHeaderProtocols::Icmp);
                    h.set_source(s);
                    h.set_destination(d);
                    let c = ipv4::checksum(&h.to_immutable());
                    h.set_checksum(c);
                }
                f.extend_from_slice(&ip);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let c = pnet_packet::icmpv6::checksum(&Icmpv6Packet::new(&icmp).unwrap(), &s, &d);
                icmp[2..4].copy_from_slice(&c.to_be_bytes());
                let mut ip = vec![0u8; IP6];
                {
                    let mut h = MutableIpv6Packet::new(&mut ip).unwrap();
                    h.set_version(6);
                    h.set_payload_length(icmp.len() as u16);
                    h.set_next_header(IpNextHeaderProtocols::Icmpv6);
                    h.set_hop_limit(63);
                    h.set_source(s);
                    h.set_destination(d);
                }
                f.extend_from_slice(&ip);
            }
            _ => unreachable!(),
        }
        f.extend_from_slice(&icmp);
        f
    }

    #[test]
    fn icmp_unreachables_quoting_a_probe_read_as_its_reply() {
        let cases = [
            (hop4(), "198.18.0.2", "198.18.0.254", 13, Reason::AdminProhibited),
            (hop4(), "198.18.0.2", "198.18.0.2", 3, Reason::PortUnreach),
            (hop4(), "198.18.0.2", "198.18.0.254", 1, Reason::HostUnreach),
            (hop6(), "2001:2::2", "2001:2::fe", 1, Reason::AdminProhibited),
            (hop6(), "2001:2::2", "2001:2::2", 4, Reason::PortUnreach),
        ];
        for (hop, dst, from, code, why) in cases {
            let mut out = [0u8; MAX_PROBE];
            let n = Template::new(hop.src.is_ipv6()).fill(
                &mut out,
                &hop,
                dst.parse().unwrap(),
                61_007,
                443,
                0xfeed_f00d,
                3,
            );
            let err = unreachable(&out[..n], from.parse().unwrap(), code);
            let r = parse(&err, Checksum::Unchecked).unwrap_or_else(|| panic!("{dst} code {code}"));
            assert_eq!(r.icmp, Some(why));
            assert_eq!(
                (r.src.to_string(), r.dst, r.sport, r.dport, r.seq),
                (dst.to_string(), hop.src, 443, 61_007, 0xfeed_f00d)
            );
            assert!(!r.is_rst() && !r.is_syn_ack());
            // Every truncation is dropped, and so is a wrong ICMP checksum.
            for cut in 0..err.len() {
                assert!(parse(&err[..cut], Checksum::Unchecked).is_none(), "truncated to {cut}");
            }
            let mut bad = err.clone();
            let icmp_at = ETH + if hop.src.is_ipv6() { IP6 } else { IP4 };
            bad[icmp_at + 2] ^= 0x55;
            assert!(parse(&bad, Checksum::Unchecked).is_none());
            // Other ICMP types (an echo reply, time exceeded) are not replies.
            let mut other = err.clone();
            other[icmp_at] = 11;
            assert!(parse(&other, Checksum::Unchecked).is_none());
        }
    }

    /// A UDP answer to `probe`: ports and addresses turned round, `payload` inside.
    fn udp_answer(probe: &[u8], payload: &[u8]) -> Vec<u8> {
        let p = parse(probe, Checksum::Unchecked).expect("probe parses");
        let hop = Hop { src_mac: [2, 0, 0, 0, 0, 2], dst_mac: [2, 0, 0, 0, 0, 1], src: p.dst };
        let mut out = vec![0u8; MAX_UDP_PROBE];
        let n = fill_udp(&mut out, &hop, p.src, p.dport, p.sport, 5, payload);
        out.truncate(n);
        out
    }

    #[test]
    fn udp_probes_and_answers_round_trip_and_echo_ids() {
        for (hop, dst) in [(hop4(), "198.18.0.2"), (hop6(), "2001:2::2")] {
            let mut out = [0u8; MAX_UDP_PROBE];
            let n = fill_udp(&mut out, &hop, dst.parse().unwrap(), 61_500, 53, 0xbeef, b"\xbe\xefquery");
            let ip_len = if hop.src.is_ipv6() { IP6 } else { IP4 };
            assert_eq!(n, ETH + ip_len + UDP + 7);
            let p = parse(&out[..n], Checksum::Unchecked).expect("a valid probe");
            assert_eq!((p.proto, p.sport, p.dport, p.icmp), (Proto::Udp, 61_500, 53, None));
            assert_eq!(p.payload(&out[..n]), b"\xbe\xefquery");
            let ans = udp_answer(&out[..n], b"\xbe\xefanswer");
            let mut r = parse(&ans, Checksum::Unchecked).expect("a valid answer");
            assert_eq!((r.src.to_string(), r.sport, r.dport), (dst.to_string(), 53, 61_500));
            assert!(!r.is_rst() && !r.is_syn_ack());
            assert!(r.echo(&ans, 0, 2));
            assert_eq!((r.seq, r.mask), (0xbeef, 0xffff));
            assert!(!r.echo(&ans, 6, 4), "an id past the payload's end is not echoed");
            // A wrong UDP checksum, a length that disagrees with IP's, truncations.
            let mut bad = ans.clone();
            let at = ans.len() - 1;
            bad[at] ^= 0x40;
            assert!(parse(&bad, Checksum::Unchecked).is_none());
            assert!(parse(&bad, Checksum::Unfinished).is_some());
            let mut bad = ans.clone();
            bad[ETH + ip_len + 5] ^= 1;
            assert!(parse(&bad, Checksum::Valid).is_none(), "UDP length");
            for cut in 0..ans.len() {
                assert!(parse(&ans[..cut], Checksum::Unchecked).is_none(), "truncated to {cut}");
            }
        }
        // Over IPv4 a zero checksum means none was computed (RFC 768).
        let mut out = [0u8; MAX_UDP_PROBE];
        let n = fill_udp(&mut out, &hop4(), "198.18.0.2".parse().unwrap(), 61_500, 161, 1, b"x");
        let mut ans = udp_answer(&out[..n], b"y");
        ans[ETH + IP4 + 6..ETH + IP4 + 8].copy_from_slice(&[0, 0]);
        assert!(parse(&ans, Checksum::Unchecked).is_some());
    }

    #[test]
    fn icmp_errors_quoting_a_udp_probe_carry_its_ip_id() {
        for (hop, dst, from, code, why) in [
            (hop4(), "198.18.0.2", "198.18.0.2", 3, Reason::PortUnreach),
            (hop4(), "198.18.0.6", "198.18.0.254", 13, Reason::AdminProhibited),
            (hop4(), "198.18.0.6", "198.18.0.254", 3, Reason::PortUnreach),
            (hop6(), "2001:2::2", "2001:2::2", 4, Reason::PortUnreach),
            (hop6(), "2001:2::2", "2001:2::fe", 4, Reason::PortUnreach),
        ] {
            let mut out = [0u8; MAX_UDP_PROBE];
            let n = fill_udp(&mut out, &hop, dst.parse().unwrap(), 61_234, 161, 0x4321, b"snmp");
            let err = unreachable(&out[..n], from.parse().unwrap(), code);
            let r = parse(&err, Checksum::Unchecked).expect("an ICMP error");
            assert_eq!((r.proto, r.icmp, r.seq), (Proto::Udp, Some(why), 0x4321));
            assert_eq!(r.relayed, from != dst, "{from} answering for {dst}");
            assert_eq!((r.src.to_string(), r.sport, r.dport), (dst.to_string(), 161, 61_234));
            for cut in 0..err.len() {
                assert!(parse(&err[..cut], Checksum::Unchecked).is_none(), "truncated to {cut}");
            }
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut buf = [0u8; 128];
        for round in 0..20_000 {
            for b in buf.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            // Make many of them look like IPv4 or IPv6 TCP so the deep paths run.
            if round % 2 == 0 {
                buf[12..14].copy_from_slice(&[0x08, 0x00]);
                buf[ETH] = 0x45;
                buf[ETH + 9] = [1, 6, 17][round % 3];
            } else if round % 3 == 0 {
                buf[12..14].copy_from_slice(&[0x86, 0xdd]);
                buf[ETH] = 0x60;
                buf[ETH + 6] = [58, 6, 17][round % 3];
            }
            let len = (x as usize) % buf.len();
            let _ = parse(&buf[..len], Checksum::Unchecked);
            let _ = parse(&buf[..len], Checksum::Unfinished);
        }
    }
}
