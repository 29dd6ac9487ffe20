//! Plugin networking: the one place every plugin connection passes.
//!
//! In: a run's request to connect (host, port, TLS options), then reads and
//! writes on that socket, or an HTTP request. Out: bytes, or an error string.
//! What always holds: [`Guard::check`] runs before every connect, so a
//! plugin reaches only the host being scanned, on a port the scan scans,
//! never an excluded address and never a name to resolve; every operation
//! has a deadline; every byte read is charged to the run's read budget
//! before it is handed over.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use mlua::{Table, Value};
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use crate::error::{Error, ErrorKind, Result};
use crate::findings::TlsInfo;
use crate::targets::TargetSpace;
use crate::wire::conn::{self, Conn};

use super::failure::{closed, timed_out};
use super::tape::{SocketTape, Step};
use super::value::known_keys;

/// Where plugin sockets may go: the scan's own targets and ports, TCP
/// connections to its TCP ports and datagrams to its UDP ports.
#[derive(Clone, Debug)]
pub struct Guard {
    tcp: Option<TargetSpace>,
    udp: Option<TargetSpace>,
}

/// The transport a plugin socket uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Udp,
}

impl Guard {
    /// Plugins may reach `(address, port)` pairs of this scan only: `tcp`
    /// for connections, `udp` for datagrams (either may be absent).
    pub fn scan(tcp: Option<TargetSpace>, udp: Option<TargetSpace>) -> Guard {
        Guard { tcp, udp }
    }

    /// No network at all (offline `plugins test`).
    pub fn offline() -> Guard {
        Guard { tcp: None, udp: None }
    }

    /// Whether a run scanning `scanned` may reach `ip:port` over `transport`.
    pub fn check(&self, scanned: IpAddr, ip: IpAddr, port: u16, transport: Transport) -> Result<()> {
        let refused = |why: String| Err(Error::new(ErrorKind::Sandbox, why));
        if self.tcp.is_none() && self.udp.is_none() {
            return refused("no network: this run is offline".into());
        }
        if ip != scanned {
            return refused(format!("{ip} is not the host being scanned ({scanned})"));
        }
        let (space, name) = match transport {
            Transport::Tcp => (&self.tcp, "TCP"),
            Transport::Udp => (&self.udp, "UDP"),
        };
        let Some(space) = space else {
            return refused(format!("this scan scans no {name} ports"));
        };
        // The space is the targets minus the excludes: an excluded address is never in it.
        if !space.addrs().contains(ip) {
            return refused(format!("{ip} is excluded from this scan"));
        }
        if space.index_of(ip, port).is_none() {
            return refused(format!("{name} port {port} is not one this scan scans"));
        }
        Ok(())
    }
}

/// How to speak TLS on a plugin socket.
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    /// 12 and/or 13; empty means both.
    pub versions: Vec<u8>,
    /// ALPN protocols to offer; `None` means the default (`http/1.1`).
    pub alpn: Option<Vec<Vec<u8>>>,
    /// The name sent in SNI: the plugin's own (`tls = {sni = ...}`), else
    /// the name the user gave for the host; none for an address.
    pub sni: Option<String>,
}

/// Longest `host` a connect takes (an IPv6 address with a scope is at most 45 bytes).
const MAX_HOST: usize = 64;
/// Default time for one socket operation.
pub(super) const SOCKET_TIMEOUT: Duration = Duration::from_secs(5);

/// `ctx:connect{port=, host=, tls=, timeout=}`.
pub(super) struct ConnectRequest {
    pub(super) host: Option<String>,
    pub(super) port: Option<u16>,
    pub(super) tls: Option<TlsOptions>,
    pub(super) timeout: Duration,
}

