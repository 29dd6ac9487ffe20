//! A port no rule identified, in every output: nmap's fingerprint after
//! the port table (-oN, the terminal's report), `servicefp` and the
//! fingerprint-strings `<script>` (-oX), nothing in -oG (nmap's grepable
//! output has no scripts and no fingerprints), against nmap 7.93's output
//! for the same replies (tests/data/nmap-sf/).
//!
//! In: a scan of 198.18.0.5:47001 with the recorded replies. Out: nothing.
//! What always holds: hostile replies put no control byte in any output.

use super::report::sample::{feed, start};
use super::{Grepable, Normal, Text, Xml};
use crate::findings::service_fp::tests::{nmap_lines, replies, NMAP_XML};
use crate::findings::service_fp::{strings_event, Header};
use crate::findings::*;

/// The scan: one open port, its service with `replies` (the first eight,
/// those nmap's fingerprint holds, unless `all`), and when plugins ran its
/// fingerprint-strings.
fn events(replies: Vec<ProbeReply>, plugins: bool) -> Vec<Event> {
    let ip = "198.18.0.5".parse().unwrap();
    let mut s = Service::bare("0123456789abcdef".into(), ip, 47001, Proto::Tcp);
    s.replies = replies;
    s.t = 0.5;
    let mut out = vec![
        start("moonscan -sV --script fingerprint-strings -p 47001 198.18.0.5", 1),
        Event::Port(PortEvent {
            scan_id: "0123456789abcdef".into(),
            ip,
            port: 47001,
            proto: Proto::Tcp,
            state: PortState::Open,
            reason: Reason::SynAck,
            ttl: Some(64),
            t: 0.25,
        }),
        Event::Service(Box::new(s.clone())),
    ];
    if plugins {
        out.extend(strings_event(&s, 7, 0x6B0A_5612).map(|e| Event::Script(Box::new(e))));
    }
    out.push(super::report::sample::end(1.0, 0));
    out
}

fn nmaps_eight() -> Vec<ProbeReply> {
    replies().into_iter().take(8).collect()
}

fn normal(events: &[Event]) -> String {
    let mut buf = Vec::new();
    feed(&mut Normal::new(&mut buf), events);
    String::from_utf8(buf).unwrap()
}

fn xml(events: &[Event]) -> String {
    let mut buf = Vec::new();
    feed(&mut Xml::new(&mut buf), events);
    String::from_utf8(buf).unwrap()
}

/// The fingerprint these events' outputs give: moonscan's header, the
/// scan's start (2026-11-21 16:41:03.25) plus the service's 0.5 s.
fn ours() -> String {
    let h = Header::moonscan(7, 1_795_279_263);
    crate::findings::service_fp::fingerprint(47001, Proto::Tcp, false, &h, &nmaps_eight()).unwrap().wrapped
}

#[test]
fn normal_output_has_nmaps_script_lines_and_fingerprint_block() {
    let text = normal(&events(nmaps_eight(), true));
    // fingerprint-strings under the port, as nmap printed it.
    let strings = nmap_lines("| fingerprint-strings:", "|_");
    let port_line = text.find("\n47001/tcp open ").expect("the port's line");
    let at = text.find(&format!("\n{strings}\n1 service unrecognized")).expect(&text);
    assert!(port_line < at && !text[port_line + 1..at].contains("\n|"), "{text}");
    // Then nmap's request and the fingerprint, V= and P= moonscan's.
    let block = format!(
        "1 service unrecognized despite returning data. If you know the service/version, please submit the \
         following fingerprint at https://nmap.org/cgi-bin/submit.cgi?new-service :\n{}\n",
        ours()
    );
    assert!(text.contains(&block), "{text}");
    assert!(
        ours().starts_with(&format!("SF-Port47001-TCP:V=moonscan-{}%I=7%D=11/21%Time=6", env!("CARGO_PKG_VERSION")))
    );
    // Without plugins (nmap's -sV alone): the fingerprint, no script.
    let text = normal(&events(nmaps_eight(), false));
    assert!(text.contains(&block) && !text.contains("| fingerprint-strings"), "{text}");
}

