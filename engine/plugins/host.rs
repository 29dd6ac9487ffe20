//! The Lua host: one sandboxed Luau VM holding every selected plugin, and
//! the `ctx` API plugins run against.
//!
//! In: checked plugins, budgets, script arguments, the scan's [`Guard`], and
//! one open port at a time. Out: a [`RunOutput`] per plugin run (findings,
//! log lines, or why the run was stopped). What always holds:
//! - The VM is Luau with `sandbox(true)`: libraries and globals are
//!   read-only; `io`, `os.execute`, `debug`, `require`, `load`/`loadstring`,
//!   `getfenv`/`setfenv`, `string.dump` and `print` do not exist (`print`
//!   is `ctx:log` by another name); only text compiled by the host is loaded.
//! - Every run gets a fresh environment: the plugin chunk is instantiated
//!   again from its bytecode with a new global table, so nothing one run
//!   writes is seen by the next.
//! - Budgets per run (wall time, interrupt steps, bytes read, sockets) and
//!   per VM (memory) stop a run that exceeds them, reported as `budget`. A
//!   tripped budget stays tripped for the rest of the run: the interrupt
//!   raises again at the next step and `pcall`, `xpcall` and
//!   `coroutine.resume` re-raise it, so a plugin cannot swallow the stop.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mlua::{ChunkMode, Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};
use serde_json::Value as Json;

use super::api::{
    ctx_methods, hash_module, log_line, regex_module, tls_table, Host, PatternCache, MAX_LOGS, MAX_LOG_LINE,
};
use super::net::{Guard, SharedSocket};
use super::value::{to_json, unknown_keys, Allowance, ConvertError};
use super::Plugin;
use crate::findings::{ErrorKind, Service, Severity};

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
    fn from_u8(v: u8) -> Option<Trip> {
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

    fn describe(self, b: &Budgets) -> String {
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
    epoch: Instant,
    deadline_ns: AtomicU64,
    steps: AtomicU64,
    max_steps: AtomicU64,
    tripped: AtomicU8,
    active: AtomicBool,
    /// The Lua thread running the plugin's `run` (0: none): the only one the
    /// interrupt may yield, so a plugin's own coroutines never see a yield
    /// they did not make.
    run_thread: std::sync::atomic::AtomicUsize,
    /// When the run last yielded (ns since `epoch`).
    last_yield_ns: AtomicU64,
    /// Set when runs must end at once (Ctrl-C, after a grace).
    cut: std::sync::OnceLock<crate::discovery::Stop>,
}

/// The longest a run computes without yielding to the runtime.
const YIELD_EVERY_NS: u64 = 10_000_000;

pub(super) const BUDGET_PREFIX: &str = "budget exceeded";

impl Meter {
    fn start(&self, wall: Duration, steps: u64) {
        let deadline = self.epoch.elapsed() + wall;
        self.deadline_ns.store(deadline.as_nanos() as u64, Ordering::Relaxed);
        self.steps.store(0, Ordering::Relaxed);
        self.max_steps.store(steps, Ordering::Relaxed);
        self.tripped.store(0, Ordering::Relaxed);
        self.active.store(true, Ordering::Release);
    }

    fn stop(&self) {
        self.active.store(false, Ordering::Release);
        self.run_thread.store(0, Ordering::Release);
    }

    /// When the run in progress must end.
    pub(super) fn deadline(&self) -> tokio::time::Instant {
        let at = self.epoch + Duration::from_nanos(self.deadline_ns.load(Ordering::Relaxed));
        tokio::time::Instant::from_std(at)
    }

    pub(super) fn trip(&self, t: Trip) {
        let _ = self.tripped.compare_exchange(0, t as u8, Ordering::AcqRel, Ordering::Relaxed);
    }

    fn tripped(&self) -> Option<Trip> {
        Trip::from_u8(self.tripped.load(Ordering::Acquire))
    }

    fn interrupt(&self, lua: &Lua) -> mlua::Result<VmState> {
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
        // Let other tasks (and a stop) in during long computations, every
        // 8,192 steps and at least every YIELD_EVERY, only from the run's own
        // thread, where the host is the one resuming.
        if n & 8191 == 0 || now.saturating_sub(self.last_yield_ns.load(Ordering::Relaxed)) >= YIELD_EVERY_NS {
            let run = self.run_thread.load(Ordering::Acquire);
            if run != 0 && lua.current_thread().to_pointer() as usize == run {
                self.last_yield_ns.store(now, Ordering::Relaxed);
                return Ok(VmState::Yield);
            }
        }
        Ok(VmState::Continue)
    }
}

fn budget_error(t: Trip) -> mlua::Error {
    mlua::Error::runtime(format!("{BUDGET_PREFIX} ({t:?})"))
}

/// One finding a run reported.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub severity: Severity,
    pub title: String,
    pub data: Json,
}

