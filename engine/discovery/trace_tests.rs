//! Traceroute without a network: probes built and read back, ICMP quotes
//! matched, and the [`Tracer`] driven on a simulated clock.

use super::*;
use pnet_packet::ipv4::MutableIpv4Packet;
use pnet_packet::ipv6::MutableIpv6Packet;
use pnet_packet::Packet;

const KEY: Key = Key { id: 0x1234, seq: 0xdead_beef };
const US4: &str = "198.18.0.1";
const US6: &str = "2001:2::1";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn hop_from(src: &str) -> Hop {
    Hop { src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [2, 0, 0, 0, 0, 2], src: ip(src) }
}

fn target(dst: &str, port: u16, proto: Proto) -> TraceTarget {
    TraceTarget { ip: ip(dst), port, proto, open: true, ttl_seen: None }
}

/// A probe frame as `run` builds it.
fn probe(t: &TraceTarget, ttl: u8, token: u16) -> Vec<u8> {
    let mut out = vec![0u8; MAX_UDP_PROBE];
    let us = if t.ip.is_ipv6() { US6 } else { US4 };
    let n = build(&mut out, &Template::new(t.ip.is_ipv6()), &hop_from(us), t, ttl, token, KEY);
    out.truncate(n);
    out
}

/// An ICMP error (`ty`, `code`) from `router` to us quoting `quote` (an
/// IP packet), in an Ethernet frame, checksums right.
fn icmp_error(router: &str, ty: u8, code: u8, quote: &[u8]) -> Vec<u8> {
    let v6 = router.contains(':');
    let mut msg = vec![ty, code, 0, 0, 0, 0, 0, 0];
    msg.extend_from_slice(quote);
    let mut f = vec![0u8; ETH];
    f[12..14].copy_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
    if v6 {
        let mut iph = vec![0u8; IP6];
        {
            let mut p = MutableIpv6Packet::new(&mut iph).unwrap();
            p.set_version(6);
            p.set_payload_length(msg.len() as u16);
            p.set_next_header(IpNextHeaderProtocols::Icmpv6);
            p.set_hop_limit(64);
            p.set_source(router.parse().unwrap());
            p.set_destination(US6.parse().unwrap());
        }
        let c = pnet_packet::icmpv6::checksum(
            &Icmpv6Packet::new(&msg).unwrap(),
            &router.parse().unwrap(),
            &US6.parse().unwrap(),
        );
        msg[2..4].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&iph);
    } else {
        let c = pnet_packet::icmp::checksum(&IcmpPacket::new(&msg).unwrap());
        msg[2..4].copy_from_slice(&c.to_be_bytes());
        let mut iph = vec![0u8; IP4];
        {
            let mut p = MutableIpv4Packet::new(&mut iph).unwrap();
            p.set_version(4);
            p.set_header_length(5);
            p.set_total_length((IP4 + msg.len()) as u16);
            p.set_ttl(63);
            p.set_next_level_protocol(IpNextHeaderProtocols::Icmp);
            p.set_source(router.parse().unwrap());
            p.set_destination(US4.parse().unwrap());
            let c = ipv4::checksum(&p.to_immutable());
            p.set_checksum(c);
        }
        f.extend_from_slice(&iph);
    }
    f.extend_from_slice(&msg);
    f
}

/// The IP packet of a probe frame, cut to what an IPv4 router quotes (the
/// IP header and 8 bytes).
fn quote_of(frame: &[u8], whole: bool) -> Vec<u8> {
    let ip = &frame[ETH..];
    let v6 = ip[0] >> 4 == 6;
    if whole {
        ip.to_vec()
    } else {
        ip[..if v6 { IP6 } else { IP4 } + 8].to_vec()
    }
}

