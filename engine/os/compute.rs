//! From the probes sent and the replies received to nmap's tests: the
//! fingerprint, the hop count, the sequence classes and the uptime.
//!
//! In: the [`Params`] the probes were built from and, per probe sent, an
//! [`Exchange`] (the packet, when it left, the reply that [`super::probes::answers`]
//! gave it, when that came), all on one monotonic clock. Out: a
//! [`Fingerprint`] with nmap 7.93's tests and attributes (SEQ, OPS, WIN,
//! ECN, T1-T7, U1, IE, in its order), [`distance`], [`sequences`] and
//! [`uptime`] as nmap's report has them. What always holds: each test is
//! computed as nmap 7.93's `osscan2.cc` computes it, quirks included (its
//! TCP option reader counts no option length, `UN` keeps 16 bits, `RD` is
//! zero-padded); a reply that does not parse is a reply not received, and
//! no input makes this panic. No I/O and no clock: times come in.
//!
//! Not modelled: nmap's retransmissions and second round (OPS/WIN resends,
//! a resent T1), and its localhost adjustments of the IP id classes.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::probes::{Params, Probe, ACK, CWR, ECE, FIN, PSH, RST, SYN, U1_BYTE, URG};
use super::{Fingerprint, Test};
use crate::findings::{Sequence, Uptime};

/// One probe sent and what came back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exchange {
    /// The packet sent, from its IP header (as [`super::probes::build`] made it).
    pub sent: Vec<u8>,
    pub sent_at: Duration,
    /// The reply, from its IP header.
    pub reply: Option<Vec<u8>>,
    pub reply_at: Option<Duration>,
}

/// A host's exchanges; probes not sent are absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replies {
    pub of: HashMap<Probe, Exchange>,
}

/// An IPv4 header read from untrusted bytes.
struct Ip<'a> {
    df: bool,
    ttl: u8,
    id: u16,
    total: u16,
    hl: usize,
    proto: u8,
    pkt: &'a [u8],
}

fn ip(pkt: &[u8]) -> Option<Ip<'_>> {
    let first = *pkt.first()?;
    let hl = usize::from(first & 0x0F) * 4;
    if first >> 4 != 4 || hl < 20 || pkt.len() < hl + 4 {
        return None;
    }
    Some(Ip {
        df: pkt[6] & 0x40 != 0,
        ttl: pkt[8],
        id: u16::from_be_bytes([pkt[4], pkt[5]]),
        total: u16::from_be_bytes([pkt[2], pkt[3]]),
        hl,
        proto: pkt[9],
        pkt,
    })
}

impl Ip<'_> {
    fn l4(&self) -> &[u8] {
        self.pkt.get(self.hl..).unwrap_or(&[])
    }
}

/// A TCP header; `seg` runs from it to the end of the captured packet.
struct Tcp<'a> {
    seq: u32,
    ack: u32,
    off: usize,
    x2: u8,
    flags: u8,
    win: u16,
    urp: u16,
    seg: &'a [u8],
}

fn tcp(seg: &[u8]) -> Option<Tcp<'_>> {
    if seg.len() < 20 {
        return None;
    }
    let off = usize::from(seg[12] >> 4) * 4;
    if off < 20 || seg.len() < off {
        return None;
    }
    Some(Tcp {
        seq: u32::from_be_bytes([seg[4], seg[5], seg[6], seg[7]]),
        ack: u32::from_be_bytes([seg[8], seg[9], seg[10], seg[11]]),
        off,
        x2: seg[12] & 0x0F,
        flags: seg[13],
        win: u16::from_be_bytes([seg[14], seg[15]]),
        urp: u16::from_be_bytes([seg[18], seg[19]]),
        seg,
    })
}

/// The reply to `p` as IPv4 + TCP, if it parses.
fn tcp_reply(r: &Replies, p: Probe) -> Option<(Ip<'_>, Tcp<'_>)> {
    let pkt = r.of.get(&p)?.reply.as_deref()?;
    let i = ip(pkt)?;
    if i.proto != 6 {
        return None;
    }
    let t = tcp(i.pkt.get(i.hl..)?)?;
    Some((i, t))
}

fn hex(v: impl std::fmt::UpperHex) -> String {
    format!("{v:X}")
}