/// What one plugin run produced.
#[derive(Clone, Debug, Default)]
pub struct RunOutput {
    pub findings: Vec<Finding>,
    pub logs: Vec<String>,
    /// Connections the guard refused (each an error event of kind `sandbox`).
    pub refused: Vec<String>,
    /// Why the run stopped short, if it did.
    pub error: Option<(ErrorKind, String)>,
}

/// The run in progress, seen by the host functions.
pub(super) struct RunCtx {
    pub(super) info: Arc<Service>,
    pub(super) sockets: u32,
    pub(super) read: u64,
    /// Bytes of findings this run may still report.
    pub(super) output_left: u64,
    pub(super) out: RunOutput,
    pub(super) socks: Vec<SharedSocket>,
}

pub(super) type Current = Arc<Mutex<Option<RunCtx>>>;

pub(super) fn with_run<R>(cur: &Current, f: impl FnOnce(&mut RunCtx) -> R) -> mlua::Result<R> {
    let mut g = cur.lock().unwrap_or_else(|p| p.into_inner());
    match g.as_mut() {
        Some(run) => Ok(f(run)),
        None => Err(mlua::Error::runtime("ctx used outside of a plugin run")),
    }
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
pub(super) struct Draw<'a> {
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
    pub(super) fn new(run_left: &'a mut u64, scan: &'a OutputAllowance) -> Draw<'a> {
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

/// A sandboxed VM with every selected plugin loaded.
pub struct Vm {
    lua: Lua,
    meter: Arc<Meter>,
    scan_output: OutputAllowance,
    /// Set when the runs in flight must end at once (Ctrl-C, after a grace).
    cut: Option<crate::discovery::Stop>,
    current: Current,
    env_meta: Table,
    ctx_methods: Table,
    args: Table,
    plugins: Vec<Plugin>,
    budgets: Budgets,
}

/// Plugin metadata as the file's table gives it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Meta {
    pub id: String,
    pub description: String,
    pub categories: Vec<String>,
    pub ports: Vec<u16>,
    pub services: Vec<String>,
    pub portrule: bool,
}

impl Meta {
    /// What a cached entry must hold to be used: what [`check_table`] lets
    /// through (an edited cache file cannot smuggle in a reserved id).
    pub(crate) fn plausible(&self) -> bool {
        let name = |s: &str| {
            !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        };
        name(&self.id)
            && !RESERVED_IDS.iter().any(|r| r.eq_ignore_ascii_case(&self.id))
            && self.description.len() <= MAX_DESCRIPTION
            && !self.categories.is_empty()
            && self.categories.len() <= 64
            && self.categories.iter().all(|c| name(c))
            && self.services.len() <= 64
            && self.services.iter().all(|s| name(s))
            && self.ports.len() <= 1024
            && (!self.ports.is_empty() || !self.services.is_empty() || self.portrule)
    }
}

/// What a plugin file's top-level code may take when it is checked: a
/// plugin table is built in microseconds, and a scan that misses the
/// metadata cache (after an upgrade) runs each installed file once.
pub const INSPECT_WALL: Duration = Duration::from_millis(250);

