//! One scan, start to end: the pipeline driver.
//!
//! In: a validated [`ScanConfig`] (the engine never parses flags), an event
//! channel, shared [`Stats`] and a [`Stop`] signal. Out: a `scan_start`
//! event, the stages' events as they happen, and a `scan_end` event, which
//! is also returned. What always holds: events stream as they are found
//! (nothing waits for a phase to end), and a stopped scan still ends with
//! `scan_end` after its outstanding probes are answered or timed out.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc;

use crate::discovery::payloads::Payloads;
use crate::discovery::ping::{self, HostPlan};
use crate::discovery::syn::{self, HostScan, LinkOptions, Links, Pace, SynOptions};
use crate::discovery::{self, Timing};
use crate::error::{Error, ErrorKind, Result};
use crate::findings::{Event, HostState, Reason, ScanEnd, ScanId, ScanSettings, ScanStart, ScanType, Service};
use crate::pipeline::{Ctx, Found, Next, OpenPort, Stats, Stop, STAGE_QUEUE};
use crate::targets::{Progress, Segment, Shard, TargetSpace};

/// Everything a scan needs, validated.
#[derive(Clone, Debug)]
pub struct ScanConfig {
    pub space: TargetSpace,
    pub scan_type: ScanType,
    pub timing: Timing,
    /// Key of the scan order.
    pub seed: u64,
    pub shard: Shard,
    /// Probe drivers to run in parallel (one per core is right).
    pub workers: usize,
    /// What is left of an interrupted scan (its `Progress`), or None for a new one.
    pub resume: Option<Vec<Segment>>,
    /// With host discovery, the hosts an interrupted scan left unfinished:
    /// a resumed scan takes them first (asked again, all their ports).
    pub resume_hosts: Vec<std::net::IpAddr>,
    /// Where the scan order has got to, kept up to date while the scan runs
    /// (what a resume file records).
    pub progress: Arc<Progress>,
    /// The command line, recorded in `scan_start`.
    pub args: Vec<String>,
    /// Report closed ports as events too (they are always counted).
    pub report_closed: bool,
    /// How verbose reports are (`-v` counted; recorded in `scan_start`).
    pub verbosity: u8,
    /// `-e` and `-S` for raw scans.
    pub link: LinkOptions,
    /// Service detection (`-sV`) on every open port, as it is found.
    pub detector: Option<crate::service::Detector>,
    /// Plugins (`--script`) on every open port, after service detection if any.
    pub plugins: Option<Arc<crate::plugins::stage::PluginConfig>>,
    /// The UDP scan (`-sU`), if asked.
    pub udp: Option<UdpPlan>,
    /// Host discovery before each host's ports; `None` takes every target
    /// as up (`-Pn`).
    pub discovery: Option<HostPlan>,
    /// Only list the targets (`-sL`): nothing is sent.
    pub list_only: bool,
    /// Most time spent on one host's ports (`--host-timeout`; raw scans).
    pub host_timeout: Option<std::time::Duration>,
    /// Targets given by name, with the address each resolved to.
    pub hostnames: Vec<crate::findings::Hostname>,
    /// Named addresses also given as addresses (a target of their own too).
    pub also_by_address: Vec<std::net::IpAddr>,
    /// Reverse DNS: of which hosts, through whom.
    pub rdns: crate::rdns::Settings,
    /// OS detection (`-O`).
    pub os: Option<Arc<crate::os::stage::OsPlan>>,
    /// Traceroute (`--traceroute`).
    pub traceroute: bool,
}

impl ScanConfig {
    /// Whether an interrupted run can be resumed from its [`Progress`]: a
    /// scan that walks one order (one protocol, no host timeout), of
    /// `(address, port)` pairs, or of hosts with host discovery.
    pub fn resumable(&self) -> bool {
        self.udp.as_ref().is_none_or(|u| u.also.is_none()) && self.host_timeout.is_none() && !self.list_only
    }

    /// The length of the order a resume file's segments index: hosts when
    /// the scan walks hosts (host discovery), else `(address, port)` pairs.
    pub fn resume_len(&self) -> u64 {
        match &self.discovery {
            Some(_) => HostPlan::hosts_of(&self.space).map_or(0, |h| h.len()),
            None => self.space.len(),
        }
    }
}

