//! nmap's XML (`-oX`): one `<nmaprun>` document in the shape of nmap's
//! docs/nmap.dtd, so the tools and libraries that read nmap XML (ndiff,
//! python-libnmap, ...) read moonscan's results.
//!
//! In: the scan's events. Out: the document's head (prologue, `<nmaprun>`,
//! `<scaninfo>`, `<verbose>`, `<debugging>`) at the first event, so even a
//! killed scan leaves a file that says what it was; the hosts and
//! `<runstats>` at close, from what was kept in memory per port (an XML
//! document cannot be appended to once closed, and nmap, too, writes a host
//! only when it is done with it).
//!
//! How moonscan's events become nmap's elements:
//! - Hosts: only those with at least one reported port, in address order
//!   (IPv4 before IPv6); their ports in number order (TCP before UDP).
//!   `<status state="up">` takes its reason (and TTL) from the host's first
//!   reported port, because an answer on a port is what shows a host is up
//!   (moonscan does no host discovery). `starttime`/`endtime` are the first
//!   and last moments something was learnt about the host. `<hostnames>` is
//!   empty and `<times>` is left out (the DTD allows it): moonscan keeps no
//!   per-host round-trip times, and it will not invent them.
//! - Services: `method="probed" conf="10"` for a match and also for a soft
//!   match (the service is known, the product is not), as nmap's own
//!   `setServiceProbeResults` does for its soft matches; `method="table"
//!   conf="3"` when nothing matched and the name is the port's usual one.
//!   Without `-sV` every port gets the table's name with `method="table"
//!   conf="3"`, as nmap writes it. `info` becomes `extrainfo`, `os`
//!   `ostype`, `device` `devicetype`, `tunnel="ssl"` stays.
//! - Plugins: all findings of one plugin on one port make one `<script>`
//!   (scripts in id order). Its `output` is the findings' titles, one a
//!   line; inside it each finding is one key-less `<table>` with
//!   `<elem key="title">`, `<elem key="severity">` and its JSON data under
//!   the key `data` (objects and arrays become `<table>`s, scalars
//!   `<elem>`s, as NSE's structured output does).
//! - `<runstats>`: `exit="error"` (with `errormsg`) exactly when moonscan
//!   exits non-zero for the scan: errors were reported, it was interrupted,
//!   or it never reached its end. `hosts up` counts the hosts written;
//!   `total` is the number of addresses the scan planned (its probes over
//!   its ports).
//! - Times are UTC (`startstr`, `timestr`), as everywhere in moonscan.
//!
//! What always holds: the output is well-formed XML 1.0 whatever plugins and
//! servers put in their strings: `&`, `<`, `>`, `"`, `'` and line breaks and
//! tabs are escaped as references, and the characters XML 1.0 forbids even
//! escaped (C0 controls other than tab and line breaks, U+FFFE, U+FFFF) are
//! dropped.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::Sink;
use crate::findings::{Event, PortState, ScanEnd, ScanStart, ScanType, ServiceEvent, ServiceMethod};

/// nmap's XML output, written to `writer`.
pub struct Xml<W: Write> {
    out: BufWriter<W>,
    scan: Collected,
    head: bool,
    closed: bool,
}

impl<W: Write> Xml<W> {
    pub fn new(writer: W) -> Self {
        Xml { out: BufWriter::new(writer), scan: Collected::default(), head: false, closed: false }
    }

