//! Tests of compute.rs: each of nmap's tests on crafted replies.

use super::*;
use crate::os::probes::{build, MAX_PACKET};
use std::net::Ipv4Addr;

fn params() -> Params {
    Params {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 2),
        open: 22,
        closed: 1,
        closed_udp: 40000,
        sport: 50000,
        seq: 1000,
        ack: 5000,
        ip_id: 0x100,
        icmp_id: 0x7000,
        ttl: 60,
    }
}

fn ipv4(proto: u8, ttl: u8, id: u16, df: bool, l4: &[u8]) -> Vec<u8> {
    let mut p = vec![0x45, 0, 0, 0, 0, 0, if df { 0x40 } else { 0 }, 0, ttl, proto, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1];
    p[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    p[4..6].copy_from_slice(&id.to_be_bytes());
    p.extend_from_slice(l4);
    p
}

#[derive(Clone)]
struct Seg {
    flags: u8,
    seq: u32,
    ack: u32,
    win: u16,
    opts: Vec<u8>,
    x2: u8,
    urp: u16,
    data: Vec<u8>,
}

fn seg() -> Seg {
    Seg { flags: SYN | ACK, seq: 0xABCD, ack: 1001, win: 0xFAF0, opts: vec![], x2: 0, urp: 0, data: vec![] }
}

fn tcp_bytes(s: &Seg) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&22u16.to_be_bytes());
    t[4..8].copy_from_slice(&s.seq.to_be_bytes());
    t[8..12].copy_from_slice(&s.ack.to_be_bytes());
    t[12] = (((20 + s.opts.len()) / 4) as u8) << 4 | s.x2;
    t[13] = s.flags;
    t[14..16].copy_from_slice(&s.win.to_be_bytes());
    t[18..20].copy_from_slice(&s.urp.to_be_bytes());
    t.extend_from_slice(&s.opts);
    t.extend_from_slice(&s.data);
    t
}

/// Linux's SYN-ACK options: MSS 1460, SACK, TS(val, ecr), NOP, WS 7.
fn linux_opts(ts: u32) -> Vec<u8> {
    let mut o = vec![2, 4, 5, 0xB4, 4, 2, 8, 10];
    o.extend_from_slice(&ts.to_be_bytes());
    o.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF, 1, 3, 3, 7]);
    o
}

fn sent(p: Probe) -> Vec<u8> {
    let mut b = [0u8; MAX_PACKET];
    let n = build(p, &params(), &mut b);
    b[..n].to_vec()
}

fn put(r: &mut Replies, p: Probe, at_ms: u64, reply: Option<Vec<u8>>) {
    let sent_at = Duration::from_millis(at_ms);
    let reply_at = reply.as_ref().map(|_| sent_at + Duration::from_millis(1));
    r.of.insert(p, Exchange { sent: sent(p), sent_at, reply, reply_at });
}

fn tcp_of(r: &Replies, p: Probe) -> String {
    let (_, t) = tcp_reply(r, p).expect("reply");
    options(&t)
}

/// A Linux-like host: ISNs, IP ids and timestamps as given.
fn host(isns: [u32; 6], ids: [u16; 6], stamps: [u32; 6]) -> Replies {
    let mut r = Replies::default();
    for i in 0..6u8 {
        let s = Seg {
            seq: isns[usize::from(i)],
            ack: 1001 + u32::from(i),
            opts: linux_opts(stamps[usize::from(i)]),
            ..seg()
        };
        put(&mut r, Probe::Seq(i), u64::from(i) * 100, Some(ipv4(6, 64, ids[usize::from(i)], true, &tcp_bytes(&s))));
    }
    r
}

#[test]
fn option_strings_as_nmap_writes_them() {
    let one = |opts: Vec<u8>| {
        let b = tcp_bytes(&Seg { opts, ..seg() });
        options(&tcp(&b).unwrap())
    };
    assert_eq!(one(linux_opts(1)), "M5B4ST11NW7");
    assert_eq!(one(linux_opts(0)), "M5B4ST01NW7");
    assert_eq!(one(vec![2, 4, 0x05, 0x78, 1, 1, 4, 2]), "M578NNS");
    assert_eq!(one(vec![]), "");
    assert_eq!(one(vec![0, 0, 0, 0]), "LLLL");
    assert_eq!(one(vec![3, 3, 0x0E, 0]), "WEL");
    // An option cut short: nmap gives the empty string.
    assert_eq!(one(vec![1, 1, 2, 4]), "");
    assert_eq!(one(vec![1, 8, 10, 0]), "");
    // An unknown kind: its length and data are read as options.
    // (nmap reads on past the header; here the segment's end stops it.)
    assert_eq!(one(vec![0x1E, 1, 1, 1]), "");
    let b = tcp_bytes(&Seg { opts: vec![0x1E, 1, 1, 1], data: vec![1, 9], ..seg() });
    assert_eq!(options(&tcp(&b).unwrap()), "NNNN");
    // A header that claims options past the segment.
    let mut b = tcp_bytes(&seg());
    b[12] = 0xF0;
    assert!(tcp(&b).is_none());
}

