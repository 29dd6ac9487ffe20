//! Tests of cookie.rs: which replies a probe's cookie takes, for every
//! scan type; and the replies the machine's tests feed it.

use super::*;
use pnet_packet::tcp::TcpFlags;

/// The scanner's address in these tests.
pub(crate) const SRC: &str = "198.18.0.1";

/// A SYN-ACK (or RST) from `ip:port`, sequence and ack 1, TTL 63.
pub(crate) fn reply(ip: IpAddr, port: u16, open: bool) -> Reply {
    let flags = if open { TcpFlags::SYN | TcpFlags::ACK } else { TcpFlags::RST | TcpFlags::ACK };
    Reply {
        proto: Proto::Tcp,
        mask: 0,
        data: (0, 0),
        src: ip,
        dst: SRC.parse().unwrap(),
        sport: port,
        dport: 0,
        seq: 1,
        ack: 1,
        flags,
        ttl: 63,
        window: 0,
        icmp: None,
        relayed: false,
        attempt: 0,
    }
}

/// The reply a target would send to the probe for `ip:port`.
fn answer(c: &Cookie, ip: IpAddr, port: u16, open: bool) -> Reply {
    let (seq, sport) = c.probe(SRC.parse().unwrap(), ip, port, 0);
    Reply { dport: sport, seq: 5, ack: seq.wrapping_add(1), ttl: 64, ..reply(ip, port, open) }
}

#[test]
fn cookie_accepts_only_its_own_replies() {
    let c = Cookie::new(1, 2, 1);
    let ip: IpAddr = "198.18.0.2".parse().unwrap();
    let good = answer(&c, ip, 22, true);
    assert_eq!(c.accepts(&good), Some(0));
    assert_eq!(c.accepts(&answer(&c, ip, 22, false)), Some(0));
    assert_eq!(Cookie::new(1, 3, 1).accepts(&good), None, "another key");
    assert_eq!(c.accepts(&Reply { ack: good.ack.wrapping_add(1), ..good }), None, "wrong ack");
    assert_eq!(c.accepts(&Reply { dport: good.dport - 1, ..good }), None, "wrong port");
    // The try a probe was moves its port: an answer says which try it answers.
    let src: IpAddr = SRC.parse().unwrap();
    for attempt in [0u8, 1, 2, 7] {
        let (_, sport) = c.probe_try(src, ip, 22, 0, attempt);
        assert_eq!(c.accepts_try(&Reply { dport: sport, ..good }), Some((0, attempt)));
    }
    let (_, ninth) = c.probe_try(src, ip, 22, 0, 7);
    assert_eq!(c.accepts_try(&Reply { dport: ninth + 1, ..good }), None, "no ninth try: not ours");
    assert_eq!(c.accepts(&Reply { sport: 23, ..good }), None, "answer for another port");
    assert_eq!(c.accepts(&Reply { flags: TcpFlags::ACK, ..good }), None, "a bare ACK");
    assert_eq!(c.accepts(&Reply { dport: 80, ..good }), None, "a port below ours");
}

#[test]
fn cookie_routes_replies_to_the_worker_that_sent_the_probe() {
    let c = Cookie::new(5, 6, 3);
    let (src, ip): (IpAddr, IpAddr) = (SRC.parse().unwrap(), "198.19.0.9".parse().unwrap());
    for worker in 0..3 {
        for port in [1, 80, 65535] {
            let (seq, sport) = c.probe(src, ip, port, worker);
            assert!(sport >= SPORT_BASE);
            let mut r = answer(&c, ip, port, true);
            r.dport = sport;
            r.ack = seq.wrapping_add(1);
            assert_eq!(c.accepts(&r), Some(worker));
        }
    }
}

/// A RST from `ip:port` to our port `dport`, sequence and ack 0.
pub(crate) fn bare_rst(ip: IpAddr, port: u16, dport: u16) -> Reply {
    Reply { dport, seq: 0, ack: 0, flags: TcpFlags::RST, ttl: 64, ..reply(ip, port, false) }
}