    fn write_head(&mut self) -> io::Result<()> {
        self.head = true;
        let s = &self.scan;
        let ports = s.scanned_ports();
        let args = s.args_line();
        let startstr = ctime(s.start_secs() as i64);
        let o = &mut self.out;
        writeln!(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>")?;
        writeln!(o, "<!DOCTYPE nmaprun>")?;
        writeln!(o, "<!-- {} -->", comment(&format!("moonscan {VERSION} scan initiated {startstr} as: {args}")))?;
        writeln!(
            o,
            "<nmaprun scanner=\"moonscan\" args=\"{}\" start=\"{}\" startstr=\"{}\" version=\"{VERSION}\" xmloutputversion=\"1.05\">",
            esc(&args),
            s.start_secs() as i64,
            esc(&startstr)
        )?;
        if let Some(start) = &s.start {
            let kind = match start.scan_type {
                ScanType::Syn => "syn",
                ScanType::Connect => "connect",
            };
            writeln!(
                o,
                "<scaninfo type=\"{kind}\" protocol=\"tcp\" numservices=\"{}\" services=\"{}\"/>",
                ports.len(),
                range_list(&ports)
            )?;
        }
        writeln!(o, "<verbose level=\"{}\"/>", s.verbosity())?;
        writeln!(o, "<debugging level=\"0\"/>")
    }

    fn write_body(&mut self) -> io::Result<()> {
        let s = &self.scan;
        let start = s.start_secs();
        let mut doc = String::new();
        for host in s.hosts() {
            let ip = host.ip;
            let (reason, ttl) = host.status_reason();
            let (first_t, last_t) = host.times();
            let _ = writeln!(
                doc,
                "<host starttime=\"{}\" endtime=\"{}\"><status state=\"up\" reason=\"{}\" reason_ttl=\"{ttl}\"/>",
                (start + first_t) as i64,
                (start + last_t) as i64,
                esc(reason)
            );
            let family = if ip.is_ipv4() { "ipv4" } else { "ipv6" };
            let _ = write!(doc, "<address addr=\"{ip}\" addrtype=\"{family}\"/>\n<hostnames>\n</hostnames>\n<ports>");
            for p in &host.ports {
                port_xml(&mut doc, p);
            }
            doc.push_str("</ports>\n</host>\n");
            // One host at a time: the document is never whole in memory.
            self.out.write_all(doc.as_bytes())?;
            doc.clear();
        }
        let end = s.end_secs();
        let timestr = ctime(end as i64);
        let elapsed = s.elapsed();
        let summary = format!("moonscan done at {timestr}; {} scanned in {elapsed:.2} seconds", s.hosts_phrase());
        let _ = write!(
            doc,
            "<runstats><finished time=\"{}\" timestr=\"{}\" summary=\"{}\" elapsed=\"{elapsed:.2}\"",
            end as i64,
            esc(&timestr),
            esc(&summary)
        );
        match s.failure() {
            Some(why) => {
                let _ = write!(doc, " exit=\"error\" errormsg=\"{}\"/>", esc(&why));
            }
            None => doc.push_str(" exit=\"success\"/>"),
        }
        let (up, total) = (s.host_count() as u64, s.hosts_total());
        let _ =
            write!(doc, "<hosts up=\"{up}\" down=\"{}\" total=\"{total}\"/>\n</runstats>\n</nmaprun>\n", total - up);
        self.out.write_all(doc.as_bytes())
    }
}

impl<W: Write + Send> Sink for Xml<W> {
    fn record(&mut self, event: &Event) -> io::Result<()> {
        self.scan.record(event);
        if !self.head {
            self.write_head()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn close(&mut self) -> io::Result<()> {
        if !self.closed {
            self.closed = true;
            if !self.head {
                self.write_head()?;
            }
            self.write_body()?;
        }
        self.out.flush()
    }
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// One `<port>` element with its service and scripts.
fn port_xml(doc: &mut String, p: &PortRec) {
    let _ = write!(
        doc,
        "<port protocol=\"{}\" portid=\"{}\"><state state=\"{}\" reason=\"{}\" reason_ttl=\"{}\"/>",
        p.proto,
        p.port,
        p.state_str(),
        esc(p.reason),
        p.ttl.unwrap_or(0)
    );
    match &p.service {
        Some(s) => {
            let _ = write!(doc, "<service name=\"{}\"", esc(&s.service));
            for (attr, v) in [
                ("product", &s.product),
                ("version", &s.version),
                ("extrainfo", &s.info),
                ("hostname", &s.hostname),
                ("ostype", &s.os),
                ("devicetype", &s.device),
            ] {
                if let Some(v) = v {
                    let _ = write!(doc, " {attr}=\"{}\"", esc(v));
                }
            }
            if s.tunnel.is_some() {
                doc.push_str(" tunnel=\"ssl\"");
            }
            let (method, conf) = method_conf(s.method);
            let _ = write!(doc, " method=\"{method}\" conf=\"{conf}\"");
            if s.cpe.is_empty() {
                doc.push_str("/>");
            } else {
                doc.push('>');
                for c in &s.cpe {
                    let _ = write!(doc, "<cpe>{}</cpe>", esc(c));
                }
                doc.push_str("</service>");
            }
        }
        None => {
            if let Some(name) = p.table_name {
                let _ = write!(doc, "<service name=\"{}\" method=\"table\" conf=\"3\"/>", esc(name));
            }
        }
    }
    for (id, findings) in &p.scripts {
        let _ = write!(doc, "<script id=\"{}\" output=\"{}\">", esc(id), esc(&script_output(findings)));
        for f in findings {
            doc.push_str("<table>\n");
            let _ = writeln!(doc, "<elem key=\"title\">{}</elem>", esc(&f.title));
            let _ = writeln!(doc, "<elem key=\"severity\">{}</elem>", esc(f.severity));
            value_xml(doc, Some("data"), &f.data, 0);
            doc.push_str("</table>\n");
        }
        doc.push_str("</script>");
    }
    doc.push_str("</port>\n");
}

/// nmap's `method` and `conf` for how a service was identified.
pub(super) fn method_conf(m: ServiceMethod) -> (&'static str, u8) {
    match m {
        ServiceMethod::Probed | ServiceMethod::Soft => ("probed", 10),
        ServiceMethod::Table => ("table", 3),
    }
}

/// JSON as NSE's structured output: objects and arrays are `<table>`s (array
/// items without keys), scalars `<elem>`s; `null` is left out, as a Lua nil.
fn value_xml(doc: &mut String, key: Option<&str>, v: &Value, depth: usize) {
    let open = |doc: &mut String, tag: &str| match key {
        Some(k) => {
            let _ = write!(doc, "<{tag} key=\"{}\">", esc(k));
        }
        None => {
            let _ = write!(doc, "<{tag}>");
        }
    };
    let scalar = |doc: &mut String, text: &str| {
        open(doc, "elem");
        let _ = writeln!(doc, "{}</elem>", esc(text));
    };
    match v {
        Value::Null => {}
        Value::Bool(b) => scalar(doc, if *b { "true" } else { "false" }),
        Value::Number(n) => scalar(doc, &n.to_string()),
        Value::String(s) => scalar(doc, s),
        // Deeper than any real result: kept whole, as JSON text.
        Value::Object(_) | Value::Array(_) if depth >= 64 => scalar(doc, &v.to_string()),
        Value::Object(m) => {
            open(doc, "table");
            doc.push('\n');
            for (k, v) in m {
                value_xml(doc, Some(k), v, depth + 1);
            }
            doc.push_str("</table>\n");
        }
        Value::Array(a) => {
            open(doc, "table");
            doc.push('\n');
            for v in a {
                value_xml(doc, None, v, depth + 1);
            }
            doc.push_str("</table>\n");
        }
    }
}

/// Text for an XML attribute value or element content: markup characters,
/// line breaks and tabs as references; characters XML 1.0 forbids dropped.
pub(super) fn esc(s: &str) -> Cow<'_, str> {
    let plain = |c: char| !matches!(c, '&' | '<' | '>' | '"' | '\'') && !c.is_control() && !forbidden(c);
    if s.chars().all(plain) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#xa;"),
            '\r' => out.push_str("&#xd;"),
            '\t' => out.push_str("&#x9;"),
            c if forbidden(c) => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Characters XML 1.0 does not allow anywhere, not even as references.
fn forbidden(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}')
}

/// Text for inside `<!-- -->`: references mean nothing there, so this only
/// keeps the comment legal (no `--`, no forbidden characters), as nmap does
/// by writing the second `-` of a pair as `&#45;`.
fn comment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev = ' ';
    for c in s.chars() {
        if forbidden(c) {
            continue;
        }
        if c == '-' && prev == '-' {
            out.push_str("&#45;");
        } else {
            out.push(c);
        }
        prev = c;
    }
    out
}

// ---------------------------------------------------------------------------
// What the three nmap formats share: the scan as it is remembered until close,
// and nmap's way of writing names, versions, times and command lines.

/// The scan's events, kept for the formats written at close: one small
/// record per reported port in one ordered map (under 200 bytes a port
/// without services or findings: a /16 sweep with one open port per
/// address keeps about 11 MB), hosts being runs of the same address.
#[derive(Default)]
pub(super) struct Collected {
    pub start: Option<ScanStart>,
    /// Unix time of the scan's start, in seconds.
    start_at: Option<f64>,
    /// By (address, protocol rank, port): hosts in address order, TCP
    /// before UDP, ports in number order.
    ports: BTreeMap<(IpAddr, u8, u16), PortRec>,
    /// Distinct addresses in `ports`.
    up: usize,
    pub end: Option<ScanEnd>,
    pub services_seen: bool,
    names: HashMap<(u16, &'static str), Option<&'static str>>,
}

/// One host: its address and its ports in order.
pub(super) struct HostRec<'a> {
    pub ip: IpAddr,
    pub ports: Vec<&'a PortRec>,
}

/// What is known about one port.
pub(super) struct PortRec {
    pub proto: &'static str,
    pub port: u16,
    pub state: PortState,
    pub ttl: Option<u8>,
    pub reason: &'static str,
    /// Seconds since the scan's start of the first and the last event about it.
    first_t: f32,
    last_t: f32,
    pub service: Option<Box<ServiceEvent>>,
    /// The port's usual service, from the port table.
    pub table_name: Option<&'static str>,
    /// Findings by plugin id (in id order), each plugin's in arrival order.
    pub scripts: BTreeMap<String, Vec<Finding>>,
}

pub(super) struct Finding {
    pub title: String,
    pub severity: &'static str,
    pub data: Value,
}

impl Collected {
    pub fn record(&mut self, event: &Event) {
        match event {
            Event::ScanStart(s) => {
                self.start_at = humantime::parse_rfc3339_weak(&s.started)
                    .ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map(|d| d.as_secs_f64());
                self.start = Some(s.clone());
            }
            Event::Port(p) => {
                let rec = self.port(p.ip, p.proto, p.port, p.t);
                rec.state = p.state;
                rec.reason = p.reason;
                rec.ttl = p.ttl;
            }
            Event::Service(s) => {
                self.services_seen = true;
                self.port(s.ip, s.proto, s.port, s.t).service = Some(s.clone());
            }
            Event::Finding(f) => {
                let finding = Finding { title: f.title.clone(), severity: f.severity, data: f.data.clone() };
                self.port(f.ip, f.proto, f.port, f.t).scripts.entry(f.plugin.clone()).or_default().push(finding);
            }
            Event::ScanEnd(e) => self.end = Some(e.clone()),
            Event::Log(_) | Event::Error(_) => {}
        }
        if self.start_at.is_none() {
            self.start_at = Some(now_secs());
        }
    }

