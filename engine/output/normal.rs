//! nmap's normal output (`-oN`): the report people read, in nmap's layout.
//!
//! In: the scan's events. Out: the `# moonscan VERSION scan initiated ...
//! as: ARGS` line at the first event; at close, one report per host
//! (hosts in address order, ports in number order) and the `# moonscan done
//! at ...` line. A host's report is nmap's: `Nmap scan report for IP` (the
//! words nmap's parsers look for, nmaptocsv and the like; the header and
//! the last line name moonscan),
//! `Host is up.`, the `PORT STATE SERVICE [REASON] [VERSION]` table with
//! columns as wide as their widest cell and one space between them (VERSION
//! when service detection ran, REASON with [`Normal::with_reasons`]), each
//! plugin's output under its port (`| id: first line`, `|_last line`), and
//! `Service Info:` with the hosts, OS, devices and non-application CPEs the
//! services named; after the table, nmap's service fingerprint of each
//! port no rule identified (`SF-Port...`, see
//! [`crate::findings::service_fp`]). Script output is the findings' titles, one a line, as
//! in the XML's `output` (see [`super::Xml`]); control characters are
//! written as `\xNN`, as nmap does. Times are UTC.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::os_text::{self, OsView};
use super::report::{scripts, Collected, HostRec, Layout, Report, Unshown};
use super::screen::{screen, screen_text};
use crate::findings::{HostState, PortState};

/// nmap's normal output, written to `writer` (`Normal::new(writer)`).
pub type Normal<W> = Report<NormalLayout, W>;

/// The normal output's layout.
#[derive(Default)]
pub struct NormalLayout {
    reasons: bool,
}

impl<W: Write> Normal<W> {
    /// Also say why each port has its state (nmap's `--reason`: a REASON
    /// column and the reason the host is up).
    pub fn with_reasons(mut self, on: bool) -> Self {
        self.layout.reasons = on;
        self
    }
}

impl Layout for NormalLayout {
    fn head(&self, scan: &Collected, out: &mut dyn Write) -> io::Result<()> {
        out.write_all(scan.initiated_line(&screen_text(&scan.args_line())).as_bytes())
    }

    fn body(&self, scan: &Collected, out: &mut dyn Write) -> io::Result<()> {
        let mut text = String::new();
        let version_scan = scan.version_scan();
        let view = OsView::of(scan);
        let mut os_detection = false;
        for host in scan.hosts() {
            os_detection |= host.os.is_some_and(os_text::detected);
            host_report(&mut text, &host, version_scan, self.reasons, view);
            out.write_all(text.as_bytes())?;
            text.clear();
        }
        if os_detection {
            text.push_str(os_text::performed_line(version_scan));
        }
        text.push_str(&scan.done_line());
        out.write_all(text.as_bytes())
    }
}

/// `Not shown: 997 closed tcp ports (reset), 2 filtered tcp ports (no-response)`.
pub(super) fn not_shown_line(unshown: &[Unshown]) -> Option<String> {
    if unshown.is_empty() {
        return None;
    }
    let parts: Vec<String> = unshown
        .iter()
        .map(|u| {
            let s = if u.count == 1 { "" } else { "s" };
            format!("{} {} {} port{s} ({})", u.count, u.state.as_str(), u.proto, u.reason.as_str())
        })
        .collect();
    Some(format!("Not shown: {}", parts.join(", ")))
}

/// A row of the port table: cells, or a script line across the whole width.
enum Row {
    Cells(Vec<String>),
    Full(String),
}

pub(super) fn host_report(text: &mut String, host: &HostRec, version_scan: bool, reasons: bool, view: OsView) {
    host_report_by(text, "Nmap", host, version_scan, reasons, view)
}