/// nmap 7.93's option string (`M5B4ST11NW7`): it assumes each known
/// option's length and skips an unknown option's kind byte alone, reading
/// what follows as further options; an option cut short, a read past the
/// segment or a string over 250 characters gives the empty string.
fn options(t: &Tcp<'_>) -> String {
    let seg = t.seg;
    let mut length = t.off as i64 - 20;
    let mut q = 20usize;
    let mut s = String::new();
    let at = |i: usize| seg.get(i).copied();
    while length > 0 && s.len() < 251 {
        let Some(op) = at(q) else { return String::new() };
        q += 1;
        match op {
            0 => {
                s.push('L');
                length -= 1;
            }
            1 => {
                s.push('N');
                length -= 1;
            }
            2 => {
                if length < 4 {
                    break;
                }
                let (Some(a), Some(b)) = (at(q + 1), at(q + 2)) else { return String::new() };
                s.push('M');
                s.push_str(&hex(u16::from_be_bytes([a, b])));
                q += 3;
                length -= 4;
            }
            3 => {
                if length < 3 {
                    break;
                }
                let Some(v) = at(q + 1) else { return String::new() };
                s.push('W');
                s.push_str(&hex(v));
                q += 2;
                length -= 3;
            }
            4 => {
                if length < 2 {
                    break;
                }
                s.push('S');
                q += 1;
                length -= 2;
            }
            8 => {
                if length < 10 {
                    break;
                }
                let (Some(a), Some(b)) = (seg.get(q + 1..q + 5), seg.get(q + 5..q + 9)) else {
                    return String::new();
                };
                s.push('T');
                s.push(if a.iter().any(|&x| x != 0) { '1' } else { '0' });
                s.push(if b.iter().any(|&x| x != 0) { '1' } else { '0' });
                q += 9;
                length -= 10;
            }
            _ => {}
        }
    }
    if length > 0 {
        String::new()
    } else {
        s
    }
}

/// nmap's `gettcpopt_ts`: the TS value of a well-formed timestamp option.
fn timestamp(t: &Tcp<'_>) -> Option<u32> {
    let opts = t.seg.get(20..t.off)?;
    let mut len = opts.len() as i64;
    let mut p = 0usize;
    while len > 0 {
        let op = *opts.get(p)?;
        if op == 0 {
            break;
        }
        p += 1;
        if op == 1 {
            len -= 1;
            continue;
        }
        let oplen = *opts.get(p)?;
        p += 1;
        if oplen < 2 || i64::from(oplen) > len {
            break;
        }
        if op == 8 && oplen == 10 {
            let v = opts.get(p..p + 4)?;
            return Some(u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
        }
        len -= i64::from(oplen);
        p += usize::from(oplen) - 2;
    }
    None
}

/// nmap's `get_initial_ttl_guess`.
pub fn initial_ttl_guess(ttl: u8) -> u8 {
    match ttl {
        0..=32 => 32,
        33..=64 => 64,
        65..=128 => 128,
        _ => 255,
    }
}

fn attrs(list: &[(&str, String)]) -> Vec<(String, String)> {
    list.iter().map(|(a, v)| (a.to_string(), v.clone())).collect()
}

fn test(name: &str, list: &[(&str, String)]) -> Test {
    Test { name: name.to_string(), attrs: attrs(list) }
}

fn yn(b: bool) -> String {
    if b { "Y" } else { "N" }.to_string()
}

fn quirks(t: &Tcp<'_>) -> String {
    let mut q = String::new();
    if t.x2 != 0 {
        q.push('R');
    }
    if t.flags & URG == 0 && t.urp != 0 {
        q.push('U');
    }
    q
}

/// The standard CRC-32 (nmap's `nbase_crc32`).
fn crc32(data: &[u8]) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
        }
    }
    !c
}

/// ECN's test from its reply (TTL still as received, decimal).
fn ecn_test(i: &Ip<'_>, t: &Tcp<'_>) -> Test {
    let cc = match (t.flags & ECE != 0, t.flags & CWR != 0) {
        (true, true) => "S",
        (true, false) => "Y",
        (false, false) => "N",
        (false, true) => "O",
    };
    test(
        "ECN",
        &[
            ("R", "Y".into()),
            ("DF", yn(i.df)),
            ("T", i.ttl.to_string()),
            ("W", hex(t.win)),
            ("O", options(t)),
            ("CC", cc.into()),
            ("Q", quirks(t)),
        ],
    )
}