    /// The record of a port, made on first sight (a service or finding
    /// without a port event can only be about an open port).
    fn port(&mut self, ip: IpAddr, proto: &'static str, port: u16, t: f64) -> &mut PortRec {
        let table_name =
            *self.names.entry((port, proto)).or_insert_with(|| crate::targets::ports::service_name(port, proto));
        let rank = match proto {
            "tcp" => 0,
            "udp" => 1,
            _ => 2,
        };
        if !self.ports.contains_key(&(ip, rank, port))
            && self.ports.range((ip, 0, 0)..=(ip, u8::MAX, u16::MAX)).next().is_none()
        {
            self.up += 1;
        }
        let t = t as f32;
        let rec = self.ports.entry((ip, rank, port)).or_insert_with(|| PortRec {
            proto,
            port,
            state: PortState::Open,
            ttl: None,
            reason: "syn-ack",
            first_t: t,
            last_t: t,
            service: None,
            table_name,
            scripts: BTreeMap::new(),
        });
        rec.first_t = rec.first_t.min(t);
        rec.last_t = rec.last_t.max(t);
        rec
    }

    /// The hosts with at least one reported port, in address order.
    pub fn hosts(&self) -> impl Iterator<Item = HostRec<'_>> {
        let mut it = self.ports.iter().peekable();
        std::iter::from_fn(move || {
            let (&(ip, _, _), first) = it.next()?;
            let mut ports = vec![first];
            while let Some((_, p)) = it.next_if(|((next, _, _), _)| *next == ip) {
                ports.push(p);
            }
            Some(HostRec { ip, ports })
        })
    }

