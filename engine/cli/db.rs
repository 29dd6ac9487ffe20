//! `moonscan db list|show|diff|export`: scans stored with `--db`, from the
//! command line.
//!
//! The database is `--db FILE|URL`, else `$MOONSCAN_DB`, else `moonscan.db`
//! in the current folder (a file must exist already: reading never creates
//! one). A scan is named by its id or any unique prefix of it. Exit status:
//! 0 done, 1 the database could not be read or an output written, 2 bad
//! usage (unknown or ambiguous scan id, bad flags).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::Path;

use clap::Subcommand;
use moonscan::findings::{
    ErrorEvent, Event, ExtraportsEvent, FindingEvent, HostState, PortEvent, PortState, Proto, ScriptEvent, Service,
    ServiceMethod,
};
use moonscan::output::screen;
use moonscan::output::store::{self, Db, ScanSummary};
use moonscan::output::{Ndjson, Sink, Xml};

#[derive(Debug, clap::Args)]
pub struct DbArgs {
    /// The database: a SQLite file or a postgres:// URL (default: $MOONSCAN_DB, or ./moonscan.db).
    #[arg(long = "db", global = true, value_name = "FILE|URL")]
    db: Option<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Every stored scan: id, start, open ports, findings, state, command line.
    List,
    /// One scan: its hosts, ports, services, findings and errors.
    Show {
        /// Scan id or a unique prefix of it.
        scan: String,
    },
    /// What changed from SCAN_A to SCAN_B: ports opened and closed, services changed, findings new and gone.
    Diff {
        #[arg(value_name = "SCAN_A")]
        a: String,
        #[arg(value_name = "SCAN_B")]
        b: String,
    },
    /// Write a scan's events again: -oJ FILE (NDJSON), -oX FILE (nmap XML); '-' is stdout.
    Export {
        /// Scan id or a unique prefix of it.
        scan: String,
        /// NDJSON events (-oJ).
        #[arg(long = "output-json", value_name = "FILE")]
        json: Option<String>,
        /// nmap XML (-oX).
        #[arg(long = "output-xml", value_name = "FILE")]
        xml: Option<String>,
    },
}

/// The database `moonscan db` reads when none is given.
pub fn default_db() -> String {
    std::env::var("MOONSCAN_DB").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "moonscan.db".into())
}

/// A failure: its message, and whether it was the user's (exit 2) or not
/// (1); 0 for a reader that went away.
struct Failed(String, u8);

impl From<moonscan::Error> for Failed {
    fn from(e: moonscan::Error) -> Failed {
        let code = if e.is_usage() { 2 } else { 1 };
        Failed(e.to_string(), code)
    }
}

impl From<io::Error> for Failed {
    fn from(e: io::Error) -> Failed {
        // `| head`: the reader left, which is its choice, not a failure.
        match e.kind() {
            io::ErrorKind::BrokenPipe => Failed(String::new(), 0),
            _ => Failed(e.to_string(), 1),
        }
    }
}

/// Runs `moonscan db ...` (`argv` starts at "db"); returns the exit status.
pub fn run(args: DbArgs) -> u8 {
    let target = args.db.clone().unwrap_or_else(default_db);
    let opened = Db::open(&target, &super::places::from_env().pg).map_err(|e| {
        let Failed(msg, code) = Failed::from(e);
        Failed(format!("{}: {msg}", store::display_name(&target)), code)
    });
    let res = opened.and_then(|mut db| match args.cmd {
        Cmd::List => list(&mut db),
        Cmd::Show { scan } => show(&mut db, &scan),
        Cmd::Diff { a, b } => diff(&mut db, &a, &b),
        Cmd::Export { scan, json, xml } => export(&mut db, &scan, json, xml),
    });
    match res {
        Ok(()) | Err(Failed(_, 0)) => 0,
        Err(Failed(msg, code)) => {
            tell!("moonscan: {msg}");
            code
        }
    }
}

