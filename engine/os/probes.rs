//! nmap's 16 IPv4 OS detection probes, byte for byte as nmap 7.93 sends
//! them, and which of them a received packet answers.
//!
//! In: a [`Params`] (addresses, the open and closed ports, the base source
//! port, sequence and acknowledgement numbers, IP and ICMP ids, the TTL)
//! and a [`Probe`]. Out: [`build`] writes that probe as an IPv4 packet from
//! its IP header, checksums filled; [`answers`] names the probe a received
//! IPv4 packet answers. What always holds: the probes are nmap's (windows,
//! TCP option lists, flags, DF, TOS, ICMP codes and sizes, the U1 payload
//! and IP id) so that the target's answers are the ones nmap sees; each
//! TCP probe and U1 has its own source port, so a reply names its probe by
//! port alone, as nmap's does; [`answers`] reads untrusted bytes and never
//! panics, whatever their lengths say.
//!
//! Source ports follow nmap's layout around its base (`tcpPortBase`):
//! SEQ *i* at base+*i*, ECN at base+12, T2-T7 at base+14..base+19
//! (base+6..11 are nmap's OPS/WIN resends and base+13 its T1 resend, not
//! sent here). U1 goes from base+20 (nmap draws a separate UDP base).

use std::net::Ipv4Addr;

/// One of nmap's OS detection probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Probe {
    /// The six SYNs to the open port, 100 ms apart (0..=5).
    Seq(u8),
    /// The two ICMP echo requests (0..=1).
    Ie(u8),
    /// The SYN with CWR and ECE to the open port.
    Ecn,
    /// T2-T4 to the open port, T5-T7 to the closed one (2..=7).
    T(u8),
    /// The UDP datagram to the closed UDP port.
    U1,
}

/// nmap's send order: the six SEQ probes, then IE, U1, ECN, T2-T7 (nmap's
/// `buildTUIProbeList` order, which its IP id tests rely on).
pub const ORDER: [Probe; 16] = [
    Probe::Seq(0),
    Probe::Seq(1),
    Probe::Seq(2),
    Probe::Seq(3),
    Probe::Seq(4),
    Probe::Seq(5),
    Probe::Ie(0),
    Probe::Ie(1),
    Probe::U1,
    Probe::Ecn,
    Probe::T(2),
    Probe::T(3),
    Probe::T(4),
    Probe::T(5),
    Probe::T(6),
    Probe::T(7),
];

/// What the probes to one host are built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    /// An open TCP port (SEQ, ECN, T2-T4).
    pub open: u16,
    /// A closed TCP port (T5-T7).
    pub closed: u16,
    /// A closed UDP port (U1).
    pub closed_udp: u16,
    /// Base source port: each TCP probe and U1 gets its own from it.
    pub sport: u16,
    /// nmap's `tcpSeqBase`: SEQ *i* carries `seq + i`, the others `seq`.
    pub seq: u32,
    /// nmap's `tcpAck`: the acknowledgement number of every TCP probe but ECN.
    pub ack: u32,
    /// IP id of the first probe; each probe adds its index in [`ORDER`]
    /// (U1 always carries nmap's 0x1042).
    pub ip_id: u16,
    /// ICMP id of IE 1; IE 2 carries `icmp_id + 1`.
    pub icmp_id: u16,
    /// TTL of every probe (U1's is what the hop count is computed from).
    pub ttl: u8,
}

/// The longest probe: U1, 20 + 8 + 300 bytes.
pub const MAX_PACKET: usize = 328;

/// U1's IP id, as nmap sends it.
pub const U1_IP_ID: u16 = 0x1042;
/// U1's payload byte ('C') and length.
pub const U1_BYTE: u8 = 0x43;
pub const U1_DATA: usize = 300;
/// IE 1's ICMP sequence number (IE 2 carries one more), as nmap sends it.
pub const IE_SEQ: u16 = 295;

const IP: usize = 20;
const TCP: usize = 20;

/// TCP flag bits, as the probes carry them and replies are read with.
pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;
pub const URG: u8 = 0x20;
pub const ECE: u8 = 0x40;
pub const CWR: u8 = 0x80;

