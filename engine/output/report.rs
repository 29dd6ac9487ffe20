//! What nmap's three formats (`-oX`, `-oN`, `-oG`) share: a sink that
//! remembers the scan ([`Collected`]) and writes a document whose head comes
//! at the first event and whose body comes at close ([`Report`], with a
//! [`Layout`] per format), and nmap's way of writing names, versions, times
//! and command lines.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::Sink;
use crate::findings::service_fp;
use crate::findings::{
    Event, HostState, PortState, Proto, Reason, ScanEnd, ScanStart, Service, ServiceMethod, Severity,
};

/// How one format writes the remembered scan.
pub trait Layout {
    /// What is known at the first event (header, command line).
    fn head(&self, scan: &Collected, out: &mut dyn Write) -> io::Result<()>;
    /// Everything else, at close.
    fn body(&self, scan: &Collected, out: &mut dyn Write) -> io::Result<()>;
}

/// A format written whole at close, its head at the first event.
pub struct Report<L, W: Write> {
    out: BufWriter<W>,
    scan: Collected,
    pub(super) layout: L,
    head: bool,
    closed: bool,
}

impl<L: Layout + Default, W: Write> Report<L, W> {
    pub fn new(writer: W) -> Self {
        Report {
            out: BufWriter::new(writer),
            scan: Collected::default(),
            layout: L::default(),
            head: false,
            closed: false,
        }
    }
}

impl<L, W: Write> Report<L, W> {
    /// Reads MAC vendors from nmap's folders `dirs` (default:
    /// [`crate::places::Places`]'s).
    pub fn with_nmap_dirs(mut self, dirs: Vec<std::path::PathBuf>) -> Self {
        self.scan.nmap_dirs = Some(dirs);
        self
    }
}

impl<L: Layout + Send, W: Write + Send> Sink for Report<L, W> {
    fn record(&mut self, event: &Event) -> io::Result<()> {
        self.scan.record(event);
        if !self.head {
            self.head = true;
            self.layout.head(&self.scan, &mut self.out)?;
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
                self.head = true;
                self.layout.head(&self.scan, &mut self.out)?;
            }
            self.layout.body(&self.scan, &mut self.out)?;
        }
        self.out.flush()
    }
}

/// The scan's events, kept for the formats written at close: one small
/// record per reported port in one ordered map (under 200 bytes a port
/// without services or findings: a /16 sweep with one open port per
/// address keeps about 11 MB), hosts being runs of the same address.
#[derive(Default)]
pub struct Collected {
    pub start: Option<ScanStart>,
    /// Unix time of the scan's start, in seconds.
    start_at: Option<f64>,
    /// By (address, target, protocol rank, port): hosts in address order
    /// (the targets of one address, its names, in their order), TCP before
    /// UDP, ports in number order.
    ports: BTreeMap<(IpAddr, u32, u8, u16), PortRec>,
    /// What host discovery said, by address.
    status: BTreeMap<IpAddr, HostStatus>,
    /// Ports decided but not reported, by address (`extraports` events).
    extra: BTreeMap<IpAddr, Vec<Unshown>>,
    /// The targets at each address given by name (see
    /// [`crate::findings::ScanSettings::targets_by_address`]): one host
    /// report each. An address not here is one target.
    targets: HashMap<IpAddr, Vec<Option<std::sync::Arc<str>>>>,
    /// A name's other addresses, not scanned, by (address, name).
    others: HashMap<(IpAddr, String), Vec<IpAddr>>,
    /// Each address's name from reverse DNS.
    ptr: HashMap<IpAddr, String>,
    /// OS detection's result (or passive hint) by address.
    os: HashMap<IpAddr, crate::findings::OsEvent>,
    /// Traceroute by address, with the host whose first hops it shares
    /// (nmap's "Hops 1-N are the same as for X").
    trace: HashMap<IpAddr, (crate::findings::TraceEvent, Option<(IpAddr, u8)>)>,
    /// The first host whose trace had each (TTL, hop address).
    first_by_hop: HashMap<(u8, IpAddr), IpAddr>,
    /// Host script results (findings of `scope = "host"` plugins), by
    /// address and target.
    host_scripts: BTreeMap<(IpAddr, u32), Scripts>,
    /// The port each host script's results came from: one run per host
    /// and plugin is shown (a plugin may run on 139 and 445 alike).
    host_script_ports: HashMap<(IpAddr, u32, String), u16>,
    /// Host reports: targets of the addresses in `ports` or found up.
    up: usize,
    pub end: Option<ScanEnd>,
    pub services_seen: bool,
    names: HashMap<(u16, Proto), Option<&'static str>>,
    /// MAC vendors, read when the first MAC address is seen.
    vendors: Option<super::mac_vendor::MacVendors>,
    /// nmap's folders, where the MAC vendors are read from (`None`:
    /// [`crate::places::Places`]'s default ones).
    pub(super) nmap_dirs: Option<Vec<std::path::PathBuf>>,
}

