//! The fingerprint and fingerprint-strings against nmap 7.93's own output
//! for the same bytes: tests/data/nmap-sf/ holds `nmap -sV --script
//! fingerprint-strings` of server.py there (a banner with an ANSI escape,
//! NUL, CR, 0xff, quotes, a backslash and regex metacharacters; each
//! request answered with its length and first bytes), and of
//! server-two-replies.py (no banner, every probe answered: 29 replies,
//! probes grouped under one set of strings, and the literal `\xzz` that
//! makes nmap's script fail).
//!
//! In: the replies server.py gives each probe nmap sent. Out: nothing.
//! What always holds: nmap's header (V=7.93, its platform, intensity and
//! time) given to [`fingerprint`] makes nmap's fingerprint byte for byte.

use super::*;

pub(crate) const NMAP_TEXT: &str = include_str!("../../tests/data/nmap-sf/nmap-sV-fingerprint-strings.nmap");
pub(crate) const NMAP_XML: &str = include_str!("../../tests/data/nmap-sf/nmap-sV-fingerprint-strings.xml");

const BANNER: &[u8] =
    b"MOON-7 hello\t\"q\" back\\slash (x)*+?[]$^|.{}~!@#%&=-_,;:'<>/\r\n\x1b[31mred\x1b[0m\x00\x001\x00z\xff\xfe\x7f\x80 end\r\n";

/// What server.py sends a probe's request: the banner, then its answer.
fn reply(probe: &str, request: &[u8]) -> ProbeReply {
    let mut data = BANNER.to_vec();
    if !request.is_empty() {
        data.extend_from_slice(format!("ERR unknown command len={}\r\nfirst=", request.len()).as_bytes());
        data.extend_from_slice(&request[..request.len().min(12)]);
        data.extend_from_slice(b"\r\n");
        data.extend_from_slice(&[b'A'; 40]);
        data.extend_from_slice(b"\r\n");
    }
    ProbeReply { probe: probe.into(), data }
}

/// The replies nmap got, in its probe order (the requests of nmap's
/// nmap-service-probes; only their first 12 bytes and length matter), and
/// one past what its fingerprint holds.
pub(crate) fn replies() -> Vec<ProbeReply> {
    let rpc = b"\x80\0\0\x28\x72\xfe\x1d\x13\0\0\0\0\0\0\0\x02\0\x01\x86\xa0\x01\x97\x7c\x16\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
    let dns = b"\0\x1e\0\x06\x01\0\0\x01\0\0\0\0\0\0\x07version\x04bind\0\0\x10\0\x03";
    vec![
        reply("NULL", b""),
        reply("JavaRMI", b"JRMI\0\x02K"),
        reply("GenericLines", b"\r\n\r\n"),
        reply("GetRequest", b"GET / HTTP/1.0\r\n\r\n"),
        reply("HTTPOptions", b"OPTIONS / HTTP/1.0\r\n\r\n"),
        reply("RTSPRequest", b"OPTIONS / RTSP/1.0\r\n\r\n"),
        reply("RPCCheck", rpc),
        reply("DNSVersionBindReqTCP", dns),
        // Past 2,200 characters: nmap's fingerprint has no more.
        reply("DNSStatusRequestTCP", b"\0\x0c\0\0\x10\0\0\0\0\0\0\0\0"),
    ]
}

/// nmap's header for the recorded run.
fn nmap_header() -> Header<'static> {
    // Time=6B0A5612, D=11/28 (the lab's clock is UTC).
    Header { version: "7.93", intensity: 7, date: (11, 28), unix_secs: 0x6B0A_5612, platform: "x86_64-pc-linux-gnu" }
}

/// The lines of nmap's normal output from the first starting with `from`
/// to the first after it starting with `to` (both kept).
pub(crate) fn nmap_lines(from: &str, to: &str) -> String {
    lines_of(NMAP_TEXT, from, to)
}

fn lines_of(text: &str, from: &str, to: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let a = lines.iter().position(|l| l.starts_with(from)).expect("start");
    let b = a + lines[a..].iter().position(|l| l.starts_with(to)).expect("end");
    lines[a..=b].join("\n")
}

