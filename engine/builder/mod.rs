//! The library's front door: a scan described with typed settings,
//! validated once, started on the caller's tokio runtime.
//!
//! In: what to scan and how ([`ScanBuilder`]'s setters, nmap's terms).
//! Out: a checked [`ScanConfig`] ([`ScanBuilder::build`]) or a running scan
//! ([`ScanBuilder::start`]) whose [`ScanHandle`] gives the event stream,
//! live counters, a stop signal and the final summary. What always holds:
//! the policy that turns settings into a scan (hostname resolution, the
//! scan type when raw sockets are or are not there, the open-file budget,
//! timing templates and their detection timeouts, default probe and plugin
//! folders, installed packs and their lock) lives here, so the command line
//! and an embedding program get the same scan from the same settings.
//!
//! ```no_run
//! # async fn demo() -> moonscan::Result<()> {
//! let mut scan = moonscan::Scan::builder()
//!     .targets(["198.18.0.2"])
//!     .ports("22,80,443")
//!     .service_detection(true)
//!     .scripts("http-title")
//!     .start()?;
//! while let Some(event) = scan.next_event().await {
//!     if let moonscan::findings::Event::Script(r) = event {
//!         println!("{}:{} {}: {}", r.ip, r.port, r.plugin, r.output.trim());
//!     }
//! }
//! let end = scan.finish().await?;
//! println!("{} open ports in {:.2} s", end.open, end.elapsed);
//! # Ok(()) }
//! ```

mod choices;
mod handle;
mod inputs;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use handle::ScanHandle;
pub use inputs::available_plugins;

use crate::discovery::payloads::Payloads;
use crate::discovery::syn::LinkOptions;
use crate::error::{Error, ErrorKind, Result};
use crate::findings::ScanType;
use crate::places::Places;
use crate::plugins::stage::PluginConfig;
use crate::plugins::Budgets;
use crate::scan::{ScanConfig, UdpPlan};
use crate::service::{DetectOptions, Detector, ProbeDb};
use crate::targets::{Shard, TargetSpace};

/// Entry point: `Scan::builder()`.
pub struct Scan;

impl Scan {
    pub fn builder() -> ScanBuilder {
        ScanBuilder::default()
    }
}

/// Which ports: nmap's `-p` spec, or the most common N.
#[derive(Clone, Debug)]
enum Ports {
    Spec(String),
    Top(usize),
}

/// Service detection settings (`-sV`).
#[derive(Clone, Debug, Default)]
pub struct DetectSettings {
    /// 0-9 (`--version-intensity`); default 7.
    pub intensity: Option<u8>,
    /// The most one port may take (`--service-timeout`).
    pub port_timeout: Option<Duration>,
    /// Ports probed at once (`--version-parallelism`).
    pub parallelism: Option<usize>,
    /// Probe files (default: [`crate::service::probes::default_dir`] of the scan's [`Places`]).
    pub probes_dir: Option<PathBuf>,
}

/// OS detection settings (`-O`).
#[derive(Clone, Debug, Default)]
pub struct OsSettings {
    /// Show guesses when nothing matches exactly (`--osscan-guess`, `--fuzzy`).
    pub guess: bool,
    /// Only hosts with an open and a closed TCP port (`--osscan-limit`).
    pub limit: bool,
    /// Most tries of a host (`--max-os-tries`); default 5.
    pub max_tries: Option<u32>,
    /// nmap-os-db (`--os-db`); default: the installed nmap's.
    pub db: Option<PathBuf>,
}

/// Plugin settings (`--script`).
#[derive(Clone, Debug, Default)]
pub struct ScriptSettings {
    /// The selection expression (`default`, `http-*`, `safe and not intrusive`, paths).
    pub expr: String,
    /// `--script-args`.
    pub args: BTreeMap<String, String>,
    pub budgets: Budgets,
    /// VMs running at once; default 16.
    pub parallelism: Option<usize>,
    /// The plugin folder (default: [`crate::plugins::default_dir`] of the scan's [`Places`]).
    pub plugin_dir: Option<PathBuf>,
}

