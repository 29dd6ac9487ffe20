//! The difference between two scans (`moonscan db diff`): ports opened and
//! closed, findings that appeared or went, services, script results and OS
//! guesses that changed, and what the second scan did not cover.
//!
//! In: two scans' events, as the store reads them back (read.rs) or as any
//! events stream gives them. Out: a [`Diff`]. What always holds: only
//! events are compared, never the store's rows; script results are
//! compared in their steady form (without the keys named volatile).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde_json::Value;

use crate::findings::{Event, FindingEvent, HostState, OsEvent, PortState, ScriptEvent, Service, Tunnel};

/// A port whose service differs between two scans.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceChange {
    pub ip: IpAddr,
    pub port: u16,
    pub proto: String,
    /// `service product version` in the first scan and in the second.
    pub before: String,
    pub after: String,
}

/// What changed from one scan to another, within what both covered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Diff {
    /// Open in the second scan, not in the first (which scanned it): (ip, port, proto).
    pub opened: Vec<(IpAddr, u16, String)>,
    /// Open in the first scan, not in the second (which scanned it).
    pub closed: Vec<(IpAddr, u16, String)>,
    /// Open in both, identified differently.
    pub changed: Vec<ServiceChange>,
    /// Findings of the second scan that the first did not have (by ip,
    /// port, plugin, title), of plugins both scans ran.
    pub new_findings: Vec<FindingEvent>,
    /// Findings of the first scan that the second does not have.
    pub gone_findings: Vec<FindingEvent>,
    /// Script results of a plugin both scans ran, on a port open in both,
    /// that differ (the values the plugin calls volatile aside): the first
    /// scan's and the second's, either missing when only one has it.
    pub scripts: Vec<(Option<ScriptEvent>, Option<ScriptEvent>)>,
    /// Hosts both scans ran OS detection on whose OS differs: the best
    /// match or its classes changed, or a match appeared or disappeared
    /// (see [`OsChange`]).
    pub os: Vec<OsChange>,
    /// What was not compared: open ports of one scan the other did not
    /// scan or report the host of, and plugins only one scan ran.
    pub uncovered: Uncovered,
}

/// What one scan covered and the other did not (see [`Diff::uncovered`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Uncovered {
    /// Open ports of the first scan that the second did not cover.
    pub open_only_in_a: usize,
    /// Open ports of the second scan that the first did not cover.
    pub open_only_in_b: usize,
    /// Plugins that ran in only the first scan, and only the second.
    pub plugins_only_in_a: Vec<String>,
    pub plugins_only_in_b: Vec<String>,
}

impl Uncovered {
    pub fn is_empty(&self) -> bool {
        *self == Uncovered::default()
    }
}

impl Diff {
    /// Nothing changed in what both scans covered.
    pub fn is_empty(&self) -> bool {
        self.opened.is_empty()
            && self.closed.is_empty()
            && self.changed.is_empty()
            && self.new_findings.is_empty()
            && self.gone_findings.is_empty()
            && self.scripts.is_empty()
            && self.os.is_empty()
    }
}

/// A host whose OS, as OS detection named it, differs between two scans:
/// `best (accuracy%)` with its classes (`vendor family generation type`),
/// `None` on the side that found none.
#[derive(Clone, Debug, PartialEq)]
pub struct OsChange {
    pub ip: IpAddr,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// What `db diff` compares of a host's OS: its best match and that
/// match's classes (not the accuracy, which moves from scan to scan).
fn os_form(e: &OsEvent) -> Option<(String, String)> {
    let m = e.matches.first()?;
    let classes: Vec<String> = m
        .classes
        .iter()
        .map(|c| {
            let gen = c.generation.as_deref().map(|g| format!(" {g}")).unwrap_or_default();
            format!("{} {}{gen} {}", c.vendor, c.family, c.device_type)
        })
        .collect();
    Some((m.name.clone(), classes.join("; ")))
}

/// A host's OS as `db diff` shows it: `name (accuracy%) [classes]`.
fn os_shown(e: &OsEvent) -> Option<String> {
    let m = e.matches.first()?;
    let (_, classes) = os_form(e)?;
    Some(if classes.is_empty() {
        format!("{} ({}%)", m.name, m.accuracy)
    } else {
        format!("{} ({}%) [{classes}]", m.name, m.accuracy)
    })
}

/// `service product version (info)` of a service event.
fn identity(s: &Service) -> String {
    let mut words = vec![format!("{}{}", if s.tunnel == Some(Tunnel::Ssl) { "ssl/" } else { "" }, s.id.service)];
    words.extend([&s.id.product, &s.id.version].into_iter().filter_map(Clone::clone));
    if let Some(info) = &s.id.info {
        words.push(format!("({info})"));
    }
    words.join(" ")
}

/// What one scan covered: the ports it probed (from its settings), the
/// hosts it reported anything of, the plugins it ran.
struct Coverage {
    tcp: BTreeSet<u16>,
    udp: BTreeSet<u16>,
    hosts: BTreeSet<IpAddr>,
    plugins: BTreeSet<String>,
}

impl Coverage {
    fn of(evs: &[Event]) -> Coverage {
        let mut c =
            Coverage { tcp: BTreeSet::new(), udp: BTreeSet::new(), hosts: BTreeSet::new(), plugins: BTreeSet::new() };
        for e in evs {
            match e {
                Event::ScanStart(s) => {
                    c.tcp.extend(&s.settings.ports);
                    c.udp.extend(&s.settings.udp_ports);
                    c.plugins.extend(s.settings.plugins.iter().cloned());
                }
                // A host found down was not port-scanned: its ports are not covered.
                Event::Host(h) if h.state == HostState::Up => {
                    c.hosts.insert(h.ip);
                }
                Event::Port(p) => {
                    c.hosts.insert(p.ip);
                }
                Event::Extraports(x) => {
                    c.hosts.insert(x.ip);
                }
                _ => {}
            }
        }
        c
    }