/// A host's report, its first line naming `scanner` ("Nmap" in files for
/// nmap's parsers, "moonscan" on a terminal).
/// OS detection's lines come after the MAC address, as nmap prints them
/// (see [`os_text::normal_lines`]).
pub(super) fn host_report_by(
    text: &mut String,
    scanner: &str,
    host: &HostRec,
    version_scan: bool,
    reasons: bool,
    view: OsView,
) {
    let (reason, ttl) = host.status_reason();
    let ttl = if ttl > 0 { format!(" ttl {ttl}") } else { String::new() };
    match host.state() {
        HostState::Unknown => {
            let _ = writeln!(text, "{scanner} scan report for {}", host.label());
            return;
        }
        HostState::Down => {
            let why = if reasons { format!(", received {reason}") } else { String::new() };
            let _ = writeln!(text, "{scanner} scan report for {} [host down{why}]", host.label());
            return;
        }
        HostState::Up => {}
    }
    let _ = writeln!(text, "{scanner} scan report for {}", host.label());
    up_lines(text, host, reasons, reason, &ttl);
    let mac = host.status.and_then(|s| {
        let vendor = s.vendor.as_deref().unwrap_or("Unknown");
        s.mac.as_deref().map(|mac| format!("{mac} ({vendor})"))
    });
    let not_shown = not_shown_line(&host.unshown);
    if host.ports.is_empty() {
        if let Some(line) = not_shown {
            let all: u64 = host.unshown.iter().map(|u| u.count).sum();
            let _ = writeln!(text, "All {all} scanned ports on {} are in ignored states.", host.label());
            let _ = writeln!(text, "{line}");
        }
        if let Some(mac) = mac {
            let _ = writeln!(text, "MAC Address: {mac}");
        }
        if let Some(os) = host.os {
            text.push_str(&os_text::normal_lines(os, view));
        }
        host_scripts(text, host);
        traceroute(text, host);
        return;
    }
    // nmap's "Not shown" line, or an empty line in its place.
    match not_shown {
        Some(line) => {
            let _ = writeln!(text, "{line}");
        }
        None => text.push('\n'),
    }

    let rows = port_rows(host, version_scan, reasons);
    table(text, &rows);
    unrecognized(text, &host.service_fps());
    if let Some(mac) = mac {
        let _ = writeln!(text, "MAC Address: {mac}");
    }
    if let Some(os) = host.os {
        text.push_str(&os_text::normal_lines(os, view));
    }
    if let Some(info) = service_info(host) {
        let _ = writeln!(text, "{info}");
    }
    host_scripts(text, host);
    traceroute(text, host);
    text.push('\n');
}

/// "Host is up" (with `reasons`, why, and the `ttl` text), the other
/// addresses of the name, and a reverse DNS name that is not the name.
fn up_lines(text: &mut String, host: &HostRec<'_>, reasons: bool, reason: &str, ttl: &str) {
    let latency =
        host.status.and_then(|s| s.latency).map(|l| format!(" ({}s latency)", two_digits(l))).unwrap_or_default();
    if reasons {
        let _ = writeln!(text, "Host is up, received {reason}{ttl}{latency}.");
    } else if latency.is_empty() {
        text.push_str("Host is up.\n");
    } else {
        let _ = writeln!(text, "Host is up{latency}.");
    }
    if !host.others.is_empty() {
        let others: Vec<String> = host.others.iter().map(std::net::IpAddr::to_string).collect();
        let name = host.name.map(screen).unwrap_or_default();
        let _ = writeln!(text, "Other addresses for {name} (not scanned): {}", others.join(" "));
    }
    if let Some(ptr) = host.other_ptr() {
        let _ = writeln!(text, "rDNS record for {}: {}", host.ip, screen(ptr));
    }
}

