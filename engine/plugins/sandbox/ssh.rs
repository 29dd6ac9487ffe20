//! SSH for plugins, done by the host with russh: anything past the key
//! exchange needs the negotiated encryption, and the key exchange itself
//! is protocol code no plugin should carry.
//!
//! In: a connected TCP stream (opened through the plugin guard), a user
//! name or a host key algorithm, and a deadline. Out: the authentication
//! methods the server offers that user after a "none" request, or the host
//! key the server shows for that algorithm, and the bytes read. What always holds:
//! the server's host key is accepted without a check (nothing is sent that
//! needs a trusted server: no password, no key, no agent); at most
//! [`MAX_READ`] bytes are read; nothing of the connection outlives the
//! deadline, not even russh's session task (its stream fails once the
//! deadline passes).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use russh::client::{self, AuthResult};
use russh::{cipher, kex};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// Most bytes one exchange may read.
pub const MAX_READ: u64 = 1 << 20;

/// What the client calls itself.
const CLIENT_ID: &str = "SSH-2.0-moonscan";

/// Key exchanges offered: russh's safe defaults, then the older ones a
/// scanner still meets (nothing secret depends on this session). Only the
/// client's extension markers: russh would pick the server's as a key
/// exchange when nothing else matched.
const KEX: &[kex::Name] = &[
    kex::CURVE25519,
    kex::CURVE25519_PRE_RFC_8731,
    kex::ECDH_SHA2_NISTP256,
    kex::ECDH_SHA2_NISTP384,
    kex::ECDH_SHA2_NISTP521,
    kex::DH_GEX_SHA256,
    kex::DH_G16_SHA512,
    kex::DH_G18_SHA512,
    kex::DH_G14_SHA256,
    kex::DH_G15_SHA512,
    kex::DH_G17_SHA512,
    kex::DH_G14_SHA1,
    kex::DH_GEX_SHA1,
    kex::DH_G1_SHA1,
    kex::EXTENSION_SUPPORT_AS_CLIENT,
    kex::EXTENSION_OPENSSH_STRICT_KEX_AS_CLIENT,
];

/// Ciphers offered: russh's defaults, then CBC modes for old servers.
const CIPHERS: &[cipher::Name] = &[
    cipher::CHACHA20_POLY1305,
    cipher::AES_256_GCM,
    cipher::AES_256_CTR,
    cipher::AES_192_CTR,
    cipher::AES_128_CTR,
    cipher::AES_256_CBC,
    cipher::AES_192_CBC,
    cipher::AES_128_CBC,
];

/// A stream that counts the bytes read, fails once more than `limit` were
/// read, and fails every operation once `until` has passed.
pub(super) struct Bounded<S> {
    inner: S,
    read: Arc<AtomicU64>,
    limit: u64,
    deadline: Pin<Box<Sleep>>,
}

impl<S> Bounded<S> {
    pub(super) fn new(inner: S, limit: u64, until: Instant) -> (Bounded<S>, Arc<AtomicU64>) {
        let read = Arc::new(AtomicU64::new(0));
        (Bounded { inner, read: read.clone(), limit, deadline: Box::pin(tokio::time::sleep_until(until)) }, read)
    }

