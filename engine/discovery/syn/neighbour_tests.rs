//! Tests of neighbour.rs: requests built byte for byte, answers built as
//! a target's kernel would and parsed back, and every look-alike that is
//! no answer to us refused.

use super::*;

const OURS: [u8; 6] = [2, 0, 0, 0, 0, 1];
const THEIRS: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn hop(src: &str) -> Hop {
    Hop { src_mac: OURS, dst_mac: [0; 6], src: src.parse().unwrap() }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// An ARP frame of `op` from `sender` (with `mac`) to `target`.
fn arp(op: u16, mac: [u8; 6], sender: &str, target: &str) -> Vec<u8> {
    let mut f = vec![0u8; MIN_FRAME];
    f[..6].copy_from_slice(&OURS);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    let IpAddr::V4(s) = ip(sender) else { panic!() };
    let IpAddr::V4(t) = ip(target) else { panic!() };
    let mut a = MutableArpPacket::new(&mut f[ETH..ETH + ARP]).unwrap();
    a.set_hardware_type(ArpHardwareTypes::Ethernet);
    a.set_protocol_type(EtherTypes::Ipv4);
    a.set_hw_addr_len(6);
    a.set_proto_addr_len(4);
    a.set_operation(pnet_packet::arp::ArpOperation(op));
    a.set_sender_hw_addr(mac.into());
    a.set_sender_proto_addr(s);
    a.set_target_hw_addr(OURS.into());
    a.set_target_proto_addr(t);
    f
}

/// A neighbour advertisement of `target` from `from` to `to`, with these
/// flags, hop limit and options, its checksum right.
fn advert(target: &str, from: &str, to: &str, flags: u8, hops: u8, opts: &[u8]) -> Vec<u8> {
    let (IpAddr::V6(t), IpAddr::V6(s), IpAddr::V6(d)) = (ip(target), ip(from), ip(to)) else { panic!() };
    let len = ND + opts.len();
    let mut f = vec![0u8; ETH + IP6 + len];
    f[..6].copy_from_slice(&OURS);
    f[6..12].copy_from_slice(&THEIRS);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    {
        let mut p = MutableIpv6Packet::new(&mut f[ETH..ETH + IP6]).unwrap();
        p.set_version(6);
        p.set_payload_length(len as u16);
        p.set_next_header(IpNextHeaderProtocols::Icmpv6);
        p.set_hop_limit(hops);
        p.set_source(s);
        p.set_destination(d);
    }
    let msg = &mut f[ETH + IP6..];
    msg[0] = 136;
    msg[4] = flags;
    msg[8..24].copy_from_slice(&t.octets());
    msg[ND..].copy_from_slice(opts);
    let c = pnet_packet::icmpv6::checksum(&Icmpv6Packet::new(msg).unwrap(), &s, &d);
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    f
}

const TLLA: [u8; 8] = [2, 1, 2, 0, 0, 0, 0, 9];
const SOLICITED: u8 = NeighborAdvertFlags::Solicited | NeighborAdvertFlags::Override;

#[test]
fn an_arp_request_is_a_broadcast_who_has_from_our_address() {
    let mut f = [0u8; MAX_REQUEST];
    let n = fill_request(&mut f, &hop("198.18.0.1"), ip("198.18.0.77"));
    assert_eq!(n, 60, "padded to Ethernet's shortest frame");
    #[rustfmt::skip]
    let want: [u8; 42] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06,
        0, 1, 0x08, 0x00, 6, 4, 0, 1,
        2, 0, 0, 0, 0, 1, 198, 18, 0, 1,
        0, 0, 0, 0, 0, 0, 198, 18, 0, 77,
    ];
    assert_eq!(f[..42], want);
    assert!(f[42..n].iter().all(|&b| b == 0));
    // Our own request is no answer (were it delivered back to us).
    assert_eq!(parse(&f[..n], Checksum::Unchecked), None);
    assert_eq!(fill_request(&mut f, &hop("198.18.0.1"), ip("2001:2::2")), 0, "two families");
}

#[test]
fn a_neighbour_solicitation_goes_to_the_solicited_node_group_with_our_mac() {
    let mut f = [0u8; MAX_REQUEST];
    let n = fill_request(&mut f, &hop("2001:2::1"), ip("2001:2::ab:cdef"));
    assert_eq!(n, MAX_REQUEST);
    assert_eq!(f[..6], [0x33, 0x33, 0xff, 0xab, 0xcd, 0xef]);
    assert_eq!(f[6..12], OURS);
    let p = Ipv6Packet::new(&f[ETH..n]).unwrap();
    assert_eq!((p.get_version(), p.get_hop_limit(), p.get_next_header()), (6, 255, IpNextHeaderProtocols::Icmpv6));
    assert_eq!(usize::from(p.get_payload_length()), ND + LLADDR_OPT);
    assert_eq!(p.get_source(), "2001:2::1".parse::<Ipv6Addr>().unwrap());
    assert_eq!(p.get_destination(), "ff02::1:ffab:cdef".parse::<Ipv6Addr>().unwrap());
    let msg = &f[ETH + IP6..n];
    assert_eq!((msg[0], msg[1]), (135, 0));
    assert_eq!(msg[8..24], "2001:2::ab:cdef".parse::<Ipv6Addr>().unwrap().octets());
    assert_eq!(msg[ND..], [1, 1, 2, 0, 0, 0, 0, 1], "source link-layer address option");
    let c = pnet_packet::icmpv6::checksum(&Icmpv6Packet::new(msg).unwrap(), &p.get_source(), &p.get_destination());
    assert_eq!(u16::from_be_bytes([msg[2], msg[3]]), c);
    assert_eq!(parse(&f[..n], Checksum::Unchecked), None, "a solicitation is no answer");
}