#[test]
fn seq_gcd_isr_sp_by_hand() {
    // Diffs 2000, 4000, 6000, 8000, 10000 over 100 ms each: GCD 2000 (7D0),
    // rates 20k..100k/s, mean 60000: ISR = round(8 * log2(60000)) = 127 (7F).
    let isns = [10_000, 12_000, 16_000, 22_000, 30_000, 40_000];
    let r = host(isns, [1, 2, 3, 4, 5, 6], [100, 110, 120, 130, 140, 150]);
    let fp = fingerprint(&params(), &r);
    assert_eq!(fp.get("SEQ", "GCD"), Some("7D0"));
    assert_eq!(fp.get("SEQ", "ISR"), Some("7F"));
    // Rates / 2000: 10, 20, 30, 40, 50; mean 30; sample sd = sqrt(250) = 15.81;
    // SP = round(8 * log2(15.81)) = 32 (20).
    assert_eq!(fp.get("SEQ", "SP"), Some("20"));
    assert_eq!(fp.get("SEQ", "TI"), Some("I"));
    // 10 ticks in 100 ms: 100 Hz, TS=7; uptime 100/100 = 1 s.
    assert_eq!(fp.get("SEQ", "TS"), Some("7"));
    let (tcps, ipid, ts) = sequences(&r);
    let tcps = tcps.unwrap();
    assert_eq!(tcps.index, Some(32));
    assert_eq!(tcps.class, "Good luck!");
    assert_eq!(tcps.values, "2710,2EE0,3E80,55F0,7530,9C40");
    assert_eq!(ipid.unwrap().class, "Incremental");
    assert_eq!(ts.unwrap().class, "100HZ");
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_000_000);
    let up = uptime(&r, now).unwrap();
    assert_eq!(up.seconds, 1);
    assert_eq!(up.lastboot, ctime(1_795_999_999).unwrap());
}

#[test]
fn seq_constant_isn_and_few_replies() {
    let r = host([7; 6], [1, 2, 3, 4, 5, 6], [0; 6]);
    let fp = fingerprint(&params(), &r);
    assert_eq!(fp.get("SEQ", "SP"), Some("0"));
    assert_eq!(fp.get("SEQ", "GCD"), Some("0"));
    assert_eq!(fp.get("SEQ", "ISR"), Some("0"));
    assert_eq!(fp.get("SEQ", "TS"), Some("0"));
    // Equal IP ids are taken for duplicate packets: only the first is kept.
    let fp = fingerprint(&params(), &host([1, 2, 3, 4, 5, 6], [9; 6], [0; 6]));
    assert_eq!(fp.get("SEQ", "SP"), None);
    assert_eq!(fp.get("SEQ", "TI"), None);
    // Three replies: no SP, GCD, ISR.
    let mut r = host([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1; 6]);
    for i in 3..6 {
        r.of.get_mut(&Probe::Seq(i)).unwrap().reply = None;
    }
    let fp = fingerprint(&params(), &r);
    assert_eq!(fp.get("SEQ", "SP"), None);
    assert_eq!(fp.get("SEQ", "TI"), Some("I"));
    assert_eq!(fp.test("OPS"), None, "OPS needs all six");
    assert_eq!(sequences(&r).0, None);
    assert!(sequences(&r).1.is_some());
    // TS values equal: no clock rate, no TS.
    assert_eq!(fp.get("SEQ", "TS"), None);
}