/// One host: its address, what discovery said of it, and its ports in order.
pub struct HostRec<'a> {
    pub ip: IpAddr,
    pub status: Option<&'a HostStatus>,
    pub ports: Vec<&'a PortRec>,
    /// Its ports not shown (nmap's "Not shown"), TCP before UDP.
    pub unshown: Vec<Unshown>,
    /// The name it was given as a target (nmap's `user` hostname).
    pub name: Option<&'a str>,
    /// Its address's name from reverse DNS (nmap's `PTR` hostname).
    pub ptr: Option<&'a str>,
    /// The other addresses of its name, not scanned.
    pub others: &'a [IpAddr],
    /// Its host script results, if any.
    pub host_scripts: Option<&'a Scripts>,
    /// What OS detection found (or the passive hint).
    pub os: Option<&'a crate::findings::OsEvent>,
    /// Its traceroute.
    pub trace: Option<&'a crate::findings::TraceEvent>,
    /// The host whose first hops its trace shares, and how many.
    pub trace_same: Option<(IpAddr, u8)>,
}

impl HostRec<'_> {
    /// The fingerprints of its ports' services, in port order, as `-oN`
    /// prints them.
    pub fn service_fps(&self) -> Vec<&str> {
        self.ports.iter().filter_map(|p| p.servicefp.as_deref()).collect()
    }
}

/// Ports of a host not shown one by one, of one protocol, state and reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unshown {
    pub proto: Proto,
    pub state: PortState,
    pub reason: Reason,
    pub count: u64,
}

/// What host discovery said about a host (its `host` event).
pub struct HostStatus {
    pub state: HostState,
    pub reason: Reason,
    pub ttl: Option<u8>,
    /// Seconds.
    pub latency: Option<f64>,
    pub mac: Option<String>,
    /// Who made the card of `mac` (nmap-mac-prefixes), if known.
    pub vendor: Option<String>,
    t: f32,
}

/// What is known about one port.
pub struct PortRec {
    pub proto: Proto,
    pub port: u16,
    pub state: PortState,
    pub ttl: Option<u8>,
    pub reason: Reason,
    /// Seconds since the scan's start of the first and the last event about it.
    first_t: f32,
    last_t: f32,
    pub service: Option<Box<Service>>,
    /// nmap's service fingerprint of `service` (as `-oN` prints it), when
    /// no rule identified it and probes got replies; made when the service
    /// came, so its replies are not kept.
    pub servicefp: Option<String>,
    /// The port's usual service, from the port table.
    pub table_name: Option<&'static str>,
    /// Findings by plugin id (in id order), each plugin's in arrival order.
    pub scripts: Scripts,
}

/// Findings by plugin id (in id order), each plugin's in arrival order.
pub type Scripts = BTreeMap<String, Vec<Finding>>;

pub struct Finding {
    pub title: String,
    pub severity: Severity,
    pub data: Value,
    /// Set on a script result (a [`crate::findings::ScriptEvent`]'s text).
    pub output: Option<String>,
}

impl Collected {
    /// The first line of `-oN` and `-oG`, with the command line as `args` shows it.
    pub fn initiated_line(&self, args: &str) -> String {
        format!(
            "# moonscan {} scan initiated {} as: {args}\n",
            env!("CARGO_PKG_VERSION"),
            ctime(self.start_secs() as i64)
        )
    }

    /// The last line of `-oN` and `-oG`.
    pub fn done_line(&self) -> String {
        format!(
            "# moonscan done at {} -- {} scanned in {:.2} seconds\n",
            ctime(self.end_secs() as i64),
            self.hosts_phrase(),
            self.elapsed()
        )
    }

