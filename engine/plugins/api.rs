//! The `ctx` API plugins run against: findings and log lines, guarded
//! connections, the HTTP client, SSH and TLS details (their sockets are in
//! [`super::socket`], `ctx:tls_enum` in [`super::tls_enum`], the `re` and
//! `hash` modules in [`super::libs`]).
//!
//! In: a plugin's calls, during a run ([`super::host`] sets the run up).
//! Out: values for the plugin, and the run's findings, logs and refusals.
//! What always holds: every socket passes [`Host::admit`] (the guard and
//! the socket budget) or, replayed, [`Host::aim`] (the budget, no network),
//! and has a deadline; every byte read is charged
//! to the run's read budget before the plugin sees it, and every list a
//! plugin can grow (findings, logs, refusals) is capped.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use mlua::{Lua, MultiValue, Table, Value};

use super::budget::{charge_output, charge_text, Budgets, Meter, OutputAllowance, Trip, BUDGET_PREFIX};
use super::host::{with_run, Current, Finding};
use super::libs::PatternCache;
use super::net::{self, timed_out, Guard, SharedSocket, Socket, TlsOptions, Transport};
use super::socket::LuaSocket;
use super::tape::Tape;
use super::value::{from_json, unknown_keys, ConvertError};
use crate::error::{Error, ErrorKind};
use crate::findings::{Severity, TlsInfo};

/// Most findings and log lines one run may report.
const MAX_FINDINGS: usize = 64;
pub(super) const MAX_LOGS: usize = 64;
pub(super) const MAX_LOG_LINE: usize = 1000;
const MAX_TITLE: usize = 300;
/// Longest `host` a connect takes (an IPv6 address with a scope is at most 45 bytes).
const MAX_HOST: usize = 64;
/// Default time for one socket operation.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(5);
/// Most bytes an HTTP response may have.
const MAX_HTTP: usize = 1 << 20;

/// Refuses a table with a key outside `allowed`, naming the keys.
pub(super) fn known_keys(t: &Table, allowed: &[&str], what: &str) -> mlua::Result<()> {
    let unknown = unknown_keys(t, allowed)?;
    if unknown.is_empty() {
        return Ok(());
    }
    Err(mlua::Error::runtime(format!(
        "{what}: unknown key{} {} (known: {})",
        if unknown.len() == 1 { "" } else { "s" },
        unknown.join(", "),
        allowed.join(", ")
    )))
}

/// A log line, charged to the run's and the scan's output budgets (past
/// either, or past [`MAX_LOGS`], lines are dropped).
pub(super) fn log_line(cur: &Current, scan: &OutputAllowance, args: &MultiValue) -> mlua::Result<()> {
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
        if run.out.logs.len() < MAX_LOGS && charge_text(line.len() as u64, &mut run.output_left, scan).is_ok() {
            run.out.logs.push(line);
        }
    })
}