/// T`n`'s test from its reply (T1 without W and O).
fn t_test(n: u8, params: &Params, i: &Ip<'_>, t: &Tcp<'_>) -> Test {
    let s = if t.seq == 0 {
        "Z"
    } else if t.seq == params.ack {
        "A"
    } else if t.seq == params.ack.wrapping_add(1) {
        "A+"
    } else {
        "O"
    };
    let a = if t.ack == 0 {
        "Z"
    } else if t.ack == params.seq {
        "S"
    } else if t.ack == params.seq.wrapping_add(1) {
        "S+"
    } else {
        "O"
    };
    let mut f = String::new();
    for (bit, c) in [(ECE, 'E'), (URG, 'U'), (ACK, 'A'), (PSH, 'P'), (RST, 'R'), (SYN, 'S'), (FIN, 'F')] {
        if t.flags & bit != 0 {
            f.push(c);
        }
    }
    // nmap 7.93 measures the data by the IP total length.
    let data_len = i64::from(i.total) - i.hl as i64 - t.off as i64;
    let rd = if t.flags & RST != 0 && data_len > 0 {
        let end = (t.off + data_len as usize).min(t.seg.len());
        format!("{:08X}", crc32(t.seg.get(t.off..end).unwrap_or(&[])))
    } else {
        "0".into()
    };
    let mut list = vec![("R", "Y".to_string()), ("DF", yn(i.df)), ("T", i.ttl.to_string())];
    if n != 1 {
        list.push(("W", hex(t.win)));
    }
    list.extend([("S", s.to_string()), ("A", a.to_string()), ("F", f)]);
    if n != 1 {
        list.push(("O", options(t)));
    }
    list.extend([("RD", rd), ("Q", quirks(t))]);
    test(&format!("T{n}"), &list)
}

/// What U1's reply told: its test and the hop count from the quoted TTL.
fn u1(params: &Params, r: &Replies) -> Option<(Test, i32)> {
    let ex = r.of.get(&Probe::U1)?;
    let pkt = ex.reply.as_deref()?;
    let i = ip(pkt)?;
    let icmp = i.l4();
    if i.proto != 1 || icmp.len() < 8 || icmp[0] != 3 || icmp[1] != 3 || icmp.len() < 8 + 28 {
        return None;
    }
    let q = &icmp[8..];
    let qhl = usize::from(q[0] & 0x0F) * 4;
    if qhl < 20 || q.len() < qhl + 8 {
        return None;
    }
    let udp = &q[qhl..];
    let sent = &ex.sent;
    let sent_udp = sent.get(20..28);
    let want_ports = sent_udp.map(|u| (&u[0..2], &u[2..4]));
    if want_ports != Some((&udp[0..2], &udp[2..4])) {
        return None;
    }
    let sent_id = sent.get(4..6).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    let sent_ttl = sent.get(8).copied().unwrap_or(params.ttl);
    let q_len = u16::from_be_bytes([q[2], q[3]]);
    let q_id = u16::from_be_bytes([q[4], q[5]]);
    let q_sum = u16::from_be_bytes([q[10], q[11]]);
    let ripck = if q_sum == 0 {
        "Z"
    } else {
        let mut h = [0u8; 20];
        h.copy_from_slice(&q[..20]);
        h[10] = 0;
        h[11] = 0;
        if super::probes::checksum(0, &h) == q_sum {
            "G"
        } else {
            "I"
        }
    };
    let u_sum = &udp[6..8];
    let ruck = if sent_udp.map(|u| &u[6..8]) == Some(u_sum) {
        "G".to_string()
    } else {
        hex(u16::from_be_bytes([u_sum[0], u_sum[1]]))
    };
    // nmap 7.93 reads the returned data up to the outer IP total length.
    let start = i.hl + 8 + qhl + 8;
    let end = usize::from(i.total).min(pkt.len());
    let rud = if pkt.get(start..end).is_some_and(|d| d.iter().any(|&b| b != U1_BYTE)) { "I" } else { "G" };
    let un = u32::from_be_bytes([icmp[4], icmp[5], icmp[6], icmp[7]]);
    let t = test(
        "U1",
        &[
            ("R", "Y".into()),
            ("DF", yn(i.df)),
            ("T", i.ttl.to_string()),
            ("IPL", hex(i.total)),
            // nmap prints the 32-bit field with %hX: its low 16 bits.
            ("UN", hex(un as u16)),
            ("RIPL", if q_len == 328 { "G".into() } else { hex(q_len) }),
            ("RID", if q_id == sent_id { "G".into() } else { hex(q_id) }),
            ("RIPCK", ripck.into()),
            ("RUCK", ruck),
            ("RUD", rud.into()),
        ],
    );
    Some((t, i32::from(sent_ttl) - i32::from(q[8]) + 1))
}

