//! `ctx:udp{port=, host=, timeout=}`: a datagram socket to the host being
//! scanned, with `send`, `recv` and `close`.
//!
//! In: a plugin's request, then datagrams to send. Out: a socket, then the
//! datagrams the peer answers, or `nil, why`. What always holds: the socket
//! takes the path every plugin socket takes ([`Run::admit`]: the guard,
//! which lets datagrams go only to the scan's UDP ports on the scanned
//! host, never to an excluded address, and the run's socket budget); it is
//! connected, so only the peer's datagrams are read; each `recv` waits at
//! most the socket's timeout and is charged to the run's read budget before
//! the plugin sees it; one socket sends at most [`MAX_DATAGRAMS`] datagrams
//! of at most [`MAX_SEND`] bytes, each charged to the run's send budget and
//! to [`MAX_DATAGRAM_BYTES`] before it goes, and paced per run
//! ([`DATAGRAM_BURST`] at once, then [`DATAGRAMS_PER_SECOND`]); the socket
//! closes when the run ends.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use mlua::{Lua, Table, UserData, UserDataMethods, Value};
use tokio::net::UdpSocket;
use tokio::sync::Mutex;

use super::failure::{closed, timed_out, Failure};
use super::guard::{ConnectRequest, Transport};
use super::run::{Closer, Run};
#[cfg(doc)]
use super::run::{DATAGRAMS_PER_SECOND, DATAGRAM_BURST, MAX_DATAGRAM_BYTES};
use super::tape::{SocketTape, Step};
use crate::error::{Error, ErrorKind};

/// Most bytes one datagram read carries (IPv4's UDP payload limit).
pub const MAX_DATAGRAM: usize = 65_507;

/// Most bytes a plugin's datagram carries: what fits an Ethernet frame
/// (1,500 bytes less IPv4's and UDP's headers), so no datagram a plugin
/// sends is fragmented on the way. A query a plugin asks (DNS, SNMP, NTP,
/// RPC) is far smaller; a bigger one is bulk, not a question.
pub const MAX_SEND: usize = 1_472;

/// Most datagrams one socket sends: a plugin asks a few questions, it does
/// not flood the host.
pub const MAX_DATAGRAMS: u32 = 64;

/// One plugin datagram socket; `None` once closed.
pub(super) struct Datagram {
    sock: Option<UdpSocket>,
    sent: u32,
    timeout: Duration,
    /// Its datagrams, recorded or replayed (`plugins test --record/--replay`).
    tape: Option<SocketTape>,
}

pub(super) type SharedDatagram = Arc<Mutex<Datagram>>;

impl Closer for Mutex<Datagram> {
    fn close_now(&self) {
        if let Ok(mut d) = self.try_lock() {
            d.close();
        }
    }
}

impl Datagram {
    /// Closes the socket (at the end of its run).
    pub(super) fn close(&mut self) {
        self.sock = None;
        if let Some(t) = self.tape.as_mut() {
            t.close();
        }
    }

    async fn send(&mut self, data: &[u8]) -> crate::error::Result<()> {
        if let Some(t @ SocketTape::Replay { .. }) = self.tape.as_mut() {
            return t.replay_send(data);
        }
        let r = match self.sock.as_ref() {
            None => Err(closed()),
            Some(s) => match tokio::time::timeout(self.timeout, s.send(data)).await {
                Err(_) => Err(timed_out("timeout")),
                Ok(Err(e)) => Err(Error::with_source(ErrorKind::Io, format!("udp send: {e}"), e)),
                Ok(Ok(_)) => Ok(()),
            },
        };
        if let Some(t) = &self.tape {
            t.note(match &r {
                Ok(()) => Step::Send { data: data.to_vec() },
                Err(e) => Step::failed(e, true),
            });
        }
        r
    }

    /// The next datagram from the peer (whole).
    async fn recv(&mut self) -> crate::error::Result<Vec<u8>> {
        let mut buf = Vec::new();
        if let Some(t @ SocketTape::Replay { .. }) = self.tape.as_mut() {
            // Past the recording's last datagram, none comes: a timeout.
            if t.replay_read(MAX_DATAGRAM, &mut buf)? == 0 {
                return Err(timed_out("timeout"));
            }
            return Ok(buf);
        }
        let Some(s) = self.sock.as_ref() else { return Err(closed()) };
        // One byte more than any datagram: a larger one is an error.
        buf.resize(MAX_DATAGRAM + 1, 0);
        let r = match tokio::time::timeout(self.timeout, s.recv(&mut buf)).await {
            Err(_) => Err(timed_out("timeout")),
            Ok(Err(e)) => {
                let why = if e.kind() == std::io::ErrorKind::ConnectionRefused {
                    "port unreachable".to_string()
                } else {
                    format!("udp recv: {e}")
                };
                Err(Error::with_source(ErrorKind::Io, why, e))
            }
            Ok(Ok(n)) if n > MAX_DATAGRAM => {
                let why = format!("udp recv: a datagram of more than {MAX_DATAGRAM} bytes");
                Err(Error::new(ErrorKind::Protocol, why))
            }
            Ok(Ok(n)) => {
                buf.truncate(n);
                Ok(buf)
            }
        };
        if let Some(t) = &self.tape {
            t.note(match &r {
                Ok(d) => Step::Recv { data: d.clone() },
                Err(e) => Step::failed(e, false),
            });
        }
        r
    }
}

