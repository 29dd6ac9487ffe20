//! Replies to raw probes, read from received frames with pnet's packet types.
//!
//! [`parse`] keeps only well-formed TCP segments, UDP datagrams, ICMP echo,
//! timestamp and mask replies, and ICMP destination-unreachable errors that
//! quote a TCP or UDP probe: every length is checked against the buffer
//! before it is used, and a frame with a wrong checksum is dropped. What
//! it gives is a [`Reply`], which the cookies then judge.

use std::net::{IpAddr, Ipv6Addr};

use pnet_packet::ethernet::{EtherTypes, EthernetPacket};
use pnet_packet::icmp::IcmpPacket;
use pnet_packet::icmpv6::Icmpv6Packet;
use pnet_packet::ip::IpNextHeaderProtocols;
use pnet_packet::ipv4::{self, Ipv4Packet};
use pnet_packet::ipv6::Ipv6Packet;
use pnet_packet::tcp::{self, TcpFlags, TcpPacket};
use pnet_packet::udp::{self, UdpPacket};
use pnet_packet::Packet;

use super::frame::{nonzero, Ping, ETH, IP4, IP6, UDP};
use crate::findings::{Proto, Reason};
use crate::raw::packet::Checksum;

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
    /// Which try of the probe it answers (0 the first), once the cookie
    /// has read it from the port it came back to.
    pub attempt: u8,
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
        attempt: 0,
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
        attempt: 0,
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
    let (id, seq) = (u16::from_be_bytes([msg[4], msg[5]]), u16::from_be_bytes([msg[6], msg[7]]));
    icmp_reply(Proto::Tcp, (src, 0), (dst, id), u32::from(seq), ttl, ping.reason())
}

/// A reply that came as ICMP: from `src`, to `dst` (addresses and ports),
/// known by `seq`, with the reason the ICMP message gives.
fn icmp_reply(proto: Proto, src: (IpAddr, u16), dst: (IpAddr, u16), seq: u32, ttl: u8, why: Reason) -> Reply {
    Reply {
        proto,
        src: src.0,
        dst: dst.0,
        sport: src.1,
        dport: dst.1,
        seq,
        ack: 0,
        mask: 0,
        data: (0, 0),
        flags: 0,
        ttl,
        window: 0,
        icmp: Some(why),
        relayed: false,
        attempt: 0,
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
    let seq = match proto {
        Proto::Tcp => u32::from_be_bytes([head[4], head[5], head[6], head[7]]),
        Proto::Udp => ip_id,
    };
    icmp_reply(proto, (probe_dst, be16(2)), (probe_src, be16(0)), seq, ttl, why)
}