/// The UDP part of a scan.
#[derive(Clone, Debug)]
pub struct UdpPlan {
    /// Every address with the UDP ports when TCP is scanned too (`space`
    /// and `scan_type` are then TCP's); `None` for a UDP scan alone, whose
    /// ports are `space`'s and whose `scan_type` is `Udp`.
    pub also: Option<TargetSpace>,
    /// Raw frames through the packet socket; else plain UDP sockets.
    pub raw: bool,
    /// What each port is sent.
    pub payloads: Arc<Payloads>,
}

/// How long to wait for a gateway's ARP/NDP answer before a raw scan.
const ARP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Random bytes; an unreadable random source only makes them less random.
pub(crate) fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        let ns = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        return ns as u64 ^ u64::from(std::process::id()).rotate_left(32);
    }
    u64::from_le_bytes(b)
}

/// A random identifier for a scan.
pub fn new_scan_id() -> String {
    format!("{:016x}", random_u64())
}

/// Runs the scan and returns its summary (also sent as `scan_end`). Fails
/// only before the scan starts (for a raw scan: no usable route or socket).
pub(crate) async fn run(
    cfg: &ScanConfig,
    events: mpsc::Sender<Event>,
    stats: Arc<Stats>,
    stop: Stop,
) -> Result<ScanEnd> {
    let udp_raw = cfg.udp.as_ref().is_some_and(|u| u.raw);
    let tcp_raw = !matches!(cfg.scan_type, ScanType::Connect | ScanType::Udp);
    let raw_stage = cfg.os.is_some() || cfg.traceroute;
    let links =
        if (tcp_raw || udp_raw || raw_stage) && !cfg.list_only { Some(resolve_links(cfg, &stop).await?) } else { None };
    let loopback = links.as_ref().is_some_and(|l| l.loopback);
    check_loopback(cfg, loopback, tcp_raw)?;
    let scan_id: ScanId = new_scan_id().into();
    let also_udp = cfg.udp.as_ref().and_then(|u| u.also.as_ref());
    let hosts_space = HostPlan::hosts_of(&cfg.space)?;
    let planned = probes_planned(cfg, &hosts_space);
    stats.planned.store(planned, std::sync::atomic::Ordering::Relaxed);
    let start = scan_start(cfg, scan_id.clone(), planned, links.is_none() || loopback, &hosts_space);
    let names = Arc::new(start.settings.targets_by_address());
    let _ = events.send(Event::ScanStart(start)).await;
    let t0 = Instant::now();
    let mut ctx = Ctx {
        scan_id: scan_id.clone(),
        t0,
        events,
        stats: stats.clone(),
        stop: stop.clone(),
        unshown: Arc::default(),
        latency: cfg.discovery.is_none().then(Arc::default),
        names,
        rdns: None,
        os_seen: raw_stage.then(Arc::default),
        hints: tcp_raw.then(Arc::default),
    };
    // Reverse DNS sends its names through a context of its own (it is not
    // told of its own events).
    let every = || -> crate::rdns::Targets {
        Box::new(hosts_space.clone().in_sequence(true).order(cfg.seed, cfg.shard, 0).map(|(ip, _)| ip))
    };
    ctx.rdns = crate::rdns::start(&cfg.rdns, every, &ctx)?;
    if cfg.list_only {
        let interrupted = list(hosts_space.clone().in_sequence(true).order(cfg.seed, cfg.shard, 0), &ctx).await;
        return Ok(finish(&ctx, &stats, interrupted, false).await);
    }

    if let Some(l) = &links {
        report_unreachable(&ctx, l).await;
    }
    let (stages, next) = start_stages(cfg, &ctx);
    let found = Found { ctx: ctx.clone(), next };
    let raw_links = links.clone().map(Arc::new);
    let passes = Passes {
        cfg,
        hosts_space: &hosts_space,
        also_udp,
        links: links.filter(|l| !l.loopback).map(Arc::new),
        tcp_raw,
        udp_raw,
        payloads: cfg.udp.as_ref().map(|u| u.payloads.clone()).unwrap_or_default(),
        key: (random_u64(), random_u64()),
    };
    let first = passes.first();
    let os_stage = passes.start_os(&ctx, raw_links.clone());
    let outcome = async {
        Ok::<bool, Error>(match also_udp {
            None => first.run(cfg, &ctx, found).await?,
            Some(also) => {
                let second = passes.second(also);
                let (a, b) = tokio::join!(first.run(cfg, &ctx, found.clone()), second.run(cfg, &ctx, found));
                a? | b?
            }
        })
    }
    .await;
    // A pass that failed or was cut short hands no more hosts to OS
    // detection, which then ends with the hosts it has.
    let interrupted = match outcome {
        Ok(interrupted) => interrupted,
        Err(e) => {
            if let Some(seen) = &ctx.os_seen {
                seen.close();
            }
            if let Some(os) = os_stage {
                let _ = os.await;
            }
            return Err(e);
        }
    };
    emit_hints(&ctx).await;
    trace_hosts(cfg, &ctx, raw_links, interrupted).await;
    if let Some(os) = os_stage {
        let _ = os.await;
    }
    // Discovery's `found` is gone: the next stage's input is closed, and so on down.
    for stage in stages.into_iter().rev() {
        let _ = stage.await;
    }
    // A stop after the last probe still cut detection or plugins short.
    Ok(finish(&ctx, &stats, interrupted, cfg.discovery.is_none()).await)
}

