//! The UDP probes of probes/*.yaml: enough protocols, payloads that fit a
//! raw frame and are well formed, transaction ids inside them, the right
//! probe first on each well-known port, and rules that name hand-built
//! answers of the protocols' specifications (and of the lab's daemons:
//! dnsmasq, BIND, chrony, net-snmp, tftpd-hpa, memcached, Samba nmbd).

use std::collections::BTreeSet;

use moonscan::service::probes::{default_dir, Probe, ProbeDb, Transport};
use moonscan::service::Identity;

/// Largest datagram the raw UDP scan sends (syn/frame.rs MAX_UDP_PAYLOAD).
const MAX_UDP_PAYLOAD: usize = 1400;

/// UDP probes meant to be empty: none. (Every protocol here answers a
/// request of its own; even the inetd small services get one byte, so that
/// an echo server's answer can be told from silence.)
const EMPTY_OK: [&str; 0] = [];

fn db() -> ProbeDb {
    ProbeDb::load_dir(&default_dir(&moonscan::places::Places::default())).expect("probes/ loads")
}

fn udp(db: &ProbeDb) -> Vec<&Probe> {
    db.probes().iter().filter(|p| p.transport == Transport::Udp).collect()
}

fn probe<'a>(db: &'a ProbeDb, name: &str) -> &'a Probe {
    db.probes()
        .iter()
        .find(|p| p.name == name && p.transport == Transport::Udp)
        .unwrap_or_else(|| panic!("no UDP probe {name}"))
}

/// What service detection makes of `answer` to `probe`: its first hard
/// match, else its first soft match (`true` when hard).
fn judge(probe: &Probe, answer: &[u8]) -> Option<(Identity, bool)> {
    if let Some(id) = probe.matches.iter().find_map(|r| r.apply(answer)) {
        return Some((id, true));
    }
    probe.soft_matches.iter().find_map(|r| r.apply(answer)).map(|id| (id, false))
}

/// The answer's identity, which must be a hard match.
fn hard(db: &ProbeDb, name: &str, answer: &[u8]) -> Identity {
    match judge(probe(db, name), answer) {
        Some((id, true)) => id,
        other => panic!("{name}: no hard match for {answer:02x?}: {other:?}"),
    }
}

fn soft(db: &ProbeDb, name: &str, answer: &[u8]) -> Identity {
    match judge(probe(db, name), answer) {
        Some((id, false)) => id,
        other => panic!("{name}: expected a soft match for {answer:02x?}, got {other:?}"),
    }
}

/// No hard rule of another UDP probe names a different service for `answer`.
fn only(db: &ProbeDb, service: &str, answer: &[u8]) {
    for p in udp(db) {
        for r in &p.matches {
            if r.service() != service && r.apply(answer).is_some() {
                panic!("{} rule {} ({}) also matches a {service} answer", p.name, r.pattern(), r.service());
            }
        }
    }
}

/// The probe's payload with the transaction id `id` written where the raw
/// scan writes it (the low bytes, big-endian), as the raw scan sends it.
fn keyed(p: &Probe, id: u32) -> Vec<u8> {
    let mut out = p.payload.clone();
    if let Some(t) = p.txid {
        out[t.at..t.at + t.len].copy_from_slice(&id.to_be_bytes()[4 - t.len..]);
    }
    out
}

/// `answer` with the probe's (keyed) transaction id echoed where the probe says.
fn echo(p: &Probe, sent: &[u8], mut answer: Vec<u8>) -> Vec<u8> {
    let t = p.txid.expect("probe has a txid");
    answer[t.reply_at..t.reply_at + t.len].copy_from_slice(&sent[t.at..t.at + t.len]);
    answer
}

fn opt(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("")
}

// --- BER ---------------------------------------------------------------------

fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    match body.len() {
        n if n < 0x80 => out.push(n as u8),
        n if n < 0x100 => out.extend([0x81, n as u8]),
        n => out.extend([0x82, (n >> 8) as u8, n as u8]),
    }
    out.extend(body);
    out
}

