//! nmap 7.93's own OS probes and the lab hosts' replies, recorded with
//! tcpdump in the scanner's namespace (tests/data/os-replies/*.pcap, one
//! try: `nmap -O --max-os-tries 1`), with the fingerprint nmap printed
//! from them (*.fp): fed the same packets at the same times, moonscan's
//! computation must give nmap's fingerprint test for test, attribute for
//! attribute, the clock-read ones (SP, GCD, ISR, TS) included.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use super::compute::{self, Exchange, Replies};
use super::probes::{self, Params, Probe, ORDER};
use super::submit;

/// The packets of a pcap file (Ethernet link type), each with its time.
fn pcap(bytes: &[u8]) -> Vec<(Duration, Vec<u8>)> {
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    assert_eq!(u32_at(bytes, 0), 0xa1b2_c3d4, "a little-endian, microsecond pcap");
    assert_eq!(u32_at(bytes, 20), 1, "Ethernet frames");
    let mut out = Vec::new();
    let mut i = 24;
    while i + 16 <= bytes.len() {
        let (secs, micros, len) = (u32_at(bytes, i), u32_at(bytes, i + 4), u32_at(bytes, i + 8) as usize);
        let frame = &bytes[i + 16..i + 16 + len];
        if frame.len() > 14 && frame[12..14] == [0x08, 0x00] {
            out.push((Duration::new(u64::from(secs), micros * 1000), frame[14..].to_vec()));
        }
        i += 16 + len;
    }
    out
}

fn src(p: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(p[12], p[13], p[14], p[15])
}

fn dst(p: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(p[16], p[17], p[18], p[19])
}

/// The transport header of an IPv4 packet.
fn l4(p: &[u8]) -> &[u8] {
    &p[usize::from(p[0] & 0x0f) * 4..]
}

fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

fn be32(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// nmap's parameters, read back from its probes: SEQ 1 is the SYN with a
/// window of 1, IE 1 the echo with sequence number 295, U1 the UDP datagram.
fn params_of(sent: &[&[u8]]) -> Params {
    let seq1 = sent.iter().find(|p| p[9] == 6 && be16(l4(p), 14) == 1 && l4(p)[13] == 0x02).expect("SEQ 1 recorded");
    let tcp = l4(seq1);
    let ie1 = sent.iter().find(|p| p[9] == 1 && be16(l4(p), 6) == probes::IE_SEQ).expect("IE 1 recorded");
    let u1 = sent.iter().find(|p| p[9] == 17).expect("U1 recorded");
    let mut params = Params {
        src: src(seq1),
        dst: dst(seq1),
        open: be16(tcp, 2),
        closed: 0,
        closed_udp: be16(l4(u1), 2),
        sport: be16(tcp, 0),
        seq: be32(tcp, 4),
        ack: be32(tcp, 8),
        ip_id: be16(seq1, 4),
        icmp_id: be16(l4(ie1), 4),
        ttl: seq1[8],
    };
    let t5 = probes::source_port(Probe::T(5), &params);
    let t5 = sent.iter().find(|p| p[9] == 6 && be16(l4(p), 0) == t5).expect("T5 recorded");
    params.closed = be16(l4(t5), 2);
    params
}

/// Which probe a packet nmap sent is.
fn probe_of(params: &Params, p: &[u8]) -> Option<Probe> {
    match p[9] {
        17 => Some(Probe::U1),
        1 => match be16(l4(p), 4).wrapping_sub(params.icmp_id) {
            0 => Some(Probe::Ie(0)),
            1 => Some(Probe::Ie(1)),
            _ => None,
        },
        6 => ORDER
            .iter()
            .copied()
            .find(|&q| !matches!(q, Probe::Ie(_) | Probe::U1) && probes::source_port(q, params) == be16(l4(p), 0)),
        _ => None,
    }
}

/// nmap's U1 goes from a source port of its own (its `udpPortBase`, not
/// the TCP probes' base moonscan derives its U1 port from): its port
/// unreachable is told by the quoted UDP header's ports.
fn u1_reply(sent: &[&[u8]], p: &[u8]) -> Option<Probe> {
    let u1 = l4(sent.iter().find(|s| s[9] == 17)?);
    let icmp = l4(p);
    let quoted = icmp.get(8..)?;
    let udp = quoted.get(usize::from(quoted.first()? & 0x0f) * 4..)?;
    (p[9] == 1 && icmp[0] == 3 && icmp[1] == 3 && udp.get(..4)? == &u1[..4]).then_some(Probe::U1)
}

/// The exchanges of a recording: each probe's first send and first reply.
fn exchanges(packets: &[(Duration, Vec<u8>)], scanner: Ipv4Addr) -> (Params, Replies) {
    let t0 = packets.first().map_or(Duration::ZERO, |p| p.0);
    let sent: Vec<&[u8]> = packets.iter().filter(|(_, p)| src(p) == scanner).map(|(_, p)| p.as_slice()).collect();
    let params = params_of(&sent);
    let mut of: HashMap<Probe, Exchange> = HashMap::new();
    for (t, p) in packets {
        let at = t.saturating_sub(t0);
        if src(p) == scanner {
            if let Some(q) = probe_of(&params, p) {
                of.entry(q).or_insert(Exchange { sent: p.clone(), sent_at: at, reply: None, reply_at: None });
            }
        } else if let Some(q) = probes::answers(&params, p).or_else(|| u1_reply(&sent, p)) {
            if let Some(e) = of.get_mut(&q).filter(|e| e.reply.is_none()) {
                (e.reply, e.reply_at) = (Some(p.clone()), Some(at));
            }
        }
    }
    (params, Replies { of })
}

#[test]
fn nmaps_recorded_exchanges_give_nmaps_fingerprints() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/os-replies");
    let mut hosts = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "pcap") {
            continue;
        }
        hosts += 1;
        let packets = pcap(&std::fs::read(&path).unwrap());
        let (params, replies) = exchanges(&packets, Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(replies.of.len(), 16, "{}: every probe recorded", path.display());
        let ours = compute::fingerprint(&params, &replies);
        let text = std::fs::read_to_string(path.with_extension("fp")).unwrap();
        let theirs = submit::parse_subject(&text).unwrap();
        assert_eq!(ours, theirs, "{}:\nours   {ours:?}\nnmap's {theirs:?}", path.display());
    }
    assert_eq!(hosts, 4, "a recording of each personality");
}
