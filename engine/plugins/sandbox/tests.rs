//! The host and sandbox, tested with small plugins on loopback.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::guard::Guard;
use super::host::Vm;
use super::run::{Budgets, OutputAllowance, RunError, RunOutput};
use crate::error::ErrorKind;
use crate::findings::{Proto, Service, Severity};
use crate::plugins::load::{load_pack_dir, load_pack_dir_cached, load_source, Plugin};

fn plugin(src: &str) -> Plugin {
    load_source(src.as_bytes(), Path::new("test.lua")).unwrap_or_else(|e| panic!("{e}"))
}

/// A plugin whose `run` body is `body`, on every port.
pub(super) fn with_run(body: &str) -> Plugin {
    plugin(&format!(
        "return {{ id = 't', description = 'd', categories = {{'safe'}}, portrule = function() return true end,\n\
         run = function(ctx)\n{body}\nend }}"
    ))
}

const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

pub(super) fn info(port: u16) -> Arc<Service> {
    let mut s = Service::bare("t".into(), LOCAL, port, Proto::Tcp);
    s.banner = b"SSH-2.0-Test\r\n".to_vec();
    Arc::new(s)
}

pub(super) async fn run_with(p: Plugin, budgets: Budgets, guard: Guard, port: u16) -> (RunOutput, Duration) {
    let scan = OutputAllowance::new(budgets.scan_output);
    let vm = Vm::new(&[p], &budgets, guard, &BTreeMap::from([("user".into(), "bob".into())]), scan).unwrap();
    let t = Instant::now();
    let out = vm.run(0, info(port)).await;
    (out, t.elapsed())
}

async fn run(body: &str) -> RunOutput {
    let budgets = Budgets { wall: Duration::from_millis(300), ..Budgets::default() };
    run_with(with_run(body), budgets, Guard::offline(), 22).await.0
}

pub(super) fn error_kind(out: &RunOutput) -> Option<ErrorKind> {
    out.error.as_ref().map(|e| e.kind)
}

#[tokio::test]
async fn a_plugin_sees_the_port_and_reports_findings() {
    let out = run(r#"
        ctx:finding{ severity = "low", title = "banner", data = { banner = ctx.banner, port = ctx.port, user = ctx.args.user } }
        ctx:log("hello", 1)
        print("printed")
    "#)
    .await;
    assert_eq!(out.error, None);
    assert_eq!(out.findings.len(), 1);
    let f = &out.findings[0];
    assert_eq!((f.severity, f.title.as_str()), (Severity::Low, "banner"));
    assert_eq!(f.data, serde_json::json!({ "banner": "SSH-2.0-Test\r\n", "port": 22, "user": "bob" }));
    assert_eq!(out.logs, ["hello 1", "printed"]);
}

#[tokio::test]
async fn dangerous_globals_are_absent() {
    let out = run(r#"
        local absent = {}
        for _, name in ipairs({ "io", "debug", "require", "package", "load", "loadstring", "dofile", "loadfile", "getfenv", "setfenv" }) do
            if _G[name] ~= nil then table.insert(absent, name) end
        end
        if string.dump ~= nil then table.insert(absent, "string.dump") end
        if os.execute ~= nil or os.getenv ~= nil or os.exit ~= nil or os.remove ~= nil then table.insert(absent, "os.*") end
        ctx:finding{ title = "present", data = absent }
    "#)
    .await;
    assert_eq!(out.error, None);
    assert_eq!(out.findings[0].data, serde_json::json!([]), "these exist: {:?}", out.findings[0].data);
}

#[tokio::test]
async fn libraries_are_read_only_and_runs_do_not_share_globals() {
    let p = with_run(
        r#"
        local ok1 = pcall(function() string.upper = function() return "pwned" end end)
        local ok2 = pcall(function() getmetatable("").__index = {} end)
        local seen = leaked
        leaked = "from an earlier run"
        ctx:finding{ title = "t", data = { ok1 = ok1, ok2 = ok2, seen = seen or "nothing", upper = ("a"):upper() } }
    "#,
    );
    let vm =
        Vm::new(&[p], &Budgets::default(), Guard::offline(), &BTreeMap::new(), OutputAllowance::new(1 << 20)).unwrap();
    for _ in 0..2 {
        let out = vm.run(0, info(22)).await;
        assert_eq!(out.error, None);
        assert_eq!(
            out.findings[0].data,
            serde_json::json!({ "ok1": false, "ok2": false, "seen": "nothing", "upper": "A" })
        );
    }
}

#[tokio::test]
async fn endless_loops_stop_at_the_deadline_even_under_pcall() {
    for body in [
        "while true do end",
        "while true do pcall(function() while true do end end) end",
        "while true do xpcall(function() while true do end end, function(e) return e end) end",
        "local co = coroutine.create(function() while true do end end) while true do coroutine.resume(co) end",
        "local s = string.rep('a', 5000) .. 'b' while true do pcall(string.find, s, string.rep('a*', 30) .. 'c') end",
    ] {
        let budgets = Budgets { wall: Duration::from_millis(200), steps: u64::MAX, ..Budgets::default() };
        let (out, took) = run_with(with_run(body), budgets, Guard::offline(), 22).await;
        assert_eq!(error_kind(&out), Some(ErrorKind::Budget), "{body}: {out:?}");
        assert!(out.error.as_ref().unwrap().message.contains("longer than 200 ms"), "{out:?}");
        assert!(took < Duration::from_millis(1500), "{body}: took {took:?}");
    }
}

#[tokio::test]
async fn the_step_budget_trips() {
    let budgets = Budgets { steps: 10_000, ..Budgets::default() };
    let (out, _) = run_with(with_run("for i = 1, 1e9 do end"), budgets, Guard::offline(), 22).await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Budget));
    assert!(out.error.unwrap().message.contains("10000 steps"));
}

#[tokio::test]
async fn memory_bombs_fail_at_the_limit() {
    for body in [
        "local s = string.rep('x', 1e9)",
        "local ok = pcall(string.rep, 'x', 1e9) ctx:finding{ title = 'survived' }",
        "local t = {} for i = 1, 1e9 do t[i] = {i, i, i} end",
        // Luau interns strings: each one must differ to cost memory.
        "local t, i = {}, 0 while true do i += 1 pcall(function() t[#t + 1] = string.rep('y', 1e5) .. i end) end",
    ] {
        let budgets = Budgets { memory: 16 << 20, wall: Duration::from_secs(5), ..Budgets::default() };
        let (out, _) = run_with(with_run(body), budgets, Guard::offline(), 22).await;
        assert_eq!(error_kind(&out), Some(ErrorKind::Budget), "{body}: {out:?}");
        assert!(out.error.as_ref().unwrap().message.contains("memory"), "{body}: {out:?}");
    }
}