/// A TCP answer from `from` to the probe `p` (its ports turned round),
/// with these flags, acknowledging `ack`.
fn tcp_answer_to(p: &[u8], from: &str, flags: u8, ack: u32, ttl: u8) -> Vec<u8> {
    let sport = u16::from_be_bytes([p[ETH + IP4], p[ETH + IP4 + 1]]);
    let dport = u16::from_be_bytes([p[ETH + IP4 + 2], p[ETH + IP4 + 3]]);
    let mut f = vec![0u8; ETH + IP4 + 20];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    {
        let mut t = pnet_packet::tcp::MutableTcpPacket::new(&mut f[ETH + IP4..]).unwrap();
        t.set_source(dport);
        t.set_destination(sport);
        t.set_data_offset(5);
        t.set_flags(flags);
        t.set_acknowledgement(ack);
        let c = tcp::ipv4_checksum(&t.to_immutable(), &from.parse().unwrap(), &US4.parse().unwrap());
        t.set_checksum(c);
    }
    let mut p4 = MutableIpv4Packet::new(&mut f[ETH..]).unwrap();
    p4.set_version(4);
    p4.set_header_length(5);
    p4.set_total_length((IP4 + 20) as u16);
    p4.set_ttl(ttl);
    p4.set_next_level_protocol(IpNextHeaderProtocols::Tcp);
    p4.set_source(from.parse().unwrap());
    p4.set_destination(US4.parse().unwrap());
    let c = ipv4::checksum(&p4.to_immutable());
    p4.set_checksum(c);
    f
}

#[test]
fn a_tcp_probe_carries_its_ttl_token_and_keyed_sequence() {
    let t = target("198.18.1.2", 443, Proto::Tcp);
    let f = probe(&t, 7, 99);
    let ip4 = Ipv4Packet::new(&f[ETH..]).unwrap();
    assert_eq!(ip4.get_ttl(), 7);
    assert_eq!(ipv4::checksum(&ip4), ip4.get_checksum(), "the header checksum covers the new TTL");
    assert_eq!(ip4.get_destination().to_string(), "198.18.1.2");
    let seg = TcpPacket::new(ip4.payload()).unwrap();
    assert_eq!(seg.get_flags(), TcpFlags::SYN);
    assert_eq!(seg.get_source(), 99 ^ KEY.id);
    assert_eq!(seg.get_destination(), 443);
    assert_eq!(seg.get_sequence(), KEY.seq_of(99));
    assert_eq!(tcp::ipv4_checksum(&seg, &ip4.get_source(), &ip4.get_destination()), seg.get_checksum());
}

#[test]
fn a_udp_and_an_ipv6_probe_carry_their_ttl() {
    let f = probe(&target("198.18.1.2", 53, Proto::Udp), 3, 5);
    let ip4 = Ipv4Packet::new(&f[ETH..]).unwrap();
    assert_eq!((ip4.get_ttl(), ip4.get_identification()), (3, 5));
    assert_eq!(ipv4::checksum(&ip4), ip4.get_checksum());
    let d = UdpPacket::new(ip4.payload()).unwrap();
    assert_eq!((d.get_source(), d.get_destination()), (5 ^ KEY.id, 53));
    let f = probe(&target("2001:2::2", 22, Proto::Tcp), 9, 6);
    let ip6 = Ipv6Packet::new(&f[ETH..]).unwrap();
    assert_eq!(ip6.get_hop_limit(), 9);
    assert_eq!(TcpPacket::new(ip6.payload()).unwrap().get_sequence(), KEY.seq_of(6));
}

