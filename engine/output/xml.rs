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
//!   `ostype`, `device` `devicetype`, `tunnel="ssl"` stays. A port no rule
//!   identified whose probes got replies has nmap's `servicefp` (the
//!   service fingerprint on one line, [`crate::findings::service_fp`]).
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

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use serde_json::Value;

use super::report::{
    ctime, method_conf, range_list, scripts, Collected, Finding, Layout, PortRec, Report, Scripts, Shown,
};
use super::xml_esc::{comment, esc};
use crate::findings::script_text::nse_entries;
use crate::findings::service_fp;
use crate::findings::{HostState, PortState};

/// nmap's XML output, written to `writer` (`Xml::new(writer)`).
pub type Xml<W> = Report<XmlLayout, W>;

/// The XML document's layout.
#[derive(Default)]
pub struct XmlLayout {
    /// The href of the `<?xml-stylesheet?>` line, if any.
    stylesheet: Option<String>,
    /// The hosts of the scan's interrupted first part (a resumed scan).
    prior: Option<super::xml_prior::Prior>,
}

/// Where nmap installs its stylesheet, by its packages.
pub const NMAP_XSL: [&str; 2] = ["/usr/share/nmap/nmap.xsl", "/usr/local/share/nmap/nmap.xsl"];
/// nmap's `--webxml` stylesheet.
pub const WEB_XSL: &str = "https://svn.nmap.org/nmap/docs/nmap.xsl";

/// The stylesheet -oX names, as nmap chooses it: `--stylesheet` as given,
/// `--webxml` nmap.org's, `--no-stylesheet` none; else the installed
/// nmap's nmap.xsl (a `file://` URL) when one of `NMAP_XSL` `exists`.
pub fn stylesheet(given: Option<&str>, web: bool, none: bool, exists: impl Fn(&Path) -> bool) -> Option<String> {
    match (given, web, none) {
        (_, _, true) => None,
        (Some(s), _, _) => Some(s.to_string()),
        (None, true, _) => Some(WEB_XSL.to_string()),
        (None, false, false) => NMAP_XSL.iter().find(|p| exists(Path::new(p))).map(|p| format!("file://{p}")),
    }
}

impl<W: Write> Xml<W> {
    /// Names `href` (a path or URL) as the document's XSL stylesheet, as
    /// nmap does, so `xsltproc` or a browser renders it as nmap's report.
    pub fn with_stylesheet(mut self, href: Option<String>) -> Self {
        self.layout.stylesheet = href;
        self
    }

    /// Makes the document the whole scan's: the hosts of its interrupted
    /// first part first (a host both parts scanned, merged), and counted.
    pub fn with_prior(mut self, prior: super::xml_prior::Prior) -> Self {
        self.layout.prior = Some(prior);
        self
    }
}