#[test]
fn ip_id_classes() {
    let c = |ids: &[u32]| ipid_class(ids);
    assert_eq!(c(&[0, 0, 0]), IpId::Zero);
    assert_eq!(c(&[5, 5, 5]), IpId::Constant);
    assert_eq!(c(&[1, 2, 4, 5]), IpId::Incr);
    assert_eq!(c(&[2, 4, 6]), IpId::IncrBy2);
    assert_eq!(c(&[256, 512, 1024]), IpId::BrokenIncr);
    assert_eq!(c(&[100, 3100, 9100]), IpId::Rpi);
    assert_eq!(c(&[100, 40000, 200]), IpId::Rd);
    assert_eq!(c(&[100, 40000]), IpId::Rpi, "two ids are never RD");
    assert_eq!(c(&[1, 30, 31]), IpId::Unknown);
    assert_eq!(ipid_value(IpId::Constant, &[0x1A2B]), Some("1A2B".into()));
    assert_eq!(ipid_value(IpId::Unknown, &[1]), None);
    // TI=RI, BI and hex through the fingerprint.
    for (ids, want) in [
        ([100u16, 3100, 6100, 9100, 12100, 15100], Some("RI")),
        ([256, 512, 768, 1024, 1280, 1536], Some("BI")),
        // A step back wraps to a huge difference: random.
        ([0x1234, 0x1235, 0x1234, 0x1235, 0x1234, 0x1235], Some("RD")),
    ] {
        let fp = fingerprint(&params(), &host([1, 2, 3, 4, 5, 6], ids, [1; 6]));
        assert_eq!(fp.get("SEQ", "TI"), want);
    }
    let mut r = host([1, 2, 3, 4, 5, 6], [0x33, 0x10, 0x33, 0x10, 0x33, 0x10], [1; 6]);
    r.of.get_mut(&Probe::Seq(0)).unwrap().reply = None;
    let fp = fingerprint(&params(), &r);
    // 10, 33, 10, 33, 10: a step back is a huge difference.
    assert_eq!(fp.get("SEQ", "TI"), Some("RD"));
}

fn echo(id_off: u16, code: u8, df: bool, ipid: u16, ttl: u8) -> Vec<u8> {
    let id = 0x7000 + id_off;
    ipv4(1, ttl, ipid, df, &[0, code, 0, 0, (id >> 8) as u8, id as u8, 1, 0x27])
}

#[test]
fn ss_ii_ci_and_ie() {
    let mut r = host([1, 2, 3, 4, 5, 6], [10, 11, 12, 13, 14, 15], [1; 6]);
    put(&mut r, Probe::Ie(0), 700, Some(echo(0, 9, true, 16, 128)));
    put(&mut r, Probe::Ie(1), 710, Some(echo(1, 0, false, 17, 128)));
    for (n, id) in [(5, 0u16), (6, 0), (7, 0)] {
        let s = Seg { flags: RST | ACK, seq: 0, ack: 1001, win: 0, ..seg() };
        put(&mut r, Probe::T(n), 800, Some(ipv4(6, 128, id, false, &tcp_bytes(&s))));
    }
    let fp = fingerprint(&params(), &r);
    assert_eq!(fp.get("SEQ", "II"), Some("I"));
    assert_eq!(fp.get("SEQ", "CI"), Some("Z"));
    assert_eq!(fp.get("SEQ", "SS"), Some("S"));
    assert_eq!(fp.get("IE", "DFI"), Some("S"));
    assert_eq!(fp.get("IE", "CD"), Some("S"));
    assert_eq!(fp.get("IE", "TG"), Some("80"));
    // ICMP ids far from the TCP ones: another counter.
    r.of.get_mut(&Probe::Ie(0)).unwrap().reply = Some(echo(0, 0, false, 9000, 128));
    r.of.get_mut(&Probe::Ie(1)).unwrap().reply = Some(echo(1, 0, false, 9001, 128));
    let fp = fingerprint(&params(), &r);
    assert_eq!(fp.get("SEQ", "SS"), Some("O"));
    assert_eq!(fp.get("IE", "DFI"), Some("N"));
    assert_eq!(fp.get("IE", "CD"), Some("Z"));
    r.of.get_mut(&Probe::Ie(1)).unwrap().reply = Some(echo(1, 9, true, 9001, 128));
    r.of.get_mut(&Probe::Ie(0)).unwrap().reply = Some(echo(0, 9, false, 9000, 128));
    let fp = fingerprint(&params(), &r);
    assert_eq!(fp.get("IE", "CD"), Some("9"));
    assert_eq!(fp.get("IE", "DFI"), Some("O"));
    // One echo reply only: IE R=N.
    r.of.get_mut(&Probe::Ie(1)).unwrap().reply = None;
    let fp = fingerprint(&params(), &r);
    assert_eq!(fp.test("IE").unwrap().attrs, vec![("R".to_string(), "N".to_string())]);
}

