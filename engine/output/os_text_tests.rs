//! OS detection in every format, against nmap 7.93's own output: the
//! lab runs recorded in `tests/data/nmap-os/` (too many fingerprints
//! match: the lab has no open port to probe) line by line, and the
//! matched and guessed cases in the words of nmap's `output.cc`.

use super::super::report::sample::*;
use super::super::{Grepable, Normal, Sink, Xml};
use super::*;
use crate::findings::*;

/// The lab runs recorded: (name, verbosity).
const RECORDED: [(&str, usize); 6] =
    [("lab2-O", 0), ("lab2-Ov", 1), ("lab12-Ov", 1), ("lab12-Ovv", 2), ("lab5-Ov", 1), ("lab5-Ovv", 2)];

fn recorded(name: &str, ext: &str) -> String {
    let path = format!("{}/tests/data/nmap-os/{name}.{ext}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn render(sink: &mut dyn Sink, events: &[Event]) {
    feed(sink, events);
}

fn normal(events: &[Event]) -> String {
    let mut buf = Vec::new();
    render(&mut Normal::new(&mut buf), events);
    String::from_utf8(buf).unwrap()
}

fn xml_doc(events: &[Event]) -> String {
    let mut buf = Vec::new();
    render(&mut Xml::new(&mut buf), events);
    String::from_utf8(buf).unwrap()
}

fn grepable(events: &[Event]) -> String {
    let mut buf = Vec::new();
    render(&mut Grepable::new(&mut buf), events);
    String::from_utf8(buf).unwrap()
}

fn os_of(events: &[Event]) -> &OsEvent {
    events.iter().find_map(|e| if let Event::Os(o) = e { Some(&**o) } else { None }).unwrap()
}

/// The part of `text` from the first `from` to the end of the line of
/// the first `to` after it.
fn through_line<'a>(text: &'a str, from: &str, to: &str) -> &'a str {
    let a = text.find(from).unwrap_or_else(|| panic!("no {from:?} in {text}"));
    let b = text[a..].find(to).unwrap_or_else(|| panic!("no {to:?} after {from:?} in {text}")) + a;
    let c = text[b..].find('\n').map_or(text.len(), |c| b + c + 1);
    &text[a..c]
}

#[test]
fn the_lab_runs_read_as_nmaps_normal_output_line_by_line() {
    for (name, verbosity) in RECORDED {
        let events = lab_os_scan(name);
        let ours = normal(&events);
        let theirs = recorded(name, "nmap");
        // nmap's OS lines, from the first after the MAC or the port
        // table to the distance.
        let os_block = through_line(&theirs, "Too many fingerprints", "Network Distance:");
        let view = OsView { verbosity };
        assert_eq!(normal_lines(os_of(&events), view), os_block, "{name}");
        if verbosity < 2 {
            // The whole report but nmap's and moonscan's header and last
            // line, and nmap's "Read data files" line.
            let body = |text: &str| -> Vec<String> {
                let lines: Vec<&str> = text.lines().collect();
                lines[1..lines.len() - 1]
                    .iter()
                    .filter(|l| !l.starts_with("Read data files from:"))
                    .map(|l| l.to_string())
                    .collect()
            };
            assert_eq!(body(&ours), body(&theirs), "{name}:\n{ours}");
        } else {
            // -vv adds nmap's reasons and scan times, not asked of moonscan's
            // normal output here: the OS lines sit after the MAC address as nmap's.
            assert!(ours.contains(&format!("{os_block}\nOS detection performed.")), "{name}:\n{ours}");
            assert!(theirs.contains(&format!("{os_block}\nRead data files from:")), "{name}");
        }
    }
}

#[test]
fn the_lab_runs_write_nmaps_os_elements() {
    for (name, verbosity) in RECORDED {
        let events = lab_os_scan(name);
        let theirs = recorded(name, "xml");
        let want = through_line(&theirs, "<os>", "<distance ");
        let mut mine = String::new();
        xml(&mut mine, os_of(&events), OsView { verbosity });
        assert_eq!(mine, want, "{name}");
        // In the document, where nmap puts them: after the ports.
        let doc = xml_doc(&events);
        assert!(doc.contains(&format!("</ports>\n{want}")), "{name}:\n{doc}");
    }
}