    pub fn record(&mut self, event: &Event) {
        match event {
            Event::ScanStart(s) => {
                self.start_at = s.started.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs_f64());
                self.targets = s.settings.targets_by_address();
                for h in s.settings.hostnames.iter().filter(|h| !h.others.is_empty()) {
                    self.others.insert((h.ip, h.name.clone()), h.others.clone());
                }
                self.start = Some(s.clone());
            }
            Event::Host(h) => self.on_host(h),
            // A port's state is its address's: every target there has it.
            Event::Port(p) => {
                for view in 0..self.views(p.ip) {
                    let rec = self.port((p.ip, view), p.proto, p.port, p.t);
                    rec.state = p.state;
                    rec.reason = p.reason;
                    rec.ttl = p.ttl;
                }
            }
            Event::Service(s) => self.on_service(s),
            Event::Finding(f) => {
                let finding =
                    Finding { title: f.title.clone(), severity: f.severity, data: f.data.clone(), output: None };
                let at = self.target(f.ip, f.targetname.as_deref());
                self.plugin_said(at, f.proto, f.port, f.t, &f.plugin, f.host, finding);
            }
            Event::Script(r) => {
                let result = Finding {
                    title: r.plugin.clone(),
                    severity: Severity::Info,
                    data: r.data.clone(),
                    output: Some(r.output.clone()),
                };
                let at = self.target(r.ip, r.targetname.as_deref());
                self.plugin_said(at, r.proto, r.port, r.t, &r.plugin, r.host, result);
            }
            // A host's few ports of a state are rows, as in nmap's port
            // table (a port reported since, as a late answer, keeps its report).
            Event::Extraports(e) if !e.ports.is_empty() => self.on_extraports_rows(e),
            Event::Extraports(e) => {
                let u = Unshown { proto: e.proto, state: e.state, reason: e.reason, count: e.count.into() };
                self.extra.entry(e.ip).or_default().push(u);
            }
            Event::ScanEnd(e) => self.end = Some(e.clone()),
            Event::Rdns(r) => {
                self.ptr.insert(r.ip, r.name.clone());
            }
            Event::Os(e) => self.on_os(e),
            Event::Trace(e) => self.on_trace(e),
            Event::Log(_) | Event::Error(_) | Event::Timing(_) => {}
        }
        if self.start_at.is_none() {
            self.start_at = Some(now_secs());
        }
    }

    /// A host's state; a host newly up counts once per target at its address.
    fn on_host(&mut self, h: &crate::findings::HostEvent) {
        let counted = self.status.get(&h.ip).is_some_and(|s| s.state == HostState::Up) || self.has_ports(h.ip);
        if h.state == HostState::Up && !counted {
            self.up += self.views(h.ip) as usize;
        }
        let status = HostStatus {
            state: h.state,
            reason: h.reason,
            ttl: h.ttl,
            latency: h.latency,
            mac: h.mac.clone(),
            vendor: h.mac.as_deref().and_then(|mac| {
                let vendors = self.vendors.get_or_insert_with(|| {
                    let dirs = self.nmap_dirs.clone().unwrap_or_else(|| crate::places::Places::default().nmap);
                    super::mac_vendor::MacVendors::installed(&dirs)
                });
                vendors.vendor(mac).map(String::from)
            }),
            t: h.t as f32,
        };
        self.status.insert(h.ip, status);
    }

    /// A service on its port, kept without its chain and replies (its fingerprint instead).
    fn on_service(&mut self, s: &crate::findings::Service) {
        self.services_seen = true;
        // nmap's formats show no chain: a scan of many TLS ports
        // keeps none for its report.
        let mut kept = s.clone();
        kept.tls = None;
        // Nor the replies: the fingerprint is all they give them.
        // nmap's default intensity for a stream that does not say.
        let intensity = self.start.as_ref().and_then(|s| s.settings.version_intensity).unwrap_or(7);
        let fp = service_fp::of_service(s, intensity, self.start_secs()).map(|f| f.wrapped);
        kept.replies = Vec::new();
        let at = self.target(s.ip, s.targetname.as_deref());
        let rec = self.port(at, s.proto, s.port, s.t);
        rec.service = Some(Box::new(kept));
        rec.servicefp = fp;
    }

    /// Ports not shown, named: rows of the port table.
    fn on_extraports_rows(&mut self, e: &crate::findings::ExtraportsEvent) {
        let t = self.status.get(&e.ip).map_or_else(|| self.elapsed(), |s| f64::from(s.t));
        for view in 0..self.views(e.ip) {
            for &port in &e.ports {
                if !self.ports.contains_key(&(e.ip, view, rank(e.proto), port)) {
                    let rec = self.port((e.ip, view), e.proto, port, t);
                    rec.state = e.state;
                    rec.reason = e.reason;
                }
            }
        }
    }

    /// An OS result (a passive hint kept beside, never over, what -O found).
    fn on_os(&mut self, e: &crate::findings::OsEvent) {
        // A passive hint never replaces what -O found.
        let keep = e.hint.is_some() && e.matches.is_empty() && e.fingerprint.is_none();
        match self.os.get_mut(&e.ip) {
            Some(had) if keep => had.hint = e.hint.clone(),
            _ => {
                let hint = self.os.get(&e.ip).and_then(|h| h.hint.clone());
                let mut e = e.clone();
                e.hint = e.hint.or(hint);
                self.os.insert(e.ip, e);
            }
        }
    }

    /// A traceroute, with the hops it shares with an earlier one.
    fn on_trace(&mut self, e: &crate::findings::TraceEvent) {
        let same = self.shared_hops(e);
        // A trace's last hop is its host, never a router it shares.
        for h in &e.hops[..e.hops.len().saturating_sub(1)] {
            if let Some(ip) = h.ip {
                self.first_by_hop.entry((h.ttl, ip)).or_insert(e.ip);
            }
        }
        self.trace.insert(e.ip, (e.clone(), same));
    }

    /// How many targets (host reports) an address has.
    fn views(&self, ip: IpAddr) -> u32 {
        self.targets.get(&ip).map_or(1, Vec::len).clamp(1, u32::MAX as usize) as u32
    }

    /// The target at `ip` of the name a result came under (the address's
    /// first when the name is not one of its targets').
    fn target(&self, ip: IpAddr, name: Option<&str>) -> (IpAddr, u32) {
        let view = self.targets.get(&ip).and_then(|names| names.iter().position(|n| n.as_deref() == name));
        (ip, view.unwrap_or(0) as u32)
    }

    /// A finding or script result of `plugin` on a port, or on its host
    /// for a host-scope plugin (kept from the first port it ran on).
    #[allow(clippy::too_many_arguments)]
    fn plugin_said(
        &mut self,
        at: (IpAddr, u32),
        proto: Proto,
        port: u16,
        t: f64,
        plugin: &str,
        host: bool,
        said: Finding,
    ) {
        if host {
            let from = *self.host_script_ports.entry((at.0, at.1, plugin.to_string())).or_insert(port);
            self.port(at, proto, port, t);
            if from == port {
                self.host_scripts.entry(at).or_default().entry(plugin.to_string()).or_default().push(said);
            }
        } else {
            self.port(at, proto, port, t).scripts.entry(plugin.to_string()).or_default().push(said);
        }
    }

    /// The record of a port of one target, made on first sight (a service
    /// or finding without a port event can only be about an open port).
    fn port(&mut self, (ip, view): (IpAddr, u32), proto: Proto, port: u16, t: f64) -> &mut PortRec {
        let table_name =
            *self.names.entry((port, proto)).or_insert_with(|| crate::ports::service_name(port, proto.as_str()));
        let rank = rank(proto);
        if !self.has_ports(ip) && self.status.get(&ip).is_none_or(|s| s.state != HostState::Up) {
            self.up += self.views(ip) as usize;
        }
        let t = t as f32;
        let rec = self.ports.entry((ip, view, rank, port)).or_insert_with(|| PortRec {
            proto,
            port,
            state: PortState::Open,
            ttl: None,
            reason: Reason::SynAck,
            first_t: t,
            last_t: t,
            service: None,
            table_name,
            servicefp: None,
            scripts: BTreeMap::new(),
        });
        rec.first_t = rec.first_t.min(t);
        rec.last_t = rec.last_t.max(t);
        rec
    }

    fn has_ports(&self, ip: IpAddr) -> bool {
        self.ports.range((ip, 0, 0, 0)..=(ip, u32::MAX, u8::MAX, u16::MAX)).next().is_some()
    }

    /// The hosts with a reported port or a `host` event, in address order:
    /// one report for each target at an address (its names, in order).
    pub fn hosts(&self) -> impl Iterator<Item = HostRec<'_>> {
        let mut ports = self.ports.keys().map(|k| k.0).peekable();
        let mut status = self.status.iter().peekable();
        let mut pending: std::collections::VecDeque<HostRec<'_>> = Default::default();
        std::iter::from_fn(move || {
            if let Some(h) = pending.pop_front() {
                return Some(h);
            }
            let next_port = ports.peek().copied();
            let next_status = status.peek().map(|(ip, _)| **ip);
            let ip = match (next_port, next_status) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b)?,
            };
            let status = status.next_if(|(s, _)| **s == ip).map(|(_, st)| st);
            while ports.next_if(|next| *next == ip).is_some() {}
            for view in 0..self.views(ip) {
                pending.push_back(self.host(ip, view, status));
            }
            pending.pop_front()
        })
    }

    /// The earlier host whose trace has the most first hops in common with
    /// `e`'s (not its last: that is the host itself), and how many.
    fn shared_hops(&self, e: &crate::findings::TraceEvent) -> Option<(IpAddr, u8)> {
        let hops = &e.hops[..e.hops.len().saturating_sub(1)];
        hops.iter().rev().find_map(|h| {
            let other = *self.first_by_hop.get(&(h.ttl, h.ip?))?;
            let (theirs, _) = self.trace.get(&other).filter(|_| other != e.ip)?;
            let upto = h.ttl;
            let mine = e.hops.iter().take_while(|x| x.ttl <= upto);
            let same = mine.zip(&theirs.hops).all(|(a, b)| a.ttl == b.ttl && a.ip == b.ip && a.ip.is_some());
            (same && e.hops.iter().take_while(|x| x.ttl <= upto).count() == usize::from(upto)).then_some((other, upto))
        })
    }

    /// The report of one target at `ip`.
    fn host<'a>(&'a self, ip: IpAddr, view: u32, status: Option<&'a HostStatus>) -> HostRec<'a> {
        let list: Vec<&PortRec> =
            self.ports.range((ip, view, 0, 0)..=(ip, view, u8::MAX, u16::MAX)).map(|(_, p)| p).collect();
        let up = status.is_none_or(|s| s.state == HostState::Up);
        let unshown = if up { self.unshown(ip, &list) } else { Vec::new() };
        let name = self.targets.get(&ip).and_then(|names| names.get(view as usize)).and_then(|n| n.as_deref());
        let others = name.and_then(|n| self.others.get(&(ip, n.to_string()))).map_or(&[][..], Vec::as_slice);
        let ptr = self.ptr.get(&ip).map(String::as_str);
        let host_scripts = self.host_scripts.get(&(ip, view));
        let os = self.os.get(&ip);
        let (trace, trace_same) = self.trace.get(&ip).map_or((None, None), |(t, s)| (Some(t), *s));
        HostRec { ip, status, ports: list, unshown, name, ptr, others, host_scripts, os, trace, trace_same }
    }

    /// The ports of an up host not shown: those counted by `extraports`
    /// events and, of a scan that ran to its end on every port of each
    /// host (not interrupted, not a shard, not resumed, no host timeout,
    /// every host counted), the scanned ports left over, which never
    /// answered (filtered, no-response).
    fn unshown(&self, ip: IpAddr, shown: &[&PortRec]) -> Vec<Unshown> {
        let mut out = self.extra.get(&ip).cloned().unwrap_or_default();
        let whole = self.end.as_ref().is_some_and(|e| !e.interrupted && !e.unshown_capped)
            && self.start.as_ref().is_some_and(|s| s.settings.shard.is_none() && !s.settings.partial);
        if whole {
            let settings = self.start.as_ref().map(|s| &s.settings);
            let tcp = settings.map_or(0, |s| s.ports.len());
            let udp = settings.map_or(0, |s| s.udp_ports.len());
            for (proto, total) in [(Proto::Tcp, tcp), (Proto::Udp, udp)] {
                let seen = shown.iter().filter(|p| p.proto == proto).count() as u64;
                let counted: u64 = out.iter().filter(|u| u.proto == proto).map(|u| u.count).sum();
                let left = (total as u64).saturating_sub(seen + counted);
                if left > 0 && total > 0 {
                    out.push(Unshown { proto, state: PortState::Filtered, reason: Reason::NoResponse, count: left });
                }
            }
        }
        out.sort_by_key(|u| (u.proto == Proto::Udp, u.state as u8, u.reason.as_str()));
        out
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

    /// The TCP ports the scan scanned.
    pub fn scanned_ports(&self) -> Vec<u16> {
        self.start.as_ref().map(|s| s.settings.ports.clone()).unwrap_or_default()
    }

    /// How verbose the report is (`-v` counted).
    pub fn verbosity(&self) -> usize {
        self.start.as_ref().map_or(0, |s| usize::from(s.settings.verbosity))
    }

    /// Whether service detection ran (decides nmap's VERSION column and `?`).
    pub fn version_scan(&self) -> bool {
        self.services_seen || self.start.as_ref().is_some_and(|s| s.settings.service_detection)
    }

    /// Addresses the scan planned: its probes over its ports (never fewer
    /// than the hosts that answered).
    pub fn hosts_total(&self) -> u64 {
        if let Some(n) = self.start.as_ref().map(|s| s.settings.hosts).filter(|&n| n > 0) {
            return n.max(self.up as u64);
        }
        let udp = self.start.as_ref().map_or(0, |s| s.settings.udp_ports.len());
        let n = (self.scanned_ports().len() + udp) as u64;
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
    /// How nmap names a host in its reports: `NAME (IP)` with the name
    /// it was given, else its reverse DNS name, or the address.
    pub fn label(&self) -> String {
        match self.name.or(self.ptr) {
            Some(n) => format!("{} ({})", super::screen(n), self.ip),
            None => self.ip.to_string(),
        }
    }

    /// The reverse DNS name, when it is not the name the host was given
    /// (nmap's "rDNS record for IP: NAME" line).
    pub fn other_ptr(&self) -> Option<&str> {
        self.ptr.filter(|p| self.name.is_some_and(|n| !n.eq_ignore_ascii_case(p)))
    }

    /// The host's state: what discovery said, else up (it has ports).
    pub fn state(&self) -> HostState {
        self.status.map_or(HostState::Up, |s| s.state)
    }

    /// Why the host has its state: discovery's reason, else its first
    /// reported port's reason and TTL.
    pub fn status_reason(&self) -> (&'static str, u8) {
        if let Some(s) = self.status {
            return (s.reason.as_str(), s.ttl.unwrap_or(0));
        }
        let p = self.ports.iter().find(|p| p.state != PortState::Filtered).or_else(|| self.ports.first());
        p.map_or(("user-set", 0), |p| (p.reason.as_str(), p.ttl.unwrap_or(0)))
    }

    /// Seconds since the scan's start of the first and the last event about it.
    pub fn times(&self) -> (f64, f64) {
        let seen = self.status.map(|s| s.t);
        let first = self.ports.iter().map(|p| p.first_t).chain(seen).fold(f32::INFINITY, f32::min);
        let last = self.ports.iter().map(|p| p.last_t).chain(seen).fold(0.0, f32::max);
        (f64::from(first), f64::from(last))
    }
}

impl PortRec {
    pub fn state_str(&self) -> &'static str {
        self.state.as_str()
    }

    /// nmap's SERVICE column (`Port::getNmapServiceName`): `ssl/` for TLS,
    /// `?` when service detection ran on an open port but only the port
    /// table names it, `unknown` when nothing does.
    pub fn service_column(&self, version_scan: bool) -> String {
        let (tunnel, name, confident) = match &self.service {
            Some(s) => (
                s.tunnel == Some(crate::findings::Tunnel::Ssl),
                Some(s.id.service.as_str()),
                method_conf(s.method).1 > 5,
            ),
            None => (false, self.table_name, false),
        };
        // "ssl" inside TLS is just "ssl".
        let prefix = if tunnel && name != Some("ssl") { "ssl/" } else { "" };
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
        self.service.as_ref().is_some_and(|s| !s.id.service.is_empty() || s.tunnel.is_some())
            || self.table_name.is_some()
    }

    /// nmap's VERSION column: `product version (extrainfo)`.
    pub fn full_version(&self) -> String {
        let Some(s) = &self.service else { return String::new() };
        let mut out = String::new();
        for v in [&s.id.product, &s.id.version].into_iter().flatten() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(v);
        }
        if let Some(info) = &s.id.info {
            if !out.is_empty() {
                out.push(' ');
            }
            let _ = write!(out, "({info})");
        }
        out
    }
}

