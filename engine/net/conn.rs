//! A TCP connection in the clear or inside TLS: what service detection and
//! plugins' sockets both read from and write to.

#![deny(unsafe_code)]

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::hello::{self, Flight};

/// A TCP connection, in the clear or inside TLS.
pub(crate) enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<Watched<TcpStream, HelloTap>>>),
}

/// What a [`Watched`] stream shows the bytes read through it to.
pub(crate) trait Watch {
    fn saw(&mut self, data: &[u8]);
}

/// A stream that shows every byte read through it to a [`Watch`], and
/// passes writes through.
pub(crate) struct Watched<S, W> {
    pub(crate) io: S,
    pub(crate) watch: W,
}

impl<S: AsyncRead + Unpin, W: Watch + Unpin> AsyncRead for Watched<S, W> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.watch.saw(&buf.filled()[before..]);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin, W: Unpin> AsyncWrite for Watched<S, W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Counts the bytes read.
impl Watch for &std::sync::atomic::AtomicU64 {
    fn saw(&mut self, data: &[u8]) {
        self.fetch_add(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Most bytes [`HelloTap`] keeps: a ServerHello longer than this gets no
/// fingerprint.
const TAP_MAX: usize = 9 + 4096;

/// Keeps a copy of the ServerHello rustls reads (for JA3S and JA4S, which
/// rustls does not expose), then nothing more.
#[derive(Default)]
pub(crate) struct HelloTap {
    seen: Vec<u8>,
    done: bool,
}

impl Watch for HelloTap {
    fn saw(&mut self, data: &[u8]) {
        if self.done {
            return;
        }
        let room = TAP_MAX - self.seen.len();
        self.seen.extend_from_slice(&data[..data.len().min(room)]);
        if self.seen.len() < 9 {
            return;
        }
        // A handshake record starting with a ServerHello whose body fits.
        let s = &self.seen;
        let record = usize::from(u16::from_be_bytes([s[3], s[4]]));
        let len = (usize::from(s[6]) << 16) | (usize::from(s[7]) << 8) | usize::from(s[8]);
        if s[0] != 22 || s[5] != 2 || len + 4 > record || 9 + len > TAP_MAX {
            self.seen = Vec::new();
            self.done = true;
        } else if s.len() >= 9 + len {
            self.seen.truncate(9 + len);
            self.done = true;
        }
    }
}

impl HelloTap {
    /// The ServerHello seen, if it was whole; keeps nothing more.
    fn take_hello(&mut self) -> Option<Flight> {
        self.done = true;
        let seen = std::mem::take(&mut self.seen);
        let len = seen.len().checked_sub(9)?;
        let whole = len == (usize::from(seen[6]) << 16 | usize::from(seen[7]) << 8 | usize::from(seen[8]));
        whole.then(|| hello::flight::server_hello(&seen[9..]).ok()).flatten()
    }
}

impl Conn {
    pub(crate) async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf).await,
            Conn::Tls(s) => s.read(buf).await,
        }
    }

    pub(crate) async fn send(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Conn::Plain(s) => s.write_all(data).await,
            Conn::Tls(s) => {
                s.write_all(data).await?;
                s.flush().await
            }
        }
    }
}

/// Why [`open`] failed: the connect or the TLS handshake, each with the
/// error or a time-out.
#[derive(Debug)]
pub(crate) enum OpenError {
    Connect(std::io::Error),
    ConnectTimeout,
    Handshake(std::io::Error),
    HandshakeTimeout,
}

impl OpenError {
    /// The I/O kind, with time-outs as [`std::io::ErrorKind::TimedOut`].
    pub(crate) fn kind(&self) -> std::io::ErrorKind {
        match self {
            OpenError::Connect(e) | OpenError::Handshake(e) => e.kind(),
            OpenError::ConnectTimeout | OpenError::HandshakeTimeout => std::io::ErrorKind::TimedOut,
        }
    }
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Connect(e) => write!(f, "connect: {e}"),
            OpenError::ConnectTimeout => f.write_str("connect timed out"),
            OpenError::Handshake(e) => write!(f, "TLS handshake failed: {e}"),
            OpenError::HandshakeTimeout => f.write_str("TLS handshake timed out"),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Connect(e) | OpenError::Handshake(e) => Some(e),
            _ => None,
        }
    }
}

