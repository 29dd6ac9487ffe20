//! `ctx:tls_enum`: the SSL/TLS versions and suites a server accepts, from
//! ClientHellos and ServerHellos only ([`crate::wire::hello::enumerate`]),
//! as a Lua table.
//!
//! In: the plugin's options, during a run. Out: the table, or `nil, err`.
//! What always holds: once per run; one socket of the budget through
//! [`Run::admit`] (the guard); its own hellos are capped (1000, 90
//! through MySQL, whose servers block a host after 100 broken handshakes;
//! 6 at a time; `timeout` each); what they read is charged to the run's
//! read budget, and no hello starts past it; it ends by the run's deadline.

use mlua::{Lua, Table, Value};

use std::sync::Arc;

use super::failure::{Failure, Kind};
use super::guard::{ConnectRequest, Transport};
use super::run::Run;
use super::value::tls_table;
use crate::error::{Error, ErrorKind};

/// Most hellos through MySQL's STARTTLS: its servers block a host after
/// 100 handshakes broken off (`max_connect_errors`).
const MYSQL_HELLOS: u32 = 90;

/// `ctx:tls_enum{port=, starttls=, versions=, timeout=}`.
pub(super) async fn tls_enum(lua: Lua, h: Arc<Run>, opts: Option<Table>) -> mlua::Result<(Value, Value)> {
    let failed = |e: Error| Failure::of(&e).answer(&lua);
    let keys = ["host", "port", "timeout", "starttls", "versions"];
    let mut req = ConnectRequest::from_lua_keys(opts.as_ref(), &keys, "ctx:tls_enum")?;
    req.tls = None;
    let get = |k: &str| opts.as_ref().map_or(Ok(Value::Nil), |o| o.raw_get::<Value>(k));
    let starttls = starttls_option(opts.as_ref(), "ctx:tls_enum")?;
    let mut versions = crate::wire::hello::enumerate::VERSIONS.to_vec();
    if let Value::Table(list) = get("versions")? {
        versions.clear();
        for name in list.sequence_values::<String>() {
            let name = name?;
            let v = crate::wire::hello::enumerate::VERSIONS
                .into_iter()
                .find(|&v| crate::wire::hello::version_name(v) == name)
                .ok_or_else(|| mlua::Error::runtime(format!("ctx:tls_enum: unknown version {name:?}")))?;
            versions.push(v);
        }
    }
    if !h.first_tls_enum()? {
        return failed(Error::new(ErrorKind::Budget, "ctx:tls_enum: once per run"));
    }
    let (ip, port) = match h.admit(&req, Transport::Tcp) {
        Ok(to) => to,
        Err(e) => return failed(e),
    };
    let read_left = h.read_left()?;
    let mut limits =
        crate::wire::hello::enumerate::Limits { each: req.timeout, read_bytes: read_left, ..Default::default() };
    if starttls == Some(crate::wire::starttls::Starttls::Mysql) {
        limits.hellos = MYSQL_HELLOS;
    }
    let addr = std::net::SocketAddr::new(ip, port);
    let until = h.deadline();
    let sni = h.sni_for(ip);
    let host_name = sni.clone().unwrap_or_else(|| ip.to_string());
    // A task of its own: its many connections are polled by the
    // runtime directly, not through the Lua coroutine.
    let task = tokio::spawn(async move {
        let connect = || {
            let host_name = host_name.clone();
            async move {
                let mut tcp = crate::wire::conn::tcp_for_hello(addr, until).await?;
                if let Some(p) = starttls {
                    p.upgrade(&mut tcp, &host_name, until)
                        .await
                        .map_err(|e| crate::wire::hello::HelloError::Malformed(e.to_string()))?;
                }
                Ok::<_, crate::wire::hello::HelloError>(tcp)
            }
        };
        crate::wire::hello::enumerate::enumerate(connect, sni.as_deref(), &versions, until, limits).await
    });
    // Aborted if the run ends first (budget, stop).
    let guard = AbortOnDrop(task.abort_handle());
    let found = match task.await {
        Ok(found) => found,
        Err(e) => return failed(Error::new(ErrorKind::Io, format!("ctx:tls_enum: {e}"))),
    };
    drop(guard);
    if !h.charge(usize::try_from(found.read).unwrap_or(usize::MAX)) {
        return failed(h.over_read());
    }
    Ok((Value::Table(enumeration_table(&lua, &found)?), Value::Nil))
}