#[test]
fn ts_classes() {
    let ts = |stamps: [u32; 6]| fingerprint(&params(), &host([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], stamps));
    // No TS option at all: U.
    let mut r = Replies::default();
    for i in 0..6u8 {
        let s = Seg { seq: 1 + u32::from(i), opts: vec![2, 4, 5, 0xB4], ..seg() };
        put(&mut r, Probe::Seq(i), u64::from(i) * 100, Some(ipv4(6, 64, u16::from(i) + 1, true, &tcp_bytes(&s))));
    }
    assert_eq!(fingerprint(&params(), &r).get("SEQ", "TS"), Some("U"));
    assert_eq!(sequences(&r).2.unwrap().values, "");
    assert_eq!(ts([0; 6]).get("SEQ", "TS"), Some("0"));
    // 1 tick per 100 ms: 10 Hz, log2 rounds to 3.
    assert_eq!(ts([1, 2, 3, 4, 5, 6]).get("SEQ", "TS"), Some("3"));
    // 1000 Hz: 100 ticks per 100 ms, log2(1000) = 9.97 -> A.
    assert_eq!(ts([100, 200, 300, 400, 500, 600]).get("SEQ", "TS"), Some("A"));
    // Slow: 0.2 ticks per 100 ms on average -> 1.
    assert_eq!(ts([5, 5, 5, 5, 5, 6]).get("SEQ", "TS"), Some("1"));
    // 200 Hz -> 8.
    assert_eq!(ts([20, 40, 60, 80, 100, 120]).get("SEQ", "TS"), Some("8"));
}

#[test]
fn ops_win_t1_and_ttl_guess() {
    let r = host([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1; 6]);
    let fp = fingerprint(&params(), &r);
    let names: Vec<&str> = fp.tests.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["SEQ", "OPS", "WIN", "T1", "U1", "IE"]);
    assert_eq!(fp.get("OPS", "O1"), Some("M5B4ST11NW7"));
    assert_eq!(fp.get("WIN", "W6"), Some("FAF0"));
    let t1 = fp.test("T1").unwrap();
    let got: Vec<String> = t1.attrs.iter().map(|(a, v)| format!("{a}={v}")).collect();
    assert_eq!(got, ["R=Y", "DF=Y", "TG=40", "S=O", "A=S+", "F=AS", "RD=0", "Q="]);
    assert_eq!(fp.get("U1", "R"), Some("N"));
    assert_eq!(distance(&params(), &r), Some(0));
    assert_eq!(tcp_of(&r, Probe::Seq(0)), "M5B4ST11NW7");
}

#[test]
fn ecn_cc_and_quirks() {
    let cases = [(ECE | CWR, "S"), (ECE, "Y"), (0, "N"), (CWR, "O")];
    for (bits, want) in cases {
        let mut r = Replies::default();
        let s = Seg { flags: SYN | ACK | bits, ack: 1001, opts: vec![2, 4, 5, 0xB4, 1, 1, 4, 2, 1, 3, 3, 7], ..seg() };
        put(&mut r, Probe::Ecn, 0, Some(ipv4(6, 50, 1, true, &tcp_bytes(&s))));
        let fp = fingerprint(&params(), &r);
        assert_eq!(fp.get("ECN", "CC"), Some(want));
        assert_eq!(fp.get("ECN", "O"), Some("M5B4NNSNW7"));
        assert_eq!(fp.get("ECN", "TG"), Some("40"));
    }
    let mut r = Replies::default();
    let s = Seg { x2: 1, urp: 5, ..seg() };
    put(&mut r, Probe::Ecn, 0, Some(ipv4(6, 50, 1, false, &tcp_bytes(&s))));
    assert_eq!(fingerprint(&params(), &r).get("ECN", "Q"), Some("RU"));
    let s = Seg { flags: URG | ACK, urp: 5, ..seg() };
    r.of.get_mut(&Probe::Ecn).unwrap().reply = Some(ipv4(6, 50, 1, false, &tcp_bytes(&s)));
    assert_eq!(fingerprint(&params(), &r).get("ECN", "Q"), Some(""));
    // Sent without reply: R=N; not sent: absent.
    r.of.get_mut(&Probe::Ecn).unwrap().reply = None;
    assert_eq!(fingerprint(&params(), &r).get("ECN", "R"), Some("N"));
    assert!(fingerprint(&params(), &Replies::default()).test("ECN").is_none());
}