fn list(db: &mut Db) -> Result<(), Failed> {
    let scans = db.scans()?;
    let mut o = moonscan::output::Screened(io::stdout().lock());
    writeln!(o, "{:<16}  {:<24}  {:>6}  {:>8}  {:<11}  command", "scan", "started", "open", "findings", "state")?;
    for s in &scans {
        writeln!(
            o,
            "{:<16}  {:<24}  {:>6}  {:>8}  {:<11}  {}",
            s.id,
            s.started,
            s.open_ports,
            s.findings,
            state(s),
            command(&s.args)
        )?;
    }
    Ok(o.flush()?)
}

fn state(s: &ScanSummary) -> &'static str {
    match (&s.ended, s.interrupted) {
        (None, _) => "unfinished",
        (Some(_), true) => "interrupted",
        (Some(_), false) => "done",
    }
}

/// The command line without the program's path.
fn command(args: &[String]) -> String {
    args.iter()
        .skip(1)
        .map(|a| if a.contains(' ') || a.is_empty() { format!("'{a}'") } else { a.clone() })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Everything known about one port.
#[derive(Default)]
struct PortView<'a> {
    port: Option<&'a PortEvent>,
    service: Option<&'a Service>,
    scripts: Vec<&'a ScriptEvent>,
    findings: Vec<&'a FindingEvent>,
}

fn show(db: &mut Db, prefix: &str) -> Result<(), Failed> {
    let id = db.resolve(prefix)?;
    let summary = db.scan(&id)?.ok_or_else(|| Failed(format!("no scan {id}"), 2))?;
    let events = db.events(&id)?;
    let mut o = moonscan::output::Screened(io::stdout().lock());
    let mut hosts: BTreeMap<IpAddr, BTreeMap<(u16, Proto), PortView>> = BTreeMap::new();
    let mut errors: Vec<&ErrorEvent> = Vec::new();
    let mut unshown: BTreeMap<IpAddr, Vec<&ExtraportsEvent>> = BTreeMap::new();
    let mut end = None;
    let mut oses: BTreeMap<IpAddr, &moonscan::findings::OsEvent> = BTreeMap::new();
    let mut traces: BTreeMap<IpAddr, &moonscan::findings::TraceEvent> = BTreeMap::new();
    for e in &events {
        match e {
            Event::Os(x) => {
                hosts.entry(x.ip).or_default();
                oses.insert(x.ip, x);
            }
            Event::Trace(x) => {
                hosts.entry(x.ip).or_default();
                traces.insert(x.ip, x);
            }
            // A host up without a port shown (every port closed) is listed too.
            Event::Host(h) if h.state == HostState::Up => {
                hosts.entry(h.ip).or_default();
            }
            Event::Extraports(x) => {
                hosts.entry(x.ip).or_default();
                unshown.entry(x.ip).or_default().push(x);
            }
            Event::Port(p) => hosts.entry(p.ip).or_default().entry((p.port, p.proto)).or_default().port = Some(p),
            Event::Service(s) => hosts.entry(s.ip).or_default().entry((s.port, s.proto)).or_default().service = Some(s),
            Event::Script(r) => hosts.entry(r.ip).or_default().entry((r.port, r.proto)).or_default().scripts.push(r),
            Event::Finding(f) => hosts.entry(f.ip).or_default().entry((f.port, f.proto)).or_default().findings.push(f),
            Event::Error(e) => errors.push(e),
            Event::ScanEnd(e) => end = Some(e),
            _ => {}
        }
    }

    write!(o, "scan {} ({} scan", summary.id, summary.scan_type)?;
    if let Some(shard) = &summary.shard {
        write!(o, ", shard {shard}")?;
    }
    writeln!(o, ", seed {})", summary.seed)?;
    writeln!(o, "command: {}", command(&summary.args))?;
    match (&summary.ended, summary.elapsed) {
        (Some(ended), Some(el)) => writeln!(o, "started {}, ended {ended} ({el:.2} s)", summary.started)?,
        _ => writeln!(o, "started {}, not finished", summary.started)?,
    }
    let up = hosts
        .values()
        .filter(|ports| ports.values().any(|v| v.port.is_some_and(|p| p.state == PortState::Open)))
        .count();
    write!(
        o,
        "{} open ports on {up} hosts, {} findings, {} errors",
        summary.open_ports,
        summary.findings,
        errors.len()
    )?;
    match end {
        Some(e) => writeln!(
            o,
            " ({} probes sent, {} closed, {} filtered{})",
            e.probes_sent,
            e.closed,
            e.filtered,
            if e.interrupted { ", interrupted" } else { "" }
        )?,
        None => writeln!(o)?,
    }

    for (ip, ports) in &hosts {
        writeln!(o, "\n{ip}")?;
        let unshown_here = unshown.get(ip).map_or(&[][..], Vec::as_slice);
        host_head(&mut o, unshown_here, oses.get(ip).copied(), traces.get(ip).copied())?;
        if ports.is_empty() {
            continue;
        }
        writeln!(o, "  {:<11} {:<9} {:<14} version", "port", "state", "service")?;
        for ((port, proto), v) in ports {
            port_lines(&mut o, *port, *proto, v)?;
        }
    }
    if !errors.is_empty() {
        error_lines(&mut o, errors)?;
    }
    Ok(o.flush()?)
}

