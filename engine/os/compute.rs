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
    let (kept, tcp_ids, mut ts) = seq_replies(r);
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
    let (index, sp_gcd_isr) = sequence_index(&seq_diffs, &rates, avg_rate, responses);

    let closed_ids: Vec<u32> =
        (5..=7).filter_map(|n| tcp_reply(r, Probe::T(n)).map(|(i, _)| u32::from(i.id))).collect();
    let icmp_ids: Vec<u32> = (0..2).filter_map(|n| ie_reply(r, n).map(|x| u32::from(x.3))).collect();
    let tcp_class = if tcp_ids.len() >= 3 { ipid_class(&tcp_ids) } else { IpId::Unknown };

    let (mut avg_hz, mut uptime) = (0f64, None);
    if ts == TsClass::Unknown && responses >= 2 {
        let first = kept.first().map_or(0, |k| k.2);
        let (class, hz, up) = ts_rate(&ts_diffs, &usec, first, responses);
        (ts, avg_hz, uptime) = (class, hz, Some(up));
    }
    Seq { kept, index, sp_gcd_isr, tcp_ids, tcp_class, closed_ids, icmp_ids, ts, avg_hz, uptime }
}

/// A SEQ reply kept: its sequence number, IP ID, timestamp, and when its
/// probe went.
type Kept = (u32, u16, u32, Duration);

/// The SEQ replies nmap keeps (SYN-ACKs, each probe's first, none with the
/// IP ID of the one before), in probe order; their IP IDs; and the
/// timestamp class they say (unsupported, zero, or still unknown).
fn seq_replies(r: &Replies) -> (Vec<Kept>, Vec<u32>, TsClass) {
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
    let kept: Vec<Kept> = (0..6)
        .filter(|&i| seqs[i] != 0)
        .map(|i| {
            let at = r.of.get(&Probe::Seq(i as u8)).map_or(Duration::ZERO, |e| e.sent_at);
            (seqs[i], ipids[i], stamps[i], at)
        })
        .collect();
    let tcp_ids: Vec<u32> = tcp_ids.iter().flatten().copied().collect();
    (kept, tcp_ids, ts)
}

/// SP (the sequence predictability index), GCD and ISR from the
/// differences between kept sequence numbers and their `rates` (`sum`:
/// the rates' sum), when there were at least four replies.
fn sequence_index(seq_diffs: &[u32], rates: &[f32], sum: f64, responses: usize) -> (u32, Option<(u32, u32, u32)>) {
    let mut index = 0u32;
    if responses < 4 {
        return (index, None);
    }
    let avg_rate = sum / (responses - 1) as f64;
    let gcd = seq_diffs.iter().copied().reduce(gcd).unwrap_or(1);
    let mut isr = 0u32;
    if gcd != 0 {
        isr = round8(avg_rate.log2());
        let div = if gcd > 9 { gcd } else { 1 };
        let mut sd = 0f64;
        for &rate in rates {
            let x = f64::from(rate / div as f32) - avg_rate / f64::from(div);
            sd += x * x;
        }
        sd /= (responses - 2) as f64;
        sd = sd.sqrt();
        index = if sd <= 1.0 { 0 } else { round8(sd.log2()) };
    }
    (index, Some((index, gcd, isr)))
}

/// The timestamp clock's class and rate (Hz) from the differences between
/// kept timestamps and the time between their probes, and the uptime the
/// `first` timestamp stands for (nmap refuses more than two years, and
/// counts from the first probe).
fn ts_rate(ts_diffs: &[u32], usec: &[u64], first: u32, responses: usize) -> (TsClass, f64, u64) {
    let mut avg_hz = 0f64;
    for (d, us) in ts_diffs.iter().zip(usec) {
        avg_hz += f64::from(*d) / (*us as f64 / 1_000_000.0) / (responses - 1) as f64;
    }
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
    // nmap refuses more than two years (and counts from the first probe).
    (class, avg_hz, if up > 63_072_000 { 0 } else { u64::from(up) })
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
#[path = "compute_tests.rs"]
mod tests;
