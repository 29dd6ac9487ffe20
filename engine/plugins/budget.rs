//! Budgets of plugin runs: the limits (`Budgets`), the meter the Luau
//! interrupt reads (wall time, steps, a scan's stop), why a run tripped
//! (`Trip`), and the output allowance data leaving the VM is charged to,
//! per run and per scan.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlua::{Lua, Value, VmState};
use serde_json::Value as Json;

use super::value::{to_json, Allowance, ConvertError};
/// Limits for each plugin run (memory: for each VM).
#[derive(Clone, Debug)]
pub struct Budgets {
    /// Wall time of one run (`--script-timeout`).
    pub wall: Duration,
    /// Interrupt steps (loop iterations and calls) of one run.
    pub steps: u64,
    /// Bytes of Lua memory one VM may hold.
    pub memory: usize,
    /// Bytes one run may read from the network.
    pub read_bytes: u64,
    /// Sockets one run may open.
    pub sockets: u32,
    /// Bytes of findings (and returned data) one run may report, counted
    /// as the host copies them out of the VM.
    pub output: u64,
    /// Bytes of findings all the runs of a scan may report together.
    pub scan_output: u64,
}

impl Default for Budgets {
    fn default() -> Budgets {
        Budgets {
            wall: Duration::from_secs(10),
            steps: 50_000_000,
            memory: 64 << 20,
            read_bytes: 4 << 20,
            sockets: 16,
            output: 1 << 20,
            scan_output: 32 << 20,
        }
    }
}

/// Which budget stopped a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trip {
    Wall = 1,
    Steps,
    Memory,
    Read,
    Sockets,
    Output,
    ScanOutput,
    /// The scan was interrupted (Ctrl-C) and the grace for runs in flight passed.
    Stopped,
}

impl Trip {
    pub(super) fn from_u8(v: u8) -> Option<Trip> {
        Some(match v {
            1 => Trip::Wall,
            2 => Trip::Steps,
            3 => Trip::Memory,
            4 => Trip::Read,
            5 => Trip::Sockets,
            6 => Trip::Output,
            7 => Trip::ScanOutput,
            8 => Trip::Stopped,
            _ => return None,
        })
    }

    pub(super) fn describe(self, b: &Budgets) -> String {
        match self {
            Trip::Wall => format!("ran longer than {} ms", b.wall.as_millis()),
            Trip::Steps => format!("ran more than {} steps", b.steps),
            Trip::Memory => format!("needed more than the VM's {} bytes of memory", b.memory),
            Trip::Read => format!("read more than {} bytes", b.read_bytes),
            Trip::Sockets => format!("opened more than {} sockets", b.sockets),
            Trip::Output => format!("reported more than {} bytes of findings", b.output),
            Trip::ScanOutput => format!("reported findings past the scan's {} bytes for all plugins", b.scan_output),
            Trip::Stopped => "stopped: the scan was interrupted".to_string(),
        }
    }
}

/// Budget state of the run in progress, shared with the interrupt.
#[derive(Debug)]
pub(super) struct Meter {
    pub(super) epoch: Instant,
    pub(super) deadline_ns: AtomicU64,
    pub(super) steps: AtomicU64,
    pub(super) max_steps: AtomicU64,
    pub(super) tripped: AtomicU8,
    pub(super) active: AtomicBool,
    /// Set when runs must end at once (Ctrl-C, after a grace).
    pub(super) cut: std::sync::OnceLock<crate::discovery::Stop>,
}

pub(super) const BUDGET_PREFIX: &str = "budget exceeded";

impl Meter {
    pub(super) fn start(&self, wall: Duration, steps: u64) {
        let deadline = self.epoch.elapsed() + wall;
        self.deadline_ns.store(deadline.as_nanos() as u64, Ordering::Relaxed);
        self.steps.store(0, Ordering::Relaxed);
        self.max_steps.store(steps, Ordering::Relaxed);
        self.tripped.store(0, Ordering::Relaxed);
        self.active.store(true, Ordering::Release);
    }

    pub(super) fn stop(&self) {
        self.active.store(false, Ordering::Release);
    }

    /// When the run in progress must end.
    pub(super) fn deadline(&self) -> tokio::time::Instant {
        let at = self.epoch + Duration::from_nanos(self.deadline_ns.load(Ordering::Relaxed));
        tokio::time::Instant::from_std(at)
    }

    pub(super) fn trip(&self, t: Trip) {
        let _ = self.tripped.compare_exchange(0, t as u8, Ordering::AcqRel, Ordering::Relaxed);
    }

    pub(super) fn tripped(&self) -> Option<Trip> {
        Trip::from_u8(self.tripped.load(Ordering::Acquire))
    }