#[test]
fn the_lab_runs_grep_as_nmaps() {
    for (name, _) in RECORDED {
        let events = lab_os_scan(name);
        let theirs = recorded(name, "gnmap");
        let host_lines = |text: &str| -> Vec<String> {
            text.lines().filter(|l| l.starts_with("Host: ")).map(String::from).collect()
        };
        assert_eq!(host_lines(&grepable(&events)), host_lines(&theirs), "{name}");
    }
}

/// nmap's `printosscanoutput` for a host with an exact match: the
/// classification lines, `OS details`, and with `-v` the uptime and the
/// sequence lines; with `-vv` the fingerprint after the details.
#[test]
fn an_exact_match_prints_as_nmap_does() {
    let os = linux_os("198.18.0.2");
    let quiet = "\
Device type: general purpose
Running: Linux 4.X|5.X
OS CPE: cpe:/o:linux:linux_kernel:4 cpe:/o:linux:linux_kernel:5
OS details: Linux 4.15 - 5.8
Network Distance: 1 hop
";
    assert_eq!(normal_lines(&os, OsView { verbosity: 0 }), quiet);
    let verbose = "\
Device type: general purpose
Running: Linux 4.X|5.X
OS CPE: cpe:/o:linux:linux_kernel:4 cpe:/o:linux:linux_kernel:5
OS details: Linux 4.15 - 5.8
Uptime guess: 12.340 days (since Sun Nov 15 23:10:53 2026)
Network Distance: 1 hop
TCP Sequence Prediction: Difficulty=262 (Good luck!)
IP ID Sequence Generation: All zeros
";
    assert_eq!(normal_lines(&os, OsView { verbosity: 1 }), verbose);
    let vv = normal_lines(&os, OsView { verbosity: 2 });
    assert!(vv.contains(
        "OS details: Linux 4.15 - 5.8\nTCP/IP fingerprint:\nOS:SCAN(V=7.93%E=4%D=11/28%OT=22%CT=80%CU=40125%PV=Y%DS=1%DC=D%G=Y%TM=6B0A8061%P=x\nOS:86_64-pc-linux-gnu)\n\nUptime guess:"
    ), "{vv}");
    assert_eq!(grepable_fields(&os), "\tOS: Linux 4.15 - 5.8\tSeq Index: 262\tIP ID Seq: All zeros");
    let mut odd = os.clone();
    odd.matches[0].name = "Linux\n4.15\t5.8".into();
    assert!(grepable_fields(&odd).starts_with("\tOS: Linux 4.15 5.8\tSeq"), "a field stays on its line");
    let mut doc = String::new();
    xml(&mut doc, &os, OsView { verbosity: 1 });
    assert_eq!(
        doc,
        "<os><portused state=\"open\" proto=\"tcp\" portid=\"22\"/>\n\
         <portused state=\"closed\" proto=\"tcp\" portid=\"80\"/>\n\
         <portused state=\"closed\" proto=\"udp\" portid=\"40125\"/>\n\
         <osmatch name=\"Linux 4.15 - 5.8\" accuracy=\"100\" line=\"69748\">\n\
         <osclass type=\"general purpose\" vendor=\"Linux\" osfamily=\"Linux\" osgen=\"4.X\" accuracy=\"100\"><cpe>cpe:/o:linux:linux_kernel:4</cpe></osclass>\n\
         <osclass type=\"general purpose\" vendor=\"Linux\" osfamily=\"Linux\" osgen=\"5.X\" accuracy=\"100\"><cpe>cpe:/o:linux:linux_kernel:5</cpe></osclass>\n\
         </osmatch>\n\
         </os>\n\
         <uptime seconds=\"1066210\" lastboot=\"Sun Nov 15 23:10:53 2026\"/>\n\
         <distance value=\"1\"/>\n\
         <tcpsequence index=\"262\" difficulty=\"Good luck!\" values=\"A1B2C3D4,1F2E3D4C,55AA55AA,12345678,9ABCDEF0,0FEDCBA9\"/>\n\
         <ipidsequence class=\"All zeros\" values=\"0,0,0,0,0,0\"/>\n\
         <tcptssequence class=\"1000HZ\" values=\"3F8A1C20,3F8A1C84,3F8A1CE8,3F8A1D4C,3F8A1DB0,3F8A1E14\"/>\n"
    );
    // With -vv nmap writes the fingerprint it printed, line breaks as references.
    let mut doc = String::new();
    xml(&mut doc, &os, OsView { verbosity: 2 });
    assert!(doc.contains(
        "</osmatch>\n<osfingerprint fingerprint=\"OS:SCAN(V=7.93%E=4%D=11/28%OT=22%CT=80%CU=40125%PV=Y%DS=1%DC=D%G=Y%TM=6B0A8061%P=x&#xa;OS:86_64-pc-linux-gnu)&#xa;\"/>\n</os>\n"
    ), "{doc}");
}