/// An echo reply to IE `n`: (DF, TTL, code, IP id).
fn ie_reply(r: &Replies, n: u8) -> Option<(bool, u8, u8, u16)> {
    let i = ip(r.of.get(&Probe::Ie(n))?.reply.as_deref()?)?;
    let icmp = i.l4();
    if i.proto != 1 || icmp.len() < 8 || icmp[0] != 0 {
        return None;
    }
    Some((i.df, i.ttl, icmp[1], i.id))
}

fn ie_test(r: &Replies) -> Option<Test> {
    let (df1, ttl1, code1, _) = ie_reply(r, 0)?;
    let (df2, _, code2, _) = ie_reply(r, 1)?;
    let dfi = match (df1, df2) {
        (true, true) => "Y",
        (true, false) => "S",
        (false, false) => "N",
        (false, true) => "O",
    };
    let cd = if code1 == code2 {
        if code1 == 0 {
            "Z".to_string()
        } else {
            hex(code1)
        }
    } else if code1 == 9 && code2 == 0 {
        "S".to_string()
    } else {
        "O".to_string()
    };
    Some(test("IE", &[("R", "Y".into()), ("DFI", dfi.into()), ("T", ttl1.to_string()), ("CD", cd)]))
}

// nmap's IP id classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IpId {
    Unknown,
    Constant,
    Incr,
    IncrBy2,
    BrokenIncr,
    Rpi,
    Rd,
    Zero,
}

fn ipid_class(ids: &[u32]) -> IpId {
    let n = ids.len();
    if n < 2 {
        return IpId::Unknown;
    }
    let mut diffs = Vec::with_capacity(n - 1);
    let mut all_zero = true;
    for w in ids.windows(2) {
        if w[0] != 0 || w[1] != 0 {
            all_zero = false;
        }
        let d = w[1].wrapping_sub(w[0]);
        if n > 2 && d > 20000 {
            return IpId::Rd;
        }
        diffs.push(d);
    }
    if all_zero {
        return IpId::Zero;
    }
    let diffs: Vec<u32> = diffs.iter().map(|d| d & 0xFFFF).collect();
    if diffs.iter().all(|&d| d == 0) {
        return IpId::Constant;
    }
    if diffs.iter().any(|&d| d > 1000 && (d % 256 != 0 || d >= 25600)) {
        return IpId::Rpi;
    }
    if diffs.iter().all(|&d| d <= 5120 && d % 256 == 0) {
        IpId::BrokenIncr
    } else if diffs.iter().all(|&d| d % 2 == 0) {
        IpId::IncrBy2
    } else if diffs.iter().all(|&d| d <= 9) {
        IpId::Incr
    } else {
        IpId::Unknown
    }
}

fn ipid_value(c: IpId, ids: &[u32]) -> Option<String> {
    Some(match c {
        IpId::Constant => hex(*ids.first()?),
        IpId::Incr | IpId::IncrBy2 => "I".into(),
        IpId::BrokenIncr => "BI".into(),
        IpId::Rpi => "RI".into(),
        IpId::Rd => "RD".into(),
        IpId::Zero => "Z".into(),
        IpId::Unknown => return None,
    })
}

fn ipid_words(c: IpId) -> &'static str {
    match c {
        IpId::Constant => "Duplicated ipid (!)",
        IpId::Incr => "Incremental",
        IpId::IncrBy2 => "Incrementing by 2",
        IpId::BrokenIncr => "Broken little-endian incremental",
        IpId::Rd => "Randomized",
        IpId::Rpi => "Random positive increments",
        IpId::Zero => "All zeros",
        IpId::Unknown => "Busy server or unknown class",
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TsClass {
    Unknown,
    Zero,
    Hz2,
    Hz100,
    Hz1000,
    Other,
    Unsupported,
}

fn ts_words(c: TsClass) -> &'static str {
    match c {
        TsClass::Zero => "zero timestamp",
        TsClass::Hz2 => "2HZ",
        TsClass::Hz100 => "100HZ",
        TsClass::Hz1000 => "1000HZ",
        TsClass::Other => "other",
        TsClass::Unsupported => "none returned (unsupported)",
        TsClass::Unknown => "unknown class",
    }
}