/// The port table's rows: a header, each port, and its scripts' lines.
fn port_rows(host: &HostRec<'_>, version_scan: bool, reasons: bool) -> Vec<Row> {
    let mut header = vec!["PORT".to_string(), "STATE".into(), "SERVICE".into()];
    if reasons {
        header.push("REASON".into());
    }
    if version_scan {
        header.push("VERSION".into());
    }
    let mut rows = vec![Row::Cells(header)];
    for p in &host.ports {
        let mut cells =
            vec![format!("{}/{}", p.port, p.proto), p.state_str().into(), cell(&p.service_column(version_scan))];
        if reasons {
            cells.push(match p.ttl {
                Some(ttl) => format!("{} ttl {ttl}", p.reason),
                None => p.reason.to_string(),
            });
        }
        if version_scan {
            cells.push(cell(&p.full_version()));
        }
        rows.push(Row::Cells(cells));
        for s in scripts(&p.scripts) {
            rows.extend(script_lines(&s.id, &s.text).into_iter().map(Row::Full));
        }
    }
    rows
}

/// nmap's TRACEROUTE table, after the host scripts.
fn traceroute(text: &mut String, host: &HostRec<'_>) {
    if let Some(t) = host.trace {
        for line in super::trace_text::normal(t, host.trace_same) {
            let _ = writeln!(text, "{line}");
        }
    }
}

/// nmap's request for the fingerprints of services no rule identified,
/// after the port table (its words, which parsers look for; a
/// fingerprint is printable ASCII alone).
fn unrecognized(text: &mut String, fps: &[&str]) {
    if fps.is_empty() {
        return;
    }
    let s = if fps.len() > 1 { "s" } else { "" };
    let _ = writeln!(
        text,
        "{} service{s} unrecognized despite returning data. If you know the service/version, \
         please submit the following fingerprint{s} at https://nmap.org/cgi-bin/submit.cgi?new-service :",
        fps.len()
    );
    for fp in fps {
        if fps.len() > 1 {
            text.push_str("==============NEXT SERVICE FINGERPRINT (SUBMIT INDIVIDUALLY)==============\n");
        }
        let _ = writeln!(text, "{fp}");
    }
}

/// nmap's "Host script results:" and their lines, after a blank line.
fn host_scripts(text: &mut String, host: &HostRec) {
    let Some(hs) = host.host_scripts.filter(|h| !h.is_empty()) else { return };
    text.push_str("\nHost script results:\n");
    for s in scripts(hs) {
        for line in script_lines(&s.id, &s.text) {
            let _ = writeln!(text, "{line}");
        }
    }
}

/// Seconds with two significant digits, as nmap's `%.2g` writes latencies.
fn two_digits(l: f64) -> String {
    if l <= 0.0 || !l.is_finite() {
        return "0.000".into();
    }
    let decimals = (1 - l.log10().floor() as i32).clamp(0, 9) as usize;
    format!("{l:.decimals$}")
}

/// nmap's table: every column as wide as its widest cell, one space
/// between columns, no trailing spaces; full-width rows as they are.
fn table(text: &mut String, rows: &[Row]) {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        if let Row::Cells(cells) = row {
            for (i, c) in cells.iter().enumerate() {
                let w = c.chars().count();
                match widths.get_mut(i) {
                    Some(max) => *max = (*max).max(w),
                    None => widths.push(w),
                }
            }
        }
    }
    for row in rows {
        match row {
            Row::Cells(cells) => {
                let mut line = String::new();
                for (i, c) in cells.iter().enumerate() {
                    line.push_str(c);
                    if i + 1 < cells.len() {
                        let pad = widths[i] - c.chars().count() + 1;
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                }
                text.push_str(line.trim_end());
            }
            Row::Full(line) => text.push_str(line),
        }
        text.push('\n');
    }
}

/// nmap's `formatScriptOutput`: `| id: first`, `| more`, `|_last`.
fn script_lines(id: &str, output: &str) -> Vec<String> {
    let output = screen_text(output);
    if output.is_empty() {
        return Vec::new();
    }
    let mut lines: Vec<&str> = output.split('\n').collect();
    if output.ends_with('\n') {
        lines.pop();
    }
    let last = lines.len() - 1;
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let bar = if i < last { "| " } else { "|_" };
            let id = if i == 0 { format!("{}: ", screen_text(id)) } else { String::new() };
            format!("{bar}{id}{l}")
        })
        .collect()
}