/// nmap's `method` and `conf` for how a service was identified.
pub(super) fn method_conf(m: ServiceMethod) -> (&'static str, u8) {
    match m {
        ServiceMethod::Probed | ServiceMethod::Soft => ("probed", 10),
        ServiceMethod::Table => ("table", 3),
    }
}

/// What a port's scripts show, in id order (as nmap orders them) within
/// three groups: plugins under the id of one of nmap's default scripts
/// (so `-sV -sC` shows nmap's lines in nmap's order), then under nmap's
/// other ids, then moonscan's own: a plugin that returned
/// a result shows it (its text, and its data as nmap's structured output);
/// one that only reported findings shows them (each title, with its data
/// rendered below it as NSE renders a table).
/// The findings of plugins that also returned a result come last, under
/// [`FINDINGS_ID`], each `[severity] plugin: title`, so nmap's own keys stay
/// as nmap's scripts write them.
pub(super) fn scripts(by_id: &Scripts) -> Vec<Script<'_>> {
    use crate::findings::script_text::one_line;
    let mut out = Vec::new();
    let mut extra = Vec::new();
    for (id, findings) in by_id {
        match findings.iter().find(|f| f.output.is_some()) {
            Some(result) => {
                let text = result.output.clone().unwrap_or_default();
                out.push(Script { id: id.clone(), text, shown: Shown::Result(&result.data) });
                extra.extend(findings.iter().filter(|f| f.output.is_none()).map(|f| (id.as_str(), f)));
            }
            None => {
                // Each title, its data below it as NSE renders a table.
                // A title is one line: a line break in it is a value's, not the layout's.
                let text = findings
                    .iter()
                    .map(|f| match &f.data {
                        Value::Object(_) | Value::Array(_) => {
                            format!("{}{}", one_line(&f.title), crate::findings::script_text::render(&f.data))
                        }
                        _ => one_line(&f.title).into_owned(),
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                out.push(Script { id: id.clone(), text, shown: Shown::Findings(findings) });
            }
        }
    }
    // Stable: each group keeps its id order.
    out.sort_by_key(|s| script_rank(&s.id));
    if !extra.is_empty() {
        let text = extra
            .iter()
            .map(|(id, f)| format!("[{}] {id}: {}", f.severity.as_str(), one_line(&f.title)))
            .collect::<Vec<_>>()
            .join("\n");
        out.push(Script { id: FINDINGS_ID.to_string(), text, shown: Shown::Extra(extra) });
    }
    out
}

/// Where a script's output goes among a port's: nmap's default scripts
/// (what `nmap -sC` shows) first, then nmap's other scripts, then moonscan's
/// own.
pub(super) fn script_rank(id: &str) -> u8 {
    match super::nmap_script_ids::IDS.binary_search_by(|(known, _)| known.cmp(&id)) {
        Ok(i) if super::nmap_script_ids::IDS[i].1 => 0,
        Ok(_) => 1,
        Err(_) => 2,
    }
}

/// The script id under which findings beside a script result are shown.
pub const FINDINGS_ID: &str = "moonscan-findings";

/// One `<script>` of a port, or its `| id:` lines.
pub(super) struct Script<'a> {
    pub id: String,
    /// nmap's `output` text.
    pub text: String,
    pub shown: Shown<'a>,
}