    /// How many hosts [`Collected::hosts`] gives.
    pub fn host_count(&self) -> usize {
        self.up
    }

    pub fn start_secs(&self) -> f64 {
        self.start_at.unwrap_or_else(now_secs)
    }

    /// Seconds from start to end (to now when the scan never ended).
    pub fn elapsed(&self) -> f64 {
        match &self.end {
            Some(e) => e.elapsed,
            None => (now_secs() - self.start_secs()).max(0.0),
        }
    }

    pub fn end_secs(&self) -> f64 {
        self.start_secs() + self.elapsed()
    }

    fn args(&self) -> &[String] {
        self.start.as_ref().map_or(&[], |s| &s.args[..])
    }

    /// The command line as nmap writes it: words joined by spaces, quoted
    /// when they hold spaces.
    pub fn args_line(&self) -> String {
        let args = self.args();
        if args.is_empty() {
            return "moonscan".into();
        }
        args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
    }

    /// The TCP ports the command line asks for (as the CLI reads them).
    pub fn scanned_ports(&self) -> Vec<u16> {
        scanned_ports(self.args())
    }

    /// `-v` given how many times.
    pub fn verbosity(&self) -> usize {
        self.args()
            .iter()
            .skip(1)
            .filter(|a| a.len() > 1 && a.starts_with('-') && a[1..].bytes().all(|b| b == b'v'))
            .map(|a| a.len() - 1)
            .sum()
    }

    /// Whether service detection ran (decides nmap's VERSION column and `?`).
    pub fn version_scan(&self) -> bool {
        self.services_seen || self.args().iter().skip(1).any(|a| a == "-sV" || a == "-A")
    }

    /// Addresses the scan planned: its probes over its ports (never fewer
    /// than the hosts that answered).
    pub fn hosts_total(&self) -> u64 {
        let n = self.scanned_ports().len() as u64;
        let planned = self.start.as_ref().map_or(0, |s| s.probes_planned);
        let total = if n == 0 { 0 } else { planned.div_ceil(n) };
        total.max(self.up as u64)
    }

    /// `N IP addresses (M hosts up)`, as nmap's summaries say it.
    pub fn hosts_phrase(&self) -> String {
        let (total, up) = (self.hosts_total(), self.up);
        format!(
            "{total} IP address{} ({up} host{} up)",
            if total == 1 { "" } else { "es" },
            if up == 1 { "" } else { "s" }
        )
    }

    /// Why moonscan exits non-zero for this scan, if it does.
    pub fn failure(&self) -> Option<String> {
        match &self.end {
            None => Some("the scan stopped before its end".into()),
            Some(e) if e.interrupted => Some("interrupted".into()),
            Some(e) if e.errors > 0 => {
                Some(format!("{} error{} reported", e.errors, if e.errors == 1 { "" } else { "s" }))
            }
            Some(_) => None,
        }
    }
}

impl HostRec<'_> {
    /// Why the host counts as up: its first reported port's reason and TTL.
    pub fn status_reason(&self) -> (&'static str, u8) {
        let p = self.ports.iter().find(|p| p.state != PortState::Filtered).or_else(|| self.ports.first());
        p.map_or(("user-set", 0), |p| (p.reason, p.ttl.unwrap_or(0)))
    }

    /// Seconds since the scan's start of the first and the last event about it.
    pub fn times(&self) -> (f64, f64) {
        let first = self.ports.iter().map(|p| p.first_t).fold(f32::INFINITY, f32::min);
        let last = self.ports.iter().map(|p| p.last_t).fold(0.0, f32::max);
        (f64::from(first), f64::from(last))
    }
}

