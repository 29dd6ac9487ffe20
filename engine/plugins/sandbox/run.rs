//! One plugin run and what bounds it: the limits (`Budgets`), the meter
//! the Luau interrupt reads (wall time, steps, a scan's stop), why a run
//! tripped (`Trip`), the output allowance data leaving the VM is charged
//! to (per run and per scan), and the run itself (`Run`): the port it is
//! for, what it found, logged and was refused, the sockets it opened, and
//! every charge against its budgets.
//!
//! In: a VM's [`Scope`] (shared by its runs, one at a time) and one port.
//! Out: the run's [`RunOutput`]. What always holds: every socket a run
//! opens passes [`Run::admit`] (the guard and the socket budget) or,
//! replayed, [`Run::aim`] (the budget, no network) and closes when the run
//! ends; every byte read is charged ([`Run::charge`]) before the plugin
//! sees it, every byte a plugin sends ([`Run::charge_send`]) before it
//! goes, and datagrams are paced ([`Run::pace_datagram`]); every list a plugin can grow (findings, logs, refusals) is
//! capped; once the run has ended, its `ctx` and sockets refuse every call.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use mlua::{Lua, MultiValue, Value, VmState};
use serde_json::Value as Json;

use super::builtins::PatternCache;
use super::guard::{self, ConnectRequest, Guard, SharedSocket, Socket, TlsOptions, Transport};
use super::tape::Tape;
use super::value::{to_json, Allowance, ConvertError};
use crate::error::{Error, ErrorKind};
use crate::findings::{About, Service, Severity};

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
    /// Bytes one run may send (TCP and UDP together; datagrams also
    /// within the 256 KiB of `MAX_DATAGRAM_BYTES`).
    pub send_bytes: u64,
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
            send_bytes: 4 << 20,
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
    Send,
    /// More bytes of datagrams than [`MAX_DATAGRAM_BYTES`].
    Datagrams,
}

/// Bytes of datagrams one run may send: a plugin asks a UDP service a few
/// questions (a DNS, SNMP or NTP query is under 100 bytes; 178 datagrams of
/// the largest size fit), it does not send bulk.
pub const MAX_DATAGRAM_BYTES: u64 = 256 << 10;

/// Datagrams a run sends at once before pacing starts, then how many a
/// second: a run that waits for each answer never waits for the pace.
pub const DATAGRAM_BURST: u32 = 16;
pub const DATAGRAMS_PER_SECOND: u32 = 100;

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
            9 => Trip::Send,
            10 => Trip::Datagrams,
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
            Trip::Output => format!("reported more than {} bytes of findings and results", b.output),
            Trip::ScanOutput => {
                format!("reported findings and results past the scan's {} bytes for all plugins", b.scan_output)
            }
            Trip::Stopped => "stopped: the scan was interrupted".to_string(),
            Trip::Send => format!("sent more than {} bytes", b.send_bytes),
            Trip::Datagrams => format!("sent more than {MAX_DATAGRAM_BYTES} bytes of datagrams"),
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
    pub(super) cut: std::sync::OnceLock<crate::pipeline::Stop>,
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
fn charge_output(
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
fn charge_text(n: u64, run_left: &mut u64, scan: &OutputAllowance) -> Result<(), Trip> {
    let mut draw = Draw::new(run_left, scan);
    if draw.take(n) {
        Ok(())
    } else {
        Err(draw.trip())
    }
}

/// One finding a run reported.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub severity: Severity,
    pub title: String,
    pub data: Json,
    /// Set on the run's script result (what `run` returned, titled with
    /// the plugin's id): its output text. It leaves the stage as a
    /// [`crate::findings::ScriptEvent`], never as a finding.
    pub output: Option<String>,
    /// What this finding is about, given with it.
    pub about: About,
}