/// nmap's `Service Info:` line from the open ports' services: hostnames,
/// OS types, device types and CPEs other than applications.
fn service_info(host: &HostRec) -> Option<String> {
    let (mut hosts, mut oses, mut devices, mut cpes): (Vec<&str>, Vec<&str>, Vec<&str>, Vec<&str>) = Default::default();
    fn add<'a>(list: &mut Vec<&'a str>, v: Option<&'a str>, fold: bool) {
        if let Some(v) = v {
            let seen = list.iter().any(|x| if fold { x.eq_ignore_ascii_case(v) } else { *x == v });
            if !seen {
                list.push(v);
            }
        }
    }
    for p in host.ports.iter().filter(|p| p.state == PortState::Open) {
        let Some(s) = &p.service else { continue };
        add(&mut hosts, s.id.hostname.as_deref(), true);
        add(&mut oses, s.id.os.as_deref(), false);
        add(&mut devices, s.id.device.as_deref(), false);
        for c in s.id.cpe.iter().filter(|c| !c.starts_with("cpe:/a")) {
            add(&mut cpes, Some(c), false);
        }
    }
    let mut parts = Vec::new();
    for (label, list) in [("Host", &hosts), ("OS", &oses), ("Device", &devices)] {
        if !list.is_empty() {
            parts.push(format!("{label}{}: {}", if list.len() == 1 { "" } else { "s" }, list.join(", ")));
        }
    }
    if !cpes.is_empty() {
        parts.push(format!("CPE: {}", cpes.join(", ")));
    }
    (!parts.is_empty()).then(|| cell(&format!("Service Info: {}", parts.join("; "))))
}

/// A table cell: on one line.
fn cell(s: &str) -> String {
    super::screen::screen_text(s).replace(['\n', '\t'], " ")
}

#[cfg(test)]
mod tests {
    use super::super::report::sample::*;
    use super::super::Sink;
    use super::*;
    use crate::findings::*;