impl PortRec {
    pub fn state_str(&self) -> &'static str {
        match self.state {
            PortState::Open => "open",
            PortState::Closed => "closed",
            PortState::Filtered => "filtered",
        }
    }

    /// nmap's SERVICE column (`Port::getNmapServiceName`): `ssl/` for TLS,
    /// `?` when service detection ran on an open port but only the port
    /// table names it, `unknown` when nothing does.
    pub fn service_column(&self, version_scan: bool) -> String {
        let (tunnel, name, confident) = match &self.service {
            Some(s) => (s.tunnel.is_some(), Some(s.service.as_str()), method_conf(s.method).1 > 5),
            None => (false, self.table_name, false),
        };
        let prefix = if tunnel { "ssl/" } else { "" };
        match name {
            Some(n) if n != "unknown" => {
                let guess = version_scan && self.state == PortState::Open && !confident;
                format!("{prefix}{n}{}", if guess { "?" } else { "" })
            }
            _ => format!("{prefix}unknown"),
        }
    }

    /// Whether nmap would name the service at all (grepable output leaves
    /// the field empty otherwise).
    pub fn has_service_name(&self) -> bool {
        self.service.as_ref().is_some_and(|s| !s.service.is_empty() || s.tunnel.is_some()) || self.table_name.is_some()
    }

    /// nmap's VERSION column: `product version (extrainfo)`.
    pub fn full_version(&self) -> String {
        let Some(s) = &self.service else { return String::new() };
        let mut out = String::new();
        for v in [&s.product, &s.version].into_iter().flatten() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(v);
        }
        if let Some(info) = &s.info {
            if !out.is_empty() {
                out.push(' ');
            }
            let _ = write!(out, "({info})");
        }
        out
    }
}

/// A script's output: its findings' titles, one a line.
pub(super) fn script_output(findings: &[Finding]) -> String {
    findings.iter().map(|f| f.title.as_str()).collect::<Vec<_>>().join("\n")
}

/// The TCP ports a moonscan command line scans: `-p SPEC` (`-pSPEC`),
/// `--top-ports N`, `-F`, else the top 1000, read as the CLI reads them.
pub(super) fn scanned_ports(args: &[String]) -> Vec<u16> {
    use crate::targets::{parse_ports, top_ports, Proto};
    let (mut spec, mut top, mut fast) = (None, None, false);
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        } else if a == "-p" {
            spec = it.next().cloned();
        } else if let Some(v) = a.strip_prefix("-p") {
            spec = Some(v.strip_prefix('=').unwrap_or(v).to_string());
        } else if a == "--top-ports" {
            top = it.next().and_then(|n| n.parse::<usize>().ok());
        } else if let Some(n) = a.strip_prefix("--top-ports=") {
            top = n.parse().ok();
        } else if a == "-F" {
            fast = true;
        }
    }
    match (spec, top) {
        (Some(spec), _) => parse_ports(&spec).map(|l| l.tcp).unwrap_or_default(),
        (None, Some(n)) => top_ports(Proto::Tcp, n),
        (None, None) if fast => top_ports(Proto::Tcp, 100),
        (None, None) => top_ports(Proto::Tcp, 1000),
    }
}

/// Sorted ports as nmap lists them: `1-1024,3306,8080-8081`.
pub(super) fn range_list(ports: &[u16]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < ports.len() {
        let mut j = i;
        while j + 1 < ports.len() && ports[j + 1] == ports[j].wrapping_add(1) {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if i == j {
            let _ = write!(out, "{}", ports[i]);
        } else {
            let _ = write!(out, "{}-{}", ports[i], ports[j]);
        }
        i = j + 1;
    }
    out
}

/// One word of a command line as nmap's `join_quoted` writes it.
fn quote(a: &str) -> Cow<'_, str> {
    if !a.is_empty() && !a.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\') {
        return Cow::Borrowed(a);
    }
    let mut s = String::with_capacity(a.len() + 2);
    for c in a.chars() {
        if c == '"' || c == '\\' {
            s.push('\\');
        }
        s.push(c);
    }
    if a.is_empty() || a.chars().any(char::is_whitespace) {
        s = format!("\"{s}\"");
    }
    Cow::Owned(s)
}

