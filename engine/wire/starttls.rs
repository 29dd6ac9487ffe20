//! STARTTLS: the few exchanges in the clear after which a mail, directory,
//! database, chat or news server speaks TLS on the same connection, as
//! nmap's sslcert library covers them.
//!
//! In: a connected stream, the protocol and a deadline. Out: the same
//! stream, ready for a ClientHello, or a [`StarttlsError`] that says what
//! the server answered. What always holds: every read is bounded
//! ([`REPLY_MAX`] bytes per reply) and ends by the deadline; nothing the
//! server sends is trusted beyond the status it gives.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{timeout_at, Instant};

/// Most bytes one reply in the clear may take.
pub const REPLY_MAX: usize = 64 * 1024;

/// A protocol with a STARTTLS exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Starttls {
    Smtp,
    Lmtp,
    Imap,
    Pop3,
    Ftp,
    Ldap,
    Postgres,
    Mysql,
    Nntp,
    XmppClient,
    XmppServer,
}

/// Why the upgrade failed.
#[derive(Debug)]
pub enum StarttlsError {
    Io(std::io::Error),
    Timeout,
    /// The server said it does not offer TLS, or refused the request.
    Refused(String),
    /// A reply longer than [`REPLY_MAX`] or not of the protocol.
    Malformed(String),
}

impl std::fmt::Display for StarttlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StarttlsError::Io(e) => write!(f, "STARTTLS: {e}"),
            StarttlsError::Timeout => f.write_str("STARTTLS: no answer before the time-out"),
            StarttlsError::Refused(r) => write!(f, "STARTTLS refused: {r}"),
            StarttlsError::Malformed(r) => write!(f, "STARTTLS: {r}"),
        }
    }
}

impl std::error::Error for StarttlsError {}

impl Starttls {
    /// Every protocol, by the names [`Starttls::parse`] takes.
    pub const NAMES: [&'static str; 12] = [
        "smtp",
        "submission",
        "lmtp",
        "imap",
        "pop3",
        "ftp",
        "ldap",
        "postgresql",
        "mysql",
        "nntp",
        "xmpp",
        "xmpp-server",
    ];

    /// A protocol by its name (nmap's service names and a few aliases).
    pub fn parse(name: &str) -> Option<Starttls> {
        Some(match name.to_ascii_lowercase().as_str() {
            "smtp" | "submission" => Starttls::Smtp,
            "lmtp" => Starttls::Lmtp,
            "imap" => Starttls::Imap,
            "pop3" => Starttls::Pop3,
            "ftp" => Starttls::Ftp,
            "ldap" => Starttls::Ldap,
            "postgresql" | "postgres" => Starttls::Postgres,
            "mysql" => Starttls::Mysql,
            "nntp" => Starttls::Nntp,
            "xmpp" | "xmpp-client" | "jabber" => Starttls::XmppClient,
            "xmpp-server" => Starttls::XmppServer,
            _ => return None,
        })
    }