/// `ctx:server_hello{port=, starttls=, timeout=}`: one ClientHello offering
/// TLS 1.2 down to SSLv3 with every suite (after the STARTTLS exchange of
/// `starttls`, if given), and what the ServerHello says: `{ version,
/// cipher, time, random }`, `time` being the first four bytes of its random
/// (the server's clock, or noise), `random` all 32 in hex; or `nil, err`.
/// One socket of the budget; what it reads is charged to the run.
pub(super) async fn server_hello(lua: Lua, h: Arc<Run>, opts: Option<Table>) -> mlua::Result<(Value, Value)> {
    use crate::wire::hello::{client, exchange, ClientHello, HelloError};
    let failed = |e: Failure| e.answer(&lua);
    let keys = ["host", "port", "timeout", "starttls"];
    let mut req = ConnectRequest::from_lua_keys(opts.as_ref(), &keys, "ctx:server_hello")?;
    req.tls = None;
    let starttls = starttls_option(opts.as_ref(), "ctx:server_hello")?;
    let (ip, port) = match h.admit(&req, Transport::Tcp) {
        Ok(to) => to,
        Err(e) => return failed(Failure::of(&e)),
    };
    let read_left = h.read_left()?;
    let until = tokio::time::Instant::now() + req.timeout;
    let until = until.min(h.deadline());
    let hello = ClientHello {
        version: crate::wire::iana::TLS12,
        suites: client::suites_for(crate::wire::iana::TLS12),
        server_name: h.sni_for(ip),
        alpn: Vec::new(),
    };
    let greet = hello.server_name.clone().unwrap_or_else(|| ip.to_string());
    let addr = std::net::SocketAddr::new(ip, port);
    // A task of its own, as ctx:tls_enum's: its socket is polled by the
    // runtime directly, not through the Lua coroutine (whose wake-ups
    // were seen lost, the hello then waiting out its whole timeout).
    let task = tokio::spawn(async move {
        let tcp = match crate::wire::conn::tcp_for_hello(addr, until).await {
            Ok(t) => t,
            Err(e) => return (Err(e), 0),
        };
        let (mut io, read) = super::ssh::Bounded::new(tcp, read_left, until);
        let r = async {
            if let Some(p) = starttls {
                p.upgrade(&mut io, &greet, until).await.map_err(|e| HelloError::Malformed(e.to_string()))?;
            }
            exchange(&mut io, &hello, until).await
        }
        .await;
        (r, read.load(std::sync::atomic::Ordering::Relaxed))
    });
    let guard = AbortOnDrop(task.abort_handle());
    let (result, read) = match task.await {
        Ok(done) => done,
        Err(e) => return failed(Failure::new(Kind::Network, format!("ctx:server_hello: {e}"))),
    };
    drop(guard);
    if !h.charge(usize::try_from(read).unwrap_or(usize::MAX)) {
        return failed(Failure::of(&h.over_read()));
    }
    let flight = match result {
        Ok(f) => f,
        Err(e) => return failed(Failure::new(Kind::of_hello(&e), format!("ctx:server_hello: {e}"))),
    };
    let t = lua.create_table()?;
    t.raw_set("version", crate::wire::hello::version_name(flight.version))?;
    t.raw_set("cipher", crate::wire::hello::suite_name(flight.suite))?;
    t.raw_set("time", u32::from_be_bytes([flight.random[0], flight.random[1], flight.random[2], flight.random[3]]))?;
    t.raw_set("random", crate::text::hex(&flight.random))?;
    Ok((Value::Table(t), Value::Nil))
}

/// The `starttls` option of `what`'s table: none, or a protocol moonscan
/// speaks STARTTLS for (another name is an error saying so).
fn starttls_option(opts: Option<&Table>, what: &str) -> mlua::Result<Option<crate::wire::starttls::Starttls>> {
    match opts.map_or(Ok(Value::Nil), |o| o.raw_get::<Value>("starttls"))? {
        Value::Nil => Ok(None),
        Value::String(s) => crate::wire::starttls::Starttls::parse(&s.to_string_lossy())
            .map(Some)
            .ok_or_else(|| mlua::Error::runtime(format!("{what}: no STARTTLS for {:?}", s.to_string_lossy()))),
        other => Err(mlua::Error::runtime(format!("{what}: starttls must be a protocol name, not {other:?}"))),
    }
}

/// Aborts a task when dropped (a run that ends stops its enumeration).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `ctx:tls_enum`'s result: `sslv2`, `hellos`, `capped`, `versions` (newest
/// first: `name`, `preference`, `error`, `suites` in the server's order with
/// `name`, `id`, `kx`, `group`, `kx_bits`, `au`, `enc`, `enc_bits`, `mode`,
/// `mac`, `export`) and `tls`, the session facts and
/// chain of the first hello that carried a certificate.
fn enumeration_table(lua: &Lua, e: &crate::wire::hello::enumerate::Enumeration) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("sslv2", e.sslv2)?;
    t.raw_set("hellos", e.hellos)?;
    t.raw_set("capped", e.capped)?;
    let versions = lua.create_table()?;
    for v in &e.versions {
        let vt = lua.create_table()?;
        vt.raw_set("name", crate::wire::hello::version_name(v.version))?;
        vt.raw_set("preference", v.preference.as_str())?;
        vt.raw_set("error", v.error.clone())?;
        let suites = lua.create_table()?;
        for a in &v.accepted {
            let st = lua.create_table()?;
            st.raw_set("name", a.info.cipher.clone())?;
            st.raw_set("id", a.suite)?;
            st.raw_set("kx", a.info.kx.clone())?;
            st.raw_set("group", a.info.group.clone())?;
            st.raw_set("kx_bits", a.info.kx_bits)?;
            if let Some(c) = tls_parser::TlsCipherSuite::from_id(a.suite) {
                let lower = |d: String| d.to_ascii_lowercase();
                st.raw_set("au", lower(format!("{:?}", c.au)))?;
                st.raw_set("enc", lower(format!("{:?}", c.enc)))?;
                st.raw_set("enc_bits", c.enc_size)?;
                st.raw_set("mode", lower(format!("{:?}", c.enc_mode)))?;
                st.raw_set("mac", lower(format!("{:?}", c.mac)))?;
                st.raw_set("export", c.name.contains("EXPORT"))?;
            }
            suites.raw_push(st)?;
        }
        vt.raw_set("suites", suites)?;
        versions.raw_push(vt)?;
    }
    t.raw_set("versions", versions)?;
    let with_chain = e.versions.iter().flat_map(|v| &v.accepted).find(|a| !a.info.chain.is_empty());
    if let Some(a) = with_chain {
        t.raw_set("tls", tls_table(lua, &a.info)?)?;
    }
    Ok(t)
}