#[test]
fn arp_replies_to_our_address_are_answers_and_look_alikes_are_not() {
    let us = hop("198.18.0.1");
    let a = parse(&arp(2, THEIRS, "198.18.0.2", "198.18.0.1"), Checksum::Unchecked).unwrap();
    assert_eq!(a, Answer { ip: ip("198.18.0.2"), mac: THEIRS, to: ip("198.18.0.1") });
    assert!(a.answers(&us));
    // Whom it answers decides: another source (or family) asked, not us.
    assert!(!a.answers(&hop("198.18.0.9")));
    assert!(!a.answers(&hop("2001:2::1")));
    let refused = [
        ("a request (the forged ones that plant STALE entries)", arp(1, THEIRS, "198.18.0.77", "198.18.0.1")),
        ("a gratuitous reply", arp(2, THEIRS, "198.18.0.77", "198.18.0.77")),
        ("a zero MAC", arp(2, [0; 6], "198.18.0.2", "198.18.0.1")),
        ("a multicast MAC", arp(2, [1, 0, 0x5e, 0, 0, 1], "198.18.0.2", "198.18.0.1")),
        ("another operation", arp(4, THEIRS, "198.18.0.2", "198.18.0.1")),
    ];
    for (what, f) in refused {
        assert_eq!(parse(&f, Checksum::Unchecked), None, "{what}");
    }
    let mut f = arp(2, THEIRS, "198.18.0.2", "198.18.0.1");
    f[ETH + 5] = 16; // protocol address length
    assert_eq!(parse(&f, Checksum::Unchecked), None, "not IPv4 over Ethernet");
    // A reply without padding (42 bytes) is one; shorter is not.
    assert!(parse(&f[..ETH + ARP], Checksum::Unchecked).is_none());
    let f = arp(2, THEIRS, "198.18.0.2", "198.18.0.1");
    assert!(parse(&f[..ETH + ARP], Checksum::Unchecked).is_some());
    assert!(parse(&f[..ETH + ARP - 1], Checksum::Unchecked).is_none());
}

#[test]
fn solicited_advertisements_are_answers_and_look_alikes_are_not() {
    let us = hop("2001:2::1");
    let f = advert("2001:2::2", "2001:2::2", "2001:2::1", SOLICITED, 255, &TLLA);
    let a = parse(&f, Checksum::Unchecked).unwrap();
    assert_eq!(a, Answer { ip: ip("2001:2::2"), mac: [2, 0, 0, 0, 0, 9], to: ip("2001:2::1") });
    assert!(a.answers(&us) && !a.answers(&hop("2001:2::5")));
    // Without the option, the frame's sender's MAC; the option wins over it.
    let f = advert("2001:2::2", "fe80::2", "2001:2::1", SOLICITED, 255, &[]);
    assert_eq!(parse(&f, Checksum::Unchecked).unwrap().mac, THEIRS);
    let refused = [
        ("unsolicited", advert("2001:2::77", "2001:2::77", "2001:2::1", NeighborAdvertFlags::Override, 255, &TLLA)),
        ("to a group", advert("2001:2::77", "2001:2::77", "ff02::1", SOLICITED, 255, &TLLA)),
        ("routed (hop limit below 255)", advert("2001:2::2", "2001:2::2", "2001:2::1", SOLICITED, 64, &TLLA)),
        ("an option of length 0", advert("2001:2::2", "2001:2::2", "2001:2::1", SOLICITED, 255, &[2, 0, 0, 0])),
        ("an option past the end", advert("2001:2::2", "2001:2::2", "2001:2::1", SOLICITED, 255, &[2, 2, 1, 2])),
        ("a multicast MAC", advert("2001:2::2", "2001:2::2", "2001:2::1", SOLICITED, 255, &[2, 1, 1, 0, 0, 0, 0, 1])),
    ];
    for (what, f) in refused {
        assert_eq!(parse(&f, Checksum::Unchecked), None, "{what}");
    }
    // A wrong checksum is refused unless the kernel vouched for it.
    let mut f = advert("2001:2::2", "2001:2::2", "2001:2::1", SOLICITED, 255, &TLLA);
    f[ETH + IP6 + 2] ^= 1;
    assert_eq!(parse(&f, Checksum::Unchecked), None);
    assert!(parse(&f, Checksum::Valid).is_some());
    // An echo reply or any other ICMPv6 is not one.
    let mut f = advert("2001:2::2", "2001:2::2", "2001:2::1", SOLICITED, 255, &TLLA);
    f[ETH + IP6] = 129;
    assert_eq!(parse(&f, Checksum::Valid), None);
}

#[test]
fn the_parser_never_panics() {
    let good = [
        arp(2, THEIRS, "198.18.0.2", "198.18.0.1"),
        advert(
            "2001:2::2",
            "2001:2::2",
            "2001:2::1",
            SOLICITED,
            255,
            &[2, 1, 8, 9, 9, 9, 9, 9, 1, 1, 0, 0, 0, 0, 0, 0],
        ),
    ];
    for f in &good {
        assert!(parse(f, Checksum::Unchecked).is_some());
        for cut in 0..f.len() {
            let _ = parse(&f[..cut], Checksum::Unchecked);
        }
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for i in 0..50_000 {
        let mut f = good[i % 2].clone();
        for _ in 0..1 + rand() % 4 {
            let at = (rand() as usize) % f.len();
            f[at] = rand() as u8;
        }
        let cut = f.len() - (rand() as usize % 8).min(f.len());
        // The fuzz target's entry: parsed both ways, judged for both families.
        crate::fuzz::neighbour_reply(&f[..cut]);
    }
}