/// A scan being described. Every setter takes nmap's meaning; nothing is
/// checked until [`ScanBuilder::build`] or [`ScanBuilder::start`].
#[derive(Clone, Debug, Default)]
pub struct ScanBuilder {
    targets: Vec<String>,
    target_files: Vec<PathBuf>,
    exclude: Vec<String>,
    exclude_files: Vec<PathBuf>,
    ports: Option<Ports>,
    exclude_ports: Vec<String>,
    sequential: bool,
    scan_type: Option<ScanType>,
    timing_level: Option<u8>,
    max_rate: Option<f64>,
    min_rate: Option<f64>,
    max_retries: Option<u32>,
    max_parallelism: Option<usize>,
    max_rtt_timeout: Option<Duration>,
    initial_rtt_timeout: Option<Duration>,
    scan_delay: Option<Duration>,
    rdns: crate::rdns::Settings,
    pub(super) resolve_all: bool,
    ipv6: bool,
    seed: Option<u64>,
    resume: Option<ResumePoint>,
    shard: Option<Shard>,
    report_closed: bool,
    verbosity: u8,
    link: LinkOptions,
    detect: Option<DetectSettings>,
    os: Option<OsSettings>,
    traceroute: bool,
    scripts: Option<ScriptSettings>,
    /// Service detection leaves out the `version` plugins ([`ScanBuilder::version_scripts`]).
    no_version_scripts: bool,
    lock: Option<PathBuf>,
    args: Vec<String>,
    open_files: Option<u64>,
    raw_sockets: Option<bool>,
    udp: bool,
    no_ping: bool,
    ping_probes: Vec<String>,
    ping_only: bool,
    list_only: bool,
    host_timeout: Option<Duration>,
    places: Places,
}

/// The ports of one protocol, in scan order.
type PortNumbers = Vec<u16>;

/// A validated scan and what the caller should be told before it starts.
/// Only [`ScanBuilder::build`] makes one, and only a `Built` starts.
#[derive(Debug)]
pub struct Built {
    config: ScanConfig,
    /// One line each ("raw sockets are not available; doing a connect scan").
    pub notes: Vec<String>,
}

impl Built {
    /// The settings the scan runs with.
    pub fn config(&self) -> &ScanConfig {
        &self.config
    }

    /// How far the scan got, shared with it: after an interruption,
    /// `progress().remaining(space_len())` is what a resume probes.
    pub fn progress(&self) -> Arc<crate::targets::Progress> {
        self.config.progress.clone()
    }

    /// What the scan order walks: (address, port) pairs, or hosts with
    /// host discovery (a resume file's `space_len`).
    pub fn space_len(&self) -> u64 {
        self.config.resume_len()
    }

    /// The key of the scan order.
    pub fn seed(&self) -> u64 {
        self.config.seed
    }
}

/// Where an interrupted scan stands (a resume file's content): its seed,
/// the size of its space, and the parts of its order not yet probed.
#[derive(Clone, Debug)]
pub struct ResumePoint {
    pub seed: u64,
    pub space_len: u64,
    pub segments: Vec<crate::targets::Segment>,
    /// With host discovery: the hosts to take again first.
    pub hosts: Vec<std::net::IpAddr>,
}

fn usage(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Config, msg)
}

impl ScanBuilder {
    /// Target terms: addresses, CIDR, ranges (`198.18.0.1-20`), hostnames.
    pub fn targets<S: Into<String>>(mut self, terms: impl IntoIterator<Item = S>) -> Self {
        self.targets.extend(terms.into_iter().map(Into::into));
        self
    }