#[test]
fn two_unrecognized_services_are_two_fingerprints_to_submit_individually() {
    let mut evs = events(nmaps_eight(), false);
    let Event::Service(s) = &evs[2] else { unreachable!() };
    let mut other = (**s).clone();
    other.port = 47002;
    other.replies.truncate(1);
    evs.insert(3, Event::Service(Box::new(other)));
    let text = normal(&evs);
    assert!(
        text.contains(
            "2 services unrecognized despite returning data. If you know the service/version, please submit the \
         following fingerprints at https://nmap.org/cgi-bin/submit.cgi?new-service :\n\
         ==============NEXT SERVICE FINGERPRINT (SUBMIT INDIVIDUALLY)==============\nSF-Port47001-TCP:"
        ),
        "{text}"
    );
    assert!(
        text.contains("==============NEXT SERVICE FINGERPRINT (SUBMIT INDIVIDUALLY)==============\nSF-Port47002-TCP:")
    );
}

#[test]
fn xml_has_nmaps_servicefp_and_script_element() {
    let doc = xml(&events(nmaps_eight(), true));
    let want =
        format!("servicefp=\"{}\" method=\"table\" conf=\"3\"/>", super::xml_esc::esc(&ours().replace("\nSF:", "")));
    assert!(doc.contains(&want), "{doc}");
    // The script element, byte for byte nmap's.
    let nmap =
        NMAP_XML.split("<script id=\"fingerprint-strings\"").nth(1).and_then(|s| s.split("</script>").next()).unwrap();
    let mine =
        doc.split("<script id=\"fingerprint-strings\"").nth(1).and_then(|s| s.split("</script>").next()).unwrap();
    assert_eq!(mine, nmap);
}

#[test]
fn grepable_output_has_neither_as_nmaps() {
    let mut buf = Vec::new();
    feed(&mut Grepable::new(&mut buf), &events(nmaps_eight(), true));
    let text = String::from_utf8(buf).unwrap();
    assert!(!text.contains("SF-Port") && !text.contains("MOON"), "{text}");
    assert!(text.contains("47001/open/tcp//"), "{text}");
}

#[test]
fn hostile_replies_reach_no_output_as_control_bytes() {
    let evil = b"\x1b]0;pwned\x07\x1b[2J\r\n|_fake: line\r\nNmap scan report for 6.6.6.6\0\xff\xfe\x9b31m\xc2\x85\xe2\x80\xae\\x1b".to_vec();
    let mut many: Vec<ProbeReply> =
        (0..16).map(|i| ProbeReply { probe: format!("P{i}"), data: evil.repeat(40)[..1024].to_vec() }).collect();
    many.insert(0, ProbeReply { probe: "NULL".into(), data: evil.clone() });
    let evs = events(many, true);
    let clean = |s: &str| s.bytes().all(|b| b == b'\n' || (0x20..0x7f).contains(&b));
    let text = normal(&evs);
    assert!(clean(&text), "{text:?}");
    assert!(!text.lines().any(|l| l.starts_with("Nmap scan report for 6.6.6.6")), "{text}");
    let doc = xml(&evs);
    assert!(clean(&doc), "{doc:?}");
    let mut buf = Vec::new();
    feed(&mut Text::new(&mut buf).as_report(true), &evs);
    let screen = String::from_utf8(buf).unwrap();
    assert!(clean(&screen), "{screen:?}");
    assert!(screen.contains("1 service unrecognized despite returning data."), "{screen}");
    // NDJSON: printable ASCII, read back the same.
    for e in &evs {
        let line = serde_json::to_string(e).unwrap();
        assert!(line.bytes().all(|b| (0x20..0x7f).contains(&b)), "{line}");
        assert_eq!(&serde_json::from_str::<Event>(&line).unwrap(), e);
    }
}
