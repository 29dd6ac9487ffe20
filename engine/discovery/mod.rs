//! Discovery: which ports are open.
//!
//! In: a [`ScanOrder`](crate::targets::ScanOrder) of `(address, port)` pairs
//! and a [`Timing`]. Out: `port` events for open ports, `error` events for
//! failures, and counters in [`Stats`] for everything else. What always
//! holds: at most `window` probes are outstanding, probes start no faster
//! than `max_rate`, every pair gets an answer or a timeout (with `retries`
//! more tries), and an error on one target never stops the others.

pub mod connect;
pub mod rate;
pub mod syn;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;

pub use rate::TokenBucket;

/// How hard and how patiently to probe.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Most connect probes outstanding at once (each holds a socket).
    pub window: usize,
    /// Most raw (SYN) probes unanswered at once (each holds a few bytes).
    pub raw_window: usize,
    /// How long to wait for an answer to one probe.
    pub timeout: Duration,
    /// Extra tries for a probe that got no answer.
    pub retries: u32,
    /// Most probes started per second; `None` for no limit.
    pub max_rate: Option<f64>,
}

impl Timing {
    /// nmap's `-T0` .. `-T5` templates, adapted to a scanner that streams.
    pub fn template(level: u8) -> Option<Timing> {
        let t = |window: usize, timeout_ms, retries, max_rate| Timing {
            window,
            raw_window: if window <= 16 { window } else { window * 64 },
            timeout: Duration::from_millis(timeout_ms),
            retries,
            max_rate,
        };
        Some(match level {
            0 => t(1, 5_000, 2, Some(1.0 / 300.0)),
            1 => t(1, 5_000, 2, Some(1.0 / 15.0)),
            2 => t(16, 2_000, 2, Some(2.5)),
            3 => t(1_024, 1_500, 2, None),
            4 => t(4_096, 1_000, 1, None),
            5 => t(8_192, 300, 0, None),
            _ => return None,
        })
    }
}

/// Live counters of a scan, readable from another thread (for a progress line).
#[derive(Debug, Default)]
pub struct Stats {
    pub planned: AtomicU64,
    pub sent: AtomicU64,
    pub open: AtomicU64,
    pub closed: AtomicU64,
    pub filtered: AtomicU64,
    pub errors: AtomicU64,
    pub findings: AtomicU64,
}

impl Stats {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The sending half of a stop signal (held by whoever handles Ctrl-C).
#[derive(Debug)]
pub struct StopHandle(watch::Sender<bool>);

/// The receiving half: the scan stops sending new probes once it is set.
#[derive(Clone, Debug)]
pub struct Stop(watch::Receiver<bool>);

/// A new stop signal, not yet set.
pub fn stop_signal() -> (StopHandle, Stop) {
    let (tx, rx) = watch::channel(false);
    (StopHandle(tx), Stop(rx))
}

impl StopHandle {
    pub fn stop(&self) {
        self.0.send_replace(true);
    }
}

impl Stop {
    pub fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the signal is set; never, if the handle is gone unset.
    pub async fn wait(&mut self) {
        if self.0.wait_for(|&v| v).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A rate limiter shared by every probe of a scan.
#[derive(Debug)]
pub struct Limiter(Option<Mutex<TokenBucket>>);

impl Limiter {
    pub fn new(max_rate: Option<f64>) -> Limiter {
        Limiter(max_rate.map(|r| Mutex::new(TokenBucket::new(r, Instant::now()))))
    }

    /// Waits until the next probe may start.
    pub async fn acquire(&self) {
        let Some(bucket) = &self.0 else { return };
        loop {
            let wait = match bucket.lock().unwrap_or_else(|e| e.into_inner()).try_take(Instant::now()) {
                Ok(()) => return,
                Err(wait) => wait,
            };
            tokio::time::sleep(wait).await;
        }
    }
}