/// What the scan's passes (the scan type's, and UDP's beside a TCP one)
/// share: the raw paths and which protocols take them, the pace to split,
/// the hosts to walk, the UDP payloads and the cookies' key.
struct Passes<'a> {
    cfg: &'a ScanConfig,
    hosts_space: &'a TargetSpace,
    also_udp: Option<&'a TargetSpace>,
    /// The raw paths (none to this machine's own addresses).
    links: Option<Arc<Links>>,
    tcp_raw: bool,
    udp_raw: bool,
    payloads: Arc<Payloads>,
    key: (u64, u64),
}

impl Passes<'_> {
    /// The timing of a pass over `part` of the probes. With TCP and UDP
    /// both, the two passes run side by side and share the rate. Sockets
    /// too: each pass gets half the window (the open-file limit's share).
    fn share(&self, part: u64) -> Timing {
        let cfg = self.cfg;
        let mut t = cfg.timing.clone();
        if let Some(also) = self.also_udp {
            let whole = (cfg.space.len() + also.len()).max(1) as f64;
            t.max_rate = t.max_rate.map(|r| (r * part as f64 / whole).max(0.01));
            t.min_rate = t.min_rate.map(|r| (r * part as f64 / whole).max(0.01));
            t.window = (t.window / 2).max(1);
        }
        t
    }

    /// Each pass goes raw only where its protocol may (-sT -sU: UDP raw, TCP by connect).
    fn raw_for(&self, kind: ScanType) -> Option<Arc<Links>> {
        self.links.clone().filter(|_| if kind == ScanType::Udp { self.udp_raw } else { self.tcp_raw })
    }

    /// With host discovery, or a host timeout on a raw pass, a pass walks the
    /// hosts and scans each one's ports when it is found up.
    fn by_host(&self, kind: ScanType, ports: &crate::targets::TargetSpace, quiet: bool) -> Option<HostScan> {
        let cfg = self.cfg;
        let walk = cfg.discovery.is_some() || (cfg.host_timeout.is_some() && self.raw_for(kind).is_some());
        walk.then(|| HostScan {
            plan: cfg.discovery.clone().map(Arc::new),
            ports: ports.clone(),
            quiet,
            host_timeout: cfg.host_timeout,
        })
    }

    /// The scan type's pass over `space` (or what a resumed scan has
    /// left), its order tracked in the scan's progress.
    fn first(&self) -> Pass {
        let cfg = self.cfg;
        let hosts = self.by_host(cfg.scan_type, &cfg.space, false);
        let order = match &cfg.resume {
            Some(segs) if hosts.is_some() => {
                self.hosts_space.order_from(cfg.seed, segs.clone()).with_first(cfg.resume_hosts.clone())
            }
            Some(segs) => cfg.space.order_from(cfg.seed, segs.clone()),
            None if hosts.is_some() => self.hosts_space.order(cfg.seed, cfg.shard, 0),
            None => cfg.space.order(cfg.seed, cfg.shard, 0),
        }
        .tracked(&cfg.progress);
        Pass {
            kind: cfg.scan_type,
            order,
            timing: self.share(cfg.space.len()),
            links: self.raw_for(cfg.scan_type),
            payloads: self.payloads.clone(),
            key: self.key,
            hosts,
        }
    }

    /// The UDP pass beside a TCP one, over `also`'s ports (its hosts, quiet:
    /// the first pass reports them).
    fn second(&self, also: &TargetSpace) -> Pass {
        let cfg = self.cfg;
        let hosts = self.by_host(ScanType::Udp, also, true);
        Pass {
            kind: ScanType::Udp,
            order: if hosts.is_some() {
                self.hosts_space.order(cfg.seed, cfg.shard, 0)
            } else {
                also.order(cfg.seed, cfg.shard, 0)
            },
            timing: self.share(also.len()),
            links: self.raw_for(ScanType::Udp),
            payloads: self.payloads.clone(),
            key: self.key,
            hosts,
        }
    }

    /// OS detection starts now: each host goes to it the moment the raw TCP
    /// pass has decided its every port, while the scan goes on.
    fn start_os(&self, ctx: &Ctx, raw_links: Option<Arc<Links>>) -> Option<tokio::task::JoinHandle<()>> {
        let cfg = self.cfg;
        match (&cfg.os, &ctx.os_seen) {
            (Some(plan), Some(seen)) => {
                // With a UDP pass beside (-sSU), a host waits for the scan's end,
                // when its closed UDP port is known (and U1 no longer competes
                // with the UDP scan for the host's ICMP rate limit).
                if self.raw_for(cfg.scan_type).is_some() && cfg.scan_type != ScanType::Udp && self.also_udp.is_none() {
                    seen.ports_per_host(cfg.space.ports().len());
                }
                let (wait, rate) = (cfg.timing.timeout, cfg.timing.max_rate);
                Some(crate::os::stage::start(plan.clone(), ctx, raw_links, seen.clone(), wait, rate))
            }
            _ => None,
        }
    }
}