    /// An error once the deadline has passed (and a wake-up registered for it otherwise).
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Some(io::Error::new(io::ErrorKind::TimedOut, "deadline passed")),
            Poll::Pending => None,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Bounded<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(e) = this.expired(cx) {
            return Poll::Ready(Err(e));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let n = (buf.filled().len() - before) as u64;
        if this.read.fetch_add(n, Ordering::Relaxed) + n > this.limit {
            return Poll::Ready(Err(io::Error::other(format!("read more than {} bytes", this.limit))));
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Bounded<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(e) = this.expired(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.inner).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(e) = this.expired(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The client's settings for one exchange ending by `until`: the key
/// exchanges and ciphers a scanner offers, and only the host key
/// `algorithms` given (russh's list without).
fn client_config(until: Instant, algorithms: Option<&[russh::keys::Algorithm]>) -> Arc<client::Config> {
    let mut preferred = russh::Preferred { kex: KEX.into(), cipher: CIPHERS.into(), ..russh::Preferred::DEFAULT };
    if let Some(a) = algorithms {
        preferred.key = a.to_vec().into();
    }
    Arc::new(client::Config {
        client_id: russh::SshId::Standard(CLIENT_ID.into()),
        // Belt and braces: the stream already fails at the deadline.
        inactivity_timeout: Some(until.saturating_duration_since(Instant::now())),
        preferred,
        ..Default::default()
    })
}

/// Accepts any host key: the server is being looked at, not trusted.
struct AnyHostKey;

/// Keeps the server's host key and ends the exchange there.
struct KeepHostKey(Arc<std::sync::Mutex<Option<russh::keys::PublicKey>>>);

impl client::Handler for KeepHostKey {
    type Error = russh::Error;

    async fn check_server_key(&mut self, key: &russh::keys::PublicKey) -> Result<bool, Self::Error> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(key.clone());
        // Refused: nothing past the key exchange is needed.
        Ok(false)
    }
}

/// The kinds of host key, in the order nmap's ssh-hostkey reports them:
/// the name nmap gives each, and the algorithms that fetch it (one
/// connection per kind, offering only these). Not DSA: russh is built
/// without it (OpenSSH turned ssh-dss off by default in 7.0 and removed it
/// in 9.8).
pub(crate) const HOST_KEY_KINDS: &[(&str, &[russh::keys::Algorithm])] = {
    use russh::keys::{Algorithm, EcdsaCurve, HashAlg};
    &[
        (
            "RSA",
            &[
                Algorithm::Rsa { hash: Some(HashAlg::Sha512) },
                Algorithm::Rsa { hash: Some(HashAlg::Sha256) },
                Algorithm::Rsa { hash: None },
            ],
        ),
        ("ECDSA", &[Algorithm::Ecdsa { curve: EcdsaCurve::NistP256 }]),
        ("ECDSA", &[Algorithm::Ecdsa { curve: EcdsaCurve::NistP384 }]),
        ("ECDSA", &[Algorithm::Ecdsa { curve: EcdsaCurve::NistP521 }]),
        ("ED25519", &[Algorithm::Ed25519]),
    ]
};

/// A server's host key: its type as the key blob names it ("ssh-rsa"),
/// its size in bits, and the blob (RFC 4253 section 6.6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HostKey {
    pub(crate) key_type: String,
    pub(crate) bits: u32,
    pub(crate) blob: Vec<u8>,
}

impl HostKey {
    fn of(key: &russh::keys::PublicKey) -> crate::error::Result<HostKey> {
        use russh::keys::ssh_key::public::KeyData;
        let bad = |why: String| crate::error::Error::new(crate::error::ErrorKind::Protocol, format!("ssh: {why}"));
        let blob = key.to_bytes().map_err(|e| bad(format!("cannot encode the host key: {e}")))?;
        // Bits of a big-endian unsigned integer (mpint bytes, maybe a leading zero).
        let bits = |b: &[u8]| {
            let b: &[u8] = &b[b.iter().take_while(|&&x| x == 0).count()..];
            b.first().map_or(0, |&x| (b.len() as u32 - 1) * 8 + (8 - x.leading_zeros()))
        };
        let bits = match key.key_data() {
            KeyData::Rsa(k) => bits(k.n.as_bytes()),
            KeyData::Dsa(k) => bits(k.p.as_bytes()),
            KeyData::Ecdsa(k) => match k.curve() {
                russh::keys::EcdsaCurve::NistP256 => 256,
                russh::keys::EcdsaCurve::NistP384 => 384,
                russh::keys::EcdsaCurve::NistP521 => 521,
            },
            KeyData::Ed25519(_) => 256,
            other => return Err(bad(format!("a host key of an unknown kind ({})", other.algorithm()))),
        };
        Ok(HostKey { key_type: key.algorithm().as_str().to_string(), bits, blob })
    }
}

/// The host key `stream`'s server shows when offered only `algorithms`
/// (`None` when it has none of them), and the bytes read, also when it
/// fails, reading at most `max_read` bytes, by `until`.
pub(crate) async fn host_key_counted(
    stream: TcpStream,
    algorithms: &[russh::keys::Algorithm],
    until: Instant,
    max_read: u64,
) -> (crate::error::Result<Option<HostKey>>, u64) {
    let (stream, read) = Bounded::new(stream, max_read.min(MAX_READ), until);
    let config = client_config(until, Some(algorithms));
    let kept = Arc::new(std::sync::Mutex::new(None));
    let exchange = client::connect_stream(config, stream, KeepHostKey(kept.clone()));
    let outcome = tokio::time::timeout_at(until, exchange).await;
    let key = kept.lock().unwrap_or_else(|e| e.into_inner()).take();
    let result = match (key, outcome) {
        (Some(key), _) => HostKey::of(&key).map(Some),
        (None, Err(_)) => Err(crate::error::Error::new(crate::error::ErrorKind::Timeout, "ssh: timed out")),
        // No host key of this kind; anything else in common missing is an error.
        (None, Ok(Err(russh::Error::NoCommonAlgo { kind: russh::AlgorithmKind::Key, .. }))) => Ok(None),
        (None, Ok(Err(e))) => Err(describe(e)),
        (None, Ok(Ok(_))) => {
            Err(crate::error::Error::new(crate::error::ErrorKind::Protocol, "ssh: the server showed no host key"))
        }
    };
    (result, read.load(Ordering::Relaxed))
}

impl client::Handler for AnyHostKey {
    type Error = russh::Error;

    async fn check_server_key(&mut self, _key: &russh::keys::PublicKey) -> Result<bool, Self::Error> {
        Ok(true)
    }
}

/// The authentication methods `stream`'s server offers `user` in answer to
/// a "none" request (`["none"]` if that request itself succeeded), and the
/// bytes read from the stream, by `until`. (The host calls
/// [`auth_methods_counted`], which also counts the bytes of a failed exchange.)
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) async fn auth_methods(
    stream: TcpStream,
    user: &str,
    until: Instant,
) -> crate::error::Result<(Vec<String>, u64)> {
    let (result, read) = auth_methods_counted(stream, user, until, MAX_READ).await;
    result.map(|methods| (methods, read))
}

/// [`auth_methods`], reading at most `max_read` bytes (the run's read budget
/// left), with the bytes read also when it fails (the host charges them to
/// the run either way).
pub(crate) async fn auth_methods_counted(
    stream: TcpStream,
    user: &str,
    until: Instant,
    max_read: u64,
) -> (crate::error::Result<Vec<String>>, u64) {
    let (stream, read) = Bounded::new(stream, max_read.min(MAX_READ), until);
    let config = client_config(until, None);
    let exchange = async {
        let mut handle = client::connect_stream(config, stream, AnyHostKey).await.map_err(describe)?;
        let result = handle.authenticate_none(user).await.map_err(describe)?;
        let _ = handle.disconnect(russh::Disconnect::ByApplication, "", "en").await;
        // Let the session task send the disconnect and finish.
        let _ = handle.await;
        Ok::<_, crate::error::Error>(result)
    };
    let result = match tokio::time::timeout_at(until, exchange).await {
        Err(_) => Err(crate::error::Error::new(crate::error::ErrorKind::Timeout, "ssh: timed out")),
        Ok(Err(e)) => Err(e),
        Ok(Ok(AuthResult::Success)) => Ok(vec!["none".to_string()]),
        Ok(Ok(AuthResult::Failure { remaining_methods, .. })) => {
            Ok(remaining_methods.iter().map(|m| <&str>::from(m).to_string()).collect())
        }
    };
    (result, read.load(Ordering::Relaxed))
}

fn describe(e: russh::Error) -> crate::error::Error {
    use crate::error::ErrorKind;
    let (kind, message) = match &e {
        russh::Error::IO(io) if io.kind() == io::ErrorKind::TimedOut => (ErrorKind::Timeout, format!("ssh: {io}")),
        russh::Error::IO(io) => (ErrorKind::Io, format!("ssh: {io}")),
        russh::Error::Disconnect | russh::Error::HUP => {
            (ErrorKind::Io, "ssh: the server closed the connection".to_string())
        }
        russh::Error::UnknownAlgo | russh::Error::NoCommonAlgo { .. } => (
            ErrorKind::Protocol,
            "ssh: no key exchange, host key, cipher or MAC algorithm in common with the server".to_string(),
        ),
        other => (ErrorKind::Protocol, format!("ssh: {other}")),
    };
    crate::error::Error::with_source(kind, message, e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (server, _) = l.accept().await.unwrap();
        (client, server)
    }

    #[tokio::test]
    async fn the_stream_counts_and_stops_past_its_limit() {
        let (client, mut server) = pair().await;
        let (mut s, read) = Bounded::new(client, 10, Instant::now() + std::time::Duration::from_secs(5));
        server.write_all(b"0123456789").await.unwrap();
        let mut buf = [0u8; 64];
        let mut got = 0;
        while got < 10 {
            got += s.read(&mut buf).await.unwrap();
        }
        assert_eq!(read.load(Ordering::Relaxed), 10);
        server.write_all(b"x").await.unwrap();
        let e = s.read(&mut buf).await.unwrap_err();
        assert!(e.to_string().contains("more than 10 bytes"), "{e}");
    }

    #[tokio::test]
    async fn the_stream_fails_at_its_deadline_even_when_idle() {
        let (client, _server) = pair().await;
        let (mut s, _) = Bounded::new(client, MAX_READ, Instant::now() + std::time::Duration::from_millis(100));
        let mut buf = [0u8; 8];
        let t = std::time::Instant::now();
        let e = tokio::time::timeout(std::time::Duration::from_secs(5), s.read(&mut buf)).await.unwrap().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_server_that_is_not_ssh_is_an_error() {
        let (client, mut server) = pair().await;
        tokio::spawn(async move {
            let _ = server.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            let mut sink = [0u8; 256];
            let _ = server.read(&mut sink).await;
        });
        let until = Instant::now() + std::time::Duration::from_secs(3);
        let r = auth_methods(client, "root", until).await;
        assert!(r.is_err(), "{r:?}");
    }

    #[tokio::test]
    async fn a_silent_server_times_out_by_the_deadline() {
        let (client, _server) = pair().await;
        let t = std::time::Instant::now();
        let r = auth_methods(client, "root", Instant::now() + std::time::Duration::from_millis(200)).await;
        assert!(r.is_err(), "{r:?}");
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
    }
}
