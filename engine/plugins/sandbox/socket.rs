//! Plugin sockets as Lua sees them: `send`, `recv`, `recv_until`,
//! `starttls`, `tls_handshake`, `tls`, `close` on a connection [`Run::open_taped`] made.
//!
//! In: a plugin's calls on its socket. Out: data or `nil, err`. What always
//! holds: every read has the socket's timeout and is charged to the run's
//! read budget before the plugin sees it (the connection closes once it is
//! spent); every send is charged to the run's send budget before it goes;
//! `recv` and `recv_until` return at most [`guard::MAX_RECV`] bytes.

use mlua::{Lua, UserData, UserDataMethods, Value};

use std::sync::Arc;

use super::builtins::re_error;
use super::failure::{Failure, Kind};
use super::guard::{self, SharedSocket, Socket};
use super::run::Run;
use super::tape::{SocketTape, Step};
use super::value::tls_table;

pub(super) struct LuaSocket {
    pub(super) sock: SharedSocket,
    pub(super) run: Arc<Run>,
}

impl LuaSocket {
    /// Reads once into `pending` (at most `max` bytes); Ok(0) at end of stream.
    async fn fill(&self, s: &mut Socket, max: usize) -> crate::error::Result<usize> {
        let until = tokio::time::Instant::now() + s.timeout;
        self.fill_by(s, max, until).await
    }

    /// As [`LuaSocket::fill`], the read ending at `until` (one timeout for
    /// a whole `recv_exact` or `recv_line`, however the bytes trickle in).
    async fn fill_by(&self, s: &mut Socket, max: usize, until: tokio::time::Instant) -> crate::error::Result<usize> {
        let mut got = Vec::new();
        let n = s.read_into(max, until, &mut got).await?;
        if !self.run.charge(n) {
            s.close();
            return Err(self.run.over_read());
        }
        s.pending.extend_from_slice(&got);
        Ok(n)
    }
}

impl LuaSocket {
    /// TLS on the connection, after `proto`'s STARTTLS exchange if one is
    /// given: true, or nil, why. The exchange's bytes are charged to the
    /// run; on a tape, the upgrade is a step of its own.
    async fn upgrade(
        &self,
        lua: &Lua,
        proto: Option<crate::wire::starttls::Starttls>,
        what: &str,
    ) -> mlua::Result<(Value, Value)> {
        let failed = |e: Failure| e.answer(lua);
        let mut s = self.sock.lock().await;
        if !s.pending.is_empty() {
            return failed(Failure::new(Kind::Invalid, format!("{what}: bytes were already read; call it first")));
        }
        if let Some(t @ SocketTape::Replay { .. }) = s.tape.as_mut() {
            let (r, read) = t.replay_starttls();
            if !self.run.charge(read) {
                return failed(Failure::of(&self.run.over_read()));
            }
            return match r {
                Ok(info) => {
                    s.tls = info;
                    Ok((Value::Boolean(true), Value::Nil))
                }
                Err(e) => failed(Failure::of(&e)),
            };
        }
        let tcp = match s.conn.take() {
            Some(crate::wire::conn::Conn::Plain(tcp)) => tcp,
            other => {
                let inside = other.is_some();
                s.conn = other;
                let (kind, why) = if inside {
                    (Kind::Invalid, "the socket already speaks TLS")
                } else {
                    (Kind::Closed, "socket is closed")
                };
                return failed(Failure::new(kind, format!("{what}: {why}")));
            }
        };
        let until = tokio::time::Instant::now() + s.timeout;
        let name = tcp.peer_addr().ok().and_then(|a| self.run.sni_for(a.ip()));
        let (opened, read) = guard::starttls(tcp, proto, name.as_deref(), until).await;
        if let Some(t) = &s.tape {
            t.note(match &opened {
                Ok((_, info)) => Step::Starttls { tls: Some(Box::new(info.clone())), error: None, read },
                Err(e) => Step::Starttls { tls: None, error: Some(e.to_string()), read },
            });
        }
        if !self.run.charge(read) {
            return failed(Failure::of(&self.run.over_read()));
        }
        match opened {
            Ok((conn, info)) => {
                s.conn = Some(conn);
                s.tls = Some(info);
                Ok((Value::Boolean(true), Value::Nil))
            }
            Err(e) => failed(Failure::of(&e)),
        }
    }
}

fn lua_result(lua: &Lua, r: Result<Vec<u8>, Failure>) -> mlua::Result<(Value, Value)> {
    match r {
        Ok(data) => Ok((Value::String(lua.create_string(&data)?), Value::Nil)),
        Err(e) => e.answer(lua),
    }
}

impl UserData for LuaSocket {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        Self::add_send_methods(methods);
        Self::add_recv_methods(methods);
        Self::add_tls_methods(methods);
    }
}

