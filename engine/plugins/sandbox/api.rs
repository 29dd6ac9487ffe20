//! The `ctx` plugins run against: one per run, a UserData on the run
//! ([`Run`]), with the port's facts as fields and the host's calls as
//! methods: findings and log lines, guarded connections (`ctx:connect`,
//! `ctx:udp`), the HTTP client (`ctx.http`), SSH (`ctx.ssh`) and TLS details. Their
//! sockets are in [`super::socket`] and [`super::udp`], `ctx:tls_enum` and
//! `ctx:server_hello` in [`super::tls_enum`], the `re` and `hash` modules
//! in [`super::builtins`]. A plugin of the `version` category may also set
//! the port's service (`ctx:set_service`), as nmap's version scripts do.
//!
//! In: a plugin's calls, during its run ([`super::host`] makes the run and
//! its `ctx`). Out: values for the plugin; what it reports goes to the run.
//! What always holds: every socket is opened by the run ([`Run::open`],
//! [`Run::open_taped`], [`Run::admit`]: the guard and the socket budget)
//! and has a deadline; every byte read is charged to the run before the
//! plugin sees it; `ctx` is read-only, and a `ctx` kept past its run
//! refuses every call.

use std::net::IpAddr;
use std::sync::Arc;

use mlua::{Lua, MultiValue, Table, UserData, UserDataFields, UserDataMethods, Value};

use super::failure::{timed_out, Failure, Kind};
use super::guard::{self, ConnectRequest, TlsOptions, SOCKET_TIMEOUT};
use super::run::Run;
use super::socket::LuaSocket;
use super::value::{known_keys, tls_table};
use crate::error::{Error, ErrorKind};
use crate::findings::{Identity, Severity};

/// Most bytes an HTTP response may have.
const MAX_HTTP: usize = 1 << 20;

/// What a `ctx:finding` table may hold.
const FINDING_FIELDS: &[&str] = &["severity", "title", "data", "references", "cve", "cwe", "remediation", "tags"];

/// What a `ctx:set_service` table may hold.
const SERVICE_FIELDS: &[&str] = &["name", "product", "version", "info", "os", "hostname", "device", "cpe"];
/// Longest value of a `ctx:set_service` field, in bytes.
pub const MAX_SERVICE_FIELD: usize = 256;
/// Longest service name `ctx:set_service` takes (nmap's are short words).
pub const MAX_SERVICE_NAME: usize = 64;
/// Most CPEs `ctx:set_service` takes.
pub const MAX_SERVICE_CPES: usize = 8;

/// A run's `ctx`.
pub(super) struct Ctx {
    run: Arc<Run>,
    /// `--script-args`, read-only and shared by the VM's runs.
    args: Table,
    verbosity: u8,
    /// The chain and session facts of a port found inside TLS, made at
    /// the first read of `ctx.tls` (most runs never read it).
    tls: std::cell::OnceCell<Option<Table>>,
}

impl Ctx {
    pub(super) fn new(run: Arc<Run>, args: Table, verbosity: u8) -> Ctx {
        Ctx { run, args, verbosity, tls: std::cell::OnceCell::new() }
    }

    fn tls(&self, lua: &Lua) -> mlua::Result<Option<Table>> {
        if let Some(t) = self.tls.get() {
            return Ok(t.clone());
        }
        let t = self.run.info.tls.as_ref().map(|t| tls_table(lua, t)).transpose()?;
        Ok(self.tls.get_or_init(|| t).clone())
    }
}

/// `nil, err` for a call that failed (an error value of `e`'s kind).
fn failed(lua: &Lua, e: &Error) -> mlua::Result<(Value, Value)> {
    Failure::of(e).answer(lua)
}

/// `nil, err` for a value `ctx:set_service` cannot take.
fn invalid(lua: &Lua, why: impl Into<String>) -> mlua::Result<(Value, Value)> {
    Failure::new(Kind::Invalid, why).answer(lua)
}