#[tokio::test]
async fn errors_and_garbage_are_reported() {
    let out = run("error('boom')").await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Plugin));
    assert!(out.error.unwrap().message.contains("boom"));
    let out = run("return function() end").await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Parse));
    let out = run(
        "return setmetatable({}, { __index = function() while true do end end, __pairs = function() error('x') end })",
    )
    .await;
    assert_eq!(out.error, None, "metamethods are never called: {out:?}");
    let out = run("ctx:finding{ severity = 'urgent', title = 'x' }").await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Plugin));
    let out = run("return nil, 'not for this port'").await;
    assert_eq!((out.error, out.logs), (None, vec!["t: not for this port".to_string()]));
}

#[tokio::test]
async fn what_run_returns_is_a_script_event_and_ctx_finding_a_finding() {
    use crate::findings::Event;
    let p = plugin(
        "return { id = 'v', description = 'd', categories = {'safe'}, portrule = function() return true end,\n\
         volatile = { 'Used CPU (sys)', 'Date' },\n\
         run = function(ctx)\n\
           ctx:finding{ severity = 'high', title = 'open to all' }\n\
           return { Version = '7.0', ['Used CPU (sys)'] = '1.5' }\n\
         end }",
    );
    assert_eq!(p.meta.volatile, ["Used CPU (sys)", "Date"]);
    let (out, _) = run_with(p.clone(), Budgets::default(), Guard::offline(), 22).await;
    let evs = crate::plugins::stage::to_events(&p, &info(22), out, &crate::pipeline::Ctx::detached("s"));
    let [Event::Finding(f), Event::Script(r)] = &evs[..] else { panic!("{evs:?}") };
    assert_eq!((f.severity, f.title.as_str()), (Severity::High, "open to all"));
    assert_eq!((r.plugin.as_str(), r.data["Version"].as_str()), ("v", Some("7.0")));
    assert!(r.output.contains("Version: 7.0"), "{}", r.output);
    assert_eq!(r.volatile, ["Used CPU (sys)", "Date"]);
    let json = serde_json::to_value(&evs[0]).unwrap();
    assert!(json["type"] == "finding" && json.get("output").is_none(), "{json}");
    assert_eq!(serde_json::to_value(&evs[1]).unwrap()["type"], "script");
}

#[test]
fn bad_plugin_files_are_refused_with_the_field() {
    for (src, needle) in [
        ("return 1", "must return a table"),
        ("return { description = 'd', categories = {'safe'}, ports = {1}, run = function() end }", "'id' is missing"),
        (
            "return { id = 'x y', description = 'd', categories = {'safe'}, ports = {1}, run = function() end }",
            "'id' must be",
        ),
        ("return { id = 'x', categories = {'safe'}, ports = {1}, run = function() end }", "'description' is missing"),
        ("return { id = 'x', description = 'd', ports = {1}, run = function() end }", "'categories'"),
        ("return { id = 'x', description = 'd', categories = {'safe'}, run = function() end }", "nowhere to run"),
        (
            "return { id = 'x', description = 'd', categories = {'safe'}, ports = {70000}, run = function() end }",
            "'ports'",
        ),
        ("return { id = 'x', description = 'd', categories = {'safe'}, ports = {1} }", "'run' is missing"),
        (
            "return { id = 'x', description = 'd', categories = {'safe'}, ports = {1}, run = 'no' }",
            "'run' must be a function",
        ),
        (
            "return { id = 'x', description = 7, categories = {'safe'}, ports = {1}, run = function() end }",
            "'description' must be a string",
        ),
        (
            "return { id = 'x', description = 'd', categories = {'safe'}, ports = {1}, scope = 'everywhere', run = function() end }",
            "'scope' must be \"port\" or \"host\"",
        ),
        (
            "return { id = 'x', description = 'd', categories = {'safe'}, ports = {1}, volatile = {'a\\nb'}, run = function() end }",
            "'volatile' must hold keys",
        ),
        (
            "return { id = 'x', description = 'd', categories = {'safe'}, ports = {1}, volatile = 'Date', run = function() end }",
            "'volatile' must be a list",
        ),
        ("return {", "syntax error"),
        ("while true do end", "loading it ran"),
        ("\x1bLua bytecode", "not a text file"),
    ] {
        let e = load_source(src.as_bytes(), Path::new("bad.lua")).unwrap_err().to_string();
        assert!(e.starts_with("bad.lua: ") && e.contains(needle), "{src}: {e}");
    }
}

/// A loopback server that answers every connection with `reply` and reads what it gets.
pub(super) async fn server(reply: &'static [u8]) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut b = [0u8; 1024];
                let _ = s.read(&mut b).await;
                let _ = s.write_all(reply).await;
            });
        }
    });
    port
}

pub(super) fn guard_for(port: u16) -> Guard {
    Guard::scan(Some(super::guard::tests::space("127.0.0.1", "", vec![port])), None)
}

#[tokio::test]
async fn sockets_reach_only_the_scanned_host_and_ports() {
    let port = server(b"HTTP/1.0 200 OK\r\nServer: t\r\n\r\n<title>Hi</title>").await;
    let body = r#"
        local s, err = ctx:connect{}
        assert(s, err)
        assert(s:send("GET / HTTP/1.0\r\n\r\n"))
        local line = s:recv_until("\r\n")
        s:close()
        local r = assert(ctx.http:get("/"))
        local refused = {}
        for _, spec in ipairs({ { host = "127.0.0.2" }, { host = "localhost" }, { port = 1 } }) do
            local sock, why = ctx:connect(spec)
            table.insert(refused, sock == nil and why or "CONNECTED")
        end
        ctx:finding{ title = "t", data = { line = line, status = r.status, server = r.headers.server, body = r.body, refused = refused } }
    "#;
    let (out, _) = run_with(with_run(body), Budgets::default(), guard_for(port), port).await;
    assert_eq!(out.error, None, "{out:?}");
    let d = &out.findings[0].data;
    assert_eq!(d["line"], "HTTP/1.0 200 OK\r\n");
    assert_eq!((d["status"].as_u64(), d["server"].as_str()), (Some(200), Some("t")));
    assert_eq!(d["body"], "<title>Hi</title>");
    let refused = d["refused"].as_array().unwrap();
    assert!(refused[0].as_str().unwrap().contains("not the host being scanned"), "{refused:?}");
    assert!(refused[1].as_str().unwrap().contains("is a name"), "{refused:?}");
    assert!(refused[2].as_str().unwrap().contains("port 1 is not one this scan scans"), "{refused:?}");
    assert_eq!(out.refused.len(), 3, "each refusal is reported");
}