/// nmap's difficulty words for a sequence index.
pub fn difficulty(index: u32) -> &'static str {
    match index {
        0..=2 => "Trivial joke",
        3..=5 => "Easy",
        6..=10 => "Medium",
        11 => "Formidable",
        12..=15 => "Worthy challenge",
        _ => "Good luck!",
    }
}

/// Everything nmap's `makeTSeqFP` works out.
struct Seq {
    /// The SEQ replies kept: (ISN, IP id, TS value, when the probe left).
    kept: Vec<(u32, u16, u32, Duration)>,
    index: u32,
    /// SP, GCD, ISR when there were at least four replies.
    sp_gcd_isr: Option<(u32, u32, u32)>,
    tcp_ids: Vec<u32>,
    tcp_class: IpId,
    closed_ids: Vec<u32>,
    icmp_ids: Vec<u32>,
    ts: TsClass,
    avg_hz: f64,
    /// Seconds since boot the first TS value stands for (0 when refused).
    uptime: Option<u64>,
}

fn seq_info(r: &Replies) -> Seq {
    // The SEQ replies in the order they came, as nmap met them.
    let mut order: Vec<u8> = (0..6).filter(|&i| tcp_reply(r, Probe::Seq(i)).is_some()).collect();
    order.sort_by_key(|&i| (r.of.get(&Probe::Seq(i)).and_then(|e| e.reply_at), i));
    let mut seqs = [0u32; 6];
    let mut ipids = [0u16; 6];
    let mut stamps = [0u32; 6];
    let mut tcp_ids: [Option<u32>; 6] = [None; 6];
    let mut ts = TsClass::Unknown;
    let mut last_id = 0u16;
    for i in order {
        let Some((ip, t)) = tcp_reply(r, Probe::Seq(i)) else { continue };
        if last_id != 0 && ip.id == last_id {
            continue;
        }
        last_id = ip.id;
        if t.flags & RST != 0 || t.flags & (SYN | ACK) != SYN | ACK {
            continue;
        }
        // nmap files a reply under the probe its port names, whatever it acknowledges.
        let n = usize::from(i);
        if seqs[n] != 0 {
            continue;
        }
        seqs[n] = t.seq;
        ipids[n] = ip.id;
        let stamp = timestamp(&t);
        match stamp {
            None => ts = TsClass::Unsupported,
            Some(0) => ts = TsClass::Zero,
            Some(_) => {}
        }
        stamps[n] = stamp.unwrap_or(0);
        tcp_ids[usize::from(i)] = Some(u32::from(ip.id));
    }
    let kept: Vec<(u32, u16, u32, Duration)> = (0..6)
        .filter(|&i| seqs[i] != 0)
        .map(|i| {
            let at = r.of.get(&Probe::Seq(i as u8)).map_or(Duration::ZERO, |e| e.sent_at);
            (seqs[i], ipids[i], stamps[i], at)
        })
        .collect();
    let mut seq_diffs = Vec::new();
    let mut ts_diffs = Vec::new();
    let mut usec = Vec::new();
    let mut rates: Vec<f32> = Vec::new();
    let mut avg_rate = 0f64;
    for w in kept.windows(2) {
        let (a, b) = (w[0], w[1]);
        let d = mod_diff(b.0, a.0);
        seq_diffs.push(d);
        ts_diffs.push(mod_diff(b.2, a.2));
        let us = b.3.as_micros() as i128 - a.3.as_micros() as i128;
        let us = (us as i64 as u64).max(1);
        usec.push(us);
        let rate = (f64::from(d) * 1_000_000.0 / us as f64) as f32;
        rates.push(rate);
        avg_rate += f64::from(rate);
    }
    let responses = kept.len();
    let mut index = 0u32;
    let mut sp_gcd_isr = None;
    if responses >= 4 {
        avg_rate /= (responses - 1) as f64;
        let gcd = seq_diffs.iter().copied().reduce(gcd).unwrap_or(1);
        let mut isr = 0u32;
        if gcd != 0 {
            isr = round8(avg_rate.log2());
            let div = if gcd > 9 { gcd } else { 1 };
            let mut sd = 0f64;
            for &rate in &rates {
                let x = f64::from(rate / div as f32) - avg_rate / f64::from(div);
                sd += x * x;
            }
            sd /= (responses - 2) as f64;
            sd = sd.sqrt();
            index = if sd <= 1.0 { 0 } else { round8(sd.log2()) };
        }
        sp_gcd_isr = Some((index, gcd, isr));
    }

    let tcp_ids: Vec<u32> = tcp_ids.iter().flatten().copied().collect();
    let closed_ids: Vec<u32> =
        (5..=7).filter_map(|n| tcp_reply(r, Probe::T(n)).map(|(i, _)| u32::from(i.id))).collect();
    let icmp_ids: Vec<u32> = (0..2).filter_map(|n| ie_reply(r, n).map(|x| u32::from(x.3))).collect();
    let tcp_class = if tcp_ids.len() >= 3 { ipid_class(&tcp_ids) } else { IpId::Unknown };

    let mut avg_hz = 0f64;
    let mut uptime = None;
    if ts == TsClass::Unknown && responses >= 2 {
        for (d, us) in ts_diffs.iter().zip(&usec) {
            avg_hz += f64::from(*d) / (*us as f64 / 1_000_000.0) / (responses - 1) as f64;
        }
        let first = kept.first().map_or(0, |k| k.2);
        let (class, up) = if avg_hz > 0.0 && avg_hz < 5.66 {
            (TsClass::Hz2, first / 2)
        } else if avg_hz > 70.0 && avg_hz < 150.0 {
            (TsClass::Hz100, first / 100)
        } else if avg_hz > 724.0 && avg_hz < 1448.0 {
            (TsClass::Hz1000, first / 1000)
        } else if avg_hz > 0.0 {
            (TsClass::Other, first.checked_div((0.5 + avg_hz) as u32).unwrap_or(0))
        } else {
            (TsClass::Unknown, 0)
        };
        ts = class;
        // nmap refuses more than two years (and counts from the first probe).
        uptime = Some(if up > 63_072_000 { 0 } else { u64::from(up) });
    }
    Seq { kept, index, sp_gcd_isr, tcp_ids, tcp_class, closed_ids, icmp_ids, ts, avg_hz, uptime }
}