impl UserData for Ctx {
    fn add_fields<F: UserDataFields<Self>>(fields: &mut F) {
        fields.add_field_method_get("ip", |_, this| Ok(this.run.info.ip.to_string()));
        // The name the user gave for the host (nil for an address): nmap's host.targetname.
        fields.add_field_method_get("targetname", |_, this| Ok(this.run.info.targetname.clone()));
        // The address's reverse DNS name (nil without one, or with -n): nmap's host.name.
        fields.add_field_method_get("rdns", |_, this| Ok(this.run.info.rdns.clone()));
        fields.add_field_method_get("port", |_, this| Ok(this.run.info.port));
        fields.add_field_method_get("protocol", |_, this| Ok(this.run.info.proto.as_str()));
        fields.add_field_method_get("service", |_, this| Ok(this.run.info.known_service().map(str::to_string)));
        fields.add_field_method_get("product", |_, this| Ok(this.run.info.id.product.clone()));
        fields.add_field_method_get("version", |_, this| Ok(this.run.info.id.version.clone()));
        fields.add_field_method_get("tunnel", |_, this| Ok(this.run.info.tunnel.map(|t| t.as_str())));
        fields.add_field_method_get("banner", |lua, this| lua.create_string(&this.run.info.banner));
        fields.add_field_method_get("tls", |lua, this| this.tls(lua));
        fields.add_field_method_get("args", |_, this| Ok(this.args.clone()));
        fields.add_field_method_get("verbosity", |_, this| Ok(this.verbosity));
        fields.add_field_method_get("http", |_, this| Ok(Http(this.run.clone())));
        fields.add_field_method_get("ssh", |_, this| Ok(Ssh(this.run.clone())));
    }

    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("finding", |_, this, spec: Table| finding(&this.run, &spec));
        methods.add_method("log", |_, this, args: MultiValue| this.run.log(&args));
        methods.add_method("set_service", |lua, this, spec: Table| set_service(lua, &this.run, &spec));
        methods.add_async_method("connect", |lua, this, opts: Option<Table>| async move {
            let mut req = ConnectRequest::from_lua(opts.as_ref())?;
            tls_by_tunnel(&this.run, &mut req, opts.as_ref())?;
            match this.run.open_taped(&req).await {
                Ok(sock) => {
                    Ok((Value::UserData(lua.create_userdata(LuaSocket { sock, run: this.run.clone() })?), Value::Nil))
                }
                Err(e) => failed(&lua, &e),
            }
        });
        // ctx:udp{port=, host=, timeout=} (engine/plugins/sandbox/udp.rs).
        methods.add_async_method("udp", |lua, this, opts: Option<Table>| super::udp::open(lua, this.run.clone(), opts));
        // ctx:tls_enum{port=, starttls=, versions=, timeout=} (engine/plugins/sandbox/tls_enum.rs).
        methods.add_async_method("tls_enum", |lua, this, opts: Option<Table>| {
            super::tls_enum::tls_enum(lua, this.run.clone(), opts)
        });
        // ctx:server_hello{port=, starttls=, timeout=} (engine/plugins/sandbox/tls_enum.rs).
        methods.add_async_method("server_hello", |lua, this, opts: Option<Table>| {
            super::tls_enum::server_hello(lua, this.run.clone(), opts)
        });
        // Deprecated: ctx.ssh:auth_methods by its old name, kept for plugins
        // written before it (same arguments and results).
        methods.add_async_method("ssh_auth_methods", |lua, this, opts: Option<Table>| {
            ssh_auth_methods(lua, this.run.clone(), opts, "ctx:ssh_auth_methods")
        });
    }
}

/// `ctx:connect`'s TLS when its table says nothing of it (no `tls` key):
/// the port's tunnel decides, as it does for `ctx.http`, so a connection to
/// the scanned port speaks TLS when service detection found the service
/// inside TLS (`ctx.tunnel == "ssl"`). An explicit `tls` (true, false or
/// a table) wins; a connection to another port is plain unless it asks.
fn tls_by_tunnel(run: &Run, req: &mut ConnectRequest, opts: Option<&Table>) -> mlua::Result<()> {
    let given = match opts {
        Some(o) => !o.raw_get::<Value>("tls")?.is_nil(),
        None => false,
    };
    let own_port = req.port.is_none_or(|p| p == run.info.port);
    if !given && own_port && run.info.tunnel == Some(crate::findings::Tunnel::Ssl) {
        req.tls = Some(TlsOptions::default());
    }
    Ok(())
}