/// What one plugin run produced.
#[derive(Clone, Debug, Default)]
pub struct RunOutput {
    pub findings: Vec<Finding>,
    pub logs: Vec<String>,
    /// Connections the guard refused (each an error event of kind `sandbox`).
    pub refused: Vec<String>,
    /// Why the run stopped short, if it did.
    pub error: Option<RunError>,
    /// What a version plugin learned of the port's service (`ctx:set_service`):
    /// the port's identity with the fields it set. It leaves the stage as
    /// a second `service` event of the port, which supersedes the first.
    pub service: Option<crate::findings::Identity>,
}

/// Why a plugin did not run, or stopped short: a portrule that failed, a
/// budget tripped, an error raised, a result that is not data. It leaves
/// the stage as an `error` event of the plugin's port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunError {
    pub kind: ErrorKind,
    pub message: String,
}

impl RunError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> RunError {
        RunError { kind, message: message.into() }
    }
}

/// Most findings one run may report.
const MAX_FINDINGS: usize = 64;
/// Most log lines one run may report, and the longest kept.
const MAX_LOGS: usize = 64;
const MAX_LOG_LINE: usize = 1000;
/// Longest finding title kept.
const MAX_TITLE: usize = 300;
/// Most refusals one run reports (each also counts against its socket budget).
const MAX_REFUSALS: usize = 16;

/// What the runs of one VM share: the meter, the budgets, the scan's guard
/// and output allowance, the VM's compiled patterns, and the tape.
pub(super) struct Scope {
    pub(super) meter: Arc<Meter>,
    pub(super) budgets: Budgets,
    pub(super) guard: Guard,
    pub(super) scan_output: OutputAllowance,
    /// The VM's compiled patterns (`re.*`, `recv_until`).
    pub(super) patterns: Arc<PatternCache>,
    /// The runs' conversations, when `plugins test` records or replays them.
    pub(super) tape: OnceLock<Arc<Tape>>,
    /// The User-Agent of `ctx.http` (`--script-args http.useragent=...`).
    pub(super) user_agent: Option<String>,
    /// The name every TLS handshake of a plugin sends in SNI, over the
    /// host's own (`--script-args tls.servername=...`, as nmap's).
    pub(super) servername: Option<String>,
}

/// A socket a run opened, closed when the run ends (a call in flight on it
/// keeps it until that call returns).
pub(super) trait Closer: Send + Sync {
    fn close_now(&self);
}

impl Closer for tokio::sync::Mutex<Socket> {
    fn close_now(&self) {
        if let Ok(mut s) = self.try_lock() {
            s.conn = None;
        }
    }
}

/// What a run has used and reported so far.
struct State {
    /// Sockets asked for, refused ones too.
    sockets: u32,
    /// `ctx:tls_enum` calls (one per run).
    tls_enums: u32,
    read: u64,
    /// Bytes sent, and of them in datagrams.
    sent: u64,
    sent_datagrams: u64,
    /// When the next datagram is due at the pace (GCRA's theoretical
    /// arrival time; a burst may come before it).
    datagram_due: Option<std::time::Instant>,
    /// Bytes of findings and logs this run may still report.
    output_left: u64,
    out: RunOutput,
    open: Vec<Arc<dyn Closer>>,
    /// The run has ended: its `ctx` and sockets refuse every call.
    ended: bool,
}

/// One plugin run on one port.
pub(super) struct Run {
    pub(super) scope: Arc<Scope>,
    pub(super) info: Arc<Service>,
    /// The plugin is of the `version` category: it may set the port's
    /// service (`ctx:set_service`), as nmap's version scripts do.
    pub(super) renames: bool,
    state: Mutex<State>,
}

impl Run {
    pub(super) fn new(scope: Arc<Scope>, info: Arc<Service>) -> Run {
        let state = State {
            sockets: 0,
            tls_enums: 0,
            read: 0,
            sent: 0,
            sent_datagrams: 0,
            datagram_due: None,
            output_left: scope.budgets.output,
            out: RunOutput::default(),
            open: Vec::new(),
            ended: false,
        };
        Run { scope, info, renames: false, state: Mutex::new(state) }
    }

