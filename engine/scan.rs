//! One scan, start to end: the pipeline driver.
//!
//! In: a validated [`ScanConfig`] (the engine never parses flags), an event
//! channel, shared [`Stats`] and a [`Stop`] signal. Out: a `scan_start`
//! event, the stages' events as they happen, and a `scan_end` event, which
//! is also returned. What always holds: events stream as they are found
//! (nothing waits for a phase to end), and a stopped scan still ends with
//! `scan_end` after its outstanding probes are answered or timed out.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use tokio::sync::mpsc;

use crate::discovery::syn::{self, LinkOptions, Links, Pace, SynOptions};
use crate::discovery::{self, Stats, Stop, Timing};
use crate::error::{Error, ErrorKind, Result};
use crate::findings::{Event, ScanEnd, ScanStart, ScanType};
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
    /// Where the scan order has got to, kept up to date while the scan runs
    /// (what a resume file records).
    pub progress: Arc<Progress>,
    /// The command line, recorded in `scan_start`.
    pub args: Vec<String>,
    /// Report closed ports as events too (they are always counted).
    pub report_closed: bool,
    /// `-e` and `-S` for raw scans.
    pub link: LinkOptions,
    /// Service detection (`-sV`) on every open port, as it is found.
    pub detector: Option<crate::service::Detector>,
    /// Plugins (`--script`) on every open port, after service detection if any.
    pub plugins: Option<Arc<crate::plugins::stage::PluginConfig>>,
}

