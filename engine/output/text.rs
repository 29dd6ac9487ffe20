//! Text for people: one line per discovery as it happens, a summary at the end.
//! In report mode ([`Text::as_report`], what a terminal gets), nmap's
//! screen instead: "Discovered open port" lines as they come only with
//! `-v`, and at the end each host's report as nmap prints it (the PORT
//! STATE SERVICE VERSION table, script output under each port), then the
//! summary line.
//!
//! What always holds: every string that came from a server, a plugin or a
//! file is [`screen`]ed, so what reaches the terminal cannot drive it or
//! fake a line.

use std::io::{self, BufWriter, Write};

use super::report::Collected;
use super::screen::screen;
use super::Sink;
use crate::findings::{Event, ServiceMethod};

/// Past this many probes planned, report mode streams as the plain text
/// does: the report would hold the whole scan in memory and say nothing
/// until its end.
pub const REPORT_MAX_PROBES: u64 = 1 << 20;

pub struct Text<W: Write> {
    out: BufWriter<W>,
    reasons: bool,
    logs: bool,
    /// Report mode: the scan so far, and whether to stream discoveries.
    report: Option<(Box<Collected>, bool)>,
    /// nmap's folders, where a report reads MAC vendors (`None`: the default ones).
    nmap_dirs: Option<Vec<std::path::PathBuf>>,
}

impl<W: Write> Text<W> {
    pub fn new(writer: W) -> Text<W> {
        Text { out: BufWriter::new(writer), reasons: false, logs: false, report: None, nmap_dirs: None }
    }

    /// nmap's screen: discoveries stream only when `verbose`; each host's
    /// report (table and script output) comes at the end, before the summary
    /// (for scans of at most `REPORT_MAX_PROBES` probes; bigger ones stream).
    pub fn as_report(mut self, verbose: bool) -> Text<W> {
        let mut scan = Box::<Collected>::default();
        scan.nmap_dirs = self.nmap_dirs.clone();
        self.report = Some((scan, verbose));
        self
    }

    /// In report mode, reads MAC vendors from nmap's folders `dirs`
    /// (default: [`crate::places::Places`]'s).
    pub fn with_nmap_dirs(mut self, dirs: Vec<std::path::PathBuf>) -> Text<W> {
        if let Some((scan, _)) = &mut self.report {
            scan.nmap_dirs = Some(dirs.clone());
        }
        self.nmap_dirs = Some(dirs);
        self
    }

    /// Also show plugins' log lines.
    pub fn with_logs(mut self, on: bool) -> Text<W> {
        self.logs = on;
        self
    }

    /// Also say why each port has its state (nmap's `--reason`).
    pub fn with_reasons(mut self, on: bool) -> Text<W> {
        self.reasons = on;
        self
    }
}

impl<W: Write> Text<W> {
    /// In report mode the event is kept for the report at the end, and
    /// only some are written as they come: whether this one is (always,
    /// outside report mode).
    fn writes_now(&mut self, event: &Event) -> bool {
        // A scan too big to hold for one report at the end streams instead.
        if let (Event::ScanStart(s), Some(_)) = (event, &self.report) {
            if s.probes_planned > REPORT_MAX_PROBES {
                self.report = None;
            }
        }
        if let Some((scan, verbose)) = &mut self.report {
            scan.record(event);
            return match event {
                Event::ScanStart(_) | Event::Error(_) => true,
                Event::Log(_) => self.logs,
                Event::Port(p) => *verbose && p.state == crate::findings::PortState::Open,
                Event::Host(h) => *verbose && h.state != crate::findings::HostState::Unknown,
                Event::Timing(t) => *verbose && t.slowdown.is_some(),
                // The hosts' reports, then this, at close.
                Event::ScanEnd(_) => false,
                _ => false,
            };
        }
        true
    }
}