/// Connects to `addr` and, given a TLS client, does the handshake (naming
/// `name` in SNI, see [`handshake`]), all by `until`. The socket closes
/// with RST (linger 0: no TIME_WAIT on either side) and sends without
/// delay. Returns the connection and, for TLS, the session's facts and
/// certificate chain.
pub(crate) async fn open(
    addr: std::net::SocketAddr,
    tls: Option<&tokio_rustls::TlsConnector>,
    name: Option<&str>,
    until: tokio::time::Instant,
) -> Result<(Conn, Option<crate::findings::TlsInfo>), OpenError> {
    let tcp = tcp(addr, until).await?;
    let Some(connector) = tls else { return Ok((Conn::Plain(tcp), None)) };
    let (conn, info) = handshake(tcp, addr.ip(), name, connector, until).await?;
    Ok((conn, Some(info)))
}

/// A TCP connection by `until` that closes with RST (linger 0: no
/// TIME_WAIT on either side) and sends without delay.
pub(crate) async fn tcp(addr: std::net::SocketAddr, until: tokio::time::Instant) -> Result<TcpStream, OpenError> {
    let tcp = tokio::time::timeout_at(until, TcpStream::connect(addr))
        .await
        .map_err(|_| OpenError::ConnectTimeout)?
        .map_err(OpenError::Connect)?;
    let _ = socket2::SockRef::from(&tcp).set_linger(Some(std::time::Duration::ZERO));
    let _ = tcp.set_nodelay(true);
    Ok(tcp)
}

/// What a ClientHello names: `name` when it is a DNS name, else the
/// address (which rustls sends no SNI for).
pub(crate) fn server_name(ip: std::net::IpAddr, name: Option<&str>) -> rustls::pki_types::ServerName<'static> {
    use rustls::pki_types::ServerName;
    match name.map(|n| ServerName::try_from(n.to_string())) {
        Some(Ok(n @ ServerName::DnsName(_))) => n,
        _ => ServerName::IpAddress(ip.into()),
    }
}

/// [`tcp`] for [`hello::legacy_chain`].
pub(crate) async fn tcp_for_hello(
    addr: std::net::SocketAddr,
    until: tokio::time::Instant,
) -> Result<TcpStream, hello::HelloError> {
    tcp(addr, until).await.map_err(|e| match e {
        OpenError::ConnectTimeout | OpenError::HandshakeTimeout => hello::HelloError::Timeout,
        OpenError::Connect(e) | OpenError::Handshake(e) => hello::HelloError::Io(e),
    })
}

/// The rustls handshake on a connected (perhaps STARTTLS-upgraded) stream
/// to `ip`: its ClientHello names `name` in SNI (the name the user gave
/// for the host, so a server that picks its certificate or site by name
/// shows that name's), and no name when there is none or it is not a DNS
/// name (an address is never sent as SNI, as RFC 6066 says).
pub(crate) async fn handshake(
    tcp: TcpStream,
    ip: std::net::IpAddr,
    name: Option<&str>,
    connector: &tokio_rustls::TlsConnector,
    until: tokio::time::Instant,
) -> Result<(Conn, crate::findings::TlsInfo), OpenError> {
    let name = server_name(ip, name);
    let tapped = Watched { io: tcp, watch: HelloTap::default() };
    let mut stream = tokio::time::timeout_at(until, connector.connect(name, tapped))
        .await
        .map_err(|_| OpenError::HandshakeTimeout)?
        .map_err(OpenError::Handshake)?;
    let (tapped, session) = stream.get_mut();
    let info = super::tls::session_info(session, tapped.watch.take_hello().as_ref());
    Ok((Conn::Tls(Box::new(stream)), info))
}

impl From<OpenError> for crate::error::Error {
    fn from(e: OpenError) -> crate::error::Error {
        use crate::error::ErrorKind;
        let kind = match &e {
            OpenError::ConnectTimeout | OpenError::HandshakeTimeout => ErrorKind::Timeout,
            OpenError::Connect(_) => ErrorKind::Io,
            OpenError::Handshake(_) => ErrorKind::Protocol,
        };
        crate::error::Error::with_source(kind, e.to_string(), e)
    }
}