impl ConnectRequest {
    const KEYS: &'static [&'static str] = &["host", "port", "tls", "timeout"];

    pub(super) fn from_lua(opts: Option<&Table>) -> mlua::Result<ConnectRequest> {
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
    known_keys(t, &["versions", "alpn", "sni"], "ctx:connect: tls")?;
    let mut o = TlsOptions::default();
    if let Some(n) = t.raw_get::<Option<mlua::String>>("sni")? {
        let n = n.to_str().map_err(|_| mlua::Error::runtime("ctx:connect: tls.sni is not text"))?.to_string();
        if rustls::pki_types::DnsName::try_from(n.as_str()).is_err() || n.parse::<IpAddr>().is_ok() {
            return Err(mlua::Error::runtime(format!("ctx:connect: tls.sni {n:?} is not a DNS name")));
        }
        o.sni = Some(n);
    }
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

/// Opens a TCP connection (and TLS on it) to an address the guard allowed.
pub(crate) async fn open(
    ip: IpAddr,
    port: u16,
    tls: Option<&TlsOptions>,
    until: Instant,
) -> Result<(Conn, Option<TlsInfo>)> {
    let connector = tls.map(connector).transpose()?;
    let name = tls.and_then(|t| t.sni.as_deref());
    conn::open(SocketAddr::new(ip, port), connector.as_ref(), name, until).await.map_err(explained)
}

fn connector(opts: &TlsOptions) -> Result<TlsConnector> {
    let versions: &[u8] = if opts.versions.is_empty() { &[12, 13] } else { &opts.versions };
    let alpn = opts.alpn.clone().unwrap_or_else(|| vec![b"http/1.1".to_vec()]);
    let config = crate::wire::dangerously::client_config(versions, &alpn)
        .map_err(|e| Error::with_source(ErrorKind::Config, format!("TLS: {e}"), e))?;
    Ok(TlsConnector::from(config))
}

/// A failed open as plugins see it: a handshake rustls refused says why
/// (for servers only the first-flight reader could see).
fn explained(e: conn::OpenError) -> Error {
    match e {
        conn::OpenError::Handshake(_) => {
            let why = format!(
                "{e} (plugin sockets speak TLS 1.2 and 1.3 with forward-secret suites only; ctx.tls still has \
                 what service detection read of the server's certificate chain)"
            );
            // The handshake stays the cause: plugins see the kind `tls`.
            Error::with_source(ErrorKind::Protocol, why, e)
        }
        e => e.into(),
    }
}

/// `sock:starttls()`: the protocol's exchange in the clear on `tcp` (none
/// for `sock:tls_handshake()`, whose plugin made its own), then a TLS
/// handshake, by `until`. Returns the TLS connection and its facts, and
/// how many bytes the exchange read (charged to the run either way).
pub(crate) async fn starttls(
    mut tcp: tokio::net::TcpStream,
    proto: Option<crate::wire::starttls::Starttls>,
    name: Option<&str>,
    until: Instant,
) -> (Result<(Conn, TlsInfo)>, usize) {
    let ip = match tcp.peer_addr() {
        Ok(a) => a.ip(),
        Err(e) => return (Err(Error::with_source(ErrorKind::Io, "socket is closed", e)), 0),
    };
    let mut read = 0;
    if let Some(proto) = proto {
        let host = name.map_or_else(|| ip.to_string(), str::to_string);
        let (upgraded, n) = proto.upgrade_counted(&mut tcp, &host, until).await;
        read = n;
        if let Err(e) = upgraded {
            return (Err(Error::with_source(ErrorKind::Protocol, e.to_string(), e)), read);
        }
    }
    let opened = async {
        // No ALPN: mail servers (Exim) refuse a protocol they do not speak.
        let connector = connector(&TlsOptions { alpn: Some(Vec::new()), ..TlsOptions::default() })?;
        let (conn, mut info) = conn::handshake(tcp, ip, name, &connector, until).await.map_err(explained)?;
        info.starttls = proto.map(|p| p.name().to_string());
        Ok((conn, info))
    };
    (opened.await, read)
}

/// One plugin socket: the connection and bytes read past a `recv_until` match.
pub(crate) struct Socket {
    pub(crate) conn: Option<Conn>,
    pub(crate) pending: Vec<u8>,
    pub(crate) timeout: Duration,
    pub(crate) tls: Option<TlsInfo>,
    /// Its conversation, recorded or replayed (`plugins test --record/--replay`).
    pub(crate) tape: Option<SocketTape>,
}

impl Socket {
    /// Sends all of `data` within the socket's timeout (checked against
    /// the recording when replaying; kept when recording).
    pub(crate) async fn send(&mut self, data: &[u8]) -> Result<()> {
        if let Some(t @ SocketTape::Replay { .. }) = self.tape.as_mut() {
            return t.replay_send(data);
        }
        let conn = self.conn.as_mut().ok_or_else(closed)?;
        let r = match tokio::time::timeout(self.timeout, conn.send(data)).await {
            Err(_) => Err(timed_out("timeout")),
            Ok(r) => r.map_err(Error::from),
        };
        if let Some(t) = &self.tape {
            t.note(match &r {
                Ok(()) => Step::Send { data: data.to_vec() },
                Err(e) => Step::failed(e, true),
            });
        }
        r
    }

    /// Reads once (at most `max` bytes, by `until`) onto the end of `into`:
    /// how many, 0 at the end of the stream.
    pub(crate) async fn read_into(&mut self, max: usize, until: Instant, into: &mut Vec<u8>) -> Result<usize> {
        if let Some(t @ SocketTape::Replay { .. }) = self.tape.as_mut() {
            return t.replay_read(max, into);
        }
        let conn = self.conn.as_mut().ok_or_else(closed)?;
        let mut buf = vec![0u8; max.clamp(1, 64 * 1024)];
        let r = match tokio::time::timeout_at(until, conn.read(&mut buf)).await {
            Err(_) => Err(timed_out("timeout")),
            Ok(r) => r.map_err(Error::from),
        };
        if let Some(t) = &self.tape {
            t.note(match &r {
                Ok(0) => Step::End,
                Ok(n) => Step::Recv { data: buf[..*n].to_vec() },
                Err(e) => Step::failed(e, false),
            });
        }
        let n = r?;
        into.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    /// Closes the connection (a replayed one too).
    pub(crate) fn close(&mut self) {
        self.conn = None;
        if let Some(t) = self.tape.as_mut() {
            t.close();
        }
    }
}

pub(crate) type SharedSocket = Arc<tokio::sync::Mutex<Socket>>;

/// Most bytes one `recv` or `recv_until` returns.
pub const MAX_RECV: usize = 1 << 20;

/// An HTTP response as plugins see it.
#[derive(Debug, Default)]
pub struct Response {
    pub version: String,
    pub status: u16,
    pub reason: String,
    /// Names in lower case, in the order received (a repeated header repeats).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Parses a whole HTTP/1.x response read until the server closed.
pub fn parse_response(raw: &[u8]) -> Result<Response> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut r = httparse::Response::new(&mut headers);
    let n = match r.parse(raw) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err(Error::new(ErrorKind::Protocol, "incomplete HTTP response")),
        Err(e) => return Err(Error::with_source(ErrorKind::Protocol, format!("not an HTTP response: {e}"), e)),
    };
    let mut out = Response {
        version: format!("HTTP/1.{}", r.version.unwrap_or(1)),
        status: r.code.unwrap_or(0),
        reason: r.reason.unwrap_or("").to_string(),
        headers: r
            .headers
            .iter()
            .map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).into_owned()))
            .collect(),
        body: Vec::new(),
    };
    let body = &raw[n..];
    let chunked =
        out.headers.iter().any(|(k, v)| k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked"));
    out.body = if chunked { dechunk(body) } else { body.to_vec() };
    if let Some(len) = out.headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.trim().parse().ok())
    {
        out.body.truncate(len);
    }
    Ok(out)
}