    /// The name reported in the `tls` object.
    pub fn name(self) -> &'static str {
        match self {
            Starttls::Smtp => "smtp",
            Starttls::Lmtp => "lmtp",
            Starttls::Imap => "imap",
            Starttls::Pop3 => "pop3",
            Starttls::Ftp => "ftp",
            Starttls::Ldap => "ldap",
            Starttls::Postgres => "postgresql",
            Starttls::Mysql => "mysql",
            Starttls::Nntp => "nntp",
            Starttls::XmppClient => "xmpp",
            Starttls::XmppServer => "xmpp-server",
        }
    }

    /// Runs the exchange on `io` (connected, nothing read yet) by `until`;
    /// `host` is the name XMPP's stream header asks for.
    pub async fn upgrade<S>(self, io: &mut S, host: &str, until: Instant) -> Result<(), StarttlsError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        self.upgrade_counted(io, host, until).await.0
    }

    /// [`Starttls::upgrade`], and how many bytes it read (for read budgets).
    pub async fn upgrade_counted<S>(self, io: &mut S, host: &str, until: Instant) -> (Result<(), StarttlsError>, usize)
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let mut r = Replies::default();
        let result = match timeout_at(until, self.exchange(io, host, &mut r)).await {
            Ok(result) => result,
            Err(_) => Err(StarttlsError::Timeout),
        };
        (result, r.taken)
    }

    async fn exchange<S>(self, io: &mut S, host: &str, r: &mut Replies) -> Result<(), StarttlsError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        match self {
            Starttls::Smtp | Starttls::Lmtp => smtp(io, r, self == Starttls::Lmtp).await?,
            Starttls::Ftp => {
                r.status_lines(io, "220").await?;
                send(io, b"AUTH TLS\r\n").await?;
                r.status_lines(io, "234").await?;
            }
            Starttls::Nntp => {
                r.line_starting(io, &["200", "201"]).await?;
                send(io, b"STARTTLS\r\n").await?;
                r.line_starting(io, &["382"]).await?;
            }
            Starttls::Pop3 => {
                r.line_starting(io, &["+OK"]).await?;
                send(io, b"STLS\r\n").await?;
                r.line_starting(io, &["+OK"]).await?;
            }
            Starttls::Imap => imap(io, r).await?,
            Starttls::Postgres => {
                // SSLRequest: length 8, code 80877103.
                send(io, &[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]).await?;
                r.count(1)?;
                match read_byte(io).await? {
                    b'S' => {}
                    b'N' => return Err(StarttlsError::Refused("the server does not accept SSL (N)".into())),
                    b => return Err(StarttlsError::Malformed(format!("answer 0x{b:02x} to SSLRequest"))),
                }
            }
            Starttls::Ldap => {
                // ExtendedRequest, messageID 1, requestName 1.3.6.1.4.1.1466.20037.
                let oid = b"1.3.6.1.4.1.1466.20037";
                let mut req = vec![0x30, 0x1d, 0x02, 0x01, 0x01, 0x77, 0x18, 0x80, oid.len() as u8];
                req.extend_from_slice(oid);
                send(io, &req).await?;
                ldap_result(&r.ldap_message(io).await?)?;
            }
            Starttls::Mysql => mysql(io, r).await?,
            Starttls::XmppClient | Starttls::XmppServer => xmpp(io, host, r, self == Starttls::XmppServer).await?,
        }
        Ok(())
    }
}

/// SMTP (or LMTP): the greeting, EHLO (LHLO) offering STARTTLS, then STARTTLS.
async fn smtp<S>(io: &mut S, r: &mut Replies, lmtp: bool) -> Result<(), StarttlsError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    r.status_lines(io, "220").await?;
    let hello: &[u8] = if lmtp { b"LHLO moonscan.invalid\r\n" } else { b"EHLO moonscan.invalid\r\n" };
    send(io, hello).await?;
    let caps = r.status_lines(io, "250").await?;
    if !caps.to_ascii_uppercase().contains("STARTTLS") {
        return Err(StarttlsError::Refused("the server does not offer STARTTLS".into()));
    }
    send(io, b"STARTTLS\r\n").await?;
    r.status_lines(io, "220").await?;
    Ok(())
}

/// IMAP: the greeting, then STARTTLS, answered after any untagged lines.
async fn imap<S>(io: &mut S, r: &mut Replies) -> Result<(), StarttlsError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    r.line_starting(io, &["* OK", "* PREAUTH"]).await?;
    send(io, b"ms1 STARTTLS\r\n").await?;
    // Untagged lines may come first.
    loop {
        let line = r.line(io).await?;
        if let Some(status) = line.strip_prefix("ms1 ") {
            if status.to_ascii_uppercase().starts_with("OK") {
                break;
            }
            return Err(StarttlsError::Refused(line));
        }
    }
    Ok(())
}

/// MySQL: the greeting must offer SSL; an SSLRequest answers it.
async fn mysql<S>(io: &mut S, r: &mut Replies) -> Result<(), StarttlsError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let greeting = mysql_packet(io, r).await?;
    let caps = mysql_capabilities(&greeting)?;
    const SSL: u32 = 0x0800;
    if caps & SSL == 0 {
        return Err(StarttlsError::Refused("the server does not offer SSL".into()));
    }
    // SSLRequest: capabilities (protocol 4.1, secure connection,
    // SSL), max packet 16 MB, utf8mb4, 23 zero bytes; sequence 1.
    let flags: u32 = 0x0000_0200 | 0x0000_8000 | SSL | 0x0008_0000;
    let mut p = vec![32, 0, 0, 1];
    p.extend_from_slice(&flags.to_le_bytes());
    p.extend_from_slice(&(16u32 << 20).to_le_bytes());
    p.push(45);
    p.extend_from_slice(&[0; 23]);
    send(io, &p).await?;
    Ok(())
}