#[test]
fn a_v4_time_exceeded_is_matched_by_its_quote() {
    let t = target("198.18.1.2", 22, Proto::Tcp);
    let p = probe(&t, 1, 42);
    let te = icmp_error("198.18.0.2", 11, 0, &quote_of(&p, false));
    let a = parse(&te, Checksum::Unchecked, KEY).expect("ours");
    assert_eq!(
        a,
        Answer { target: ip("198.18.1.2"), token: 42, port: 22, proto: Proto::Tcp, from: ip("198.18.0.2"), ttl: 63 }
    );
    // The whole probe quoted is as good.
    assert_eq!(parse(&icmp_error("198.18.0.2", 11, 0, &quote_of(&p, true)), Checksum::Unchecked, KEY), Some(a));
    // Another run's key, a bad checksum, a cut quote, reassembly time exceeded: not ours.
    assert_eq!(parse(&te, Checksum::Unchecked, Key { seq: 1, ..KEY }), None);
    let mut bad = te.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert_eq!(parse(&bad, Checksum::Unchecked, KEY), None);
    let q = quote_of(&p, false);
    assert_eq!(parse(&icmp_error("198.18.0.2", 11, 0, &q[..IP4 + 4]), Checksum::Unchecked, KEY), None);
    assert_eq!(parse(&icmp_error("198.18.0.2", 11, 1, &q), Checksum::Unchecked, KEY), None);
    // Every truncation of the frame is refused without a panic.
    for n in 0..te.len() {
        assert_eq!(parse(&te[..n], Checksum::Unchecked, KEY), None, "cut at {n}");
    }
}

#[test]
fn a_v6_time_exceeded_and_a_udp_port_unreachable_are_matched() {
    let t = target("2001:2::5", 22, Proto::Tcp);
    let p = probe(&t, 2, 7);
    let te = icmp_error("2001:2::2", 3, 0, &quote_of(&p, true));
    let a = parse(&te, Checksum::Unchecked, KEY).expect("ours");
    assert_eq!((a.target, a.token, a.port, a.from), (ip("2001:2::5"), 7, 22, ip("2001:2::2")));
    assert_eq!(parse(&icmp_error("2001:2::2", 2, 0, &quote_of(&p, true)), Checksum::Unchecked, KEY), None);
    for n in 0..te.len() {
        assert_eq!(parse(&te[..n], Checksum::Unchecked, KEY), None, "cut at {n}");
    }
    // UDP: the target's port unreachable, known by the token in the IP id.
    let t = target("198.18.1.2", 53, Proto::Udp);
    let p = probe(&t, 2, 8);
    let pu = icmp_error("198.18.1.2", 3, 3, &quote_of(&p, false));
    let a = parse(&pu, Checksum::Unchecked, KEY).expect("ours");
    assert_eq!((a.target, a.token, a.port, a.proto, a.from), (t.ip, 8, 53, Proto::Udp, t.ip));
    let mut q = quote_of(&p, false);
    q[5] ^= 1; // another IP id
    assert_eq!(parse(&icmp_error("198.18.1.2", 3, 3, &q), Checksum::Unchecked, KEY), None);
}

#[test]
fn the_targets_syn_ack_or_rst_ends_the_trace_only_if_it_acknowledges_the_probe() {
    let t = target("198.18.1.2", 22, Proto::Tcp);
    let p = probe(&t, 2, 9);
    let ack = KEY.seq_of(9).wrapping_add(1);
    for flags in [TcpFlags::SYN | TcpFlags::ACK, TcpFlags::RST | TcpFlags::ACK] {
        let a = parse(&tcp_answer_to(&p, "198.18.1.2", flags, ack, 63), Checksum::Unchecked, KEY).expect("ours");
        assert_eq!((a.target, a.from, a.token, a.port, a.ttl), (t.ip, t.ip, 9, 22, 63));
    }
    let wrong = tcp_answer_to(&p, "198.18.1.2", TcpFlags::SYN | TcpFlags::ACK, ack + 1, 63);
    assert_eq!(parse(&wrong, Checksum::Unchecked, KEY), None);
    let bare_syn = tcp_answer_to(&p, "198.18.1.2", TcpFlags::SYN, ack, 63);
    assert_eq!(parse(&bare_syn, Checksum::Unchecked, KEY), None);
}