/// Guesses: shown when the fingerprint is not ideal (or with
/// `--osscan-guess`), each with its accuracy, within 10 points of the best,
/// and "Running (JUST GUESSING)".
#[test]
fn guesses_print_as_nmap_does() {
    let mut os = linux_os("198.18.0.2");
    os.exact = false;
    os.not_ideal = Some("Missing a closed TCP port so results incomplete".into());
    os.ports_used.retain(|p| p.state == "open");
    let guess = |name: &str, accuracy: u8, gen: &str| OsMatch {
        name: name.into(),
        accuracy,
        line: 1,
        classes: vec![OsClass {
            vendor: "Linux".into(),
            family: "Linux".into(),
            generation: Some(gen.into()),
            device_type: "general purpose".into(),
            accuracy,
            cpe: vec![format!("cpe:/o:linux:linux_kernel:{}", &gen[..1])],
        }],
    };
    os.matches =
        vec![guess("Linux 5.0 - 5.4", 96, "5.X"), guess("Linux 4.15", 93, "4.X"), guess("Linux 2.6.32", 85, "2.6.X")];
    let text = normal_lines(&os, OsView { verbosity: 0 });
    assert_eq!(
        text,
        "Warning: OSScan results may be unreliable because we could not find at least 1 open and 1 closed port\n\
         Device type: general purpose\n\
         Running (JUST GUESSING): Linux 5.X|4.X (96%)\n\
         OS CPE: cpe:/o:linux:linux_kernel:5 cpe:/o:linux:linux_kernel:4\n\
         Aggressive OS guesses: Linux 5.0 - 5.4 (96%), Linux 4.15 (93%)\n\
         No exact OS matches for host (test conditions non-ideal).\n\
         Network Distance: 1 hop\n"
    );
    let vv = normal_lines(&os, OsView { verbosity: 2 });
    assert!(
        vv.contains("OS fingerprint not ideal because: Missing a closed TCP port so results incomplete\nAggressive")
    );
    assert!(vv.contains("(test conditions non-ideal).\nTCP/IP fingerprint:\nOS:SCAN"), "{vv}");
    // A good fingerprint without an exact match: nmap asks for it, guesses only on request.
    os.not_ideal = None;
    let text = normal_lines(&os, OsView { verbosity: 0 });
    assert!(!text.contains("Aggressive") && !text.contains("Running"), "{text}");
    assert!(text.contains(
        "No exact OS matches for host (If you know what OS is running on it, see https://nmap.org/submit/ ).\nTCP/IP fingerprint:\nOS:SCAN"
    ));
    os.guess = true;
    let text = normal_lines(&os, OsView { verbosity: 0 });
    assert!(text.contains("Aggressive OS guesses: Linux 5.0 - 5.4 (96%), Linux 4.15 (93%)\nNo exact"), "{text}");
    // Guesses are in the XML whatever the verbosity, and not in -oG's OS field.
    let mut doc = String::new();
    xml(&mut doc, &os, OsView::default());
    assert_eq!(doc.matches("<osmatch ").count(), 2, "{doc}");
    assert!(!grepable_fields(&os).contains("OS:"));
    // No match at all.
    os.matches.clear();
    let text = normal_lines(&os, OsView::default());
    assert!(text.starts_with("Warning: OSScan"), "{text}");
    assert!(text.contains(
        "No OS matches for host (If you know what OS is running on it, see https://nmap.org/submit/ ).\nTCP/IP fingerprint:\n"
    ));
}