/// `ctx:udp{...}`: the socket, or `nil, why`.
pub(super) async fn open(lua: Lua, h: Arc<Run>, opts: Option<Table>) -> mlua::Result<(Value, Value)> {
    let failed = |e: Error| Failure::of(&e).answer(&lua);
    let req = ConnectRequest::from_lua_keys(opts.as_ref(), &["host", "port", "timeout"], "ctx:udp")?;
    if let Some(tape) = h.replay() {
        let replayed = h.aim(&req).and_then(|(_, port)| tape.open("udp", port, false, None));
        let st = match replayed {
            Ok(st) => st,
            Err(e) => return failed(e),
        };
        let d = Datagram { sock: None, sent: 0, timeout: req.timeout, tape: Some(st) };
        return keep(lua, h, d);
    }
    let taped_failure = |e: &Error| {
        if let Some(t) = h.tape() {
            let port = req.port.unwrap_or(h.info.port);
            t.open_failed("udp", port, false, e);
        }
    };
    let (ip, port) = match h.admit(&req, Transport::Udp) {
        Ok(to) => to,
        Err(e) => {
            taped_failure(&e);
            return failed(e);
        }
    };
    let local: IpAddr = if ip.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { Ipv6Addr::UNSPECIFIED.into() };
    let sock = match UdpSocket::bind(SocketAddr::new(local, 0)).await {
        Ok(s) => s,
        Err(e) => {
            let e = Error::with_source(ErrorKind::Io, "cannot open a UDP socket", e);
            taped_failure(&e);
            return failed(e);
        }
    };
    if let Err(e) = sock.connect(SocketAddr::new(ip, port)).await {
        let e = Error::with_source(ErrorKind::Io, format!("cannot reach {ip}:{port}"), e);
        taped_failure(&e);
        return failed(e);
    }
    let tape = match h.tape().map(|t| t.open("udp", port, false, None)).transpose() {
        Ok(t) => t,
        Err(e) => return failed(e),
    };
    keep(lua, h, Datagram { sock: Some(sock), sent: 0, timeout: req.timeout, tape })
}

/// The socket, closed when the run ends, as Lua sees it.
fn keep(lua: Lua, h: Arc<Run>, d: Datagram) -> mlua::Result<(Value, Value)> {
    let shared = Arc::new(Mutex::new(d));
    h.keep(shared.clone()).map_err(mlua::Error::external)?;
    Ok((Value::UserData(lua.create_userdata(LuaDatagram { sock: shared, run: h })?), Value::Nil))
}

pub(super) struct LuaDatagram {
    sock: SharedDatagram,
    run: Arc<Run>,
}

fn answer(lua: &Lua, r: crate::error::Result<Value>) -> mlua::Result<(Value, Value)> {
    match r {
        Ok(v) => Ok((v, Value::Nil)),
        Err(e) => Failure::of(&e).answer(lua),
    }
}

impl UserData for LuaDatagram {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        // sock:send(data): true, or nil, why.
        methods.add_async_method("send", |lua, this, data: mlua::String| async move {
            let data = data.as_bytes();
            if data.len() > MAX_SEND {
                let why = format!("udp send: a datagram holds at most {MAX_SEND} bytes, not {}", data.len());
                return Err(mlua::Error::runtime(why));
            }
            let mut d = this.sock.lock().await;
            if d.sent >= MAX_DATAGRAMS {
                let why = format!("udp send: one socket sends at most {MAX_DATAGRAMS} datagrams");
                return answer(&lua, Err(Error::new(ErrorKind::Budget, why)));
            }
            if let Err(e) = this.run.charge_send(data.len(), true) {
                return answer(&lua, Err(e));
            }
            // A replay sends nothing: no pace.
            if this.run.replay().is_none() {
                this.run.pace_datagram().await?;
            }
            d.sent += 1;
            let r = d.send(&data).await.map(|()| Value::Boolean(true));
            answer(&lua, r)
        });
        // sock:recv([max]): the next datagram from the peer (its first `max`
        // bytes, at most MAX_DATAGRAM), or nil, why ("timeout" when none came).
        methods.add_async_method("recv", |lua, this, max: Option<usize>| async move {
            let max = max.unwrap_or(MAX_DATAGRAM).clamp(1, MAX_DATAGRAM);
            let r = this.sock.lock().await.recv().await;
            let buf = match r {
                Ok(b) => b,
                Err(e) => return answer(&lua, Err(e)),
            };
            let n = buf.len();
            if !this.run.charge(n) {
                return answer(&lua, Err(this.run.over_read()));
            }
            let data = lua.create_string(&buf[..n.min(max)])?;
            answer(&lua, Ok(Value::String(data)))
        });
        methods.add_async_method("close", |_, this, ()| async move {
            this.sock.lock().await.close();
            Ok(true)
        });
    }
}