impl<W: Write + Send> Sink for Text<W> {
    fn record(&mut self, event: &Event) -> io::Result<()> {
        if !self.writes_now(event) {
            return Ok(());
        }
        let o = &mut self.out;
        match event {
            Event::ScanStart(s) => writeln!(
                o,
                "Starting moonscan {} at {} ({} probes planned, seed {})",
                env!("CARGO_PKG_VERSION"),
                humantime::format_rfc3339_millis(s.started),
                s.probes_planned,
                s.seed
            ),
            Event::Host(h) => host_line(o, h, self.reasons),
            Event::Port(p) => {
                let state = p.state.as_str();
                write!(o, "Discovered {state} port {}/{} on {}", p.port, p.proto, p.ip)?;
                match (self.reasons, p.ttl) {
                    (true, Some(ttl)) => writeln!(o, " ({}, ttl {ttl})", p.reason),
                    (true, None) => writeln!(o, " ({})", p.reason),
                    (false, _) => writeln!(o),
                }
            }
            Event::Service(s) => service_lines(o, s),
            // A script result: its text, as nmap prints it under a port.
            Event::Script(r) => {
                let text =
                    r.output.trim_end_matches('\n').split('\n').map(|l| screen(l)).collect::<Vec<_>>().join("\n|");
                writeln!(o, "| {} on {}/{} on {}: {text}", screen(&r.plugin), r.port, r.proto, r.ip)
            }
            Event::Finding(f) => {
                let (plugin, title) = (screen(&f.plugin), screen(&f.title));
                write!(o, "| {plugin} on {}/{} on {} [{}]: {title}", f.port, f.proto, f.ip, f.severity)?;
                writeln!(o, "{}", data_text(&f.data))
            }
            Event::Log(l) if self.logs => {
                writeln!(o, "| {} on {}/tcp on {} log: {}", screen(&l.plugin), l.port, l.ip, screen(&l.message))
            }
            Event::Timing(t) => match &t.slowdown {
                Some(why) => writeln!(o, "Slowing down: {}", screen(why)),
                None => Ok(()),
            },
            Event::Rdns(r) => writeln!(o, "Reverse DNS: {} is {}", r.ip, screen(&r.name)),
            Event::Os(e) => match (super::os_text::best(e), &e.hint) {
                (Some((name, acc)), _) => writeln!(o, "OS: {} ({acc}%) on {}", screen(name), e.ip),
                (None, Some(h)) => writeln!(o, "{} on {}", super::os_text::hint_line(h), e.ip),
                (None, None) => Ok(()),
            },
            Event::Trace(e) => {
                let last = e.hops.iter().rev().find_map(|h| h.ip);
                let to = last.map(|ip| format!(", last {ip}")).unwrap_or_default();
                writeln!(
                    o,
                    "Traceroute to {}: {} hop{}{to}",
                    e.ip,
                    e.hops.len(),
                    if e.hops.len() == 1 { "" } else { "s" }
                )
            }
            Event::Log(_) | Event::Extraports(_) => Ok(()),
            Event::Error(e) => error_line(o, e),
            Event::ScanEnd(e) => end_line(o, e),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn close(&mut self) -> io::Result<()> {
        if let Some((scan, _)) = self.report.take() {
            let mut text = String::new();
            let version_scan = scan.version_scan();
            let view = super::os_text::OsView::of(&scan);
            let mut os_detection = false;
            for host in scan.hosts() {
                os_detection |= host.os.is_some_and(super::os_text::detected);
                super::normal::host_report_by(&mut text, "moonscan", &host, version_scan, self.reasons, view);
            }
            if os_detection {
                text.push_str(super::os_text::performed_line(version_scan));
            }
            self.out.write_all(text.as_bytes())?;
            if let Some(end) = &scan.end {
                self.record(&Event::ScanEnd(end.clone()))?;
            }
        }
        self.out.flush()
    }
}

/// A host's state (and with `reasons`, why, for a target of unknown state).
fn host_line(o: &mut impl Write, h: &crate::findings::HostEvent, reasons: bool) -> io::Result<()> {
    match h.state {
        crate::findings::HostState::Unknown => write!(o, "Target {}", h.ip)?,
        state => write!(o, "Host {} is {state}", h.ip)?,
    }
    if h.state != crate::findings::HostState::Unknown || reasons {
        write!(o, " ({}", h.reason)?;
        if let Some(l) = h.latency {
            write!(o, ", {l:.4}s latency")?;
        }
        if let Some(mac) = &h.mac {
            write!(o, ", MAC {mac}")?;
        }
        write!(o, ")")?;
    }
    writeln!(o)
}

/// A service as detected, and its TLS session with the first certificate.
fn service_lines(o: &mut impl Write, s: &crate::findings::Service) -> io::Result<()> {
    let tunnel = if s.tunnel == Some(crate::findings::Tunnel::Ssl) && s.id.service != "ssl" { "ssl/" } else { "" };
    let guess = if s.method == ServiceMethod::Probed { "" } else { "?" };
    write!(o, "Service on {}/{} on {}: {tunnel}{}{guess}", s.port, s.proto, s.ip, screen(&s.id.service))?;
    let words: Vec<&str> = [&s.id.product, &s.id.version].iter().filter_map(|f| f.as_deref()).collect();
    if !words.is_empty() {
        write!(o, " {}", screen(&words.join(" ")))?;
    }
    if let Some(info) = &s.id.info {
        write!(o, " ({})", screen(info))?;
    }
    for (label, v) in [("Host", &s.id.hostname), ("OS", &s.id.os), ("Device", &s.id.device)] {
        if let Some(v) = v {
            write!(o, "; {label}: {}", screen(v))?;
        }
    }
    writeln!(o)?;
    if let Some(tls) = &s.tls {
        if let Some(p) = &tls.starttls {
            write!(o, "  TLS (STARTTLS {}): {} {}", screen(p), screen(&tls.version), screen(&tls.cipher))?;
        } else {
            write!(o, "  TLS: {} {}", screen(&tls.version), screen(&tls.cipher))?;
        }
        // The key exchange as nmap's ssl-enum-ciphers shows it.
        match (&tls.group, tls.kx_bits) {
            (Some(g), _) => write!(o, " ({})", screen(g))?,
            (None, bits) if bits > 0 && !tls.kx.is_empty() => write!(o, " ({} {bits})", screen(&tls.kx))?,
            _ => {}
        }
        if tls.path == "hello" {
            write!(o, ", first flight only")?;
        }
        if let Some(alpn) = &tls.alpn {
            write!(o, ", ALPN {}", screen(alpn))?;
        }
        match tls.chain_cut {
            0 => writeln!(o, ", {} certificate(s)", tls.chain.len())?,
            cut => writeln!(o, ", {} certificate(s) ({cut} more sent, not kept)", tls.chain.len())?,
        }
        if let Some(c) = tls.chain.first() {
            writeln!(o, "  Certificate: {}; issuer: {}", screen(&c.subject), screen(&c.issuer))?;
            if !c.san.is_empty() {
                writeln!(o, "  Subject Alternative Names: {}", screen(&c.san.join(", ")))?;
            }
            writeln!(o, "  Not valid before: {}; not valid after: {}", screen(&c.not_before), screen(&c.not_after))?;
        }
    }
    Ok(())
}

/// An error, with where it happened and which plugin it came from.
fn error_line(o: &mut impl Write, e: &crate::findings::ErrorEvent) -> io::Result<()> {
    let at = match (e.ip, e.port) {
        (Some(ip), Some(port)) => format!(" {}", std::net::SocketAddr::new(ip, port)),
        (Some(ip), None) => format!(" {ip}"),
        _ => String::new(),
    };
    match &e.plugin {
        Some(p) => writeln!(
            o,
            "Error{at} [{}] ({}): {}",
            screen(p),
            serde_json::to_value(e.kind).unwrap_or_default().as_str().unwrap_or(""),
            screen(&e.message)
        ),
        None => writeln!(o, "Error{at}: {}", screen(&e.message)),
    }
}

/// The summary line.
fn end_line(o: &mut impl Write, e: &crate::findings::ScanEnd) -> io::Result<()> {
    writeln!(
        o,
        "moonscan done{}: {}{} probes sent, {} open, {} closed, {} filtered, {} findings, {} script results, {} errors in {:.2} s",
        if e.interrupted { " (interrupted)" } else { "" },
        if e.hosts_up + e.hosts_down > 0 {
            format!("{} of {} hosts up, ", e.hosts_up, e.hosts_up + e.hosts_down)
        } else {
            String::new()
        },
        e.probes_sent,
        e.open,
        e.closed,
        e.filtered,
        e.findings,
        e.scripts,
        e.errors,
        e.elapsed
    )
}

/// Finding data in a line or an indented block: `k: v` pairs for a flat
/// object, JSON otherwise.
fn data_text(data: &serde_json::Value) -> String {
    use serde_json::Value;
    let scalar = |v: &Value| match v {
        Value::String(s) => Some(screen(s).into_owned()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    match data {
        Value::Null => String::new(),
        Value::Object(m) if m.values().all(|v| scalar(v).is_some()) => {
            let mut s = String::new();
            for (k, v) in m {
                s.push_str(&format!("\n|   {}: {}", screen(k), scalar(v).unwrap_or_default()));
            }
            s
        }
        other => match scalar(other) {
            Some(s) => format!(": {s}"),
            None => format!("\n|   {}", screen(&other.to_string())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::report::sample::*;
    use super::*;
    use crate::findings::PortState;

    /// What a report-mode sink wrote after each event: (after the port, at the end).
    fn report_of(planned: u64) -> (String, String) {
        let mut buf = Vec::new();
        let mut sink = Text::new(&mut buf).as_report(false);
        sink.record(&start("moonscan -p 22 198.18.0.2", planned)).unwrap();
        sink.record(&port("198.18.0.2", 22, PortState::Open, 0.01)).unwrap();
        sink.flush().unwrap();
        let len = sink.out.get_ref().len();
        sink.record(&end(0.1, 0)).unwrap();
        sink.close().unwrap();
        drop(sink);
        let text = String::from_utf8(buf).unwrap();
        (text[..len].to_string(), text)
    }

    #[test]
    fn a_report_holds_hosts_to_the_end_and_a_huge_scan_streams() {
        // Without -v: nothing about the port until the host's report.
        let (early, all) = report_of(1);
        assert!(!early.contains("22/tcp"), "{early}");
        assert!(all.contains("moonscan scan report for 198.18.0.2\n") && all.contains("\n22/tcp open  ssh\n"), "{all}");
        assert!(all.trim_end().ends_with(" s"), "the summary comes last: {all}");
        // Past REPORT_MAX_PROBES the scan streams as the plain text does.
        let (early, all) = report_of(REPORT_MAX_PROBES + 1);
        assert!(early.contains("Discovered open port 22/tcp on 198.18.0.2"), "{early}");
        assert!(!all.contains("scan report for"), "{all}");
    }

    /// Streamed, OS detection is one line of the best match (or the
    /// passive hint, said to be a guess) and a traceroute one of its hops;
    /// in a report, the OS lines sit in the host's report as in `-oN`.
    #[test]
    fn os_and_trace_lines() {
        let render = |report: bool| {
            let mut buf = Vec::new();
            let mut sink = Text::new(&mut buf);
            if report {
                sink = sink.as_report(false);
            }
            for e in os_scan() {
                sink.record(&e).unwrap();
            }
            sink.close().unwrap();
            drop(sink);
            String::from_utf8(buf).unwrap()
        };
        let text = render(false);
        assert!(text.contains("OS: Linux 4.15 - 5.8 (100%) on 198.18.0.2\n"), "{text}");
        assert!(text.contains("Traceroute to 198.18.0.2: 2 hops, last 198.18.0.2\n"), "{text}");
        assert!(
            text.contains(
                "OS hint (passive, guess): Linux (ttl=64 win=65160 mss=1460 opts=M,S,T,N,W7) on 198.18.0.10\n"
            ),
            "{text}"
        );
        let text = render(true);
        assert!(text.contains("OS details: Linux 4.15 - 5.8\nNetwork Distance: 1 hop\nService Info:"), "{text}");
        assert!(text.contains("OS and Service detection performed."), "{text}");
    }
}