/// `ctx:finding{severity=, title=, data=, ...}`.
fn finding(run: &Run, spec: &Table) -> mlua::Result<()> {
    known_keys(spec, FINDING_FIELDS, "ctx:finding")?;
    let about =
        crate::plugins::load::meta::read_about(spec).map_err(|e| mlua::Error::runtime(format!("ctx:finding: {e}")))?;
    let severity = match spec.raw_get::<Option<String>>("severity")?.as_deref() {
        None => Severity::Info,
        Some(s) => Severity::parse(s).ok_or_else(|| {
            mlua::Error::runtime(format!("ctx:finding: severity {s:?} is not info, low, medium, high or critical"))
        })?,
    };
    let title = spec
        .raw_get::<Option<String>>("title")?
        .ok_or_else(|| mlua::Error::runtime("ctx:finding: 'title' (a string) is missing"))?;
    let data = spec.raw_get::<Value>("data")?;
    run.report(severity, &title, &data, about)
}

/// `ctx:set_service{name=, product=, version=, info=, os=, hostname=,
/// device=, cpe=}` (a plugin of the `version` category only): the port's
/// service is its detected one with these fields replaced (a later call
/// replaces fields of what the earlier ones set; a new name drops what was
/// known of the old service, a new product or version its CPEs), in every output
/// (a second `service` event, method `probed`, probe the plugin's id).
/// Returns true, or nil, why for a value that cannot be a service's (a
/// server's text: longer than [`MAX_SERVICE_FIELD`] bytes, control
/// characters, a name that is not a word of letters, digits and `-_.+`).
/// Raises for a plugin of another category, an unknown key, or a value
/// that is not a string.
fn set_service(lua: &Lua, run: &Run, spec: &Table) -> mlua::Result<(Value, Value)> {
    if !run.renames {
        return Err(mlua::Error::runtime(
            "ctx:set_service: only a plugin of the version category may set a port's service",
        ));
    }
    known_keys(spec, SERVICE_FIELDS, "ctx:set_service")?;
    let text = |key: &str| -> mlua::Result<Result<Option<String>, String>> {
        match spec.raw_get::<Value>(key)? {
            Value::Nil => Ok(Ok(None)),
            Value::String(v) => Ok(service_text(key, &v.as_bytes()).map(Some)),
            other => Err(mlua::Error::runtime(format!(
                "ctx:set_service: {key} must be a string, not a {}",
                other.type_name()
            ))),
        }
    };
    let mut given = Vec::new();
    for key in SERVICE_FIELDS.iter().filter(|k| **k != "cpe") {
        match text(key)? {
            Ok(Some(v)) => given.push((*key, v)),
            Ok(None) => {}
            Err(why) => return invalid(lua, why),
        }
    }
    let cpe = match spec.raw_get::<Value>("cpe")? {
        Value::Nil => None,
        Value::Table(list) => {
            let mut cpe = Vec::new();
            for v in list.sequence_values::<Value>() {
                let Value::String(v) = v? else {
                    return Err(mlua::Error::runtime("ctx:set_service: cpe must be a list of strings"));
                };
                match service_text("cpe", &v.as_bytes()) {
                    Ok(c) if c.starts_with("cpe:/") && cpe.len() < MAX_SERVICE_CPES => cpe.push(c),
                    Ok(c) if cpe.len() < MAX_SERVICE_CPES => {
                        return invalid(lua, format!("ctx:set_service: {c:?} is not a CPE"))
                    }
                    Ok(_) => return invalid(lua, format!("ctx:set_service: more than {MAX_SERVICE_CPES} CPEs")),
                    Err(why) => return invalid(lua, why),
                }
            }
            Some(cpe)
        }
        other => {
            return Err(mlua::Error::runtime(format!(
                "ctx:set_service: cpe must be a list of strings, not a {}",
                other.type_name()
            )))
        }
    };
    // Each call changes what the calls before it set; another service's
    // name drops what was known of the old one (product, os, CPEs...).
    let before = run.service_set()?.unwrap_or_else(|| run.info.id.clone());
    let mut id = before.clone();
    for (key, value) in given {
        let field = match key {
            "name" => {
                let word = |c: u8| c.is_ascii_alphanumeric() || b"-_.+".contains(&c);
                if value.len() > MAX_SERVICE_NAME || !value.bytes().all(word) || value.is_empty() {
                    return invalid(lua, format!("ctx:set_service: {value:?} is not a service name"));
                }
                if value != before.service {
                    id = Identity { service: value, ..Identity::default() };
                }
                continue;
            }
            "product" => &mut id.product,
            "version" => &mut id.version,
            "info" => &mut id.info,
            "os" => &mut id.os,
            "hostname" => &mut id.hostname,
            _ => &mut id.device,
        };
        *field = Some(value);
    }
    match cpe {
        Some(cpe) => id.cpe = cpe,
        // A CPE names a product and version: another one's goes.
        None if id.product != before.product || id.version != before.version => id.cpe.clear(),
        None => {}
    }
    run.set_service(id)?;
    Ok((Value::Boolean(true), Value::Nil))
}

