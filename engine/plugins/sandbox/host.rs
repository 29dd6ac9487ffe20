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
//!   Host calls fail with error values (`sandbox::failure`: a kind and a
//!   message); the `errors` global makes them, and `assert` and
//!   `string.format`'s `%s` take them as their message.
//!   `require` finds modules by name in the plugin's libraries only
//!   ([`crate::plugins::load::library`]): each runs at its first `require` in a run, in a
//!   fresh environment, within that run's budgets.
//! - Every run gets a fresh environment: the plugin chunk is instantiated
//!   again from its bytecode with a new global table, and the modules it
//!   requires are instances of its own (from their cached bytecode), so
//!   nothing one run writes, in its globals or in a module's tables or
//!   upvalues, is seen by the next run, of this plugin or another, on this
//!   host or another. What stays in the VM between runs (the sandbox's
//!   globals and libraries, the environments' metatables, the script
//!   arguments) is read-only.
//! - Budgets per run (wall time, interrupt steps, bytes read, sockets) and
//!   per VM (memory) stop a run that exceeds them, reported as `budget`. A
//!   tripped budget stays tripped for the rest of the run: the interrupt
//!   raises again at the next step and `pcall`, `xpcall` and
//!   `coroutine.resume` re-raise it, so a plugin cannot swallow the stop.
//!   The budgets, their meter and each run's state are in `run.rs`;
//!   `ctx` in `api.rs`; what a plugin table may declare, and how it
//!   is checked, in [`crate::plugins::load::meta`].

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mlua::{ChunkMode, Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};
use serde_json::Value as Json;

use super::api::Ctx;
use super::builtins::{hash_module, regex_module, PatternCache};
use super::guard::Guard;
use super::run::{Budgets, Meter, OutputAllowance, Run, RunError, RunOutput, Scope, Trip};
use super::value::ConvertError;
use crate::error::ErrorKind;
use crate::findings::Service;
use crate::plugins::load::library::{Libraries, Module};
use crate::plugins::load::meta::{check_table, Meta};
use crate::plugins::load::plugin::Plugin;
use crate::plugins::load::script_args;

/// A sandboxed VM with every selected plugin loaded.
pub struct Vm {
    lua: Lua,
    /// What its runs share: the meter, the budgets, the guard...
    scope: Arc<Scope>,
    /// Set when the runs in flight must end at once (Ctrl-C, after a grace).
    cut: Option<crate::pipeline::Stop>,
    requires: Requires,
    args: Table,
    plugins: Vec<Plugin>,
    /// Each plugin's chunk, loaded from its bytecode at its first run in
    /// this VM; a run calls a clone of it with a fresh environment.
    chunks: Vec<std::sync::OnceLock<Function>>,
    /// Set once a run's table of each plugin was found to declare what the
    /// plugin was selected by (see [`Vm::plugin_table`]).
    declared: Vec<std::sync::OnceLock<()>>,
    verbosity: u8,
}