    /// A run of a plugin that may (or may not) set the port's service.
    pub(super) fn renaming(mut self, renames: bool) -> Run {
        self.renames = renames;
        self
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> mlua::Result<R> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.ended {
            return Err(mlua::Error::runtime("ctx used outside of a plugin run"));
        }
        Ok(f(&mut st))
    }

    /// When the run must end.
    pub(super) fn deadline(&self) -> tokio::time::Instant {
        self.scope.meter.deadline()
    }

    /// The tape, when `plugins test` records or replays.
    pub(super) fn tape(&self) -> Option<&Arc<Tape>> {
        self.scope.tape.get()
    }

    /// The tape, when it replays.
    pub(super) fn replay(&self) -> Option<&Arc<Tape>> {
        self.tape().filter(|t| t.replaying())
    }

    /// Ends the run: closes its sockets, and hands over what it reported.
    pub(super) fn end(&self) -> RunOutput {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.ended = true;
        for s in st.open.drain(..) {
            s.close_now();
        }
        std::mem::take(&mut st.out)
    }

    // ---- the read budget ----

    /// Charges `n` bytes read to the run; false once the budget is spent.
    pub(super) fn charge(&self, n: usize) -> bool {
        let max = self.scope.budgets.read_bytes;
        let over = self
            .with(|st| {
                st.read = st.read.saturating_add(n as u64);
                st.read > max
            })
            .unwrap_or(true);
        if over {
            self.scope.meter.trip(Trip::Read);
        }
        !over
    }

    /// Bytes the run may still read.
    pub(super) fn read_left(&self) -> mlua::Result<u64> {
        self.with(|st| self.scope.budgets.read_bytes.saturating_sub(st.read))
    }

    /// The error of a run past its read budget.
    pub(super) fn over_read(&self) -> Error {
        Error::new(
            ErrorKind::Budget,
            format!("{BUDGET_PREFIX}: read more than {} bytes", self.scope.budgets.read_bytes),
        )
    }

    // ---- the send budget and the datagram pace ----

    /// Charges `n` bytes about to be sent (`datagram`: in one datagram) to
    /// the run: the error of a run past its send budget, or past
    /// [`MAX_DATAGRAM_BYTES`] (the meter trips, as for reads: the run ends
    /// at its next step; nothing is sent).
    pub(super) fn charge_send(&self, n: usize, datagram: bool) -> crate::error::Result<()> {
        let max = self.scope.budgets.send_bytes;
        let over = self
            .with(|st| {
                st.sent = st.sent.saturating_add(n as u64);
                if datagram {
                    st.sent_datagrams = st.sent_datagrams.saturating_add(n as u64);
                }
                if st.sent > max {
                    Some(Trip::Send)
                } else if st.sent_datagrams > MAX_DATAGRAM_BYTES {
                    Some(Trip::Datagrams)
                } else {
                    None
                }
            })
            .unwrap_or(Some(Trip::Send));
        match over {
            None => Ok(()),
            Some(t) => {
                self.scope.meter.trip(t);
                Err(Error::new(ErrorKind::Budget, format!("{BUDGET_PREFIX}: {}", t.describe(&self.scope.budgets))))
            }
        }
    }

    /// Waits for the next datagram's turn: [`DATAGRAM_BURST`] at once, then
    /// [`DATAGRAMS_PER_SECOND`] (the run's deadline still ends the wait).
    pub(super) async fn pace_datagram(&self) -> mlua::Result<()> {
        let wait = self.with(|st| {
            let gap = Duration::from_secs(1) / DATAGRAMS_PER_SECOND;
            let now = std::time::Instant::now();
            let due = st.datagram_due.map_or(now, |d| d.max(now));
            st.datagram_due = Some(due + gap);
            // Up to a burst's worth may go before its time.
            let earliest = due.checked_sub(gap * (DATAGRAM_BURST - 1)).unwrap_or(now);
            earliest.saturating_duration_since(now)
        })?;
        if !wait.is_zero() {
            tokio::time::sleep_until((tokio::time::Instant::now() + wait).min(self.deadline())).await;
        }
        Ok(())
    }