fn seq(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

/// Checks that `data` is exactly a run of well-formed BER TLVs (definite
/// lengths), descending into constructed ones.
fn ber_ok(mut data: &[u8]) -> Result<(), String> {
    while !data.is_empty() {
        let tag = data[0];
        if tag & 0x1f == 0x1f {
            return Err("multi-byte tags are not used here".into());
        }
        let first = *data.get(1).ok_or("truncated length")?;
        let (len, hdr) = match first {
            n if n < 0x80 => (n as usize, 2),
            0x81 => (*data.get(2).ok_or("truncated")? as usize, 3),
            0x82 => (((*data.get(2).ok_or("truncated")? as usize) << 8) | *data.get(3).ok_or("truncated")? as usize, 4),
            n => return Err(format!("length form {n:#x}")),
        };
        let body = data.get(hdr..hdr + len).ok_or_else(|| format!("tag {tag:#x}: {len} bytes promised"))?;
        if tag & 0x20 != 0 {
            ber_ok(body)?;
        }
        data = &data[hdr + len..];
    }
    Ok(())
}

fn be16(b: &[u8], at: usize) -> usize {
    u16::from_be_bytes([b[at], b[at + 1]]) as usize
}

// --- the probe set --------------------------------------------------------------

#[test]
fn udp_probes_cover_enough_protocols_and_payloads_fit() {
    let db = db();
    let probes = udp(&db);
    let services: BTreeSet<&str> = probes.iter().flat_map(|p| p.matches.iter().map(|r| r.service())).collect();
    assert!(services.len() >= 45, "{} services named by UDP match rules: {services:?}", services.len());
    for must in [
        "domain",
        "mdns",
        "llmnr",
        "snmp",
        "ntp",
        "netbios-ns",
        "upnp",
        "isakmp",
        "tftp",
        "memcached",
        "sip",
        "rpcbind",
        "ldap",
        "ms-sql-m",
        "openvpn",
        "asf-rmcp",
        "stun",
        "dtls",
        "quic",
        "kerberos-sec",
        "route",
        "nat-pmp",
        "coap",
        "bacnet",
        "xdmcp",
        "chargen",
        "daytime",
        "echo",
        "time",
        "ws-discovery",
        "L2TP",
        "ubiquiti-discovery",
        "pcanywherestat",
        "nfs",
        "svrloc",
        "EtherNetIP-2",
        "halflife",
        "murmur",
    ] {
        assert!(services.contains(must), "no UDP match rule names {must}");
    }
    // Some probes have soft matches only (SNMPv3 discovery, the ASF ping,
    // the TFTP read) so that a later probe of the same port can say more;
    // their services have hard matches elsewhere. qotd alone is told by
    // elimination (any short text) and stays a soft match.
    assert!(probes.iter().any(|p| p.soft_matches.iter().any(|r| r.service() == "qotd")));
    for p in &probes {
        for r in &p.soft_matches {
            assert!(r.service() == "qotd" || services.contains(r.service()), "{}: soft only {}", p.name, r.service());
        }
    }

    for p in &probes {
        assert!(!p.payload.is_empty() || EMPTY_OK.contains(&p.name.as_str()), "{}: empty payload", p.name);
        assert!(p.payload.len() <= MAX_UDP_PAYLOAD, "{}: {} bytes", p.name, p.payload.len());
        assert!(!p.ports.is_empty(), "{}: no ports", p.name);
        assert!(!p.matches.is_empty() || !p.soft_matches.is_empty(), "{}: no rule", p.name);
        assert!(p.wait.as_millis() >= 1000 && p.wait.as_millis() <= 5000, "{}: wait {:?}", p.name, p.wait);
        if let Some(t) = p.txid {
            assert!((1..=4).contains(&t.len), "{}: txid of {} bytes", p.name, t.len);
            assert!(t.at + t.len <= p.payload.len(), "{}: txid outside the payload", p.name);
            assert!(t.reply_at < 512, "{}: echo at {}", p.name, t.reply_at);
        }
        for r in p.matches.iter().chain(&p.soft_matches) {
            r.compiles().unwrap_or_else(|e| panic!("{} {}: {e}", p.name, r.pattern()));
            assert!(r.pattern().contains('^'), "{}: pattern {} is not anchored", p.name, r.pattern());
        }
    }
}

/// For each port, the probe the raw scan sends (lowest rarity, first
/// loaded on a tie) is the one most likely to draw an answer.
#[test]
fn each_well_known_port_gets_the_right_probe() {
    let db = db();
    let probes = udp(&db);
    let chosen = |port: u16| -> &str {
        let mut best: Option<&Probe> = None;
        for p in &probes {
            if p.ports.contains(&port) && best.is_none_or(|b| p.rarity < b.rarity) {
                best = Some(p);
            }
        }
        best.map(|p| p.name.as_str()).unwrap_or_else(|| panic!("no UDP probe for port {port}"))
    };
    for (port, name) in [
        (53, "DNSVersionBindReqUDP"),
        (69, "TFTPReadNonexistent"),
        (111, "RPCPortmapNull"),
        (123, "NTPClientMode3"),
        (137, "NBNSNodeStatus"),
        (161, "SNMPv3EngineDiscovery"),
        (443, "QUICVersionNegotiation"),
        (500, "IKEv2SAInit"),
        (623, "ASFPresencePing"),
        (1900, "SSDPMSearch"),
        (4433, "DTLSClientHello"),
        (4500, "IKEv2SAInitNATT"),
        (5684, "DTLSClientHello"),
        (11211, "MemcachedVersionUDP"),
    ] {
        assert_eq!(chosen(port), name, "port {port}");
    }
    for port in [
        7, 13, 17, 19, 37, 88, 177, 389, 520, 1194, 1434, 1701, 3478, 3702, 5060, 5351, 5353, 5355, 5632, 5683, 10001,
        47808,
    ] {
        chosen(port);
    }
}

/// Length fields and encodings inside the payloads agree with the bytes.
#[test]
fn payloads_are_well_formed() {
    let db = db();
    let pl = |name: &str| probe(&db, name).payload.clone();

    for name in ["SNMPv3EngineDiscovery", "SNMPv2cPublic", "SNMPv1Public", "CLDAPRootDSE", "KerberosASReq"] {
        let p = pl(name);
        ber_ok(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    assert!(pl("SNMPv2cPublic").windows(8).any(|w| w == b"\x04\x06public"));

    // DNS-format queries: one question, name ends in the root label.
    for name in ["DNSVersionBindReqUDP", "MDNSServicesQuery", "LLMNRQuery", "NBNSNodeStatus"] {
        let p = pl(name);
        assert_eq!(be16(&p, 4), 1, "{name}: qdcount");
        let mut at = 12;
        while p[at] != 0 {
            at += 1 + p[at] as usize;
        }
        assert_eq!(p.len(), at + 5, "{name}: question then type and class, nothing after");
    }

    let ntp = pl("NTPClientMode3");
    assert_eq!((ntp.len(), ntp[0]), (48, 0x23), "NTPv4 mode 3");
    assert!(ntp[40..48].iter().any(|&b| b != 0), "transmit timestamp set");
    assert_eq!(pl("NTPControlReadVar")[..2], [0x16, 0x02]);

    let mc = pl("MemcachedVersionUDP");
    assert_eq!((&mc[2..8], &mc[8..]), (&b"\x00\x00\x00\x01\x00\x00"[..], &b"version\r\n"[..]));

    let stun = pl("STUNBindingRequest");
    assert_eq!((stun.len(), be16(&stun, 0), be16(&stun, 2), &stun[4..8]), (20, 1, 0, &b"\x21\x12\xa4\x42"[..]));

    let quic = pl("QUICVersionNegotiation");
    assert!(quic.len() >= 1200 && quic[0] & 0xc0 == 0xc0, "QUIC long header, 1200 bytes");
    assert_eq!(quic[1..5].iter().map(|b| b & 0x0f).collect::<Vec<_>>(), [0x0a; 4], "0x?a?a?a?a version");

    let dtls = pl("DTLSClientHello");
    assert_eq!((dtls[0], be16(&dtls, 11) + 13), (0x16, dtls.len()), "DTLS record length");
    let hs = &dtls[13..];
    let body_len = |at: usize| ((hs[at] as usize) << 16) | ((hs[at + 1] as usize) << 8) | hs[at + 2] as usize;
    assert_eq!((hs[0], body_len(1) + 12, body_len(9), &hs[12..14]), (1, hs.len(), body_len(1), &b"\xfe\xfd"[..]));
    let body = &hs[12..];
    assert_eq!((body[34], body[35]), (0, 0), "no session id, no cookie");
    let suites = be16(body, 36);
    assert!(suites >= 2 && suites.is_multiple_of(2), "cipher suites");
    let comp = 38 + suites;
    assert_eq!(&body[comp..comp + 2], b"\x01\x00", "null compression");
    assert_eq!(be16(body, comp + 2) + comp + 4, body.len(), "extensions fill the hello");

    for (name, off) in [("IKEv2SAInit", 0), ("IKEv1MainMode", 0), ("IKEv2SAInitNATT", 4)] {
        let p = pl(name);
        let len = u32::from_be_bytes(p[off + 24..off + 28].try_into().unwrap()) as usize;
        assert_eq!(len + off, p.len(), "{name}: IKE length");
        // Walk the generic payload headers to the end.
        let (mut next, mut at) = (p[off + 16], off + 28);
        while next != 0 {
            next = p[at];
            at += be16(&p, at + 2);
        }
        assert_eq!(at, p.len(), "{name}: payload chain");
    }
    let ikev2 = pl("IKEv2SAInit");
    assert_eq!((ikev2[17], ikev2[18], ikev2[19]), (0x20, 34, 0x08), "IKEv2 IKE_SA_INIT, initiator");

    let l2tp = pl("L2TPSCCRQ");
    assert_eq!((be16(&l2tp, 0), be16(&l2tp, 2)), (0xc802, l2tp.len()));
    let (mut at, mut types) = (12, Vec::new());
    while at < l2tp.len() {
        types.push(be16(&l2tp, at + 4));
        at += be16(&l2tp, at) & 0x3ff;
    }
    assert_eq!(at, l2tp.len(), "L2TP AVP chain");
    for mandatory in [0, 2, 3, 7, 9] {
        assert!(types.contains(&mandatory), "SCCRQ lacks AVP {mandatory}");
    }
    let tid = probe(&db, "L2TPSCCRQ").txid.unwrap();
    assert_eq!(be16(&l2tp, tid.at - 2), 9, "the txid is the Assigned Tunnel ID");

    let slp = pl("SLPServiceTypeRequest");
    assert_eq!(((slp[2] as usize) << 16 | be16(&slp, 3), slp[0], slp[1]), (slp.len(), 2, 9));
    let bac = pl("BACnetReadVendorName");
    assert_eq!((bac[0], be16(&bac, 2)), (0x81, bac.len()));
    let enip = pl("EtherNetIPListIdentity");
    assert_eq!((enip.len(), &enip[..4]), (24, &b"\x63\x00\x00\x00"[..]));
    let rpc = pl("RPCPortmapNull");
    assert_eq!((rpc.len(), &rpc[4..24]), (40, &b"\0\0\0\0\0\0\0\x02\0\x01\x86\xa0\0\0\0\x02\0\0\0\0"[..]));
    let ipmi = pl("IPMIChannelAuthCaps");
    assert_eq!(ipmi[13] as usize, ipmi.len() - 14, "IPMI message length");
    assert_eq!(ipmi[14..17].iter().fold(0u8, |a, b| a.wrapping_add(*b)), 0, "IPMI header checksum");
    assert_eq!(ipmi[17..].iter().fold(0u8, |a, b| a.wrapping_add(*b)), 0, "IPMI data checksum");
    let coap = pl("CoAPWellKnownCore");
    assert_eq!(&coap[4..], b"\xbb.well-known\x04core");
    let tftp = pl("TFTPReadNonexistent");
    assert!(tftp.starts_with(b"\x00\x01") && tftp.ends_with(b"\x00octet\x00"));
    let xd = pl("XDMCPQuery");
    assert_eq!(be16(&xd, 4) + 6, xd.len(), "XDMCP length");
}

// --- answers ----------------------------------------------------------------------

fn dns_txt_answer(id: &[u8], txt: &str) -> Vec<u8> {
    let mut a = id.to_vec();
    a.extend(b"\x84\x00\x00\x01\x00\x01\x00\x00\x00\x00\x07version\x04bind\x00\x00\x10\x00\x03");
    a.extend(b"\xc0\x0c\x00\x10\x00\x03\x00\x00\x00\x00");
    a.extend(((txt.len() + 1) as u16).to_be_bytes());
    a.push(txt.len() as u8);
    a.extend(txt.as_bytes());
    a
}

#[test]
fn dns_answers_of_dnsmasq_and_bind() {
    let db = db();
    let p = probe(&db, "DNSVersionBindReqUDP");
    assert_eq!(p.txid.map(|t| (t.at, t.len, t.reply_at)), Some((0, 2, 0)));
    let id = hard(&db, "DNSVersionBindReqUDP", &dns_txt_answer(b"MS", "dnsmasq-2.90"));
    assert_eq!((id.service.as_str(), opt(&id.product), opt(&id.version)), ("domain", "dnsmasq", "2.90"));
    let a = dns_txt_answer(b"MS", "9.18.33-1~deb12u2-Debian");
    let id = hard(&db, "DNSVersionBindReqUDP", &a);
    assert_eq!((opt(&id.product), opt(&id.version), opt(&id.os)), ("ISC BIND", "9.18.33-1~deb12u2", "Linux"));
    only(&db, "domain", &a);
}

#[test]
fn ntp_answers_of_chrony_and_ntpd() {
    let db = db();
    let p = probe(&db, "NTPClientMode3");
    let sent = keyed(p, 0xdead_beef);
    // chronyd 4.3, not synchronized: LI 3, v4, mode 4, stratum 0, root delay
    // and dispersion 1.0, reference id 0, reference time 0.
    let mut a = vec![0xe4, 0x00, 0x06, 0xe7, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    a.extend([0u8; 8]);
    a.extend(&sent[40..48]); // origin = our transmit timestamp
    a.extend(b"\xe9\x10\x20\x30\x40\x50\x60\x70\xe9\x10\x20\x30\x40\x50\x60\x71");
    let t = p.txid.unwrap();
    assert_eq!(&a[t.reply_at..t.reply_at + t.len], &sent[t.at..t.at + t.len], "the origin echoes the txid");
    let id = hard(&db, "NTPClientMode3", &a);
    assert_eq!((id.service.as_str(), opt(&id.product), opt(&id.info)), ("ntp", "chrony", "NTP v4; unsynchronized"));
    only(&db, "ntp", &a);

    // A synchronized stratum-2 server (ntpd or other): soft, as nmap names it.
    let mut b = vec![0x24, 0x02, 0x06, 0xe9, 0, 0, 0, 0x10, 0, 0, 0, 0x20, 192, 0, 2, 1];
    b.extend(b"\xe9\x10\x20\x00\x00\x00\x00\x00");
    b.extend(&sent[40..48]);
    b.extend([0xe9; 16]);
    let id = soft(&db, "NTPClientMode3", &b);
    assert_eq!((opt(&id.product), opt(&id.version), opt(&id.info)), ("NTP", "v4", "secondary server"));
    // Not our timestamp: no match at all.
    let mut c = b.clone();
    c[28] ^= 0xff;
    assert!(judge(p, &c).is_none());

    // ntpd's mode 6 READVAR answer.
    let vars = "version=\"ntpd 4.2.8p15@1.3728-o Wed Sep 23 11:46:38 UTC 2020 (1)\", processor=\"x86_64\", system=\"Linux/6.1.0-28-amd64\", leap=00, stratum=2";
    let mut m = vec![0x16, 0x82, 0x4d, 0x53, 0x06, 0x15, 0, 0, 0, 0];
    m.extend((vars.len() as u16).to_be_bytes());
    m.extend(vars.as_bytes());
    let id = hard(&db, "NTPControlReadVar", &m);
    assert_eq!((opt(&id.product), opt(&id.version), opt(&id.os)), ("ntpd", "4.2.8p15", "Linux"));
}

#[test]
fn memcached_udp_answer() {
    let db = db();
    let p = probe(&db, "MemcachedVersionUDP");
    let sent = keyed(p, 0x1234);
    let a = echo(p, &sent, b"\x00\x00\x00\x00\x00\x01\x00\x00VERSION 1.6.18\r\n".to_vec());
    let id = hard(&db, "MemcachedVersionUDP", &a);
    assert_eq!((id.service.as_str(), opt(&id.product), opt(&id.version)), ("memcached", "Memcached", "1.6.18"));
    assert_eq!(id.cpe, ["cpe:/a:memcached:memcached:1.6.18"]);
    only(&db, "memcached", &a);
}

fn oid(arcs: &[u32]) -> Vec<u8> {
    let mut out = vec![(arcs[0] * 40 + arcs[1]) as u8];
    for &a in &arcs[2..] {
        let mut enc = vec![(a & 0x7f) as u8];
        let mut v = a >> 7;
        while v > 0 {
            enc.push(0x80 | (v & 0x7f) as u8);
            v >>= 7;
        }
        enc.reverse();
        out.extend(enc);
    }
    tlv(0x06, &out)
}

fn snmp_response(version: u8, varbinds: &[Vec<u8>]) -> Vec<u8> {
    let pdu = tlv(0xa2, &[tlv(0x02, b"Moon"), tlv(0x02, &[0]), tlv(0x02, &[0]), seq(varbinds)].concat());
    seq(&[tlv(0x02, &[version]), tlv(0x04, b"public"), pdu])
}

#[test]
fn snmp_answers_of_net_snmp() {
    let db = db();
    let descr = "Linux labhost 6.1.0-28-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22) x86_64";
    let vb_descr = seq(&[oid(&[1, 3, 6, 1, 2, 1, 1, 1, 0]), tlv(0x04, descr.as_bytes())]);
    let vb_oid = seq(&[oid(&[1, 3, 6, 1, 2, 1, 1, 2, 0]), oid(&[1, 3, 6, 1, 4, 1, 8072, 3, 2, 10])]);
    let tag = oid(&[1, 3, 6, 1, 4, 1, 2021, 100, 2, 0]);

    // v2c, everything in view: product, version, host and OS.
    let a = snmp_response(1, &[vb_descr.clone(), vb_oid.clone(), seq(&[tag.clone(), tlv(0x04, b"5.9.3")])]);
    ber_ok(&a).unwrap();
    let id = hard(&db, "SNMPv2cPublic", &a);
    assert_eq!(
        (id.service.as_str(), opt(&id.product), opt(&id.version), opt(&id.hostname), opt(&id.os)),
        ("snmp", "net-snmp", "5.9.3", "labhost", "Linux")
    );
    only(&db, "snmp", &a);
    // Debian's default view (systemonly): versionTag is noSuchObject.
    let b = snmp_response(1, &[vb_descr.clone(), vb_oid.clone(), seq(&[tag, vec![0x80, 0x00]])]);
    let id = hard(&db, "SNMPv2cPublic", &b);
    assert_eq!((opt(&id.product), opt(&id.version), opt(&id.hostname)), ("net-snmp", "", "labhost"));
    // v1.
    let c = snmp_response(0, &[vb_descr, vb_oid]);
    let id = hard(&db, "SNMPv1Public", &c);
    assert_eq!((opt(&id.product), opt(&id.os)), ("net-snmp", "Linux"));
    assert!(judge(probe(&db, "SNMPv2cPublic"), &c).is_none(), "a v1 answer is not a v2c one");

    // The v3 discovery Report: engine ID 80 00 1f 88 80 ... (enterprise 8072).
    let engine = b"\x80\x00\x1f\x88\x80\x4b\x1c\x2f\x5e\x10\x9a\x3b\x66";
    let usm = seq(&[
        tlv(0x04, engine),
        tlv(0x02, &[1]),
        tlv(0x02, &[0x01, 0x2c]),
        tlv(0x04, b""),
        tlv(0x04, b""),
        tlv(0x04, b""),
    ]);
    let report = tlv(
        0xa8,
        &[
            tlv(0x02, b"Moon"),
            tlv(0x02, &[0]),
            tlv(0x02, &[0]),
            seq(&[seq(&[oid(&[1, 3, 6, 1, 6, 3, 15, 1, 1, 4, 0]), tlv(0x41, &[3])])]),
        ]
        .concat(),
    );
    let v3 = seq(&[
        tlv(0x02, &[3]),
        seq(&[tlv(0x02, b"Moon"), tlv(0x02, &[0x00, 0xff, 0xe3]), tlv(0x04, &[0]), tlv(0x02, &[3])]),
        tlv(0x04, &usm),
        seq(&[tlv(0x04, engine), tlv(0x04, b""), report]),
    ]);
    ber_ok(&v3).unwrap();
    let id = soft(&db, "SNMPv3EngineDiscovery", &v3);
    assert_eq!((id.service.as_str(), opt(&id.product)), ("snmp", "net-snmp"));
    only(&db, "snmp", &v3);
}

#[test]
fn tftp_answers_of_tftpd_hpa() {
    let db = db();
    let not_found = b"\x00\x05\x00\x01File not found\x00";
    let id = soft(&db, "TFTPReadNonexistent", not_found);
    assert_eq!((id.service.as_str(), opt(&id.info)), ("tftp", "File not found"));
    only(&db, "tftp", not_found);
    let id = hard(&db, "TFTPUnknownMode", b"\x00\x05\x00\x04Unknown mode\x00");
    assert_eq!((id.service.as_str(), opt(&id.product)), ("tftp", "tftpd-hpa"));
}

#[test]
fn netbios_node_status_of_samba() {
    let db = db();
    let p = probe(&db, "NBNSNodeStatus");
    let sent = keyed(p, 0xbeef);
    let name = |n: &str, suffix: u8, flags: u8| {
        let mut e = format!("{n:<15}").into_bytes();
        e.extend([suffix, flags, 0x00]);
        e
    };
    let names = [
        name("LABHOST", 0x00, 0x04),
        name("LABHOST", 0x03, 0x04),
        name("LABHOST", 0x20, 0x04),
        name("MOONLAB", 0x00, 0x84),
        name("MOONLAB", 0x1e, 0x84),
    ];
    let mut rdata = vec![names.len() as u8];
    rdata.extend(names.concat());
    rdata.extend([0u8; 46]); // statistics: MAC 00:00:00:00:00:00 and zeros
    let mut a = sent[..2].to_vec();
    a.extend(b"\x84\x00\x00\x00\x00\x01\x00\x00\x00\x00");
    a.extend(&p.payload[12..46]); // the name "*" as asked
    a.extend(b"\x00\x21\x00\x01\x00\x00\x00\x00");
    a.extend((rdata.len() as u16).to_be_bytes());
    a.extend(rdata);
    let id = hard(&db, "NBNSNodeStatus", &a);
    assert_eq!(
        (id.service.as_str(), opt(&id.product), opt(&id.hostname), opt(&id.info)),
        ("netbios-ns", "Samba nmbd netbios-ns", "LABHOST", "workgroup: MOONLAB")
    );
    only(&db, "netbios-ns", &a);
    // Windows: the same names with a real MAC address.
    let mut w = a.clone();
    let mac = w.len() - 46;
    w[mac..mac + 6].copy_from_slice(b"\x00\x15\x5d\x01\x02\x03");
    let id = hard(&db, "NBNSNodeStatus", &w);
    assert_eq!((opt(&id.product), opt(&id.hostname), opt(&id.info)), ("", "LABHOST", "workgroup: MOONLAB"));
}

#[test]
fn stun_answer_of_coturn() {
    let db = db();
    let p = probe(&db, "STUNBindingRequest");
    let sent = keyed(p, 0x0bad_cafe);
    let mut a = b"\x01\x01\x00\x24".to_vec();
    a.extend(&sent[4..20]); // cookie and transaction id
    a.extend(b"\x00\x20\x00\x08\x00\x01\xa1\x47\xe1\x12\xa6\x43"); // XOR-MAPPED-ADDRESS
    let sw = b"Coturn-4.6.1 'Gorst'";
    a.extend(b"\x80\x22\x00\x14");
    a.extend(sw);
    let id = hard(&db, "STUNBindingRequest", &a);
    assert_eq!((id.service.as_str(), opt(&id.product), opt(&id.version)), ("stun", "coturn", "4.6.1"));
    only(&db, "stun", &a);
}

#[test]
fn ssdp_answer_of_miniupnpd() {
    let db = db();
    let a = b"HTTP/1.1 200 OK\r\nCACHE-CONTROL: max-age=120\r\nST: upnp:rootdevice\r\nUSN: uuid:00000000-0000-0000-0000-000000000000::upnp:rootdevice\r\nEXT:\r\nSERVER: OpenWRT/23.05 UPnP/1.1 MiniUPnPd/2.3.3\r\nLOCATION: http://192.0.2.1:5000/rootDesc.xml\r\n\r\n";
    let id = hard(&db, "SSDPMSearch", a);
    assert_eq!(
        (id.service.as_str(), opt(&id.product), opt(&id.version), opt(&id.info)),
        ("upnp", "MiniUPnP", "2.3.3", "OpenWRT/23.05; UPnP 1.1")
    );
    only(&db, "upnp", a);
}

#[test]
fn other_answers_by_their_specifications() {
    let db = db();
    // RPC: a NULL reply to the portmapper call, our xid.
    let p = probe(&db, "RPCPortmapNull");
    let sent = keyed(p, 0x7777_0001);
    let a = echo(p, &sent, vec![0; 4].into_iter().chain(*b"\0\0\0\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0").collect());
    assert_eq!(hard(&db, "RPCPortmapNull", &a).service, "rpcbind");
    // QUIC: Version Negotiation listing v1 and v2.
    let p = probe(&db, "QUICVersionNegotiation");
    let sent = keyed(p, 0x0102_0304);
    let mut vn = vec![0xc5, 0, 0, 0, 0, 8];
    vn.extend(&sent[15..23]);
    vn.push(8);
    vn.extend(&sent[6..14]);
    vn.extend(b"\x00\x00\x00\x01\x6b\x33\x43\xcf");
    let id = hard(&db, "QUICVersionNegotiation", &vn);
    assert_eq!((id.service.as_str(), opt(&id.info)), ("quic", "QUIC v1, v2"));
    // MS-SQL browser: one default instance.
    let text = b"ServerName;SQL01;InstanceName;MSSQLSERVER;IsClustered;No;Version;15.0.2000.5;tcp;1433;;";
    let mut r = vec![0x05, text.len() as u8, 0];
    r.extend(text);
    let id = hard(&db, "MSSQLBrowserUnicast", &r);
    assert_eq!((opt(&id.product), opt(&id.version)), ("Microsoft SQL Server", "15.0.2000.5"));
    // CoAP: 2.05 Content piggybacked on the ACK of our message id.
    let p = probe(&db, "CoAPWellKnownCore");
    let sent = keyed(p, 0x4242);
    let mut c = echo(p, &sent, b"\x60\x45\x00\x00\xc1\x28\xff".to_vec());
    c.extend(b"</sensors/temp>;rt=\"temperature\"");
    assert_eq!(opt(&hard(&db, "CoAPWellKnownCore", &c).info), "2.05 Content; first resource: /sensors/temp");
    // inetd: the five small services tell apart.
    let small = |a: &[u8]| judge(probe(&db, "InetdSmallServices"), a).map(|(id, _)| id.service).unwrap_or_default();
    assert_eq!(small(b"\n"), "echo");
    assert_eq!(small(b"\xea\x1b\x2c\x3d"), "time");
    assert_eq!(small(b"Tue Mar  5 12:34:56 2024\r\n"), "daytime");
    assert_eq!(small(b"!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefgh\r\n"), "chargen");
    assert_eq!(small(b"\"A quote is a quote.\" - Somebody\r\n"), "qotd");
}
