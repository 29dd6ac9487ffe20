//! A running scan, as the library hands it out.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::Built;
use crate::error::{Error, ErrorKind, Result};
use crate::findings::{Event, ScanEnd};
use crate::pipeline::{stop_signal, Stats, StopHandle};

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