    /// True for the run's first `ctx:tls_enum`, false after.
    pub(super) fn first_tls_enum(&self) -> mlua::Result<bool> {
        self.with(|st| {
            st.tls_enums += 1;
            st.tls_enums == 1
        })
    }

    // ---- sockets: the guard and the socket budget ----

    /// Where a socket may go: the address and port asked for, if the guard
    /// allows them over `transport` and the socket budget has one more.
    pub(super) fn admit(&self, req: &ConnectRequest, transport: Transport) -> crate::error::Result<(IpAddr, u16)> {
        if self.replay().is_some() {
            return Err(Error::new(
                ErrorKind::Sandbox,
                "not replayed: a replay has the sockets of ctx:connect, ctx.http and ctx:udp only, not the \
                 host's own protocol helpers (ctx.ssh, ctx:tls_enum, ctx:server_hello, ctx:ssh_auth_methods)",
            ));
        }
        let (ip, port) = self.aim(req)?;
        if let Err(why) = self.scope.guard.check(self.info.ip, ip, port, transport) {
            let what = if transport == Transport::Udp { "datagrams to" } else { "connect to" };
            return Err(self.refuse(why.context(format!("{what} {ip}:{port} refused"))));
        }
        Ok((ip, port))
    }

    /// The address and port a request asks for (an address, never a name),
    /// counted against the socket budget.
    pub(super) fn aim(&self, req: &ConnectRequest) -> crate::error::Result<(IpAddr, u16)> {
        let ip: IpAddr = match &req.host {
            None => self.info.ip,
            Some(h) => h.parse().map_err(|_| {
                self.refuse(Error::new(
                    ErrorKind::Sandbox,
                    format!("{h:?} is a name; plugins connect to addresses only, and only to the host being scanned"),
                ))
            })?,
        };
        let port = req.port.unwrap_or(self.info.port);
        // Every attempt counts, refused ones too: a plugin cannot knock forever.
        let max = self.scope.budgets.sockets;
        let over = self
            .with(|st| {
                st.sockets += 1;
                st.sockets > max
            })
            .map_err(no_run)?;
        if over {
            self.scope.meter.trip(Trip::Sockets);
            return Err(Error::new(ErrorKind::Budget, format!("{BUDGET_PREFIX}: more than {max} sockets")));
        }
        Ok((ip, port))
    }

    /// The name the user gave for `ip` when it is the host being scanned
    /// (what its TLS handshakes send in SNI).
    pub(super) fn name_for(&self, ip: IpAddr) -> Option<String> {
        (ip == self.info.ip).then(|| self.info.targetname.clone()).flatten()
    }

    /// What HTTP requests to `ip` name in `Host:`: the name the user gave,
    /// else the address's reverse DNS name (nmap's `stdnse.get_hostname`).
    pub(super) fn http_name_for(&self, ip: IpAddr) -> Option<String> {
        self.name_for(ip).or_else(|| (ip == self.info.ip).then(|| self.info.rdns.clone()).flatten())
    }

    /// The name a TLS handshake to `ip` sends in SNI: `tls.servername` if
    /// given, else [`Run::name_for`] (never a reverse DNS name, as nmap's
    /// `tls.servername`).
    pub(super) fn sni_for(&self, ip: IpAddr) -> Option<String> {
        (ip == self.info.ip).then(|| self.scope.servername.clone()).flatten().or_else(|| self.name_for(ip))
    }

    /// Records a connection the guard refused and returns its error.
    fn refuse(&self, why: Error) -> Error {
        let _ = self.with(|st| {
            if st.out.refused.len() < MAX_REFUSALS {
                st.out.refused.push(why.to_string());
            }
        });
        why
    }

