//! The Lua host: one sandboxed Luau VM holding every selected plugin, and
//! the `ctx` API plugins run against.
//!
//! In: checked plugins, budgets, script arguments, the scan's [`Guard`], and
//! one open port at a time. Out: a [`RunOutput`] per plugin run (findings,
//! log lines, or why the run was stopped). What always holds:
//! - The VM is Luau with `sandbox(true)`: libraries and globals are
//!   read-only; `io`, `os.execute`, `debug`, `load`/`loadstring`,
//!   `getfenv`/`setfenv`, `string.dump` and `print` do not exist (`print`
//!   is `ctx:log` by another name); only text compiled by the host is loaded.
//!   `require` finds modules by name in the plugin's libraries only
//!   ([`super::library`]): each runs once per VM, in a fresh environment,
//!   within the budgets of the run that first requires it.
//! - Every run gets a fresh environment: the plugin chunk is instantiated
//!   again from its bytecode with a new global table, so nothing one run
//!   writes is seen by the next.
//! - Budgets per run (wall time, interrupt steps, bytes read, sockets) and
//!   per VM (memory) stop a run that exceeds them, reported as `budget`. A
//!   tripped budget stays tripped for the rest of the run: the interrupt
//!   raises again at the next step and `pcall`, `xpcall` and
//!   `coroutine.resume` re-raise it, so a plugin cannot swallow the stop.
//!   The budgets and their meter are in [`super::budget`]; what a plugin
//!   table may declare, and how it is checked, in [`super::meta`].

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mlua::{ChunkMode, Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};
use serde_json::Value as Json;

use super::api::{ctx_methods, log_line, tls_table, Host, MAX_LOGS, MAX_LOG_LINE};
use super::budget::{charge_output, charge_text, Budgets, Meter, OutputAllowance, Trip};
use super::libs::{hash_module, regex_module, PatternCache};
use super::meta::{check_table, Meta};
use super::net::{Guard, SharedSocket};
use super::value::ConvertError;
use super::{Libraries, Plugin};
use crate::findings::{ErrorKind, Service, Severity};

/// One finding a run reported.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub severity: Severity,
    pub title: String,
    pub data: Json,
    /// The script result's output text (see [`crate::findings::FindingEvent::output`]).
    pub output: Option<String>,
    /// What this finding is about, given with it.
    pub about: crate::findings::About,
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
    /// `ctx:tls_enum` calls (one per run).
    pub(super) tls_enums: u32,
    pub(super) read: u64,
    /// Bytes of findings this run may still report.
    pub(super) output_left: u64,
    pub(super) out: RunOutput,
    pub(super) socks: Vec<SharedSocket>,
    /// `ctx:udp` sockets, closed when the run ends.
    pub(super) datagrams: Vec<super::udp::SharedDatagram>,
}

pub(super) type Current = Arc<Mutex<Option<RunCtx>>>;