/// Raw frames cannot reach this machine's own addresses through loopback:
/// a SYN scan becomes a connect scan, a UDP scan uses UDP sockets, the
/// others have no such stand-in.
fn check_loopback(cfg: &ScanConfig, loopback: bool, tcp_raw: bool) -> Result<()> {
    if loopback && tcp_raw && cfg.scan_type != ScanType::Syn {
        return Err(Error::new(
            ErrorKind::Config,
            format!("{} sends raw packets, which cannot reach this machine's own addresses", cfg.scan_type.setting()),
        ));
    }
    Ok(())
}

/// An error for each target without a path.
async fn report_unreachable(ctx: &Ctx, links: &Links) {
    for (ip, why) in links.unreachable() {
        let message = format!("cannot reach {ip}: {why}");
        ctx.emit(ctx.error(Some(ip), None, None, crate::error::ErrorKind::Io, message)).await;
    }
}

/// The paths to the targets of a scan that sends raw frames (routes,
/// gateways' MACs); without host discovery, the on-link targets' MACs
/// too, asked before the scan (a stop cuts that short).
async fn resolve_links(cfg: &ScanConfig, stop: &Stop) -> Result<Links> {
    let mut addrs = cfg.space.addrs().clone();
    if let Some(also) = cfg.udp.as_ref().and_then(|u| u.also.as_ref()) {
        addrs = also.addrs().clone();
    }
    let opts = cfg.link.clone();
    // Without host discovery (-Pn) every host is taken as up, and its
    // first probe needs its MAC if it is on-link: all are asked first.
    // With discovery, discovery asks them.
    let ask = cfg.discovery.is_none().then_some(Pace {
        timeout: cfg.timing.timeout,
        initial_timeout: cfg.timing.initial_rtt_timeout,
        retries: cfg.timing.retries,
        max_retries: cfg.timing.retries,
        window: cfg.timing.raw_window,
        max_rate: cfg.timing.max_rate,
        scan_delay: None,
    });
    let stop = stop.clone();
    let resolved = tokio::task::spawn_blocking(move || {
        let mut links = Links::resolve(&addrs, &opts, ARP_TIMEOUT)?;
        if let Some(pace) = ask.filter(|_| !links.loopback) {
            links.ask_neighbours(pace, &|| stop.is_set()).map_err(|e| {
                Error::with_source(ErrorKind::Io, format!("ARP/NDP requests to on-link targets failed: {e}"), e)
            })?;
        }
        Ok::<_, Error>(links)
    })
    .await;
    resolved.map_err(|e| Error::with_source(ErrorKind::Io, format!("route lookup failed: {e}"), e))?
}