/// How long to wait for ARP/NDP answers before a raw scan.
const ARP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Random bytes; an unreadable random source only makes them less random.
fn random_u64() -> u64 {
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
pub async fn run(cfg: &ScanConfig, events: mpsc::Sender<Event>, stats: Arc<Stats>, stop: Stop) -> Result<ScanEnd> {
    let links = match cfg.scan_type {
        ScanType::Syn => {
            let (addrs, opts) = (cfg.space.addrs().clone(), cfg.link.clone());
            let resolved = tokio::task::spawn_blocking(move || Links::resolve(&addrs, &opts, ARP_TIMEOUT)).await;
            Some(resolved.map_err(|e| Error::new(ErrorKind::Io, format!("route lookup failed: {e}")))??)
        }
        ScanType::Connect => None,
    };
    let scan_id = new_scan_id();
    let planned = match &cfg.resume {
        Some(segs) => segs.iter().map(|s| s.remaining(cfg.space.len())).sum(),
        None => cfg.space.shard_len(cfg.shard),
    };
    stats.planned.store(planned, std::sync::atomic::Ordering::Relaxed);
    let start = ScanStart {
        scan_id: scan_id.clone(),
        started: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
        args: cfg.args.clone(),
        scan_type: if links.as_ref().is_some_and(|l| !l.loopback) { ScanType::Syn } else { ScanType::Connect },
        seed: cfg.seed,
        probes_planned: planned,
    };
    let _ = events.send(Event::ScanStart(start)).await;

    if let Some(l) = &links {
        for (ip, why) in l.unreachable() {
            Stats::bump(&stats.errors);
            let ev = crate::findings::ErrorEvent {
                ip: Some(ip),
                port: None,
                plugin: None,
                kind: crate::findings::ErrorKind::Io,
                message: format!("cannot reach {ip}: {why}"),
            };
            let _ = events.send(Event::Error(ev)).await;
        }
    }
    let t0 = Instant::now();
    // With -sV, discovery's events pass through a tap that hands each open
    // port to service detection the moment it is found.
    let (final_events, events) = (events.clone(), events);
    let mut stages = Vec::new();
    let plugin_tx = match &cfg.plugins {
        None => None,
        Some(pc) => {
            let (tx, rx) = mpsc::channel::<crate::plugins::PortInfo>(1024);
            let guard = crate::plugins::net::Guard::scan(cfg.space.clone());
            let (ev, st) = (events.clone(), stats.clone());
            stages.push(tokio::spawn(crate::plugins::stage::run_stage(
                pc.clone(),
                guard,
                rx,
                ev,
                t0,
                st,
                stop.clone(),
            )));
            Some(tx)
        }
    };
    let events = if cfg.detector.is_none() && plugin_tx.is_none() {
        events
    } else {
        let (tap_tx, mut tap_rx) = mpsc::channel::<Event>(4096);
        let (port_tx, port_rx) = mpsc::unbounded_channel();
        let out = events.clone();
        let direct = if cfg.detector.is_none() { plugin_tx.clone() } else { None };
        stages.insert(
            0,
            tokio::spawn(async move {
                while let Some(ev) = tap_rx.recv().await {
                    if let Event::Port(p) = &ev {
                        if p.state == crate::findings::PortState::Open && p.proto == "tcp" {
                            match &direct {
                                Some(tx) => {
                                    let _ = out.send(ev.clone()).await;
                                    let _ = tx.send(crate::plugins::PortInfo::bare(p.ip, p.port)).await;
                                    continue;
                                }
                                None => {
                                    let _ = port_tx.send((p.ip, p.port));
                                }
                            }
                        }
                    }
                    let _ = out.send(ev).await;
                }
            }),
        );
        if let Some(det) = &cfg.detector {
            let (ev, st) = (events.clone(), stats.clone());
            let to_plugins = plugin_tx.clone();
            stages.insert(1, tokio::spawn(crate::service::run_stage(det.clone(), port_rx, ev, to_plugins, t0, st)));
        }
        tap_tx
    };
    // Stages end in order: each one's input closes when the one before ends.
    drop(plugin_tx);
    let order = match &cfg.resume {
        Some(segs) => cfg.space.order_from(cfg.seed, segs.clone()),
        None => cfg.space.order(cfg.seed, cfg.shard, 0),
    }
    .tracked(&cfg.progress);
    // Raw frames cannot reach this machine's own addresses through loopback.
    let links = links.filter(|l| !l.loopback);
    let interrupted = match links {
        None => {
            discovery::connect::run(order, &cfg.timing, cfg.workers, cfg.report_closed, t0, &events, &stats, &stop)
                .await
        }
        Some(links) => {
            let opts = SynOptions {
                pace: Pace {
                    timeout: cfg.timing.timeout,
                    retries: cfg.timing.retries,
                    window: cfg.timing.raw_window,
                    max_rate: cfg.timing.max_rate,
                },
                report_closed: cfg.report_closed,
                key: (random_u64(), random_u64()),
                workers: cfg.workers,
            };
            let (ev, st, sp) = (events.clone(), stats.clone(), stop.clone());
            let done = tokio::task::spawn_blocking(move || syn::run(order, &links, opts, t0, &ev, &st, &sp)).await;
            match done {
                Ok(Ok(interrupted)) => interrupted,
                Ok(Err(e)) => {
                    Stats::bump(&stats.errors);
                    let ev = crate::findings::ErrorEvent {
                        ip: None,
                        port: None,
                        plugin: None,
                        kind: crate::findings::ErrorKind::Io,
                        message: format!("raw scan failed: {e}"),
                    };
                    let _ = events.send(Event::Error(ev)).await;
                    true
                }
                Err(e) => return Err(Error::new(ErrorKind::Io, format!("raw scan thread failed: {e}"))),
            }
        }
    };
    drop(events);
    for stage in stages {
        let _ = stage.await;
    }
    // A stop after the last probe still cut detection or plugins short.
    let interrupted = interrupted || stop.is_set();

    let end = ScanEnd {
        scan_id,
        elapsed: t0.elapsed().as_secs_f64(),
        probes_sent: Stats::get(&stats.sent),
        open: Stats::get(&stats.open),
        closed: Stats::get(&stats.closed),
        filtered: Stats::get(&stats.filtered),
        errors: Stats::get(&stats.errors),
        findings: Stats::get(&stats.findings),
        interrupted,
    };
    let _ = final_events.send(Event::ScanEnd(end.clone())).await;
    Ok(end)
}
