//! Discovery: which ports are open.
//!
//! In: a [`ScanOrder`](crate::targets::ScanOrder) of `(address, port)` pairs
//! and a [`Timing`]. Out: `port` events for open ports, `error` events for
//! failures, and counters in [`Stats`] for everything else. What always
//! holds: at most `window` probes are outstanding, probes start no faster
//! than `max_rate`, every pair gets an answer or a timeout (with `retries`
//! more tries, more on a lossy path, at most `max_retries`), and an error
//! on one target never stops the others.

pub mod connect;
pub mod control;
pub mod gates;
pub mod pacer;
pub mod payloads;
pub mod ping;
pub mod rate;
pub mod syn;
pub mod trace;
pub mod udp;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use control::{Controller, Limits};
pub use rate::TokenBucket;

use crate::pipeline::{Stats, Stop};
use pacer::Pacer;

/// How hard and how patiently to probe.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Most connect probes outstanding at once (each holds a socket).
    pub window: usize,
    /// Most raw (SYN) probes unanswered at once (each holds a few bytes).
    pub raw_window: usize,
    /// How long to wait for an answer to one probe.
    pub timeout: Duration,
    /// Raw scans: the wait before any round trip is known
    /// (`--initial-rtt-timeout`; none: `timeout`).
    pub initial_rtt_timeout: Option<Duration>,
    /// Extra tries for a probe that got no answer, on a path that loses
    /// nothing.
    pub retries: u32,
    /// Most extra tries (`--max-retries`, nmap's template caps): port
    /// scans try more than `retries` when the path loses answers
    /// ([`Controller::retries`]), never more than this.
    pub max_retries: u32,
    /// Most probes started per second; `None` for no limit.
    pub max_rate: Option<f64>,
    /// Fewest probes started per second however congested the path looks
    /// (`--min-rate`; raw scans).
    pub min_rate: Option<f64>,
    /// Where a raw scan's adaptive rate starts (probes/s); `None`: a fixed
    /// pace at `max_rate` (`-T0`..`-T2`, whose rates are the point).
    pub initial_rate: Option<f64>,
    /// Least time between two probes to the same host (`--scan-delay`).
    pub scan_delay: Option<Duration>,
}

impl Timing {
    /// nmap's `-T0` .. `-T5` templates, adapted to a scanner that streams.
    pub fn template(level: u8) -> Option<Timing> {
        let t = |window: usize, timeout_ms, retries, max_rate, initial_rate| Timing {
            window,
            // nmap's caps: 10 up to -T3, 6 for -T4, 2 for -T5.
            max_retries: match level {
                0..=3 => 10,
                4 => 6,
                _ => 2,
            },
            raw_window: if window <= 16 { window } else { window * 64 },
            timeout: Duration::from_millis(timeout_ms),
            initial_rtt_timeout: None,
            retries,
            max_rate,
            min_rate: None,
            initial_rate,
            scan_delay: None,
        };
        // -T3..-T5 start at a rate any path of today carries and find the
        // path's own within a few round trips (discovery::control).
        Some(match level {
            0 => t(1, 5_000, 2, Some(1.0 / 300.0), None),
            1 => t(1, 5_000, 2, Some(1.0 / 15.0), None),
            2 => t(16, 2_000, 2, Some(2.5), None),
            3 => t(1_024, 1_500, 2, None, Some(1_000.0)),
            4 => t(4_096, 1_000, 1, None, Some(2_000.0)),
            5 => t(8_192, 300, 0, None, Some(5_000.0)),
            _ => return None,
        })
    }
}

impl Timing {
    /// The rates a scan's [`Pacer`] keeps to: adaptive from the template's
    /// initial rate (`-T3`..`-T5`), else a fixed pace at `max_rate`.
    pub fn limits(&self) -> Limits {
        match self.initial_rate {
            Some(initial) => Limits { initial, min: self.min_rate, max: self.max_rate, adaptive: true },
            None => Limits::fixed(self.max_rate),
        }
    }
}

/// What a scan last published of its pace.
#[derive(Debug, Default)]
pub(crate) struct PaceTold {
    /// When the last periodic `timing` event went.
    told: Option<Instant>,
}

/// How often a scan tells its pace (a `timing` event).
const PACE_EVERY: Duration = Duration::from_secs(2);