    pub(super) fn interrupt(&self, _lua: &Lua) -> mlua::Result<VmState> {
        if !self.active.load(Ordering::Acquire) {
            return Ok(VmState::Continue);
        }
        if let Some(t) = self.tripped() {
            return Err(budget_error(t));
        }
        // The cut stops Lua code on any thread (a loop inside a coroutine
        // never yields to the host, so only this can end it).
        if self.cut.get().is_some_and(|c| c.is_set()) {
            self.trip(Trip::Stopped);
            return Err(budget_error(Trip::Stopped));
        }
        let n = self.steps.fetch_add(1, Ordering::Relaxed) + 1;
        if n > self.max_steps.load(Ordering::Relaxed) {
            self.trip(Trip::Steps);
            return Err(budget_error(Trip::Steps));
        }
        // Every step: one host call between two steps is bounded (input caps),
        // so a run overshoots its deadline by at most one such call.
        let now = self.epoch.elapsed().as_nanos() as u64;
        if now >= self.deadline_ns.load(Ordering::Relaxed) {
            self.trip(Trip::Wall);
            return Err(budget_error(Trip::Wall));
        }
        // The interrupt never yields: mlua 0.11 lost the wake-up of a
        // socket read now and then after a yield from the interrupt (the
        // run then waited out its read timeout, in about one scan in ten of
        // the lab's -sC ports). A run that computes holds its thread until
        // a budget stops it; the plugin threads are apart from discovery's
        // and detection's, and the cut and the deadline are checked here.
        Ok(VmState::Continue)
    }
}

fn budget_error(t: Trip) -> mlua::Error {
    mlua::Error::runtime(format!("{BUDGET_PREFIX} ({t:?})"))
}
/// Bytes of findings the runs of one scan may still report, shared by
/// every VM of the scan.
#[derive(Clone, Debug)]
pub struct OutputAllowance(Arc<AtomicU64>);

impl OutputAllowance {
    pub fn new(bytes: u64) -> OutputAllowance {
        OutputAllowance(Arc::new(AtomicU64::new(bytes)))
    }

    /// Takes up to `max` bytes (what is left, if less) and says how many.
    fn reserve(&self, max: u64) -> u64 {
        let prev = self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| Some(v - v.min(max)));
        prev.map_or(0, |v| v.min(max))
    }

    /// Gives back bytes reserved and not used.
    fn refund(&self, n: u64) {
        self.0.fetch_add(n, Ordering::AcqRel);
    }
}

/// What the scan's allowance is drawn in, so that runs converting at the
/// same time hold little of it each.
const DRAW_CHUNK: u64 = 16 * 1024;

/// A run's bytes of output, drawn from its own budget and, chunk by chunk,
/// from the scan's; what is drawn and not used goes back when it is dropped.
struct Draw<'a> {
    run_left: &'a mut u64,
    scan: &'a OutputAllowance,
    /// Drawn from the scan, not yet used.
    held: u64,
    /// Used in this draw (given back by [`Draw::undo`]).
    used: u64,
    /// The scan's allowance ran out (rather than the run's).
    scan_short: bool,
    limit: u64,
}

impl<'a> Draw<'a> {
    fn new(run_left: &'a mut u64, scan: &'a OutputAllowance) -> Draw<'a> {
        let limit = *run_left;
        Draw { run_left, scan, held: 0, used: 0, scan_short: false, limit }
    }

    /// Gives back everything this draw used (what was made was dropped).
    fn undo(&mut self) {
        *self.run_left += self.used;
        self.held += self.used;
        self.used = 0;
    }

    /// The budget that ran out, if one did.
    fn trip(&self) -> Trip {
        if self.scan_short {
            Trip::ScanOutput
        } else {
            Trip::Output
        }
    }
}

impl Allowance for Draw<'_> {
    fn take(&mut self, n: u64) -> bool {
        if n > *self.run_left {
            return false;
        }
        while self.held < n {
            let want = (n - self.held).max(DRAW_CHUNK).min(*self.run_left - self.held);
            let got = self.scan.reserve(want);
            if got == 0 {
                self.scan_short = true;
                return false;
            }
            self.held += got;
        }
        self.held -= n;
        self.used += n;
        *self.run_left -= n;
        true
    }

    fn limit(&self) -> u64 {
        self.limit
    }
}

impl Drop for Draw<'_> {
    fn drop(&mut self) {
        self.scan.refund(self.held);
    }
}

/// Converts data leaving the VM within what the run and the scan have left,
/// charging both; past either, the run trips its budget. A conversion that
/// fails costs nothing (what it made is dropped).
pub(super) fn charge_output(
    v: &Value,
    run_left: &mut u64,
    scan: &OutputAllowance,
    meter: &Meter,
) -> std::result::Result<Json, ConvertError> {
    let mut draw = Draw::new(run_left, scan);
    let r = to_json(v, &mut draw);
    if r.is_err() {
        draw.undo();
    }
    if let Err(ConvertError::TooLarge(_)) = &r {
        meter.trip(draw.trip());
    }
    r
}

/// Charges `n` bytes of text (a title, a log line) to the run and the scan;
/// false when either has not got them.
pub(super) fn charge_text(n: u64, run_left: &mut u64, scan: &OutputAllowance) -> Result<(), Trip> {
    let mut draw = Draw::new(run_left, scan);
    if draw.take(n) {
        Ok(())
    } else {
        Err(draw.trip())
    }
}