/// An unconnected UDP socket on an ephemeral port of the family `peer`
/// needs (UDP scans over sockets and UDP detection).
pub async fn udp_socket(peer: std::net::IpAddr) -> std::io::Result<tokio::net::UdpSocket> {
    let any: std::net::IpAddr = match peer {
        std::net::IpAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        std::net::IpAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    };
    tokio::net::UdpSocket::bind((any, 0)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handshake record holding a ServerHello body of `len` bytes (TLS 1.2,
    /// suite 0xc02f, extensions filling the rest).
    fn hello_record(len: usize) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend_from_slice(&[1; 32]);
        body.extend_from_slice(&[0, 0xc0, 0x2f, 0]);
        let ext_len = len - body.len() - 2;
        body.extend_from_slice(&(ext_len as u16).to_be_bytes());
        let mut left = ext_len;
        while left >= 4 {
            let n = (left - 4).min(1000);
            body.extend_from_slice(&[0x10, 0x00]);
            body.extend_from_slice(&(n as u16).to_be_bytes());
            body.extend(std::iter::repeat_n(0, n));
            left -= 4 + n;
        }
        body.extend(std::iter::repeat_n(0, left));
        let mut hs = vec![2];
        hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        hs.extend(body);
        let mut r = vec![22, 3, 3];
        r.extend_from_slice(&(hs.len() as u16).to_be_bytes());
        r.extend(hs);
        r
    }

    #[test]
    fn the_tap_keeps_a_server_hello_in_any_split_and_nothing_after() {
        let mut rec = hello_record(120);
        rec.extend_from_slice(&[0xab; 3000]); // the Certificate that follows
        let mut tap = HelloTap::default();
        for piece in rec.chunks(7) {
            tap.saw(piece);
        }
        assert_eq!(tap.seen.len(), 9 + 120, "only the ServerHello is kept");
        let f = tap.take_hello().expect("a whole ServerHello");
        assert_eq!(f.suite, 0xc02f);
        assert!(tap.seen.is_empty());
    }

    #[test]
    fn a_server_hello_past_the_tap_limit_is_dropped_not_kept() {
        let rec = hello_record(TAP_MAX);
        let mut tap = HelloTap::default();
        for piece in rec.chunks(4096) {
            tap.saw(piece);
            assert!(tap.seen.len() <= TAP_MAX);
        }
        assert!(tap.seen.is_empty());
        assert_eq!(tap.take_hello(), None);
        // Not a handshake: nothing kept either.
        let mut other = HelloTap::default();
        other.saw(b"HTTP/1.1 400 Bad Request\r\n");
        assert!(other.seen.is_empty() && other.take_hello().is_none());
    }
    /// The ClientHello a listener on loopback reads from [`handshake`]
    /// naming `name` (the handshake then fails: nobody answers).
    async fn client_hello(name: Option<&str>) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.unwrap();
            buf.truncate(n);
            buf
        });
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(3);
        let tcp = tcp(addr, until).await.unwrap();
        let connector =
            tokio_rustls::TlsConnector::from(crate::net::dangerously::client_config(&[12, 13], &[]).unwrap());
        let shook = handshake(tcp, addr.ip(), name, &connector, until).await;
        assert!(shook.is_err(), "nobody answered");
        server.await.unwrap()
    }

    /// A host the user named is named in SNI; an address, or none, never is
    /// (RFC 6066 allows DNS names only; servers pick the name's site).
    #[tokio::test]
    async fn a_handshake_names_the_users_name_in_sni_and_never_an_address() {
        let hello = client_hello(Some("alpha.lab.moonscan.test")).await;
        assert_eq!(hello.first(), Some(&22), "a TLS handshake record");
        let name = b"alpha.lab.moonscan.test";
        assert!(hello.windows(name.len()).any(|w| w == name), "the name is in the ClientHello");
        for none in [None, Some("127.0.0.1"), Some("not a name!")] {
            let hello = client_hello(none).await;
            assert!(!hello.windows(9).any(|w| w == b"127.0.0.1"), "{none:?}: no address in SNI");
            assert!(!hello.windows(5).any(|w| w == b"not a"), "{none:?}: no bad name in SNI");
        }
    }
}