    fn render(events: &[Event], reasons: bool) -> String {
        let mut buf = Vec::new();
        feed(&mut Normal::new(&mut buf).with_reasons(reasons), events);
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn each_name_of_an_address_is_a_host_report_of_its_own_named_as_nmap_does() {
        let text = render(&named_scan(Some("alpha.example")), false);
        let reports: Vec<&str> = text.split("Nmap scan report for ").skip(1).collect();
        assert_eq!(reports.len(), 3, "{text}");
        // The address alone first (named by reverse DNS), then each name.
        assert!(reports[0].starts_with("alpha.example (198.18.0.12)\nHost is up.\n"), "{text}");
        assert!(reports[0].contains("default-site") && !reports[0].contains("alpha-site"), "{text}");
        assert!(reports[1].starts_with(
            "alpha.example (198.18.0.12)\nHost is up.\nOther addresses for alpha.example (not scanned): 198.18.0.13\n"
        ));
        assert!(!reports[1].contains("rDNS record"), "the PTR is the name given: {text}");
        assert!(reports[1].contains("alpha-site") && !reports[1].contains("http-title"), "{text}");
        assert!(reports[2]
            .starts_with("beta.example (198.18.0.12)\nHost is up.\nrDNS record for 198.18.0.12: alpha.example\n"));
        assert!(reports[2].contains("beta-site") && reports[2].contains("beta's own site"), "{text}");
        assert!(text.contains("(3 hosts up)"), "{text}");
        // Without a reverse DNS name, the address alone is the address.
        let text = render(&named_scan(None), false);
        assert!(text.contains("Nmap scan report for 198.18.0.12\n") && !text.contains("rDNS"), "{text}");
    }

    #[test]
    fn host_script_results_come_after_the_ports_under_their_heading() {
        let mut evs = scan();
        let end = evs.pop().unwrap();
        let data = serde_json::json!({"dialects": ["202", "311"]});
        evs.push(host_result("198.18.0.2", 443, "smb-protocols", "\n  dialects: \n    202\n    311", data.clone()));
        // The same host script run on another port of the host: shown once.
        evs.push(host_result("198.18.0.2", 22, "smb-protocols", "\n  dialects: \n    202\n    311", data));
        evs.push(end);
        let text = render(&evs, false);
        let want = "\nHost script results:\n| smb-protocols: \n|   dialects: \n|     202\n|_    311\n\n";
        let at = text.find(want).unwrap_or_else(|| panic!("{text}"));
        // After 198.18.0.2's ports, before the next host's report.
        assert!(text.find("443/tcp").unwrap() < at, "{text}");
        assert!(at < text.find("Nmap scan report for 198.18.0.10").unwrap(), "{text}");
        assert_eq!(text.matches("Host script results:").count(), 1);
        assert_eq!(text.matches("| smb-protocols:").count(), 1, "{text}");
    }

    #[test]
    fn a_scan_reads_like_nmap() {
        let text = render(&scan(), false);
        let want = "\
# moonscan 0.1.0 scan initiated Sat Nov 21 16:41:03 2026 as: moonscan -sV -sC -p 22,80,443,8080 198.18.0.2 198.18.0.10
Nmap scan report for 198.18.0.2
Host is up.
Not shown: 1 filtered tcp port (no-response)
PORT    STATE  SERVICE  VERSION
22/tcp  open   ssh      OpenSSH 9.2p1 Debian 2+deb12u10 (protocol 2.0)
| ssh-hostkey: 
|_  256 a554a7d33ea2e0bb3358c39d677e3dfa (ED25519)
|_moonscan-findings: [low] ssh-hostkey: SSH host key shared
80/tcp  closed http
443/tcp open   ssl/http nginx 1.22.1
|_http-title: moonscan lab
| http-headers: Missing X-Frame-Options header
|   header: X-Frame-Options
| Server version disclosed
|_  server: nginx/1.22.1
Service Info: OS: Linux; CPE: cpe:/o:linux:linux_kernel

Nmap scan report for 198.18.0.10
Host is up.
Not shown: 2 closed tcp ports (reset), 1 filtered tcp port (no-response)
PORT     STATE SERVICE     VERSION
8080/tcp open  http-proxy?

# moonscan done at Sat Nov 21 16:41:04 2026 -- 2 IP addresses (2 hosts up) scanned in 1.50 seconds
";
        assert_eq!(text, want);
    }

    #[test]
    fn reasons_add_a_column_and_say_why_the_host_is_up() {
        let evs = vec![
            start("moonscan --reason -p 22,81 198.18.0.2", 2),
            port("198.18.0.2", 81, PortState::Closed, 0.0),
            port("198.18.0.2", 22, PortState::Open, 0.0),
            end(0.04, 0),
        ];
        let text = render(&evs, true);
        assert!(
            text.contains(
                "Host is up, received syn-ack ttl 64.\n\n\
             PORT   STATE  SERVICE   REASON\n\
             22/tcp open   ssh       syn-ack ttl 64\n\
             81/tcp closed hosts2-ns reset ttl 64\n\n"
            ),
            "{text}"
        );
        assert!(text.ends_with("-- 1 IP address (1 host up) scanned in 0.04 seconds\n"), "{text}");
    }

    #[test]
    fn script_output_lines_follow_nmap() {
        assert_eq!(script_lines("a", "one"), ["|_a: one"]);
        assert_eq!(script_lines("a", "one\ntwo\n"), ["| a: one", "|_two"]);
        assert_eq!(script_lines("a", "\n  x\n  y"), ["| a: ", "|   x", "|_  y"]);
        assert!(script_lines("a", "").is_empty());
        assert_eq!(script_lines("a", "bell\u{7}\r"), ["|_a: bell\\x07\\x0D"]);
    }

    #[test]
    fn only_the_header_is_written_before_close() {
        let mut buf = Vec::new();
        let mut sink = Normal::new(&mut buf);
        for e in &scan()[..5] {
            sink.record(e).unwrap();
        }
        sink.flush().unwrap();
        drop(sink);
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.starts_with("# moonscan 0.1.0 scan initiated "));
    }
}