/// The probes the scan plans to send (with host discovery alone, the
/// discovery probes; a resumed scan, what it has left).
fn probes_planned(cfg: &ScanConfig, hosts_space: &TargetSpace) -> u64 {
    let also_udp = cfg.udp.as_ref().and_then(|u| u.also.as_ref());
    let ping_only = cfg.discovery.as_ref().is_some_and(|d| d.ping_only);
    if cfg.list_only {
        0
    } else if let (true, Some(d)) = (ping_only, &cfg.discovery) {
        let hosts = match &cfg.resume {
            Some(segs) => {
                segs.iter().map(|s| s.remaining(hosts_space.len())).sum::<u64>() + cfg.resume_hosts.len() as u64
            }
            None => hosts_space.shard_len(cfg.shard),
        };
        hosts * d.probes.len() as u64
    } else {
        let tcp: u64 = match &cfg.resume {
            // Hosts left, each with all its ports.
            Some(segs) if cfg.discovery.is_some() => {
                let hosts: u64 = segs.iter().map(|s| s.remaining(hosts_space.len())).sum();
                (hosts + cfg.resume_hosts.len() as u64) * cfg.space.ports().len() as u64
            }
            Some(segs) => segs.iter().map(|s| s.remaining(cfg.space.len())).sum(),
            None => cfg.space.shard_len(cfg.shard),
        };
        tcp + also_udp.map_or(0, |s| s.shard_len(cfg.shard))
    }
}

/// The scan's `scan_start`: what it covers and how. `by_connect`: a SYN
/// scan goes by connect (no raw paths, or this machine's own addresses).
fn scan_start(
    cfg: &ScanConfig,
    scan_id: ScanId,
    planned: u64,
    by_connect: bool,
    hosts_space: &TargetSpace,
) -> ScanStart {
    let ping_only = cfg.discovery.as_ref().is_some_and(|d| d.ping_only);
    ScanStart {
        scan_id,
        started: SystemTime::now(),
        args: cfg.args.clone(),
        scan_type: match cfg.scan_type {
            ScanType::Syn if by_connect => ScanType::Connect,
            t => t,
        },
        seed: cfg.seed,
        probes_planned: planned,
        settings: ScanSettings {
            ports: if cfg.scan_type == ScanType::Udp || ping_only || cfg.list_only {
                Vec::new()
            } else {
                cfg.space.ports().to_vec()
            },
            udp_ports: match &cfg.udp {
                Some(UdpPlan { also: Some(also), .. }) => also.ports().to_vec(),
                Some(UdpPlan { also: None, .. }) => cfg.space.ports().to_vec(),
                None => Vec::new(),
            },
            service_detection: cfg.detector.is_some(),
            version_intensity: cfg.detector.as_ref().map(|d| d.options().intensity),
            plugins: cfg.plugins.as_ref().map(|p| p.plugins.iter().map(|p| p.name()).collect()).unwrap_or_default(),
            shard: (cfg.shard != Shard::WHOLE).then(|| format!("{}/{}", cfg.shard.k, cfg.shard.n)),
            verbosity: cfg.verbosity,
            hosts: if cfg.discovery.is_some() || cfg.list_only { hosts_space.shard_len(cfg.shard) } else { 0 },
            hostnames: cfg.hostnames.clone(),
            also_by_address: cfg.also_by_address.clone(),
            partial: cfg.resume.is_some() || cfg.host_timeout.is_some(),
        },
    }
}