pub(super) fn with_run<R>(cur: &Current, f: impl FnOnce(&mut RunCtx) -> R) -> mlua::Result<R> {
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
    scan_output: OutputAllowance,
    /// Set when the runs in flight must end at once (Ctrl-C, after a grace).
    cut: Option<crate::discovery::Stop>,
    current: Current,
    requires: Requires,
    ctx_methods: Table,
    args: Table,
    plugins: Vec<Plugin>,
    budgets: Budgets,
    verbosity: u8,
    tape: Arc<std::sync::OnceLock<Arc<super::tape::Tape>>>,
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

/// What a plugin file's top-level code may take when it is checked: a
/// plugin table is built in microseconds, and a scan that misses the
/// metadata cache (after an upgrade) runs each installed file once.
pub const INSPECT_WALL: Duration = Duration::from_millis(250);

/// Runs a plugin chunk once in a scratch VM and checks its table.
pub(crate) fn inspect(bytecode: &[u8], path: &Path, libs: &Libraries) -> crate::Result<Meta> {
    let bad = |m: String| crate::Error::new(crate::ErrorKind::Config, m);
    let budgets = Budgets { wall: INSPECT_WALL, steps: 1_000_000, memory: 16 << 20, ..Budgets::default() };
    let vm = Vm::bare(&budgets, Guard::offline(), &BTreeMap::new(), OutputAllowance::new(0))
        .map_err(|e| crate::Error::with_source(crate::ErrorKind::Config, "cannot make a VM", e))?;
    vm.meter.start(budgets.wall, budgets.steps);
    let table = vm
        .env_for(libs)
        .and_then(|env| vm.instantiate(bytecode, path.to_string_lossy().as_ref(), &env))
        .and_then(|f| f.call::<Value>(()));
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
            tape: Arc::default(),
        };
        let tape = host.tape.clone();
        let ctx_methods = ctx_methods(&lua, &host)?;
        let requires =
            Requires { env_meta, loaded: lua.create_table()?, loading: Arc::default(), envs: Arc::default() };
        Ok(Vm {
            lua,
            meter,
            scan_output,
            cut: None,
            current,
            requires,
            ctx_methods,
            args: args_table,
            plugins: Vec::new(),
            budgets: budgets.clone(),
            verbosity: 0,
            tape,
        })
    }

    /// Records the runs' conversations on `tape`, or replays them from it
    /// (`plugins test --record/--replay`); set once, before the first run.
    pub fn set_tape(&self, tape: Arc<super::tape::Tape>) -> bool {
        self.tape.set(tape).is_ok()
    }

    /// The scan's `-v` level, as `ctx.verbosity` shows it (plus one for a
    /// plugin selected by name, as NSE's `nmap.verbosity()`).
    pub fn set_verbosity(&mut self, level: u8) {
        self.verbosity = level;
    }

    pub fn plugins(&self) -> &[Plugin] {
        &self.plugins
    }

    /// Lua memory in use.
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// Plugin `p`'s chunk, compiled at its first use in the process.
    fn plugin_chunk(&self, p: &Plugin) -> mlua::Result<Function> {
        let bytecode =
            p.code.bytecode().map_err(|e| mlua::Error::RuntimeError(format!("{}: {e}", p.path.display())))?;
        let env = self.env_for(&p.libs)?;
        self.instantiate(bytecode, &p.id, &env)
    }

    /// The environment metatable of code that requires from `libs` (see [`Requires::env_for`]).
    fn env_for(&self, libs: &Libraries) -> mlua::Result<Table> {
        self.requires.env_for(&self.lua, libs)
    }

    /// The plugin chunk as a function with a fresh global table whose
    /// metatable is `meta` (from [`Vm::env_for`]).
    fn instantiate(&self, bytecode: &[u8], name: &str, meta: &Table) -> mlua::Result<Function> {
        let env = self.lua.create_table()?;
        env.set_metatable(Some(meta.clone()))?;
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
            let t: Table = self.plugin_chunk(p)?.call_async(()).await?;
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
        t.raw_set("tunnel", info.tunnel.map(|t| t.as_str()))?;
        t.raw_set("tls", info.tls.is_some())?;
        Ok(t)
    }

    fn ctx_table(&self, p: &Plugin, info: &Service) -> mlua::Result<Table> {
        let t = self.lua.create_table()?;
        t.raw_set("verbosity", self.verbosity.saturating_add(u8::from(p.named)))?;
        t.set_metatable(Some(self.ctx_methods.clone()))?;
        t.raw_set("ip", info.ip.to_string())?;
        t.raw_set("port", info.port)?;
        t.raw_set("protocol", info.proto.as_str())?;
        t.raw_set("service", info.known_service())?;
        t.raw_set("product", info.id.product.as_deref())?;
        t.raw_set("version", info.id.version.as_deref())?;
        t.raw_set("tunnel", info.tunnel.map(|t| t.as_str()))?;
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
            tls_enums: 0,
            read: 0,
            output_left: self.budgets.output,
            out: RunOutput::default(),
            socks: Vec::new(),
            datagrams: Vec::new(),
        });
        self.meter.start(self.budgets.wall, self.budgets.steps);
        let call = async {
            let t: Table = self.plugin_chunk(p)?.call_async(()).await?;
            let run: Function = t.raw_get("run")?;
            let thread = self.lua.create_thread(run)?;
            thread.into_async::<MultiValue>(self.ctx_table(p, &info)?)?.await
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
        if matches!(tripped, Some(Trip::Wall | Trip::Stopped)) {
            // A run stopped while it waited keeps, in its dropped coroutine,
            // the host call it waited in (and the socket that call holds):
            // collected now, so every socket of the run closes with it.
            let _ = self.lua.gc_collect();
        }
        let run = self.current.lock().unwrap_or_else(|e| e.into_inner()).take();
        let (mut out, mut output_left) = match run {
            Some(r) => {
                for s in r.socks {
                    if let Ok(mut s) = s.try_lock() {
                        s.conn = None;
                    }
                }
                for d in r.datagrams {
                    if let Ok(mut d) = d.try_lock() {
                        d.close();
                    }
                }
                (r.out, r.output_left)
            }
            None => (RunOutput::default(), 0),
        };
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

/// What `require` needs in one VM: the sandbox's globals, the modules
/// loaded, the ones being loaded (a cycle's trace), and one environment
/// metatable per set of libraries.
#[derive(Clone)]
struct Requires {
    env_meta: Table,
    /// Modules loaded, by `origin NUL name`.
    loaded: Table,
    /// The modules being loaded now, by `origin NUL name`, with their files.
    loading: Arc<Mutex<Vec<(String, String)>>>,
    /// Per set of libraries (by their addresses): the metatable of the
    /// environments of code that requires from it.
    envs: Arc<Mutex<Vec<LibEnv>>>,
}

/// The addresses of a set of libraries, and the environment metatable of
/// code that requires from it.
type LibEnv = (Vec<usize>, Table);

/// Most tables one module may hold (its own, those in it, its globals'):
/// each is made read-only once it has loaded; more is an error.
pub(super) const MAX_FROZEN: usize = 10_000;

impl Requires {
    /// The environment metatable of code that requires from `libs`: the
    /// sandbox's globals, and a `require` that looks in `libs` (made once
    /// per VM for each set of libraries).
    fn env_for(&self, lua: &Lua, libs: &Libraries) -> mlua::Result<Table> {
        let ptrs = || libs.0.iter().map(|l| Arc::as_ptr(l) as usize);
        let mut envs = self.envs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, t)) = envs.iter().find(|(k, _)| k.iter().copied().eq(ptrs())) {
            return Ok(t.clone());
        }
        let key: Vec<usize> = ptrs().collect();
        // meta.__index = base; base.require = require; base's own
        // metatable leads to the globals.
        let base = lua.create_table()?;
        base.set_metatable(Some(self.env_meta.clone()))?;
        let meta = lua.create_table()?;
        meta.raw_set("__index", base.clone())?;
        meta.raw_set("__metatable", "sandboxed")?;
        base.raw_set("require", self.require_fn(lua, libs.clone())?)?;
        base.set_readonly(true);
        meta.set_readonly(true);
        envs.push((key, meta.clone()));
        Ok(meta)
    }

    /// `require(name)`: the module `name` of `libs`, loaded at its first
    /// `require` in this VM and the same value after. A module runs with
    /// a fresh environment that requires from its own library on (a core
    /// module never sees a pack's); its tables, and its environment, are
    /// read-only once it has loaded.
    fn require_fn(&self, lua: &Lua, libs: Libraries) -> mlua::Result<Function> {
        let this = self.clone();
        lua.create_function(move |lua, name: String| {
            let Some((at, m)) = libs.find(&name) else {
                let looked: Vec<String> = libs.0.iter().map(|l| l.origin.clone()).collect();
                return Err(mlua::Error::runtime(format!(
                    "require \"{name}\": no module lib/{name}.lua in {}",
                    if looked.is_empty() { "no library".to_string() } else { looked.join(", ") }
                )));
            };
            let origin = &libs.0[at].origin;
            let key = format!("{origin}\0{name}");
            if let Some(v) = this.loaded.raw_get::<Option<Value>>(key.as_str())? {
                return Ok(v);
            }
            {
                let mut stack = this.loading.lock().unwrap_or_else(|e| e.into_inner());
                if stack.iter().any(|(k, _)| *k == key) {
                    let files: Vec<&str> = stack.iter().map(|(_, f)| f.as_str()).collect();
                    return Err(mlua::Error::runtime(format!("require cycle: {} -> {}", files.join(" -> "), m.file)));
                }
                stack.push((key.clone(), m.file.clone()));
            }
            let result = (|| -> mlua::Result<Value> {
                let bytecode = m.code.bytecode().map_err(|e| mlua::Error::runtime(format!("{}: {e}", m.file)))?;
                let env = lua.create_table()?;
                env.set_metatable(Some(this.env_for(lua, &libs.from(at))?))?;
                let chunk = lua
                    .load(bytecode)
                    .set_mode(ChunkMode::Binary)
                    .set_name(format!("={}", m.file))
                    .set_environment(env.clone())
                    .into_function()?;
                let v: Value = chunk.call(name.as_str())?;
                // Shared by every later run in this VM: read-only, so one
                // run cannot leave state in it for the next.
                freeze(&env)?;
                if let Value::Table(t) = &v {
                    freeze(t)?;
                }
                Ok(if v.is_nil() { Value::Boolean(true) } else { v })
            })();
            this.loading.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let v = result?;
            this.loaded.raw_set(key, v.clone())?;
            Ok(v)
        })
    }
}