#[test]
fn hostile_frames_are_refused_without_a_panic() {
    let p4 = probe(&target("198.18.1.2", 22, Proto::Tcp), 1, 42);
    let p6 = probe(&target("2001:2::5", 53, Proto::Udp), 1, 43);
    let frames = [
        icmp_error("198.18.0.2", 11, 0, &quote_of(&p4, true)),
        icmp_error("2001:2::2", 3, 0, &quote_of(&p6, true)),
        tcp_answer_to(&p4, "198.18.1.2", TcpFlags::RST | TcpFlags::ACK, KEY.seq_of(42).wrapping_add(1), 63),
    ];
    for f in frames {
        for at in 0..f.len() {
            for v in [0x00, 0x01, 0x0f, 0x45, 0x60, 0x7f, 0x80, 0xff] {
                let mut g = f.clone();
                g[at] = v;
                let _ = parse(&g, Checksum::Unchecked, KEY);
                let _ = parse(&g, Checksum::Valid, KEY);
            }
        }
    }
}

// The machine, on a simulated clock.

const T: Duration = Duration::from_millis(100);

fn tracer(targets: &[TraceTarget]) -> Tracer {
    Tracer::new(targets, |_| false, |_| false, T)
}

/// A network: for each target, the routers at TTL 1, 2, ... (`None` a
/// silent one) and the TTL at which the target answers (with TTL 64 minus
/// the hops), or never.
struct Net {
    paths: Vec<(Vec<Option<&'static str>>, Option<u8>)>,
}

impl Net {
    fn reply(&self, targets: &[TraceTarget], s: &Due) -> Option<Answer> {
        let t = &targets[s.host];
        let (routers, dist) = &self.paths[s.host];
        let base = Answer { target: t.ip, token: s.token, port: t.port, proto: t.proto, from: t.ip, ttl: 0 };
        match *dist {
            Some(d) if s.ttl >= d => Some(Answer { ttl: 64 - (d - 1), ..base }),
            _ => {
                let r = routers.get(usize::from(s.ttl) - 1).copied().flatten()?;
                Some(Answer { from: ip(r), ttl: 64, ..base })
            }
        }
    }