/// The run in progress, for `print` (a VM runs one plugin at a time).
struct Active(Arc<Run>);

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
pub(crate) fn inspect(bytecode: &[u8], path: &Path, libs: &Libraries) -> crate::error::Result<Meta> {
    let bad = |m: String| crate::error::Error::new(crate::error::ErrorKind::Config, m);
    let budgets = Budgets { wall: INSPECT_WALL, steps: 1_000_000, memory: 16 << 20, ..Budgets::default() };
    let vm = Vm::bare(&budgets, Guard::offline(), &BTreeMap::new(), OutputAllowance::new(0))
        .map_err(|e| crate::error::Error::with_source(crate::error::ErrorKind::Config, "cannot make a VM", e))?;
    let meter = &vm.scope.meter;
    meter.start(budgets.wall, budgets.steps);
    let table = vm
        .env_for(libs)
        .and_then(|env| vm.instantiate(bytecode, path.to_string_lossy().as_ref(), &env))
        .and_then(|f| f.call::<Value>(()));
    let tripped = meter.tripped();
    meter.stop();
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
/// pcall, xpcall and coroutine.resume re-raise a tripped budget; assert
/// and string.format's %s take an error value as its message.
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
-- assert takes an error value as its message (Luau's wants a string), as
-- it took the message itself: `assert(ctx:connect{})` raises "file:line: why".
-- A failed assert is raised here, at the caller's level, so that it names
-- the caller's line as Luau's own does ("file:line: message").
local message, rawassert, tostring = __moonscan_message, assert, tostring
assert = function(...)
    local v, msg = ...
    local n = select('#', ...)
    if v or n == 0 then return rawassert(...) end
    if n == 1 or msg == nil then rawerror("assertion failed!", 2) end
    local text = message(msg)
    if text then rawerror(text, 2) end
    local kind = type(msg)
    if kind == "string" or kind == "number" then rawerror(tostring(msg), 2) end
    return rawassert(...)
end
-- string.format's %s takes an error value as its message (Luau's wants a
-- string). Called through pcall so that a bad argument is reported at the
-- caller's line, as before ("file:line: invalid argument #2 to 'format'").
local rawformat, select, type = string.format, select, type
local function texts(...)
    local n, args = select('#', ...), nil
    for i = 1, n do
        local text = type((select(i, ...))) == "userdata" and message((select(i, ...)))
        if text then
            args = args or { ... }
            args[i] = text
        end
    end
    if args then return table.unpack(args, 1, n) end
    return ...
end
string.format = function(fmt, ...)
    local ok, s = rawpcall(rawformat, fmt, texts(...))
    if ok then return s end
    if check(s) then rawerror(s, 0) end
    rawerror(s, 2)
end
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
        vm.chunks = plugins.iter().map(|_| std::sync::OnceLock::new()).collect();
        vm.declared = plugins.iter().map(|_| std::sync::OnceLock::new()).collect();
        Ok(vm)
    }

    /// Runs in flight end (as `budget`, "stopped") once `cut` is set.
    pub fn cut_by(&mut self, cut: crate::pipeline::Stop) {
        let _ = self.scope.meter.cut.set(cut.clone());
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
        let g = lua.globals();
        Self::strip_globals(&lua, &g)?;
        g.raw_set("__moonscan_check", Self::memory_check(&lua, &meter, budgets.memory as u64)?)?;
        g.raw_set("__moonscan_message", lua.create_function(|_, v: Value| Ok(super::failure::message_of(&v)))?)?;
        lua.load(PRELUDE).set_name("=moonscan prelude").exec()?;
        let patterns = Arc::new(PatternCache::default());
        g.raw_set("re", regex_module(&lua, &patterns)?)?;
        // print is ctx:log by another name, for the run in progress.
        g.raw_set(
            "print",
            lua.create_function(|lua, args: MultiValue| match lua.app_data_ref::<Active>() {
                Some(run) => run.0.log(&args),
                None => Err(mlua::Error::runtime("print used outside of a plugin run")),
            })?,
        )?;
        g.raw_set("hash", hash_module(&lua)?)?;
        g.raw_set("errors", super::failure::errors_module(&lua)?)?;
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

        let scope = Arc::new(Scope {
            meter,
            budgets: budgets.clone(),
            guard,
            scan_output,
            patterns,
            tape: std::sync::OnceLock::new(),
            // A header value holds no line break (the builder refuses one).
            user_agent: args.get(script_args::USER_AGENT).filter(|v| !v.contains(['\r', '\n'])).cloned(),
            // Only a DNS name goes in SNI.
            servername: args
                .get(script_args::SERVERNAME)
                .filter(|v| {
                    rustls::pki_types::DnsName::try_from(v.as_str()).is_ok() && v.parse::<std::net::IpAddr>().is_err()
                })
                .cloned(),
        });
        let requires = Requires {
            env_meta,
            loaded: lua.create_table()?,
            loading: Arc::default(),
            chunks: Arc::default(),
            envs: Arc::default(),
        };
        Ok(Vm {
            lua,
            scope,
            cut: None,
            requires,
            args: args_table,
            plugins: Vec::new(),
            chunks: Vec::new(),
            declared: Vec::new(),
            verbosity: 0,
        })
    }

    /// The sandbox's globals: no loading of code, files or modules, no
    /// debug library, no string.dump; os keeps only the clock.
    fn strip_globals(lua: &Lua, g: &Table) -> mlua::Result<()> {
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
        Ok(())
    }

    /// `__moonscan_check`, which the prelude's pcall asks of each caught
    /// error: whether it is the memory budget's trip (which it then trips).
    fn memory_check(lua: &Lua, meter: &Arc<Meter>, memory_limit: u64) -> mlua::Result<mlua::Function> {
        let m = meter.clone();
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
        })
    }

    /// Records the runs' conversations on `tape`, or replays them from it
    /// (`plugins test --record/--replay`); set once, before the first run.
    pub fn set_tape(&self, tape: Arc<super::tape::Tape>) -> bool {
        self.scope.tape.set(tape).is_ok()
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

    /// Plugin `i`'s chunk with a fresh global table and no module loaded
    /// yet (a run's `require`s make instances of its own): its bytecode
    /// (compiled at its first use in the process) is loaded once per VM,
    /// and each run calls a clone of that function (no second load).
    fn plugin_chunk(&self, i: usize) -> mlua::Result<Function> {
        self.requires.loaded.clear()?;
        let p = &self.plugins[i];
        let loaded = match self.chunks[i].get() {
            Some(f) => f,
            None => {
                let bytecode =
                    p.code.bytecode().map_err(|e| mlua::Error::RuntimeError(format!("{}: {e}", p.path.display())))?;
                let f = self.lua.load(bytecode).set_mode(ChunkMode::Binary).set_name(format!("={}", p.meta.id));
                let f = f.into_function()?;
                self.chunks[i].get_or_init(|| f)
            }
        };
        let f = loaded.deep_clone()?;
        f.set_environment(self.fresh_env(&p.libs)?)?;
        Ok(f)
    }

    /// Plugin `i`'s table, from a fresh instance of its chunk. The first
    /// in this VM must declare what the plugin was selected by: its
    /// metadata came from its file or from a cache entry, which proves no
    /// more than that some file once had it, so an edited entry (say, an
    /// intrusive plugin made `default, safe`) is refused before it runs.
    async fn plugin_table(&self, i: usize) -> mlua::Result<Table> {
        let t: Table = self.plugin_chunk(i)?.call_async(()).await?;
        if self.declared[i].get().is_none() {
            let p = &self.plugins[i];
            if !check_table(&t).is_ok_and(|m| m == p.meta) {
                return Err(mlua::Error::runtime(format!(
                    "{}: its table does not declare what the plugin was selected by (an edited metadata cache \
                     entry?); not run",
                    p.path.display()
                )));
            }
            let _ = self.declared[i].set(());
        }
        Ok(t)
    }

    /// A fresh global table for code that requires from `libs`.
    fn fresh_env(&self, libs: &Libraries) -> mlua::Result<Table> {
        let env = self.lua.create_table()?;
        env.set_metatable(Some(self.env_for(libs)?))?;
        Ok(env)
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
    pub async fn wants(&self, i: usize, info: &Service) -> std::result::Result<bool, RunError> {
        let p = &self.plugins[i];
        if p.listed_for(info) {
            return Ok(true);
        }
        if !p.meta.portrule {
            return Ok(false);
        }
        let (budgets, meter) = (&self.scope.budgets, &self.scope.meter);
        let budgets = Budgets {
            wall: budgets.wall.min(Duration::from_secs(1)),
            steps: budgets.steps.min(1_000_000),
            ..budgets.clone()
        };
        meter.start(budgets.wall, budgets.steps);
        let verdict = async {
            let t = self.plugin_table(i).await?;
            let rule: Function = t.raw_get("portrule")?;
            rule.call_async::<Value>(self.port_table(info)?).await
        };
        let r = tokio::time::timeout(budgets.wall, verdict).await;
        let tripped = meter.tripped();
        meter.stop();
        match (tripped, r) {
            (Some(t), _) => Err(RunError::new(ErrorKind::Budget, format!("portrule {}", t.describe(&budgets)))),
            (None, Err(_)) => {
                Err(RunError::new(ErrorKind::Budget, format!("portrule {}", Trip::Wall.describe(&budgets))))
            }
            (None, Ok(Err(e))) => Err(RunError::new(ErrorKind::Plugin, format!("portrule failed: {}", short(&e)))),
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

    /// Runs plugin `i` on a port, within the budgets.
    pub async fn run(&self, i: usize, info: Arc<Service>) -> RunOutput {
        let p = &self.plugins[i];
        let (budgets, meter) = (&self.scope.budgets, &self.scope.meter);
        let renames = p.meta.categories.iter().any(|c| c == "version");
        let run = Arc::new(Run::new(self.scope.clone(), info).renaming(renames));
        self.lua.set_app_data(Active(run.clone()));
        meter.start(budgets.wall, budgets.steps);
        let call = async {
            let t = self.plugin_table(i).await?;
            let f: Function = t.raw_get("run")?;
            let thread = self.lua.create_thread(f)?;
            let verbosity = self.verbosity.saturating_add(u8::from(p.named));
            let ctx = Ctx::new(run.clone(), self.args.clone(), verbosity);
            thread.into_async::<MultiValue>(ctx)?.await
        };
        // The interrupt stops Lua code; this stops a run waiting on I/O, and
        // the cut stops either at once (Lua code runs only while polled).
        let mut cut = self.cut.clone();
        let result = tokio::select! {
            r = tokio::time::timeout(budgets.wall, call) => r,
            _ = async { match cut.as_mut() { Some(c) => c.wait().await, None => std::future::pending().await } } => {
                meter.trip(Trip::Stopped);
                Ok(Ok(MultiValue::new()))
            }
        };
        if result.is_err() {
            meter.trip(Trip::Wall);
        }
        let tripped = meter.tripped();
        if matches!(tripped, Some(Trip::Wall | Trip::Stopped)) {
            // A run stopped while it waited keeps, in its dropped coroutine,
            // the host call it waited in (and the socket that call holds):
            // collected now, so every socket of the run closes with it.
            let _ = self.lua.gc_collect();
        }
        let error = match (tripped, result) {
            (Some(t), _) => Some(RunError::new(ErrorKind::Budget, t.describe(budgets))),
            (None, Ok(Err(e))) if memory_error(&e) => {
                Some(RunError::new(ErrorKind::Budget, Trip::Memory.describe(budgets)))
            }
            (None, Ok(Err(e))) => Some(RunError::new(ErrorKind::Plugin, short(&e))),
            (None, Ok(Ok(values))) => {
                // Still metered: converting the returned data is charged to the run.
                let r = returned(&self.lua, values, &p.meta.id, &run);
                match meter.tripped() {
                    Some(t) => Some(RunError::new(ErrorKind::Budget, t.describe(budgets))),
                    None => r,
                }
            }
            (None, Err(_)) => Some(RunError::new(ErrorKind::Budget, Trip::Wall.describe(budgets))),
        };
        meter.stop();
        self.lua.remove_app_data::<Active>();
        let mut out = run.end();
        out.error = error;
        // Garbage from this run is not the next run's budget.
        if self.lua.used_memory() > budgets.memory / 4 {
            let _ = self.lua.gc_collect();
        }
        out
    }
}

/// What `require` needs in one VM: the sandbox's globals, the modules
/// loaded in the run in progress, the ones being loaded (a cycle's trace),
/// and one environment metatable per set of libraries.
#[derive(Clone)]
struct Requires {
    env_meta: Table,
    /// Modules loaded by the run in progress, by `origin NUL name`;
    /// emptied when a run (or a portrule) starts.
    loaded: Table,
    /// The modules being loaded now, by `origin NUL name`, with their files.
    loading: Arc<Mutex<Vec<(String, String)>>>,
    /// Each module's chunk, loaded from its bytecode at its first `require`
    /// in this VM, by `origin NUL name`; a run calls a clone of it with a
    /// fresh environment, as it does its plugin's chunk.
    chunks: Arc<Mutex<std::collections::HashMap<String, Function>>>,
    /// Per set of libraries (by their addresses): the metatable of the
    /// environments of code that requires from it.
    envs: Arc<Mutex<Vec<LibEnv>>>,
}

/// The addresses of a set of libraries, and the environment metatable of
/// code that requires from it.
type LibEnv = (Vec<usize>, Table);

impl Requires {
    /// A fresh instance of module `m`'s chunk (see [`Requires::chunks`]).
    fn chunk(&self, lua: &Lua, key: &str, m: &Module) -> mlua::Result<Function> {
        let mut chunks = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = chunks.get(key) {
            return f.deep_clone();
        }
        let bytecode = m.code.bytecode().map_err(|e| mlua::Error::runtime(format!("{}: {e}", m.file)))?;
        let f = lua.load(bytecode).set_mode(ChunkMode::Binary).set_name(format!("={}", m.file)).into_function()?;
        let clone = f.deep_clone();
        chunks.insert(key.to_string(), f);
        clone
    }

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
    /// `require` in a run and the same value after, in that run only. A
    /// module runs with a fresh environment that requires from its own
    /// library on (a core module never sees a pack's). Its instance is the
    /// run's alone, so it need not be read-only (making every table of it
    /// read-only at each run cost more than the run).
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
                let env = lua.create_table()?;
                env.set_metatable(Some(this.env_for(lua, &libs.from(at))?))?;
                let chunk = this.chunk(lua, &key, m)?;
                chunk.set_environment(env)?;
                // The run's own instance: what the run writes in it (or in
                // what its functions close over) ends with the run.
                let v: Value = chunk.call(name.as_str())?;
                Ok(if v.is_nil() { Value::Boolean(true) } else { v })
            })();
            this.loading.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let v = result?;
            this.loaded.raw_set(key, v.clone())?;
            Ok(v)
        })
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

