//! A traceroute as nmap 7.93 writes it: the `TRACEROUTE` table of `-oN`
//! and the `<trace>` element of `-oX`.
//!
//! In: a [`TraceEvent`] and, for the normal output, which earlier host
//! it shares its first hops with (from [`crate::discovery::trace`]).
//! Out: lines of text, or one XML fragment. What always holds: pure
//! functions, no I/O; the table is laid out as nmap's `NmapOutputTable`
//! does (each column as wide as its widest cell plus one space, no
//! trailing spaces, the "same as" cell spanning without widening its
//! column); a trace without hops (a loopback target) renders as nothing,
//! as in nmap. Port 0 stands for nmap's trace of a directly connected
//! target, which names no port (`TRACEROUTE`, bare `<trace>`):
//! [`TraceEvent`] has no field of its own for it.

use std::fmt::Write as _;
use std::net::IpAddr;

use crate::findings::{TraceEvent, TraceHop};

/// nmap's "display name" of a hop: `name (address)`, or the address.
fn display_name(hop: &TraceHop, ip: IpAddr) -> String {
    match hop.host.as_deref().filter(|h| !h.is_empty()) {
        Some(name) => format!("{name} ({ip})"),
        None => ip.to_string(),
    }
}

/// One row of the table: cells by column (`None` empty); `span` marks the
/// RTT cell that may run past its column.
struct Row {
    cells: [Option<String>; 3],
    span: bool,
}

/// The `-oN` lines of a traceroute (a blank line first, as nmap writes
/// it). `same_as`: the host whose trace this one follows up to that hop
/// (nmap's "Hops 1-N are the same as for X"); the hops up to it are not
/// listed.
pub fn normal(ev: &TraceEvent, same_as: Option<(IpAddr, u8)>) -> Vec<String> {
    if ev.hops.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![String::new()];
    lines.push(if ev.port == 0 {
        "TRACEROUTE".to_string()
    } else {
        format!("TRACEROUTE (using port {}/{})", ev.port, ev.proto.as_str())
    });
    let mut rows = vec![Row { cells: [Some("HOP".into()), Some("RTT".into()), Some("ADDRESS".into())], span: false }];
    let mut hops = ev.hops.as_slice();
    if let Some((host, upto)) = same_as.filter(|&(_, n)| n > 0) {
        let shared = hops.iter().take_while(|h| h.ttl <= upto).count();
        hops = &hops[shared..];
        let text = if upto == 1 {
            format!("Hop 1 is the same as for {host}")
        } else {
            format!("Hops 1-{upto} are the same as for {host}")
        };
        rows.push(Row { cells: [Some("-".into()), Some(text), None], span: true });
    }
    let mut i = 0;
    while i < hops.len() {
        let hop = &hops[i];
        let ttl = Some(hop.ttl.to_string());
        match hop.ip {
            None => {
                // A run of silent hops is one row.
                let mut end = hop.ttl;
                while i < hops.len() && hops[i].ip.is_none() {
                    end = hops[i].ttl;
                    i += 1;
                }
                let rtt = if end == hop.ttl { "...".to_string() } else { format!("... {end}") };
                rows.push(Row { cells: [ttl, Some(rtt), None], span: false });
            }
            Some(ip) => {
                let rtt = match hop.rtt_ms {
                    Some(ms) if ms >= 0.0 => format!("{ms:.2} ms"),
                    _ => "--".to_string(),
                };
                rows.push(Row { cells: [ttl, Some(rtt), Some(display_name(hop, ip))], span: false });
                i += 1;
            }
        }
    }
    let mut width = [0usize; 3];
    for r in &rows {
        for (c, cell) in r.cells.iter().enumerate() {
            if let Some(s) = cell {
                if !(r.span && c == 1) {
                    width[c] = width[c].max(s.chars().count());
                }
            }
        }
    }
    for r in &rows {
        let filled = r.cells.iter().filter(|c| c.is_some()).count();
        let mut line = String::new();
        let mut written = 0;
        for (c, cell) in r.cells.iter().enumerate() {
            let len = cell.as_ref().map_or(0, |s| s.chars().count());
            if let Some(s) = cell {
                line.push_str(s);
                written += 1;
            }
            // Padding only while cells of the row remain to be written.
            if written < filled {
                line.extend(std::iter::repeat_n(' ', (width[c] + 1).saturating_sub(len)));
            }
        }
        lines.push(line);
    }
    lines
}