/// The socket's methods, in groups.
impl LuaSocket {
    /// sock:send and sock:set_timeout.
    fn add_send_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        // sock:send(data): true, or nil, why (past the run's send budget,
        // nothing is sent and the run ends at its next step).
        methods.add_async_method("send", |lua, this, data: mlua::String| async move {
            let data = data.as_bytes();
            if let Err(e) = this.run.charge_send(data.len(), false) {
                return Failure::of(&e).answer(&lua);
            }
            let r = this.sock.lock().await.send(&data).await;
            match r {
                Ok(()) => Ok((Value::Boolean(true), Value::Nil)),
                Err(e) => Failure::of(&e).answer(&lua),
            }
        });
        // sock:set_timeout(ms): how long each later send and read waits
        // (1 ms to 60 s; the run's deadline still ends any wait).
        methods.add_async_method("set_timeout", |_, this, ms: f64| async move {
            this.sock.lock().await.timeout = std::time::Duration::from_millis(ms.clamp(1.0, 60_000.0) as u64);
            Ok(true)
        });
    }

    /// The reads: sock:recv, sock:recv_exact, sock:recv_line and sock:recv_until.
    fn add_recv_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_async_method("recv", |lua, this, max: Option<usize>| async move {
            let max = max.unwrap_or(4096).clamp(1, guard::MAX_RECV);
            let mut s = this.sock.lock().await;
            if s.pending.is_empty() {
                match this.fill(&mut s, max).await {
                    Ok(0) => return lua_result(&lua, Err(Failure::new(Kind::Closed, "closed"))),
                    Ok(_) => {}
                    Err(e) => return lua_result(&lua, Err(Failure::of(&e))),
                }
            }
            let n = s.pending.len().min(max);
            let data: Vec<u8> = s.pending.drain(..n).collect();
            lua_result(&lua, Ok(data))
        });
        // sock:recv_exact(n): exactly n bytes (at most guard::MAX_RECV), or
        // nil, why (what came before the end stays to be read).
        methods.add_async_method("recv_exact", |lua, this, n: i64| async move {
            if !(1..=guard::MAX_RECV as i64).contains(&n) {
                return Err(mlua::Error::runtime(format!("recv_exact: n must be 1 to {}, not {n}", guard::MAX_RECV)));
            }
            let n = n as usize;
            let mut s = this.sock.lock().await;
            let until = tokio::time::Instant::now() + s.timeout;
            while s.pending.len() < n {
                let want = n - s.pending.len();
                match this.fill_by(&mut s, want, until).await {
                    Ok(0) => {
                        let why = format!("closed after {} of {n} bytes", s.pending.len());
                        return lua_result(&lua, Err(Failure::new(Kind::Closed, why)));
                    }
                    Ok(_) => {}
                    Err(e) => return lua_result(&lua, Err(Failure::of(&e))),
                }
            }
            let data: Vec<u8> = s.pending.drain(..n).collect();
            lua_result(&lua, Ok(data))
        });
        // sock:recv_line([max]): one line, without its "\n" or "\r\n", of at
        // most `max` bytes with its end (default 8192), or nil, why.
        methods.add_async_method("recv_line", |lua, this, max: Option<usize>| async move {
            let max = max.unwrap_or(8192).clamp(1, guard::MAX_RECV);
            let mut s = this.sock.lock().await;
            let until = tokio::time::Instant::now() + s.timeout;
            // Bytes already searched: each is looked at once.
            let mut searched = 0;
            loop {
                let limit = s.pending.len().min(max);
                if let Some(i) = s.pending[searched.min(limit)..limit]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map(|i| i + searched.min(limit))
                {
                    let mut line: Vec<u8> = s.pending.drain(..=i).collect();
                    line.pop();
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    return lua_result(&lua, Ok(line));
                }
                searched = limit;
                if s.pending.len() >= max {
                    let why = format!("no line end in the first {max} bytes");
                    return lua_result(&lua, Err(Failure::new(Kind::Protocol, why)));
                }
                let want = max - s.pending.len();
                match this.fill_by(&mut s, want, until).await {
                    Ok(0) => return lua_result(&lua, Err(Failure::new(Kind::Closed, "closed"))),
                    Ok(_) => {}
                    Err(e) => return lua_result(&lua, Err(Failure::of(&e))),
                }
            }
        });
        methods.add_async_method("recv_until", |lua, this, (pattern, max): (String, Option<usize>)| async move {
            let max = max.unwrap_or(64 * 1024).clamp(1, guard::MAX_RECV);
            let re = this.run.scope.patterns.get(&pattern)?;
            let mut s = this.sock.lock().await;
            loop {
                let limit = s.pending.len().min(max);
                let found = re.find(&s.pending[..limit]).map_err(re_error)?.map(|m| m.end);
                if let Some(end) = found {
                    let data: Vec<u8> = s.pending.drain(..end).collect();
                    return lua_result(&lua, Ok(data));
                }
                if s.pending.len() >= max {
                    return lua_result(
                        &lua,
                        Err(Failure::new(Kind::Protocol, format!("no match in the first {max} bytes"))),
                    );
                }
                let want = max - s.pending.len();
                match this.fill(&mut s, want).await {
                    Ok(0) => return lua_result(&lua, Err(Failure::new(Kind::Closed, "closed"))),
                    Ok(_) => {}
                    Err(e) => return lua_result(&lua, Err(Failure::of(&e))),
                }
            }
        });
    }

    /// TLS on the connection (sock:starttls, sock:tls_handshake, sock:tls),
    /// and sock:close.
    fn add_tls_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        // sock:starttls([protocol]): the STARTTLS exchange of `protocol`
        // (default: the service's name), then TLS on the same connection.
        methods.add_async_method("starttls", |lua, this, proto: Option<String>| async move {
            use crate::wire::starttls::Starttls;
            let name = match proto {
                Some(p) => p,
                None => this.run.info.id.service.clone(),
            };
            let Some(proto) = Starttls::parse(&name) else {
                let known = Starttls::NAMES.join(", ");
                let why = format!("sock:starttls: no STARTTLS for {name:?} (one of {known})");
                return lua_result(&lua, Err(Failure::new(Kind::Invalid, why)));
            };
            this.upgrade(&lua, Some(proto), "sock:starttls").await
        });
        // sock:tls_handshake(): TLS on the connection now, after a plain
        // exchange the plugin made itself (RDP's X.224 negotiation; NSE's
        // socket:reconnect_ssl).
        methods.add_async_method("tls_handshake", |lua, this, ()| async move {
            this.upgrade(&lua, None, "sock:tls_handshake").await
        });
        methods.add_async_method("close", |_, this, ()| async move {
            this.sock.lock().await.close();
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