    fn covers(&self, (ip, port, proto): &(IpAddr, u16, String)) -> bool {
        let ports = if proto == "udp" { &self.udp } else { &self.tcp };
        self.hosts.contains(ip) && ports.contains(port)
    }
}

/// A script result as `db diff` compares it: its data, or its text when it
/// returned only text, without the `volatile` keys (object keys
/// of that name at any depth, and list entries and lines that begin with
/// `name:`, as nmap's header lists and `key: value` lines read).
pub fn steady_form(r: &ScriptEvent, volatile: &[String]) -> String {
    let said = |line: &str| {
        let line = line.trim_start_matches(|c: char| c.is_whitespace() || c == '|' || c == '_');
        volatile.iter().any(|k| {
            line.len() > k.len() && line.as_bytes()[k.len()] == b':' && line[..k.len()].eq_ignore_ascii_case(k)
        })
    };
    fn steady(v: &Value, volatile: &[String], said: &dyn Fn(&str) -> bool) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(k, _)| !volatile.iter().any(|x| x.eq_ignore_ascii_case(k)))
                    .map(|(k, v)| (k.clone(), steady(v, volatile, said)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(
                a.iter().filter(|v| !v.as_str().is_some_and(said)).map(|v| steady(v, volatile, said)).collect(),
            ),
            other => other.clone(),
        }
    }
    if volatile.is_empty() {
        return if r.data.is_null() { r.output.clone() } else { r.data.to_string() };
    }
    if r.data.is_null() {
        r.output.split('\n').filter(|l| !said(l)).collect::<Vec<_>>().join("\n")
    } else {
        steady(&r.data, volatile, &said).to_string()
    }
}

/// Compares the events of scan `a` with those of scan `b`: only what both
/// covered (a port both scanned on a host both reported, a plugin both
/// ran); the rest is counted in [`Diff::uncovered`].
pub fn diff(a: &[Event], b: &[Event]) -> Diff {
    let (cov_a, cov_b) = (Coverage::of(a), Coverage::of(b));
    let (open_a, open_b) = (open_ports(a), open_ports(b));
    let (svc_a, svc_b) = (service_ids(a), service_ids(b));
    let mut d = Diff::default();
    for key in open_b.difference(&open_a) {
        if cov_a.covers(key) {
            d.opened.push(key.clone());
        } else {
            d.uncovered.open_only_in_b += 1;
        }
    }
    for key in open_a.difference(&open_b) {
        if cov_b.covers(key) {
            d.closed.push(key.clone());
        } else {
            d.uncovered.open_only_in_a += 1;
        }
    }
    for ((key, name), x) in &svc_a {
        if !(open_a.contains(key) && open_b.contains(key)) {
            continue;
        }
        if let Some(y) = svc_b.get(&(key.clone(), name.clone())) {
            if x != y {
                d.changed.push(ServiceChange {
                    ip: key.0,
                    port: key.1,
                    proto: key.2.clone(),
                    before: x.clone(),
                    after: y.clone(),
                });
            }
        }
    }
    let both_ran = |plugin: &str| cov_a.plugins.contains(plugin) && cov_b.plugins.contains(plugin);
    d.uncovered.plugins_only_in_a = cov_a.plugins.difference(&cov_b.plugins).cloned().collect();
    d.uncovered.plugins_only_in_b = cov_b.plugins.difference(&cov_a.plugins).cloned().collect();
    // A finding is compared where both scans ran its plugin on a port both scanned.
    let compared = |f: &FindingEvent| {
        let at = (f.ip, f.port, f.proto.to_string());
        both_ran(&f.plugin) && cov_a.covers(&at) && cov_b.covers(&at)
    };
    let (find_a, find_b) = (findings_by_key(a), findings_by_key(b));
    let new = find_b.iter().filter(|(k, f)| compared(f) && !find_a.contains_key(*k));
    d.new_findings = new.map(|(_, f)| f.clone()).collect();
    let gone = find_a.iter().filter(|(k, f)| compared(f) && !find_b.contains_key(*k));
    d.gone_findings = gone.map(|(_, f)| f.clone()).collect();
    d.scripts = changed_scripts(&script_results(a), &script_results(b), &both_ran, (&open_a, &open_b));
    d.os = changed_os(&detected_os(a), &detected_os(b), (&cov_a, &cov_b));
    d
}

