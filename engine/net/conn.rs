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