/// A field of `ctx:set_service` as text, or why it cannot be one.
fn service_text(key: &str, v: &[u8]) -> Result<String, String> {
    if v.len() > MAX_SERVICE_FIELD {
        return Err(format!("ctx:set_service: {key} longer than {MAX_SERVICE_FIELD} bytes"));
    }
    match std::str::from_utf8(v) {
        Ok(t) if !t.chars().any(char::is_control) => Ok(t.to_string()),
        _ => Err(format!("ctx:set_service: {key} is not one line of text")),
    }
}

/// `ctx.ssh:auth_methods{port=, user=}` (also `ctx:ssh_auth_methods`, its
/// deprecated name, which `what` says in messages): the methods an SSH server offers
/// `user` (default "root") after a "none" request, a list of names, or
/// nil, why. The connection takes the path of `ctx:connect` (guard, socket
/// budget); the exchange ends by the run's deadline and every byte it read
/// is charged to the run (the SSH side is in engine/plugins/sandbox/ssh.rs).
async fn ssh_auth_methods(
    lua: Lua,
    run: Arc<Run>,
    opts: Option<Table>,
    what: &'static str,
) -> mlua::Result<(Value, Value)> {
    let keys = ["host", "port", "timeout", "user"];
    let mut req = ConnectRequest::from_lua_keys(opts.as_ref(), &keys, what)?;
    req.tls = None;
    let user = match opts.as_ref().map(|o| o.raw_get::<Value>("user")).transpose()? {
        None | Some(Value::Nil) => "root".to_string(),
        Some(Value::String(s)) if s.as_bytes().len() <= 256 && !s.as_bytes().contains(&0) => s.to_string_lossy(),
        Some(other) => {
            return Err(mlua::Error::runtime(format!(
                "{what}: user must be a name of at most 256 bytes, not {other:?}"
            )))
        }
    };
    let sock = match run.open(&req).await {
        Ok(sock) => sock,
        Err(e) => return failed(&lua, &e),
    };
    let conn = sock.lock().await.conn.take();
    let Some(crate::wire::conn::Conn::Plain(stream)) = conn else {
        return Failure::new(Kind::Protocol, format!("{what}: not a plain TCP connection")).answer(&lua);
    };
    let left = run.read_left()?;
    let (result, read) = super::ssh::auth_methods_counted(stream, &user, run.deadline(), left).await;
    if !run.charge(usize::try_from(read).unwrap_or(usize::MAX)) {
        return failed(&lua, &run.over_read());
    }
    match result {
        Ok(names) => Ok((Value::Table(lua.create_sequence_from(names)?), Value::Nil)),
        Err(e) => failed(&lua, &e),
    }
}

/// `ctx.ssh`: what the host asks an SSH server itself (`host_keys`,
/// `auth_methods`).
struct Ssh(Arc<Run>);

impl UserData for Ssh {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_async_method("host_keys", |lua, this, opts: Option<Table>| host_keys(lua, this.0.clone(), opts));
        methods.add_async_method("auth_methods", |lua, this, opts: Option<Table>| {
            ssh_auth_methods(lua, this.0.clone(), opts, "ctx.ssh:auth_methods")
        });
    }
}

