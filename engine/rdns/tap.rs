//! Reverse DNS's tap: where the scan's events tell it which hosts to name,
//! and where plugins wait for a host's name.
//!
//! In: every event a stage emits ([`Tap::saw`], called by the pipeline's
//! `Ctx`). Out: the addresses to look up, on a channel to the lookups'
//! task (`rdns::start` makes both), and each name once learnt
//! ([`Tap::name_of`]). What always holds: noting an address never waits
//! (a set and an unbounded channel, at most [`MAX_ADDRESSES`] addresses a
//! scan), a wait for a name lasts at most [`LOOKUP_TIME`] past its lookup's
//! start, and this module imports nothing of the crate but the events
//! ([`crate::findings`]): the pipeline holds a tap without a cycle back.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::findings::{Event, HostState};

/// Most addresses looked up in one scan (a sweep's every live host of a /16).
pub const MAX_ADDRESSES: usize = 1 << 16;
/// Longest one lookup may take (two tries of a second, and their sending).
pub const LOOKUP_TIME: Duration = Duration::from_millis(2500);

/// Where one address's lookup stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Lookup {
    /// Asked of the resolver at this moment.
    Running(tokio::time::Instant),
    /// Its name, or `None` (no name, no answer).
    Done(Option<String>),
}

/// What the lookups learnt, for those who wait on a host's name.
#[derive(Debug, Default)]
pub(super) struct Learnt {
    pub(super) names: Mutex<HashMap<IpAddr, Lookup>>,
    /// The lookups are over (no more names will come).
    pub(super) over: AtomicBool,
    pub(super) changed: tokio::sync::Notify,
}

impl Learnt {
    pub(super) fn note(&self, ip: IpAddr, state: Lookup) {
        self.names.lock().unwrap_or_else(|e| e.into_inner()).insert(ip, state);
        self.changed.notify_waiters();
    }
}

/// Where the scan's events tell reverse DNS which hosts to name.
#[derive(Debug)]
pub struct Tap {
    pub(super) learnt: Arc<Learnt>,
    pub(super) seen: Mutex<HashSet<IpAddr>>,
    pub(super) to_lookups: Mutex<Option<mpsc::UnboundedSender<IpAddr>>>,
    pub(super) lookups: Mutex<Option<tokio::task::JoinHandle<()>>>,
    pub(super) full: AtomicBool,
}

impl Tap {
    /// Notes the host an event is about, when the report will show it.
    pub fn saw(&self, ev: &Event) {
        let ip = match ev {
            Event::Host(h) if h.state == HostState::Up => h.ip,
            Event::Port(p) => p.ip,
            Event::Extraports(e) => e.ip,
            _ => return,
        };
        self.ask(ip);
    }

    fn ask(&self, ip: IpAddr) {
        if self.full.load(Ordering::Relaxed) {
            return;
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= MAX_ADDRESSES {
            self.full.store(true, Ordering::Relaxed);
            return;
        }
        if seen.insert(ip) {
            if let Some(tx) = &*self.to_lookups.lock().unwrap_or_else(|e| e.into_inner()) {
                let _ = tx.send(ip);
            }
        }
    }

    /// The name of `ip`: at once when its lookup is done, or not running
    /// (never asked, or still queued behind others: a plugin never waits
    /// for a lookup to start); while it runs, once it ends (at most
    /// [`LOOKUP_TIME`] after it began).
    pub async fn name_of(&self, ip: IpAddr) -> Option<String> {
        loop {
            let changed = self.learnt.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let state = self.learnt.names.lock().unwrap_or_else(|e| e.into_inner()).get(&ip).cloned();
            let until = match state {
                Some(Lookup::Done(name)) => return name,
                Some(Lookup::Running(since)) => since + LOOKUP_TIME,
                None => return None,
            };
            if self.learnt.over.load(Ordering::Relaxed) || tokio::time::timeout_at(until, changed).await.is_err() {
                return None;
            }
        }
    }

    /// Ends the lookups: no address is taken after this, the pending ones
    /// get at most the lookups' grace (`rdns::GRACE`), and their names are sent before it returns.
    pub async fn finish(&self) {
        self.to_lookups.lock().unwrap_or_else(|e| e.into_inner()).take();
        let task = self.lookups.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}
