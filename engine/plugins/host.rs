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
use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mlua::{
    ChunkMode, Function, Lua, LuaOptions, MultiValue, StdLib, Table, UserData, UserDataMethods, Value, VmState,
};
use serde_json::Value as Json;

use super::net::{self, Guard, SharedSocket, Socket, TlsOptions};
use super::value::{from_json, to_json};
use super::Plugin;
use crate::findings::{ErrorKind, TlsInfo};

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
}

impl Default for Budgets {
    fn default() -> Budgets {
        Budgets { wall: Duration::from_secs(10), steps: 50_000_000, memory: 64 << 20, read_bytes: 4 << 20, sockets: 16 }
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
}

impl Trip {
    fn from_u8(v: u8) -> Option<Trip> {
        Some(match v {
            1 => Trip::Wall,
            2 => Trip::Steps,
            3 => Trip::Memory,
            4 => Trip::Read,
            5 => Trip::Sockets,
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
        }
    }
}

/// Budget state of the run in progress, shared with the interrupt.
#[derive(Debug)]
struct Meter {
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
}

const BUDGET_PREFIX: &str = "budget exceeded";

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

    fn trip(&self, t: Trip) {
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
        let n = self.steps.fetch_add(1, Ordering::Relaxed) + 1;
        if n > self.max_steps.load(Ordering::Relaxed) {
            self.trip(Trip::Steps);
            return Err(budget_error(Trip::Steps));
        }
        if n & 255 == 0 && self.epoch.elapsed().as_nanos() as u64 >= self.deadline_ns.load(Ordering::Relaxed) {
            self.trip(Trip::Wall);
            return Err(budget_error(Trip::Wall));
        }
        // Let other tasks run during long computations (only from the run's
        // own thread, where the host is the one resuming).
        if n & 8191 == 0 {
            let run = self.run_thread.load(Ordering::Acquire);
            if run != 0 && lua.current_thread().to_pointer() as usize == run {
                return Ok(VmState::Yield);
            }
        }
        Ok(VmState::Continue)
    }
}

fn budget_error(t: Trip) -> mlua::Error {
    mlua::Error::runtime(format!("{BUDGET_PREFIX} ({t:?})"))
}

/// What a plugin knows about the port it runs on.
#[derive(Clone, Debug)]
pub struct PortInfo {
    pub ip: IpAddr,
    pub port: u16,
    pub service: Option<String>,
    pub product: Option<String>,
    pub version: Option<String>,
    /// The service was found inside TLS.
    pub tunnel: bool,
    /// What the service sent first (raw bytes).
    pub banner: Vec<u8>,
    pub tls: Option<TlsInfo>,
}

impl PortInfo {
    /// A port known only by its number (no service detection).
    pub fn bare(ip: IpAddr, port: u16) -> PortInfo {
        PortInfo {
            ip,
            port,
            service: crate::targets::ports::service_name(port, "tcp").map(str::to_string),
            product: None,
            version: None,
            tunnel: false,
            banner: Vec::new(),
            tls: None,
        }
    }
}

/// One finding a run reported.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub severity: &'static str,
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

/// Most findings and log lines one run may report.
const MAX_FINDINGS: usize = 64;
const MAX_LOGS: usize = 64;
const MAX_LOG_LINE: usize = 1000;
const MAX_TITLE: usize = 300;
/// Default time for one socket operation.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(5);
/// Most bytes an HTTP response may have.
const MAX_HTTP: usize = 1 << 20;

/// The run in progress, seen by the host functions.
struct RunCtx {
    info: Arc<PortInfo>,
    sockets: u32,
    read: u64,
    out: RunOutput,
    socks: Vec<SharedSocket>,
}

type Current = Arc<Mutex<Option<RunCtx>>>;

fn with_run<R>(cur: &Current, f: impl FnOnce(&mut RunCtx) -> R) -> mlua::Result<R> {
    let mut g = cur.lock().unwrap_or_else(|p| p.into_inner());
    match g.as_mut() {
        Some(run) => Ok(f(run)),
        None => Err(mlua::Error::runtime("ctx used outside of a plugin run")),
    }
}

/// A sandboxed VM with every selected plugin loaded.
pub struct Vm {
    lua: Lua,
    meter: Arc<Meter>,
    current: Current,
    env_meta: Table,
    ctx_methods: Table,
    args: Table,
    plugins: Vec<Plugin>,
    budgets: Budgets,
}

/// Plugin metadata as the file's table gives it.
pub(crate) struct Meta {
    pub id: String,
    pub description: String,
    pub categories: Vec<String>,
    pub ports: Vec<u16>,
    pub services: Vec<String>,
    pub portrule: bool,
}

/// Runs a plugin chunk once in a scratch VM and checks its table.
pub(crate) fn inspect(bytecode: &[u8], path: &Path) -> Result<Meta, String> {
    let budgets = Budgets { wall: Duration::from_secs(2), steps: 1_000_000, memory: 16 << 20, ..Budgets::default() };
    let vm = Vm::bare(&budgets, Guard::offline(), &BTreeMap::new()).map_err(|e| format!("cannot make a VM: {e}"))?;
    vm.meter.start(budgets.wall, budgets.steps);
    let table = vm.instantiate(bytecode, path.to_string_lossy().as_ref()).and_then(|f| f.call::<Value>(()));
    let tripped = vm.meter.tripped();
    vm.meter.stop();
    if let Some(t) = tripped {
        return Err(format!("loading it {}", t.describe(&budgets)));
    }
    let table = match table.map_err(|e| format!("loading it failed: {}", short(&e)))? {
        Value::Table(t) => t,
        other => return Err(format!("must return a table, not a {}", other.type_name())),
    };
    check_table(&table)
}

fn check_table(t: &Table) -> Result<Meta, String> {
    let field = |name: &str| t.raw_get::<Value>(name).unwrap_or(Value::Nil);
    let string = |name: &str, required: bool| -> Result<Option<String>, String> {
        match field(name) {
            Value::String(s) => Ok(Some(s.to_string_lossy())),
            Value::Nil if !required => Ok(None),
            Value::Nil => Err(format!("field '{name}' is missing (it must be a string)")),
            other => Err(format!("field '{name}' must be a string, not a {}", other.type_name())),
        }
    };
    let list = |name: &str| -> Result<Vec<Value>, String> {
        match field(name) {
            Value::Nil => Ok(Vec::new()),
            Value::Table(l) => {
                let n = l.raw_len();
                if n > 1024 {
                    return Err(format!("field '{name}' has more than 1024 entries"));
                }
                (1..=n).map(|i| l.raw_get::<Value>(i).map_err(|e| e.to_string())).collect()
            }
            other => Err(format!("field '{name}' must be a list, not a {}", other.type_name())),
        }
    };
    let id = string("id", true)?.unwrap_or_default();
    let valid =
        |s: &str| !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !valid(&id) {
        return Err(format!("field 'id' must be 1-64 letters, digits, '-', '_' or '.', not {id:?}"));
    }
    let description = string("description", true)?.unwrap_or_default();
    let mut categories = Vec::new();
    for v in list("categories")? {
        match v {
            Value::String(s) if valid(&s.to_string_lossy()) => {
                categories.push(s.to_string_lossy().to_ascii_lowercase())
            }
            other => return Err(format!("field 'categories' must hold category names, found {other:?}")),
        }
    }
    if categories.is_empty() {
        return Err("field 'categories' is missing or empty (e.g. { \"safe\", \"discovery\" })".into());
    }
    let mut ports = Vec::new();
    for v in list("ports")? {
        match v {
            Value::Integer(p) if (1..=65535).contains(&p) => ports.push(p as u16),
            Value::Number(p) if p.fract() == 0.0 && (1.0..=65535.0).contains(&p) => ports.push(p as u16),
            other => return Err(format!("field 'ports' must hold port numbers 1-65535, found {other:?}")),
        }
    }
    let mut services = Vec::new();
    for v in list("services")? {
        match v {
            Value::String(s) => services.push(s.to_string_lossy()),
            other => return Err(format!("field 'services' must hold service names, found {other:?}")),
        }
    }
    let portrule = match field("portrule") {
        Value::Function(_) => true,
        Value::Nil => false,
        other => return Err(format!("field 'portrule' must be a function, not a {}", other.type_name())),
    };
    if ports.is_empty() && services.is_empty() && !portrule {
        return Err("the plugin says nowhere to run: give 'ports', 'services' or 'portrule'".into());
    }
    match field("run") {
        Value::Function(_) => {}
        Value::Nil => return Err("field 'run' is missing (it must be a function)".into()),
        other => return Err(format!("field 'run' must be a function, not a {}", other.type_name())),
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
    pub fn new(
        plugins: &[Plugin],
        budgets: &Budgets,
        guard: Guard,
        args: &BTreeMap<String, String>,
    ) -> mlua::Result<Vm> {
        let mut vm = Vm::bare(budgets, guard, args)?;
        vm.plugins = plugins.to_vec();
        Ok(vm)
    }

    fn bare(budgets: &Budgets, guard: Guard, args: &BTreeMap<String, String>) -> mlua::Result<Vm> {
        let lua = Lua::new_with(StdLib::ALL_SAFE, LuaOptions::new())?;
        let meter = Arc::new(Meter {
            epoch: Instant::now(),
            deadline_ns: AtomicU64::new(0),
            steps: AtomicU64::new(0),
            max_steps: AtomicU64::new(u64::MAX),
            tripped: AtomicU8::new(0),
            active: AtomicBool::new(false),
            run_thread: std::sync::atomic::AtomicUsize::new(0),
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
        g.raw_set(
            "__moonscan_check",
            lua.create_function(move |_, e: Value| {
                if m.tripped().is_some() {
                    return Ok(true);
                }
                let memory = match &e {
                    Value::Error(err) => {
                        matches!(**err, mlua::Error::MemoryError(_)) || err.to_string().contains("not enough memory")
                    }
                    Value::String(s) => s.to_string_lossy().contains("not enough memory"),
                    _ => false,
                };
                if memory {
                    m.trip(Trip::Memory);
                }
                Ok(memory)
            })?,
        )?;
        lua.load(PRELUDE).set_name("=moonscan prelude").exec()?;
        g.raw_set("re", regex_module(&lua)?)?;
        let c = cur.clone();
        g.raw_set("print", lua.create_function(move |_, args: MultiValue| log_line(&c, &args))?)?;
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

        let ctx_methods = ctx_methods(&lua, &current, &meter, budgets, guard)?;
        Ok(Vm {
            lua,
            meter,
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

    /// Whether plugin `i` runs on this port: its ports, its services, or its portrule.
    pub async fn wants(&self, i: usize, info: &PortInfo) -> bool {
        let p = &self.plugins[i];
        if p.ports.contains(&info.port) || info.service.as_ref().is_some_and(|s| p.services.iter().any(|x| x == s)) {
            return true;
        }
        if !p.portrule {
            return false;
        }
        let budgets = Budgets { wall: self.budgets.wall.min(Duration::from_secs(1)), ..self.budgets.clone() };
        self.meter.start(budgets.wall, budgets.steps.min(1_000_000));
        let verdict = async {
            let t: Table = self.instantiate(&p.bytecode, &p.id)?.call_async(()).await?;
            let rule: Function = t.raw_get("portrule")?;
            rule.call_async::<bool>(self.port_table(info)?).await
        };
        let r = tokio::time::timeout(budgets.wall, verdict).await;
        self.meter.stop();
        matches!(r, Ok(Ok(true)))
    }

    fn port_table(&self, info: &PortInfo) -> mlua::Result<Table> {
        let t = self.lua.create_table()?;
        t.raw_set("number", info.port)?;
        t.raw_set("protocol", "tcp")?;
        t.raw_set("service", info.service.as_deref())?;
        t.raw_set("product", info.product.as_deref())?;
        t.raw_set("version", info.version.as_deref())?;
        t.raw_set("tunnel", info.tunnel.then_some("ssl"))?;
        t.raw_set("tls", info.tls.is_some())?;
        Ok(t)
    }

    fn ctx_table(&self, info: &PortInfo) -> mlua::Result<Table> {
        let t = self.lua.create_table()?;
        t.set_metatable(Some(self.ctx_methods.clone()))?;
        t.raw_set("ip", info.ip.to_string())?;
        t.raw_set("port", info.port)?;
        t.raw_set("protocol", "tcp")?;
        t.raw_set("service", info.service.as_deref())?;
        t.raw_set("product", info.product.as_deref())?;
        t.raw_set("version", info.version.as_deref())?;
        t.raw_set("tunnel", info.tunnel.then_some("ssl"))?;
        t.raw_set("banner", self.lua.create_string(&info.banner)?)?;
        if let Some(tls) = &info.tls {
            t.raw_set("tls", tls_table(&self.lua, tls)?)?;
        }
        t.raw_set("args", self.args.clone())?;
        Ok(t)
    }

    /// Runs plugin `i` on a port, within the budgets.
    pub async fn run(&self, i: usize, info: Arc<PortInfo>) -> RunOutput {
        let p = &self.plugins[i];
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(RunCtx { info: info.clone(), sockets: 0, read: 0, out: RunOutput::default(), socks: Vec::new() });
        self.meter.start(self.budgets.wall, self.budgets.steps);
        let call = async {
            let t: Table = self.instantiate(&p.bytecode, &p.id)?.call_async(()).await?;
            let run: Function = t.raw_get("run")?;
            let thread = self.lua.create_thread(run)?;
            self.meter.run_thread.store(thread.to_pointer() as usize, Ordering::Release);
            thread.into_async::<MultiValue>(self.ctx_table(&info)?)?.await
        };
        // The interrupt stops Lua code; this stops a run waiting on I/O.
        let result = tokio::time::timeout(self.budgets.wall, call).await;
        if result.is_err() {
            self.meter.trip(Trip::Wall);
        }
        let tripped = self.meter.tripped();
        self.meter.stop();
        let run = self.current.lock().unwrap_or_else(|e| e.into_inner()).take();
        let (mut out, socks) = run.map(|r| (r.out, r.socks)).unwrap_or_default();
        for s in socks {
            if let Ok(mut s) = s.try_lock() {
                s.conn = None;
            }
        }
        let memory_error = |e: &mlua::Error| match e {
            mlua::Error::MemoryError(_) => true,
            mlua::Error::CallbackError { cause, .. } => matches!(**cause, mlua::Error::MemoryError(_)),
            other => other.to_string().contains("not enough memory"),
        };
        out.error = match (tripped, result) {
            (Some(t), _) => Some((ErrorKind::Budget, t.describe(&self.budgets))),
            (None, Ok(Err(e))) if memory_error(&e) => Some((ErrorKind::Budget, Trip::Memory.describe(&self.budgets))),
            (None, Ok(Err(e))) => Some((ErrorKind::Plugin, short(&e))),
            (None, Ok(Ok(values))) => returned(values, &p.id, &mut out),
            (None, Err(_)) => Some((ErrorKind::Budget, Trip::Wall.describe(&self.budgets))),
        };
        // Garbage from this run is not the next run's budget.
        if self.lua.used_memory() > self.budgets.memory / 4 {
            let _ = self.lua.gc_collect();
        }
        out
    }
}

/// What `run` returned: nothing, `nil, "why"` (logged), or data (a finding).
fn returned(values: MultiValue, id: &str, out: &mut RunOutput) -> Option<(ErrorKind, String)> {
    let mut it = values.into_iter();
    match (it.next(), it.next()) {
        (None | Some(Value::Nil), Some(Value::String(why))) => {
            out.logs.push(format!("{id}: {}", why.to_string_lossy().chars().take(MAX_LOG_LINE).collect::<String>()));
            None
        }
        (None | Some(Value::Nil) | Some(Value::Boolean(_)), _) => None,
        (Some(v), _) => match to_json(&v) {
            Ok(data) => {
                out.findings.push(Finding { severity: "info", title: id.to_string(), data });
                None
            }
            Err(e) => Some((ErrorKind::Parse, format!("returned something that is not data: {e}"))),
        },
    }
}

fn log_line(cur: &Current, args: &MultiValue) -> mlua::Result<()> {
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
            other => line.push_str(other.type_name()),
        }
        if line.len() > MAX_LOG_LINE {
            break;
        }
    }
    let line: String = line.chars().take(MAX_LOG_LINE).collect();
    with_run(cur, |run| {
        if run.out.logs.len() < MAX_LOGS {
            run.out.logs.push(line);
        }
    })
}

/// The certificate chain and session facts as a Lua table; each
/// certificate also has `pem`.
fn tls_table(lua: &Lua, tls: &TlsInfo) -> mlua::Result<Table> {
    let json = serde_json::to_value(tls).map_err(mlua::Error::external)?;
    let Value::Table(t) = from_json(lua, &json)? else { return Err(mlua::Error::runtime("tls is not a table")) };
    let chain: Table = t.raw_get("chain")?;
    for (i, der) in tls.der.iter().enumerate() {
        if let Ok(Value::Table(c)) = chain.raw_get::<Value>(i + 1) {
            c.raw_set("pem", pem(der))?;
        }
    }
    Ok(t)
}

fn pem(der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut s = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        s.push_str(&String::from_utf8_lossy(chunk));
        s.push('\n');
    }
    s.push_str("-----END CERTIFICATE-----\n");
    s
}

/// `ctx:connect`, `ctx:finding`, `ctx:log` and `ctx.http`, made once per VM.
fn ctx_methods(lua: &Lua, cur: &Current, meter: &Arc<Meter>, budgets: &Budgets, guard: Guard) -> mlua::Result<Table> {
    let methods = lua.create_table()?;
    let guard = Arc::new(guard);
    let budgets = Arc::new(budgets.clone());

    let c = cur.clone();
    methods.raw_set(
        "finding",
        lua.create_function(move |_, (_ctx, spec): (Value, Table)| {
            let severity = match spec.raw_get::<Option<String>>("severity")?.as_deref() {
                None | Some("info") => "info",
                Some("low") => "low",
                Some("medium") => "medium",
                Some("high") => "high",
                Some("critical") => "critical",
                Some(other) => {
                    return Err(mlua::Error::runtime(format!(
                        "ctx:finding: severity {other:?} is not info, low, medium, high or critical"
                    )))
                }
            };
            let title = spec
                .raw_get::<Option<String>>("title")?
                .ok_or_else(|| mlua::Error::runtime("ctx:finding: 'title' (a string) is missing"))?;
            let data = to_json(&spec.raw_get::<Value>("data")?)
                .map_err(|e| mlua::Error::runtime(format!("ctx:finding: data: {e}")))?;
            let title: String = title.chars().take(MAX_TITLE).collect();
            with_run(&c, |run| {
                if run.out.findings.len() >= MAX_FINDINGS {
                    return Err(mlua::Error::runtime(format!("ctx:finding: more than {MAX_FINDINGS} findings")));
                }
                run.out.findings.push(Finding { severity, title, data });
                Ok(())
            })?
        })?,
    )?;

    let c = cur.clone();
    methods.raw_set(
        "log",
        lua.create_function(move |_, mut args: MultiValue| {
            args.pop_front();
            log_line(&c, &args)
        })?,
    )?;

    let (c, m, g, b) = (cur.clone(), meter.clone(), guard.clone(), budgets.clone());
    methods.raw_set(
        "connect",
        lua.create_async_function(move |lua, (_ctx, opts): (Value, Option<Table>)| {
            let (c, m, g, b) = (c.clone(), m.clone(), g.clone(), b.clone());
            async move {
                let req = ConnectRequest::from_lua(opts.as_ref())?;
                match open_socket(&c, &m, &g, &b, &req).await {
                    Ok(sock) => Ok((
                        Value::UserData(lua.create_userdata(LuaSocket { sock, cur: c, meter: m, budgets: b })?),
                        Value::Nil,
                    )),
                    Err(e) => Ok((Value::Nil, Value::String(lua.create_string(e)?))),
                }
            }
        })?,
    )?;

    // ---- ctx:ssh_auth_methods{port=, user=} (begin; see engine/plugins/ssh.rs) ----
    // The methods an SSH server offers `user` (default "root") after a "none"
    // request: a list of names, or nil, why. The connection takes the same
    // path as ctx:connect (guard, socket budget); the exchange ends by the
    // run's deadline and every byte it read is charged to the run.
    let (c, m, g, b) = (cur.clone(), meter.clone(), guard.clone(), budgets.clone());
    methods.raw_set(
        "ssh_auth_methods",
        lua.create_async_function(move |lua, (_ctx, opts): (Value, Option<Table>)| {
            let (c, m, g, b) = (c.clone(), m.clone(), g.clone(), b.clone());
            async move {
                let failed = |e: String| Ok((Value::Nil, Value::String(lua.create_string(e)?)));
                let mut req = ConnectRequest::from_lua(opts.as_ref())?;
                req.tls = None;
                let user = match opts.as_ref().map(|o| o.raw_get::<Value>("user")).transpose()? {
                    None | Some(Value::Nil) => "root".to_string(),
                    Some(Value::String(s)) if s.as_bytes().len() <= 256 && !s.as_bytes().contains(&0) => {
                        s.to_string_lossy()
                    }
                    Some(other) => {
                        return Err(mlua::Error::runtime(format!(
                            "ctx:ssh_auth_methods: user must be a name of at most 256 bytes, not {other:?}"
                        )))
                    }
                };
                let sock = match open_socket(&c, &m, &g, &b, &req).await {
                    Ok(sock) => sock,
                    Err(e) => return failed(e),
                };
                let conn = sock.lock().await.conn.take();
                let Some(crate::service::detect::Conn::Plain(stream)) = conn else {
                    return failed("ctx:ssh_auth_methods: not a plain TCP connection".into());
                };
                let deadline = m.epoch + Duration::from_nanos(m.deadline_ns.load(Ordering::Relaxed));
                let until = tokio::time::Instant::from_std(deadline);
                let left = with_run(&c, |r| b.read_bytes.saturating_sub(r.read))?;
                let (result, read) = super::ssh::auth_methods_counted(stream, &user, until, left).await;
                if !charge(&c, &m, &b, usize::try_from(read).unwrap_or(usize::MAX)) {
                    return failed(format!("{BUDGET_PREFIX}: read more than {} bytes", b.read_bytes));
                }
                match result {
                    Ok(names) => Ok((Value::Table(lua.create_sequence_from(names)?), Value::Nil)),
                    Err(e) => failed(e),
                }
            }
        })?,
    )?;
    // ---- ctx:ssh_auth_methods (end) ----

    let http = lua.create_table()?;
    for method in ["get", "head", "request"] {
        let (c, m, g, b) = (cur.clone(), meter.clone(), guard.clone(), budgets.clone());
        http.raw_set(
            method,
            lua.create_async_function(move |lua, mut args: MultiValue| {
                let (c, m, g, b) = (c.clone(), m.clone(), g.clone(), b.clone());
                async move {
                    args.pop_front(); // ctx.http itself
                    let verb = match method {
                        "get" => "GET".to_string(),
                        "head" => "HEAD".to_string(),
                        _ => match args.pop_front() {
                            Some(Value::String(s)) => s.to_string_lossy().to_ascii_uppercase(),
                            _ => return Err(mlua::Error::runtime("ctx.http:request(method, path, opts)")),
                        },
                    };
                    let path = match args.pop_front() {
                        Some(Value::String(s)) => s.to_string_lossy(),
                        None | Some(Value::Nil) => "/".into(),
                        Some(other) => {
                            return Err(mlua::Error::runtime(format!(
                                "path must be a string, not a {}",
                                other.type_name()
                            )))
                        }
                    };
                    let opts = match args.pop_front() {
                        Some(Value::Table(t)) => Some(t),
                        _ => None,
                    };
                    match http_call(&lua, &c, &m, &g, &b, &verb, &path, opts.as_ref()).await {
                        Ok(t) => Ok((Value::Table(t), Value::Nil)),
                        Err(HttpError::Lua(e)) => Err(e),
                        Err(HttpError::Failed(e)) => Ok((Value::Nil, Value::String(lua.create_string(e)?))),
                    }
                }
            })?,
        )?;
    }
    http.set_readonly(true);
    methods.raw_set("http", http)?;

    let meta = lua.create_table()?;
    meta.raw_set("__index", methods)?;
    meta.raw_set("__metatable", "ctx")?;
    meta.set_readonly(true);
    Ok(meta)
}

/// `ctx:connect{port=, host=, tls=, timeout=}`.
struct ConnectRequest {
    host: Option<String>,
    port: Option<u16>,
    tls: Option<TlsOptions>,
    timeout: Duration,
}

impl ConnectRequest {
    fn from_lua(opts: Option<&Table>) -> mlua::Result<ConnectRequest> {
        let mut req = ConnectRequest { host: None, port: None, tls: None, timeout: SOCKET_TIMEOUT };
        let Some(o) = opts else { return Ok(req) };
        req.host = o.raw_get::<Option<String>>("host")?;
        req.port = match o.raw_get::<Value>("port")? {
            Value::Nil => None,
            Value::Integer(p) if (1..=65535).contains(&p) => Some(p as u16),
            other => return Err(mlua::Error::runtime(format!("ctx:connect: bad port {other:?}"))),
        };
        if let Some(ms) = o.raw_get::<Option<f64>>("timeout")? {
            req.timeout = Duration::from_millis(ms.clamp(1.0, 60_000.0) as u64);
        }
        req.tls = match o.raw_get::<Value>("tls")? {
            Value::Nil | Value::Boolean(false) => None,
            Value::Boolean(true) => Some(TlsOptions::default()),
            Value::Table(t) => Some(tls_options(&t)?),
            other => {
                return Err(mlua::Error::runtime(format!("ctx:connect: tls must be true or a table, not {other:?}")))
            }
        };
        Ok(req)
    }
}

fn tls_options(t: &Table) -> mlua::Result<TlsOptions> {
    let mut o = TlsOptions::default();
    if let Some(v) = t.raw_get::<Option<Table>>("versions")? {
        for s in v.sequence_values::<String>() {
            o.versions.push(match s?.as_str() {
                "1.2" | "TLSv1.2" => 12,
                "1.3" | "TLSv1.3" => 13,
                other => {
                    return Err(mlua::Error::runtime(format!("TLS version {other:?}: moonscan speaks 1.2 and 1.3")))
                }
            });
        }
    }
    if let Some(a) = t.raw_get::<Option<Table>>("alpn")? {
        let mut list = Vec::new();
        for s in a.sequence_values::<mlua::String>() {
            let name = s?.as_bytes().to_vec();
            if name.is_empty() || name.len() > 255 || list.len() >= 64 {
                return Err(mlua::Error::runtime("ctx:connect: ALPN names are 1-255 bytes, at most 64 of them"));
            }
            list.push(name);
        }
        o.alpn = Some(list);
    }
    Ok(o)
}

/// The one way a plugin opens a connection: guard, socket budget, deadline.
async fn open_socket(
    cur: &Current,
    meter: &Meter,
    guard: &Guard,
    b: &Budgets,
    req: &ConnectRequest,
) -> Result<SharedSocket, String> {
    let info = with_run(cur, |r| r.info.clone()).map_err(|e| e.to_string())?;
    let ip: IpAddr = match &req.host {
        None => info.ip,
        Some(h) => match h.parse() {
            Ok(ip) => ip,
            Err(_) => {
                return Err(refuse(
                    cur,
                    format!("{h:?} is a name; plugins connect to addresses only, and only to the host being scanned"),
                ))
            }
        },
    };
    let port = req.port.unwrap_or(info.port);
    // Every attempt counts, refused ones too: a plugin cannot knock forever.
    let over = with_run(cur, |r| {
        r.sockets += 1;
        r.sockets > b.sockets
    })
    .map_err(|e| e.to_string())?;
    if over {
        meter.trip(Trip::Sockets);
        return Err(format!("{BUDGET_PREFIX}: more than {} sockets", b.sockets));
    }
    if let Err(why) = guard.check(info.ip, ip, port) {
        return Err(refuse(cur, format!("connect to {ip}:{port} refused: {why}")));
    }
    let until = tokio::time::Instant::now() + req.timeout;
    let (conn, tls) = net::open(ip, port, req.tls.as_ref(), until).await?;
    let sock =
        Arc::new(tokio::sync::Mutex::new(Socket { conn: Some(conn), pending: Vec::new(), timeout: req.timeout, tls }));
    with_run(cur, |r| r.socks.push(sock.clone())).map_err(|e| e.to_string())?;
    Ok(sock)
}

/// Most refusals one run reports (each also counts against its socket budget).
const MAX_REFUSALS: usize = 16;

/// Records a connection the guard refused and returns its message.
fn refuse(cur: &Current, why: String) -> String {
    let _ = with_run(cur, |r| {
        if r.out.refused.len() < MAX_REFUSALS {
            r.out.refused.push(why.clone());
        }
    });
    why
}

/// Charges `n` bytes read to the run; false once the budget is spent.
fn charge(cur: &Current, meter: &Meter, b: &Budgets, n: usize) -> bool {
    let over = with_run(cur, |r| {
        r.read += n as u64;
        r.read > b.read_bytes
    })
    .unwrap_or(true);
    if over {
        meter.trip(Trip::Read);
    }
    !over
}

struct LuaSocket {
    sock: SharedSocket,
    cur: Current,
    meter: Arc<Meter>,
    budgets: Arc<Budgets>,
}

impl LuaSocket {
    /// Reads once into `pending` (at most `max` bytes); Ok(0) at end of stream.
    async fn fill(&self, s: &mut Socket, max: usize) -> Result<usize, String> {
        let timeout = s.timeout;
        let conn = s.conn.as_mut().ok_or("socket is closed")?;
        let mut buf = vec![0u8; max.clamp(1, 64 * 1024)];
        let n = match tokio::time::timeout(timeout, conn.read(&mut buf)).await {
            Err(_) => return Err("timeout".into()),
            Ok(Err(e)) => return Err(e.to_string()),
            Ok(Ok(n)) => n,
        };
        if !charge(&self.cur, &self.meter, &self.budgets, n) {
            s.conn = None;
            return Err(format!("{BUDGET_PREFIX}: read more than {} bytes", self.budgets.read_bytes));
        }
        s.pending.extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

fn lua_result(lua: &Lua, r: Result<Vec<u8>, String>) -> mlua::Result<(Value, Value)> {
    Ok(match r {
        Ok(data) => (Value::String(lua.create_string(&data)?), Value::Nil),
        Err(e) => (Value::Nil, Value::String(lua.create_string(e)?)),
    })
}

impl UserData for LuaSocket {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_async_method("send", |lua, this, data: mlua::String| async move {
            let mut s = this.sock.lock().await;
            let timeout = s.timeout;
            let r = match s.conn.as_mut() {
                None => Err("socket is closed".to_string()),
                Some(conn) => match tokio::time::timeout(timeout, conn.send(&data.as_bytes())).await {
                    Err(_) => Err("timeout".into()),
                    Ok(r) => r.map_err(|e| e.to_string()),
                },
            };
            match r {
                Ok(()) => Ok((Value::Boolean(true), Value::Nil)),
                Err(e) => Ok((Value::Nil, Value::String(lua.create_string(e)?))),
            }
        });
        methods.add_async_method("recv", |lua, this, max: Option<usize>| async move {
            let max = max.unwrap_or(4096).clamp(1, net::MAX_RECV);
            let mut s = this.sock.lock().await;
            if s.pending.is_empty() {
                match this.fill(&mut s, max).await {
                    Ok(0) => return lua_result(&lua, Err("closed".into())),
                    Ok(_) => {}
                    Err(e) => return lua_result(&lua, Err(e)),
                }
            }
            let n = s.pending.len().min(max);
            let data: Vec<u8> = s.pending.drain(..n).collect();
            lua_result(&lua, Ok(data))
        });
        methods.add_async_method("recv_until", |lua, this, (pattern, max): (String, Option<usize>)| async move {
            let max = max.unwrap_or(64 * 1024).clamp(1, net::MAX_RECV);
            let re = crate::service::rules::compile(&pattern).map_err(|e| mlua::Error::runtime(e.to_string()))?;
            let mut s = this.sock.lock().await;
            loop {
                let limit = s.pending.len().min(max);
                let found = re.find(&s.pending[..limit]).map(|m| m.end());
                if let Some(end) = found {
                    let data: Vec<u8> = s.pending.drain(..end).collect();
                    return lua_result(&lua, Ok(data));
                }
                if s.pending.len() >= max {
                    return lua_result(&lua, Err(format!("no match in the first {max} bytes")));
                }
                let want = max - s.pending.len();
                match this.fill(&mut s, want).await {
                    Ok(0) => return lua_result(&lua, Err("closed".into())),
                    Ok(_) => {}
                    Err(e) => return lua_result(&lua, Err(e)),
                }
            }
        });
        methods.add_async_method("close", |_, this, ()| async move {
            this.sock.lock().await.conn = None;
            Ok(true)
        });
        methods.add_async_method("tls", |lua, this, ()| async move {
            let s = this.sock.lock().await;
            match &s.tls {
                Some(t) => Ok(Value::Table(tls_table(&lua, t)?)),
                None => Ok(Value::Nil),
            }
        });
    }
}

enum HttpError {
    Lua(mlua::Error),
    Failed(String),
}

impl From<mlua::Error> for HttpError {
    fn from(e: mlua::Error) -> HttpError {
        HttpError::Lua(e)
    }
}

/// `ctx.http:get(path, opts)` and friends: one request on a new connection
/// (TLS when the service was found inside TLS, or `opts.tls`).
#[allow(clippy::too_many_arguments)]
async fn http_call(
    lua: &Lua,
    cur: &Current,
    meter: &Arc<Meter>,
    guard: &Guard,
    b: &Arc<Budgets>,
    verb: &str,
    path: &str,
    opts: Option<&Table>,
) -> Result<Table, HttpError> {
    let info = with_run(cur, |r| r.info.clone())?;
    let mut req = ConnectRequest { host: None, port: None, tls: None, timeout: SOCKET_TIMEOUT };
    let mut headers = Vec::new();
    let mut body = Vec::new();
    let mut max = MAX_HTTP;
    let mut tls = info.tunnel;
    if let Some(o) = opts {
        req = ConnectRequest::from_lua(Some(o))?;
        if let Some(t) = o.raw_get::<Option<bool>>("tls")? {
            tls = t;
        }
        if let Some(h) = o.raw_get::<Option<Table>>("headers")? {
            for pair in h.pairs::<String, String>() {
                let (k, v) = pair?;
                if k.contains(['\r', '\n', ':']) || v.contains(['\r', '\n']) {
                    return Err(HttpError::Failed(format!("bad header {k:?}")));
                }
                headers.push((k, v));
            }
        }
        if let Some(bd) = o.raw_get::<Option<mlua::String>>("body")? {
            body = bd.as_bytes().to_vec();
        }
        if let Some(m) = o.raw_get::<Option<usize>>("max")? {
            max = m.clamp(1, MAX_HTTP);
        }
    }
    if tls && req.tls.is_none() {
        req.tls = Some(TlsOptions::default());
    }
    if path.contains(['\r', '\n', ' ']) || verb.is_empty() || !verb.bytes().all(|c| c.is_ascii_uppercase()) {
        return Err(HttpError::Failed(format!("bad request line {verb} {path}")));
    }
    let sock = open_socket(cur, meter, guard, b, &req).await.map_err(HttpError::Failed)?;
    let mut s = sock.lock().await;
    let host = match info.ip {
        IpAddr::V6(v6) => format!("[{v6}]"),
        v4 => v4.to_string(),
    };
    let request = net::request_bytes(verb, path, &host, &headers, &body);
    let timeout = s.timeout;
    let conn = s.conn.as_mut().ok_or_else(|| HttpError::Failed("closed".into()))?;
    match tokio::time::timeout(timeout, conn.send(&request)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(HttpError::Failed(format!("send: {e}"))),
        Err(_) => return Err(HttpError::Failed("send timed out".into())),
    }
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match tokio::time::timeout(timeout, conn.read(&mut buf)).await {
            Err(_) => return Err(HttpError::Failed("timeout reading the response".into())),
            Ok(Err(e)) if raw.is_empty() => return Err(HttpError::Failed(format!("recv: {e}"))),
            Ok(Err(_)) | Ok(Ok(0)) => break,
            Ok(Ok(n)) => n,
        };
        if !charge(cur, meter, b, n) {
            return Err(HttpError::Failed(format!("{BUDGET_PREFIX}: read more than {} bytes", b.read_bytes)));
        }
        raw.extend_from_slice(&buf[..n]);
        if raw.len() >= max {
            raw.truncate(max);
            break;
        }
        // HEAD and bodiless answers end at the blank line.
        if verb == "HEAD" && raw.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    s.conn = None;
    let resp = net::parse_response(&raw).map_err(HttpError::Failed)?;
    let t = lua.create_table()?;
    t.raw_set("status", resp.status)?;
    t.raw_set("reason", resp.reason)?;
    t.raw_set("version", resp.version)?;
    let h = lua.create_table()?;
    let list = lua.create_table()?;
    for (i, (k, v)) in resp.headers.iter().enumerate() {
        // A repeated header keeps its values joined, as HTTP allows.
        let joined = match h.raw_get::<Option<String>>(k.as_str())? {
            Some(prev) => format!("{prev}, {v}"),
            None => v.clone(),
        };
        h.raw_set(k.as_str(), joined)?;
        let pair = lua.create_table()?;
        pair.raw_set(1, k.as_str())?;
        pair.raw_set(2, v.as_str())?;
        list.raw_set(i + 1, pair)?;
    }
    t.raw_set("headers", h)?;
    t.raw_set("header_list", list)?;
    t.raw_set("body", lua.create_string(&resp.body)?)?;
    Ok(t)
}

/// `re.match(s, pattern)`, `re.find(s, pattern)`, `re.captures(s, pattern)`,
/// `re.gsub`-free by design: the regex crate, compiled with the probe
/// rules' size limits, on bytes.
fn regex_module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let compile = |p: &str| crate::service::rules::compile(p).map_err(|e| mlua::Error::runtime(format!("re: {e}")));
    t.raw_set(
        "match",
        lua.create_function(move |_, (s, p): (mlua::String, String)| Ok(compile(&p)?.is_match(&s.as_bytes())))?,
    )?;
    t.raw_set(
        "find",
        lua.create_function(move |_, (s, p): (mlua::String, String)| {
            Ok(match compile(&p)?.find(&s.as_bytes()) {
                Some(m) => (Some(m.start() + 1), Some(m.end())),
                None => (None, None),
            })
        })?,
    )?;
    t.raw_set(
        "captures",
        lua.create_function(move |lua, (s, p): (mlua::String, String)| {
            let re = compile(&p)?;
            let bytes = s.as_bytes();
            let Some(caps) = re.captures(&bytes) else { return Ok(Value::Nil) };
            let out = lua.create_table()?;
            for (i, name) in re.capture_names().enumerate() {
                if let Some(m) = caps.get(i) {
                    let v = lua.create_string(m.as_bytes())?;
                    out.raw_set(i, v.clone())?;
                    if let Some(name) = name {
                        out.raw_set(name, v)?;
                    }
                }
            }
            Ok(Value::Table(out))
        })?,
    )?;
    Ok(t)
}

/// `hash.sha256(s)`, `hash.md5(s)` (hex), `hash.base64(s)`, `hash.unbase64(s)`.
fn hash_module(lua: &Lua) -> mlua::Result<Table> {
    use base64::Engine;
    use md5::Digest as _;
    let t = lua.create_table()?;
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    t.raw_set(
        "sha256",
        lua.create_function(move |_, s: mlua::String| Ok(hex(&sha2::Sha256::digest(&*s.as_bytes()))))?,
    )?;
    t.raw_set("md5", lua.create_function(move |_, s: mlua::String| Ok(hex(&md5::Md5::digest(&*s.as_bytes()))))?)?;
    t.raw_set(
        "base64",
        lua.create_function(|_, s: mlua::String| Ok(base64::engine::general_purpose::STANDARD.encode(&*s.as_bytes())))?,
    )?;
    t.raw_set(
        "unbase64",
        lua.create_function(|lua, s: mlua::String| {
            match base64::engine::general_purpose::STANDARD.decode(&*s.as_bytes()) {
                Ok(b) => Ok(Value::String(lua.create_string(b)?)),
                Err(_) => Ok(Value::Nil),
            }
        })?,
    )?;
    Ok(t)
}

impl std::fmt::Debug for Vm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vm").field("plugins", &self.plugins.len()).finish()
    }
}