/// A port: address, number and protocol.
type PortKey = (IpAddr, u16, String);
/// A finding: address, port, plugin, title, and the name scanned under.
type FindingKey = (IpAddr, u16, String, String, Option<String>);
/// A script result: its port, plugin, whether of the host, and the name scanned under.
type ScriptKey = (PortKey, String, bool, Option<String>);

/// The open ports of a scan.
fn open_ports(evs: &[Event]) -> BTreeSet<PortKey> {
    evs.iter()
        .filter_map(|e| match e {
            Event::Port(p) if p.state == PortState::Open => Some((p.ip, p.port, p.proto.to_string())),
            _ => None,
        })
        .collect()
}

/// A port's service, by the name it was scanned under too (two names of
/// one address are two targets).
fn service_ids(evs: &[Event]) -> BTreeMap<(PortKey, Option<String>), String> {
    evs.iter()
        .filter_map(|e| match e {
            Event::Service(s) => Some((((s.ip, s.port, s.proto.to_string()), s.targetname.clone()), identity(s))),
            _ => None,
        })
        .collect()
}

/// The findings of a scan, by what makes each one.
fn findings_by_key(evs: &[Event]) -> BTreeMap<FindingKey, FindingEvent> {
    evs.iter()
        .filter_map(|e| match e {
            Event::Finding(f) => {
                let key = (f.ip, f.port, f.plugin.clone(), f.title.clone(), f.targetname.clone());
                Some((key, (**f).clone()))
            }
            _ => None,
        })
        .collect()
}

/// The script results of a scan.
fn script_results(evs: &[Event]) -> BTreeMap<ScriptKey, ScriptEvent> {
    evs.iter()
        .filter_map(|e| match e {
            Event::Script(r) => {
                let key = ((r.ip, r.port, r.proto.to_string()), r.plugin.clone(), r.host, r.targetname.clone());
                Some((key, (**r).clone()))
            }
            _ => None,
        })
        .collect()
}

/// OS detection's results (not passive hints), by host.
fn detected_os(evs: &[Event]) -> BTreeMap<IpAddr, OsEvent> {
    evs.iter()
        .filter_map(|e| match e {
            Event::Os(o) if super::super::os_text::detected(o) => Some((o.ip, (**o).clone())),
            _ => None,
        })
        .collect()
}

/// Script results that differ (beyond what their plugin calls volatile)
/// on a port open in both scans, of a plugin both ran.
fn changed_scripts(
    res_a: &BTreeMap<ScriptKey, ScriptEvent>,
    res_b: &BTreeMap<ScriptKey, ScriptEvent>,
    both_ran: &dyn Fn(&str) -> bool,
    (open_a, open_b): (&BTreeSet<PortKey>, &BTreeSet<PortKey>),
) -> Vec<(Option<ScriptEvent>, Option<ScriptEvent>)> {
    let mut changed = Vec::new();
    let keys: BTreeSet<_> = res_a.keys().chain(res_b.keys()).collect();
    for key in keys {
        let ((port, plugin, _, _), (x, y)) = (key, (res_a.get(key), res_b.get(key)));
        if !(both_ran(plugin) && open_a.contains(port) && open_b.contains(port)) {
            continue;
        }
        // What either side calls volatile (a scan stored before its plugin
        // declared it has none).
        let mut volatile: Vec<String> = x.into_iter().chain(y).flat_map(|r| r.volatile.iter().cloned()).collect();
        volatile.sort();
        volatile.dedup();
        if x.map(|r| steady_form(r, &volatile)) != y.map(|r| steady_form(r, &volatile)) {
            changed.push((x.cloned(), y.cloned()));
        }
    }
    changed
}

/// OS detection that differs on a host both scans reported.
fn changed_os(
    os_a: &BTreeMap<IpAddr, OsEvent>,
    os_b: &BTreeMap<IpAddr, OsEvent>,
    (cov_a, cov_b): (&Coverage, &Coverage),
) -> Vec<OsChange> {
    let mut changed = Vec::new();
    let hosts: BTreeSet<&IpAddr> = os_a.keys().chain(os_b.keys()).collect();
    for ip in hosts {
        if !(cov_a.hosts.contains(ip) && cov_b.hosts.contains(ip)) {
            continue;
        }
        let (x, y) = (os_a.get(ip), os_b.get(ip));
        // A scan without OS detection on the host says nothing of its OS.
        let (Some(x), Some(y)) = (x, y) else { continue };
        if os_form(x) != os_form(y) {
            changed.push(OsChange { ip: *ip, before: os_shown(x), after: os_shown(y) });
        }
    }
    changed
}