/// Decodes a chunked body as far as it is well formed.
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&b[..eol]);
        let Ok(size) = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16) else { break };
        b = &b[eol + 2..];
        if size == 0 || size > b.len() {
            out.extend_from_slice(&b[..size.min(b.len())]);
            break;
        }
        out.extend_from_slice(&b[..size]);
        b = b.get(size + 2..).unwrap_or(&[]);
    }
    out
}

/// The request bytes for `method path` to `host`, with extra headers and a
/// body; the User-Agent is the plugin's header, else `agent` (the scan's
/// `http.useragent`), else "moonscan".
pub fn request_bytes(
    method: &str,
    path: &str,
    host: &str,
    headers: &[(String, String)],
    body: &[u8],
    agent: Option<&str>,
) -> Vec<u8> {
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    // A plugin's own Host (another name of the same address) replaces it.
    if !has("host") {
        req.push_str(&format!("Host: {host}\r\n"));
    }
    if !has("user-agent") {
        req.push_str(&format!("User-Agent: {}\r\n", agent.unwrap_or("moonscan")));
    }
    if !has("accept") {
        req.push_str("Accept: */*\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() && !has("content-length") {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("Connection: close\r\n\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::targets::{parse_term, AddrSet, Term};

    pub(crate) fn space(include: &str, exclude: &str, ports: Vec<u16>) -> TargetSpace {
        let set = |s: &str| {
            let mut ranges = Vec::new();
            for t in s.split(',').filter(|t| !t.is_empty()) {
                match parse_term(t).unwrap() {
                    Term::Ranges(r) => ranges.extend(r),
                    Term::Host(h) => panic!("{h} is not an address"),
                }
            }
            AddrSet::from_ranges(ranges)
        };
        TargetSpace::new(&set(include), &set(exclude), ports).unwrap()
    }

    #[test]
    fn the_guard_allows_only_the_scanned_host_and_ports() {
        use Transport::{Tcp, Udp};
        let g = Guard::scan(Some(space("198.18.0.0/30", "198.18.0.2", vec![22, 80])), None);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(g.check(ip("198.18.0.1"), ip("198.18.0.1"), 80, Tcp).is_ok());
        let not_host = g.check(ip("198.18.0.1"), ip("198.18.0.3"), 80, Tcp).unwrap_err();
        assert!(not_host.to_string().contains("not the host"));
        assert!(g.check(ip("198.18.0.2"), ip("198.18.0.2"), 80, Tcp).unwrap_err().to_string().contains("excluded"));
        let port = g.check(ip("198.18.0.1"), ip("198.18.0.1"), 443, Tcp).unwrap_err();
        assert!(port.to_string().contains("TCP port 443"));
        // Datagrams go only to the UDP ports scanned, connections only to the TCP ones.
        let no_udp = g.check(ip("198.18.0.1"), ip("198.18.0.1"), 80, Udp).unwrap_err();
        assert!(no_udp.to_string().contains("no UDP ports"), "{no_udp}");
        let both = Guard::scan(Some(space("198.18.0.1", "", vec![80])), Some(space("198.18.0.1", "", vec![53])));
        assert!(both.check(ip("198.18.0.1"), ip("198.18.0.1"), 53, Udp).is_ok());
        assert!(both
            .check(ip("198.18.0.1"), ip("198.18.0.1"), 80, Udp)
            .unwrap_err()
            .to_string()
            .contains("UDP port 80"));
        assert!(both
            .check(ip("198.18.0.1"), ip("198.18.0.1"), 53, Tcp)
            .unwrap_err()
            .to_string()
            .contains("TCP port 53"));
        let offline = Guard::offline().check(ip("198.18.0.1"), ip("198.18.0.1"), 80, Tcp).unwrap_err();
        assert_eq!(offline.kind(), crate::error::ErrorKind::Sandbox);
    }

    #[test]
    fn responses_parse_with_chunks_and_lengths() {
        let r = parse_response(b"HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 3\r\n\r\nabcdef").unwrap();
        assert_eq!((r.status, r.reason.as_str(), r.body.as_slice()), (200, "OK", &b"abc"[..]));
        assert_eq!(r.headers[0], ("server".into(), "x".into()));
        let r =
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x\r\nde\r\n0\r\n\r\n")
                .unwrap();
        assert_eq!(r.body, b"abcde");
        assert!(parse_response(b"SSH-2.0-x\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nServ").is_err());
        assert_eq!(dechunk(b"ffffffffffffffff\r\nab"), b"ab");
    }

    #[test]
    fn requests_carry_host_and_close() {
        let r = request_bytes("GET", "/", "198.18.0.2", &[("X-A".into(), "1".into())], b"", None);
        let text = String::from_utf8(r).unwrap();
        assert!(text.starts_with("GET / HTTP/1.1\r\nHost: 198.18.0.2\r\n"));
        assert!(text.contains("X-A: 1\r\n") && text.ends_with("Connection: close\r\n\r\n"));
        assert!(text.contains("\r\nUser-Agent: moonscan\r\n"), "{text}");
        // The scan's http.useragent, unless the plugin sets its own.
        let r = String::from_utf8(request_bytes("GET", "/", "h", &[], b"", Some("Agent/7"))).unwrap();
        assert!(r.contains("\r\nUser-Agent: Agent/7\r\n"), "{r}");
        let own = [("user-agent".to_string(), "mine".to_string())];
        let r = String::from_utf8(request_bytes("GET", "/", "h", &own, b"", Some("Agent/7"))).unwrap();
        assert!(r.contains("\r\nuser-agent: mine\r\n") && !r.contains("Agent/7"), "{r}");
        // A plugin's own Host is the only one.
        let own = [("Host".to_string(), "other.example:8080".to_string())];
        let r = String::from_utf8(request_bytes("GET", "/", "h", &own, b"", None)).unwrap();
        assert_eq!(r.matches("Host:").count(), 1, "{r}");
        assert!(r.contains("\r\nHost: other.example:8080\r\n"), "{r}");
    }
}
