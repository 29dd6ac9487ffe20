//! The error values plugins get from the host: `nil, err` where `err` has
//! a stable `kind` (what went wrong, for the plugin to decide on) and a
//! `message` (why, for people), and the `errors` module that makes them
//! in Lua (`errors.new(kind, message)`, `errors.wrap(err, prefix)`).
//!
//! In: an engine [`Error`] (or a kind and a message) where a host call
//! fails. Out: a Lua userdata that prints as its message did when the
//! host returned the message itself: `tostring`, `string.format("%s")`,
//! `..` on either side (the result is a string), `print` and `ctx:log`,
//! a result or finding's data, `return nil, err`; its string methods
//! (`err:sub(1, 200)`) are the message's. What always holds: the kind is
//! one of [`Kind::ALL`], decided here from the engine's error kinds and
//! causes, never from the message's text; two error values are equal
//! (`==`) when kind and message are; an error value is never equal to a
//! string (Lua compares values of two types as different), so a plugin
//! compares `err.kind`, or `tostring(err)`.

use mlua::{Lua, MetaMethod, MultiValue, Table, UserData, UserDataMethods, Value};

use crate::error::{Error, ErrorKind};

/// What went wrong, as plugins see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A connect, send, read or exchange did not finish in its time.
    Timeout,
    /// The peer ended the stream (or the socket was closed) before what
    /// the call waited for came.
    Closed,
    /// The host refused the connection (a TCP reset; for a datagram, ICMP
    /// port unreachable).
    Refused,
    /// Any other failure of the connection (unreachable, reset after it
    /// was made, ...).
    Network,
    /// TLS could not be set up: the handshake failed, or the server
    /// refused a hello.
    Tls,
    /// The peer's bytes are not what the call expects (no match or no line
    /// end within the bytes allowed, not HTTP, an SSH or TLS record that
    /// does not parse, a STARTTLS exchange refused).
    Protocol,
    /// A budget of the run refused the call (bytes read or sent, sockets,
    /// datagrams, once-per-run calls).
    Budget,
    /// The sandbox refused it: another host, a port the scan does not
    /// scan, no network (an offline or replayed run).
    Sandbox,
    /// What the plugin asked is not usable (a header with a line break, a
    /// protocol with no STARTTLS, a value `ctx:set_service` refuses).
    Invalid,
}

impl Kind {
    /// Every kind, as documented in docs/plugins.md.
    pub const ALL: [Kind; 9] = [
        Kind::Timeout,
        Kind::Closed,
        Kind::Refused,
        Kind::Network,
        Kind::Tls,
        Kind::Protocol,
        Kind::Budget,
        Kind::Sandbox,
        Kind::Invalid,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Timeout => "timeout",
            Kind::Closed => "closed",
            Kind::Refused => "refused",
            Kind::Network => "network",
            Kind::Tls => "tls",
            Kind::Protocol => "protocol",
            Kind::Budget => "budget",
            Kind::Sandbox => "sandbox",
            Kind::Invalid => "invalid",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The kind of an engine error: its [`ErrorKind`], and for I/O and
    /// protocol errors their cause (a refused connect, the end of the
    /// stream, a TLS handshake).
    pub fn of(e: &Error) -> Kind {
        match e.kind() {
            ErrorKind::Timeout => Kind::Timeout,
            ErrorKind::Budget => Kind::Budget,
            ErrorKind::Sandbox => Kind::Sandbox,
            ErrorKind::Config | ErrorKind::TargetSpec | ErrorKind::PortSpec => Kind::Invalid,
            ErrorKind::Protocol if causes(e).any(handshake) => Kind::Tls,
            ErrorKind::Protocol => Kind::Protocol,
            _ => causes(e).find_map(io_kind).unwrap_or(Kind::Network),
        }
    }

    /// The kind of a failed ClientHello exchange (`ctx:server_hello`).
    pub fn of_hello(e: &crate::wire::hello::HelloError) -> Kind {
        use crate::wire::hello::HelloError;
        match e {
            HelloError::Io(io) => io_kind(io).unwrap_or(Kind::Network),
            HelloError::Timeout => Kind::Timeout,
            HelloError::Closed => Kind::Closed,
            HelloError::Alert { .. } | HelloError::Sslv2 => Kind::Tls,
            _ => Kind::Protocol,
        }
    }
}

/// `e`'s causes, outermost first (an I/O error's wrapped error included).
fn causes(e: &Error) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    let first = std::error::Error::source(e);
    std::iter::successors(first, |c| match c.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
        Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
        None => c.source(),
    })
}

/// A TLS handshake that failed (rustls refused, or the server ended it).
fn handshake(c: &(dyn std::error::Error + 'static)) -> bool {
    matches!(c.downcast_ref::<crate::wire::conn::OpenError>(), Some(crate::wire::conn::OpenError::Handshake(_)))
        || c.is::<rustls::Error>()
}

/// The kind an I/O error says, if it is one.
fn io_kind(c: &(dyn std::error::Error + 'static)) -> Option<Kind> {
    use std::io::ErrorKind as Io;
    let io = c.downcast_ref::<std::io::Error>()?;
    Some(match io.kind() {
        Io::TimedOut => Kind::Timeout,
        Io::ConnectionRefused => Kind::Refused,
        Io::UnexpectedEof | Io::NotConnected => Kind::Closed,
        _ => Kind::Network,
    })
}

/// One error value, as Lua holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub kind: Kind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: Kind, message: impl Into<String>) -> Failure {
        Failure { kind, message: message.into() }
    }

    /// An engine error as plugins see it: its kind, and its message as it
    /// always read.
    pub fn of(e: &Error) -> Failure {
        Failure::new(Kind::of(e), e.to_string())
    }

    /// `nil, err` for a host call that failed.
    pub fn answer(self, lua: &Lua) -> mlua::Result<(Value, Value)> {
        Ok((Value::Nil, Value::UserData(lua.create_userdata(self)?)))
    }
}