#[tokio::test]
async fn the_socket_and_read_budgets_trip() {
    let port = server(&[b'z'; 60_000]).await;
    let budgets = Budgets { sockets: 2, ..Budgets::default() };
    let body = "for i = 1, 5 do local s = ctx:connect{} end";
    let (out, _) = run_with(with_run(body), budgets, guard_for(port), port).await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Budget), "{out:?}");
    assert!(out.error.unwrap().message.contains("more than 2 sockets"));

    let budgets = Budgets { read_bytes: 10_000, ..Budgets::default() };
    let body =
        "local s = ctx:connect{} s:send('x') while true do local ok = pcall(function() return s:recv(1000) end) end";
    let (out, _) = run_with(with_run(body), budgets, guard_for(port), port).await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Budget), "{out:?}");
    assert!(out.error.unwrap().message.contains("read more than 10000 bytes"));
}

#[tokio::test]
async fn a_run_waiting_on_io_stops_at_the_deadline() {
    let port = server(b"").await;
    let budgets = Budgets { wall: Duration::from_millis(300), ..Budgets::default() };
    // The server never answers; the socket timeout (5 s) is longer than the budget.
    let body = "local s = ctx:connect{} local ok, data = pcall(s.recv, s, 10) ctx:finding{ title = 'x' }";
    let (out, took) = run_with(with_run(body), budgets, guard_for(port), port).await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Budget), "{out:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
}

fn named(id: &str, cats: &str) -> String {
    format!(
        "return {{ id = '{id}', description = 'd', categories = {{ {cats} }}, ports = {{80}}, run = function() end }}"
    )
}

#[test]
fn untrusted_pack_plugins_run_only_when_named() {
    let core = plugin(&named("web", "'safe', 'default'")).in_pack("core", true);
    let other = plugin(&named("probe-x", "'safe', 'default'")).in_pack("third", false);
    let all = [core, other];
    let ids = |expr: &str| -> Vec<String> {
        crate::plugins::load::select(&all, expr).unwrap().iter().map(|p| p.name()).collect()
    };
    assert_eq!(ids("default"), ["web"], "a category never picks an untrusted plugin");
    assert_eq!(ids("all"), ["web"]);
    assert_eq!(ids("probe-*"), Vec::<String>::new());
    assert_eq!(ids("not web"), Vec::<String>::new(), "a negation names nothing");
    let e = crate::plugins::load::select(&all, "probe-x").unwrap_err().to_string();
    assert!(e.contains("untrusted pack third") && e.contains("third:probe-x"), "{e}");
    assert_eq!(ids("third:probe-x,web"), ["web", "third:probe-x"]);
    assert_eq!(ids("core:web"), ["web"]);
    assert_eq!(ids("third:*"), Vec::<String>::new());
}

#[test]
fn a_bare_id_in_two_packs_is_an_error_naming_both() {
    let a = plugin(&named("dup", "'safe'")).in_pack("core", true);
    let b = plugin(&named("dup", "'safe'")).in_pack("mypack", true);
    let all = [a, b];
    let e = crate::plugins::load::select(&all, "dup").unwrap_err().to_string();
    assert!(e.contains("core") && e.contains("mypack") && e.contains("dup"), "{e}");
    assert!(crate::plugins::load::select(&all, "safe").is_err());
    let both = crate::plugins::load::select(&all, "core:dup,mypack:dup").unwrap();
    assert_eq!(both.iter().map(|p| p.name()).collect::<Vec<_>>(), ["dup", "mypack:dup"]);
    assert_eq!(crate::plugins::load::select(&all, "mypack:*").unwrap().len(), 1);
}

#[tokio::test]
async fn a_plugins_own_coroutines_see_only_their_own_yields() {
    // Each value takes many steps: were the host ever to yield from the
    // interrupt again, the plugin's coroutine must not take that for its own.
    let out = run(r#"
        local gen = coroutine.wrap(function()
            for i = 1, 10 do
                local x = 0
                for _ = 1, 50000 do x += 1 end
                coroutine.yield(i)
            end
        end)
        local got = {}
        for _ = 1, 10 do got[#got + 1] = gen() end
        ctx:finding{ title = "t", data = got }
    "#)
    .await;
    assert_eq!(out.error, None);
    assert_eq!(out.findings[0].data, serde_json::json!([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]));
}

#[tokio::test]
async fn refused_connects_count_against_the_socket_budget() {
    let body = "while true do pcall(function() ctx:connect{ host = '192.0.2.7', port = 80 } end) end";
    let (out, _) = run_with(with_run(body), Budgets::default(), guard_for(80), 80).await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Budget), "{out:?}");
    assert!(out.error.unwrap().message.contains("more than 16 sockets"));
    assert!(out.refused.len() <= 16, "{} refusals kept", out.refused.len());
}

#[tokio::test]
async fn bad_alpn_names_are_a_plugin_error() {
    let out = run("ctx:connect{ tls = { alpn = { '' } } }").await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Plugin), "{out:?}");
    assert!(out.error.unwrap().message.contains("ALPN"));
}

#[tokio::test]
async fn findings_log_lines_and_titles_are_capped() {
    let out = run("for i = 1, 100 do ctx:finding{ title = 'x' } end").await;
    assert_eq!(out.findings.len(), 64);
    assert!(out.error.unwrap().message.contains("more than 64 findings"));
    let out = run("for i = 1, 200 do ctx:log(string.rep('y', 5000)) end").await;
    assert_eq!(out.logs.len(), 64);
    assert!(out.logs.iter().all(|l| l.chars().count() == 1000));
    let out = run("ctx:finding{ title = string.rep('t', 1000) }").await;
    assert_eq!(out.findings[0].title.chars().count(), 300);
    let out = run("ctx:finding{ title = 't', data = { s = string.rep('s', 70000) } }").await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Plugin));
    assert!(out.error.unwrap().message.contains("longer than 65536 bytes"));
}