    /// A file of target terms (`-iL`; `-` for stdin), read as a stream.
    pub fn target_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.target_files.push(path.into());
        self
    }

    /// Terms never to probe (`--exclude`).
    pub fn exclude<S: Into<String>>(mut self, terms: impl IntoIterator<Item = S>) -> Self {
        self.exclude.extend(terms.into_iter().map(Into::into));
        self
    }

    /// A file of terms never to probe (`--excludefile`).
    pub fn exclude_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.exclude_files.push(path.into());
        self
    }

    /// nmap's port spec (`22,80,1000-2000`, `-`, `T:80`, `http`).
    pub fn ports(mut self, spec: impl Into<String>) -> Self {
        self.ports = Some(Ports::Spec(spec.into()));
        self
    }

    /// The `n` most common ports (`--top-ports`; `-F` is 100). Default 1000.
    pub fn top_ports(mut self, n: usize) -> Self {
        self.ports = Some(Ports::Top(n));
        self
    }

    /// Ports never to probe, whatever the port list says (`--exclude-ports`,
    /// the same syntax as `-p`).
    pub fn exclude_ports(mut self, spec: impl Into<String>) -> Self {
        self.exclude_ports.push(spec.into());
        self
    }

    /// Each address's ports in ascending order, addresses in order, instead
    /// of the keyed random order (`-r`).
    pub fn sequential(mut self, yes: bool) -> Self {
        self.sequential = yes;
        self
    }

    /// SYN or connect (or another of nmap's TCP scans); by default SYN
    /// when raw sockets are allowed. `ScanType::Udp` alone is a UDP scan.
    pub fn scan_type(mut self, t: ScanType) -> Self {
        self.scan_type = Some(t);
        self
    }

    /// Scan the UDP ports too (`-sU`): alone, unless a TCP scan type is set.
    pub fn udp(mut self, yes: bool) -> Self {
        self.udp = yes;
        self
    }

    /// nmap's `-T0`..`-T5` (default 3).
    pub fn timing_template(mut self, level: u8) -> Self {
        self.timing_level = Some(level);
        self
    }

    pub fn max_rate(mut self, probes_per_second: f64) -> Self {
        self.max_rate = Some(probes_per_second);
        self
    }

    pub fn min_rate(mut self, probes_per_second: f64) -> Self {
        self.min_rate = Some(probes_per_second);
        self
    }

    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = Some(n);
        self
    }

    /// Probes outstanding at once (`--max-parallelism`).
    pub fn max_parallelism(mut self, n: usize) -> Self {
        self.max_parallelism = Some(n);
        self
    }

    /// At least this long between two probes to the same host, retries
    /// included (`--scan-delay`, for fragile hosts and rate-limited ones).
    pub fn scan_delay(mut self, t: Duration) -> Self {
        self.scan_delay = Some(t);
        self
    }

    pub fn max_rtt_timeout(mut self, t: Duration) -> Self {
        self.max_rtt_timeout = Some(t);
        self
    }

    /// A raw scan's wait for an answer before any round trip is known
    /// (`--initial-rtt-timeout`; at most the `--max-rtt-timeout`).
    pub fn initial_rtt_timeout(mut self, t: Duration) -> Self {
        self.initial_rtt_timeout = Some(t);
        self
    }

    /// Which hosts get a reverse DNS lookup, and who answers (`-n`, `-R`,
    /// `--dns-servers`, `--system-dns`; default: each host found up,
    /// through resolv.conf's servers).
    pub fn reverse_dns(mut self, settings: crate::rdns::Settings) -> Self {
        self.rdns = settings;
        self
    }

    /// Scan every address of each name given (`--resolve-all`), not only its first.
    pub fn resolve_all(mut self, on: bool) -> Self {
        self.resolve_all = on;
        self
    }

    /// IPv6 only (`-6`).
    pub fn ipv6(mut self, on: bool) -> Self {
        self.ipv6 = on;
        self
    }

    /// Finishes an interrupted scan: the same seed, only the segments left.
    /// The targets and ports must make a space of the same size.
    pub fn resume(mut self, point: ResumePoint) -> Self {
        self.resume = Some(point);
        self
    }

    /// The key of the scan order (`--seed`); random by default.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Part `k` of `n` (`--shard K/N`).
    pub fn shard(mut self, shard: Shard) -> Self {
        self.shard = Some(shard);
        self
    }

    /// Report closed ports as events too.
    pub fn report_closed(mut self, on: bool) -> Self {
        self.report_closed = on;
        self
    }

    /// How verbose reports are (nmap's `-v` count).
    pub fn verbosity(mut self, level: u8) -> Self {
        self.verbosity = level;
        self
    }

    /// `-e` and `-S` for raw scans.
    pub fn link(mut self, link: LinkOptions) -> Self {
        self.link = link;
        self
    }

    /// Service detection with the default settings (`-sV`), or none.
    pub fn service_detection(mut self, on: bool) -> Self {
        self.detect = on.then(DetectSettings::default);
        self
    }

    /// Service detection with these settings.
    pub fn detection(mut self, settings: DetectSettings) -> Self {
        self.detect = Some(settings);
        self
    }

    /// OS detection (`-O`) with these settings.
    pub fn os_detection(mut self, settings: OsSettings) -> Self {
        self.os = Some(settings);
        self
    }

    /// Traceroute to each host up (`--traceroute`).
    pub fn traceroute(mut self, on: bool) -> Self {
        self.traceroute = on;
        self
    }

    /// Whether service detection also runs the plugins of the `version`
    /// category on the ports they select, as nmap's `-sV` runs its version
    /// scripts (default: on). They run with the settings of
    /// [`ScanBuilder::script_settings`] when there are some, else the defaults.
    pub fn version_scripts(mut self, on: bool) -> Self {
        self.no_version_scripts = !on;
        self
    }

    /// Plugins selected by `expr` (`--script`), with default budgets.
    pub fn scripts(mut self, expr: impl Into<String>) -> Self {
        self.scripts = Some(ScriptSettings { expr: expr.into(), ..ScriptSettings::default() });
        self
    }

    /// Plugins with these settings.
    pub fn script_settings(mut self, settings: ScriptSettings) -> Self {
        self.scripts = Some(settings);
        self
    }

    /// Where the plugin and probe folders, the cache, the data folder and
    /// nmap's files are (default: [`Places::default`]: the built-in
    /// plugins and probes, written out under /tmp; no data folder, so no
    /// installed pack and no plugin metadata cache; nmap's usual folders).
    pub fn places(mut self, places: Places) -> Self {
        self.places = places;
        self
    }

    /// A lock file installed packs must match (default: ./moonscan.lock if there is one).
    pub fn lock(mut self, path: impl Into<PathBuf>) -> Self {
        self.lock = Some(path.into());
        self
    }

    /// The command line recorded in `scan_start` (default: none), with
    /// `--script-args` values and URL passwords replaced
    /// ([`crate::output::redact`]): every output and store records it.
    pub fn command_line(mut self, args: Vec<String>) -> Self {
        self.args = crate::output::redact::command_line(&args);
        self
    }

    /// The open-file limit to plan sockets within (default: the process's).
    pub fn open_file_limit(mut self, n: u64) -> Self {
        self.open_files = Some(n);
        self
    }

    /// Whether raw sockets may be opened (default: try one).
    pub fn raw_sockets(mut self, allowed: bool) -> Self {
        self.raw_sockets = Some(allowed);
        self
    }

    /// Takes every target as up: no host discovery (nmap's `-Pn`).
    pub fn skip_discovery(mut self, yes: bool) -> Self {
        self.no_ping = yes;
        self
    }

    /// Adds host discovery probes as nmap's `-P` options name them: `"E"`,
    /// `"P"`, `"M"`, `"S22,80"`, `"A"`, `"U53"`, `"R"` (ARP/NDP, which
    /// on-link targets always get). Without any, nmap's default set.
    pub fn ping_probe(mut self, option: impl Into<String>) -> Self {
        self.ping_probes.push(option.into());
        self
    }

    /// Host discovery only, no port scan (nmap's `-sn`).
    pub fn ping_only(mut self, yes: bool) -> Self {
        self.ping_only = yes;
        self
    }

    /// Lists the targets and sends nothing (nmap's `-sL`).
    pub fn list_only(mut self, yes: bool) -> Self {
        self.list_only = yes;
        self
    }

    /// Gives up on a host whose ports have been scanned this long (nmap's
    /// `--host-timeout`); what was found on it is kept.
    pub fn host_timeout(mut self, t: Duration) -> Self {
        self.host_timeout = Some(t);
        self
    }

    /// Checks every setting and builds the scan.
    pub fn build(self) -> Result<Built> {
        let mut notes = Vec::new();
        let discovery = self.discovery()?;
        let no_ports = self.list_only || self.ping_only;
        let raw_ok = self.raw_sockets.unwrap_or_else(crate::raw::packet::raw_available);
        let (scan_type, udp, udp_raw) = self.scan_kind(raw_ok, &mut notes)?;

        if self.host_timeout.is_some() && scan_type == ScanType::Connect {
            notes.push("`host_timeout` applies to raw scans only; this connect scan ignores it".into());
        }
        // -sL sends nothing; -sn on this machine's addresses needs no raw
        // socket, and without one it connects to ports 80 and 443.
        if self.list_only || (self.ping_only && !self.any_remote_target()) {
            notes.clear();
        } else if self.ping_only && scan_type == ScanType::Connect {
            notes = vec!["raw sockets are not available (needs root or CAP_NET_RAW); host discovery connects to ports 80 and 443".into()];
        }
        let (tcp_ports, udp_ports) =
            if no_ports { (Some(vec![0]), None) } else { self.port_list(scan_type != ScanType::Udp, udp)? };
        // -sS -sU with only one protocol's ports named: that protocol alone (as nmap).
        let scan_type = if tcp_ports.is_none() && udp_ports.is_some() { ScanType::Udp } else { scan_type };
        let udp = udp_ports.is_some();
        if !udp && self.ports_name_udp() {
            notes.push("the port list names UDP ports (U:) but `udp` is not given: only TCP is scanned".into());
        }
        self.top_ports_notes(&tcp_ports, &udp_ports, &mut notes);
        let inputs::Targets { include, exclude, names: hostnames, also_by_address } = self.address_sets()?;
        let (space, also_udp) = match (tcp_ports, udp_ports) {
            (Some(tcp), udp) => {
                let also = udp.map(|u| TargetSpace::new(&include, &exclude, u)).transpose()?;
                (TargetSpace::new(&include, &exclude, tcp)?, also.map(|s| s.in_sequence(self.sequential)))
            }
            (None, Some(udp)) => (TargetSpace::new(&include, &exclude, udp)?, None),
            (None, None) => unreachable!("port_list gives the ports of at least one protocol"),
        };
        let space = space.in_sequence(self.sequential);

        let level = self.timing_level.unwrap_or(3);
        let mut timing = self.timing(level)?;
        // Keep room for the files and sockets that are not probes.
        let nofile = self.open_files.unwrap_or_else(crate::raw::nofile_limit);
        let fd_room = usize::try_from(nofile.saturating_sub(64)).unwrap_or(usize::MAX).max(1);
        timing.window = timing.window.min(fd_room);

        // A lock or a pack only matters for what the scan selects: the
        // packs that do not verify or match the lock are left out (said in
        // a note), and refused only if the scan names one of them.
        let usable = self.usable_packs()?;
        notes.extend(usable.notes);
        let (packs, left_out) = (usable.packs, usable.left_out);
        let detector = self.detector(level, &packs, fd_room, &mut timing)?;
        let udp = if udp { Some(udp_plan(detector.as_ref(), also_udp, udp_raw, &self.places)?) } else { None };
        let plugins = self.plugin_config(packs, &left_out, &mut notes)?;
        let os = self.os_plan(no_ports, raw_ok, udp.is_some(), &mut notes)?;
        if self.traceroute && no_ports {
            return Err(usage("`os_detection` and `traceroute` need a port scan (not `ping_only` or `list_only`)"));
        }
        if self.traceroute && !raw_ok {
            return Err(usage("`traceroute` sends raw packets: it needs root or CAP_NET_RAW"));
        }
        let resumed_len = self.resume.as_ref().map(|r| r.space_len);
        let config = ScanConfig {
            space,
            scan_type,
            timing,
            seed: match &self.resume {
                Some(r) => r.seed,
                None => self.seed.unwrap_or_else(crate::scan::random_u64),
            },
            shard: self.shard.unwrap_or(Shard::WHOLE),
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            resume_hosts: self.resume.as_ref().map(|r| r.hosts.clone()).unwrap_or_default(),
            resume: self.resume.map(|r| r.segments),
            progress: Default::default(),
            args: self.args,
            report_closed: self.report_closed,
            verbosity: self.verbosity,
            link: self.link,
            detector,
            plugins,
            udp,
            discovery,
            list_only: self.list_only,
            host_timeout: self.host_timeout,
            hostnames,
            also_by_address,
            rdns: self.rdns,
            os,
            traceroute: self.traceroute,
        };
        if let Some(len) = resumed_len {
            check_resume(&config, len)?;
        }
        Ok(Built { config, notes })
    }

    /// Notes for `--top-ports N` when the table ranks fewer than N ports of
    /// a protocol.
    fn top_ports_notes(
        &self,
        tcp_ports: &Option<PortNumbers>,
        udp_ports: &Option<PortNumbers>,
        notes: &mut Vec<String>,
    ) {
        if let Some(Ports::Top(n)) = &self.ports {
            for (list, name) in [(tcp_ports, "TCP"), (udp_ports, "UDP")] {
                if let Some(list) = list.as_ref().filter(|l| l.len() < *n && self.exclude_ports.is_empty()) {
                    notes.push(format!(
                        "`top_ports` {n}: the port table ranks {} {name} ports; scanning those",
                        list.len()
                    ));
                }
            }
        }
    }

    /// The installed packs the scan may use, those left out with why, and
    /// notes on them (none unless the scan detects services or runs scripts).
    fn usable_packs(&self) -> Result<crate::packs::Usable> {
        if self.detect.is_some() || self.scripts.is_some() {
            let core_dir = self
                .scripts
                .as_ref()
                .and_then(|s| s.plugin_dir.clone())
                .unwrap_or_else(|| crate::plugins::default_dir(&self.places));
            crate::packs::installed_usable(self.lock.as_deref(), &core_dir, &self.places)
        } else {
            Ok(crate::packs::Usable::default())
        }
    }

    /// Service detection (`-sV`) at timing `level`, with the probes of the
    /// trusted `packs`; its sockets take their share of `fd_room` from
    /// discovery's window.
    fn detector(
        &self,
        level: u8,
        packs: &[crate::packs::InstalledPack],
        fd_room: usize,
        timing: &mut crate::discovery::Timing,
    ) -> Result<Option<Detector>> {
        let detector = match &self.detect {
            None => None,
            Some(d) => {
                let mut opts = DetectOptions::for_timing(level);
                opts.nmap_dirs = self.places.nmap.clone();
                opts.fingerprint_strings = self.scripts.is_some();
                if let Some(n) = d.intensity {
                    opts.intensity = n;
                }
                if let Some(t) = d.port_timeout {
                    opts.port_timeout = t;
                }
                if let Some(n) = d.parallelism {
                    if n == 0 {
                        return Err(usage("`detection.parallelism` must be at least 1"));
                    }
                    opts.parallelism = n;
                }
                // Detection's sockets and discovery's share the open-file limit.
                opts.parallelism = opts.parallelism.min((fd_room / 2).max(1));
                timing.window = timing.window.min((fd_room - opts.parallelism.min(fd_room - 1)).max(1));
                let dir = d.probes_dir.clone().unwrap_or_else(|| crate::service::probes::default_dir(&self.places));
                let mut db = ProbeDb::load_dir(&dir)?;
                // Probes of trusted installed packs (they are sent to every
                // open port), from the text their pack verified.
                for pack in packs.iter().filter(|p| p.trusted) {
                    for (path, text) in &pack.probes {
                        db.add_str(text, path)?;
                    }
                }
                Some(Detector::new(db, opts)?)
            }
        };
        Ok(detector)
    }

    /// The plugin stage: the plugins `--script` selects (refused if it names
    /// a pack `left_out`), and with `-sV` the version category's, with
    /// their arguments checked.
    fn plugin_config(
        &self,
        packs: Vec<crate::packs::InstalledPack>,
        left_out: &[(String, String)],
        notes: &mut Vec<String>,
    ) -> Result<Option<Arc<PluginConfig>>> {
        // nmap's -sV runs the scripts of the version category too.
        let version_too = self.detect.is_some() && !self.no_version_scripts;
        let implicit = ScriptSettings { expr: "version".into(), ..ScriptSettings::default() };
        let scripts = self.scripts.as_ref().or(version_too.then_some(&implicit));
        let plugins = match scripts {
            None => None,
            Some(s) => {
                let dir = s.plugin_dir.clone().unwrap_or_else(|| crate::plugins::default_dir(&self.places));
                let available = available_plugins(&dir, packs, &self.places)?;
                let mut chosen = Vec::new();
                if let Some((name, why)) = self.scripts.as_ref().and_then(|s| names_left_out(&s.expr, left_out)) {
                    return Err(Error::new(ErrorKind::Config, format!("`scripts` names pack {name}, left out: {why}")));
                }
                if self.scripts.is_some() {
                    chosen = crate::plugins::select(&available, &s.expr)?;
                    if chosen.is_empty() {
                        return Err(usage(format!("`scripts` {:?} selects no plugin", s.expr)));
                    }
                    let sel = crate::plugins::Selection::parse(&s.expr)?;
                    // A category selects trusted plugins only.
                    let listed: Vec<(&str, &[String])> = available
                        .iter()
                        .filter(|p| p.trusted)
                        .map(|p| (p.meta.id.as_str(), p.meta.categories.as_slice()))
                        .collect();
                    let nmap = crate::plugins::load::select::nmap_category_counts(&self.places.nmap);
                    notes.extend(crate::plugins::load::select::category_note(&sel, &listed, nmap.as_ref()));
                }
                if version_too {
                    for p in available.iter().filter(|p| p.meta.categories.iter().any(|c| c == "version")) {
                        if !chosen.iter().any(|c| c.path == p.path && c.meta.id == p.meta.id) {
                            chosen.push(p.clone());
                        }
                    }
                }
                // Arguments no selected plugin declares it reads: the
                // engine's own (nmap's http.useragent), nmap's keys for a
                // meaning moonscan has not (refused with the reason), or a
                // typo or one for a plugin not selected (said, not kept).
                let agent = crate::plugins::load::script_args::USER_AGENT;
                if s.args.get(agent).is_some_and(|v| v.contains(['\r', '\n'])) {
                    return Err(usage(format!("`script_settings.args` {agent}: a header value holds no line break")));
                }
                let mut unread = Vec::new();
                for k in s.args.keys().filter(|k| !chosen.iter().any(|p| p.meta.args.iter().any(|a| a == *k))) {
                    use crate::plugins::load::script_args::{known, Known};
                    match known(k) {
                        Some(Known::Engine) => {}
                        Some(Known::Refused(why)) => return Err(usage(format!("`script_settings.args` {k}: {why}"))),
                        None => unread.push(k.as_str()),
                    }
                }
                if !unread.is_empty() {
                    notes.push(format!("`script_settings.args`: no selected plugin reads {}", unread.join(", ")));
                }
                let workers = s.parallelism.unwrap_or(16);
                if workers == 0 {
                    return Err(usage("`script_settings.parallelism` must be at least 1"));
                }
                let (budgets, args) = (s.budgets.clone(), s.args.clone());
                let verbosity = self.verbosity;
                // -sV alone with no version plugin in the folder: no plugin stage.
                (!chosen.is_empty())
                    .then(|| Arc::new(PluginConfig { plugins: chosen, budgets, args, workers, verbosity }))
            }
        };
        Ok(plugins)
    }

    /// OS detection's plan (`-O`); it needs a port scan and raw sockets.
    fn os_plan(
        &self,
        no_ports: bool,
        raw_ok: bool,
        udp_scan: bool,
        notes: &mut Vec<String>,
    ) -> Result<Option<Arc<crate::os::stage::OsPlan>>> {
        let os = match &self.os {
            None => None,
            Some(_) if no_ports => {
                return Err(usage("`os_detection` and `traceroute` need a port scan (not `ping_only` or `list_only`)"))
            }
            Some(_) if !raw_ok => {
                return Err(usage("OS detection (`os_detection`) sends raw packets: it needs root or CAP_NET_RAW"));
            }
            Some(o) => {
                let db = crate::os::db::OsDb::load(o.db.as_deref(), &self.places.nmap)?;
                if db.is_none() {
                    notes.push("OS detection: nmap-os-db not found (install nmap or give `os_detection.db` FILE); fingerprints are reported without matches".into());
                }
                let max_tries = o.max_tries.unwrap_or(5);
                if max_tries == 0 {
                    return Err(usage("`os_detection.max_tries` must be at least 1"));
                }
                Some(Arc::new(crate::os::stage::OsPlan { db, guess: o.guess, limit: o.limit, max_tries, udp_scan }))
            }
        };
        Ok(os)
    }

    /// Builds the scan and starts it on the current tokio runtime.
    pub fn start(self) -> Result<ScanHandle> {
        Ok(ScanHandle::start(self.build()?))
    }
}