    /// Keeps `s` to close it when the run ends.
    pub(super) fn keep(&self, s: Arc<dyn Closer>) -> crate::error::Result<()> {
        self.with(|st| st.open.push(s)).map_err(no_run)
    }

    /// A TCP connection for the host's own protocol helpers: guard, socket
    /// budget, deadline (its bytes are not on the tape: see
    /// [`Run::open_taped`]).
    pub(super) async fn open(&self, req: &ConnectRequest) -> crate::error::Result<SharedSocket> {
        let (ip, port) = self.admit(req, Transport::Tcp)?;
        let until = tokio::time::Instant::now() + req.timeout;
        let tls = req.tls.clone().map(|t| TlsOptions { sni: t.sni.or_else(|| self.sni_for(ip)), ..t });
        let (conn, tls) = guard::open(ip, port, tls.as_ref(), until).await?;
        self.kept(Socket { conn: Some(conn), pending: Vec::new(), timeout: req.timeout, tls, tape: None })
    }

    /// A socket whose conversation goes on the tape (`ctx:connect`,
    /// `ctx.http`): recorded, or replayed from the recording without the
    /// network.
    pub(super) async fn open_taped(&self, req: &ConnectRequest) -> crate::error::Result<SharedSocket> {
        let tls_asked = req.tls.is_some();
        if let Some(tape) = self.replay() {
            let (_, port) = self.aim(req)?;
            let st = tape.open("tcp", port, tls_asked, None)?;
            let tls = st.tls();
            return self.kept(Socket { conn: None, pending: Vec::new(), timeout: req.timeout, tls, tape: Some(st) });
        }
        let Some(tape) = self.tape() else { return self.open(req).await };
        let port = req.port.unwrap_or(self.info.port);
        match self.open(req).await {
            Ok(sock) => {
                let mut s = sock.lock().await;
                s.tape = Some(tape.open("tcp", port, tls_asked, s.tls.clone())?);
                drop(s);
                Ok(sock)
            }
            Err(e) => {
                tape.open_failed("tcp", port, tls_asked, &e);
                Err(e)
            }
        }
    }

    fn kept(&self, s: Socket) -> crate::error::Result<SharedSocket> {
        let sock = Arc::new(tokio::sync::Mutex::new(s));
        self.keep(sock.clone())?;
        Ok(sock)
    }

    // ---- output: findings, results and logs, charged as they leave the VM ----

    /// `ctx:finding{...}`, checked by the caller: its title, data and
    /// metadata charged before they are copied out of the VM.
    pub(super) fn report(&self, severity: Severity, title: &str, data: &Value, about: About) -> mlua::Result<()> {
        let (scan, meter) = (&self.scope.scan_output, &self.scope.meter);
        let title: String = title.chars().take(MAX_TITLE).collect();
        self.with(|st| {
            if st.out.findings.len() >= MAX_FINDINGS {
                return Err(mlua::Error::runtime(format!("ctx:finding: more than {MAX_FINDINGS} findings")));
            }
            if let Err(t) = charge_text(title.len() as u64, &mut st.output_left, scan) {
                meter.trip(t);
                return Err(mlua::Error::runtime(format!("{BUDGET_PREFIX}: ctx:finding: title")));
            }
            let data = match charge_output(data, &mut st.output_left, scan, meter) {
                Ok(d) => d,
                Err(ConvertError::TooLarge(n)) => {
                    return Err(mlua::Error::runtime(format!("{BUDGET_PREFIX}: ctx:finding: data past {n} bytes")))
                }
                Err(e) => return Err(mlua::Error::runtime(format!("ctx:finding: data: {e}"))),
            };
            let said = about.references.iter().chain(&about.cve).chain(&about.cwe).chain(&about.tags);
            let about_len = said.map(String::len).sum::<usize>() + about.remediation.as_ref().map_or(0, String::len);
            if let Err(t) = charge_text(about_len as u64, &mut st.output_left, scan) {
                meter.trip(t);
                return Err(mlua::Error::runtime(format!("{BUDGET_PREFIX}: ctx:finding: metadata")));
            }
            st.out.findings.push(Finding { severity, title, data, output: None, about });
            Ok(())
        })?
    }

