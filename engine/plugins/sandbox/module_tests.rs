//! `require`: modules of a plugin's libraries, loaded per run, and what
//! one run can (not) leave in them for another.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::guard::Guard;
use super::host::Vm;
use super::run::{Budgets, OutputAllowance, RunOutput};
use super::tests::{error_kind, info, run_with};
use crate::error::ErrorKind;
use crate::findings::{Proto, Service};
use crate::plugins::load::Plugin;

/// A plugin whose `run` body is `body`, with a core library of `modules`
/// (name, text).
fn with_modules(body: &str, modules: &[(&str, &str)]) -> Plugin {
    let mut lib = crate::plugins::load::Library::new("core");
    for (name, text) in modules {
        let rel = format!("lib/{name}.lua");
        lib.add(&rel, &rel, text.as_bytes()).unwrap();
    }
    let libs = crate::plugins::load::Libraries(vec![Arc::new(lib)]);
    let src = format!(
        "return {{ id = 't', description = 'd', categories = {{'safe'}}, portrule = function() return true end,\n\
         run = function(ctx)\n{body}\nend }}"
    );
    crate::plugins::load::load_source_in(src.as_bytes(), Path::new("test.lua"), None, &libs)
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn run_modules(body: &str, modules: &[(&str, &str)]) -> RunOutput {
    let budgets = Budgets { wall: Duration::from_millis(300), steps: 2_000_000, ..Budgets::default() };
    run_with(with_modules(body, modules), budgets, Guard::offline(), 22).await.0
}

/// A module's private state (a local table its functions close over, as
/// lib/smtp.lua's TLS options) handed to a plugin's callback: what one run
/// writes there, or stores in the module's locals, no later run sees: not
/// the same plugin's on another host, nor another plugin's.
#[tokio::test]
async fn a_runs_writes_to_a_modules_private_state_reach_no_other_run() {
    let opts = r#"
        local private = { alpn = { "h2" } }
        local stash
        return {
            with = function(f) return f(private) end,
            alpn = function() return private.alpn[1] end,
            put = function(x) stash = x end,
            get = function() return stash end,
        }"#;
    // Plugin 0 writes on port 22 and reads elsewhere; plugin 1 reads.
    let writer = r#"
        local m = require "opts"
        if ctx.port == 22 then
            local ok = pcall(m.with, function(t) t.alpn = { "evil" } t.secret = ctx.ip end)
            m.put(ctx.ip .. " secret")
            ctx:finding{ title = "w", data = { wrote = ok, alpn = m.alpn() } }
            return
        end
"#;
    let reader = r#"
        local m = require "opts"
        local leaked = m.with(function(t) return t.secret end)
        ctx:finding{ title = "r", data = { alpn = m.alpn(), leaked = leaked or "", stash = m.get() or "" } }
    "#;
    let writer = format!("{writer}{reader}");
    let budgets = Budgets { wall: Duration::from_millis(500), ..Budgets::default() };
    let scan = OutputAllowance::new(budgets.scan_output);
    let (w, r) = (with_modules(&writer, &[("opts", opts)]), with_modules(reader, &[("opts", opts)]));
    let vm = Vm::new(&[w, r], &budgets, Guard::offline(), &BTreeMap::new(), scan).unwrap();
    let first = vm.run(0, info(22)).await;
    assert_eq!(first.error, None, "{first:?}");
    // Within its own run the write may stand; it is the run's own instance.
    assert_eq!(first.findings[0].data["alpn"], if first.findings[0].data["wrote"] == true { "evil" } else { "h2" });
    let other_host = {
        let mut s = Service::bare("t".into(), "127.0.0.2".parse().unwrap(), 25, Proto::Tcp);
        s.banner = b"220 smtp\r\n".to_vec();
        Arc::new(s)
    };
    for (i, port_info) in [(1, other_host.clone()), (0, other_host), (1, info(22))] {
        let out = vm.run(i, port_info).await;
        assert_eq!(out.error, None, "{out:?}");
        let d = &out.findings[0].data;
        assert_eq!(d["alpn"], "h2", "plugin {i} saw another run's write: {d}");
        assert_eq!((&d["leaked"], &d["stash"]), (&"".into(), &"".into()), "plugin {i} saw another run's data: {d}");
    }
}

#[tokio::test]
async fn required_modules_load_once_per_run_in_the_sandbox() {
    let counter = "local m = { loads = 0 } m.name = ... m.io = io m.again = require 'leaf' return m";
    let leaf = "return { hello = function() return 'hi' end }";
    let body = r#"
        local a = require "counter"
        local b = require("counter")
        a.loads = 99
        ctx:finding{ title = "m", data = { same = rawequal(a, b), name = a.name, io = a.io == nil,
            hi = a.again.hello(), loads = b.loads, global = require == nil } }
    "#;
    let out = run_modules(body, &[("counter", counter), ("leaf", leaf)]).await;
    assert_eq!(out.error, None, "{out:?}");
    let d = &out.findings[0].data;
    assert_eq!(d["same"], true, "one load per run");
    assert_eq!(d["name"], "counter", "the module gets its name, as in Lua");
    assert_eq!(d["io"], true, "no io in a module either");
    assert_eq!(d["hi"], "hi", "modules require modules");
    assert_eq!(d["loads"], 99, "the run's own instance, as a module in Lua");
}

/// A `ctx` a module keeps past its run: the next run has a module
/// instance of its own, where nothing was kept.
#[tokio::test]
async fn a_ctx_kept_in_a_module_is_gone_in_the_next_run() {
    let keep = "local kept return { put = function(x) kept = x end, get = function() return kept end }";
    let body = r#"
        local k = require "keep"
        local old = k.get()
        k.put(ctx)
        ctx:finding{ title = old and "found an old ctx" or "nothing kept" }
    "#;
    let budgets = Budgets { wall: Duration::from_millis(500), ..Budgets::default() };
    let scan = OutputAllowance::new(budgets.scan_output);
    let p = with_modules(body, &[("keep", keep)]);
    let vm = Vm::new(&[p], &budgets, Guard::offline(), &BTreeMap::new(), scan).unwrap();
    for port in [22, 23] {
        let out = vm.run(0, info(port)).await;
        assert_eq!(out.error, None, "{out:?}");
        let titles: Vec<&str> = out.findings.iter().map(|f| f.title.as_str()).collect();
        assert_eq!(titles, ["nothing kept"], "run on port {port}");
    }
}

#[tokio::test]
async fn a_missing_module_or_a_cycle_is_an_error_and_a_module_spends_the_runs_budgets() {
    // Names computed at run time are checked when the code runs.
    let out = run_modules("local n = 'mis' .. 'sing' require(n)", &[]).await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Plugin));
    assert!(out.error.unwrap().message.contains("require \"missing\": no module lib/missing.lua in core"));
    let a = "local n = 'b' return require(n)";
    let b = "local n = 'a' return require(n)";
    let out = run_modules("local n = 'a' require(n)", &[("a", a), ("b", b)]).await;
    let msg = out.error.unwrap().message;
    assert!(msg.contains("require cycle: lib/a.lua -> lib/b.lua -> lib/a.lua"), "{msg}");
    // A module's top level runs within the requiring run's budgets.
    let out = run_modules("local n = 'spin' require(n)", &[("spin", "while true do end")]).await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Budget), "{out:?}");
    // Literal names are checked when the plugin loads, naming the file.
    let mut lib = crate::plugins::load::Library::new("core");
    lib.add("lib/x.lua", "lib/x.lua", b"return {}").unwrap();
    let libs = crate::plugins::load::Libraries(vec![Arc::new(lib)]);
    let src = b"local y = require 'y' return { id = 't', description = 'd', categories = {'safe'}, ports = {1}, run = function() end }";
    let e = crate::plugins::load::load_source_in(src, Path::new("plugins/t.lua"), None, &libs).unwrap_err().to_string();
    assert!(e.contains("plugins/t.lua: require \"y\": no module lib/y.lua in core (lib/)"), "{e}");
}