/// A host's lines above its ports: the ports not shown, its OS and its trace.
fn host_head(
    o: &mut impl Write,
    unshown: &[&ExtraportsEvent],
    os: Option<&moonscan::findings::OsEvent>,
    trace: Option<&moonscan::findings::TraceEvent>,
) -> io::Result<()> {
    for x in unshown {
        let (state, proto, reason) = (x.state.as_str(), x.proto.as_str(), x.reason);
        if x.ports.is_empty() {
            let s = if x.count == 1 { "" } else { "s" };
            writeln!(o, "  not shown: {} {state} {proto} port{s} ({reason})", x.count)?;
        } else {
            let ports: Vec<String> = x.ports.iter().map(u16::to_string).collect();
            writeln!(o, "  {state}: {}/{proto} ({reason})", ports.join(", "))?;
        }
    }
    if let Some(x) = os {
        let distance = x.distance.map(|d| format!(", {d} hop{}", if d == 1 { "" } else { "s" })).unwrap_or_default();
        match (x.matches.first(), &x.hint) {
            (Some(m), _) => {
                let how = if x.exact { "" } else { ", a guess" };
                writeln!(o, "  os: {} ({}%{how}){distance}", screen(&m.name), m.accuracy)?;
            }
            (None, _) if x.too_many => writeln!(o, "  os: too many fingerprints match{distance}")?,
            (None, Some(h)) => {
                writeln!(o, "  os hint (passive, guess): {} ({})", screen(&h.family), screen(&h.evidence))?
            }
            (None, None) => writeln!(o, "  os: no match{distance}")?,
        }
    }
    if let Some(t) = trace {
        let hops: Vec<String> = t
            .hops
            .iter()
            .map(|h| match (h.ip, h.rtt_ms) {
                (Some(ip), Some(rtt)) => format!("{} {ip} ({rtt:.2} ms)", h.ttl),
                (Some(ip), None) => format!("{} {ip}", h.ttl),
                (None, _) => format!("{} *", h.ttl),
            })
            .collect();
        writeln!(o, "  trace ({}/{}): {}", t.port, t.proto, hops.join(", "))?;
    }
    Ok(())
}

/// A port's row, its TLS session, and what plugins said of it.
fn port_lines(o: &mut impl Write, port: u16, proto: Proto, v: &PortView) -> io::Result<()> {
    let state = v.port.map_or("?", |p| p.state.as_str());
    let (service, version) = match v.service {
        Some(s) => service_words(s),
        None => (String::new(), String::new()),
    };
    let (service, version) = (screen(&service), screen(&version));
    let line = format!("  {:<11} {:<9} {:<14} {version}", format!("{port}/{proto}"), state, service);
    writeln!(o, "{}", line.trim_end())?;
    if let Some(tls) = v.service.and_then(|s| s.tls.as_deref()) {
        write!(o, "    TLS: {} {}", screen(&tls.version), screen(&tls.cipher))?;
        if let Some(alpn) = &tls.alpn {
            write!(o, ", ALPN {}", screen(alpn))?;
        }
        writeln!(o, ", {} certificate(s)", tls.chain.len())?;
        if let Some(c) = tls.chain.first() {
            let (subject, issuer, not_after) = (screen(&c.subject), screen(&c.issuer), screen(&c.not_after));
            writeln!(o, "    Certificate: {subject}; issuer: {issuer}; not after {not_after}")?;
        }
    }
    // Script results (their text, line by line), then findings.
    for r in &v.scripts {
        let lines: Vec<_> = r.output.trim_end_matches('\n').split('\n').map(|l| screen(l)).collect();
        writeln!(o, "    | {}: {}", screen(&r.plugin), lines.join("\n    |   "))?;
    }
    for f in &v.findings {
        writeln!(o, "    | {} [{}]: {}", screen(&f.plugin), f.severity, screen(&f.title))?;
    }
    Ok(())
}