    /// What `run` returned, as data (charged; past a budget the meter
    /// trips and says which).
    pub(super) fn returned_data(&self, v: &Value) -> mlua::Result<Result<Json, ConvertError>> {
        self.with(|st| charge_output(v, &mut st.output_left, &self.scope.scan_output, &self.scope.meter))
    }

    /// The script result titled `id`: its data and text (the text charged;
    /// past a budget the meter trips and the result is dropped).
    pub(super) fn result(&self, id: &str, data: Json, text: String) -> mlua::Result<()> {
        self.with(|st| match charge_text(text.len() as u64, &mut st.output_left, &self.scope.scan_output) {
            Ok(()) => st.out.findings.push(Finding {
                severity: Severity::Info,
                title: id.to_string(),
                data,
                output: Some(text),
                about: About::default(),
            }),
            Err(t) => self.scope.meter.trip(t),
        })
    }

    /// The service the run has set so far (`ctx:set_service`), if any.
    pub(super) fn service_set(&self) -> mlua::Result<Option<crate::findings::Identity>> {
        self.with(|st| st.out.service.clone())
    }

    /// The port's service as the plugin now knows it (`ctx:set_service`),
    /// its text charged to the run's and the scan's output budgets.
    pub(super) fn set_service(&self, id: crate::findings::Identity) -> mlua::Result<()> {
        let n = [&id.product, &id.version, &id.info, &id.os, &id.hostname, &id.device]
            .iter()
            .filter_map(|f| f.as_ref().map(String::len))
            .sum::<usize>()
            + id.service.len()
            + id.cpe.iter().map(String::len).sum::<usize>();
        self.with(|st| match charge_text(n as u64, &mut st.output_left, &self.scope.scan_output) {
            Ok(()) => {
                st.out.service = Some(id);
                Ok(())
            }
            Err(t) => {
                self.scope.meter.trip(t);
                Err(mlua::Error::runtime(format!("{BUDGET_PREFIX}: ctx:set_service")))
            }
        })?
    }

    /// A log line (`ctx:log`, `print`), charged to the run's and the scan's
    /// output budgets (past either, or past [`MAX_LOGS`] lines, dropped).
    pub(super) fn log(&self, args: &MultiValue) -> mlua::Result<()> {
        self.log_line(log_text(args))
    }

    /// As [`Run::log`], for a line already made.
    pub(super) fn log_line(&self, line: String) -> mlua::Result<()> {
        let line: String = line.chars().take(MAX_LOG_LINE).collect();
        self.with(|st| {
            if st.out.logs.len() < MAX_LOGS
                && charge_text(line.len() as u64, &mut st.output_left, &self.scope.scan_output).is_ok()
            {
                st.out.logs.push(line);
            }
        })
    }
}

/// The values of a log call as one line (at most about [`MAX_LOG_LINE`] bytes).
fn log_text(args: &MultiValue) -> String {
    let mut line = String::new();
    for (i, v) in args.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        match v {
            Value::String(s) => line.push_str(&s.to_string_lossy()),
            Value::Integer(n) => line.push_str(&n.to_string()),
            Value::Number(n) => line.push_str(&n.to_string()),
            Value::Boolean(b) => line.push_str(&b.to_string()),
            Value::Nil => line.push_str("nil"),
            other => match super::failure::message_of(other) {
                Some(m) => line.push_str(&m),
                None => line.push_str(other.type_name()),
            },
        }
        if line.len() > MAX_LOG_LINE {
            break;
        }
    }
    line
}

/// A host call made outside a run (a plugin kept `ctx` past its run).
fn no_run(e: mlua::Error) -> Error {
    Error::with_source(ErrorKind::Sandbox, "ctx used outside of a plugin run", e)
}