/// A report with OS detection, a traceroute and a passive hint: the OS
/// lines after the MAC address and before Service Info, the hint on its
/// own line with -v (none without), and nmap's closing remark.
#[test]
fn a_report_places_os_lines_where_nmap_does() {
    let text = normal(&os_scan());
    let a = text.find("443/tcp open").unwrap();
    let b = text.find("Device type: general purpose").unwrap_or_else(|| panic!("{text}"));
    let c = text.find("Service Info: OS: Linux").unwrap();
    assert!(a < b && b < c, "{text}");
    assert!(text.contains("Network Distance: 1 hop\nService Info:"), "{text}");
    // The hint is shown with -v only: without, nmap's layout line for line.
    assert!(text.contains("8080/tcp open  http-proxy?\n\n") && !text.contains("OS hint"), "{text}");
    let mut verbose = os_scan();
    if let Some(Event::ScanStart(st)) = verbose.first_mut() {
        st.settings.verbosity = 1;
    }
    let text_v = normal(&verbose);
    assert!(text_v.contains(
        "8080/tcp open  http-proxy?\nOS hint (passive, guess): Linux (ttl=64 win=65160 mss=1460 opts=M,S,T,N,W7)\n\n"
    ), "{text_v}");
    assert!(text.contains(
        "\n\nOS and Service detection performed. Please report any incorrect results at https://nmap.org/submit/ .\n# moonscan done"
    ), "{text}");
    assert!(!text.contains("Aggressive") && !text.contains("OS details: Linux (ttl"), "the hint is no match: {text}");
    // A hint alone is no OS detection: no closing remark, nothing in -oX or -oG.
    let mut hint_only = scan();
    let end = hint_only.pop().unwrap();
    hint_only.push(os_scan().into_iter().rev().find(|e| matches!(e, Event::Os(_))).unwrap());
    hint_only.push(end);
    if let Some(Event::ScanStart(st)) = hint_only.first_mut() {
        st.settings.verbosity = 1;
    }
    let text = normal(&hint_only);
    assert!(text.contains("OS hint (passive, guess): Linux") && !text.contains("detection performed"), "{text}");
    assert!(!xml_doc(&hint_only).contains("<os>"));
    assert!(!grepable(&hint_only).contains("OS:"));
    // The grepable line of the detected host ends with nmap's fields.
    let g = grepable(&os_scan());
    assert!(
        g.contains(
            "nginx 1.22.1/\tIgnored State: filtered (1)\tOS: Linux 4.15 - 5.8\tSeq Index: 262\tIP ID Seq: All zeros\n"
        ),
        "{g}"
    );
}

/// The XML of a scan with OS detection is valid against nmap's DTD
/// (xmllint, when installed).
#[test]
fn the_xml_is_valid_against_nmaps_dtd() {
    let dtd = std::path::Path::new("/usr/share/nmap/nmap.dtd");
    let lint = std::process::Command::new("xmllint").arg("--version").output();
    if !dtd.exists() || lint.is_err() {
        eprintln!("skipped: no nmap.dtd or xmllint");
        return;
    }
    let mut events = os_scan();
    // -vv: the fingerprint too.
    if let Event::ScanStart(s) = &mut events[0] {
        s.settings.verbosity = 2;
    }
    let doc = xml_doc(&events);
    assert!(doc.contains("<osfingerprint"), "{doc}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("os.xml");
    // The DTD names nmap the only scanner: moonscan says its own name.
    std::fs::write(&path, doc.replacen("<nmaprun scanner=\"moonscan\"", "<nmaprun scanner=\"nmap\"", 1)).unwrap();
    let out =
        std::process::Command::new("xmllint").args(["--noout", "--dtdvalid"]).arg(dtd).arg(&path).output().unwrap();
    assert!(out.status.success(), "{}\n{doc}", String::from_utf8_lossy(&out.stderr));
}

/// The value of attribute `name` in an element's text, entities undone.
fn attr(tag: &str, name: &str) -> Option<String> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let v = &tag[at..at + tag[at..].find('"')?];
    Some(
        v.replace("&#xa;", "\n")
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&"),
    )
}