/// XMPP (client or server): a stream to `host` whose features offer STARTTLS, then <starttls/> and its <proceed/>.
async fn xmpp<S>(io: &mut S, host: &str, r: &mut Replies, server: bool) -> Result<(), StarttlsError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let ns = if server { "jabber:server" } else { "jabber:client" };
    let open = format!(
        "<?xml version='1.0'?><stream:stream xmlns='{ns}' xmlns:stream='http://etherx.jabber.org/streams' \
         to='{}' version='1.0'>",
        xml_escape(host)
    );
    send(io, open.as_bytes()).await?;
    // With the stream prefix or a default namespace.
    let features = r.until(io, &["</stream:features>", "<stream:features/>", "</features>", "<features/>"]).await?;
    if !features.contains("<starttls") {
        return Err(StarttlsError::Refused("the server does not offer STARTTLS".into()));
    }
    send(io, b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>").await?;
    let reply = r.until(io, &["<proceed", "<failure"]).await?;
    if !reply.contains("<proceed") {
        return Err(StarttlsError::Refused("the server answered <failure/>".into()));
    }
    // The rest of the <proceed/> element: up to its '>'.
    r.until(io, &[">"]).await?;
    Ok(())
}

/// A server that says `input` whatever it is sent, then closes: how the
/// fuzz target and tests run an exchange without a socket or a runtime.
struct Replay<'a> {
    input: &'a [u8],
}

impl AsyncRead for Replay<'_> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let n = self.input.len().min(buf.remaining());
        buf.put_slice(&self.input[..n]);
        self.input = &self.input[n..];
        std::task::Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Replay<'_> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

impl Starttls {
    /// Runs the exchange against a server whose every reply is `input`
    /// (then end of stream); how many bytes it read.
    #[doc(hidden)]
    pub fn replay(self, input: &[u8]) -> (Result<(), StarttlsError>, usize) {
        use futures_util::FutureExt as _;
        let mut io = Replay { input };
        let mut r = Replies::default();
        // Replay never waits: the exchange finishes on its first poll.
        let result = self.exchange(&mut io, "fuzz.example", &mut r).now_or_never();
        (result.unwrap_or(Err(StarttlsError::Timeout)), r.taken)
    }
}

async fn send<S: AsyncWrite + Unpin>(io: &mut S, data: &[u8]) -> Result<(), StarttlsError> {
    io.write_all(data).await.map_err(StarttlsError::Io)?;
    io.flush().await.map_err(StarttlsError::Io)
}

async fn read_byte<S: AsyncRead + Unpin>(io: &mut S) -> Result<u8, StarttlsError> {
    let mut b = [0u8; 1];
    match io.read(&mut b).await.map_err(StarttlsError::Io)? {
        0 => Err(StarttlsError::Malformed("the server closed the connection".into())),
        _ => Ok(b[0]),
    }
}

/// Reads replies one byte at a time, so nothing past the last one is
/// taken from the stream (the TLS handshake reads the rest).
#[derive(Default)]
struct Replies {
    taken: usize,
}