/// The `-oX` `<trace>` element, as nmap writes it (silent hops left out),
/// ending with a newline.
pub fn xml(ev: &TraceEvent) -> String {
    if ev.hops.is_empty() {
        return String::new();
    }
    let mut out = if ev.port == 0 {
        "<trace>\n".to_string()
    } else {
        format!("<trace port=\"{}\" proto=\"{}\">\n", ev.port, ev.proto.as_str())
    };
    for hop in &ev.hops {
        let Some(ip) = hop.ip else { continue };
        let _ = write!(out, "<hop ttl=\"{}\" ipaddr=\"{ip}\"", hop.ttl);
        match hop.rtt_ms {
            Some(ms) if ms >= 0.0 => {
                let _ = write!(out, " rtt=\"{ms:.2}\"");
            }
            _ => out.push_str(" rtt=\"--\""),
        }
        if let Some(name) = hop.host.as_deref().filter(|h| !h.is_empty()) {
            let _ = write!(out, " host=\"{}\"", super::xml_esc::esc(name));
        }
        out.push_str("/>\n");
    }
    out.push_str("</trace>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Proto;

    fn hop(ttl: u8, ip: Option<&str>, rtt: Option<f64>) -> TraceHop {
        TraceHop { ttl, ip: ip.map(|s| s.parse().unwrap()), rtt_ms: rtt, host: None }
    }

    fn ev(ip: &str, port: u16, proto: Proto, hops: Vec<TraceHop>) -> TraceEvent {
        TraceEvent { scan_id: "s".into(), ip: ip.parse().unwrap(), port, proto, hops, t: 0.0 }
    }

    /// The TRACEROUTE block of an nmap -oN recording: from the line
    /// before `TRACEROUTE` to the blank line after the table.
    fn blocks(recording: &str) -> Vec<Vec<String>> {
        let lines: Vec<&str> = recording.lines().collect();
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            if l.starts_with("TRACEROUTE") {
                let mut b = vec![String::new()];
                b.extend(lines[i..].iter().take_while(|l| !l.is_empty()).map(|l| l.to_string()));
                out.push(b);
            }
        }
        out
    }

    /// The `<trace>` elements of an nmap -oX recording.
    fn xml_blocks(recording: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = recording;
        while let Some(at) = rest.find("<trace") {
            let end = rest[at..].find("</trace>").unwrap() + at + "</trace>".len();
            out.push(format!("{}\n", &rest[at..end]));
            rest = &rest[end..];
        }
        out
    }

    const N_22: &str = include_str!("../../tests/data/nmap-trace/sS-p22.nmap");
    const X_22: &str = include_str!("../../tests/data/nmap-trace/sS-p22.xml");

    #[test]
    fn a_direct_and_a_two_hop_host_as_nmap_writes_them() {
        let direct = ev("198.18.0.2", 0, Proto::Tcp, vec![hop(1, Some("198.18.0.2"), Some(0.04))]);
        let routed = ev(
            "198.18.1.2",
            22,
            Proto::Tcp,
            vec![hop(1, Some("198.18.0.2"), Some(0.02)), hop(2, Some("198.18.1.2"), Some(0.01))],
        );
        let want = blocks(N_22);
        assert_eq!(normal(&direct, None), want[0]);
        assert_eq!(normal(&routed, None), want[1]);
        let want = xml_blocks(X_22);
        assert_eq!(xml(&direct), want[0]);
        assert_eq!(xml(&routed), want[1]);
    }

    /// The traces of an nmap -oX recording, read back as events.
    fn events_of(recording: &str) -> Vec<TraceEvent> {
        let attr = |tag: &str, name: &str| -> Option<String> {
            let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
            Some(tag[at..at + tag[at..].find('"')?].to_string())
        };
        xml_blocks(recording)
            .iter()
            .map(|b| {
                let head = b.lines().next().unwrap();
                let port = attr(head, "port").map_or(0, |p| p.parse().unwrap());
                let proto = attr(head, "proto").and_then(|p| Proto::parse(&p)).unwrap_or(Proto::Tcp);
                let hops: Vec<TraceHop> = b
                    .lines()
                    .filter(|l| l.starts_with("<hop "))
                    .map(|l| TraceHop {
                        ttl: attr(l, "ttl").unwrap().parse().unwrap(),
                        ip: attr(l, "ipaddr").map(|a| a.parse().unwrap()),
                        rtt_ms: attr(l, "rtt").and_then(|r| r.parse().ok()),
                        host: attr(l, "host"),
                    })
                    .collect();
                let ip = hops.last().and_then(|h| h.ip).unwrap();
                TraceEvent { scan_id: "s".into(), ip, port, proto, hops, t: 0.0 }
            })
            .collect()
    }

    #[test]
    fn every_recording_of_nmap_is_written_back_as_nmap_wrote_it() {
        let recordings = [
            (N_22, X_22),
            (
                include_str!("../../tests/data/nmap-trace/sS-p22-twice.nmap"),
                include_str!("../../tests/data/nmap-trace/sS-p22-twice.xml"),
            ),
            (
                include_str!("../../tests/data/nmap-trace/sS-p80.nmap"),
                include_str!("../../tests/data/nmap-trace/sS-p80.xml"),
            ),
            (
                include_str!("../../tests/data/nmap-trace/sU-p53.nmap"),
                include_str!("../../tests/data/nmap-trace/sU-p53.xml"),
            ),
        ];
        for (n, x) in recordings {
            let (events, text, elements) = (events_of(x), blocks(n), xml_blocks(x));
            assert_eq!(events.len(), text.len());
            for ((e, t), el) in events.iter().zip(&text).zip(&elements) {
                assert_eq!(&normal(e, None), t);
                assert_eq!(&xml(e), el);
            }
        }
    }

    #[test]
    fn shared_hops_are_one_line_and_not_listed() {
        let e = ev(
            "198.18.1.2",
            22,
            Proto::Tcp,
            vec![hop(1, Some("198.18.0.2"), Some(0.02)), hop(2, Some("198.18.1.2"), Some(0.05))],
        );
        let ip: IpAddr = "198.18.1.2".parse().unwrap();
        assert_eq!(
            normal(&e, Some((ip, 1))),
            [
                "",
                "TRACEROUTE (using port 22/tcp)",
                "HOP RTT     ADDRESS",
                "-   Hop 1 is the same as for 198.18.1.2",
                "2   0.05 ms 198.18.1.2"
            ]
        );
        let e = ev(
            "10.0.0.9",
            443,
            Proto::Tcp,
            (1..=4)
                .map(|t| hop(t, Some("10.0.0.1"), Some(1.5)))
                .chain([hop(5, Some("10.0.0.9"), Some(12.25))])
                .collect(),
        );
        let lines = normal(&e, Some(("10.0.0.8".parse().unwrap(), 4)));
        assert_eq!(lines[3], "-   Hops 1-4 are the same as for 10.0.0.8");
        assert_eq!(lines[4], "5   12.25 ms 10.0.0.9");
        // The XML lists every hop.
        assert_eq!(xml(&e).matches("<hop ").count(), 5);
    }

    #[test]
    fn silent_hops_are_runs_of_dots_and_widths_follow_the_widest_cell() {
        let e = ev(
            "10.0.0.9",
            53,
            Proto::Udp,
            vec![
                hop(1, Some("10.0.0.1"), Some(0.5)),
                hop(2, None, None),
                hop(3, None, None),
                hop(4, None, None),
                hop(5, Some("10.0.0.5"), Some(123.456)),
                hop(6, None, None),
                TraceHop { host: Some("gw.example".into()), ..hop(7, Some("10.0.0.9"), None) },
            ],
        );
        assert_eq!(
            normal(&e, None),
            [
                "",
                "TRACEROUTE (using port 53/udp)",
                "HOP RTT       ADDRESS",
                "1   0.50 ms   10.0.0.1",
                "2   ... 4",
                "5   123.46 ms 10.0.0.5",
                "6   ...",
                "7   --        gw.example (10.0.0.9)",
            ]
        );
        assert_eq!(
            xml(&e),
            "<trace port=\"53\" proto=\"udp\">\n<hop ttl=\"1\" ipaddr=\"10.0.0.1\" rtt=\"0.50\"/>\n\
             <hop ttl=\"5\" ipaddr=\"10.0.0.5\" rtt=\"123.46\"/>\n\
             <hop ttl=\"7\" ipaddr=\"10.0.0.9\" rtt=\"--\" host=\"gw.example\"/>\n</trace>\n"
        );
    }

    #[test]
    fn a_trace_without_hops_is_not_written() {
        let e = ev("127.0.0.1", 80, Proto::Tcp, vec![]);
        assert!(normal(&e, None).is_empty());
        assert!(xml(&e).is_empty());
    }
}