/// The scan's errors, one line each.
fn error_lines(o: &mut impl Write, errors: Vec<&ErrorEvent>) -> io::Result<()> {
    writeln!(o, "\nerrors")?;
    for e in errors {
        let at = match (e.ip, e.port) {
            (Some(ip), Some(port)) => format!("{} ", std::net::SocketAddr::new(ip, port)),
            (Some(ip), None) => format!("{ip} "),
            _ => String::new(),
        };
        let plugin = e.plugin.as_deref().map(|p| format!("[{}] ", screen(p))).unwrap_or_default();
        let kind = serde_json::to_value(e.kind).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        writeln!(o, "  {at}{plugin}({kind}): {}", screen(&e.message))?;
    }
    Ok(())
}

/// (`ssl/http`, `nginx 1.22.1 (info)`) for a service; `?` marks a guess.
fn service_words(s: &Service) -> (String, String) {
    let tunnel = if s.tunnel == Some(moonscan::findings::Tunnel::Ssl) { "ssl/" } else { "" };
    let guess = if s.method == ServiceMethod::Probed { "" } else { "?" };
    let mut words: Vec<String> = [&s.id.product, &s.id.version].into_iter().filter_map(Clone::clone).collect();
    if let Some(info) = &s.id.info {
        words.push(format!("({info})"));
    }
    (format!("{tunnel}{}{guess}", s.id.service), words.join(" "))
}