/// nmap's MOD_DIFF: the shorter way round between two 32-bit values.
fn mod_diff(a: u32, b: u32) -> u32 {
    a.wrapping_sub(b).min(b.wrapping_sub(a))
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    if a < b {
        std::mem::swap(&mut a, &mut b);
    }
    while b != 0 {
        let c = a % b;
        a = b;
        b = c;
    }
    a
}

/// `(unsigned int)(x * 8 + 0.5)` with a negative or NaN `x` as 0.
fn round8(x: f64) -> u32 {
    let v = x * 8.0 + 0.5;
    if v.is_nan() || v < 0.0 {
        0
    } else {
        v as u32
    }
}

fn seq_test(s: &Seq) -> Option<Test> {
    let mut list: Vec<(&str, String)> = Vec::new();
    if let Some((sp, gcd, isr)) = s.sp_gcd_isr {
        list.extend([("SP", hex(sp)), ("GCD", hex(gcd)), ("ISR", hex(isr))]);
    }
    let closed_class = if s.closed_ids.len() >= 2 { ipid_class(&s.closed_ids) } else { IpId::Unknown };
    let icmp_class = if s.icmp_ids.len() >= 2 { ipid_class(&s.icmp_ids) } else { IpId::Unknown };
    for (name, class, ids) in
        [("TI", s.tcp_class, &s.tcp_ids), ("CI", closed_class, &s.closed_ids), ("II", icmp_class, &s.icmp_ids)]
    {
        if let Some(v) = ipid_value(class, ids) {
            list.push((name, v));
        }
    }
    let shared = |c: IpId| matches!(c, IpId::Incr | IpId::BrokenIncr | IpId::Rpi);
    if shared(s.tcp_class) && shared(icmp_class) {
        if let (Some(&first), Some(&last), Some(&icmp0)) = (s.tcp_ids.first(), s.tcp_ids.last(), s.icmp_ids.first()) {
            let avg = last.wrapping_sub(first) / (s.tcp_ids.len() as u32 - 1);
            let ss = if icmp0 < last.wrapping_add(avg.wrapping_mul(3)) { "S" } else { "O" };
            list.push(("SS", ss.into()));
        }
    }
    match s.ts {
        TsClass::Zero => list.push(("TS", "0".into())),
        TsClass::Hz2 | TsClass::Hz100 | TsClass::Hz1000 | TsClass::Other => {
            let hz = s.avg_hz;
            let v = if hz <= 5.66 {
                1
            } else if hz > 70.0 && hz <= 150.0 {
                7
            } else if hz > 150.0 && hz <= 350.0 {
                8
            } else {
                (0.5 + hz.log2()) as u32
            };
            list.push(("TS", hex(v)));
        }
        TsClass::Unsupported => list.push(("TS", "U".into())),
        TsClass::Unknown => {}
    }
    (!list.is_empty()).then(|| test("SEQ", &list))
}