/// The certificate chain and session facts as a Lua table; each
/// certificate also has `pem`.
pub(super) fn tls_table(lua: &Lua, tls: &TlsInfo) -> mlua::Result<Table> {
    let json = serde_json::to_value(tls).map_err(mlua::Error::external)?;
    let Value::Table(t) = from_json(lua, &json)? else { return Err(mlua::Error::runtime("tls is not a table")) };
    let chain: Table = t.raw_get("chain")?;
    for (i, der) in tls.der.iter().enumerate() {
        if let Ok(Value::Table(c)) = chain.raw_get::<Value>(i + 1) {
            c.raw_set("pem", pem(der))?;
            // nmap's view of it (subject_fields, pubkey, extensions, md5...).
            if let Some(serde_json::Value::Object(fields)) = crate::net::x509_fields::fields(der) {
                for (k, v) in fields {
                    c.raw_set(k, from_json(lua, &v)?)?;
                }
            }
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

/// What a `ctx:finding` table may hold.
const FINDING_FIELDS: &[&str] = &["severity", "title", "data", "references", "cve", "cwe", "remediation", "tags"];

/// `ctx:connect`, `ctx:finding`, `ctx:log` and `ctx.http`, made once per VM.
pub(super) fn ctx_methods(lua: &Lua, host: &Host) -> mlua::Result<Table> {
    let methods = lua.create_table()?;

    let h = host.clone();
    methods.raw_set(
        "finding",
        lua.create_function(move |_, (_ctx, spec): (Value, Table)| {
            known_keys(&spec, FINDING_FIELDS, "ctx:finding")?;
            let about =
                super::meta::read_about(&spec).map_err(|e| mlua::Error::runtime(format!("ctx:finding: {e}")))?;
            let severity = match spec.raw_get::<Option<String>>("severity")?.as_deref() {
                None => Severity::Info,
                Some(s) => Severity::parse(s).ok_or_else(|| {
                    mlua::Error::runtime(format!(
                        "ctx:finding: severity {s:?} is not info, low, medium, high or critical"
                    ))
                })?,
            };
            let title = spec
                .raw_get::<Option<String>>("title")?
                .ok_or_else(|| mlua::Error::runtime("ctx:finding: 'title' (a string) is missing"))?;
            let title: String = title.chars().take(MAX_TITLE).collect();
            let raw = spec.raw_get::<Value>("data")?;
            with_run(&h.cur, |run| {
                if run.out.findings.len() >= MAX_FINDINGS {
                    return Err(mlua::Error::runtime(format!("ctx:finding: more than {MAX_FINDINGS} findings")));
                }
                // What leaves the VM is charged before it is copied.
                if let Err(t) = charge_text(title.len() as u64, &mut run.output_left, &h.scan_output) {
                    h.meter.trip(t);
                    return Err(mlua::Error::runtime(format!("{BUDGET_PREFIX}: ctx:finding: title")));
                }
                let data = match charge_output(&raw, &mut run.output_left, &h.scan_output, &h.meter) {
                    Ok(d) => d,
                    Err(ConvertError::TooLarge(n)) => {
                        return Err(mlua::Error::runtime(format!("{BUDGET_PREFIX}: ctx:finding: data past {n} bytes")))
                    }
                    Err(e) => return Err(mlua::Error::runtime(format!("ctx:finding: data: {e}"))),
                };
                let said = about.references.iter().chain(&about.cve).chain(&about.cwe).chain(&about.tags);
                let about_len =
                    said.map(String::len).sum::<usize>() + about.remediation.as_ref().map_or(0, String::len);
                if let Err(t) = charge_text(about_len as u64, &mut run.output_left, &h.scan_output) {
                    h.meter.trip(t);
                    return Err(mlua::Error::runtime(format!("{BUDGET_PREFIX}: ctx:finding: metadata")));
                }
                run.out.findings.push(Finding { severity, title, data, output: None, about });
                Ok(())
            })?
        })?,
    )?;

    let h = host.clone();
    methods.raw_set(
        "log",
        lua.create_function(move |_, mut args: MultiValue| {
            args.pop_front();
            log_line(&h.cur, &h.scan_output, &args)
        })?,
    )?;

    let h = host.clone();
    methods.raw_set(
        "connect",
        lua.create_async_function(move |lua, (_ctx, opts): (Value, Option<Table>)| {
            let h = h.clone();
            async move {
                let req = ConnectRequest::from_lua(opts.as_ref())?;
                match h.open_taped(&req).await {
                    Ok(sock) => Ok((Value::UserData(lua.create_userdata(LuaSocket { sock, host: h })?), Value::Nil)),
                    Err(e) => Ok((Value::Nil, Value::String(lua.create_string(e.to_string())?))),
                }
            }
        })?,
    )?;

    // ctx:udp{port=, host=, timeout=} (engine/plugins/udp.rs).
    let h = host.clone();
    methods.raw_set(
        "udp",
        lua.create_async_function(move |lua, (_ctx, opts): (Value, Option<Table>)| {
            super::udp::open(lua, h.clone(), opts)
        })?,
    )?;

    // ctx:tls_enum{port=, starttls=, versions=, timeout=} (engine/plugins/tls_enum.rs).
    let h = host.clone();
    methods.raw_set(
        "tls_enum",
        lua.create_async_function(move |lua, (_ctx, opts): (Value, Option<Table>)| {
            super::tls_enum::tls_enum(lua, h.clone(), opts)
        })?,
    )?;

    // ctx:server_hello{port=, starttls=, timeout=} (engine/plugins/tls_enum.rs).
    let h = host.clone();
    methods.raw_set(
        "server_hello",
        lua.create_async_function(move |lua, (_ctx, opts): (Value, Option<Table>)| {
            super::tls_enum::server_hello(lua, h.clone(), opts)
        })?,
    )?;

    // ---- ctx:ssh_auth_methods{port=, user=} (begin; see engine/plugins/ssh.rs) ----
    // The methods an SSH server offers `user` (default "root") after a "none"
    // request: a list of names, or nil, why. The connection takes the same
    // path as ctx:connect (guard, socket budget); the exchange ends by the
    // run's deadline and every byte it read is charged to the run.
    let h = host.clone();
    methods.raw_set(
        "ssh_auth_methods",
        lua.create_async_function(move |lua, (_ctx, opts): (Value, Option<Table>)| {
            let h = h.clone();
            async move {
                let failed = |e: Error| Ok((Value::Nil, Value::String(lua.create_string(e.to_string())?)));
                let keys = ["host", "port", "timeout", "user"];
                let mut req = ConnectRequest::from_lua_keys(opts.as_ref(), &keys, "ctx:ssh_auth_methods")?;
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
                let sock = match h.open_socket(&req).await {
                    Ok(sock) => sock,
                    Err(e) => return failed(e),
                };
                let conn = sock.lock().await.conn.take();
                let Some(crate::net::conn::Conn::Plain(stream)) = conn else {
                    return failed(Error::new(ErrorKind::Protocol, "ctx:ssh_auth_methods: not a plain TCP connection"));
                };
                let until = h.meter.deadline();
                let left = with_run(&h.cur, |r| h.budgets.read_bytes.saturating_sub(r.read))?;
                let (result, read) = super::ssh::auth_methods_counted(stream, &user, until, left).await;
                if !h.charge(usize::try_from(read).unwrap_or(usize::MAX)) {
                    return failed(read_budget(&h.budgets));
                }
                match result {
                    Ok(names) => Ok((Value::Table(lua.create_sequence_from(names)?), Value::Nil)),
                    Err(e) => failed(e),
                }
            }
        })?,
    )?;
    // ---- ctx:ssh_auth_methods (end) ----

    // ctx.ssh:host_keys{port=, timeout=}: the server's host keys, one
    // connection per kind (RSA, ECDSA on each curve, Ed25519, in nmap's
    // order), each through the guard and the socket budget: a list
    // of { type=, bits=, blob= }, or nil, why when no key came.
    let ssh = lua.create_table()?;
    let h = host.clone();
    ssh.raw_set(
        "host_keys",
        lua.create_async_function(move |lua, (_ssh, opts): (Value, Option<Table>)| {
            let h = h.clone();
            async move {
                let mut req = ConnectRequest::from_lua_keys(opts.as_ref(), &["port", "timeout"], "ctx.ssh:host_keys")?;
                req.tls = None;
                let (mut keys, mut errors) = (Vec::new(), Vec::new());
                for (_, algorithms) in super::ssh::HOST_KEY_KINDS {
                    let sock = match h.open_socket(&req).await {
                        Ok(sock) => sock,
                        Err(e) => {
                            errors.push(e);
                            break;
                        }
                    };
                    let conn = sock.lock().await.conn.take();
                    let Some(crate::net::conn::Conn::Plain(stream)) = conn else { continue };
                    let until = (tokio::time::Instant::now() + req.timeout).min(h.meter.deadline());
                    let left = with_run(&h.cur, |r| h.budgets.read_bytes.saturating_sub(r.read))?;
                    let (result, read) = super::ssh::host_key_counted(stream, algorithms, until, left).await;
                    if !h.charge(usize::try_from(read).unwrap_or(usize::MAX)) {
                        errors.push(read_budget(&h.budgets));
                        break;
                    }
                    match result {
                        Ok(Some(k)) => keys.push(k),
                        Ok(None) => {}
                        Err(e) => errors.push(e),
                    }
                }
                if keys.is_empty() {
                    let why = errors
                        .first()
                        .map_or("the server offers no host key kind known".to_string(), |e| e.to_string());
                    return Ok((Value::Nil, Value::String(lua.create_string(why)?)));
                }
                let list = lua.create_table()?;
                for k in keys {
                    let t = lua.create_table()?;
                    t.raw_set("type", k.key_type)?;
                    t.raw_set("bits", k.bits)?;
                    t.raw_set("blob", lua.create_string(&k.blob)?)?;
                    list.raw_push(t)?;
                }
                Ok((Value::Table(list), Value::Nil))
            }
        })?,
    )?;
    ssh.set_readonly(true);
    methods.raw_set("ssh", ssh)?;

    let http = lua.create_table()?;
    for method in ["get", "head", "request"] {
        let h = host.clone();
        http.raw_set(
            method,
            lua.create_async_function(move |lua, mut args: MultiValue| {
                let h = h.clone();
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
                    match http_call(&lua, &h, &verb, &path, opts.as_ref()).await {
                        Ok(t) => Ok((Value::Table(t), Value::Nil)),
                        Err(HttpError::Lua(e)) => Err(e),
                        Err(HttpError::Failed(e)) => Ok((Value::Nil, Value::String(lua.create_string(e.to_string())?))),
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
pub(super) struct ConnectRequest {
    host: Option<String>,
    pub(super) port: Option<u16>,
    pub(super) tls: Option<TlsOptions>,
    pub(super) timeout: Duration,
}

impl ConnectRequest {
    const KEYS: &'static [&'static str] = &["host", "port", "tls", "timeout"];

    fn from_lua(opts: Option<&Table>) -> mlua::Result<ConnectRequest> {
        ConnectRequest::from_lua_keys(opts, ConnectRequest::KEYS, "ctx:connect")
    }

    /// As [`ConnectRequest::from_lua`], for a table that may also hold `allowed` keys.
    pub(super) fn from_lua_keys(opts: Option<&Table>, allowed: &[&str], what: &str) -> mlua::Result<ConnectRequest> {
        let mut req = ConnectRequest { host: None, port: None, tls: None, timeout: SOCKET_TIMEOUT };
        let Some(o) = opts else { return Ok(req) };
        known_keys(o, allowed, what)?;
        // An address is at most 45 bytes; anything longer is refused
        // before it is copied out of the VM or quoted in a message.
        req.host = match o.raw_get::<Option<mlua::String>>("host")? {
            None => None,
            Some(h) if h.as_bytes().len() > MAX_HOST => {
                return Err(mlua::Error::runtime(format!(
                    "{what}: host is {} bytes; an address is at most {MAX_HOST}",
                    h.as_bytes().len()
                )))
            }
            Some(h) => Some(h.to_string_lossy()),
        };
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
    known_keys(t, &["versions", "alpn"], "ctx:connect: tls")?;
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

/// What every host function needs: the run in progress, its meter, the
/// scan's guard and the budgets.
#[derive(Clone)]
pub(super) struct Host {
    pub cur: Current,
    pub meter: Arc<Meter>,
    pub guard: Arc<Guard>,
    pub budgets: Arc<Budgets>,
    pub scan_output: OutputAllowance,
    /// The VM's compiled patterns (`re.*`, `recv_until`).
    pub patterns: Arc<PatternCache>,
    /// The run's conversations, when `plugins test` records or replays them.
    pub tape: Arc<std::sync::OnceLock<Arc<Tape>>>,
}

impl Host {
    /// The tape, when it replays.
    fn replay(&self) -> Option<&Arc<Tape>> {
        self.tape.get().filter(|t| t.replaying())
    }

    /// A TCP connection for the host's own protocol helpers: guard, socket
    /// budget, deadline (its bytes are not on the tape: see
    /// [`Host::open_taped`]).
    pub(super) async fn open_socket(&self, req: &ConnectRequest) -> crate::Result<SharedSocket> {
        let (ip, port) = self.admit(req, Transport::Tcp)?;
        let until = tokio::time::Instant::now() + req.timeout;
        let (conn, tls) = net::open(ip, port, req.tls.as_ref(), until).await?;
        self.keep(Socket { conn: Some(conn), pending: Vec::new(), timeout: req.timeout, tls, tape: None })
    }

    /// A socket whose conversation goes on the tape (`ctx:connect`,
    /// `ctx.http`): recorded, or replayed from the recording without the
    /// network.
    pub(super) async fn open_taped(&self, req: &ConnectRequest) -> crate::Result<SharedSocket> {
        let tls_asked = req.tls.is_some();
        if let Some(tape) = self.replay() {
            let (_, port) = self.aim(req)?;
            let st = tape.open("tcp", port, tls_asked, None)?;
            let tls = st.tls();
            return self.keep(Socket { conn: None, pending: Vec::new(), timeout: req.timeout, tls, tape: Some(st) });
        }
        let Some(tape) = self.tape.get() else { return self.open_socket(req).await };
        let port = req.port.unwrap_or(with_run(&self.cur, |r| r.info.port).map_err(no_run)?);
        match self.open_socket(req).await {
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

    fn keep(&self, s: Socket) -> crate::Result<SharedSocket> {
        let sock = Arc::new(tokio::sync::Mutex::new(s));
        with_run(&self.cur, |r| r.socks.push(sock.clone())).map_err(no_run)?;
        Ok(sock)
    }

    /// Where a socket may go: the address and port asked for, if the guard
    /// allows them over `transport` and the socket budget has one more.
    pub(super) fn admit(&self, req: &ConnectRequest, transport: Transport) -> crate::Result<(IpAddr, u16)> {
        if self.replay().is_some() {
            return Err(Error::new(
                ErrorKind::Sandbox,
                "not replayed: a replay has the sockets of ctx:connect, ctx.http and ctx:udp only, not the \
                 host's own protocol helpers (ctx.ssh, ctx:tls_enum, ctx:server_hello, ctx:ssh_auth_methods)",
            ));
        }
        let (ip, port) = self.aim(req)?;
        if let Err(why) = self.guard.check(with_run(&self.cur, |r| r.info.ip).map_err(no_run)?, ip, port, transport) {
            let what = if transport == Transport::Udp { "datagrams to" } else { "connect to" };
            return Err(refuse(&self.cur, why.context(format!("{what} {ip}:{port} refused"))));
        }
        Ok((ip, port))
    }

    /// The address and port a request asks for (an address, never a name),
    /// counted against the socket budget.
    pub(super) fn aim(&self, req: &ConnectRequest) -> crate::Result<(IpAddr, u16)> {
        let (cur, meter, b) = (&self.cur, &self.meter, &self.budgets);
        let info = with_run(cur, |r| r.info.clone()).map_err(no_run)?;
        let ip: IpAddr = match &req.host {
            None => info.ip,
            Some(h) => match h.parse() {
                Ok(ip) => ip,
                Err(_) => {
                    return Err(refuse(
                        cur,
                        Error::new(
                            ErrorKind::Sandbox,
                            format!(
                                "{h:?} is a name; plugins connect to addresses only, and only to the host being scanned"
                            ),
                        ),
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
        .map_err(no_run)?;
        if over {
            meter.trip(Trip::Sockets);
            return Err(Error::new(ErrorKind::Budget, format!("{BUDGET_PREFIX}: more than {} sockets", b.sockets)));
        }
        Ok((ip, port))
    }

    /// Charges `n` bytes read to the run; false once the budget is spent.
    pub(super) fn charge(&self, n: usize) -> bool {
        let over = with_run(&self.cur, |r| {
            r.read += n as u64;
            r.read > self.budgets.read_bytes
        })
        .unwrap_or(true);
        if over {
            self.meter.trip(Trip::Read);
        }
        !over
    }
}

/// Most refusals one run reports (each also counts against its socket budget).
const MAX_REFUSALS: usize = 16;

/// Records a connection the guard refused and returns its error.
fn refuse(cur: &Current, why: Error) -> Error {
    let _ = with_run(cur, |r| {
        if r.out.refused.len() < MAX_REFUSALS {
            r.out.refused.push(why.to_string());
        }
    });
    why
}

/// A host call made outside a run (a plugin kept `ctx` past its run).
fn no_run(e: mlua::Error) -> Error {
    Error::with_source(ErrorKind::Sandbox, "no run in progress", e)
}

/// The error of a run past its read budget.
pub(super) fn read_budget(b: &Budgets) -> Error {
    Error::new(ErrorKind::Budget, format!("{BUDGET_PREFIX}: read more than {} bytes", b.read_bytes))
}

enum HttpError {
    Lua(mlua::Error),
    Failed(Error),
}

impl From<mlua::Error> for HttpError {
    fn from(e: mlua::Error) -> HttpError {
        HttpError::Lua(e)
    }
}

/// `ctx.http:get(path, opts)` and friends: one request on a new connection
/// (TLS when the service was found inside TLS, or `opts.tls`).
async fn http_call(lua: &Lua, h: &Host, verb: &str, path: &str, opts: Option<&Table>) -> Result<Table, HttpError> {
    let info = with_run(&h.cur, |r| r.info.clone())?;
    let mut req = ConnectRequest { host: None, port: None, tls: None, timeout: SOCKET_TIMEOUT };
    let mut headers = Vec::new();
    let mut body = Vec::new();
    let mut max = MAX_HTTP;
    let mut tls = info.tunnel == Some(crate::findings::Tunnel::Ssl);
    if let Some(o) = opts {
        let keys = ["host", "port", "tls", "timeout", "headers", "body", "max"];
        req = ConnectRequest::from_lua_keys(Some(o), &keys, "ctx.http")?;
        if let Some(t) = o.raw_get::<Option<bool>>("tls")? {
            tls = t;
        }
        if let Some(h) = o.raw_get::<Option<Table>>("headers")? {
            for pair in h.pairs::<String, String>() {
                let (k, v) = pair?;
                if k.contains(['\r', '\n', ':']) || v.contains(['\r', '\n']) {
                    return Err(HttpError::Failed(Error::new(ErrorKind::Config, format!("bad header {k:?}"))));
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
        return Err(HttpError::Failed(Error::new(ErrorKind::Config, format!("bad request line {verb} {path}"))));
    }
    let sock = h.open_taped(&req).await.map_err(HttpError::Failed)?;
    let mut s = sock.lock().await;
    let host = match info.ip {
        IpAddr::V6(v6) => format!("[{v6}]"),
        v4 => v4.to_string(),
    };
    let request = net::request_bytes(verb, path, &host, &headers, &body);
    if let Err(e) = s.send(&request).await {
        return Err(HttpError::Failed(e.context("send")));
    }
    let mut raw = Vec::new();
    loop {
        let until = tokio::time::Instant::now() + s.timeout;
        let n = match s.read_into(16 * 1024, until, &mut raw).await {
            Err(e) if e.kind() == ErrorKind::Timeout => {
                return Err(HttpError::Failed(timed_out("timeout reading the response")))
            }
            Err(e) if raw.is_empty() => return Err(HttpError::Failed(e.context("recv"))),
            Err(_) | Ok(0) => break,
            Ok(n) => n,
        };
        if !h.charge(n) {
            return Err(HttpError::Failed(read_budget(&h.budgets)));
        }
        if raw.len() >= max {
            raw.truncate(max);
            break;
        }
        // HEAD and bodiless answers end at the blank line.
        if verb == "HEAD" && raw.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    s.close();
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