#[test]
fn the_fingerprint_is_nmaps_for_the_same_bytes() {
    let fp = fingerprint(47001, Proto::Tcp, false, &nmap_header(), &replies()).expect("a fingerprint");
    let nmap = nmap_lines("SF-Port47001-TCP:", "SF:AAAAAAAAAAAAAAAAAAAAAAAA\\r\\n\");");
    assert_eq!(fp.wrapped, nmap);
    assert!(fp.wrapped.lines().all(|l| l.len() <= WRAP + 1), "{}", fp.wrapped);
    assert_eq!(fp.probes.len(), 8, "the ninth reply is past 2,200 characters");
    // -oX: the same fingerprint on one line.
    let attr = NMAP_XML.split("servicefp=\"").nth(1).and_then(|s| s.split('"').next()).expect("servicefp");
    let unescaped = attr
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    assert_eq!(fp.unwrapped(), unescaped);
}

#[test]
fn fingerprint_strings_are_nmaps_for_the_same_bytes() {
    let fp = fingerprint(47001, Proto::Tcp, false, &nmap_header(), &replies()).expect("a fingerprint");
    let (text, table) = strings_result(&fp).expect("strings");
    // nmap's normal output: `| id: ` then each line after `| ` (`|_` last).
    let nmap = nmap_lines("| fingerprint-strings:", "|_");
    let ours: Vec<String> = format!("fingerprint-strings: {text}")
        .split('\n')
        .enumerate()
        .map(|(i, l)| format!("{}{l}", if i == text.matches('\n').count() { "|_" } else { "| " }))
        .collect();
    assert_eq!(ours.join("\n"), nmap);
    // nmap's XML (the same text and table; moonscan's writer is tested
    // against it in output/xml.rs).
    let script = NMAP_XML.split("<script id=\"fingerprint-strings\" ").nth(1).expect("script");
    for label in table.keys() {
        assert!(script.contains(&format!("<elem key=\"{label}\">")), "{label}");
    }
    assert_eq!(table.len(), 8);
}

#[test]
fn probes_with_the_same_strings_share_an_entry() {
    let same = |p: &str| ProbeReply {
        probe: p.into(),
        data: b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n".to_vec(),
    };
    let replies = vec![same("RTSPRequest"), same("GenericLines"), reply("NULL", b"")];
    let fp = fingerprint(80, Proto::Tcp, true, &nmap_header(), &replies).expect("fp");
    assert!(fp
        .wrapped
        .starts_with("SF-Port80-TCP:V=7.93%T=SSL%I=7%D=11/28%Time=6B0A5612%P=x86_64-pc-linux-gnu\nSF:%r("));
    let (text, _) = strings_result(&fp).expect("strings");
    assert_eq!(
        text,
        "\n  GenericLines, RTSPRequest: \n    HTTP/1.1 400 Bad Request\n    Connection: close\
         \n  NULL: \n    MOON-7 hello \"q\" backslash (x)*+?[]$^|.{}~!@#%&=-_,;:'<>/\n    [31mred"
    );
}

#[test]
fn a_tls_port_is_nmaps_too() {
    // nmap 7.93 on an XMPP port over TLS (a published scan, its local
    // date 11/10): the `%T=SSL` header and wrapping inside it.
    let h = Header {
        version: "7.93",
        intensity: 7,
        date: (11, 10),
        unix_secs: 0x636D_D688,
        platform: "x86_64-pc-linux-gnu",
    };
    let reply = br#"<stream:error xmlns:stream="http://etherx.jabber.org/streams"><not-well-formed xmlns="urn:ietf:params:xml:ns:xmpp-streams"/></stream:error></stream:stream>"#;
    let fp = fingerprint(5223, Proto::Tcp, true, &h, &[ProbeReply { probe: "RPCCheck".into(), data: reply.to_vec() }]);
    assert_eq!(
        fp.expect("fp").wrapped,
        "SF-Port5223-TCP:V=7.93%T=SSL%I=7%D=11/10%Time=636DD688%P=x86_64-pc-linux-g\n\
         SF:nu%r(RPCCheck,9B,\"<stream:error\\x20xmlns:stream=\\\"http://etherx\\.jabber\n\
         SF:\\.org/streams\\\"><not-well-formed\\x20xmlns=\\\"urn:ietf:params:xml:ns:xmpp\n\
         SF:-streams\\\"/></stream:error></stream:stream>\");"
    );
}