/// Starts the stages after the port scan, joined by bounded channels:
/// their tasks, and where the port scan's open ports go.
fn start_stages(cfg: &ScanConfig, ctx: &Ctx) -> (Vec<tokio::task::JoinHandle<()>>, Option<Next>) {
    // The stages, joined by bounded channels: discovery -> detection ->
    // plugins (either may be absent). Each ends when its input closes.
    let mut stages = Vec::new();
    let to_plugins = cfg.plugins.as_ref().map(|pc| {
        let (tx, rx) = mpsc::channel::<Arc<Service>>(STAGE_QUEUE);
        // A UDP scan alone has UDP ports in `space`; with TCP, they are `also`'s.
        let (tcp, udp) = match (&cfg.udp, cfg.scan_type) {
            (_, ScanType::Udp) => (None, Some(cfg.space.clone())),
            (Some(UdpPlan { also, .. }), _) => (Some(cfg.space.clone()), also.clone()),
            (None, _) => (Some(cfg.space.clone()), None),
        };
        let guard = crate::plugins::sandbox::guard::Guard::scan(tcp, udp);
        stages.push(tokio::spawn(crate::plugins::stage::run_stage(pc.clone(), guard, rx, ctx.clone())));
        tx
    });
    let next = match (&cfg.detector, to_plugins) {
        (None, None) => None,
        (Some(det), to_plugins) => {
            let (tx, rx) = mpsc::channel::<OpenPort>(STAGE_QUEUE);
            stages.push(tokio::spawn(crate::service::run_stage(det.clone(), rx, to_plugins, ctx.clone())));
            Some(Next::Detection(tx))
        }
        (None, Some(to_plugins)) => Some(Next::Plugins(to_plugins)),
    };
    (stages, next)
}

/// The passive OS hint of each host that sent a SYN-ACK.
async fn emit_hints(ctx: &Ctx) {
    if let Some(hints) = &ctx.hints {
        for (ip, s) in hints.take() {
            let hint = crate::os::passive::hint(s.ttl, s.window, s.mss, &s.order, s.wscale);
            ctx.emit(Event::Os(Box::new(crate::findings::OsEvent::hint(ctx.scan_id.clone(), ip, hint, ctx.t())))).await;
        }
    }
}

/// After the passes: traceroute to the hosts the port scan decided (unless
/// it was cut short), and an error if OS detection and traceroute had to
/// leave hosts out.
async fn trace_hosts(cfg: &ScanConfig, ctx: &Ctx, raw_links: Option<Arc<Links>>, interrupted: bool) {
    // Traceroute once the port scan has decided every host's ports, beside
    // detection and plugins (and OS detection, which streamed).
    if let (Some(seen), false) = (&ctx.os_seen, interrupted) {
        let mut hosts = seen.finish();
        // Without discovery (-Pn), the port scan timed each host.
        if let Some(lat) = &ctx.latency {
            for (ip, s) in hosts.iter_mut().filter(|(_, s)| s.rtt.is_none()) {
                s.rtt = lat.of(*ip).and_then(|l| Duration::try_from_secs_f64(l).ok());
            }
        }
        // The MACs host discovery learned, for on-link hosts.
        let raw_links = raw_links.map(|l| {
            let mut l = (*l).clone();
            for (ip, s) in &hosts {
                if let Some(mac) = s.mac {
                    l.learn(*ip, mac);
                }
            }
            Arc::new(l)
        });
        if cfg.traceroute {
            let ack = cfg.discovery.as_ref().and_then(|d| {
                d.probes.iter().find_map(|p| match p {
                    crate::discovery::ping::PingProbe::Ack(port) => Some(*port),
                    _ => None,
                })
            });
            let wait = cfg.timing.timeout.min(Duration::from_secs(1));
            crate::os::stage::trace(ctx, raw_links, &hosts, ack, wait).await;
        }
    } else if let Some(seen) = &ctx.os_seen {
        seen.close();
    }
    if ctx.os_seen.as_ref().is_some_and(|s| s.capped()) {
        let why = format!(
            "OS detection and traceroute kept {} hosts at most; the others were left out",
            crate::os::seen::Seen::MAX_HOSTS
        );
        let _ = ctx.events.send(ctx.error(None, None, None, crate::error::ErrorKind::Budget, why)).await;
    }
}

