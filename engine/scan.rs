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

use crate::discovery::{self, Stats, Stop, Timing};
use crate::findings::{Event, ScanEnd, ScanStart, ScanType};
use crate::targets::{Shard, TargetSpace};

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
    /// Position within the shard to start at (0 unless resuming).
    pub start: u64,
    /// The command line, recorded in `scan_start`.
    pub args: Vec<String>,
}

/// A random identifier for a scan.
pub fn new_scan_id() -> String {
    let mut b = [0u8; 8];
    // An unreadable random source only makes ids less unique; fall back to time.
    if getrandom::fill(&mut b).is_err() {
        let ns = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        b = (ns as u64).to_le_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Runs the scan and returns its summary (also sent as `scan_end`).
pub async fn run(cfg: &ScanConfig, events: mpsc::Sender<Event>, stats: Arc<Stats>, stop: Stop) -> ScanEnd {
    let scan_id = new_scan_id();
    let planned = cfg.space.shard_len(cfg.shard).saturating_sub(cfg.start);
    stats.planned.store(planned, std::sync::atomic::Ordering::Relaxed);
    let start = ScanStart {
        scan_id: scan_id.clone(),
        started: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
        args: cfg.args.clone(),
        scan_type: cfg.scan_type,
        seed: cfg.seed,
        probes_planned: planned,
    };
    let _ = events.send(Event::ScanStart(start)).await;

    let t0 = Instant::now();
    let order = cfg.space.order(cfg.seed, cfg.shard, cfg.start);
    let interrupted = match cfg.scan_type {
        ScanType::Connect => discovery::connect::run(order, &cfg.timing, cfg.workers, t0, &events, &stats, &stop).await,
    };

    let end = ScanEnd {
        scan_id,
        elapsed: t0.elapsed().as_secs_f64(),
        probes_sent: Stats::get(&stats.sent),
        open: Stats::get(&stats.open),
        closed: Stats::get(&stats.closed),
        filtered: Stats::get(&stats.filtered),
        errors: Stats::get(&stats.errors),
        findings: 0,
        interrupted,
    };
    let _ = events.send(Event::ScanEnd(end.clone())).await;
    end
}
