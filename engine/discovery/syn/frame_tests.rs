//! Tests of frame.rs and reply.rs: probes built, answered as a target
//! would, and parsed back.

use super::*;
use crate::discovery::syn::reply::parse;
use crate::findings::{Proto, Reason};
use crate::raw::packet::Checksum;
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
    for flags in
        [TcpFlags::FIN, 0, TcpFlags::FIN | TcpFlags::PSH | TcpFlags::URG, TcpFlags::ACK, TcpFlags::FIN | TcpFlags::ACK]
    {
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
        let n =
            Template::new(hop.src.is_ipv6()).fill(&mut out, &hop, dst.parse().unwrap(), 61_007, 443, 0xfeed_f00d, 3);
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