#[test]
fn escaping_follows_service_scan_cc() {
    assert_eq!(escape(b"a Z9"), "a\\x20Z9");
    assert_eq!(escape(b"\0\x001\0"), "\\0\\x001\\0");
    assert_eq!(escape(b"\\?\"[]().*+$^|"), "\\\\\\?\\\"\\[\\]\\(\\)\\.\\*\\+\\$\\^\\|");
    assert_eq!(escape(b"{}~!@#%&=-_,;:'<>/`"), "{}~!@#%&=-_,;:'<>/`");
    assert_eq!(escape(b"\r\n\t\x0b\x1b\x7f\x80\xff"), "\\r\\n\\t\\x0b\\x1b\\x7f\\x80\\xff");
}

#[test]
fn wrapping_keeps_74_columns_and_never_wraps_the_semicolon() {
    // A reply whose fingerprint fills its last line exactly.
    let head = "SF-Port1-TCP:V=7.93%I=7%D=11/28%Time=6B0A5612%P=x86_64-pc-linux-gnu%r(".len();
    let fill = |n: usize| vec![ProbeReply { probe: "NULL".into(), data: vec![b'a'; n] }];
    for n in 1..200 {
        let fp = fingerprint(1, Proto::Tcp, false, &nmap_header(), &fill(n)).expect("fp");
        let lines: Vec<&str> = fp.wrapped.split('\n').collect();
        for l in &lines[..lines.len() - 1] {
            assert_eq!(l.len(), WRAP, "{n}: {l}");
        }
        assert!(lines[1..].iter().all(|l| l.starts_with("SF:")));
        assert!(fp.wrapped.ends_with(");") && fp.unwrapped().ends_with("\");"), "{n}");
        assert_eq!(fp.unwrapped().len(), head + "NULL,".len() + format!("{n:X}").len() + 2 + n + 3);
    }
    // No reply with a byte, no fingerprint.
    assert_eq!(
        fingerprint(1, Proto::Udp, false, &nmap_header(), &[ProbeReply { probe: "x".into(), data: vec![] }]),
        None
    );
}

#[test]
fn a_reply_is_cut_at_900_bytes_and_its_length_is_whole() {
    let long = vec![ProbeReply { probe: "GetRequest".into(), data: vec![b'b'; 1024] }];
    let fp = fingerprint(8080, Proto::Tcp, false, &nmap_header(), &long).expect("fp");
    assert!(fp.unwrapped().contains("%r(GetRequest,400,\""));
    assert_eq!(fp.probes[0].1.len(), REPLY_USED);
}

#[test]
fn hostile_bytes_never_reach_the_text() {
    let evil = b"\x1b]0;pwned\x07\x1b[2J\r\n|_fake: line\0\xff\xfe\x9b31m\x85\xc2\x85\xe2\x80\xae";
    let replies = vec![
        ProbeReply { probe: "NULL".into(), data: evil.to_vec() },
        ProbeReply { probe: "Get\x1b[31m\nRequest".into(), data: evil.to_vec() },
    ];
    let fp = fingerprint(1, Proto::Tcp, false, &nmap_header(), &replies).expect("fp");
    let flat = fp.unwrapped();
    assert!(flat.bytes().all(|b| (0x20..0x7f).contains(&b)), "{flat}");
    assert!(fp.wrapped.bytes().all(|b| b == b'\n' || (0x20..0x7f).contains(&b)));
    assert!(flat.contains("%r(Get__31m_Request,"), "{flat}");
    let (text, _) = strings_result(&fp).expect("strings");
    assert!(text.bytes().all(|b| b == b'\n' || (0x20..0x7f).contains(&b)), "{text:?}");
    // Every line is indented: no reply starts a line of its own.
    assert!(text.split('\n').skip(1).all(|l| l.starts_with("  ")), "{text:?}");
}