#[test]
fn t_tests_s_a_f_rd() {
    let mut r = Replies::default();
    let data = b"hello".to_vec();
    let s = Seg { flags: RST | ACK, seq: 5000, ack: 0, win: 0, data: data.clone(), ..seg() };
    put(&mut r, Probe::T(5), 0, Some(ipv4(6, 120, 1, false, &tcp_bytes(&s))));
    let s = Seg { flags: RST, seq: 5001, ack: 1000, win: 0, ..seg() };
    put(&mut r, Probe::T(6), 0, Some(ipv4(6, 120, 1, false, &tcp_bytes(&s))));
    let s = Seg { flags: ECE | URG | ACK | PSH | FIN, seq: 0, ack: 77, win: 0x10, ..seg() };
    put(&mut r, Probe::T(7), 0, Some(ipv4(6, 120, 1, false, &tcp_bytes(&s))));
    put(&mut r, Probe::T(2), 0, None);
    let fp = fingerprint(&params(), &r);
    assert_eq!(fp.get("T5", "S"), Some("A"));
    assert_eq!(fp.get("T5", "A"), Some("Z"));
    assert_eq!(fp.get("T5", "F"), Some("AR"));
    assert_eq!(fp.get("T5", "RD"), Some(format!("{:08X}", 0x3610_A686u32).as_str()), "CRC-32 of hello");
    assert_eq!(fp.get("T6", "S"), Some("A+"));
    assert_eq!(fp.get("T6", "A"), Some("S"));
    assert_eq!(fp.get("T6", "RD"), Some("0"));
    assert_eq!(fp.get("T7", "S"), Some("Z"));
    assert_eq!(fp.get("T7", "A"), Some("O"));
    assert_eq!(fp.get("T7", "F"), Some("EUAPF"));
    assert_eq!(fp.get("T7", "W"), Some("10"));
    assert_eq!(fp.get("T7", "O"), Some(""));
    assert_eq!(fp.get("T2", "R"), Some("N"));
    assert!(fp.test("T3").is_none());
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
}

fn unreachable(r: &Replies, mutate: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let mut q = r.of.get(&Probe::U1).unwrap().sent.clone();
    q[8] = 57; // the TTL left on arrival: 60 - 57 + 1 = 4 hops
    mutate(&mut q);
    let mut icmp = vec![3, 3, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&q);
    ipv4(1, 61, 3, false, &icmp)
}

#[test]
fn u1_and_distance() {
    let mut r = host([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1; 6]);
    put(&mut r, Probe::U1, 900, None);
    let good = unreachable(&r, |_| {});
    r.of.get_mut(&Probe::U1).unwrap().reply = Some(good.clone());
    let fp = fingerprint(&params(), &r);
    let got: Vec<String> = fp.test("U1").unwrap().attrs.iter().map(|(a, v)| format!("{a}={v}")).collect();
    // The IP checksum was computed with TTL 60: now it is wrong (I).
    assert_eq!(got, ["R=Y", "DF=N", "T=40", "IPL=164", "UN=0", "RIPL=G", "RID=G", "RIPCK=I", "RUCK=G", "RUD=G"]);
    assert_eq!(fp.get("T1", "T"), Some("43"), "64 + 4 - 1 = 67");
    assert_eq!(distance(&params(), &r), Some(4));
    assert_eq!(distance_icmp(&params(), &r), Some(4));

    let bad = unreachable(&r, |q| {
        q[2..4].copy_from_slice(&0x0150u16.to_be_bytes());
        q[4] = 0x99;
        q[10] = 0;
        q[11] = 0;
        q[26] = 0x12;
        q[27] = 0x34;
        q[100] = b'X';
    });
    r.of.get_mut(&Probe::U1).unwrap().reply = Some(bad);
    let fp = fingerprint(&params(), &r);
    assert_eq!(fp.get("U1", "RIPL"), Some("150"));
    assert_eq!(fp.get("U1", "RID"), Some("9942"));
    assert_eq!(fp.get("U1", "RIPCK"), Some("Z"));
    assert_eq!(fp.get("U1", "RUCK"), Some("1234"));
    assert_eq!(fp.get("U1", "RUD"), Some("I"));
    // A quote cut after the UDP header: the data is what was returned.
    let mut short = good.clone();
    short.truncate(20 + 8 + 28);
    short[2..4].copy_from_slice(&56u16.to_be_bytes());
    let mut icmp = short.clone();
    icmp[24..28].copy_from_slice(&0x0001_ABCDu32.to_be_bytes());
    r.of.get_mut(&Probe::U1).unwrap().reply = Some(icmp);
    let fp = fingerprint(&params(), &r);
    assert_eq!(fp.get("U1", "RUD"), Some("G"));
    assert_eq!(fp.get("U1", "UN"), Some("ABCD"), "nmap keeps 16 bits");
    assert_eq!(fp.get("U1", "IPL"), Some("38"));
}