/// Runs a plugin chunk once in a scratch VM and checks its table.
pub(crate) fn inspect(bytecode: &[u8], path: &Path) -> crate::Result<Meta> {
    let bad = |m: String| crate::Error::new(crate::ErrorKind::Config, m);
    let budgets = Budgets { wall: INSPECT_WALL, steps: 1_000_000, memory: 16 << 20, ..Budgets::default() };
    let vm = Vm::bare(&budgets, Guard::offline(), &BTreeMap::new(), OutputAllowance::new(0))
        .map_err(|e| crate::Error::with_source(crate::ErrorKind::Config, "cannot make a VM", e))?;
    vm.meter.start(budgets.wall, budgets.steps);
    let table = vm.instantiate(bytecode, path.to_string_lossy().as_ref()).and_then(|f| f.call::<Value>(()));
    let tripped = vm.meter.tripped();
    vm.meter.stop();
    if let Some(t) = tripped {
        return Err(bad(format!("loading it {}", t.describe(&budgets))));
    }
    let table = match table.map_err(|e| bad(format!("loading it failed: {}", short(&e))))? {
        Value::Table(t) => t,
        other => return Err(bad(format!("must return a table, not a {}", other.type_name()))),
    };
    check_table(&table)
}

/// Words a `--script` expression reads as a category or keyword (nmap's
/// categories, and moonscan's keywords): no plugin may take one as its id.
pub const RESERVED_IDS: &[&str] = &[
    "all",
    "and",
    "or",
    "not",
    "default",
    "safe",
    "intrusive",
    "discovery",
    "version",
    "vuln",
    "auth",
    "brute",
    "broadcast",
    "dos",
    "exploit",
    "external",
    "fuzzer",
    "malware",
];

/// Longest description a plugin may have.
pub const MAX_DESCRIPTION: usize = 2000;

/// Every field a plugin table may have.
const PLUGIN_FIELDS: &[&str] = &["id", "description", "categories", "ports", "services", "portrule", "run"];

fn check_table(t: &Table) -> crate::Result<Meta> {
    let bad = |m: String| crate::Error::new(crate::ErrorKind::Config, m);
    let unknown = unknown_keys(t, PLUGIN_FIELDS)
        .map_err(|e| crate::Error::with_source(crate::ErrorKind::Config, "reading the plugin table", e))?;
    if !unknown.is_empty() {
        return Err(bad(format!(
            "unknown field{} {} (a plugin table has only {})",
            if unknown.len() == 1 { "" } else { "s" },
            unknown.join(", "),
            PLUGIN_FIELDS.join(", ")
        )));
    }
    let field = |name: &str| t.raw_get::<Value>(name).unwrap_or(Value::Nil);
    let string = |name: &str, required: bool| -> crate::Result<Option<String>> {
        match field(name) {
            Value::String(s) => Ok(Some(s.to_string_lossy())),
            Value::Nil if !required => Ok(None),
            Value::Nil => Err(bad(format!("field '{name}' is missing (it must be a string)"))),
            other => Err(bad(format!("field '{name}' must be a string, not a {}", other.type_name()))),
        }
    };
    // Bounded so that the metadata always fits its cache file (see
    // plugins::load_source_cached): a plugin cannot opt out of the cache.
    let list = |name: &str, max: usize| -> crate::Result<Vec<Value>> {
        match field(name) {
            Value::Nil => Ok(Vec::new()),
            Value::Table(l) => {
                let n = l.raw_len();
                if n > max {
                    return Err(bad(format!("field '{name}' has more than {max} entries")));
                }
                (1..=n)
                    .map(|i| {
                        l.raw_get::<Value>(i).map_err(|e| {
                            crate::Error::with_source(crate::ErrorKind::Config, "reading the plugin table", e)
                        })
                    })
                    .collect()
            }
            other => Err(bad(format!("field '{name}' must be a list, not a {}", other.type_name()))),
        }
    };
    let id = string("id", true)?.unwrap_or_default();
    let valid =
        |s: &str| !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !valid(&id) {
        return Err(bad(format!("field 'id' must be 1-64 letters, digits, '-', '_' or '.', not {id:?}")));
    }
    if RESERVED_IDS.iter().any(|r| r.eq_ignore_ascii_case(&id)) {
        return Err(bad(format!(
            "field 'id' is {id:?}, a category or keyword of --script expressions; plugin ids cannot be one"
        )));
    }
    let description = string("description", true)?.unwrap_or_default();
    if description.len() > MAX_DESCRIPTION {
        return Err(bad(format!("field 'description' is longer than {MAX_DESCRIPTION} bytes")));
    }
    let mut categories = Vec::new();
    for v in list("categories", 64)? {
        match v {
            Value::String(s) if valid(&s.to_string_lossy()) => {
                categories.push(s.to_string_lossy().to_ascii_lowercase())
            }
            other => return Err(bad(format!("field 'categories' must hold category names, found {other:?}"))),
        }
    }
    if categories.is_empty() {
        return Err(bad("field 'categories' is missing or empty (e.g. { \"safe\", \"discovery\" })".to_string()));
    }
    let mut ports = Vec::new();
    for v in list("ports", 1024)? {
        match v {
            Value::Integer(p) if (1..=65535).contains(&p) => ports.push(p as u16),
            Value::Number(p) if p.fract() == 0.0 && (1.0..=65535.0).contains(&p) => ports.push(p as u16),
            other => return Err(bad(format!("field 'ports' must hold port numbers 1-65535, found {other:?}"))),
        }
    }
    let mut services = Vec::new();
    for v in list("services", 64)? {
        match v {
            Value::String(s) if valid(&s.to_string_lossy()) => services.push(s.to_string_lossy()),
            other => return Err(bad(format!("field 'services' must hold service names, found {other:?}"))),
        }
    }
    let portrule = match field("portrule") {
        Value::Function(_) => true,
        Value::Nil => false,
        other => return Err(bad(format!("field 'portrule' must be a function, not a {}", other.type_name()))),
    };
    if ports.is_empty() && services.is_empty() && !portrule {
        return Err(bad("the plugin says nowhere to run: give 'ports', 'services' or 'portrule'".to_string()));
    }
    match field("run") {
        Value::Function(_) => {}
        Value::Nil => return Err(bad("field 'run' is missing (it must be a function)".to_string())),
        other => return Err(bad(format!("field 'run' must be a function, not a {}", other.type_name()))),
    }
    Ok(Meta { id, description, categories, ports, services, portrule })
}

