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
//!     if let moonscan::findings::Event::Finding(f) = event {
//!         println!("{}:{} {}: {}", f.ip, f.port, f.plugin, f.title);
//!     }
//! }
//! let end = scan.finish().await?;
//! println!("{} open ports in {:.2} s", end.open, end.elapsed);
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::discovery::payloads::Payloads;
use crate::discovery::syn::LinkOptions;
use crate::discovery::{stop_signal, Stats, StopHandle, Timing};
use crate::error::{Error, ErrorKind, Result};
use crate::findings::{Event, ScanEnd, ScanType};
use crate::plugins::stage::PluginConfig;
use crate::plugins::{Budgets, Plugin};
use crate::scan::{ScanConfig, UdpPlan};
use crate::service::{DetectOptions, Detector, ProbeDb};
use crate::targets::addrs::AddrSetBuilder;
use crate::targets::{self, Family, Shard, TargetSpace, Term};

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
    /// Probe files (default: [`crate::service::probes::default_dir`]).
    pub probes_dir: Option<PathBuf>,
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
    /// The plugin folder (default: [`crate::plugins::default_dir`]).
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
    scan_delay: Option<Duration>,
    no_dns: bool,
    ipv6: bool,
    seed: Option<u64>,
    resume: Option<ResumePoint>,
    shard: Option<Shard>,
    report_closed: bool,
    verbosity: u8,
    link: LinkOptions,
    detect: Option<DetectSettings>,
    scripts: Option<ScriptSettings>,
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

    /// (address, port) pairs in the scan order.
    pub fn space_len(&self) -> u64 {
        self.config.space.len()
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

    /// Never resolve names (`-n`).
    pub fn no_dns(mut self, on: bool) -> Self {
        self.no_dns = on;
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

    /// A lock file installed packs must match (default: ./moonscan.lock if there is one).
    pub fn lock(mut self, path: impl Into<PathBuf>) -> Self {
        self.lock = Some(path.into());
        self
    }

    /// The command line recorded in `scan_start` (default: none).
    pub fn command_line(mut self, args: Vec<String>) -> Self {
        self.args = args;
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

    /// The host discovery asked for, checked.
    fn discovery(&self) -> Result<Option<crate::discovery::ping::HostPlan>> {
        use crate::discovery::ping::HostPlan;
        if self.list_only {
            if self.ping_only {
                return Err(usage("-sL and -sn cannot be combined"));
            }
            return Ok(None);
        }
        let mut probes = Vec::new();
        for p in self.ping_probes.iter().filter(|p| !p.eq_ignore_ascii_case("R")) {
            HostPlan::add_option(&mut probes, p)?;
        }
        if self.no_ping {
            if self.ping_only {
                return Err(usage("-sn -Pn would send nothing; -sL lists the targets"));
            }
            if !self.ping_probes.is_empty() {
                return Err(usage("-Pn and -P discovery probes cannot be combined"));
            }
            return Ok(None);
        }
        let mut plan = HostPlan::nmap_default();
        if !probes.is_empty() {
            plan.probes = probes;
        }
        plan.ping_only = self.ping_only;
        plan.report_down = self.verbosity > 0;
        Ok(Some(plan))
    }

    /// Checks every setting and builds the scan.
    pub fn build(self) -> Result<Built> {
        let mut notes = Vec::new();
        // A resumed scan walks what is left of its (address, port) order:
        // only a scan without discovery writes a resume file (or one from
        // before discovery, which took every target as up).
        let discovery = if self.resume.is_some() { None } else { self.discovery()? };
        let no_ports = self.list_only || self.ping_only;
        if no_ports {
            let flag = if self.list_only { "-sL" } else { "-sn" };
            let conflict = [
                (self.ports.is_some(), "-p/--top-ports"),
                (self.udp || self.scan_type.is_some(), "a scan type (-sS, -sT, -sU...)"),
                (self.detect.is_some(), "-sV"),
                (self.scripts.is_some(), "--script"),
                (self.host_timeout.is_some(), "--host-timeout"),
            ];
            if let Some((_, what)) = conflict.iter().find(|c| c.0) {
                return Err(usage(format!("{flag} scans no ports: it cannot be combined with {what}")));
            }
            if self.resume.is_some() {
                return Err(usage(format!("{flag} cannot be resumed")));
            }
        }
        let raw_ok = self.raw_sockets.unwrap_or_else(crate::net::packet::raw_available);
        let udp = self.udp || self.scan_type == Some(ScanType::Udp);
        let tcp_type = self.scan_type.filter(|&t| t != ScanType::Udp);
        let udp_raw = udp && raw_ok && self.any_remote_target();
        if udp && !udp_raw {
            notes.push(if raw_ok {
                "raw UDP probes cannot reach this machine's own addresses; -sU uses UDP sockets".into()
            } else {
                "raw sockets are not available (needs root or CAP_NET_RAW); -sU uses UDP sockets".into()
            });
        }
        let scan_type = match tcp_type {
            // -sS -sU without raw sockets: the TCP part connect-scans, as -sS alone does.
            Some(ScanType::Syn) if !raw_ok && udp => {
                notes.push(
                    "raw sockets are not available (needs root or CAP_NET_RAW); doing a connect scan (-sT)".into(),
                );
                ScanType::Connect
            }
            Some(t) => t,
            None if udp => ScanType::Udp,
            None if raw_ok => ScanType::Syn,
            None => {
                notes.push(
                    "raw sockets are not available (needs root or CAP_NET_RAW); doing a connect scan (-sT)".into(),
                );
                ScanType::Connect
            }
        };
        let scan_type = if scan_type == ScanType::Syn && !self.any_remote_target() {
            notes.push("raw SYN probes cannot reach this machine's own addresses; doing a connect scan (-sT)".into());
            ScanType::Connect
        } else {
            scan_type
        };
        // The other raw scans have no connect-scan equivalent to fall back on.
        if !matches!(scan_type, ScanType::Syn | ScanType::Connect | ScanType::Udp) {
            if !raw_ok {
                return Err(usage(format!(
                    "{} sends raw packets: it needs root or CAP_NET_RAW (-sT needs neither)",
                    scan_type.flag()
                )));
            }
            if !self.any_remote_target() {
                return Err(usage(format!(
                    "{} sends raw packets, which cannot reach this machine's own addresses",
                    scan_type.flag()
                )));
            }
        }
        if scan_type == ScanType::Connect && !udp_raw && (self.link.iface.is_some() || self.link.src.is_some()) {
            return Err(usage("-e and -S apply to raw (SYN) scans only"));
        }

        if self.host_timeout.is_some() && scan_type == ScanType::Connect {
            notes.push("--host-timeout applies to raw scans only; this connect scan ignores it".into());
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
            notes.push("the port list names UDP ports (U:) but -sU is not given: only TCP is scanned".into());
        }
        let family = if self.ipv6 { Family::OnlyV6 } else { Family::PreferV4 };
        let mut include = AddrSetBuilder::default();
        for t in &self.targets {
            add_term(&mut include, t, self.no_dns, family)?;
        }
        for path in &self.target_files {
            read_list(path, "-iL", |t| add_term(&mut include, t, self.no_dns, family))?;
        }
        if include.is_empty() {
            return Err(Error::new(ErrorKind::TargetSpec, "no targets given (see moonscan --help)"));
        }
        let include = include.finish()?;
        let mut exclude = AddrSetBuilder::default();
        for t in self.exclude.iter().filter(|t| !t.trim().is_empty()) {
            add_term(&mut exclude, t, self.no_dns, family)?;
        }
        for path in &self.exclude_files {
            read_list(path, "--excludefile", |t| add_term(&mut exclude, t, self.no_dns, family))?;
        }
        let exclude = exclude.finish()?;
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
        let mut timing = Timing::template(level).ok_or_else(|| usage(format!("-T{level}: the templates are 0-5")))?;
        if let Some(rate) = self.max_rate {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(usage(format!("--max-rate must be a positive number of probes per second, not {rate}")));
            }
            timing.max_rate = Some(rate);
        }
        if let Some(min) = self.min_rate {
            if !(min.is_finite() && min > 0.0) {
                return Err(usage(format!("--min-rate must be a positive number of probes per second, not {min}")));
            }
            if timing.max_rate.is_some_and(|max| min > max) {
                return Err(usage("--min-rate is above --max-rate"));
            }
        }
        if let Some(r) = self.max_retries {
            timing.retries = r;
        }
        if let Some(w) = self.max_parallelism {
            if w == 0 {
                return Err(usage("--max-parallelism must be at least 1"));
            }
            timing.window = w;
            timing.raw_window = w;
        }
        if let Some(t) = self.max_rtt_timeout {
            timing.timeout = t;
        }
        if let Some(d) = self.scan_delay {
            if d > Duration::from_secs(3600) {
                return Err(usage("--scan-delay is at most 1h"));
            }
            timing.scan_delay = Some(d).filter(|d| !d.is_zero());
        }
        if let Some(min) = self.min_rate {
            // With nothing answering, a window of W probes sends W per timeout.
            let needed = (min * timing.timeout.as_secs_f64() * f64::from(timing.retries + 1)).ceil() as usize;
            timing.raw_window = timing.raw_window.max(needed);
            timing.window = timing.window.max(needed);
        }
        // Keep room for the files and sockets that are not probes.
        let nofile = self.open_files.unwrap_or_else(crate::net::nofile_limit);
        let fd_room = usize::try_from(nofile.saturating_sub(64)).unwrap_or(usize::MAX).max(1);
        timing.window = timing.window.min(fd_room);

        let packs = if self.detect.is_some() || self.scripts.is_some() {
            crate::packs::installed_checked(self.lock.as_deref())?
        } else {
            Vec::new()
        };
        let detector = match &self.detect {
            None => None,
            Some(d) => {
                let mut opts = DetectOptions::for_timing(level);
                if let Some(n) = d.intensity {
                    opts.intensity = n;
                }
                if let Some(t) = d.port_timeout {
                    opts.port_timeout = t;
                }
                if let Some(n) = d.parallelism {
                    if n == 0 {
                        return Err(usage("--version-parallelism must be at least 1"));
                    }
                    opts.parallelism = n;
                }
                // Detection's sockets and discovery's share the open-file limit.
                opts.parallelism = opts.parallelism.min((fd_room / 2).max(1));
                timing.window = timing.window.min((fd_room - opts.parallelism.min(fd_room - 1)).max(1));
                let dir = d.probes_dir.clone().unwrap_or_else(crate::service::probes::default_dir);
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
        let udp = if udp {
            let payloads = match &detector {
                Some(d) => Payloads::from_db(d.db()),
                None => Payloads::from_db(&ProbeDb::load_dir(&crate::service::probes::default_dir())?),
            };
            Some(UdpPlan { also: also_udp, raw: udp_raw, payloads: Arc::new(payloads) })
        } else {
            None
        };
        let plugins = match &self.scripts {
            None => None,
            Some(s) => {
                let dir = s.plugin_dir.clone().unwrap_or_else(crate::plugins::default_dir);
                let available = available_plugins(&dir, packs)?;
                let chosen = crate::plugins::select(&available, &s.expr)?;
                if chosen.is_empty() {
                    return Err(usage(format!("--script {:?} selects no plugin", s.expr)));
                }
                let workers = s.parallelism.unwrap_or(16);
                if workers == 0 {
                    return Err(usage("--script-parallelism must be at least 1"));
                }
                let (budgets, args) = (s.budgets.clone(), s.args.clone());
                Some(Arc::new(PluginConfig { plugins: chosen, budgets, args, workers }))
            }
        };
        if let Some(r) = &self.resume {
            if space.len() != r.space_len {
                return Err(usage(format!(
                    "resuming: the targets now make {} (address, port) pairs, not {}; did a hostname or an exclude file change?",
                    space.len(),
                    r.space_len
                )));
            }
        }
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
        };
        Ok(Built { config, notes })
    }

    /// Builds the scan and starts it on the current tokio runtime.
    pub fn start(self) -> Result<ScanHandle> {
        Ok(ScanHandle::start(self.build()?))
    }

    /// False when every target named is a loopback address or `localhost`
    /// (the SYN engine cannot probe those).
    fn any_remote_target(&self) -> bool {
        let loopback = |t: &str| {
            t == "localhost"
                || t.split('/').next().and_then(|a| a.parse::<IpAddr>().ok()).is_some_and(|a| a.is_loopback())
        };
        self.targets.is_empty() || !self.target_files.is_empty() || !self.targets.iter().all(|t| loopback(t))
    }

    /// Whether the port spec names UDP ports with `U:`.
    fn ports_name_udp(&self) -> bool {
        let udp = |t: &str| t.trim_start().get(..2).is_some_and(|p| p.eq_ignore_ascii_case("u:"));
        matches!(&self.ports, Some(Ports::Spec(s)) if s.split(',').any(udp))
    }

    /// The TCP and the UDP ports to scan, for the protocols asked.
    fn port_list(&self, tcp: bool, udp: bool) -> Result<(Option<PortNumbers>, Option<PortNumbers>)> {
        let one = |proto: targets::Proto| -> Result<Vec<u16>> {
            let pick = |l: targets::PortList| if proto == targets::Proto::Tcp { l.tcp } else { l.udp };
            let list = match &self.ports {
                Some(Ports::Spec(spec)) => pick(targets::parse_ports(spec)?),
                Some(Ports::Top(0)) => {
                    return Err(Error::new(ErrorKind::PortSpec, "--top-ports needs a number above 0"))
                }
                Some(Ports::Top(n)) => targets::top_ports(proto, *n),
                None => targets::top_ports(proto, 1000),
            };
            let name = if proto == targets::Proto::Tcp { "TCP" } else { "UDP" };
            if list.is_empty() {
                return Err(Error::new(ErrorKind::PortSpec, format!("the port spec names no {name} ports")));
            }
            let mut skip = Vec::new();
            for spec in &self.exclude_ports {
                skip.extend(pick(targets::parse_ports(spec)?));
            }
            let list: Vec<u16> = list.into_iter().filter(|p| !skip.contains(p)).collect();
            if list.is_empty() {
                return Err(Error::new(ErrorKind::PortSpec, "--exclude-ports leaves no port to scan"));
            }
            Ok(list)
        };
        match (tcp, udp) {
            // Both asked: a protocol the spec names no port of is left out,
            // so long as the other has some.
            (true, true) => match (one(targets::Proto::Tcp), one(targets::Proto::Udp)) {
                (Ok(t), Ok(u)) => Ok((Some(t), Some(u))),
                (Ok(t), Err(_)) => Ok((Some(t), None)),
                (Err(_), Ok(u)) => Ok((None, Some(u))),
                (Err(e), Err(_)) => Err(e),
            },
            (tcp, udp) => Ok((
                tcp.then(|| one(targets::Proto::Tcp)).transpose()?,
                udp.then(|| one(targets::Proto::Udp)).transpose()?,
            )),
        }
    }
}

/// A running scan: its events as they come, live counters, a stop signal,
/// and its summary at the end.
pub struct ScanHandle {
    events: mpsc::Receiver<Event>,
    stats: Arc<Stats>,
    stop: Arc<StopHandle>,
    task: tokio::task::JoinHandle<Result<ScanEnd>>,
}

impl ScanHandle {
    /// Runs a built scan on the current tokio runtime.
    pub fn start(built: Built) -> ScanHandle {
        let config = built.config;
        let (tx, events) = mpsc::channel(4096);
        let stats = Arc::new(Stats::default());
        let (stop, stop_rx) = stop_signal();
        let st = stats.clone();
        let task = tokio::spawn(async move { crate::scan::run(&config, tx, st, stop_rx).await });
        ScanHandle { events, stats, stop: Arc::new(stop), task }
    }

    /// The live counters, shared (for a progress display on another thread).
    pub fn shared_stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// The stop signal, shared (for a Ctrl-C handler on another task).
    pub fn stopper(&self) -> Arc<StopHandle> {
        self.stop.clone()
    }

    /// The next event, or None after `scan_end` (or when the scan failed
    /// before it began: [`ScanHandle::finish`] says why).
    pub async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// Takes the event stream, to be read elsewhere (by sinks on another
    /// thread); [`ScanHandle::next_event`] then returns None at once and
    /// [`ScanHandle::finish`] only waits for the end. The reader must keep
    /// reading until the stream closes, or the scan waits for it.
    pub fn take_events(&mut self) -> mpsc::Receiver<Event> {
        let (_, closed) = mpsc::channel(1);
        std::mem::replace(&mut self.events, closed)
    }

    /// Live counters (probes sent, open ports, findings, errors...).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Probes sent over probes planned, 0.0 to 1.0.
    pub fn progress(&self) -> f64 {
        let planned = Stats::get(&self.stats.planned);
        if planned == 0 {
            return 0.0;
        }
        (Stats::get(&self.stats.sent) as f64 / planned as f64).min(1.0)
    }

    /// Stops sending new probes; what was found still streams out, and the
    /// scan ends with `scan_end` as usual.
    pub fn stop(&self) {
        self.stop.stop();
    }

    /// Waits for the end (draining events nobody read) and returns the summary.
    pub async fn finish(mut self) -> Result<ScanEnd> {
        while self.events.recv().await.is_some() {}
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(Error::new(ErrorKind::Io, format!("the scan task failed: {e}"))),
        }
    }
}

/// Every plugin a scan can select: the plugin folder (plugins/, the pack
/// core) and the installed packs' plugins, compiled from the bytes their
/// verification checked.
pub fn available_plugins(plugin_dir: &Path, packs: Vec<crate::packs::InstalledPack>) -> Result<Vec<Plugin>> {
    let mut plugins = if plugin_dir.is_dir() { crate::plugins::load_pack_dir(plugin_dir)? } else { Vec::new() };
    for pack in packs {
        for p in pack.plugins {
            crate::plugins::add_unique(&mut plugins, p.in_pack(&pack.name, pack.trusted))?;
        }
    }
    Ok(plugins)
}

/// Longest line of a target list.
const MAX_LIST_LINE: usize = 4096;
/// Largest target list read (it is read as a stream, a line at a time).
const MAX_LIST: u64 = 1 << 30;

/// Calls `f` with each target term of a file (`-` for stdin), read as a
/// stream: whitespace-separated, `#` starts a comment.
fn read_list(path: &Path, flag: &str, mut f: impl FnMut(&str) -> Result<()>) -> Result<()> {
    let each = |line: &str| -> Result<()> {
        for t in line.split('#').next().unwrap_or("").split_whitespace() {
            f(t)?;
        }
        Ok(())
    };
    if path.as_os_str() == "-" {
        return crate::files::for_each_line(std::io::stdin().lock(), path, flag, MAX_LIST_LINE, MAX_LIST, each);
    }
    let file = std::fs::File::open(path)
        .map_err(|e| Error::with_source(ErrorKind::Config, format!("{flag} {}: {e}", path.display()), e))?;
    crate::files::for_each_line(file, path, flag, MAX_LIST_LINE, MAX_LIST, each)
}

/// Adds one target term's addresses (a hostname is resolved now).
fn add_term(set: &mut AddrSetBuilder, t: &str, no_dns: bool, family: Family) -> Result<()> {
    match targets::parse_term(t)? {
        Term::Ranges(r) => {
            if family == Family::OnlyV6 && r.iter().any(|&(lo, _)| targets::addrs::addr(lo).is_ipv4()) {
                return Err(Error::new(ErrorKind::TargetSpec, format!("-6 was given but '{t}' is an IPv4 target")));
            }
            for range in r {
                set.push(range)?;
            }
        }
        Term::Host(name) if no_dns => {
            return Err(Error::new(
                ErrorKind::Resolve,
                format!("'{name}' is a hostname, and -n disables DNS resolution"),
            ));
        }
        Term::Host(name) => {
            let k = targets::addrs::key(targets::resolve(&name, family)?);
            set.push((k, k))?;
        }
    }
    Ok(())
}