fn now_secs() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// A Unix time as C's `ctime` writes it (`Sat Nov 21 16:41:03 2026`), in UTC.
pub(super) fn ctime(secs: i64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{} {} {day:>2} {:02}:{:02}:{:02} {year}",
        DAYS[(days + 4).rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Events of a small scan for the three formats' tests.
#[cfg(test)]
pub(super) mod sample {
    use crate::findings::*;

    pub fn ip(s: &str) -> std::net::IpAddr {
        s.parse().unwrap()
    }

    pub fn start(args: &str, planned: u64) -> Event {
        Event::ScanStart(ScanStart {
            scan_id: "0123456789abcdef".into(),
            started: "2026-11-21T16:41:03.250Z".into(),
            args: args.split(' ').map(String::from).collect(),
            scan_type: ScanType::Syn,
            seed: 1,
            probes_planned: planned,
        })
    }

    pub fn port(addr: &str, port: u16, state: PortState, t: f64) -> Event {
        let reason = match state {
            PortState::Open => "syn-ack",
            PortState::Closed => "reset",
            PortState::Filtered => "no-response",
        };
        Event::Port(PortEvent { ip: ip(addr), port, proto: "tcp", state, reason, ttl: Some(64), t })
    }

    pub fn service(addr: &str, port: u16, name: &str, product: Option<&str>, version: Option<&str>) -> ServiceEvent {
        ServiceEvent {
            ip: ip(addr),
            port,
            proto: "tcp",
            service: name.into(),
            method: ServiceMethod::Probed,
            tunnel: None,
            product: product.map(String::from),
            version: version.map(String::from),
            info: None,
            os: None,
            hostname: None,
            device: None,
            cpe: vec![],
            probe: None,
            banner: String::new(),
            tls: None,
            t: 0.5,
        }
    }

    pub fn finding(addr: &str, port: u16, plugin: &str, title: &str, data: serde_json::Value) -> Event {
        Event::Finding(Box::new(FindingEvent {
            ip: ip(addr),
            port,
            proto: "tcp",
            plugin: plugin.into(),
            severity: "info",
            title: title.into(),
            data,
            t: 0.75,
        }))
    }

    pub fn end(elapsed: f64, errors: u64) -> Event {
        Event::ScanEnd(ScanEnd { scan_id: "0123456789abcdef".into(), elapsed, errors, ..ScanEnd::default() })
    }

    /// Two hosts, out of order, with services, scripts and a closed port.
    pub fn scan() -> Vec<Event> {
        let mut ssh = service("198.18.0.2", 22, "ssh", Some("OpenSSH"), Some("9.2p1 Debian 2+deb12u10"));
        ssh.info = Some("protocol 2.0".into());
        ssh.os = Some("Linux".into());
        ssh.cpe = vec!["cpe:/a:openbsd:openssh:9.2p1".into(), "cpe:/o:linux:linux_kernel".into()];
        let mut https = service("198.18.0.2", 443, "http", Some("nginx"), Some("1.22.1"));
        https.tunnel = Some("ssl");
        let mut odd = service("198.18.0.10", 8080, "http-proxy", None, None);
        odd.method = ServiceMethod::Table;
        vec![
            start("moonscan -sV -sC -p 22,80,443,8080 198.18.0.2 198.18.0.10", 8),
            port("198.18.0.10", 8080, PortState::Open, 0.01),
            port("198.18.0.2", 443, PortState::Open, 0.02),
            port("198.18.0.2", 22, PortState::Open, 0.03),
            port("198.18.0.2", 80, PortState::Closed, 0.04),
            Event::Service(Box::new(https)),
            Event::Service(Box::new(ssh)),
            Event::Service(Box::new(odd)),
            finding(
                "198.18.0.2",
                443,
                "http-title",
                "moonscan lab",
                serde_json::json!({"status": 200, "title": "moonscan lab"}),
            ),
            finding(
                "198.18.0.2",
                443,
                "http-headers",
                "Missing X-Frame-Options header",
                serde_json::json!({"header": "X-Frame-Options"}),
            ),
            finding(
                "198.18.0.2",
                443,
                "http-headers",
                "Server version disclosed",
                serde_json::json!({"server": "nginx/1.22.1"}),
            ),
            end(1.5, 0),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::sample::*;
    use super::*;

    fn render(events: &[Event]) -> String {
        let mut buf = Vec::new();
        {
            let mut sink = Xml::new(&mut buf);
            for e in events {
                sink.record(e).unwrap();
            }
            sink.close().unwrap();
        }
        String::from_utf8(buf).unwrap()
    }

    /// Checks that tags nest and close, attributes are quoted, and no raw
    /// `<`, `&` or forbidden character is left in text (a small
    /// well-formedness check; the integration tests use real XML parsers).
    fn well_formed(doc: &str) -> Result<(), String> {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = doc;
        while let Some(i) = rest.find(['<', '&']) {
            let text = &rest[..i];
            if let Some(c) = text.chars().find(|&c| forbidden(c) || c == '>') {
                return Err(format!("bad character {c:?} in text {text:?}"));
            }
            rest = &rest[i..];
            if rest.starts_with('&') {
                let end = rest.find(';').ok_or("unterminated reference")?;
                let name = &rest[1..end];
                let known = ["amp", "lt", "gt", "quot", "apos"].contains(&name)
                    || name.strip_prefix("#x").is_some_and(|h| u32::from_str_radix(h, 16).is_ok());
                if !known {
                    return Err(format!("unknown reference &{name};"));
                }
                rest = &rest[end + 1..];
                continue;
            }
            if let Some(r) = rest.strip_prefix("<!--") {
                let end = r.find("-->").ok_or("unterminated comment")?;
                if r[..end].contains("--") {
                    return Err("-- inside a comment".into());
                }
                rest = &r[end + 3..];
                continue;
            }
            let end = rest.find('>').ok_or("unterminated tag")?;
            let tag = &rest[1..end];
            if tag.starts_with('?') || tag.starts_with('!') {
            } else if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().ok_or(format!("</{name}> closes nothing"))?;
                if open != name {
                    return Err(format!("</{name}> closes <{open}>"));
                }
            } else {
                if !tag.matches('"').count().is_multiple_of(2) || tag.contains('<') || tag.contains('\n') {
                    return Err(format!("bad tag <{tag}>"));
                }
                let name = tag.split([' ', '/']).next().unwrap().to_string();
                if !tag.ends_with('/') {
                    stack.push(name);
                }
            }
            rest = &rest[end + 1..];
        }
        if stack.is_empty() {
            Ok(())
        } else {
            Err(format!("unclosed {stack:?}"))
        }
    }

    #[test]
    fn a_scan_becomes_one_nmaprun_document() {
        let doc = render(&scan());
        well_formed(&doc).unwrap();
        assert!(doc.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE nmaprun>\n"), "{doc}");
        assert!(doc.contains(
            "<nmaprun scanner=\"moonscan\" args=\"moonscan -sV -sC -p 22,80,443,8080 198.18.0.2 198.18.0.10\" \
             start=\"1795279263\" startstr=\"Sat Nov 21 16:41:03 2026\" version=\"0.1.0\" xmloutputversion=\"1.05\">"
        ));
        assert!(doc.contains("<scaninfo type=\"syn\" protocol=\"tcp\" numservices=\"4\" services=\"22,80,443,8080\"/>"));
        // Hosts in address order, ports in number order.
        let a = doc.find("addr=\"198.18.0.2\"").unwrap();
        let b = doc.find("addr=\"198.18.0.10\"").unwrap();
        assert!(a < b, "198.18.0.2 comes before 198.18.0.10");
        let order: Vec<usize> =
            ["portid=\"22\"", "portid=\"80\"", "portid=\"443\""].iter().map(|p| doc.find(p).unwrap()).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
        assert!(doc.contains(
            "<port protocol=\"tcp\" portid=\"22\"><state state=\"open\" reason=\"syn-ack\" reason_ttl=\"64\"/>\
             <service name=\"ssh\" product=\"OpenSSH\" version=\"9.2p1 Debian 2+deb12u10\" extrainfo=\"protocol 2.0\" \
             ostype=\"Linux\" method=\"probed\" conf=\"10\"><cpe>cpe:/a:openbsd:openssh:9.2p1</cpe>\
             <cpe>cpe:/o:linux:linux_kernel</cpe></service></port>"
        ));
        // A closed port without a service event gets the table's name.
        assert!(doc.contains(
            "<state state=\"closed\" reason=\"reset\" reason_ttl=\"64\"/><service name=\"http\" method=\"table\" conf=\"3\"/>"
        ));
        assert!(doc.contains("tunnel=\"ssl\" method=\"probed\" conf=\"10\""));
        assert!(doc.contains("<service name=\"http-proxy\" method=\"table\" conf=\"3\"/>"));
        assert!(doc.contains(
            "<host starttime=\"1795279263\" endtime=\"1795279264\"><status state=\"up\" reason=\"syn-ack\" reason_ttl=\"64\"/>"
        ));
        assert!(doc.ends_with(
            "<runstats><finished time=\"1795279264\" timestr=\"Sat Nov 21 16:41:04 2026\" \
             summary=\"moonscan done at Sat Nov 21 16:41:04 2026; 2 IP addresses (2 hosts up) scanned in 1.50 seconds\" \
             elapsed=\"1.50\" exit=\"success\"/><hosts up=\"2\" down=\"0\" total=\"2\"/>\n</runstats>\n</nmaprun>\n"
        ));
    }

    #[test]
    fn findings_of_one_plugin_make_one_script_with_a_table_each() {
        let doc = render(&scan());
        assert_eq!(doc.matches("<script id=\"http-headers\"").count(), 1);
        assert!(doc.contains(
            "<script id=\"http-headers\" output=\"Missing X-Frame-Options header&#xa;Server version disclosed\"><table>\n\
             <elem key=\"title\">Missing X-Frame-Options header</elem>\n<elem key=\"severity\">info</elem>\n\
             <table key=\"data\">\n<elem key=\"header\">X-Frame-Options</elem>\n</table>\n</table>\n<table>\n\
             <elem key=\"title\">Server version disclosed</elem>\n<elem key=\"severity\">info</elem>\n\
             <table key=\"data\">\n<elem key=\"server\">nginx/1.22.1</elem>\n</table>\n</table>\n</script>"
        ));
        // Scripts in id order: http-headers before http-title.
        assert!(doc.find("id=\"http-headers\"").unwrap() < doc.find("id=\"http-title\"").unwrap());
    }

    #[test]
    fn nested_data_becomes_tables_and_elems() {
        let data = serde_json::json!({"keys": [{"bits": 256, "type": "ED25519"}, "x"], "ok": true, "none": null});
        let evs = vec![
            start("moonscan -p 22 198.18.0.2", 1),
            port("198.18.0.2", 22, PortState::Open, 0.0),
            finding("198.18.0.2", 22, "ssh-hostkey", "SSH host keys", data),
            end(0.1, 0),
        ];
        let doc = render(&evs);
        well_formed(&doc).unwrap();
        assert!(doc.contains(
            "<table key=\"data\">\n<table key=\"keys\">\n<table>\n<elem key=\"bits\">256</elem>\n\
             <elem key=\"type\">ED25519</elem>\n</table>\n<elem>x</elem>\n</table>\n<elem key=\"ok\">true</elem>\n</table>\n"
        ));
        assert!(!doc.contains("none"), "null is left out");
    }

    #[test]
    fn hostile_strings_stay_well_formed() {
        let nasty = "a&b <c> \"d\" 'e'\nline2\r\ttab \u{0}\u{1b}\u{7}\u{fffe} ]]> -- end-";
        let mut svc = service("198.18.0.2", 80, nasty, Some(nasty), Some(nasty));
        svc.cpe = vec![nasty.into()];
        let mut data = serde_json::Map::new();
        data.insert(nasty.into(), nasty.into());
        data.insert("list".into(), serde_json::json!([nasty]));
        let data = serde_json::Value::Object(data);
        let evs = vec![
            start(&format!("moonscan --script-args x={} -p 80 198.18.0.2", "a--b"), 1),
            port("198.18.0.2", 80, PortState::Open, 0.0),
            Event::Service(Box::new(svc)),
            finding("198.18.0.2", 80, nasty, nasty, data),
            end(0.1, 0),
        ];
        let doc = render(&evs);
        well_formed(&doc).unwrap();
        assert!(doc.contains("a&amp;b &lt;c&gt; &quot;d&quot; &apos;e&apos;&#xa;line2&#xd;&#x9;tab  ]]&gt; -- end-"));
        assert!(!doc.contains('\u{1b}') && !doc.contains('\u{0}') && !doc.contains('\u{fffe}'));
        assert!(doc.contains(
            "<!-- moonscan 0.1.0 scan initiated Sat Nov 21 16:41:03 2026 as: moonscan -&#45;script-args x=a-&#45;b"
        ));
    }

    #[test]
    fn the_head_is_written_at_the_first_event_and_the_rest_at_close() {
        let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        struct W(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for W {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut sink = Xml::new(W(buf.clone()));
        let evs = scan();
        sink.record(&evs[0]).unwrap();
        sink.record(&evs[1]).unwrap();
        sink.flush().unwrap();
        let head = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        assert!(head.contains("<nmaprun ") && head.ends_with("<debugging level=\"0\"/>\n"), "{head}");
        assert!(!head.contains("<host"));
        for e in &evs[2..] {
            sink.record(e).unwrap();
        }
        sink.close().unwrap();
        sink.close().unwrap();
        let doc = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        assert_eq!(doc.matches("</nmaprun>").count(), 1, "closing twice writes once");
        well_formed(&doc).unwrap();
    }

    #[test]
    fn errors_and_interruptions_end_with_exit_error() {
        let doc = render(&[start("moonscan -p 22 198.18.0.2", 1), end(0.2, 3)]);
        assert!(doc.contains("exit=\"error\" errormsg=\"3 errors reported\"/><hosts up=\"0\" down=\"1\" total=\"1\"/>"));
        // A stream without scan_end still makes a whole document.
        let doc = render(&[start("moonscan -p 22 198.18.0.2", 1), port("198.18.0.2", 22, PortState::Open, 0.0)]);
        well_formed(&doc).unwrap();
        assert!(doc.contains("exit=\"error\" errormsg=\"the scan stopped before its end\""));
        // No events at all: still one document.
        well_formed(&render(&[])).unwrap();
    }

    #[test]
    fn ipv6_hosts_follow_ipv4_ones() {
        let doc = render(&[
            start("moonscan -p 22 2001:2::2 198.18.0.2", 2),
            port("2001:2::2", 22, PortState::Open, 0.0),
            port("198.18.0.2", 22, PortState::Open, 0.0),
            end(0.1, 0),
        ]);
        assert!(doc.find("198.18.0.2").unwrap() < doc.find("addr=\"2001:2::2\" addrtype=\"ipv6\"").unwrap());
    }

    #[test]
    fn the_scanned_ports_are_read_as_the_cli_reads_them() {
        let ports = |s: &str| scanned_ports(&s.split(' ').map(String::from).collect::<Vec<_>>());
        assert_eq!(range_list(&ports("moonscan -p 22,80,1000-1002 x")), "22,80,1000-1002");
        assert_eq!(range_list(&ports("moonscan -p- x")), "1-65535");
        assert_eq!(ports("moonscan -p80,443 x"), [80, 443]);
        assert_eq!(ports("moonscan --top-ports 10 x").len(), 10);
        assert_eq!(ports("moonscan --top-ports=20 x").len(), 20);
        assert_eq!(ports("moonscan -F x").len(), 100);
        assert_eq!(ports("moonscan -Pn x").len(), 1000);
    }

    #[test]
    fn nmap_time_and_command_line_forms() {
        assert_eq!(ctime(0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(ctime(1_795_279_263), "Sat Nov 21 16:41:03 2026");
        assert_eq!(ctime(951_782_400), "Tue Feb 29 00:00:00 2000");
        assert_eq!(quote("plain"), "plain");
        assert_eq!(quote("two words"), "\"two words\"");
        assert_eq!(quote("say \"hi\""), "\"say \\\"hi\\\"\"");
        assert_eq!(quote(""), "\"\"");
    }

    #[test]
    fn service_names_as_nmap_shows_them() {
        let mut c = Collected::default();
        for e in scan() {
            c.record(&e);
        }
        let hosts: Vec<HostRec> = c.hosts().collect();
        assert_eq!((hosts.len(), c.host_count()), (2, 2));
        let h = &hosts[0];
        let col = |port: u16| h.ports.iter().find(|p| p.port == port).unwrap().service_column(true);
        assert_eq!(col(443), "ssl/http");
        assert_eq!(col(22), "ssh");
        assert_eq!(col(80), "http", "closed ports get no ?");
        assert_eq!(hosts[1].ip, ip("198.18.0.10"));
        let odd = hosts[1].ports[0];
        assert_eq!(odd.service_column(true), "http-proxy?");
        assert_eq!(odd.service_column(false), "http-proxy");
        let ssh = h.ports.iter().find(|p| p.port == 22).unwrap();
        assert_eq!(ssh.full_version(), "OpenSSH 9.2p1 Debian 2+deb12u10 (protocol 2.0)");
    }
}