/// A Lua error as one line, without mlua's traceback.
fn short(e: &mlua::Error) -> String {
    let text = match e {
        mlua::Error::CallbackError { cause, .. } => return short(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::MemoryError(m) => format!("out of memory: {m}"),
        other => other.to_string(),
    };
    let first = text.lines().next().unwrap_or("").to_string();
    first.chars().take(500).collect()
}

/// The Lua side of the sandbox, run once per VM before `sandbox(true)`:
/// pcall, xpcall and coroutine.resume re-raise a tripped budget.
const PRELUDE: &str = r#"
local check = __moonscan_check
local rawpcall, rawxpcall, rawerror, resume = pcall, xpcall, error, coroutine.resume
local function pass(ok, ...)
    if not ok and check((...)) then rawerror((...), 0) end
    return ok, ...
end
pcall = function(f, ...) return pass(rawpcall(f, ...)) end
xpcall = function(f, handler, ...)
    return pass(rawxpcall(f, function(e) if check(e) then return e end return handler(e) end, ...))
end
coroutine.resume = function(co, ...) return pass(resume(co, ...)) end
"#;

impl Vm {
    /// A VM with the selected plugins, each loaded and checked once.
    /// `scan_output` is shared by every VM of a scan (see
    /// [`Budgets::scan_output`]).
    pub fn new(
        plugins: &[Plugin],
        budgets: &Budgets,
        guard: Guard,
        args: &BTreeMap<String, String>,
        scan_output: OutputAllowance,
    ) -> mlua::Result<Vm> {
        let mut vm = Vm::bare(budgets, guard, args, scan_output)?;
        vm.plugins = plugins.to_vec();
        Ok(vm)
    }

    /// Runs in flight end (as `budget`, "stopped") once `cut` is set.
    pub fn cut_by(&mut self, cut: crate::discovery::Stop) {
        let _ = self.meter.cut.set(cut.clone());
        self.cut = Some(cut);
    }

    fn bare(
        budgets: &Budgets,
        guard: Guard,
        args: &BTreeMap<String, String>,
        scan_output: OutputAllowance,
    ) -> mlua::Result<Vm> {
        let lua = Lua::new_with(StdLib::ALL_SAFE, LuaOptions::new())?;
        let meter = Arc::new(Meter {
            epoch: Instant::now(),
            deadline_ns: AtomicU64::new(0),
            steps: AtomicU64::new(0),
            max_steps: AtomicU64::new(u64::MAX),
            tripped: AtomicU8::new(0),
            active: AtomicBool::new(false),
            run_thread: std::sync::atomic::AtomicUsize::new(0),
            last_yield_ns: AtomicU64::new(0),
            cut: std::sync::OnceLock::new(),
        });
        let current: Current = Arc::new(Mutex::new(None));
        let g = lua.globals();
        for name in
            ["require", "loadstring", "load", "dofile", "loadfile", "getfenv", "setfenv", "debug", "io", "package"]
        {
            g.raw_set(name, Value::Nil)?;
        }
        if let Ok(string) = g.raw_get::<Table>("string") {
            string.raw_set("dump", Value::Nil)?;
        }
        // os keeps only the clock.
        if let Ok(os) = g.raw_get::<Table>("os") {
            let safe = lua.create_table()?;
            for name in ["time", "clock", "date", "difftime"] {
                safe.raw_set(name, os.raw_get::<Value>(name)?)?;
            }
            g.raw_set("os", safe)?;
        }
        let m = meter.clone();
        let cur = current.clone();
        let memory_limit = budgets.memory as u64;
        g.raw_set(
            "__moonscan_check",
            lua.create_function(move |lua, e: Value| {
                if m.tripped().is_some() {
                    return Ok(true);
                }
                // A caught error is the memory budget's trip when it is an
                // mlua MemoryError, when the VM stands within an eighth of
                // its limit, or when it is Luau's own out-of-memory value:
                // for an allocation that failed, Luau hands pcall its
                // LUA_MEMERRMSG string (the status code that tells it apart
                // stays inside lua_pcall), compared whole, as mlua-sys does.
                let near_limit = lua.used_memory() as u64 + memory_limit / 8 >= memory_limit;
                let memory = near_limit
                    || match &e {
                        Value::Error(err) => memory_error(err),
                        Value::String(s) => s.as_bytes().as_ref() == LUAU_MEMORY_ERROR,
                        _ => false,
                    };
                if memory {
                    m.trip(Trip::Memory);
                }
                Ok(memory)
            })?,
        )?;
        lua.load(PRELUDE).set_name("=moonscan prelude").exec()?;
        let patterns = Arc::new(PatternCache::default());
        g.raw_set("re", regex_module(&lua, &patterns)?)?;
        let c = cur.clone();
        let so = scan_output.clone();
        g.raw_set("print", lua.create_function(move |_, args: MultiValue| log_line(&c, &so, &args))?)?;
        g.raw_set("hash", hash_module(&lua)?)?;
        lua.sandbox(true)?;
        lua.set_memory_limit(budgets.memory)?;
        let m = meter.clone();
        lua.set_interrupt(move |lua| m.interrupt(lua));

        let env_meta = lua.create_table()?;
        env_meta.raw_set("__index", g)?;
        env_meta.raw_set("__metatable", "sandboxed")?;
        env_meta.set_readonly(true);

        let args_table = lua.create_table()?;
        for (k, v) in args {
            args_table.raw_set(k.as_str(), v.as_str())?;
        }
        args_table.set_readonly(true);

        let host = Host {
            cur: current.clone(),
            meter: meter.clone(),
            guard: Arc::new(guard),
            budgets: Arc::new(budgets.clone()),
            scan_output: scan_output.clone(),
            patterns,
        };
        let ctx_methods = ctx_methods(&lua, &host)?;
        Ok(Vm {
            lua,
            meter,
            scan_output,
            cut: None,
            current,
            env_meta,
            ctx_methods,
            args: args_table,
            plugins: Vec::new(),
            budgets: budgets.clone(),
        })
    }

    pub fn plugins(&self) -> &[Plugin] {
        &self.plugins
    }

    /// Lua memory in use.
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// The plugin chunk as a function with a fresh global table.
    fn instantiate(&self, bytecode: &[u8], name: &str) -> mlua::Result<Function> {
        let env = self.lua.create_table()?;
        env.set_metatable(Some(self.env_meta.clone()))?;
        self.lua
            .load(bytecode)
            .set_mode(ChunkMode::Binary)
            .set_name(format!("={name}"))
            .set_environment(env)
            .into_function()
    }

    /// Whether plugin `i` runs on this port: its ports, its services, or its
    /// portrule. A portrule that fails or trips a budget (at most 1 s and
    /// 1,000,000 steps) is an error saying why; the plugin does not run.
    pub async fn wants(&self, i: usize, info: &Service) -> std::result::Result<bool, (ErrorKind, String)> {
        let p = &self.plugins[i];
        if p.ports.contains(&info.port) || info.known_service().is_some_and(|s| p.services.iter().any(|x| x == s)) {
            return Ok(true);
        }
        if !p.portrule {
            return Ok(false);
        }
        let budgets = Budgets {
            wall: self.budgets.wall.min(Duration::from_secs(1)),
            steps: self.budgets.steps.min(1_000_000),
            ..self.budgets.clone()
        };
        self.meter.start(budgets.wall, budgets.steps);
        let verdict = async {
            let t: Table = self.instantiate(&p.bytecode, &p.id)?.call_async(()).await?;
            let rule: Function = t.raw_get("portrule")?;
            rule.call_async::<Value>(self.port_table(info)?).await
        };
        let r = tokio::time::timeout(budgets.wall, verdict).await;
        let tripped = self.meter.tripped();
        self.meter.stop();
        match (tripped, r) {
            (Some(t), _) => Err((ErrorKind::Budget, format!("portrule {}", t.describe(&budgets)))),
            (None, Err(_)) => Err((ErrorKind::Budget, format!("portrule {}", Trip::Wall.describe(&budgets)))),
            (None, Ok(Err(e))) => Err((ErrorKind::Plugin, format!("portrule failed: {}", short(&e)))),
            (None, Ok(Ok(v))) => Ok(matches!(v, Value::Boolean(true))),
        }
    }

    fn port_table(&self, info: &Service) -> mlua::Result<Table> {
        let t = self.lua.create_table()?;
        t.raw_set("number", info.port)?;
        t.raw_set("protocol", info.proto.as_str())?;
        t.raw_set("service", info.known_service())?;
        t.raw_set("product", info.id.product.as_deref())?;
        t.raw_set("version", info.id.version.as_deref())?;
        t.raw_set("tunnel", info.tunnel.map(|_| "ssl"))?;
        t.raw_set("tls", info.tls.is_some())?;
        Ok(t)
    }

    fn ctx_table(&self, info: &Service) -> mlua::Result<Table> {
        let t = self.lua.create_table()?;
        t.set_metatable(Some(self.ctx_methods.clone()))?;
        t.raw_set("ip", info.ip.to_string())?;
        t.raw_set("port", info.port)?;
        t.raw_set("protocol", info.proto.as_str())?;
        t.raw_set("service", info.known_service())?;
        t.raw_set("product", info.id.product.as_deref())?;
        t.raw_set("version", info.id.version.as_deref())?;
        t.raw_set("tunnel", info.tunnel.map(|_| "ssl"))?;
        t.raw_set("banner", self.lua.create_string(&info.banner)?)?;
        if let Some(tls) = &info.tls {
            t.raw_set("tls", tls_table(&self.lua, tls)?)?;
        }
        t.raw_set("args", self.args.clone())?;
        Ok(t)
    }

    /// Runs plugin `i` on a port, within the budgets.
    pub async fn run(&self, i: usize, info: Arc<Service>) -> RunOutput {
        let p = &self.plugins[i];
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(RunCtx {
            info: info.clone(),
            sockets: 0,
            read: 0,
            output_left: self.budgets.output,
            out: RunOutput::default(),
            socks: Vec::new(),
        });
        self.meter.start(self.budgets.wall, self.budgets.steps);
        let call = async {
            let t: Table = self.instantiate(&p.bytecode, &p.id)?.call_async(()).await?;
            let run: Function = t.raw_get("run")?;
            let thread = self.lua.create_thread(run)?;
            self.meter.run_thread.store(thread.to_pointer() as usize, Ordering::Release);
            thread.into_async::<MultiValue>(self.ctx_table(&info)?)?.await
        };
        // The interrupt stops Lua code; this stops a run waiting on I/O, and
        // the cut stops either at once (Lua code runs only while polled).
        let mut cut = self.cut.clone();
        let result = tokio::select! {
            r = tokio::time::timeout(self.budgets.wall, call) => r,
            _ = async { match cut.as_mut() { Some(c) => c.wait().await, None => std::future::pending().await } } => {
                self.meter.trip(Trip::Stopped);
                Ok(Ok(MultiValue::new()))
            }
        };
        if result.is_err() {
            self.meter.trip(Trip::Wall);
        }
        let tripped = self.meter.tripped();
        let run = self.current.lock().unwrap_or_else(|e| e.into_inner()).take();
        let (mut out, socks, mut output_left) =
            run.map(|r| (r.out, r.socks, r.output_left)).unwrap_or((RunOutput::default(), Vec::new(), 0));
        for s in socks {
            if let Ok(mut s) = s.try_lock() {
                s.conn = None;
            }
        }
        out.error = match (tripped, result) {
            (Some(t), _) => Some((ErrorKind::Budget, t.describe(&self.budgets))),
            (None, Ok(Err(e))) if memory_error(&e) => Some((ErrorKind::Budget, Trip::Memory.describe(&self.budgets))),
            (None, Ok(Err(e))) => Some((ErrorKind::Plugin, short(&e))),
            (None, Ok(Ok(values))) => {
                // Still metered: converting the returned data is charged to the run.
                let r = returned(values, &p.id, &mut out, &mut output_left, &self.scan_output, &self.meter);
                match self.meter.tripped() {
                    Some(t) => Some((ErrorKind::Budget, t.describe(&self.budgets))),
                    None => r,
                }
            }
            (None, Err(_)) => Some((ErrorKind::Budget, Trip::Wall.describe(&self.budgets))),
        };
        self.meter.stop();
        // Garbage from this run is not the next run's budget.
        if self.lua.used_memory() > self.budgets.memory / 4 {
            let _ = self.lua.gc_collect();
        }
        out
    }
}

/// Luau's LUA_MEMERRMSG: the error value of an allocation that failed.
const LUAU_MEMORY_ERROR: &[u8] = b"not enough memory";

/// True for an allocation that failed at the memory limit, however deep in
/// callbacks (a caught one re-raised by the prelude has tripped the meter).
fn memory_error(e: &mlua::Error) -> bool {
    match e {
        mlua::Error::MemoryError(_) => true,
        mlua::Error::CallbackError { cause, .. } | mlua::Error::WithContext { cause, .. } => memory_error(cause),
        _ => false,
    }
}

/// What `run` returned: nothing, `nil, "why"` (logged), or data (a finding).
fn returned(
    values: MultiValue,
    id: &str,
    out: &mut RunOutput,
    left: &mut u64,
    scan: &OutputAllowance,
    meter: &Meter,
) -> Option<(ErrorKind, String)> {
    let mut it = values.into_iter();
    match (it.next(), it.next()) {
        (None | Some(Value::Nil), Some(Value::String(why))) => {
            let line = format!("{id}: {}", why.to_string_lossy().chars().take(MAX_LOG_LINE).collect::<String>());
            if out.logs.len() < MAX_LOGS && charge_text(line.len() as u64, left, scan).is_ok() {
                out.logs.push(line);
            }
            None
        }
        (None | Some(Value::Nil) | Some(Value::Boolean(_)), _) => None,
        (Some(v), _) => match charge_output(&v, left, scan, meter) {
            Ok(data) => {
                out.findings.push(Finding { severity: Severity::Info, title: id.to_string(), data });
                None
            }
            Err(ConvertError::TooLarge(_)) => None, // the meter says which budget tripped
            Err(e) => Some((ErrorKind::Parse, format!("returned something that is not data: {e}"))),
        },
    }
}

impl std::fmt::Debug for Vm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vm").field("plugins", &self.plugins.len()).finish()
    }
}