/// What a RFC 793 target sends back to each kind of probe, and whether
/// the cookie takes it: a RST's sequence is the probe's ACK number when
/// the probe had ACK set, else its acknowledgement is the probe's
/// sequence plus the FIN; an ICMP error quotes the probe's sequence.
#[test]
fn cookies_of_every_scan_type_take_their_own_replies_only() {
    let ip: IpAddr = "198.18.0.2".parse().unwrap();
    let src: IpAddr = SRC.parse().unwrap();
    for kind in [ScanType::Ack, ScanType::Window, ScanType::Maimon, ScanType::Fin, ScanType::Xmas, ScanType::Null] {
        let c = Cookie::new(3, 4, 1).for_scan(kind);
        let (seq, sport) = c.probe(src, ip, 80, 0);
        let base = bare_rst(ip, 80, sport);
        let rst = match kind {
            ScanType::Ack | ScanType::Window | ScanType::Maimon => Reply { seq, ..base },
            ScanType::Null => Reply { ack: seq, flags: TcpFlags::RST | TcpFlags::ACK, ..base },
            _ => Reply { ack: seq.wrapping_add(1), flags: TcpFlags::RST | TcpFlags::ACK, ..base },
        };
        assert_eq!(c.accepts(&rst), Some(0), "{kind:?}");
        assert_eq!(c.accepts(&Reply { seq: rst.seq ^ 1, ack: rst.ack ^ 1, ..rst }), None, "{kind:?} wrong cookie");
        assert_eq!(c.accepts(&Reply { flags: TcpFlags::ACK, ..rst }), None, "{kind:?} not a RST");
        assert_eq!(Cookie::new(3, 5, 1).for_scan(kind).accepts(&rst), None, "{kind:?} another key");
        let icmp = Reply { seq, flags: 0, icmp: Some(Reason::AdminProhibited), ..base };
        assert_eq!(c.accepts(&icmp), Some(0), "{kind:?} ICMP");
        assert_eq!(c.accepts(&Reply { seq: seq ^ 1, ..icmp }), None, "{kind:?} ICMP for another probe");
    }
    // A SYN scan's ICMP errors too.
    let c = Cookie::new(3, 4, 1);
    let (seq, sport) = c.probe(src, ip, 81, 0);
    let icmp = Reply { seq, flags: 0, icmp: Some(Reason::PortUnreach), ..bare_rst(ip, 81, sport) };
    assert_eq!(c.accepts(&icmp), Some(0));
}

/// A UDP answer is ours when it comes back to the keyed source port with
/// the keyed transaction id (where the protocol echoes one); an ICMP
/// error quoting a UDP probe, when it quotes the probe's IP id. TCP
/// segments never answer a UDP scan, nor UDP datagrams a TCP one.
#[test]
fn udp_cookies_check_the_port_the_echoed_id_and_the_quoted_ip_id() {
    let ip: IpAddr = "198.18.0.2".parse().unwrap();
    let src: IpAddr = SRC.parse().unwrap();
    let c = Cookie::new(7, 8, 2).for_scan(ScanType::Udp);
    let (seq, sport) = c.probe(src, ip, 53, 1);
    let base = Reply { proto: Proto::Udp, flags: 0, ..bare_rst(ip, 53, sport) };
    // No id echoed (the port's protocol has none): the port decides.
    assert_eq!(c.accepts(&base), Some(1));
    assert_eq!(c.accepts(&Reply { dport: sport - 2, ..base }), None, "another source port");
    assert_eq!(Cookie::new(7, 9, 2).for_scan(ScanType::Udp).accepts(&base), None, "another key");
    // A 2-byte id echoed.
    let echoed = Reply { seq: seq & 0xffff, mask: 0xffff, ..base };
    assert_eq!(c.accepts(&echoed), Some(1));
    assert_eq!(c.accepts(&Reply { seq: (seq ^ 1) & 0xffff, ..echoed }), None, "a wrong id");
    // ICMP quoting the probe: its IP id is the cookie's low 16 bits.
    let icmp = Reply { seq: u32::from(seq as u16), icmp: Some(Reason::PortUnreach), ..base };
    assert_eq!(c.accepts(&icmp), Some(1));
    assert_eq!(c.accepts(&Reply { seq: u32::from(seq as u16 ^ 1), ..icmp }), None, "quotes another probe");
    // Protocols do not cross.
    assert_eq!(c.accepts(&Reply { proto: Proto::Tcp, ..icmp }), None, "ICMP quoting TCP");
    let syn = Cookie::new(7, 8, 2);
    let (tseq, tsport) = syn.probe(src, ip, 53, 1);
    let tcp_icmp = Reply { seq: tseq, icmp: Some(Reason::PortUnreach), ..bare_rst(ip, 53, tsport) };
    assert_eq!(syn.accepts(&tcp_icmp), Some(1));
    assert_eq!(syn.accepts(&Reply { proto: Proto::Udp, ..tcp_icmp }), None, "ICMP quoting UDP");
}