/// The message of an error value, `None` for any other value: what a log
/// line, a result or its data shows of it.
pub fn message_of(v: &Value) -> Option<String> {
    match v {
        Value::UserData(u) => u.borrow::<Failure>().ok().map(|f| f.message.clone()),
        _ => None,
    }
}

/// A value `..` joins: a string or a number as Lua writes it, an error
/// value as its message; anything else is Lua's own error.
fn joined(lua: &Lua, v: &Value) -> mlua::Result<Vec<u8>> {
    if let Some(m) = message_of(v) {
        return Ok(m.into_bytes());
    }
    match v {
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        Value::Integer(_) | Value::Number(_) => {
            Ok(lua.coerce_string(v.clone())?.map(|s| s.as_bytes().to_vec()).unwrap_or_default())
        }
        other => Err(mlua::Error::runtime(format!("attempt to concatenate {} with an error value", other.type_name()))),
    }
}

impl UserData for Failure {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method(MetaMethod::ToString, |_, this, ()| Ok(this.message.clone()));
        methods.add_meta_function(MetaMethod::Concat, |lua, (a, b): (Value, Value)| {
            let mut s = joined(lua, &a)?;
            s.extend(joined(lua, &b)?);
            lua.create_string(s)
        });
        methods.add_meta_function(MetaMethod::Eq, |_, (a, b): (Value, Value)| {
            let get = |v: &Value| match v {
                Value::UserData(u) => u.borrow::<Failure>().ok().map(|f| f.clone()),
                _ => None,
            };
            Ok(matches!((get(&a), get(&b)), (Some(x), Some(y)) if x == y))
        });
        methods.add_meta_method(MetaMethod::Len, |_, this, ()| Ok(this.message.len()));
        // err.kind, err.message; err:sub(1, 200) and the other string
        // methods act on the message, as they did when it was the value.
        methods.add_meta_method(MetaMethod::Index, |lua, this, key: Value| {
            let Value::String(key) = key else { return Ok(Value::Nil) };
            match key.as_bytes().as_ref() {
                b"kind" => return Ok(Value::String(lua.create_string(this.kind.as_str())?)),
                b"message" => return Ok(Value::String(lua.create_string(&this.message)?)),
                _ => {}
            }
            let string: Table = lua.globals().get("string")?;
            let Value::Function(f) = string.raw_get::<Value>(key)? else { return Ok(Value::Nil) };
            let bound = lua.create_function(move |lua, mut args: MultiValue| {
                let own = args.pop_front();
                if let Some(m) = own.as_ref().and_then(message_of) {
                    args.push_front(Value::String(lua.create_string(m)?));
                } else if let Some(v) = own {
                    args.push_front(v);
                }
                f.call::<MultiValue>(args)
            })?;
            Ok(Value::Function(bound))
        });
    }
}

/// The `errors` module: `errors.new(kind, message)` makes an error value
/// (a library's own failures, with one of [`Kind::ALL`]);
/// `errors.wrap(err, prefix)` is `prefix .. err` keeping `err`'s kind (a
/// string `err` gives a string); `errors.KINDS` lists the kinds.
pub fn errors_module(lua: &Lua) -> mlua::Result<Table> {
    let m = lua.create_table()?;
    m.raw_set(
        "new",
        lua.create_function(|lua, (kind, message): (String, Value)| {
            let Some(kind) = Kind::parse(&kind) else {
                let all: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
                return Err(mlua::Error::runtime(format!("errors.new: {kind:?} is not a kind ({})", all.join(", "))));
            };
            let message = match &message {
                Value::String(s) => s.to_string_lossy(),
                Value::Nil => kind.as_str().to_string(),
                other => match message_of(other) {
                    Some(m) => m,
                    None => lua.coerce_string(other.clone())?.map(|s| s.to_string_lossy()).unwrap_or_default(),
                },
            };
            lua.create_userdata(Failure::new(kind, message))
        })?,
    )?;
    m.raw_set(
        "wrap",
        lua.create_function(|lua, (err, prefix): (Value, mlua::String)| match &err {
            Value::UserData(u) => match u.borrow::<Failure>() {
                Ok(f) => {
                    let wrapped = Failure::new(f.kind, format!("{}{}", prefix.to_string_lossy(), f.message));
                    Ok(Value::UserData(lua.create_userdata(wrapped)?))
                }
                Err(_) => Err(mlua::Error::runtime("errors.wrap: not an error value")),
            },
            other => {
                let mut s = prefix.as_bytes().to_vec();
                s.extend(joined(lua, other)?);
                Ok(Value::String(lua.create_string(s)?))
            }
        })?,
    )?;
    let kinds = lua.create_sequence_from(Kind::ALL.iter().map(|k| k.as_str()))?;
    kinds.set_readonly(true);
    m.raw_set("KINDS", kinds)?;
    m.set_readonly(true);
    Ok(m)
}

/// A socket closed before the call (its kind, for plugins, is `closed`).
pub(crate) fn closed() -> Error {
    Error::with_source(ErrorKind::Io, "socket is closed", std::io::Error::from(std::io::ErrorKind::NotConnected))
}

/// A call that ran out of its time (its kind, for plugins, is `timeout`).
pub(crate) fn timed_out(what: &str) -> Error {
    Error::new(ErrorKind::Timeout, what.to_string())
}
