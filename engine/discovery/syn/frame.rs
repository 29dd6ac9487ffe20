//! Raw probe frames, with pnet's packet types (their replies are read by
//! [`super::reply`]).
//!
//! A [`Template`] holds the constant part of a TCP probe (Ethernet, IP and
//! TCP headers, with an MSS option on SYN probes), built once per address
//! family and scan type's flags; [`Template::fill`] patches only what
//! differs per target (MACs, addresses, ports, sequence, IP id) and
//! recomputes the checksums. [`fill_udp`] builds a UDP probe around its
//! port's payload, [`fill_icmp`] a host discovery ping.

use std::net::IpAddr;

use pnet_packet::ethernet::{EtherTypes, MutableEthernetPacket};
use pnet_packet::icmp::IcmpPacket;
use pnet_packet::icmpv6::Icmpv6Packet;
use pnet_packet::ip::IpNextHeaderProtocols;
use pnet_packet::ipv4::{self, MutableIpv4Packet};
use pnet_packet::ipv6::MutableIpv6Packet;
use pnet_packet::tcp::{self, MutableTcpPacket, TcpFlags, TcpOption};
use pnet_packet::udp::{self, MutableUdpPacket};

use crate::findings::Reason;

pub(super) const ETH: usize = 14;
pub(super) const IP4: usize = 20;
pub(super) const IP6: usize = 40;
/// TCP header with one option, MSS (4 bytes), as SYN probes carry.
const TCP: usize = 24;
/// TCP header without options, as the other probes carry.
const TCP_BARE: usize = 20;
pub(super) const UDP: usize = 8;
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
    pub(super) fn body_len(self) -> usize {
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
pub(super) fn nonzero(c: u16) -> u16 {
    if c == 0 {
        0xffff
    } else {
        c
    }
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