impl Layout for XmlLayout {
    fn head(&self, s: &Collected, o: &mut dyn Write) -> io::Result<()> {
        let ports = s.scanned_ports();
        let args = s.args_line();
        let startstr = ctime(s.start_secs() as i64);
        writeln!(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>")?;
        writeln!(o, "<!DOCTYPE nmaprun>")?;
        if let Some(href) = &self.stylesheet {
            writeln!(o, "<?xml-stylesheet href=\"{}\" type=\"text/xsl\"?>", esc(href))?;
        }
        writeln!(o, "<!-- {} -->", comment(&format!("moonscan {VERSION} scan initiated {startstr} as: {args}")))?;
        writeln!(
            o,
            "<nmaprun scanner=\"moonscan\" args=\"{}\" start=\"{}\" startstr=\"{}\" version=\"{VERSION}\" xmloutputversion=\"1.05\">",
            esc(&args),
            s.start_secs() as i64,
            esc(&startstr)
        )?;
        if let Some(start) = &s.start {
            // One per protocol, as nmap writes them for -sS -sU.
            let udp = &start.settings.udp_ports;
            let kinds = [(start.scan_type.as_str(), "tcp", &ports), ("udp", "udp", udp)];
            for (kind, proto, list) in kinds.into_iter().filter(|(_, _, l)| !l.is_empty()) {
                writeln!(
                    o,
                    "<scaninfo type=\"{kind}\" protocol=\"{proto}\" numservices=\"{}\" services=\"{}\"/>",
                    list.len(),
                    range_list(list)
                )?;
            }
        }
        writeln!(o, "<verbose level=\"{}\"/>", s.verbosity())?;
        writeln!(o, "<debugging level=\"0\"/>")
    }

    fn body(&self, s: &Collected, out: &mut dyn Write) -> io::Result<()> {
        let start = s.start_secs();
        let mut doc = String::new();
        let key = |h: &crate::output::report::HostRec| (h.ip, h.name.map(|n| esc(n).into_owned()));
        let own: std::collections::HashSet<super::xml_prior::HostKey> = s.hosts().map(|h| key(&h)).collect();
        let mut prior_up = 0;
        if let Some(p) = &self.prior {
            let (elements, up) = p.others(&own);
            for e in elements {
                out.write_all(e.as_bytes())?;
            }
            prior_up = up;
        }
        let view = super::os_text::OsView::of(s);
        for host in s.hosts() {
            host_xml(&mut doc, &host, start, view);
            if let Some(p) = &self.prior {
                doc = p.whole(&key(&host), std::mem::take(&mut doc));
            }
            // One host at a time: the document is never whole in memory.
            out.write_all(doc.as_bytes())?;
            doc.clear();
        }
        let (up, total) = match &self.prior {
            None => (s.host_count() as u64, s.hosts_total()),
            Some(p) => {
                let up = s.host_count() as u64 + prior_up;
                (up, p.total().max(s.hosts_total()).max(up))
            }
        };
        runstats(&mut doc, s, up, total);
        out.write_all(doc.as_bytes())
    }
}

/// One `<host>` element: status, addresses, names, ports, OS, host
/// scripts, trace and times (`start`: the scan's start, in seconds).
fn host_xml(doc: &mut String, host: &crate::output::report::HostRec<'_>, start: f64, view: super::os_text::OsView) {
    let ip = host.ip;
    let (reason, ttl) = host.status_reason();
    let (first_t, last_t) = host.times();
    let state = host.state();
    if state == HostState::Up {
        let _ =
            write!(doc, "<host starttime=\"{}\" endtime=\"{}\">", (start + first_t) as i64, (start + last_t) as i64);
    } else {
        doc.push_str("<host>");
    }
    let _ = writeln!(doc, "<status state=\"{state}\" reason=\"{}\" reason_ttl=\"{ttl}\"/>", esc(reason));
    let family = if ip.is_ipv4() { "ipv4" } else { "ipv6" };
    let _ = writeln!(doc, "<address addr=\"{ip}\" addrtype=\"{family}\"/>");
    if let Some(status) = host.status {
        if let Some(mac) = &status.mac {
            let vendor = status.vendor.as_deref().map(|v| format!(" vendor=\"{}\"", esc(v))).unwrap_or_default();
            let _ = writeln!(doc, "<address addr=\"{}\" addrtype=\"mac\"{vendor}/>", esc(mac));
        }
    }
    // nmap's: the name given (user), then reverse DNS's (PTR).
    doc.push_str("<hostnames>\n");
    for (name, kind) in [(host.name, "user"), (host.ptr, "PTR")] {
        if let Some(n) = name {
            let _ = writeln!(doc, "<hostname name=\"{}\" type=\"{kind}\"/>", esc(n));
        }
    }
    doc.push_str("</hostnames>\n");
    if !host.ports.is_empty() || !host.unshown.is_empty() {
        doc.push_str("<ports>");
        extraports(doc, &host.unshown);
        for p in &host.ports {
            port_xml(doc, p);
        }
        doc.push_str("</ports>\n");
    }
    // nmap's OS detection: after the ports, before the host scripts.
    if let Some(os) = host.os {
        super::os_text::xml(doc, os, view);
    }
    // nmap's host script results: after the ports, before the times.
    if let Some(hs) = host.host_scripts.filter(|h| !h.is_empty()) {
        doc.push_str("<hostscript>");
        scripts_xml(doc, hs);
        doc.push_str("</hostscript>\n");
    }
    // nmap's traceroute: after the host scripts, before the times.
    if let Some(t) = host.trace.filter(|t| !t.hops.is_empty()) {
        doc.push_str(&super::trace_text::xml(t));
    }
    if let Some(l) = host.status.and_then(|s| s.latency) {
        // nmap's round-trip times, in microseconds.
        let us = (l * 1e6) as u64;
        let _ = writeln!(doc, "<times srtt=\"{us}\" rttvar=\"{us}\" to=\"{}\"/>", (us * 4).max(100_000));
    }
    doc.push_str("</host>\n");
}

/// The `<runstats>` element and the document's end: when the scan
/// finished, how, and its `up` hosts of `total`.
fn runstats(doc: &mut String, s: &Collected, up: u64, total: u64) {
    let end = s.end_secs();
    let timestr = ctime(end as i64);
    let elapsed = s.elapsed();
    let phrase = format!(
        "{total} IP address{} ({up} host{} up)",
        if total == 1 { "" } else { "es" },
        if up == 1 { "" } else { "s" }
    );
    let summary = format!("moonscan done at {timestr}; {phrase} scanned in {elapsed:.2} seconds");
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
    let _ = write!(doc, "<hosts up=\"{up}\" down=\"{}\" total=\"{total}\"/>\n</runstats>\n</nmaprun>\n", total - up);
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
        esc(p.reason.as_str()),
        p.ttl.unwrap_or(0)
    );
    match &p.service {
        Some(s) => {
            let _ = write!(doc, "<service name=\"{}\"", esc(&s.id.service));
            for (attr, v) in [
                ("product", &s.id.product),
                ("version", &s.id.version),
                ("extrainfo", &s.id.info),
                ("hostname", &s.id.hostname),
                ("ostype", &s.id.os),
                ("devicetype", &s.id.device),
            ] {
                if let Some(v) = v {
                    let _ = write!(doc, " {attr}=\"{}\"", esc(v));
                }
            }
            // nmap's fingerprint of a service no rule identified, unwrapped
            // (nmap's servicefp_sf_remove), before the tunnel as nmap writes it.
            if let Some(fp) = &p.servicefp {
                let _ = write!(doc, " servicefp=\"{}\"", esc(&service_fp::unwrap(fp)));
            }
            if s.tunnel == Some(crate::findings::Tunnel::Ssl) {
                doc.push_str(" tunnel=\"ssl\"");
            }
            let (method, conf) = method_conf(s.method);
            let _ = write!(doc, " method=\"{method}\" conf=\"{conf}\"");
            if s.id.cpe.is_empty() {
                doc.push_str("/>");
            } else {
                doc.push('>');
                for c in &s.id.cpe {
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
    scripts_xml(doc, &p.scripts);
    doc.push_str("</port>\n");
}

/// The `<script>` elements of a port's or a host's results.
fn scripts_xml(doc: &mut String, by_id: &Scripts) {
    for s in scripts(by_id) {
        let _ = write!(doc, "<script id=\"{}\" output=\"{}\"", esc(&s.id), esc(&s.text));
        // A result of text alone is an empty element, as nmap writes it.
        if matches!(s.shown, Shown::Result(v) if !v.is_object() && !v.is_array()) {
            doc.push_str("/>");
            continue;
        }
        doc.push('>');
        match s.shown {
            // The script's own table is the <script> element: its entries
            // are its children, as nmap writes a structured result.
            Shown::Result(Value::Object(m)) => {
                for (k, v) in nse_entries(m) {
                    value_xml(doc, k, v, 1);
                }
            }
            Shown::Result(Value::Array(a)) => {
                for v in a {
                    value_xml(doc, None, v, 1);
                }
            }
            Shown::Result(_) => {}
            Shown::Findings(findings) => {
                for f in findings {
                    finding_xml(doc, None, f);
                }
            }
            Shown::Extra(list) => {
                for (plugin, f) in list {
                    finding_xml(doc, Some(plugin), f);
                }
            }
        }
        doc.push_str("</script>");
    }
}

/// A finding in moonscan's layout: a key-less `<table>` with its plugin
/// (beside results), title, severity and data.
fn finding_xml(doc: &mut String, plugin: Option<&str>, f: &Finding) {
    doc.push_str("<table>\n");
    if let Some(plugin) = plugin {
        let _ = writeln!(doc, "<elem key=\"plugin\">{}</elem>", esc(plugin));
    }
    let _ = writeln!(doc, "<elem key=\"title\">{}</elem>", esc(&f.title));
    let _ = writeln!(doc, "<elem key=\"severity\">{}</elem>", esc(f.severity.as_str()));
    value_xml(doc, Some("data"), &f.data, 0);
    doc.push_str("</table>\n");
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
            for (k, v) in nse_entries(m) {
                value_xml(doc, k, v, depth + 1);
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

/// nmap's `<extraports>`: one per state, with its count, and an
/// `<extrareasons>` per reason and protocol.
fn extraports(doc: &mut String, unshown: &[super::report::Unshown]) {
    let mut states: Vec<PortState> = Vec::new();
    for u in unshown {
        if !states.contains(&u.state) {
            states.push(u.state);
        }
    }
    for state in states {
        let of: Vec<_> = unshown.iter().filter(|u| u.state == state).collect();
        let count: u64 = of.iter().map(|u| u.count).sum();
        let _ = writeln!(doc, "<extraports state=\"{}\" count=\"{count}\">", state.as_str());
        for u in of {
            let _ = writeln!(
                doc,
                "<extrareasons reason=\"{}\" count=\"{}\" proto=\"{}\"/>",
                u.reason.as_str(),
                u.count,
                u.proto
            );
        }
        doc.push_str("</extraports>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::super::report::sample::*;
    use super::super::xml_esc::forbidden;
    use super::super::Sink;
    use super::*;

    use crate::findings::*;

    #[test]
    fn the_stylesheet_is_chosen_and_named_as_nmap_does() {
        let installed = |p: &Path| p == Path::new("/usr/share/nmap/nmap.xsl");
        assert_eq!(stylesheet(None, false, false, installed).as_deref(), Some("file:///usr/share/nmap/nmap.xsl"));
        assert_eq!(stylesheet(None, false, false, |_| false), None, "no nmap, no stylesheet");
        assert_eq!(stylesheet(None, true, false, installed).as_deref(), Some(WEB_XSL));
        assert_eq!(stylesheet(Some("my.xsl"), false, false, installed).as_deref(), Some("my.xsl"));
        assert_eq!(stylesheet(Some("my.xsl"), false, true, installed), None);
        let mut buf = Vec::new();
        feed(&mut Xml::new(&mut buf).with_stylesheet(Some("a\"b.xsl".into())), &scan());
        let doc = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = doc.lines().take(3).collect();
        assert_eq!(
            lines,
            [
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>",
                "<!DOCTYPE nmaprun>",
                "<?xml-stylesheet href=\"a&quot;b.xsl\" type=\"text/xsl\"?>"
            ]
        );
        assert!(!render(&scan()).contains("xml-stylesheet"));
    }

    fn render(events: &[Event]) -> String {
        let mut buf = Vec::new();
        feed(&mut Xml::new(&mut buf), events);
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
                    || name.strip_prefix("#x").is_some_and(|h| u32::from_str_radix(h, 16).is_ok())
                    || name.strip_prefix('#').is_some_and(|d| d.parse::<u32>().is_ok());
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
             <cpe>cpe:/o:linux:linux_kernel</cpe></service><script id=\"ssh-hostkey\""
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
    fn script_results_are_written_as_nmap_writes_structured_output() {
        let doc = render(&scan());
        // The result's table is the <script> element itself.
        assert!(doc.contains(
            "<script id=\"http-title\" output=\"moonscan lab\"><elem key=\"title\">moonscan lab</elem>\n</script>"
        ));
        assert!(doc.contains(
            "<script id=\"ssh-hostkey\" output=\"&#xa;  256 a554a7d33ea2e0bb3358c39d677e3dfa (ED25519)\"><table>\n\
             <elem key=\"bits\">256</elem>\n<elem key=\"fingerprint\">a554a7d33ea2e0bb3358c39d677e3dfa</elem>\n\
             <elem key=\"type\">ssh-ed25519</elem>\n</table>\n</script>"
        ));
        // Findings beside a result come after the port's scripts, never inside nmap's keys.
        assert!(doc.contains(
            "<script id=\"moonscan-findings\" output=\"[low] ssh-hostkey: SSH host key shared\"><table>\n\
             <elem key=\"plugin\">ssh-hostkey</elem>\n<elem key=\"title\">SSH host key shared</elem>\n\
             <elem key=\"severity\">low</elem>\n</table>\n</script></port>"
        ));
    }

    #[test]
    fn list_items_of_a_mixed_table_are_written_without_keys_first() {
        // xmpp-info's {"STARTTLS Failed", info = {...}} reaches JSON as {"1": ..., "info": ...}.
        let mut evs = scan();
        let end = evs.pop().unwrap();
        let data =
            serde_json::json!({"info": {"errors": ["host-unknown"], "1": "x", "3": "y"}, "1": "STARTTLS Failed"});
        evs.push(result("198.18.0.2", 443, "xmpp-info", "\n  STARTTLS Failed", data));
        evs.push(end);
        let doc = render(&evs);
        well_formed(&doc).unwrap();
        assert!(
            doc.contains(
                "output=\"&#xa;  STARTTLS Failed\"><elem>STARTTLS Failed</elem>\n<table key=\"info\">\n\
                 <elem>x</elem>\n<elem key=\"3\">y</elem>\n<table key=\"errors\">\n<elem>host-unknown</elem>\n</table>\n</table>\n</script>"
            ),
            "{doc}"
        );
    }

    #[test]
    fn host_script_results_follow_the_ports_as_nmaps_hostscript() {
        let mut evs = scan();
        let end = evs.pop().unwrap();
        let data = serde_json::json!({"date": "2026-11-25T03:55:05", "start_date": "N/A"});
        let text = "\n  date: 2026-11-25T03:55:05\n  start_date: N/A";
        evs.push(host_result("198.18.0.2", 443, "smb2-time", text, data));
        evs.push(end);
        let doc = render(&evs);
        well_formed(&doc).unwrap();
        let host = doc.split("<host ").nth(1).unwrap();
        let (ports, after) = host.split_once("</ports>").unwrap();
        assert!(!ports.contains("smb2-time"), "not a port's script: {doc}");
        assert!(
            after.starts_with(
                "\n<hostscript><script id=\"smb2-time\" output=\"&#xa;  date: 2026-11-25T03:55:05&#xa;  start_date: N/A\">\
                 <elem key=\"date\">2026-11-25T03:55:05</elem>\n<elem key=\"start_date\">N/A</elem>\n</script></hostscript>\n"
            ),
            "{after}"
        );
        assert_eq!(doc.matches("<hostscript>").count(), 1, "only the host with one");
    }

    #[test]
    fn findings_of_one_plugin_make_one_script_with_a_table_each() {
        let doc = render(&scan());
        assert_eq!(doc.matches("<script id=\"http-headers\"").count(), 1);
        assert!(doc.contains(
            "<script id=\"http-headers\" output=\"Missing X-Frame-Options header&#xa;  header: X-Frame-Options&#xa;\
             Server version disclosed&#xa;  server: nginx/1.22.1\"><table>\n\
             <elem key=\"title\">Missing X-Frame-Options header</elem>\n<elem key=\"severity\">info</elem>\n\
             <table key=\"data\">\n<elem key=\"header\">X-Frame-Options</elem>\n</table>\n</table>\n<table>\n\
             <elem key=\"title\">Server version disclosed</elem>\n<elem key=\"severity\">info</elem>\n\
             <table key=\"data\">\n<elem key=\"server\">nginx/1.22.1</elem>\n</table>\n</table>\n</script>"
        ));
        // nmap's default scripts first (http-title), then its others (http-headers).
        assert!(doc.find("id=\"http-title\"").unwrap() < doc.find("id=\"http-headers\"").unwrap());
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
        svc.id.cpe = vec![nasty.into()];
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
        assert!(
            doc.contains("a&amp;b &lt;c&gt; &quot;d&quot; &apos;e&apos;&#xa;line2&#xd;&#x9;tab  ]]&gt; -&#45; end-")
        );
        let dashes = doc.matches("--").count();
        assert_eq!(
            dashes,
            doc.matches("<!--").count() + doc.matches("-->").count(),
            "-- only opens and closes comments"
        );
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
    fn names_given_are_user_hostnames_and_reverse_dns_ones_ptr_one_host_per_name() {
        let doc = render(&super::super::report::sample::named_scan(Some("www.example")));
        well_formed(&doc).unwrap();
        let hosts: Vec<&str> = doc.split("<host ").skip(1).collect();
        assert_eq!(hosts.len(), 3, "{doc}");
        assert!(hosts[0].contains("<hostnames>\n<hostname name=\"www.example\" type=\"PTR\"/>\n</hostnames>"), "{doc}");
        assert!(hosts[1].contains(
            "<hostnames>\n<hostname name=\"alpha.example\" type=\"user\"/>\n<hostname name=\"www.example\" type=\"PTR\"/>\n</hostnames>"
        ));
        assert!(hosts[1].contains("product=\"alpha-site\"") && !hosts[1].contains("beta-site"), "{doc}");
        assert!(hosts[2].contains("product=\"beta-site\"") && hosts[2].contains("id=\"http-title\""), "{doc}");
        assert!(doc.contains("<hosts up=\"3\""), "{doc}");
    }

    #[test]
    fn an_address_with_hundreds_of_names_has_a_report_for_each() {
        let mut named = start("moonscan -p 443 -iL names", 1);
        let names: Vec<String> = (0..300).map(|i| format!("n{i:03}.example")).collect();
        if let Event::ScanStart(s) = &mut named {
            s.settings.hostnames =
                names.iter().map(|n| Hostname { ip: ip("198.18.0.2"), name: n.clone(), others: Vec::new() }).collect();
        }
        let mut evs = vec![named, port("198.18.0.2", 443, PortState::Open, 0.0)];
        for n in &names {
            let mut s = service("198.18.0.2", 443, "https", Some(&format!("site-{n}")), None);
            s.targetname = Some(n.clone());
            evs.push(Event::Service(Box::new(s)));
        }
        evs.push(end(0.1, 0));
        let doc = render(&evs);
        let hosts: Vec<&str> = doc.split("<host ").skip(1).collect();
        assert_eq!(hosts.len(), 300);
        for (h, n) in hosts.iter().zip(&names) {
            assert!(
                h.contains(&format!("name=\"{n}\" type=\"user\"")) && h.contains(&format!("product=\"site-{n}\"")),
                "{h}"
            );
        }
        assert!(doc.contains("<hosts up=\"300\""));
    }

    #[test]
    fn ports_not_shown_are_extraports_and_names_are_user_hostnames() {
        let mut named = start("moonscan -p 1-100 lab.example", 100);
        if let Event::ScanStart(s) = &mut named {
            s.settings.hostnames =
                vec![Hostname { ip: ip("198.18.0.2"), name: "lab.example".into(), others: Vec::new() }];
        }
        let doc = render(&[
            named,
            port("198.18.0.2", 22, PortState::Open, 0.0),
            Event::Extraports(ExtraportsEvent {
                scan_id: "0123456789abcdef".into(),
                ip: ip("198.18.0.2"),
                proto: Proto::Tcp,
                state: PortState::Closed,
                reason: Reason::Reset,
                count: 97,
                ports: Vec::new(),
            }),
            end(0.1, 0),
        ]);
        well_formed(&doc).unwrap();
        assert!(doc.contains("<hostnames>\n<hostname name=\"lab.example\" type=\"user\"/>\n</hostnames>"), "{doc}");
        let ports = doc.split("<ports>").nth(1).unwrap();
        assert!(
            ports.starts_with(
                "<extraports state=\"filtered\" count=\"2\">\n<extrareasons reason=\"no-response\" count=\"2\" proto=\"tcp\"/>\n</extraports>\n\
                 <extraports state=\"closed\" count=\"97\">\n<extrareasons reason=\"reset\" count=\"97\" proto=\"tcp\"/>\n</extraports>\n"
            ) || ports.starts_with(
                "<extraports state=\"closed\" count=\"97\">\n<extrareasons reason=\"reset\" count=\"97\" proto=\"tcp\"/>\n</extraports>\n\
                 <extraports state=\"filtered\" count=\"2\">"
            ),
            "{ports}"
        );
        // An interrupted scan says nothing of the ports it never heard from.
        let cut = render(
            &[start("moonscan -p 1-100 198.18.0.2", 100), port("198.18.0.2", 22, PortState::Open, 0.0), end(0.1, 0)]
                .into_iter()
                .map(|e| match e {
                    Event::ScanEnd(mut e) => {
                        e.interrupted = true;
                        Event::ScanEnd(e)
                    }
                    e => e,
                })
                .collect::<Vec<_>>(),
        );
        assert!(!cut.contains("extraports"), "{cut}");
    }
}