// nmap's probe TCP option lists (its `prbOpts`), written out.
/// SEQ 1 / T1: WS 10, NOP, MSS 1460, TS(0xFFFFFFFF, 0), SACK permitted.
const OPT_1: &[u8] = &[
    0x03, 0x03, 0x0A, 0x01, 0x02, 0x04, 0x05, 0xB4, 0x08, 0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x04,
    0x02,
];
/// SEQ 2: MSS 1400, WS 0, SACK permitted, TS, EOL.
const OPT_2: &[u8] = &[
    0x02, 0x04, 0x05, 0x78, 0x03, 0x03, 0x00, 0x04, 0x02, 0x08, 0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00,
    0x00,
];
/// SEQ 3: TS, NOP, NOP, WS 5, NOP, MSS 640.
const OPT_3: &[u8] = &[
    0x08, 0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x03, 0x03, 0x05, 0x01, 0x02, 0x04, 0x02,
    0x80,
];
/// SEQ 4: SACK permitted, TS, WS 10, EOL.
const OPT_4: &[u8] = &[0x04, 0x02, 0x08, 0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x03, 0x03, 0x0A, 0x00];
/// SEQ 5: MSS 536, SACK permitted, TS, WS 10, EOL.
const OPT_5: &[u8] = &[
    0x02, 0x04, 0x02, 0x18, 0x04, 0x02, 0x08, 0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x03, 0x03, 0x0A,
    0x00,
];
/// SEQ 6: MSS 265, SACK permitted, TS.
const OPT_6: &[u8] = &[0x02, 0x04, 0x01, 0x09, 0x04, 0x02, 0x08, 0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00];
/// ECN: WS 10, NOP, MSS 1460, SACK permitted, NOP, NOP.
const OPT_ECN: &[u8] = &[0x03, 0x03, 0x0A, 0x01, 0x02, 0x04, 0x05, 0xB4, 0x04, 0x02, 0x01, 0x01];
/// T2-T6: WS 10, NOP, MSS 265, TS, SACK permitted.
const OPT_T: &[u8] = &[
    0x03, 0x03, 0x0A, 0x01, 0x02, 0x04, 0x01, 0x09, 0x08, 0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x04,
    0x02,
];
/// T7: as T2-T6 with WS 15.
const OPT_T7: &[u8] = &[
    0x03, 0x03, 0x0F, 0x01, 0x02, 0x04, 0x01, 0x09, 0x08, 0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x04,
    0x02,
];

/// A TCP probe's fixed part.
struct TcpShape {
    /// Offset of the source port from [`Params::sport`].
    port: u16,
    to_open: bool,
    seq_add: u32,
    /// Carries [`Params::ack`] (all but ECN, which carries 0).
    ack: bool,
    df: bool,
    reserved: u8,
    flags: u8,
    window: u16,
    urgent: u16,
    options: &'static [u8],
}

fn tcp_shape(p: Probe) -> Option<TcpShape> {
    let base = TcpShape {
        port: 0,
        to_open: true,
        seq_add: 0,
        ack: true,
        df: false,
        reserved: 0,
        flags: SYN,
        window: 0,
        urgent: 0,
        options: OPT_1,
    };
    Some(match p {
        Probe::Seq(i) => {
            let (window, options) = match i {
                0 => (1, OPT_1),
                1 => (63, OPT_2),
                2 => (4, OPT_3),
                3 => (4, OPT_4),
                4 => (16, OPT_5),
                5 => (512, OPT_6),
                _ => return None,
            };
            TcpShape { port: u16::from(i), seq_add: u32::from(i), window, options, ..base }
        }
        Probe::Ecn => TcpShape {
            port: 12,
            ack: false,
            reserved: 8,
            flags: CWR | ECE | SYN,
            window: 3,
            urgent: 0xF7F5,
            options: OPT_ECN,
            ..base
        },
        Probe::T(n) => {
            let (df, flags, window, to_open) = match n {
                2 => (true, 0, 128, true),
                3 => (false, SYN | FIN | URG | PSH, 256, true),
                4 => (true, ACK, 1024, true),
                5 => (false, SYN, 31337, false),
                6 => (true, ACK, 32768, false),
                7 => (false, FIN | PSH | URG, 65535, false),
                _ => return None,
            };
            let options = if n == 7 { OPT_T7 } else { OPT_T };
            TcpShape { port: 12 + u16::from(n), to_open, df, flags, window, options, ..base }
        }
        Probe::Ie(_) | Probe::U1 => return None,
    })
}

