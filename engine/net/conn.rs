//! A TCP connection in the clear or inside TLS: what service detection and
//! plugins' sockets both read from and write to.

#![deny(unsafe_code)]

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A TCP connection, in the clear or inside TLS.
pub(crate) enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
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

/// Connects to `addr` and, given a TLS client, does the handshake, all by
/// `until`. The socket closes with RST (linger 0: no TIME_WAIT on either
/// side) and sends without delay. Returns the connection and, for TLS, the
/// session's facts and certificate chain.
pub(crate) async fn open(
    addr: std::net::SocketAddr,
    tls: Option<&tokio_rustls::TlsConnector>,
    until: tokio::time::Instant,
) -> Result<(Conn, Option<crate::findings::TlsInfo>), OpenError> {
    use tokio::time::timeout_at;
    let tcp = timeout_at(until, TcpStream::connect(addr))
        .await
        .map_err(|_| OpenError::ConnectTimeout)?
        .map_err(OpenError::Connect)?;
    let _ = socket2::SockRef::from(&tcp).set_linger(Some(std::time::Duration::ZERO));
    let _ = tcp.set_nodelay(true);
    let Some(connector) = tls else { return Ok((Conn::Plain(tcp), None)) };
    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
    let stream = timeout_at(until, connector.connect(name, tcp))
        .await
        .map_err(|_| OpenError::HandshakeTimeout)?
        .map_err(OpenError::Handshake)?;
    let info = super::tls::session_info(stream.get_ref().1);
    Ok((Conn::Tls(Box::new(stream)), Some(info)))
}

impl From<OpenError> for crate::Error {
    fn from(e: OpenError) -> crate::Error {
        use crate::ErrorKind;
        let kind = match &e {
            OpenError::ConnectTimeout | OpenError::HandshakeTimeout => ErrorKind::Timeout,
            OpenError::Connect(_) => ErrorKind::Io,
            OpenError::Handshake(_) => ErrorKind::Protocol,
        };
        crate::Error::with_source(kind, e.to_string(), e)
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