#[test]
fn the_script_reads_back_as_nmaps_lua_does() {
    // `\\` and `\"` lose their backslash, then `\s` loses its own.
    assert_eq!(read_back("a\\\\slash\\\"q\\\"\\x20\\0\\r"), Some(b"aslash\"q\" \0\r".to_vec()));
    // A server's literal `\x` with no hex digit after it fails the script.
    assert_eq!(read_back(&escape(b"\\xzz")), None);
    assert_eq!(strings(b"ab"), None);
    assert_eq!(strings(b"abcd\x01ef\x02ghij").as_deref(), Some("abcd\n    ghij"));
    assert_eq!(strings(b"a \t b c").as_deref(), Some("a b c"));
}

#[test]
fn moonscans_header_names_moonscan() {
    let h = Header::moonscan(9, 0x6B0A_5612);
    assert_eq!(h.date, (11, 28));
    let fp = fingerprint(47001, Proto::Tcp, false, &h, &replies()).expect("fp");
    let first = fp.unwrapped();
    let want = format!("SF-Port47001-TCP:V=moonscan-{}%I=9%D=11/28%Time=6B0A5612%P=", env!("CARGO_PKG_VERSION"));
    assert!(first.starts_with(&want), "{first}");
}

/// The probes in a recorded fingerprint, in its order (the order nmap's
/// probes finished: it varies from run to run).
fn probe_order(fp: &str) -> Vec<String> {
    unwrap(fp).split("%r(").skip(1).map(|r| r.split(',').next().unwrap_or_default().to_string()).collect()
}

/// What server-two-replies.py answers each of nmap's probes.
fn two_replies(order: &[String], tail: &[u8]) -> Vec<ProbeReply> {
    let http = b"HTTP/9.9 777 Moon\r\nX-Odd:\t tabs  and   spaces\r\n\r\nab\x01cdefg\x02hi\x7fjklm nop";
    let mut nope = b"NOPE\0\0what?\r\n\\".to_vec();
    nope.extend_from_slice(tail);
    let get = |p: &String| p == "GetRequest" || p == "FourOhFourRequest";
    order
        .iter()
        .map(|p| ProbeReply { probe: p.to_string(), data: if get(p) { http.to_vec() } else { nope.clone() } })
        .collect()
}

#[test]
fn probes_with_the_same_strings_share_an_entry_as_in_nmap() {
    let text = include_str!("../../tests/data/nmap-sf/nmap-sV-grouped.nmap");
    let h = Header { date: (11, 28), unix_secs: 0x6B0A_5B9D, ..nmap_header() };
    let nmap = lines_of(text, "SF-Port47003-TCP:", "SF:0what\\?\\r\\n\\\\yes\");");
    let fp = fingerprint(47003, Proto::Tcp, false, &h, &two_replies(&probe_order(&nmap), b"yes")).expect("fp");
    assert_eq!(fp.wrapped, nmap);
    // All 29 fit in 2,200 characters (more than detection's 16 replies).
    assert_eq!(fp.probes.len(), 29);
    let (strings, _) = strings_result(&fp).expect("strings");
    let ours: Vec<String> = format!("fingerprint-strings: {strings}")
        .split('\n')
        .enumerate()
        .map(|(i, l)| format!("{}{l}", if i == strings.matches('\n').count() { "|_" } else { "| " }))
        .collect();
    assert_eq!(ours.join("\n"), lines_of(text, "| fingerprint-strings:", "|_"));
}

#[test]
fn a_literal_backslash_x_fails_the_script_as_in_nmap() {
    let text = include_str!("../../tests/data/nmap-sf/nmap-sV-backslash-x.nmap");
    let h = Header { date: (11, 28), unix_secs: 0x6B0A_5B8C, ..nmap_header() };
    let nmap = lines_of(text, "SF-Port47002-TCP:", "SF:0what\\?\\r\\n\\\\xzz\");");
    let fp = fingerprint(47002, Proto::Tcp, false, &h, &two_replies(&probe_order(&nmap), b"xzz")).expect("fp");
    assert_eq!(fp.wrapped, nmap);
    // nmap: "fingerprint-strings: ERROR: Script execution failed"; moonscan: no result.
    assert!(text.contains("|_fingerprint-strings: ERROR: Script execution failed"));
    assert_eq!(strings_result(&fp), None);
}