#[tokio::test]
async fn http_responses_are_read_up_to_max() {
    let mut answer = b"HTTP/1.0 200 OK\r\n\r\n".to_vec();
    answer.extend(std::iter::repeat_n(b'b', 100_000));
    let port = server(Box::leak(answer.into_boxed_slice())).await;
    let body = "local r = assert(ctx.http:get('/', { max = 1000 })) ctx:finding{ title = 't', data = { n = #r.body } }";
    let (out, _) = run_with(with_run(body), Budgets::default(), guard_for(port), port).await;
    assert_eq!(out.error, None, "{out:?}");
    assert_eq!(out.findings[0].data["n"], 1000 - "HTTP/1.0 200 OK\r\n\r\n".len());
}

#[test]
fn plugin_files_over_the_size_limit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.lua");
    std::fs::write(&big, format!("return {{}} -- {}", "x".repeat(crate::plugins::load::MAX_FILE as usize))).unwrap();
    let e = crate::plugins::load::load_file(&big, &crate::plugins::load::Libraries::default()).unwrap_err().to_string();
    assert!(e.contains("larger than 262144 bytes"), "{e}");
}

// Regression: an untrusted plugin whose id was a category (`default`) ran
// under -sC, because its bare id matched the term.
#[test]
fn plugin_ids_cannot_be_categories_or_keywords() {
    for id in ["default", "Safe", "all", "not", "vuln"] {
        let e = load_source(named(id, "'x'").as_bytes(), Path::new("evil.lua")).unwrap_err().to_string();
        assert!(e.contains("category or keyword"), "{id}: {e}");
    }
    // A category's name as an id selects nothing of an untrusted pack, bare.
    let p = plugin(&named("discovery2", "'default', 'discovery2'")).in_pack("evil", false);
    let all = [p];
    assert!(crate::plugins::load::select(&all, "default").unwrap().is_empty());
    assert!(crate::plugins::load::select(&all, "discovery2").is_err());
    assert_eq!(crate::plugins::load::select(&all, "evil:discovery2").unwrap().len(), 1);
}

#[test]
fn unknown_fields_of_a_plugin_table_are_refused_by_name() {
    let src = "return { id = 'x', description = 'd', categories = {'safe'}, ports = {80}, run = function() end, \
               cves = {'CVE-2021-44228'}, portrules = function() end }";
    let e = load_source(src.as_bytes(), Path::new("x.lua")).unwrap_err().to_string();
    assert!(e.contains("unknown fields") && e.contains("'cves'") && e.contains("'portrules'"), "{e}");
}

#[test]
fn finding_metadata_and_args_are_checked_at_load() {
    let with = |fields: &str| {
        let src = format!(
            "return {{ id = 'x', description = 'd', categories = {{'safe'}}, ports = {{80}}, run = function() end, {fields} }}"
        );
        load_source(src.as_bytes(), Path::new("x.lua"))
    };
    let p = with(
        "args = {'x.user'}, references = {'https://example.org/advisory'}, cve = {'CVE-2021-44228'}, \
         cwe = {'CWE-79'}, remediation = 'Upgrade.', tags = {'tls', 'weak-crypto'}",
    )
    .unwrap();
    assert_eq!(p.meta.args, ["x.user"]);
    assert_eq!(
        (p.meta.about.cve.as_slice(), p.meta.about.cwe.as_slice()),
        (&["CVE-2021-44228".to_string()][..], &["CWE-79".to_string()][..])
    );
    assert_eq!(p.meta.about.remediation.as_deref(), Some("Upgrade."));
    for (fields, says) in [
        ("cve = 'CVE-2021-44228'", "field 'cve' must be a list"),
        ("cve = {'CVE-21-1'}", "field 'cve' must hold CVE ids"),
        ("cwe = {'79'}", "field 'cwe' must hold CWE ids"),
        ("args = {'a b'}", "field 'args' must hold `script_settings.args` key names"),
        ("remediation = {}", "field 'remediation' must be a string"),
        (
            "tags = {'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x'}",
            "more than 16 entries",
        ),
    ] {
        let e = with(fields).unwrap_err().to_string();
        assert!(e.contains(says), "{fields}: {e}");
    }
}

#[tokio::test]
async fn a_findings_own_metadata_is_kept_and_checked_when_given() {
    let out = run("ctx:finding{ title = 't', severity = 'low', cwe = {'CWE-295'}, cve = {'CVE-2014-0160'}, \
                   references = {'https://example.org/a'}, remediation = 'Renew it.', tags = {'tls'} }")
    .await;
    assert_eq!(out.error, None, "{out:?}");
    let about = &out.findings[0].about;
    assert_eq!(
        (about.cwe.as_slice(), about.cve.as_slice()),
        (&["CWE-295".to_string()][..], &["CVE-2014-0160".to_string()][..])
    );
    assert_eq!((about.remediation.as_deref(), about.tags.len(), about.references.len()), (Some("Renew it."), 1, 1));
    for (fields, says) in [
        ("cwe = {'295'}", "ctx:finding: field 'cwe' must hold CWE ids"),
        ("cve = 'CVE-2014-0160'", "ctx:finding: field 'cve' must be a list"),
        ("remediation = 7", "ctx:finding: field 'remediation' must be a string"),
        ("fix = 'x'", "fix"),
    ] {
        let out = run(&format!("ctx:finding{{ title = 't', {fields} }}")).await;
        assert!(out.findings.is_empty(), "{fields}");
        assert_eq!(error_kind(&out), Some(ErrorKind::Plugin), "{fields}: {out:?}");
        let msg = out.error.unwrap().message;
        assert!(msg.contains(says), "{fields}: {msg}");
    }
}