fn diff(db: &mut Db, a: &str, b: &str) -> Result<(), Failed> {
    let (a, b) = (db.resolve(a)?, db.resolve(b)?);
    let (ev_a, ev_b) = (db.events(&a)?, db.events(&b)?);
    let d = store::diff(&ev_a, &ev_b);
    let mut o = moonscan::output::Screened(io::stdout().lock());
    let started = |evs: &[Event]| match evs.first() {
        Some(Event::ScanStart(s)) => humantime::format_rfc3339_millis(s.started).to_string(),
        _ => String::new(),
    };
    writeln!(o, "--- {a} ({})", started(&ev_a))?;
    writeln!(o, "+++ {b} ({})", started(&ev_b))?;
    for (ip, port, proto) in &d.opened {
        writeln!(o, "+ {ip} {port}/{proto} open")?;
    }
    for (ip, port, proto) in &d.closed {
        writeln!(o, "- {ip} {port}/{proto} no longer open")?;
    }
    for c in &d.changed {
        writeln!(o, "~ {} {}/{} service: {} -> {}", c.ip, c.port, c.proto, screen(&c.before), screen(&c.after))?;
    }
    for c in &d.os {
        let side = |s: &Option<String>| s.as_deref().map_or_else(|| "no match".to_string(), |s| screen(s).into_owned());
        writeln!(o, "~ {} os: {} -> {}", c.ip, side(&c.before), side(&c.after))?;
    }
    for f in &d.new_findings {
        let (plugin, title) = (screen(&f.plugin), screen(&f.title));
        writeln!(o, "+ {} {}/{} finding {plugin} [{}]: {title}", f.ip, f.port, f.proto, f.severity)?;
    }
    for f in &d.gone_findings {
        let (plugin, title) = (screen(&f.plugin), screen(&f.title));
        writeln!(o, "- {} {}/{} finding {plugin} [{}]: {title}", f.ip, f.port, f.proto, f.severity)?;
    }
    for (x, y) in &d.scripts {
        let Some(r) = x.as_ref().or(y.as_ref()) else { continue };
        let at = format!("{} {}/{} script {}", r.ip, r.port, r.proto, screen(&r.plugin));
        let lines = |r: &ScriptEvent| -> Vec<String> {
            r.output
                .trim_end_matches('\n')
                .split('\n')
                .filter(|l| !l.is_empty())
                .map(|l| screen(l).into_owned())
                .collect()
        };
        match (x, y) {
            (Some(x), Some(y)) => {
                let (before, after) = (lines(x), lines(y));
                writeln!(o, "~ {at}")?;
                for l in before.iter().filter(|l| !after.contains(l)) {
                    writeln!(o, "    - {l}")?;
                }
                for l in after.iter().filter(|l| !before.contains(l)) {
                    writeln!(o, "    + {l}")?;
                }
            }
            (Some(_), None) => writeln!(o, "- {at}")?,
            _ => writeln!(o, "+ {at}")?,
        }
    }
    writeln!(
        o,
        "{} opened, {} closed, {} services changed, {} new findings, {} findings gone, {} script results changed{}",
        d.opened.len(),
        d.closed.len(),
        d.changed.len(),
        d.new_findings.len(),
        d.gone_findings.len(),
        d.scripts.len(),
        if d.os.is_empty() { String::new() } else { format!(", {} OS changed", d.os.len()) }
    )?;
    let u = &d.uncovered;
    if u.open_only_in_a + u.open_only_in_b > 0 {
        writeln!(
            o,
            "not compared: {} open port(s) of {a} and {} of {b} that the other scan did not cover (port or host not scanned)",
            u.open_only_in_a, u.open_only_in_b
        )?;
    }
    for (which, plugins) in [(&a, &u.plugins_only_in_a), (&b, &u.plugins_only_in_b)] {
        if !plugins.is_empty() {
            writeln!(o, "not compared: plugins only {which} ran: {}", screen(&plugins.join(", ")))?;
        }
    }
    Ok(o.flush()?)
}

/// Where an export goes: a file, or stdout for `-`.
fn sink_to(path: &str, make: impl Fn(Box<dyn Write + Send>) -> Box<dyn Sink>) -> Result<Box<dyn Sink>, Failed> {
    if path == "-" {
        return Ok(make(Box::new(io::stdout())));
    }
    let f = File::create(path).map_err(|e| Failed(format!("{path}: {e}"), 1))?;
    Ok(make(Box::new(f)))
}

fn export(db: &mut Db, prefix: &str, json: Option<String>, xml: Option<String>) -> Result<(), Failed> {
    if json.is_none() && xml.is_none() {
        return Err(Failed("db export: say where: -oJ FILE and/or -oX FILE ('-' for stdout)".into(), 2));
    }
    if json.as_deref() == Some("-") && xml.as_deref() == Some("-") {
        return Err(Failed("db export: -oJ and -oX cannot both go to stdout".into(), 2));
    }
    let id = db.resolve(prefix)?;
    let events = db.events(&id)?;
    let mut sinks: Vec<(String, Box<dyn Sink>)> = Vec::new();
    if let Some(path) = json {
        let s = sink_to(&path, |w| Box::new(Ndjson::new(w)))?;
        sinks.push((path, s));
    }
    if let Some(path) = xml {
        let xsl = moonscan::output::xml_stylesheet(None, false, false, Path::exists);
        let nmap = super::places::from_env().nmap;
        let s = sink_to(&path, |w| Box::new(Xml::new(w).with_stylesheet(xsl.clone()).with_nmap_dirs(nmap.clone())))?;
        sinks.push((path, s));
    }
    for (path, sink) in &mut sinks {
        let written = events.iter().try_for_each(|e| sink.record(e)).and_then(|()| sink.close());
        written.map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe => Failed(String::new(), 0),
            _ => Failed(format!("{path}: {e}"), 1),
        })?;
    }
    Ok(())
}