/// Sends the counts of ports not shown and `scan_end` with the counters
/// (the stop counts as interrupting even after the last probe: it cut
/// detection or plugins short). Without host discovery (`taken_up`, -Pn),
/// each host that answered on a port first gets its `host` event, up as
/// the user set it (nmap's `user-set`) with its round trip from the port
/// scan: a host whose every port is closed is up and has its report, as
/// in nmap's.
async fn finish(ctx: &Ctx, stats: &Stats, interrupted: bool, taken_up: bool) -> ScanEnd {
    let extra = ctx.unshown.take(&ctx.scan_id);
    let latency = ctx.latency.as_ref().map(|l| l.take()).unwrap_or_default();
    if taken_up {
        let answered: std::collections::BTreeSet<std::net::IpAddr> =
            latency.keys().copied().chain(extra.iter().map(|e| e.ip)).collect();
        for ip in answered {
            let mut host = ping::host_event(ctx, ip, HostState::Up, Reason::UserSet, None);
            host.latency = latency.get(&ip).copied().flatten();
            ctx.emit(Event::Host(host)).await;
        }
    }
    for ev in extra {
        ctx.emit(Event::Extraports(ev)).await;
    }
    // The names of the hosts reported, before the end.
    if let Some(rdns) = &ctx.rdns {
        rdns.finish().await;
    }
    let end = ScanEnd {
        scan_id: ctx.scan_id.clone(),
        elapsed: ctx.t0.elapsed().as_secs_f64(),
        probes_sent: Stats::get(&stats.sent),
        open: Stats::get(&stats.open),
        closed: Stats::get(&stats.closed),
        filtered: Stats::get(&stats.filtered),
        errors: Stats::get(&stats.errors),
        findings: Stats::get(&stats.findings),
        scripts: Stats::get(&stats.scripts),
        hosts_up: Stats::get(&stats.hosts_up),
        hosts_down: Stats::get(&stats.hosts_down),
        interrupted: interrupted || ctx.stop.is_set(),
        unshown_capped: ctx.unshown.capped(),
        slowdowns: Stats::get(&stats.slowdowns),
        slowed: stats.slowed.lock().unwrap_or_else(|p| p.into_inner()).clone(),
    };
    let _ = ctx.events.send(Event::ScanEnd(end.clone())).await;
    end
}

/// `-sL`: every target in address order (nmap's), as a `host` event of
/// unknown state; nothing is sent.
async fn list(hosts: crate::targets::ScanOrder, ctx: &Ctx) -> bool {
    for (ip, _) in hosts {
        if ctx.stop.is_set() {
            return true;
        }
        ctx.emit(Event::Host(ping::host_event(ctx, ip, HostState::Unknown, Reason::UserSet, None))).await;
    }
    false
}

/// One protocol's discovery: the raw engine when there are links, else
/// connect probes (TCP) or UDP sockets.
struct Pass {
    kind: ScanType,
    order: crate::targets::ScanOrder,
    timing: Timing,
    links: Option<Arc<Links>>,
    payloads: Arc<Payloads>,
    key: (u64, u64),
    /// Host discovery first, then each host's ports (`order` then walks hosts).
    hosts: Option<HostScan>,
}

impl Pass {
    /// Runs it; says whether the scan's stop cut it short.
    async fn run(self, cfg: &ScanConfig, ctx: &Ctx, found: Found) -> Result<bool> {
        let Pass { kind, order, timing, links, payloads, key, hosts } = self;
        let Some(links) = links else {
            // One pace for every batch of the pass.
            let pacer = discovery::pacer::Pacer::new(timing.limits(), timing.timeout, std::time::Instant::now());
            let scan = |order, timing: discovery::Timing, found: Found| {
                let (payloads, pacer) = (payloads.clone(), pacer.clone());
                async move {
                    match kind {
                        ScanType::Udp => {
                            discovery::udp::run(order, &timing, cfg.workers, cfg.report_closed, payloads, found).await
                        }
                        _ => {
                            discovery::connect::run(order, &timing, &pacer, cfg.workers, cfg.report_closed, found).await
                        }
                    }
                }
            };
            // Socket passes walk hosts only with discovery (the host timeout is raw scans').
            let Some((h, plan)) = hosts.as_ref().and_then(|h| Some((h, h.plan.clone()?))) else {
                return Ok(scan(order, timing, found).await);
            };
            // Discovery and the port scan side by side: each batch of hosts
            // found up (all that came in while the last batch was scanned)
            // is port-scanned at once. They share the sockets: a quarter for
            // discovery (two connections a host), the rest for ports.
            let ping_window = (timing.window / 4).clamp(1, 256);
            let ports_timing = discovery::Timing { window: (timing.window - ping_window).max(1), ..timing.clone() };
            let (tx, mut rx) = mpsc::channel::<std::net::IpAddr>(4096);
            let progress = order.progress();
            let asking = socket_discovery(order, &plan, h.quiet, &timing, ping_window, ctx, tx);
            let scanning = async {
                let mut interrupted = false;
                while let Some(first) = rx.recv().await {
                    let mut batch = vec![first];
                    while let Ok(ip) = rx.try_recv() {
                        batch.push(ip);
                    }
                    // A batch a stop cut short (or came after it) is scanned
                    // again, whole, by a resumed scan.
                    let unfinished = progress.as_ref().map(|_| batch.clone()).unwrap_or_default();
                    if let Some(order) = hosts_order(batch, &h.ports) {
                        interrupted |= scan(order, ports_timing.clone(), found.clone()).await;
                    }
                    if let (true, Some(p)) = (ctx.stop.is_set(), &progress) {
                        unfinished.into_iter().for_each(|ip| p.redo(ip));
                    }
                }
                interrupted
            };
            let ((), interrupted) = tokio::join!(asking, scanning);
            return Ok(interrupted);
        };
        let opts = SynOptions {
            pace: Pace {
                timeout: timing.timeout,
                initial_timeout: timing.initial_rtt_timeout,
                retries: timing.retries,
                max_retries: timing.max_retries,
                window: timing.raw_window,
                max_rate: timing.max_rate,
                scan_delay: timing.scan_delay,
            },
            report_closed: cfg.report_closed,
            key,
            workers: cfg.workers,
            kind,
            limits: timing.limits(),
        };
        let done =
            tokio::task::spawn_blocking(move || syn::run(order, &links, opts, &payloads, &found, hosts.as_ref())).await;
        match done {
            Ok(Ok(interrupted)) => Ok(interrupted),
            Ok(Err(e)) => {
                let message = format!("raw {} scan failed: {e}", kind.setting());
                ctx.emit(ctx.error(None, None, None, ErrorKind::Io, message)).await;
                Ok(true)
            }
            Err(e) => Err(Error::new(ErrorKind::Io, format!("raw scan thread failed: {e}"))),
        }
    }
}