#[tokio::test]
async fn the_scan_wide_output_allowance_is_shared_and_trips() {
    let p = with_run(
        r#"
        for i = 1, 10 do ctx:finding{ title = "f" .. i, data = { string.rep("x", 50000), string.rep("y", 50000) } } end
    "#,
    );
    let budgets = Budgets { output: 10 << 20, scan_output: 250_000, ..Budgets::default() };
    let scan = OutputAllowance::new(budgets.scan_output);
    let a = Vm::new(std::slice::from_ref(&p), &budgets, Guard::offline(), &BTreeMap::new(), scan.clone()).unwrap();
    let b = Vm::new(&[p], &budgets, Guard::offline(), &BTreeMap::new(), scan).unwrap();
    let (x, y) = (a.run(0, info(22)).await, b.run(0, info(22)).await);
    assert_eq!(x.findings.len(), 2, "two 100 kB findings fit in 250 kB: {:?}", x.error);
    assert_eq!(y.findings.len(), 0, "the second VM finds the allowance spent");
    for out in [&x, &y] {
        let RunError { kind, message: msg } = out.error.clone().unwrap();
        assert_eq!(kind, ErrorKind::Budget);
        assert!(msg.contains("past the scan's 250000 bytes"), "{msg}");
    }
}

#[tokio::test]
async fn a_run_reporting_too_much_data_trips_before_copying_it() {
    let out = run(r#"
        local s = string.rep("A", 65536)
        local t = {}
        for i = 1, 9999 do t[i] = s end
        ctx:finding{ title = "small", data = { ok = true } }
        pcall(ctx.finding, ctx, { title = "big", data = t })
        ctx:finding{ title = "escaped" }
    "#)
    .await;
    assert_eq!(out.findings.len(), 1);
    assert_eq!(out.error.unwrap().message, "reported more than 1048576 bytes of findings and results");
}

#[tokio::test]
async fn host_call_inputs_are_capped() {
    let out = run(r#"
        local big = string.rep("a", 1048577)
        local ok1, e1 = pcall(re.find, big, "b")
        local ok2 = pcall(re.find, big:sub(1, 1048576), "b")
        local ok3, e3 = pcall(hash.sha256, string.rep("a", 4194305))
        ctx:finding{ title = "t", data = { ok1 = ok1, e1 = tostring(e1), ok2 = ok2, ok3 = ok3, e3 = tostring(e3) } }
    "#)
    .await;
    assert_eq!(out.error, None);
    let d = &out.findings[0].data;
    assert_eq!((d["ok1"].as_bool(), d["ok2"].as_bool(), d["ok3"].as_bool()), (Some(false), Some(true), Some(false)));
    assert!(d["e1"].as_str().unwrap().contains("at most 1048576"), "{d}");
    assert!(d["e3"].as_str().unwrap().contains("at most 4194304"), "{d}");
}

// Regression: a loop inside a coroutine never yields to the host, so only
// the interrupt can end it when the scan is cut (Ctrl-C).
#[tokio::test]
async fn a_cut_stops_a_loop_inside_a_coroutine() {
    let p = with_run("coroutine.wrap(function() while true do end end)()");
    let budgets = Budgets { wall: Duration::from_secs(30), steps: u64::MAX, ..Budgets::default() };
    let mut vm = Vm::new(&[p], &budgets, Guard::offline(), &BTreeMap::new(), OutputAllowance::new(1 << 20)).unwrap();
    let (handle, cut) = crate::pipeline::stop_signal();
    vm.cut_by(cut);
    let started = Instant::now();
    // From another thread, as in a scan: the loop holds this one.
    let cutter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        handle.stop();
        handle
    });
    let out = vm.run(0, info(22)).await;
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    assert_eq!(out.error.unwrap().message, "stopped: the scan was interrupted");
    drop(cutter.join());
}

// Regression: titles and log lines were charged to no scan-wide budget.
#[tokio::test]
async fn titles_and_log_lines_are_charged_to_the_output_budgets() {
    let p = with_run(
        r#"
        for i = 1, 60 do print(string.rep("l", 900)) end
        for i = 1, 60 do ctx:finding{ title = string.rep("t", 290) .. i } end
    "#,
    );
    let budgets = Budgets { output: 10 << 20, scan_output: 20_000, ..Budgets::default() };
    let vm = Vm::new(&[p], &budgets, Guard::offline(), &BTreeMap::new(), OutputAllowance::new(20_000)).unwrap();
    let out = vm.run(0, info(22)).await;
    let logged: usize = out.logs.iter().map(String::len).sum();
    let titled: usize = out.findings.iter().map(|f| f.title.len()).sum();
    assert!(logged + titled <= 20_000, "{logged} bytes of logs and {titled} of titles");
    assert!(out.logs.len() < 60 && out.findings.len() < 60);
    assert!(out.error.unwrap().message.contains("past the scan's 20000 bytes"));
}

#[test]
fn a_description_too_long_for_the_metadata_cache_is_refused() {
    let long = "d".repeat(3000);
    let src = format!(
        "return {{ id = 'x', description = '{long}', categories = {{'safe'}}, ports = {{80}}, run = function() end }}"
    );
    let e = load_source(src.as_bytes(), Path::new("x.lua")).unwrap_err().to_string();
    assert!(e.contains("longer than 2000 bytes"), "{e}");
}

