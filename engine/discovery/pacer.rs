//! The one owner of a scan's pace, shared by everything that probes.
//!
//! In: the [`Limits`] a scan keeps to and its probes' first timeout. Out: a
//! [`Pacer`], cloned into every sender thread (raw scans), every probe
//! (socket scans) and OS detection, so the scan as a whole keeps to the
//! rate the path carries. What always holds: the controller is locked for
//! one step at a time, never across a wait; this module imports only the
//! controller (it sits below the pipeline, so what the pipeline holds, such
//! as OS detection's record of the hosts, can keep a pacer).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::control::{Controller, Limits};

/// The one owner of a scan's pace: a [`Controller`] shared by every
/// sender thread (raw scans) and every probe (socket scans) of the scan,
/// so the scan as a whole keeps to the rate the path carries.
#[derive(Clone, Debug)]
pub struct Pacer(Arc<Mutex<Controller>>);

impl Pacer {
    /// A pace within `limits`; `patience` is the probes' first timeout
    /// (how long an epoch's answers are waited for).
    pub fn new(limits: Limits, patience: Duration, now: Instant) -> Pacer {
        Pacer(Arc::new(Mutex::new(Controller::new(limits, patience, now))))
    }

    /// A fixed pace of at most `max_rate` probes a second (none: unpaced).
    pub fn fixed(max_rate: Option<f64>) -> Pacer {
        Pacer::new(Limits::fixed(max_rate), Duration::from_secs(1), Instant::now())
    }

    /// The controller, for one step (never held across a wait).
    pub fn lock(&self) -> MutexGuard<'_, Controller> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the next probe may start (socket scans).
    pub async fn acquire(&self) {
        loop {
            let wait = {
                let mut c = self.lock();
                let now = Instant::now();
                c.poll(now);
                match c.try_take(now) {
                    Ok(()) => return,
                    Err(wait) => wait,
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// Whether a probe sent at `sent` went into a congested path, once the
    /// controller has judged that moment (waits for it, at most `patience`).
    pub async fn congested_at(&self, sent: Instant, patience: Duration) -> bool {
        let give_up = Instant::now() + patience;
        loop {
            let wait = {
                let mut c = self.lock();
                let now = Instant::now();
                c.poll(now);
                if let Some(congested) = c.congested_at(sent) {
                    return congested;
                }
                if now >= give_up {
                    return false;
                }
                c.next_event(now).map_or(give_up, |t| t.min(give_up)).saturating_duration_since(now)
            };
            tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
        }
    }
}

impl From<Controller> for Pacer {
    fn from(c: Controller) -> Pacer {
        Pacer(Arc::new(Mutex::new(c)))
    }
}