/// Host discovery without raw sockets: every host of `hosts` (an order of
/// addresses) asked by [`ping::socket_ping`], `window` at a time; each host
/// found up goes to `up` (unless `-sn`) the moment it answers.
async fn socket_discovery(
    hosts: crate::targets::ScanOrder,
    plan: &HostPlan,
    quiet: bool,
    timing: &discovery::Timing,
    window: usize,
    ctx: &Ctx,
    up: mpsc::Sender<std::net::IpAddr>,
) {
    use futures_util::StreamExt;
    let ports = ping::connect_ports(plan);
    // The stop is looked at before a host is taken from the order (a host
    // taken is one a resumed scan will not ask).
    let mut hosts = hosts;
    let asked = futures_util::stream::iter(std::iter::from_fn(move || {
        if ctx.stop.is_set() {
            return None;
        }
        hosts.next().map(|(ip, _)| ip)
    }))
    .map(|ip| {
        let ports = &ports;
        async move { (ip, ping::socket_ping(ip, ports, timing.timeout, timing.retries).await) }
    })
    .buffer_unordered(window);
    futures_util::pin_mut!(asked);
    while let Some((ip, answer)) = asked.next().await {
        if !quiet {
            Stats::bump(if answer.is_some() { &ctx.stats.hosts_up } else { &ctx.stats.hosts_down });
            if answer.is_some() || plan.report_down {
                let state = if answer.is_some() { HostState::Up } else { HostState::Down };
                let reason = answer.map_or(Reason::NoResponse, |a| a.0);
                let mut ev = ping::host_event(ctx, ip, state, reason, None);
                // Zero: an address of this machine no connection timed.
                ev.latency = answer.map(|a| a.1.as_secs_f64()).filter(|&l| l > 0.0);
                ctx.emit(Event::Host(ev)).await;
            }
        }
        if answer.is_some() && !plan.ping_only {
            let _ = up.send(ip).await;
        }
    }
}

/// The port scan's order over `hosts` (found up) and `ports`' ports.
fn hosts_order(hosts: Vec<std::net::IpAddr>, ports: &crate::targets::TargetSpace) -> Option<crate::targets::ScanOrder> {
    let ranges = hosts.into_iter().map(|ip| (crate::targets::addrs::key(ip), crate::targets::addrs::key(ip))).collect();
    let addrs = crate::targets::AddrSet::from_ranges(ranges);
    let none = crate::targets::AddrSet::default();
    let space = crate::targets::TargetSpace::new(&addrs, &none, ports.ports().to_vec()).ok()?;
    Some(space.in_sequence(ports.is_sequential()).order(random_u64(), crate::targets::Shard::WHOLE, 0))
}