/// The UDP scan's plan: its payloads from detection's probes (or the
/// probe files `places` names when the scan does not detect services).
fn udp_plan(detector: Option<&Detector>, also: Option<TargetSpace>, raw: bool, places: &Places) -> Result<UdpPlan> {
    let payloads = match detector {
        Some(d) => Payloads::from_db(d.db()),
        None => Payloads::from_db(&ProbeDb::load_dir(&crate::service::probes::default_dir(places))?),
    };
    Ok(UdpPlan { also, raw, payloads: Arc::new(payloads) })
}

/// A resumed scan's targets must be those it was started with: `len`
/// pairs or hosts to walk, and the hosts its resume file lists.
fn check_resume(config: &ScanConfig, len: u64) -> Result<()> {
    let walks = if config.discovery.is_some() { "hosts" } else { "(address, port) pairs" };
    if config.resume_len() != len {
        return Err(usage(format!(
            "resuming: the targets now make {} {walks}, not {len}; did a hostname or an exclude file change?",
            config.resume_len()
        )));
    }
    if let Some(ip) = config.resume_hosts.iter().find(|ip| !config.space.addrs().contains(**ip)) {
        return Err(usage(format!("resuming: host {ip} of the resume file is not among the targets")));
    }
    if !config.resume_hosts.is_empty() && config.discovery.is_none() {
        return Err(usage("resuming: the resume file lists hosts, but the scan has no host discovery"));
    }
    Ok(())
}

/// The first pack of `left_out` that a `--script` expression names (as
/// `PACK:plugin` or `PACK:*`), with why it was left out.
fn names_left_out<'a>(expr: &str, left_out: &'a [(String, String)]) -> Option<(&'a str, &'a str)> {
    let words = expr.split(|c: char| c == ',' || c == '(' || c == ')' || c.is_whitespace());
    for w in words {
        if let Some((pack, _)) = w.split_once(':') {
            if let Some((name, why)) = left_out.iter().find(|(name, _)| name == pack) {
                return Some((name, why));
            }
        }
    }
    None
}