    /// Runs `m` to the end (every answer 1 ms after its probe, at most
    /// `rounds` steps of 1 ms); returns the probes sent and checks the bounds.
    fn drive(&self, m: &mut Tracer, targets: &[TraceTarget], rounds: usize) -> Vec<Due> {
        let start = Instant::now();
        let mut all = Vec::new();
        let mut due: Vec<(Instant, Answer)> = Vec::new();
        for step in 0..rounds {
            let now = start + Duration::from_millis(step as u64);
            for (_, a) in due.iter().filter(|(at, _)| *at <= now) {
                m.answer(a, now);
            }
            due.retain(|(at, _)| *at > now);
            if m.is_done() {
                return all;
            }
            let mut out = Vec::new();
            m.poll(now, &mut out);
            assert!(m.in_flight() <= MAX_IN_FLIGHT, "{} in flight", m.in_flight());
            for s in &out {
                assert!((1..=MAX_TTL).contains(&s.ttl), "TTL {}", s.ttl);
                if let Some(a) = self.reply(targets, s) {
                    due.push((now + Duration::from_millis(1), a));
                }
            }
            all.extend(out);
        }
        panic!("not done after {rounds} steps");
    }
}

fn addrs(r: &TraceResult) -> Vec<Option<String>> {
    r.hops.iter().map(|h| h.ip.map(|i| i.to_string())).collect()
}

#[test]
fn a_host_at_a_known_distance_is_probed_down_from_it_all_at_once() {
    let mut t = target("10.9.9.9", 443, Proto::Tcp);
    t.ttl_seen = Some(60); // 5 hops
    let targets = [t];
    let net =
        Net { paths: vec![(vec![Some("10.0.0.1"), Some("10.0.0.2"), Some("10.0.0.3"), Some("10.0.0.4")], Some(5))] };
    let mut m = tracer(&targets);
    let mut first = Vec::new();
    m.poll(Instant::now(), &mut first);
    let ttls: Vec<u8> = first.iter().map(|s| s.ttl).collect();
    // Down from the distance, then up past it, until the window is full.
    assert_eq!(ttls, [5, 4, 3, 2, 1, 6, 7, 8, 9, 10]);
    let mut m = tracer(&targets);
    let sent = net.drive(&mut m, &targets, 1000);
    let r = &m.results()[0];
    assert_eq!(
        addrs(r),
        ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.9.9.9"].map(|s| Some(s.to_string())).to_vec()
    );
    assert!(r.hops.iter().all(|h| h.rtt_ms.is_some_and(|ms| (0.9..1.1).contains(&ms))));
    assert_eq!(r.same_as, None);
    assert!(sent.len() <= 10, "{} probes", sent.len());
}

#[test]
fn without_a_distance_it_starts_at_10_and_jumps_to_the_targets_guess() {
    let targets = [target("10.9.9.9", 80, Proto::Tcp)];
    let net = Net { paths: vec![(vec![Some("10.0.0.1"), Some("10.0.0.2")], Some(3))] };
    let mut m = tracer(&targets);
    net.drive(&mut m, &targets, 1000);
    let r = &m.results()[0];
    assert_eq!(addrs(r).len(), 3, "hops past the target are trimmed: {r:?}");
    assert_eq!(r.hops[2].ip, Some(ip("10.9.9.9")));
}

#[test]
fn hosts_behind_the_same_route_share_its_hops() {
    let mut a = target("10.1.0.9", 22, Proto::Tcp);
    let mut b = target("10.2.0.9", 22, Proto::Tcp);
    a.ttl_seen = Some(60);
    b.ttl_seen = Some(59);
    let targets = [a, b];
    let common = [Some("10.0.0.1"), Some("10.0.0.2"), Some("10.0.0.3")];
    let net = Net {
        paths: vec![
            (common.iter().copied().chain([Some("10.1.0.1")]).collect(), Some(5)),
            (common.iter().copied().chain([Some("10.2.0.1"), Some("10.2.0.2")]).collect(), Some(6)),
        ],
    };
    let mut m = tracer(&targets);
    net.drive(&mut m, &targets, 1000);
    let r = m.results();
    assert_eq!(r[0].same_as, None);
    assert_eq!(addrs(&r[0]).len(), 5);
    // The second host met 10.0.0.3 at TTL 3 after the first had: it
    // follows the first's trace up to there.
    assert_eq!(r[1].same_as, Some((ip("10.1.0.9"), 3)));
    assert_eq!(
        addrs(&r[1]),
        ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.2.0.1", "10.2.0.2", "10.2.0.9"].map(|s| Some(s.to_string())).to_vec()
    );
}

#[test]
fn a_host_listed_twice_is_not_the_same_as_itself() {
    let targets = [target("10.1.0.9", 22, Proto::Tcp), target("10.1.0.9", 22, Proto::Tcp)];
    let path = (vec![Some("10.0.0.1")], Some(2));
    let net = Net { paths: vec![path.clone(), path] };
    let mut m = tracer(&targets);
    net.drive(&mut m, &targets, 1000);
    let r = m.results();
    assert_eq!(r[1].same_as, None);
    assert_eq!(addrs(&r[0]), addrs(&r[1]));
}

#[test]
fn silent_hops_are_tried_three_times_and_kept_as_silence() {
    let mut t = target("10.9.9.9", 22, Proto::Tcp);
    t.ttl_seen = Some(61); // 4 hops
    let targets = [t];
    let net = Net { paths: vec![(vec![Some("10.0.0.1"), None, None], Some(4))] };
    let mut m = tracer(&targets);
    let sent = net.drive(&mut m, &targets, 10_000);
    let r = &m.results()[0];
    assert_eq!(addrs(r), [Some("10.0.0.1".into()), None, None, Some("10.9.9.9".into())]);
    for ttl in [2, 3] {
        assert_eq!(sent.iter().filter(|s| s.ttl == ttl).count(), 1 + usize::from(MAX_RESENDS));
    }
}

#[test]
fn a_silent_target_is_traced_to_max_ttl_and_no_further() {
    let targets = [target("10.9.9.9", 22, Proto::Tcp)];
    let net = Net { paths: vec![(vec![Some("10.0.0.1")], None)] };
    let mut m = tracer(&targets);
    let sent = net.drive(&mut m, &targets, 100_000);
    let r = &m.results()[0];
    assert_eq!(r.hops.len(), usize::from(MAX_TTL));
    assert_eq!(r.hops.last().map(|h| h.ttl), Some(MAX_TTL));
    assert!(sent.iter().all(|s| s.ttl <= MAX_TTL));
    assert!(sent.len() <= usize::from(MAX_TTL) * (1 + usize::from(MAX_RESENDS)));
}

#[test]
fn many_hosts_keep_to_the_window_and_all_finish() {
    let targets: Vec<TraceTarget> = (0..25).map(|i| target(&format!("10.3.0.{i}"), 80, Proto::Tcp)).collect();
    let net = Net {
        paths: (0..25)
            .map(|i| (vec![Some("10.0.0.1"), if i % 2 == 0 { Some("10.0.0.2") } else { None }], Some(3)))
            .collect(),
    };
    let mut m = tracer(&targets);
    net.drive(&mut m, &targets, 100_000);
    for r in m.results() {
        assert_eq!(r.hops.len(), 3, "{r:?}");
        assert_eq!(r.hops[2].ip, Some(r.ip));
    }
}

#[test]
fn answers_that_match_no_probe_change_nothing() {
    let targets = [target("10.9.9.9", 22, Proto::Tcp)];
    let mut m = tracer(&targets);
    let now = Instant::now();
    let mut out = Vec::new();
    m.poll(now, &mut out);
    let s = out[0];
    let good =
        Answer { target: ip("10.9.9.9"), token: s.token, port: 22, proto: Proto::Tcp, from: ip("10.0.0.1"), ttl: 64 };
    assert!(!m.answer(&Answer { token: s.token.wrapping_add(1000), ..good }, now));
    assert!(!m.answer(&Answer { port: 23, ..good }, now));
    assert!(!m.answer(&Answer { proto: Proto::Udp, ..good }, now));
    assert!(!m.answer(&Answer { target: ip("10.9.9.8"), ..good }, now));
    assert!(m.answer(&good, now));
    assert!(!m.answer(&good, now), "answered once");
}

#[test]
fn a_stop_ends_the_trace_with_what_was_found() {
    let targets = [target("10.9.9.9", 22, Proto::Tcp)];
    let mut m = tracer(&targets);
    let now = Instant::now();
    let mut out = Vec::new();
    m.poll(now, &mut out);
    let s = out.iter().find(|s| s.ttl == 1).copied().unwrap();
    m.answer(
        &Answer { target: ip("10.9.9.9"), token: s.token, port: 22, proto: Proto::Tcp, from: ip("10.0.0.1"), ttl: 64 },
        now,
    );
    m.stop();
    assert!(m.is_done());
    out.clear();
    m.poll(now + T * 10, &mut out);
    assert!(out.is_empty());
    assert_eq!(m.results()[0].hops[0].ip, Some(ip("10.0.0.1")));
}

#[test]
fn direct_and_skipped_targets() {
    let targets = [target("198.18.0.2", 22, Proto::Tcp), target("127.0.0.1", 22, Proto::Tcp)];
    let mut m = Tracer::new(&targets, |i| i == 0, |i| i == 1, T);
    let now = Instant::now();
    let mut out = Vec::new();
    m.poll(now, &mut out);
    assert_eq!(out.iter().map(|s| (s.host, s.ttl)).collect::<Vec<_>>(), [(0, 1)]);
    let a = Answer {
        target: targets[0].ip,
        token: out[0].token,
        port: 22,
        proto: Proto::Tcp,
        from: targets[0].ip,
        ttl: 64,
    };
    m.answer(&a, now + Duration::from_micros(40));
    assert!(m.is_done());
    let r = m.results();
    assert_eq!((r[0].port, addrs(&r[0])), (0, vec![Some("198.18.0.2".to_string())]));
    assert!(r[1].hops.is_empty());
}