/// `ctx.ssh:host_keys{port=, timeout=}`: the server's host keys, one
/// connection per kind (RSA, ECDSA on each curve, Ed25519, in nmap's
/// order), each through the guard and the socket budget: a list of
/// { type=, bits=, blob= }, or nil, why when no key came.
async fn host_keys(lua: Lua, run: Arc<Run>, opts: Option<Table>) -> mlua::Result<(Value, Value)> {
    let mut req = ConnectRequest::from_lua_keys(opts.as_ref(), &["port", "timeout"], "ctx.ssh:host_keys")?;
    req.tls = None;
    let (mut keys, mut errors) = (Vec::new(), Vec::new());
    for (_, algorithms) in super::ssh::HOST_KEY_KINDS {
        let sock = match run.open(&req).await {
            Ok(sock) => sock,
            Err(e) => {
                errors.push(e);
                break;
            }
        };
        let conn = sock.lock().await.conn.take();
        let Some(crate::wire::conn::Conn::Plain(stream)) = conn else { continue };
        let until = (tokio::time::Instant::now() + req.timeout).min(run.deadline());
        let left = run.read_left()?;
        let (result, read) = super::ssh::host_key_counted(stream, algorithms, until, left).await;
        if !run.charge(usize::try_from(read).unwrap_or(usize::MAX)) {
            errors.push(run.over_read());
            break;
        }
        match result {
            Ok(Some(k)) => keys.push(k),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    if keys.is_empty() {
        return match errors.first() {
            Some(e) => failed(&lua, e),
            None => Failure::new(Kind::Protocol, "the server offers no host key kind known").answer(&lua),
        };
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

/// `ctx.http`: `get(path, opts)`, `head(path, opts)`, `request(method, path, opts)`.
struct Http(Arc<Run>);

impl UserData for Http {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        for method in ["get", "head", "request"] {
            methods.add_async_method(method, move |lua, this, mut args: MultiValue| async move {
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
                        return Err(mlua::Error::runtime(format!("path must be a string, not a {}", other.type_name())))
                    }
                };
                let opts = match args.pop_front() {
                    Some(Value::Table(t)) => Some(t),
                    _ => None,
                };
                match http_call(&lua, &this.0, &verb, &path, opts.as_ref()).await {
                    Ok(t) => Ok((Value::Table(t), Value::Nil)),
                    Err(HttpError::Lua(e)) => Err(e),
                    Err(HttpError::Failed(e)) => failed(&lua, &e),
                }
            });
        }
    }
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

/// The `Host:` of a request to the host being scanned (the guard allows no
/// other), as nmap's http library writes it: the name the user gave for
/// the host, else its reverse DNS name, else its address (an IPv6 one in
/// brackets), with the port
/// when it is not the scheme's own (80, or 443 over TLS).
fn host_field(run: &Run, req: &ConnectRequest, tls: bool) -> String {
    let ip = run.info.ip;
    let host = match (run.http_name_for(ip), ip) {
        (Some(name), _) => name,
        (None, IpAddr::V6(v6)) => format!("[{v6}]"),
        (None, v4) => v4.to_string(),
    };
    let port = req.port.unwrap_or(run.info.port);
    if port == if tls { 443 } else { 80 } {
        host
    } else {
        format!("{host}:{port}")
    }
}

/// `ctx.http:get(path, opts)` and friends: one request on a new connection
/// (TLS when the service was found inside TLS, or `opts.tls`).
async fn http_call(lua: &Lua, run: &Run, verb: &str, path: &str, opts: Option<&Table>) -> Result<Table, HttpError> {
    let info = &run.info;
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
    let sock = run.open_taped(&req).await.map_err(HttpError::Failed)?;
    let mut s = sock.lock().await;
    let host = host_field(run, &req, tls);
    let request = guard::request_bytes(verb, path, &host, &headers, &body, run.scope.user_agent.as_deref());
    run.charge_send(request.len(), false).map_err(HttpError::Failed)?;
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
        if !run.charge(n) {
            return Err(HttpError::Failed(run.over_read()));
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
    let resp = guard::parse_response(&raw).map_err(HttpError::Failed)?;
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