/// What a script element holds besides its text.
pub(super) enum Shown<'a> {
    /// A script result's data: nmap's structured output.
    Result(&'a Value),
    /// Findings of a plugin without a result, in moonscan's layout.
    Findings(&'a [Finding]),
    /// Findings beside results: (plugin, finding).
    Extra(Vec<(&'a str, &'a Finding)>),
}

/// Sorted ports as nmap lists them: `1-1024,3306,8080-8081`.
pub(super) fn range_list(ports: &[u16]) -> String {
    crate::findings::port_list::to_text(ports)
}

/// One word of a command line as nmap's `join_quoted` writes it.
pub(super) fn quote(a: &str) -> Cow<'_, str> {
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

/// A protocol's place among a host's ports: TCP before UDP.
fn rank(proto: Proto) -> u8 {
    match proto {
        Proto::Tcp => 0,
        Proto::Udp => 1,
    }
}

fn now_secs() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// A Unix time as C's `ctime` writes it (`Sat Nov 21 16:41:03 2026`), in UTC.
pub(super) fn ctime(secs: i64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (year, t) = crate::text::utc(secs);
    format!(
        "{} {} {:>2} {:02}:{:02}:{:02} {year}",
        DAYS[usize::from(t.weekday().number_days_from_sunday())],
        MONTHS[usize::from(u8::from(t.month()) - 1)],
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
    )
}

#[cfg(test)]
pub(super) mod sample;

#[cfg(test)]
mod tests {
    use super::sample::*;
    use super::*;

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

    /// A host whose only ports are a few closed ones (named by its
    /// `extraports`) is up and lists them as rows; many are counted.
    #[test]
    fn a_host_with_a_few_closed_ports_lists_them_and_is_up() {
        let mut c = Collected::default();
        let extra = |addr: &str, count: u32, ports: Vec<u16>| {
            Event::Extraports(crate::findings::ExtraportsEvent {
                scan_id: "0123456789abcdef".into(),
                ip: ip(addr),
                proto: Proto::Tcp,
                state: PortState::Closed,
                reason: Reason::Reset,
                count,
                ports,
            })
        };
        // 82 answered late (open after its closed verdict): it stays open.
        let late = port("198.18.0.2", 82, PortState::Open, 1.0);
        for e in
            [start("-Pn -p 1-100", 200), late, extra("198.18.0.2", 2, vec![81, 82]), extra("198.18.0.3", 100, vec![])]
        {
            c.record(&e);
        }
        let hosts: Vec<HostRec> = c.hosts().collect();
        // Counted ports alone make no host: the engine sends its host event.
        assert_eq!((hosts.len(), c.host_count()), (1, 1));
        let rows: Vec<(u16, PortState, Reason)> = hosts[0].ports.iter().map(|p| (p.port, p.state, p.reason)).collect();
        assert_eq!(rows, [(81, PortState::Closed, Reason::Reset), (82, PortState::Open, Reason::SynAck)]);
        assert!(hosts[0].unshown.is_empty());
    }

    #[test]
    fn ctime_takes_any_second_count() {
        assert_eq!(ctime(253_402_300_800), "Sat Jan  1 00:00:00 10000");
        assert_eq!(ctime(i64::MAX), "Sun Dec  4 15:30:07 292277026596");
        assert_eq!(ctime(i64::MIN), "Sun Jan 27 08:29:52 -292277022657");
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

    #[test]
    fn nmaps_scripts_come_first_then_moonscans_then_the_findings() {
        let mut scan = Collected::default();
        for e in [
            start("moonscan -p 443 198.18.0.2", 1),
            finding("198.18.0.2", 443, "tls-versions-and-alpn", "TLSv1.3", serde_json::json!(null)),
            result("198.18.0.2", 443, "ssl-cert", "Subject: x", serde_json::json!({"subject": {}})),
            finding("198.18.0.2", 443, "ssl-cert", "Self-signed certificate", serde_json::json!(null)),
            finding("198.18.0.2", 443, "a-pack-check", "seen", serde_json::json!(null)),
            result("198.18.0.2", 443, "http-title", "lab", serde_json::json!({"title": "lab"})),
        ] {
            scan.record(&e);
        }
        let host = scan.hosts().next().unwrap();
        let ids: Vec<String> = scripts(&host.ports[0].scripts).into_iter().map(|s| s.id).collect();
        assert_eq!(ids, ["http-title", "ssl-cert", "a-pack-check", "tls-versions-and-alpn", FINDINGS_ID]);
        let ranks = ["ssl-cert", "http-headers", "ssl-enum-ciphers", "tls-versions-and-alpn"].map(script_rank);
        assert_eq!(ranks, [0, 1, 1, 2]);
    }
}
