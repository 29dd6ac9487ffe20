//! ARP requests and IPv6 neighbour solicitations, and the answers to them:
//! how on-link hosts are found up and their MAC addresses learned, as nmap
//! does on Ethernet. No I/O: frames are built into a buffer and parsed
//! from one (with pnet's packet types).
//!
//! In: the path to the link ([`Hop`], whose `dst_mac` is not used: requests
//! go to the broadcast or solicited-node multicast address) and a target.
//! Out: a request frame; for a received frame, the [`Answer`] it carries.
//! What always holds: an answer is only an ARP reply (operation 2) or a
//! solicited neighbour advertisement (hop limit 255, checksum checked when
//! the kernel did not) naming who answers, its MAC and whom it answers;
//! [`Answer::answers`] then says whether that is a request sent along a
//! given path. A request of another host, a gratuitous ARP or an
//! unsolicited advertisement is never an answer.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use pnet_packet::arp::{ArpHardwareTypes, ArpOperations, ArpPacket, MutableArpPacket};
use pnet_packet::ethernet::{EtherTypes, EthernetPacket, MutableEthernetPacket};
use pnet_packet::icmpv6::ndp::{MutableNeighborSolicitPacket, NeighborAdvertFlags, NeighborAdvertPacket};
use pnet_packet::icmpv6::{Icmpv6Packet, Icmpv6Types};
use pnet_packet::ip::IpNextHeaderProtocols;
use pnet_packet::ipv6::{Ipv6Packet, MutableIpv6Packet};

use super::frame::{Hop, ETH, IP6};
use crate::raw::packet::Checksum;

/// The discovery probe index of an ARP/NDP request (the plan's own probes
/// are numbered from 0, at most [`MAX_PROBES`](crate::discovery::ping::MAX_PROBES)).
pub const PROBE: u16 = u16::MAX;

/// How long a request waits for its answer while no round trip on the
/// link is known (nmap's ARP timeout): a host on the link answers within
/// milliseconds.
pub const FIRST_WAIT: Duration = Duration::from_millis(100);

/// An ARP request or reply over Ethernet and IPv4.
const ARP: usize = 28;
/// Shortest Ethernet frame (without its FCS): an ARP request is padded to it.
const MIN_FRAME: usize = 60;
/// A neighbour solicitation or advertisement: type, code, checksum, 4
/// bytes of flags or reserved, the target address.
const ND: usize = 24;
/// A source or target link-layer address option for Ethernet.
const LLADDR_OPT: usize = 8;
/// Longest request frame.
pub const MAX_REQUEST: usize = ETH + IP6 + ND + LLADDR_OPT;

/// An answer to an ARP or NDP request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The address whose owner answers: the ARP sender, or the
    /// advertisement's target address.
    pub ip: IpAddr,
    /// Its MAC address.
    pub mac: [u8; 6],
    /// Whom it answers: the ARP reply's target address, or the IPv6
    /// destination of the advertisement.
    pub to: IpAddr,
}

impl Answer {
    /// Whether this answers a request sent along `hop` (from its source
    /// address); the caller knows whether `ip` was asked.
    pub fn answers(&self, hop: &Hop) -> bool {
        self.to == hop.src && self.ip.is_ipv4() == hop.src.is_ipv4()
    }
}

/// A MAC address a host may own: not zero, not multicast or broadcast.
fn unicast(mac: [u8; 6]) -> bool {
    mac != [0; 6] && mac[0] & 1 == 0
}

/// Writes the request for `target` (ARP for IPv4, a neighbour solicitation
/// to its solicited-node address for IPv6) from `hop`'s MAC and source
/// address into `out` and returns its length; 0 if `target` and the
/// source are of two families. `out` holds at least [`MAX_REQUEST`] bytes.
pub fn fill_request(out: &mut [u8], hop: &Hop, target: IpAddr) -> usize {
    match (hop.src, target) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => fill_arp(out, hop.src_mac, src, dst),
        (IpAddr::V6(src), IpAddr::V6(dst)) => fill_solicit(out, hop.src_mac, src, dst),
        _ => 0,
    }
}

fn fill_arp(out: &mut [u8], mac: [u8; 6], src: Ipv4Addr, target: Ipv4Addr) -> usize {
    let out = &mut out[..MIN_FRAME];
    out.fill(0);
    {
        let mut eth = MutableEthernetPacket::new(out).expect("frame fits");
        eth.set_destination([0xff; 6].into());
        eth.set_source(mac.into());
        eth.set_ethertype(EtherTypes::Arp);
    }
    let mut arp = MutableArpPacket::new(&mut out[ETH..ETH + ARP]).expect("frame fits");
    arp.set_hardware_type(ArpHardwareTypes::Ethernet);
    arp.set_protocol_type(EtherTypes::Ipv4);
    arp.set_hw_addr_len(6);
    arp.set_proto_addr_len(4);
    arp.set_operation(ArpOperations::Request);
    arp.set_sender_hw_addr(mac.into());
    arp.set_sender_proto_addr(src);
    arp.set_target_hw_addr([0; 6].into());
    arp.set_target_proto_addr(target);
    MIN_FRAME
}

/// The solicited-node multicast address of `target` (RFC 4291 2.7.1).
fn solicited_node(target: Ipv6Addr) -> Ipv6Addr {
    let t = target.octets();
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00 | u16::from(t[13]), u16::from_be_bytes([t[14], t[15]]))
}