/// The source port probe `p` goes from.
pub fn source_port(p: Probe, params: &Params) -> u16 {
    match p {
        Probe::U1 => params.sport.wrapping_add(20),
        Probe::Ie(_) => 0,
        _ => tcp_shape(p).map_or(0, |s| params.sport.wrapping_add(s.port)),
    }
}

/// The index of `p` in [`ORDER`] (its IP id offset).
fn index(p: Probe) -> u16 {
    ORDER.iter().position(|&q| q == p).unwrap_or(0) as u16
}

/// The one's complement sum of `data` folded into 16 bits, added to `sum`.
pub(crate) fn sum16(mut sum: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

/// The Internet checksum of `data` with a starting partial sum.
pub(crate) fn checksum(sum: u32, data: &[u8]) -> u16 {
    let mut s = sum16(sum, data);
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    !(s as u16)
}

/// The partial sum of the IPv4 pseudo-header.
pub(crate) fn pseudo(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, len: usize) -> u32 {
    let mut s = sum16(0, &src.octets());
    s = sum16(s, &dst.octets());
    s + u32::from(proto) + (len as u32 & 0xFFFF)
}

/// Writes an IPv4 header (no options) into `out[..20]`.
#[allow(clippy::too_many_arguments)]
fn ip_header(out: &mut [u8], params: &Params, total: usize, id: u16, tos: u8, df: bool, proto: u8) {
    out[0] = 0x45;
    out[1] = tos;
    out[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    out[4..6].copy_from_slice(&id.to_be_bytes());
    out[6..8].copy_from_slice(&(if df { 0x4000u16 } else { 0 }).to_be_bytes());
    out[8] = params.ttl;
    out[9] = proto;
    out[10..12].copy_from_slice(&[0, 0]);
    out[12..16].copy_from_slice(&params.src.octets());
    out[16..20].copy_from_slice(&params.dst.octets());
    let c = checksum(0, &out[..IP]);
    out[10..12].copy_from_slice(&c.to_be_bytes());
}

/// Writes probe `p` into `out` as an IPv4 packet from its IP header, with
/// its checksums, and returns its length; 0 if `out` is shorter than the
/// probe (any buffer of [`MAX_PACKET`] bytes fits every probe) or `p` is
/// out of range (`Seq(6)`, `T(1)`...).
pub fn build(p: Probe, params: &Params, out: &mut [u8]) -> usize {
    let id = params.ip_id.wrapping_add(index(p));
    match p {
        Probe::Ie(i) if i <= 1 => {
            let data = if i == 0 { 120 } else { 150 };
            let len = IP + 8 + data;
            let Some(out) = out.get_mut(..len) else { return 0 };
            out.fill(0);
            let (tos, df, code) = if i == 0 { (0, true, 9) } else { (0x04, false, 0) };
            ip_header(out, params, len, id, tos, df, 1);
            let icmp = &mut out[IP..];
            icmp[0] = 8;
            icmp[1] = code;
            icmp[4..6].copy_from_slice(&params.icmp_id.wrapping_add(u16::from(i)).to_be_bytes());
            icmp[6..8].copy_from_slice(&IE_SEQ.wrapping_add(u16::from(i)).to_be_bytes());
            let c = checksum(0, icmp);
            icmp[2..4].copy_from_slice(&c.to_be_bytes());
            len
        }
        Probe::Ie(_) => 0,
        Probe::U1 => {
            let len = IP + 8 + U1_DATA;
            let Some(out) = out.get_mut(..len) else { return 0 };
            out.fill(0);
            ip_header(out, params, len, U1_IP_ID, 0, false, 17);
            let udp = &mut out[IP..];
            udp[0..2].copy_from_slice(&source_port(p, params).to_be_bytes());
            udp[2..4].copy_from_slice(&params.closed_udp.to_be_bytes());
            udp[4..6].copy_from_slice(&((8 + U1_DATA) as u16).to_be_bytes());
            udp[8..].fill(U1_BYTE);
            let c = checksum(pseudo(params.src, params.dst, 17, 8 + U1_DATA), udp);
            let c = if c == 0 { 0xFFFF } else { c };
            udp[6..8].copy_from_slice(&c.to_be_bytes());
            len
        }
        _ => {
            let Some(s) = tcp_shape(p) else { return 0 };
            let tcp_len = TCP + s.options.len();
            let len = IP + tcp_len;
            let Some(out) = out.get_mut(..len) else { return 0 };
            out.fill(0);
            ip_header(out, params, len, id, 0, s.df, 6);
            let t = &mut out[IP..];
            t[0..2].copy_from_slice(&params.sport.wrapping_add(s.port).to_be_bytes());
            let dport = if s.to_open { params.open } else { params.closed };
            t[2..4].copy_from_slice(&dport.to_be_bytes());
            t[4..8].copy_from_slice(&params.seq.wrapping_add(s.seq_add).to_be_bytes());
            let ack = if s.ack { params.ack } else { 0 };
            t[8..12].copy_from_slice(&ack.to_be_bytes());
            t[12] = ((tcp_len / 4) as u8) << 4 | (s.reserved & 0x0F);
            t[13] = s.flags;
            t[14..16].copy_from_slice(&s.window.to_be_bytes());
            t[18..20].copy_from_slice(&s.urgent.to_be_bytes());
            t[TCP..].copy_from_slice(s.options);
            let c = checksum(pseudo(params.src, params.dst, 6, tcp_len), t);
            t[16..18].copy_from_slice(&c.to_be_bytes());
            len
        }
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Which probe a received IPv4 packet (from its IP header) answers: a TCP
/// segment from the target by its ports (its destination port names the
/// probe, its source port must be the port that probe went to), an ICMP
/// echo reply by its id (nmap matches on the id alone), an ICMP port
/// unreachable by the UDP header it quotes; `None` for anything else,
/// including packets too short for what they claim.
pub fn answers(params: &Params, packet: &[u8]) -> Option<Probe> {
    let first = *packet.first()?;
    if first >> 4 != 4 {
        return None;
    }
    let hl = usize::from(first & 0x0F) * 4;
    if hl < IP || packet.len() < hl + 4 {
        return None;
    }
    if packet.get(12..16)? != params.dst.octets() || packet.get(16..20)? != params.src.octets() {
        return None;
    }
    let l4 = packet.get(hl..)?;
    match packet[9] {
        6 => {
            if l4.len() < TCP || usize::from(l4[12] >> 4) * 4 < TCP || l4.len() < usize::from(l4[12] >> 4) * 4 {
                return None;
            }
            let sport = be16(l4, 0)?;
            let dport = be16(l4, 2)?;
            let probe = ORDER
                .iter()
                .copied()
                .find(|&p| !matches!(p, Probe::Ie(_) | Probe::U1) && source_port(p, params) == dport)?;
            let s = tcp_shape(probe)?;
            let want = if s.to_open { params.open } else { params.closed };
            (sport == want).then_some(probe)
        }
        1 => {
            if l4.len() < 8 {
                return None;
            }
            match (l4[0], l4[1]) {
                (0, _) => {
                    let id = be16(l4, 4)?;
                    match id.wrapping_sub(params.icmp_id) {
                        0 => Some(Probe::Ie(0)),
                        1 => Some(Probe::Ie(1)),
                        _ => None,
                    }
                }
                (3, 3) => {
                    let q = l4.get(8..)?;
                    let qfirst = *q.first()?;
                    let qhl = usize::from(qfirst & 0x0F) * 4;
                    if qhl < IP || q.len() < qhl + 8 || q[9] != 17 {
                        return None;
                    }
                    if q.get(16..20)? != params.dst.octets() {
                        return None;
                    }
                    let udp = &q[qhl..];
                    let ok = be16(udp, 0)? == source_port(Probe::U1, params) && be16(udp, 2)? == params.closed_udp;
                    ok.then_some(Probe::U1)
                }
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            open: 22,
            closed: 1,
            closed_udp: 40000,
            sport: 50000,
            seq: 0x1000_0000,
            ack: 0x2000_0000,
            ip_id: 0x0100,
            icmp_id: 0x7000,
            ttl: 51,
        }
    }

    fn built(p: Probe) -> Vec<u8> {
        let mut buf = [0u8; MAX_PACKET];
        let n = build(p, &params(), &mut buf);
        assert!(n > 0, "{p:?} built");
        buf[..n].to_vec()
    }

    /// The packet's IP checksum and its transport checksum verify.
    fn sums_ok(pkt: &[u8]) {
        assert_eq!(checksum(0, &pkt[..20]), 0, "IP checksum");
        let l4 = &pkt[20..];
        let s = match pkt[9] {
            1 => 0,
            proto => pseudo(params().src, params().dst, proto, l4.len()),
        };
        assert_eq!(checksum(s, l4), 0, "transport checksum");
    }

    #[allow(clippy::type_complexity)]
    fn tcp(pkt: &[u8]) -> (u16, u16, u32, u32, u8, u8, u16, u16, &[u8]) {
        let t = &pkt[20..];
        (
            u16::from_be_bytes([t[0], t[1]]),
            u16::from_be_bytes([t[2], t[3]]),
            u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
            u32::from_be_bytes([t[8], t[9], t[10], t[11]]),
            t[12],
            t[13],
            u16::from_be_bytes([t[14], t[15]]),
            u16::from_be_bytes([t[18], t[19]]),
            &t[20..],
        )
    }

    fn df(pkt: &[u8]) -> bool {
        pkt[6] & 0x40 != 0
    }

    #[test]
    fn every_probe_builds_with_good_checksums_and_ttl() {
        for p in ORDER {
            let pkt = built(p);
            sums_ok(&pkt);
            assert_eq!(pkt[8], 51, "{p:?} TTL");
            assert_eq!(usize::from(u16::from_be_bytes([pkt[2], pkt[3]])), pkt.len());
            assert_eq!(answers(&params(), &pkt), None, "our own probe is no answer");
        }
        let mut short = [0u8; 40];
        assert_eq!(build(Probe::U1, &params(), &mut short), 0);
        assert_eq!(build(Probe::Seq(6), &params(), &mut [0u8; MAX_PACKET]), 0);
        assert_eq!(build(Probe::T(1), &params(), &mut [0u8; MAX_PACKET]), 0);
        assert_eq!(build(Probe::Ie(2), &params(), &mut [0u8; MAX_PACKET]), 0);
    }

    #[test]
    fn seq_probes_are_nmaps() {
        let want: [(u16, &[u8]); 6] = [
            (1, b"\x03\x03\x0A\x01\x02\x04\x05\xb4\x08\x0A\xff\xff\xff\xff\x00\x00\x00\x00\x04\x02"),
            (63, b"\x02\x04\x05\x78\x03\x03\x00\x04\x02\x08\x0A\xff\xff\xff\xff\x00\x00\x00\x00\x00"),
            (4, b"\x08\x0A\xff\xff\xff\xff\x00\x00\x00\x00\x01\x01\x03\x03\x05\x01\x02\x04\x02\x80"),
            (4, b"\x04\x02\x08\x0A\xff\xff\xff\xff\x00\x00\x00\x00\x03\x03\x0A\x00"),
            (16, b"\x02\x04\x02\x18\x04\x02\x08\x0A\xff\xff\xff\xff\x00\x00\x00\x00\x03\x03\x0A\x00"),
            (512, b"\x02\x04\x01\x09\x04\x02\x08\x0A\xff\xff\xff\xff\x00\x00\x00\x00"),
        ];
        for (i, (win, opts)) in want.iter().enumerate() {
            let pkt = built(Probe::Seq(i as u8));
            let (sport, dport, seq, ack, off, flags, window, urp, o) = tcp(&pkt);
            assert_eq!(sport, 50000 + i as u16);
            assert_eq!(dport, 22);
            assert_eq!(seq, 0x1000_0000 + i as u32);
            assert_eq!(ack, 0x2000_0000);
            assert_eq!(off, ((20 + opts.len()) / 4) as u8 * 16);
            assert_eq!(flags, SYN);
            assert_eq!(window, *win);
            assert_eq!(urp, 0);
            assert_eq!(o, *opts);
            assert!(!df(&pkt));
            assert_eq!(u16::from_be_bytes([pkt[4], pkt[5]]), 0x0100 + i as u16);
        }
    }

    #[test]
    fn ecn_probe_is_nmaps() {
        let pkt = built(Probe::Ecn);
        let (sport, dport, seq, ack, off, flags, window, urp, o) = tcp(&pkt);
        assert_eq!((sport, dport, seq, ack), (50012, 22, 0x1000_0000, 0));
        assert_eq!(off, 0x88, "32-byte header and the reserved bit");
        assert_eq!(flags, CWR | ECE | SYN);
        assert_eq!(window, 3);
        assert_eq!(urp, 0xF7F5);
        assert_eq!(o, b"\x03\x03\x0A\x01\x02\x04\x05\xb4\x04\x02\x01\x01");
        assert!(!df(&pkt));
    }

    #[test]
    fn t2_to_t7_are_nmaps() {
        let t = b"\x03\x03\x0A\x01\x02\x04\x01\x09\x08\x0A\xff\xff\xff\xff\x00\x00\x00\x00\x04\x02";
        let t7 = b"\x03\x03\x0f\x01\x02\x04\x01\x09\x08\x0A\xff\xff\xff\xff\x00\x00\x00\x00\x04\x02";
        let want = [
            (2, 22, true, 0, 128),
            (3, 22, false, SYN | FIN | URG | PSH, 256),
            (4, 22, true, ACK, 1024),
            (5, 1, false, SYN, 31337),
            (6, 1, true, ACK, 32768),
            (7, 1, false, FIN | PSH | URG, 65535),
        ];
        for (n, port, dfl, fl, win) in want {
            let pkt = built(Probe::T(n));
            let (sport, dport, seq, ack, off, flags, window, urp, o) = tcp(&pkt);
            assert_eq!(sport, 50012 + u16::from(n));
            assert_eq!(dport, port);
            assert_eq!((seq, ack), (0x1000_0000, 0x2000_0000));
            assert_eq!(off, 0xA0);
            assert_eq!(flags, fl, "T{n} flags");
            assert_eq!(window, win);
            assert_eq!(urp, 0);
            assert_eq!(o, if n == 7 { &t7[..] } else { &t[..] });
            assert_eq!(df(&pkt), dfl, "T{n} DF");
        }
    }

    #[test]
    fn ie_probes_are_nmaps() {
        let a = built(Probe::Ie(0));
        assert_eq!(a.len(), 20 + 8 + 120);
        assert!(df(&a));
        assert_eq!(a[1], 0, "TOS");
        assert_eq!(&a[20..28], &[8, 9, a[22], a[23], 0x70, 0x00, 0x01, 0x27]);
        assert!(a[28..].iter().all(|&b| b == 0));
        let b = built(Probe::Ie(1));
        assert_eq!(b.len(), 20 + 8 + 150);
        assert!(!df(&b));
        assert_eq!(b[1], 0x04, "TOS reliability");
        assert_eq!(&b[20..28], &[8, 0, b[22], b[23], 0x70, 0x01, 0x01, 0x28]);
    }

    #[test]
    fn u1_is_nmaps() {
        let u = built(Probe::U1);
        assert_eq!(u.len(), 328);
        assert_eq!(&u[4..6], &[0x10, 0x42]);
        assert!(!df(&u));
        assert_eq!(u[9], 17);
        assert_eq!(u16::from_be_bytes([u[20], u[21]]), 50020);
        assert_eq!(u16::from_be_bytes([u[22], u[23]]), 40000);
        assert_eq!(u16::from_be_bytes([u[24], u[25]]), 308);
        assert!(u[28..].iter().all(|&b| b == b'C'));
    }

    /// A reply from the target: IPv4 header then `l4`.
    fn reply(proto: u8, l4: &[u8]) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1];
        let len = (20 + l4.len()) as u16;
        p[2..4].copy_from_slice(&len.to_be_bytes());
        p.extend_from_slice(l4);
        p
    }

    fn tcp_reply(sport: u16, dport: u16) -> Vec<u8> {
        let mut t = vec![0u8; 20];
        t[0..2].copy_from_slice(&sport.to_be_bytes());
        t[2..4].copy_from_slice(&dport.to_be_bytes());
        t[12] = 0x50;
        t[13] = SYN | ACK;
        reply(6, &t)
    }

    #[test]
    fn answers_tcp_by_ports() {
        let p = params();
        for (i, probe) in ORDER.iter().enumerate() {
            let Some(s) = tcp_shape(*probe) else { continue };
            let from = if s.to_open { 22 } else { 1 };
            assert_eq!(answers(&p, &tcp_reply(from, source_port(*probe, &p))), Some(*probe), "{i}");
        }
        assert_eq!(answers(&p, &tcp_reply(22, 50006)), None, "nmap's OPS resend port");
        assert_eq!(answers(&p, &tcp_reply(80, 50000)), None, "wrong source port");
        assert_eq!(answers(&p, &tcp_reply(1, 50000)), None, "SEQ answered from the closed port");
        let mut other = tcp_reply(22, 50000);
        other[12..16].copy_from_slice(&[10, 0, 0, 9]);
        assert_eq!(answers(&p, &other), None, "another host");
        let mut bad_off = tcp_reply(22, 50000);
        bad_off[32] = 0xF0;
        assert_eq!(answers(&p, &bad_off), None, "data offset past the end");
    }

    #[test]
    fn answers_icmp_echo_and_unreachable() {
        let p = params();
        let echo = |id: u16| reply(1, &[0, 0, 0, 0, (id >> 8) as u8, id as u8, 1, 0x27]);
        assert_eq!(answers(&p, &echo(0x7000)), Some(Probe::Ie(0)));
        assert_eq!(answers(&p, &echo(0x7001)), Some(Probe::Ie(1)));
        assert_eq!(answers(&p, &echo(0x7002)), None);
        let mut req = echo(0x7000);
        req[20] = 8;
        assert_eq!(answers(&p, &req), None, "an echo request");

        let u1 = built(Probe::U1);
        let mut icmp = vec![3, 3, 0, 0, 0, 0, 0, 0];
        icmp.extend_from_slice(&u1[..28]);
        assert_eq!(answers(&p, &reply(1, &icmp)), Some(Probe::U1));
        let mut wrong = icmp.clone();
        wrong[1] = 1;
        assert_eq!(answers(&p, &reply(1, &wrong)), None, "host unreachable");
        let mut other_port = icmp.clone();
        other_port[8 + 20 + 3] ^= 1;
        assert_eq!(answers(&p, &reply(1, &other_port)), None);
        assert_eq!(answers(&p, &reply(1, &icmp[..8 + 24])), None, "quote cut short");
        let mut lying = icmp.clone();
        lying[8] = 0x4F;
        assert_eq!(answers(&p, &reply(1, &lying)), None, "quoted header longer than the quote");
    }

    #[test]
    fn garbage_is_no_answer() {
        let p = params();
        assert_eq!(answers(&p, &[]), None);
        assert_eq!(answers(&p, &[0x45]), None);
        assert_eq!(answers(&p, &[0x4F; 30]), None);
        assert_eq!(answers(&p, &[0x60; 60]), None);
        assert_eq!(answers(&p, &reply(17, &[0; 8])), None);
        let good = tcp_reply(22, 50000);
        for cut in 0..good.len() {
            let _ = answers(&p, &good[..cut]);
        }
        for b in 0..=255u8 {
            let mut x = good.clone();
            x[0] = b;
            let _ = answers(&p, &x);
            x[32] = b;
            let _ = answers(&p, &x);
        }
    }
}