/// Makes `t` and the tables it holds (keys, values, metatables) read-only;
/// more than [`MAX_FROZEN`] of them is an error (none could stay writable).
fn freeze(t: &Table) -> mlua::Result<()> {
    let mut todo = vec![t.clone()];
    let mut seen = std::collections::HashSet::new();
    while let Some(t) = todo.pop() {
        if !seen.insert(t.to_pointer() as usize) {
            continue;
        }
        if seen.len() > MAX_FROZEN {
            return Err(mlua::Error::runtime(format!("a module may hold at most {MAX_FROZEN} tables")));
        }
        if let Some(m) = t.metatable() {
            todo.push(m);
        }
        for pair in t.pairs::<Value, Value>() {
            let (k, v) = pair?;
            for x in [k, v] {
                if let Value::Table(inner) = x {
                    todo.push(inner);
                }
            }
        }
        t.set_readonly(true);
    }
    Ok(())
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

/// What `run` returned: nothing, `nil, "why"` (logged), or the script's
/// result, as an NSE script returns it: a table (its structured output,
/// with the text NSE would render from it), a table and its text, or text
/// alone. The result is a finding titled with the plugin's id.
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
        (Some(Value::String(text)), _) => {
            let text = text.to_string_lossy();
            match charge_text(text.len() as u64, left, scan) {
                Ok(()) => {
                    let output = Some(text.to_string());
                    let title = id.to_string();
                    out.findings.push(Finding {
                        severity: Severity::Info,
                        title,
                        data: Json::Null,
                        output,
                        about: Default::default(),
                    });
                }
                // The caller reports the budget that tripped.
                Err(t) => meter.trip(t),
            }
            None
        }
        (Some(v), text) => match charge_output(&v, left, scan, meter) {
            Ok(data) => {
                let text = match text {
                    Some(Value::String(t)) => t.to_string_lossy().to_string(),
                    _ => crate::findings::script_text::render(&data),
                };
                match charge_text(text.len() as u64, left, scan) {
                    Ok(()) => {
                        let output = Some(text);
                        out.findings.push(Finding {
                            severity: Severity::Info,
                            title: id.to_string(),
                            data,
                            output,
                            about: Default::default(),
                        });
                    }
                    Err(t) => meter.trip(t),
                }
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