impl Replies {
    /// One line, without its line end.
    async fn line<S: AsyncRead + Unpin>(&mut self, io: &mut S) -> Result<String, StarttlsError> {
        let mut line = Vec::new();
        loop {
            let b = read_byte(io).await?;
            self.count(1)?;
            if b == b'\n' {
                break;
            }
            line.push(b);
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Ok(String::from_utf8_lossy(&line).into_owned())
    }

    /// One line that starts with one of `wanted`, else the refusal it is.
    async fn line_starting<S: AsyncRead + Unpin>(&mut self, io: &mut S, wanted: &[&str]) -> Result<(), StarttlsError> {
        let line = self.line(io).await?;
        if wanted.iter().any(|w| line.starts_with(w)) {
            Ok(())
        } else {
            Err(StarttlsError::Refused(line))
        }
    }

    /// A reply of `code` lines (`code-` continues, `code ` ends), as one text.
    async fn status_lines<S: AsyncRead + Unpin>(&mut self, io: &mut S, code: &str) -> Result<String, StarttlsError> {
        let mut all = String::new();
        loop {
            let line = self.line(io).await?;
            if !line.starts_with(code) {
                return Err(StarttlsError::Refused(line));
            }
            all.push_str(&line);
            all.push('\n');
            if line.as_bytes().get(3) != Some(&b'-') {
                return Ok(all);
            }
        }
    }

    /// Text up to and including the first of `ends`.
    async fn until<S: AsyncRead + Unpin>(&mut self, io: &mut S, ends: &[&str]) -> Result<String, StarttlsError> {
        let mut text = Vec::new();
        loop {
            text.push(read_byte(io).await?);
            self.count(1)?;
            if ends.iter().any(|e| text.ends_with(e.as_bytes())) {
                return Ok(String::from_utf8_lossy(&text).into_owned());
            }
        }
    }

    /// One BER-framed LDAP message (a SEQUENCE with a definite length).
    async fn ldap_message<S: AsyncRead + Unpin>(&mut self, io: &mut S) -> Result<Vec<u8>, StarttlsError> {
        self.count(2)?;
        let mut head = vec![read_byte(io).await?, read_byte(io).await?];
        if head[0] != 0x30 {
            return Err(StarttlsError::Malformed("the reply is not an LDAP message".into()));
        }
        let len = match head[1] {
            n if n < 0x80 => usize::from(n),
            n @ 0x81..=0x84 => {
                let mut len = 0usize;
                for _ in 0..(n & 0x7f) {
                    let b = read_byte(io).await?;
                    self.count(1)?;
                    head.push(b);
                    len = (len << 8) | usize::from(b);
                }
                len
            }
            _ => return Err(StarttlsError::Malformed("an LDAP length this reader does not take".into())),
        };
        self.exactly(io, len).await
    }

    /// `len` bytes, counted as they come; refused up front past REPLY_MAX.
    async fn exactly<S: AsyncRead + Unpin>(&mut self, io: &mut S, len: usize) -> Result<Vec<u8>, StarttlsError> {
        if self.taken + len > REPLY_MAX {
            return Err(StarttlsError::Malformed(format!("more than {REPLY_MAX} bytes before TLS")));
        }
        let mut body = vec![0u8; len];
        let mut got = 0;
        while got < len {
            match io.read(&mut body[got..]).await.map_err(StarttlsError::Io)? {
                0 => return Err(StarttlsError::Malformed("the server closed the connection".into())),
                n => {
                    self.count(n)?;
                    got += n;
                }
            }
        }
        Ok(body)
    }

    fn count(&mut self, n: usize) -> Result<(), StarttlsError> {
        self.taken += n;
        if self.taken > REPLY_MAX {
            return Err(StarttlsError::Malformed(format!("more than {REPLY_MAX} bytes before TLS")));
        }
        Ok(())
    }
}

/// The resultCode of an LDAP ExtendedResponse (the body of its message).
fn ldap_result(body: &[u8]) -> Result<(), StarttlsError> {
    let bad = || StarttlsError::Malformed("an unreadable LDAP ExtendedResponse".into());
    // messageID: INTEGER.
    let (&tag, rest) = body.split_first().ok_or_else(bad)?;
    let (&len, rest) = rest.split_first().ok_or_else(bad)?;
    if tag != 0x02 || usize::from(len) > rest.len() {
        return Err(bad());
    }
    let rest = &rest[usize::from(len)..];
    // [APPLICATION 24] ExtendedResponse, then resultCode ENUMERATED.
    if rest.first() != Some(&0x78) {
        return Err(bad());
    }
    let mut at = 2;
    if let Some(&l) = rest.get(1) {
        if l & 0x80 != 0 {
            at += usize::from(l & 0x7f);
        }
    }
    match rest.get(at..at + 3) {
        Some([0x0a, 1, 0]) => Ok(()),
        Some([0x0a, 1, code]) => Err(StarttlsError::Refused(format!("LDAP result code {code}"))),
        _ => Err(bad()),
    }
}

/// One MySQL packet: 3-byte length, sequence, payload.
async fn mysql_packet<S: AsyncRead + Unpin>(io: &mut S, r: &mut Replies) -> Result<Vec<u8>, StarttlsError> {
    let head = r.exactly(io, 4).await?;
    let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
    if len > REPLY_MAX {
        return Err(StarttlsError::Malformed(format!("a MySQL packet of {len} bytes")));
    }
    r.exactly(io, len).await
}

/// The capability flags of a MySQL handshake (protocol 10).
fn mysql_capabilities(greeting: &[u8]) -> Result<u32, StarttlsError> {
    if greeting.first() == Some(&0xff) {
        let msg = String::from_utf8_lossy(greeting.get(3..).unwrap_or_default()).into_owned();
        return Err(StarttlsError::Refused(msg));
    }
    let bad = || StarttlsError::Malformed("an unreadable MySQL greeting".into());
    if greeting.first() != Some(&10) {
        return Err(bad());
    }
    let nul = greeting[1..].iter().position(|&b| b == 0).ok_or_else(bad)? + 1;
    // id (4), scramble (8), filler (1), capabilities low (2), charset,
    // status (2), capabilities high (2).
    let at = nul + 1 + 4 + 8 + 1;
    let low = greeting.get(at..at + 2).ok_or_else(bad)?;
    let high = greeting.get(at + 5..at + 7).unwrap_or(&[0, 0]);
    Ok(u32::from(u16::from_le_bytes([low[0], low[1]])) | u32::from(u16::from_le_bytes([high[0], high[1]])) << 16)
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('\'', "&apos;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
#[path = "starttls_tests.rs"]
mod tests;