#[test]
fn a_whole_host_in_nmaps_order_and_back_through_the_text() {
    let mut r = host([10, 2010, 4010, 6010, 8010, 10010], [1, 2, 3, 4, 5, 6], [100, 110, 120, 130, 140, 150]);
    put(&mut r, Probe::Ie(0), 700, Some(echo(0, 0, false, 7, 64)));
    put(&mut r, Probe::Ie(1), 710, Some(echo(1, 0, false, 8, 64)));
    put(&mut r, Probe::U1, 720, None);
    let u = unreachable(&r, |_| {});
    r.of.get_mut(&Probe::U1).unwrap().reply = Some(u);
    let s = Seg { flags: SYN | ACK | ECE, opts: vec![2, 4, 5, 0xB4, 1, 1, 4, 2, 1, 3, 3, 7], ..seg() };
    put(&mut r, Probe::Ecn, 730, Some(ipv4(6, 64, 9, true, &tcp_bytes(&s))));
    for n in 2..=7u8 {
        let s = Seg { flags: RST | ACK, seq: 0, ack: 1001, win: 0, ..seg() };
        put(&mut r, Probe::T(n), 740, Some(ipv4(6, 64, 0, true, &tcp_bytes(&s))));
    }
    let fp = fingerprint(&params(), &r);
    let names: Vec<&str> = fp.tests.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["SEQ", "OPS", "WIN", "ECN", "T1", "T2", "T3", "T4", "T5", "T6", "T7", "U1", "IE"]);
    let seq: Vec<&str> = fp.test("SEQ").unwrap().attrs.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(seq, ["SP", "GCD", "ISR", "TI", "CI", "II", "SS", "TS"]);
    let ecn: Vec<&str> = fp.test("ECN").unwrap().attrs.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(ecn, ["R", "DF", "T", "W", "O", "CC", "Q"]);
    let t2: Vec<&str> = fp.test("T2").unwrap().attrs.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(t2, ["R", "DF", "T", "W", "S", "A", "F", "O", "RD", "Q"]);
    assert_eq!(fp.get("ECN", "T"), Some("43"));
    let scan = crate::os::submit::ScanLine {
        version: "7.93".into(),
        open: Some(22),
        closed: Some(1),
        closed_udp: Some(40000),
        private: true,
        distance: distance(&params(), &r),
        dc: 'I',
        good: true,
        mac: None,
        time: 1_796_000_000,
        platform: "x86_64-pc-linux-gnu".into(),
    };
    let text = crate::os::submit::submission(&fp, &scan);
    assert!(text.starts_with("OS:SCAN(V=7.93%E=4%D="));
    assert!(text.contains("%DS=4%DC=I%G=Y%TM="));
    assert_eq!(crate::os::submit::parse_subject(&text), Some(fp));
}

#[test]
fn hostile_replies_never_panic() {
    let base = host([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1; 6]);
    let pkt = base.of.get(&Probe::Seq(0)).unwrap().reply.clone().unwrap();
    for cut in 0..pkt.len() {
        for probe in [Probe::Seq(0), Probe::Ecn, Probe::T(5), Probe::U1, Probe::Ie(0)] {
            let mut r = base.clone();
            let mut p = pkt[..cut].to_vec();
            if cut > 9 {
                p[9] = if probe == Probe::U1 || probe == Probe::Ie(0) { 1 } else { 6 };
            }
            put(&mut r, probe, 0, Some(p));
            let _ = fingerprint(&params(), &r);
            let _ = sequences(&r);
            let _ = distance(&params(), &r);
        }
    }
    for b in 0..=255u8 {
        for at in [0usize, 2, 3, 20, 32, 33, 40, 45] {
            let mut r = base.clone();
            let mut p = pkt.clone();
            p[at] = b;
            put(&mut r, Probe::T(3), 0, Some(p.clone()));
            p[9] = 1;
            put(&mut r, Probe::U1, 0, Some(p));
            let _ = fingerprint(&params(), &r);
        }
    }
    assert_eq!(ctime(0).unwrap(), "Thu Jan  1 00:00:00 1970");
}