/// The hop count U1's reply gives (nmap's `DC=I`): the TTL U1 left with,
/// less the TTL the target quotes back, plus one.
pub fn distance_icmp(params: &Params, r: &Replies) -> Option<u8> {
    u1(params, r).and_then(|(_, d)| u8::try_from(d).ok())
}

/// The first received TTL among ECN, T1-T7, U1 and IE, as nmap's
/// `distance_guess` takes it.
fn first_ttl(tests: &[Test]) -> Option<u8> {
    tests.iter().find_map(|t| t.attrs.iter().find(|(a, _)| a == "T").and_then(|(_, v)| v.parse().ok()))
}

/// The host's distance in hops as nmap derives it: U1's quoted TTL when
/// the target answered U1, else the guess from the first TTL received
/// (its initial-TTL guess less it).
///
/// nmap's `DC` (and its `DS`) depend on more than the replies: `L` with
/// distance 0 when scanning localhost, `D` with distance 1 when the target
/// is on the local link (its MAC address known), else `I` with U1's count
/// ([`distance_icmp`]), `T` when traceroute set it; with none of these
/// nmap writes neither `DS` nor `DC`.
pub fn distance(params: &Params, r: &Replies) -> Option<u8> {
    if let Some(d) = distance_icmp(params, r) {
        return Some(d);
    }
    let ttl = first_ttl(&raw_tests(params, r))?;
    Some(initial_ttl_guess(ttl) - ttl)
}

/// ECN, T1-T7, U1 and IE as received (TTLs raw), with `R=N` where nmap
/// writes it; and U1's hop count.
fn raw_tests_and_hops(params: &Params, r: &Replies) -> (Vec<Test>, Option<i32>) {
    let none = |name: &str| test(name, &[("R", "N".into())]);
    let mut out = Vec::new();
    match tcp_reply(r, Probe::Ecn) {
        Some((i, t)) => out.push(ecn_test(&i, &t)),
        None if r.of.contains_key(&Probe::Ecn) => out.push(none("ECN")),
        None => {}
    }
    match tcp_reply(r, Probe::Seq(0)) {
        Some((i, t)) => out.push(t_test(1, params, &i, &t)),
        None if r.of.contains_key(&Probe::Seq(0)) => out.push(none("T1")),
        None => {}
    }
    for n in 2..=7 {
        match tcp_reply(r, Probe::T(n)) {
            Some((i, t)) => out.push(t_test(n, params, &i, &t)),
            None if r.of.contains_key(&Probe::T(n)) => out.push(none(&format!("T{n}"))),
            None => {}
        }
    }
    let u = u1(params, r);
    let hops = u.as_ref().map(|(_, d)| *d);
    out.push(u.map_or_else(|| none("U1"), |(t, _)| t));
    out.push(ie_test(r).unwrap_or_else(|| none("IE")));
    (out, hops)
}

fn raw_tests(params: &Params, r: &Replies) -> Vec<Test> {
    raw_tests_and_hops(params, r).0
}