/// Publishes the pace in the scan's counters and gives the events to
/// emit: one per slowdown since the last call (with why; the first one is
/// kept for `scan_end`) and, when `periodic`, the pace every
/// [`PACE_EVERY`].
pub(crate) fn pace_events(
    ctx: &crate::pipeline::Ctx,
    pacer: &Pacer,
    periodic: bool,
    last: &mut PaceTold,
    now: Instant,
) -> Vec<crate::findings::Event> {
    use std::sync::atomic::Ordering;
    let stats = &ctx.stats;
    let (status, notes) = {
        let mut p = pacer.lock();
        (p.status(), p.take_notes())
    };
    stats.rate.store(if status.rate.is_finite() { status.rate.round() as u64 } else { 0 }, Ordering::Relaxed);
    stats.loss_ppm.store((status.loss * 1e6) as u64, Ordering::Relaxed);
    stats.rtt_us.store(status.srtt.map_or(0, |d| d.as_micros() as u64), Ordering::Relaxed);
    let event = |slowdown: Option<String>| {
        crate::findings::Event::Timing(crate::findings::TimingEvent {
            scan_id: ctx.scan_id.clone(),
            rate: Stats::get(&stats.rate) as f64,
            loss: status.loss,
            rtt: status.srtt.map(|d| d.as_secs_f64()),
            slowdown,
            t: ctx.t(),
        })
    };
    let mut events = Vec::new();
    for n in notes {
        let why = control::describe(&n);
        Stats::bump(&stats.slowdowns);
        stats.slowed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(|| why.clone());
        events.push(event(Some(why)));
    }
    if periodic && last.told.is_none_or(|t| now.saturating_duration_since(t) >= PACE_EVERY) {
        if last.told.is_some() {
            events.push(event(None));
        }
        last.told = Some(now);
    }
    events
}

/// What a socket scan's driver does next.
pub(crate) enum Slot {
    /// Probe this pair now, holding this window permit until it is done.
    Probe((IpAddr, u16), tokio::sync::OwnedSemaphorePermit),
    /// The order is done.
    Done,
    /// The scan's stop is set.
    Stopped,
}

/// The next pair of `order` once the window has room and the rate allows.
/// A pair is taken from the order only when it can be probed at once, so a
/// stop never drops a pair that was taken but not probed (the order's
/// progress is what a resumed scan starts from).
pub(crate) async fn next_slot(
    order: &mut crate::targets::ScanOrder,
    window: &std::sync::Arc<tokio::sync::Semaphore>,
    pacer: &Pacer,
    stop: &mut Stop,
) -> Slot {
    if stop.is_set() {
        return Slot::Stopped;
    }
    let permit = match window.clone().try_acquire_owned() {
        Ok(p) => p,
        Err(_) => tokio::select! {
            biased;
            _ = stop.wait() => return Slot::Stopped,
            p = window.clone().acquire_owned() => p.expect("semaphore never closed"),
        },
    };
    tokio::select! {
        biased;
        _ = stop.wait() => return Slot::Stopped,
        _ = pacer.acquire() => {}
    }
    match order.next() {
        Some(pair) => Slot::Probe(pair, permit),
        None => Slot::Done,
    }
}

/// Runs `drive` on each of `workers` shares of `order` as tasks, waits for
/// them, then for every probe still out (all `permits` of `window` back).
/// Returns true if a stop cut any share short. The socket scans' common end.
pub(crate) async fn drive_shares<F, Fut>(
    order: crate::targets::ScanOrder,
    workers: usize,
    window: &tokio::sync::Semaphore,
    permits: usize,
    drive: F,
) -> bool
where
    F: Fn(crate::targets::ScanOrder) -> Fut,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    let drivers: Vec<_> =
        order.split(workers.max(1) as u64).into_iter().map(|part| tokio::spawn(drive(part))).collect();
    let mut interrupted = false;
    for d in drivers {
        interrupted |= d.await.unwrap_or(true);
    }
    // Every permit back means every probe done.
    let _all = window.acquire_many(permits as u32).await;
    interrupted
}

/// Per-host turns under a scan delay (`--scan-delay`), for the socket
/// scans: each host is probed at most once every `delay`.
#[derive(Debug, Default)]
pub struct Turns {
    delay: Option<Duration>,
    next: Mutex<HashMap<IpAddr, tokio::time::Instant>>,
}

impl Turns {
    pub fn new(delay: Option<Duration>) -> Turns {
        Turns { delay, next: Mutex::default() }
    }

    /// Waits for `ip`'s turn (at once without a delay): each call reserves
    /// the host's next turn, `delay` after the last.
    pub async fn wait(&self, ip: IpAddr) {
        let Some(delay) = self.delay else { return };
        let now = tokio::time::Instant::now();
        let at = {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            if next.len() > 4096 {
                next.retain(|_, t| *t > now);
            }
            let at = next.get(&ip).copied().filter(|&t| t > now).unwrap_or(now);
            next.insert(ip, at + delay);
            at
        };
        tokio::time::sleep_until(at).await;
    }
}