/// Each host's `OsEvent` as nmap's `-oX` gives it (ports used, matches
/// with classes, fingerprint, uptime, distance, sequences), with what the
/// XML does not say: `guess` from the command line, `not_ideal` given.
fn recorded_os_events(xml: &str, not_ideal: Option<&str>) -> Vec<OsEvent> {
    // nmap writes the "--" of its command line as "-&#45;".
    let guess = xml.contains(" -&#45;osscan-guess ");
    xml.split("<host ")
        .skip(1)
        .map(|host| {
            let addr = attr(&host[host.find("<address ").unwrap()..], "addr").unwrap();
            let mut os = OsEvent::hint("0123456789abcdef".into(), addr.parse().unwrap(), OsHint::default(), 0.0);
            os.hint = None;
            os.guess = guess;
            os.not_ideal = not_ideal.map(String::from);
            let body = &host[host.find("<os>").unwrap()..host.find("</os>").unwrap()];
            for line in body.lines() {
                let tag = line.trim_start_matches("<os>");
                if tag.starts_with("<portused ") {
                    os.ports_used.push(PortUsed {
                        state: attr(tag, "state").unwrap(),
                        proto: if attr(tag, "proto").unwrap() == "tcp" { Proto::Tcp } else { Proto::Udp },
                        port: attr(tag, "portid").unwrap().parse().unwrap(),
                    });
                } else if tag.starts_with("<osmatch ") {
                    os.matches.push(OsMatch {
                        name: attr(tag, "name").unwrap(),
                        accuracy: attr(tag, "accuracy").unwrap().parse().unwrap(),
                        line: attr(tag, "line").unwrap().parse().unwrap(),
                        classes: Vec::new(),
                    });
                } else if tag.starts_with("<osclass ") {
                    let cpe = tag.split("<cpe>").skip(1).map(|c| c[..c.find("</cpe>").unwrap()].to_string()).collect();
                    os.matches.last_mut().unwrap().classes.push(OsClass {
                        vendor: attr(tag, "vendor").unwrap(),
                        family: attr(tag, "osfamily").unwrap(),
                        generation: attr(tag, "osgen"),
                        device_type: attr(tag, "type").unwrap(),
                        accuracy: attr(tag, "accuracy").unwrap().parse().unwrap(),
                        cpe,
                    });
                } else if tag.starts_with("<osfingerprint ") {
                    os.fingerprint = attr(tag, "fingerprint");
                }
            }
            os.exact = os.matches.first().is_some_and(|m| m.accuracy == 100);
            let after = &host[host.find("</os>").unwrap()..];
            let elem =
                |name: &str| after.find(&format!("<{name} ")).map(|i| &after[i..i + after[i..].find("/>").unwrap()]);
            os.uptime = elem("uptime").map(|t| Uptime {
                seconds: attr(t, "seconds").unwrap().parse().unwrap(),
                lastboot: attr(t, "lastboot").unwrap(),
            });
            os.distance = elem("distance").map(|t| attr(t, "value").unwrap().parse().unwrap());
            os.tcp_sequence = elem("tcpsequence").map(|t| Sequence {
                class: attr(t, "difficulty").unwrap(),
                index: attr(t, "index").map(|i| i.parse().unwrap()),
                values: attr(t, "values").unwrap(),
            });
            os.ip_id_sequence = elem("ipidsequence").map(|t| Sequence {
                class: attr(t, "class").unwrap(),
                index: None,
                values: attr(t, "values").unwrap(),
            });
            os
        })
        .collect()
}

/// Each host's OS block in nmap's `-oN`: the lines after its port table
/// (and MAC address) through "IP ID Sequence Generation".
fn recorded_os_blocks(text: &str) -> Vec<(String, String)> {
    text.split("Nmap scan report for ")
        .skip(1)
        .map(|host| {
            let addr = host.lines().next().unwrap().to_string();
            let lines: Vec<&str> = host.lines().collect();
            let from = lines.iter().position(|l| l.starts_with("PORT ")).unwrap() + 1;
            let from = from
                + lines[from..]
                    .iter()
                    .take_while(|l| l.starts_with(|c: char| c.is_ascii_digit()) || l.starts_with("MAC Address:"))
                    .count();
            let to = lines.iter().position(|l| l.starts_with("IP ID Sequence Generation:")).unwrap();
            (addr, lines[from..=to].iter().map(|l| format!("{l}\n")).collect())
        })
        .collect()
}