#[test]
fn a_pack_folder_reads_metadata_from_the_cache_once_stored() {
    use sha2::Digest;
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let src = "return { id = 'cached', description = 'from the file', categories = {'safe'}, ports = {80}, run = function() end }";
    let hash: String = sha2::Sha256::digest(src.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(dir.path().join("cached.lua"), src).unwrap();
    std::fs::write(
        dir.path().join("pack.yaml"),
        format!("name: t\nversion: 0.1.0\nplugins:\n  - file: cached.lua\n    sha256: {hash}\n"),
    )
    .unwrap();
    let first = load_pack_dir_cached(dir.path(), Some(cache.path())).unwrap();
    assert_eq!(first[0].meta.description, "from the file");
    // The entry is written, and the next load reads it instead of running the file.
    let entries: Vec<_> = std::fs::read_dir(cache.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let text = std::fs::read_to_string(&entries[0]).unwrap().replace("from the file", "from the cache");
    std::fs::write(&entries[0], text).unwrap();
    let second = load_pack_dir_cached(dir.path(), Some(cache.path())).unwrap();
    assert_eq!(second[0].meta.description, "from the cache");
    assert_eq!(second[0].pack.as_deref(), Some("t"));
    // Without a cache, the file is run again.
    assert_eq!(load_pack_dir(dir.path()).unwrap()[0].meta.description, "from the file");
}

#[tokio::test]
async fn recv_exact_and_recv_line_read_within_their_bounds() {
    let port = server(b"220-first\r\n220 last\nABCDEFGHIJ0123456789xyz").await;
    let body = r#"
        local s = assert(ctx:connect{})
        assert(s:send("hi\r\n"))
        local l1, l2 = s:recv_line(), s:recv_line()
        local ten = s:recv_exact(10)
        local short, why = s:recv_line(4)
        local rest, closed = s:recv_exact(50)
        local tail = s:recv(100)
        local ok, range = pcall(function() return s:recv_exact(0) end)
        range = tostring(range)
        ctx:finding{ title = "r", data = { l1 = l1, l2 = l2, ten = ten, short = short == nil, why = why,
            rest = rest == nil, closed = closed, tail = tail, ok = ok, range = range } }
    "#;
    let budgets = Budgets { wall: Duration::from_secs(2), ..Budgets::default() };
    let (out, _) = run_with(with_run(body), budgets, guard_for(port), port).await;
    assert_eq!(out.error, None, "{out:?}");
    let d = &out.findings[0].data;
    assert_eq!((d["l1"].as_str(), d["l2"].as_str()), (Some("220-first"), Some("220 last")), "CRLF and LF ends");
    assert_eq!(d["ten"], "ABCDEFGHIJ");
    assert_eq!(d["short"], true);
    assert_eq!(d["why"], "no line end in the first 4 bytes");
    assert_eq!(d["rest"], true);
    assert_eq!(d["closed"], "closed after 13 of 50 bytes");
    assert_eq!(d["tail"], "0123456789xyz", "what came before the end is still there");
    assert_eq!(d["ok"], false);
    assert!(d["range"].as_str().unwrap().contains("recv_exact: n must be 1 to 1048576, not 0"), "{d}");
}

#[tokio::test]
async fn finding_metadata_is_charged_to_the_output_allowance() {
    // A finding's metadata is charged to the run's output allowance.
    let body = "ctx:finding{ title = 't', remediation = string.rep('r', 1500) }";
    let budgets = Budgets { wall: Duration::from_millis(300), output: 1000, ..Budgets::default() };
    let (out, _) = run_with(with_run(body), budgets, Guard::offline(), 22).await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Budget), "{out:?}");
    assert!(out.error.unwrap().message.contains("reported more than 1000 bytes of findings"));
    assert!(out.findings.is_empty());
    // The same finding without that metadata fits.
    let budgets = Budgets { wall: Duration::from_millis(300), output: 1000, ..Budgets::default() };
    let (out, _) =
        run_with(with_run("ctx:finding{ title = 't', cwe = { 'CWE-295' } }"), budgets, Guard::offline(), 22).await;
    assert_eq!((out.error, out.findings.len()), (None, 1));
}

/// A loopback UDP server that answers each datagram with `reply` (none when empty).
async fn udp_server(reply: &'static [u8]) -> u16 {
    let s = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = s.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut b = [0u8; 2048];
        while let Ok((_, from)) = s.recv_from(&mut b).await {
            if !reply.is_empty() {
                let _ = s.send_to(reply, from).await;
            }
        }
    });
    port
}

fn udp_guard(port: u16) -> Guard {
    Guard::scan(None, Some(super::guard::tests::space("127.0.0.1", "", vec![port])))
}

#[tokio::test]
async fn udp_sockets_reach_only_the_scanned_udp_ports_and_charge_what_they_read() {
    let port = udp_server(b"pong").await;
    let body = r#"
        local s = assert(ctx:udp{ timeout = 2000 })
        assert(s:send("ping"))
        local got = assert(s:recv())
        local cut = (assert(s:send("ping")) and s:recv(2))
        local _, other = ctx:udp{ port = 1 }
        local _, tcp = ctx:connect{}
        ctx:finding{ title = "t", data = { got = got, cut = cut, other = other, tcp = tcp } }
    "#;
    let (out, _) = run_with(with_run(body), Budgets::default(), udp_guard(port), port).await;
    assert_eq!(out.error, None, "{out:?}");
    let d = &out.findings[0].data;
    assert_eq!((d["got"].as_str(), d["cut"].as_str()), (Some("pong"), Some("po")));
    assert!(d["other"].as_str().unwrap().contains("UDP port 1 is not one this scan scans"), "{d}");
    assert!(d["tcp"].as_str().unwrap().contains("scans no TCP ports"), "{d}");
    assert_eq!(out.refused.len(), 2, "each refusal is reported");

    // The read budget counts datagrams too.
    let budgets = Budgets { read_bytes: 6, ..Budgets::default() };
    let body = "local s = ctx:udp{} for i = 1, 3 do s:send('x') s:recv() end";
    let (out, _) = run_with(with_run(body), budgets, udp_guard(port), port).await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Budget), "{out:?}");
    assert!(out.error.unwrap().message.contains("read more than 6 bytes"));
}

#[tokio::test]
async fn a_udp_socket_sends_a_bounded_number_of_datagrams_and_waits_its_timeout() {
    let port = udp_server(b"").await;
    let body = r#"
        local s = assert(ctx:udp{ timeout = 100 })
        local sent, why = 0, nil
        for i = 1, 1000 do
            local ok, err = s:send("x")
            if not ok then why = err break end
            sent = sent + 1
        end
        local t = os.clock()
        local r, rerr = s:recv()
        local big = pcall(function() return s:send(string.rep("x", 1473)) end)
        ctx:finding{ title = "t", data = { sent = sent, why = why, r = r, rerr = rerr, big = big } }
    "#;
    let (out, took) = run_with(with_run(body), Budgets::default(), udp_guard(port), port).await;
    assert_eq!(out.error, None, "{out:?}");
    let d = &out.findings[0].data;
    assert_eq!(d["sent"].as_u64(), Some(u64::from(super::udp::MAX_DATAGRAMS)), "{d}");
    assert!(d["why"].as_str().unwrap().contains("at most 64 datagrams"), "{d}");
    assert_eq!((d["r"].is_null(), d["rerr"].as_str()), (true, Some("timeout")), "{d}");
    assert_eq!(d["big"], false, "a datagram past 1,472 bytes is an error");
    assert!(took >= Duration::from_millis(100) && took < Duration::from_secs(3), "{took:?}");
}