fn fill_solicit(out: &mut [u8], mac: [u8; 6], src: Ipv6Addr, target: Ipv6Addr) -> usize {
    let out = &mut out[..MAX_REQUEST];
    out.fill(0);
    let group = solicited_node(target);
    let g = group.octets();
    {
        let mut eth = MutableEthernetPacket::new(&mut *out).expect("frame fits");
        // 33:33 and the group's last four bytes (RFC 2464 7).
        eth.set_destination([0x33, 0x33, g[12], g[13], g[14], g[15]].into());
        eth.set_source(mac.into());
        eth.set_ethertype(EtherTypes::Ipv6);
    }
    {
        let mut ip = MutableIpv6Packet::new(&mut out[ETH..ETH + IP6]).expect("frame fits");
        ip.set_version(6);
        ip.set_payload_length((ND + LLADDR_OPT) as u16);
        ip.set_next_header(IpNextHeaderProtocols::Icmpv6);
        // Neighbour discovery is taken only with 255 (RFC 4861 7.1.1).
        ip.set_hop_limit(255);
        ip.set_source(src);
        ip.set_destination(group);
    }
    let msg = &mut out[ETH + IP6..];
    {
        let mut ns = MutableNeighborSolicitPacket::new(&mut msg[..ND]).expect("frame fits");
        ns.set_icmpv6_type(Icmpv6Types::NeighborSolicit);
        ns.set_target_addr(target);
    }
    // Source link-layer address option: type 1, length 1 (8 bytes), the MAC.
    msg[ND] = 1;
    msg[ND + 1] = 1;
    msg[ND + 2..ND + LLADDR_OPT].copy_from_slice(&mac);
    let c = pnet_packet::icmpv6::checksum(&Icmpv6Packet::new(msg).expect("frame fits"), &src, &group);
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    MAX_REQUEST
}

/// The answer `frame` carries, if it is a well-formed ARP reply or
/// solicited neighbour advertisement; `checksum` says whether the kernel
/// already checked (or could not check) the ICMPv6 checksum.
pub fn parse(frame: &[u8], checksum: Checksum) -> Option<Answer> {
    let eth = EthernetPacket::new(frame)?;
    match eth.get_ethertype() {
        EtherTypes::Arp => parse_arp(&frame[ETH..]),
        EtherTypes::Ipv6 => parse_advert(&frame[ETH..], eth.get_source().into(), checksum),
        _ => None,
    }
}

fn parse_arp(bytes: &[u8]) -> Option<Answer> {
    let arp = ArpPacket::new(bytes.get(..ARP)?)?;
    if arp.get_hardware_type() != ArpHardwareTypes::Ethernet
        || arp.get_protocol_type() != EtherTypes::Ipv4
        || arp.get_hw_addr_len() != 6
        || arp.get_proto_addr_len() != 4
        || arp.get_operation() != ArpOperations::Reply
    {
        return None;
    }
    let mac: [u8; 6] = arp.get_sender_hw_addr().into();
    let (ip, to) = (arp.get_sender_proto_addr(), arp.get_target_proto_addr());
    // A gratuitous reply names its sender as its target: it answers no one.
    (unicast(mac) && ip != to).then_some(Answer { ip: ip.into(), mac, to: to.into() })
}

fn parse_advert(bytes: &[u8], eth_src: [u8; 6], checksum: Checksum) -> Option<Answer> {
    let ip = Ipv6Packet::new(bytes)?;
    let len = usize::from(ip.get_payload_length());
    if ip.get_version() != 6
        || ip.get_next_header() != IpNextHeaderProtocols::Icmpv6
        || ip.get_hop_limit() != 255
        || len < ND
        || IP6 + len > bytes.len()
    {
        return None;
    }
    let msg = &bytes[IP6..IP6 + len];
    let na = NeighborAdvertPacket::new(msg)?;
    if na.get_icmpv6_type() != Icmpv6Types::NeighborAdvert
        || na.get_icmpv6_code().0 != 0
        || na.get_flags() & NeighborAdvertFlags::Solicited == 0
    {
        return None;
    }
    let (src, dst) = (ip.get_source(), ip.get_destination());
    if dst.is_multicast() {
        return None; // a solicited advertisement goes to the one who asked
    }
    if checksum == Checksum::Unchecked
        && pnet_packet::icmpv6::checksum(&Icmpv6Packet::new(msg)?, &src, &dst) != u16::from_be_bytes([msg[2], msg[3]])
    {
        return None;
    }
    // The target link-layer address option, else the frame's sender.
    let mac = target_lladdr(&msg[ND..])?.unwrap_or(eth_src);
    unicast(mac).then_some(Answer { ip: na.get_target_addr().into(), mac, to: dst.into() })
}

/// The target link-layer address option among `opts` (RFC 4861 4.6):
/// `Some(None)` if there is none, `None` if an option is malformed (the
/// advertisement is then dropped, RFC 4861 7.1.2).
fn target_lladdr(mut opts: &[u8]) -> Option<Option<[u8; 6]>> {
    let mut found = None;
    while !opts.is_empty() {
        let (&ty, &units) = (opts.first()?, opts.get(1)?);
        let len = usize::from(units) * 8;
        if len == 0 || len > opts.len() {
            return None;
        }
        if ty == 2 && len == LLADDR_OPT && found.is_none() {
            found = Some(<[u8; 6]>::try_from(&opts[2..8]).ok()?);
        }
        opts = &opts[len..];
    }
    Some(found)
}

#[cfg(test)]
#[path = "neighbour_tests.rs"]
mod tests;