/// nmap's classification of 198.18.6.2 (its first ten classes, the most
/// nmap's summary looks at when guessing): moonscan's matching of nmap's
/// own fingerprint of the host (`nmap-fuzzy.xml`) against nmap 7.93's
/// nmap-os-db. The tenth class's CPE is the ninth distinct one, so nmap
/// prints no summary; it comes from a match at 89 %, which neither
/// recording lists.
fn classification_of_6_2() -> Vec<OsClass> {
    let class =
        |vendor: &str, family: &str, generation: Option<&str>, device_type: &str, accuracy: u8, cpe: &[&str]| OsClass {
            vendor: vendor.into(),
            family: family.into(),
            generation: generation.map(String::from),
            device_type: device_type.into(),
            accuracy,
            cpe: cpe.iter().map(|c| c.to_string()).collect(),
        };
    vec![
        class("Linux", "Linux", Some("2.6.X"), "general purpose", 91, &["cpe:/o:linux:linux_kernel:2.6"]),
        class("Asus", "embedded", None, "WAP", 91, &["cpe:/h:asus:rt-n10"]),
        class("AXIS", "embedded", None, "webcam", 91, &["cpe:/h:axis:211_network_camera"]),
        class("Linux", "Linux", Some("2.6.X"), "webcam", 91, &["cpe:/o:linux:linux_kernel:2.6.20"]),
        class("Linux", "Linux", Some("2.4.X"), "general purpose", 90, &["cpe:/o:linux:linux_kernel:2.4.18"]),
        class("Toshiba", "embedded", None, "general purpose", 90, &["cpe:/h:toshiba:magnia_sg10"]),
        class("Linux", "Linux", Some("2.4.X"), "WAP", 90, &["cpe:/o:linux:linux_kernel:2.4"]),
        class("Linux", "Linux", Some("2.6.X"), "WAP", 90, &["cpe:/o:linux:linux_kernel:2.6.22"]),
        class("Philips", "embedded", None, "specialized", 89, &[]),
        class("Linux", "Linux", None, "specialized", 89, &["cpe:/o:linux:linux_kernel"]),
    ]
}

/// nmap 7.93's `-O -v -p 22,80` (no closed port: not ideal, guesses
/// printed, the warning) and `-O -v --osscan-guess -p 1,22,80` (guesses
/// asked for, the fingerprint printed), each host's OS block line by line.
#[test]
fn guessed_hosts_read_as_nmaps_normal_output_line_by_line() {
    for (name, not_ideal) in
        [("nmap-guess", Some("Missing a closed TCP port so results incomplete")), ("nmap-fuzzy", None)]
    {
        let events = recorded_os_events(&recorded(name, "xml"), not_ideal);
        let blocks = recorded_os_blocks(&recorded(name, "nmap"));
        assert_eq!(events.len(), 2, "{name}");
        assert_eq!(blocks.len(), 2, "{name}");
        for (mut os, (addr, theirs)) in events.into_iter().zip(blocks) {
            assert_eq!(os.ip.to_string(), addr, "{name}");
            let view = OsView { verbosity: 1 };
            if addr == "198.18.6.2" {
                // The matches shown alone would make a summary nmap does not print.
                assert!(
                    normal_lines(&os, view).contains("Device type: "),
                    "{name} {addr}:\n{}",
                    normal_lines(&os, view)
                );
                os.classification = classification_of_6_2();
            }
            let ours = normal_lines(&os, view);
            assert_eq!(ours.lines().collect::<Vec<_>>(), theirs.lines().collect::<Vec<_>>(), "{name} {addr}");
            assert_eq!(ours, theirs, "{name} {addr}");
        }
    }
}

/// nmap prints the summary of its classification before saying that too
/// many fingerprints match (9 to 36 exact ones); with more than 8
/// families (or device types, or CPEs) it prints no summary at all.
#[test]
fn the_summary_follows_nmaps_classification() {
    let mut os = linux_os("198.18.0.2");
    let linux = os.matches[0].classes.clone();
    os.matches.clear();
    os.too_many = true;
    os.classification = linux.clone();
    assert_eq!(
        normal_lines(&os, OsView { verbosity: 0 }),
        "Device type: general purpose\n\
         Running: Linux 4.X|5.X\n\
         OS CPE: cpe:/o:linux:linux_kernel:4 cpe:/o:linux:linux_kernel:5\n\
         Too many fingerprints match this host to give specific OS details\n\
         Network Distance: 1 hop\n"
    );
    // Nine families: no summary.
    os.classification = (0..9)
        .map(|i| OsClass {
            vendor: format!("Vendor{i}"),
            family: "embedded".into(),
            cpe: Vec::new(),
            ..linux[0].clone()
        })
        .collect();
    assert_eq!(
        normal_lines(&os, OsView { verbosity: 0 }),
        "Too many fingerprints match this host to give specific OS details\nNetwork Distance: 1 hop\n"
    );
    // Eight: each named, exact ones without an accuracy.
    os.classification.truncate(8);
    let text = normal_lines(&os, OsView { verbosity: 0 });
    assert!(
        text.starts_with("Device type: general purpose\nRunning: Vendor0 embedded 4.X, Vendor1 embedded 4.X"),
        "{text}"
    );
    assert!(!text.contains("OS CPE"), "{text}");
}