/// The host's fingerprint: SEQ, OPS, WIN, ECN, T1-T7, U1, IE as nmap 7.93
/// writes them. SEQ is left out when it has no attribute, OPS and WIN
/// unless all six SEQ probes were answered, ECN and T1-T7 when their probe
/// was not sent; U1 and IE are always there (`R=N` without a reply).
pub fn fingerprint(params: &Params, r: &Replies) -> Fingerprint {
    let mut tests = Vec::new();
    if let Some(t) = seq_test(&seq_info(r)) {
        tests.push(t);
    }
    let six: Vec<Tcp<'_>> = (0..6).filter_map(|i| tcp_reply(r, Probe::Seq(i)).map(|(_, t)| t)).collect();
    if six.len() == 6 {
        let o: Vec<(String, String)> =
            six.iter().enumerate().map(|(i, t)| (format!("O{}", i + 1), options(t))).collect();
        let w: Vec<(String, String)> =
            six.iter().enumerate().map(|(i, t)| (format!("W{}", i + 1), hex(t.win))).collect();
        tests.push(Test { name: "OPS".into(), attrs: o });
        tests.push(Test { name: "WIN".into(), attrs: w });
    }
    let (mut rest, hops) = raw_tests_and_hops(params, r);
    // T: the initial TTL from U1's hop count, else TG: the guess.
    for t in &mut rest {
        for (a, v) in &mut t.attrs {
            if a != "T" {
                continue;
            }
            let ttl: i32 = v.parse().unwrap_or(0);
            match hops {
                Some(d) => *v = hex((ttl + d - 1) as u16),
                None => {
                    *a = "TG".into();
                    *v = hex(initial_ttl_guess(ttl as u8));
                }
            }
        }
    }
    tests.extend(rest);
    Fingerprint { tests }
}

fn hex_list<T: std::fmt::UpperHex>(v: impl Iterator<Item = T>) -> String {
    v.map(|x| format!("{x:X}")).collect::<Vec<_>>().join(",")
}

/// nmap's `<tcpsequence>` (index, difficulty words, ISNs; with more than
/// three SEQ replies), `<ipidsequence>` (the open port's IP id class and
/// ids) and `<tcptssequence>` (the timestamp class and values, none when
/// unsupported), both with more than two SEQ replies.
pub fn sequences(r: &Replies) -> (Option<Sequence>, Option<Sequence>, Option<Sequence>) {
    let s = seq_info(r);
    let n = s.kept.len();
    let tcp = (n > 3).then(|| Sequence {
        class: difficulty(s.index).to_string(),
        index: Some(s.index),
        values: hex_list(s.kept.iter().map(|k| k.0)),
    });
    let ipid = (n > 2).then(|| Sequence {
        class: ipid_words(s.tcp_class).to_string(),
        index: None,
        values: hex_list(s.kept.iter().map(|k| k.1)),
    });
    let ts = (n > 2).then(|| Sequence {
        class: ts_words(s.ts).to_string(),
        index: None,
        values: if s.ts == TsClass::Unsupported { String::new() } else { hex_list(s.kept.iter().map(|k| k.2)) },
    });
    (tcp, ipid, ts)
}

/// The uptime nmap reports from the TCP timestamps: only when their clock
/// rate is one nmap classes (2 Hz, 100 Hz, 1000 Hz or another positive
/// rate), with nmap's refusal of more than two years turned to 0 as nmap
/// does. `now` is the wall-clock time the first SEQ probe left (nmap counts
/// the boot back from it); `lastboot` is written as nmap's `ctime`, in UTC.
pub fn uptime(r: &Replies, now: SystemTime) -> Option<Uptime> {
    let s = seq_info(r);
    if !matches!(s.ts, TsClass::Hz2 | TsClass::Hz100 | TsClass::Hz1000 | TsClass::Other) {
        return None;
    }
    let up = s.uptime?;
    let now = now.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_secs();
    let boot = now.checked_sub(up)?;
    Some(Uptime { seconds: up, lastboot: ctime(boot)? })
}

/// `ctime`'s text for a Unix time, in UTC, without the newline:
/// `Fri Nov 27 09:12:03 2026`.
pub fn ctime(secs: u64) -> Option<String> {
    let t = time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).ok()?).ok()?;
    const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    Some(format!(
        "{} {} {:2} {:02}:{:02}:{:02} {}",
        DAYS[usize::from(t.weekday().number_days_from_monday())],
        MONTHS[usize::from(u8::from(t.month())) - 1],
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.year()
    ))
}

#[cfg(test)]
mod tests {
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
            put(
                &mut r,
                Probe::Seq(i),
                u64::from(i) * 100,
                Some(ipv4(6, 64, ids[usize::from(i)], true, &tcp_bytes(&s))),
            );
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
            let s =
                Seg { flags: SYN | ACK | bits, ack: 1001, opts: vec![2, 4, 5, 0xB4, 1, 1, 4, 2, 1, 3, 3, 7], ..seg() };
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
}