/// A loopback receiver that counts the datagrams and bytes it gets, and
/// when each datagram came (ms since it started).
async fn udp_counter() -> (u16, Arc<std::sync::Mutex<Vec<(u128, usize)>>>) {
    let s = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = s.local_addr().unwrap().port();
    let got = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = got.clone();
    let t = Instant::now();
    tokio::spawn(async move {
        let mut b = vec![0u8; 65536];
        while let Ok(n) = s.recv(&mut b).await {
            seen.lock().unwrap().push((t.elapsed().as_millis(), n));
        }
    });
    (port, got)
}

/// One run once sent 769 datagrams of 65,507 bytes (50 MB) in 0.1 s: now a
/// datagram holds at most 1,472 bytes, a run sends at most 256 KiB of them,
/// paced (16 at once, then 100 a second).
#[tokio::test]
async fn udp_sends_are_capped_in_size_and_bytes_and_paced() {
    let (port, got) = udp_counter().await;
    let body = r#"
        local big = pcall(function() local s = ctx:udp{} return s:send(string.rep("x", 1473)) end)
        ctx:log(big and "big sent" or "big refused")
        local data = string.rep("x", 1472)
        for i = 1, 16 do
            local s = assert(ctx:udp{})
            for j = 1, 64 do
                local ok, err = s:send(data)
                if not ok then ctx:log("not stopped: " .. err) return end
            end
        end
    "#;
    let budgets = Budgets { sockets: 17, ..Budgets::default() };
    let (out, took) = run_with(with_run(body), budgets, udp_guard(port), port).await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Budget), "{out:?}");
    assert!(out.error.as_ref().unwrap().message.contains("sent more than 262144 bytes of datagrams"), "{out:?}");
    assert_eq!(out.logs[0], "big refused", "a datagram past 1,472 bytes is an error");
    assert_eq!(out.logs.len(), 1, "the run ends at the send past the cap: {out:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let got = got.lock().unwrap().clone();
    let bytes: usize = got.iter().map(|g| g.1).sum();
    assert_eq!(got.len(), 262_144 / 1472, "whole datagrams within the cap");
    assert!(bytes <= 262_144, "{bytes}");
    // 178 datagrams: 16 at once, then 162 at 100 a second.
    assert!(took >= Duration::from_millis(1500), "{took:?}");
    let first_half_second = got.iter().filter(|g| g.0 < 500).count();
    assert!(first_half_second <= 16 + 50 + 2, "{first_half_second} datagrams in the first 0.5 s");
}

/// A run's TCP sends (its sockets and ctx.http) are charged to the send
/// budget (--script-max-send): past it, nothing is sent and the run ends
/// at once, as past the read budget; what got through stays within it.
#[tokio::test]
async fn tcp_sends_are_charged_to_the_send_budget() {
    use tokio::io::AsyncReadExt;
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let got = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = got.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut b = vec![0u8; 65536];
                while let Ok(n) = s.read(&mut b).await {
                    if n == 0 {
                        break;
                    }
                    seen.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    let budgets = Budgets { send_bytes: 1 << 20, ..Budgets::default() };
    let body = r#"
        local s = assert(ctx:connect{})
        local chunk = string.rep("x", 65536)
        for i = 1, 1000 do
            local ok, err = s:send(chunk)
            if not ok then ctx:log("not stopped: " .. err) return end
        end
    "#;
    let (out, _) = run_with(with_run(body), budgets.clone(), guard_for(port), port).await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Budget), "{out:?}");
    assert!(out.error.as_ref().unwrap().message.contains("sent more than 1048576 bytes"), "{out:?}");
    assert!(out.logs.is_empty(), "the run ends at the send past the budget: {out:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let n = got.load(std::sync::atomic::Ordering::Relaxed);
    // At most 16 chunks of 64 KiB went (the socket closes with RST, so
    // what was still queued may not arrive), the 17th did not.
    assert!(n > 0 && n <= 1 << 20, "{n} bytes arrived");
    // ctx.http's request is charged too.
    let body = "local r, err = ctx.http:get('/', { body = string.rep('b', 2097152) }) ctx:log(err)";
    let (out, _) = run_with(with_run(body), budgets, guard_for(port), port).await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Budget), "{out:?}");
    assert!(out.error.as_ref().unwrap().message.contains("sent more than 1048576 bytes"), "{out:?}");
}

/// A plugin of `categories` whose `run` body is `body`, on every port.
fn in_categories(categories: &str, body: &str) -> Plugin {
    plugin(&format!(
        "return {{ id = 'namer', description = 'd', categories = {{{categories}}}, portrule = function() return true end,\n\
         run = function(ctx)\n{body}\nend }}"
    ))
}