/// What `run` returned: nothing, `nil, "why"` (logged), or the script's
/// result, as an NSE script returns it: a table (its structured output,
/// with the text NSE would render from it), a table and its text, or text
/// alone. The result leaves the stage as a `script` event, not a finding.
fn returned(lua: &Lua, values: MultiValue, id: &str, run: &Run) -> Option<RunError> {
    // An error value returned (`return nil, err`) is its message, as when
    // the host gave the message itself.
    let text = |v: Value| match super::failure::message_of(&v) {
        Some(m) => lua.create_string(m).map(Value::String).unwrap_or(v),
        None => v,
    };
    let mut it = values.into_iter().map(text);
    // Past a budget the meter has tripped, and the caller says which.
    let r = match (it.next(), it.next()) {
        (None | Some(Value::Nil), Some(Value::String(why))) => run.log_line(format!("{id}: {}", why.to_string_lossy())),
        (None | Some(Value::Nil) | Some(Value::Boolean(_)), _) => Ok(()),
        (Some(Value::String(text)), _) => run.result(id, Json::Null, text.to_string_lossy()),
        (Some(v), text) => match run.returned_data(&v) {
            Ok(Ok(data)) => {
                let text = match text {
                    Some(Value::String(t)) => t.to_string_lossy(),
                    _ => crate::findings::script_text::render(&data),
                };
                run.result(id, data, text)
            }
            Ok(Err(ConvertError::TooLarge(_))) => Ok(()),
            Ok(Err(e)) => {
                return Some(RunError::new(ErrorKind::Parse, format!("returned something that is not data: {e}")))
            }
            Err(e) => Err(e),
        },
    };
    r.err().map(|e| RunError::new(ErrorKind::Plugin, short(&e)))
}

impl std::fmt::Debug for Vm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vm").field("plugins", &self.plugins.len()).finish()
    }
}