#[tokio::test]
async fn a_version_plugin_sets_the_ports_service_as_a_second_service_event() {
    use crate::findings::{Event, ServiceMethod};
    let p = in_categories(
        "'version', 'safe'",
        r#"
        assert(ctx:set_service{ name = "frob", product = "Frob d", info = "first" })
        -- A later call changes what the earlier one set; fields never given keep the port's.
        local ok, err = ctx:set_service{ version = "1.2", cpe = { "cpe:/a:frob:frob:1.2" } }
        return tostring(ok) .. " " .. tostring(err)
    "#,
    );
    let (out, _) = run_with(p.clone(), Budgets::default(), Guard::offline(), 22).await;
    assert_eq!(out.error, None);
    let id = out.service.clone().expect("the service it set");
    assert_eq!(
        (id.service.as_str(), id.product.as_deref(), id.version.as_deref(), id.info.as_deref()),
        ("frob", Some("Frob d"), Some("1.2"), Some("first"))
    );
    let evs = crate::plugins::stage::to_events(&p, &info(22), out, &crate::pipeline::Ctx::detached("s"));
    let [Event::Service(s), Event::Script(r)] = &evs[..] else { panic!("{evs:?}") };
    assert_eq!(r.output, "true nil");
    assert_eq!((s.port, s.method, s.probe.as_deref()), (22, ServiceMethod::Probed, Some("namer")));
    assert_eq!(s.id.cpe, ["cpe:/a:frob:frob:1.2"]);
    // The port's banner and the rest come along: the event is the whole port.
    assert_eq!(s.banner, b"SSH-2.0-Test\r\n");

    let p = in_categories("'version'", r#"assert(ctx:set_service{ name = "frob", product = "Frob d", info = "x" })"#);
    let (out, _) = run_with(p, Budgets::default(), Guard::offline(), 22).await;
    let id = out.service.expect("set");
    assert_eq!(
        (id.service.as_str(), id.product.as_deref(), id.version, id.info.as_deref()),
        ("frob", Some("Frob d"), None, Some("x"))
    );
}

#[tokio::test]
async fn a_plugin_of_another_category_cannot_set_the_ports_service() {
    let p = in_categories("'safe', 'discovery', 'default'", r#"ctx:set_service{ name = "evil" } return "renamed""#);
    let (out, _) = run_with(p.clone(), Budgets::default(), Guard::offline(), 22).await;
    assert_eq!(out.service, None);
    let RunError { kind, message } = out.error.clone().expect("the call raises");
    assert_eq!(kind, ErrorKind::Plugin);
    assert!(message.contains("only a plugin of the version category"), "{message}");
    // Even a RunOutput that says otherwise makes no service event for it.
    let mut forged = out;
    forged.service = Some(crate::findings::Identity { service: "evil".into(), ..Default::default() });
    let evs = crate::plugins::stage::to_events(&p, &info(22), forged, &crate::pipeline::Ctx::detached("s"));
    assert!(!evs.iter().any(|e| matches!(e, crate::findings::Event::Service(_))), "{evs:?}");
}

#[tokio::test]
async fn set_service_refuses_what_cannot_be_a_service_and_raises_for_misuse() {
    use super::api::{MAX_SERVICE_CPES, MAX_SERVICE_FIELD, MAX_SERVICE_NAME};
    // A server's text: nil, why (the port keeps its service).
    let refused = format!(
        r#"
        local said = {{}}
        for _, spec in ipairs({{
          {{ product = string.rep("p", {over}) }},
          {{ version = "1.0\r\nX-Injected: 1" }},
          {{ info = "\0" }},
          {{ name = "two words" }},
          {{ name = string.rep("n", {name_over}) }},
          {{ name = "" }},
          {{ cpe = {{ "not a cpe" }} }},
          {{ cpe = {{ {cpes} }} }},
        }}) do
          local ok, why = ctx:set_service(spec)
          table.insert(said, tostring(ok) .. ": " .. tostring(why))
        end
        assert(ctx:set_service{{ product = string.rep("p", {max}), name = string.rep("n", {name_max}) }})
        return table.concat(said, "\n")
    "#,
        over = MAX_SERVICE_FIELD + 1,
        max = MAX_SERVICE_FIELD,
        name_over = MAX_SERVICE_NAME + 1,
        name_max = MAX_SERVICE_NAME,
        cpes = ["'cpe:/a:x:y'"; MAX_SERVICE_CPES + 1].join(", "),
    );
    let (out, _) = run_with(in_categories("'version'", &refused), Budgets::default(), Guard::offline(), 22).await;
    assert_eq!(out.error, None);
    let text = out.findings[0].output.clone().unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 8, "{text}");
    assert!(lines.iter().all(|l| l.starts_with("nil: ctx:set_service: ")), "{text}");
    assert!(lines[0].contains("longer than 256 bytes") && lines[1].contains("not one line"), "{text}");
    assert!(lines[7].contains("more than 8 CPEs"), "{text}");
    let id = out.service.expect("the values at the limits are taken");
    assert_eq!((id.product.map(|p| p.len()), id.service.len()), (Some(MAX_SERVICE_FIELD), MAX_SERVICE_NAME));

    // A plugin's own mistakes raise.
    for body in [
        r#"ctx:set_service{ nmae = "x" }"#,
        r#"ctx:set_service{ version = 2 }"#,
        r#"ctx:set_service{ cpe = "cpe:/a:x:y" }"#,
        r#"ctx:set_service{ cpe = { 1 } }"#,
    ] {
        let (out, _) = run_with(in_categories("'version'", body), Budgets::default(), Guard::offline(), 22).await;
        assert_eq!(error_kind(&out), Some(ErrorKind::Plugin), "{body}");
        assert_eq!(out.service, None, "{body}");
    }
}

#[tokio::test]
async fn set_service_is_charged_to_the_output_budget() {
    let budgets = Budgets { output: 100, ..Budgets::default() };
    let body = r#"ctx:set_service{ product = string.rep("p", 200) }"#;
    let (out, _) = run_with(in_categories("'version'", body), budgets, Guard::offline(), 22).await;
    assert_eq!(error_kind(&out), Some(ErrorKind::Budget), "{:?}", out.error);
    assert_eq!(out.service, None);
}

#[tokio::test]
async fn a_new_name_drops_what_was_known_of_the_old_service_and_a_new_version_its_cpe() {
    let detected = || {
        let mut s = (*info(22)).clone();
        s.id = crate::findings::Identity {
            service: "ssh".into(),
            product: Some("OpenSSH".into()),
            version: Some("9.2p1".into()),
            os: Some("Linux".into()),
            cpe: vec!["cpe:/a:openbsd:openssh:9.2p1".into()],
            ..Default::default()
        };
        Arc::new(s)
    };
    let service_after = |body: &'static str| async move {
        let p = in_categories("'version'", body);
        let budgets = Budgets::default();
        let vm = Vm::new(&[p], &budgets, Guard::offline(), &BTreeMap::new(), OutputAllowance::new(1 << 20)).unwrap();
        let out = vm.run(0, detected()).await;
        assert_eq!(out.error, None);
        out.service.expect("set")
    };
    let id = service_after(r#"assert(ctx:set_service{ name = "frob", version = "2" })"#).await;
    assert_eq!(
        id,
        crate::findings::Identity { service: "frob".into(), version: Some("2".into()), ..Default::default() }
    );
    // The same name: a merge.
    let id = service_after(r#"assert(ctx:set_service{ name = "ssh", info = "protocol 2.0" })"#).await;
    assert_eq!((id.product.as_deref(), id.os.as_deref(), id.cpe.len()), (Some("OpenSSH"), Some("Linux"), 1));
    let id = service_after(r#"assert(ctx:set_service{ version = "9.3p1" })"#).await;
    assert_eq!((id.version.as_deref(), id.os.as_deref(), id.cpe.len()), (Some("9.3p1"), Some("Linux"), 0));
}
