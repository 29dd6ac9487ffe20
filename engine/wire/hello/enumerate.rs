//! Which protocol versions and suites a server accepts, in its order of
//! preference, from ClientHellos and ServerHellos alone (as nmap's
//! ssl-enum-ciphers, sslscan and testssl.sh do it, never a full handshake).
//!
//! In: a way to open a connection ready for a ClientHello (TCP, or TCP
//! upgraded by STARTTLS), a deadline and a cap on hellos. Out: an
//! [`Enumeration`]. What always holds: at most [`Limits::hellos`]
//! connections, [`Limits::parallel`] at a time, each bounded by the flight
//! reader's limits and by the deadline; a server that misbehaves ends its
//! version's enumeration with an error, never the rest.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::{exchange, info, suites_for, ClientHello, Flight, HelloError, SSL3, TLS10, TLS11, TLS12, TLS13};
use crate::wire::tls::TlsInfo;
use crate::wire::watch::Watched;

/// How far one enumeration may go.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Most connections (hellos) in all.
    pub hellos: u32,
    /// Most at once.
    pub parallel: usize,
    /// Longest one hello (connect, STARTTLS, flight) may take.
    pub each: std::time::Duration,
    /// Most bytes read from the server in all; no hello starts past it.
    pub read_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { hellos: 1000, parallel: 6, each: std::time::Duration::from_secs(5), read_bytes: u64::MAX }
    }
}

/// One suite a server accepted, with the key exchange it chose for it.
#[derive(Clone, Debug)]
pub struct Accepted {
    pub suite: u16,
    /// The session facts of that hello (kx, group, kx_bits, name, chain).
    pub info: TlsInfo,
}

/// Whose order the server follows when offered several suites it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preference {
    Server,
    Client,
    /// Fewer than two suites, or the check could not be made.
    Indeterminate,
}

impl Preference {
    pub fn as_str(self) -> &'static str {
        match self {
            Preference::Server => "server",
            Preference::Client => "client",
            Preference::Indeterminate => "indeterminate",
        }
    }
}

/// What one protocol version showed.
#[derive(Clone, Debug)]
pub struct VersionResult {
    pub version: u16,
    /// Accepted suites, in the order the server chose them.
    pub accepted: Vec<Accepted>,
    pub preference: Preference,
    /// Why the enumeration of this version stopped early, if it did.
    pub error: Option<String>,
}

/// What a whole enumeration showed.
#[derive(Clone, Debug, Default)]
pub struct Enumeration {
    /// The server answered an SSLv2 CLIENT-HELLO with a SERVER-HELLO.
    pub sslv2: bool,
    /// Versions with at least one accepted suite, newest first.
    pub versions: Vec<VersionResult>,
    /// Hellos sent.
    pub hellos: u32,
    /// The hello cap or the read limit was reached: the result may be incomplete.
    pub capped: bool,
    /// Bytes read from the server in all (STARTTLS exchanges included).
    pub read: u64,
}

/// The versions enumerated, newest first.
pub const VERSIONS: [u16; 5] = [TLS13, TLS12, TLS11, TLS10, SSL3];

/// Enumerates `versions` (newest first; see [`VERSIONS`]) and SSLv2.
pub async fn enumerate<S, F, Fut>(
    connect: F,
    server_name: Option<&str>,
    versions: &[u16],
    until: Instant,
    limits: Limits,
) -> Enumeration
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<S, HelloError>>,
{
    let (sent, read, chain_kept) = (AtomicU32::new(0), AtomicU64::new(0), AtomicBool::new(false));
    let at_once = tokio::sync::Semaphore::new(limits.parallel.max(1));
    let run = Run {
        connect: &connect,
        server_name,
        until,
        limits,
        sent: &sent,
        read: &read,
        chain_kept: &chain_kept,
        at_once: &at_once,
    };
    let mut unique: Vec<u16> = Vec::new();
    for &v in versions {
        if !unique.contains(&v) {
            unique.push(v);
        }
    }
    let sslv2 = async { run.sslv2().await };
    // Every version at once; the semaphore keeps `parallel` hellos in flight.
    let each = futures_util::future::join_all(unique.iter().map(|&v| run.version(v)));
    let (sslv2, results) = futures_util::join!(sslv2, each);
    let sent = sent.load(Ordering::Relaxed);
    let read = read.load(Ordering::Relaxed);
    Enumeration {
        sslv2,
        versions: results.into_iter().filter(|r| !r.accepted.is_empty()).collect(),
        hellos: sent.min(limits.hellos),
        capped: sent > limits.hellos || read > limits.read_bytes,
        read,
    }
}

/// Why a drain stopped.
enum Stop {
    /// The server refused what was left: every accepted suite is found.
    Refused,
    /// Something else (time-out, malformed reply): what was found is kept.
    Failed(String),
}

struct Run<'a, F> {
    connect: &'a F,
    server_name: Option<&'a str>,
    until: Instant,
    limits: Limits,
    sent: &'a AtomicU32,
    read: &'a AtomicU64,
    /// A certificate chain is kept (with the first suite that showed one).
    chain_kept: &'a AtomicBool,
    at_once: &'a tokio::sync::Semaphore,
}

impl<S, F, Fut> Run<'_, F>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<S, HelloError>>,
{
    /// One hello offering `suites` at `version`, if the cap allows it.
    async fn hello(&self, version: u16, suites: Vec<u16>) -> Result<Flight, HelloError> {
        let _slot = self.at_once.acquire().await.map_err(|_| HelloError::Closed)?;
        // Past the read limit, no hello is sent (nor counted).
        if self.read.load(Ordering::Relaxed) > self.limits.read_bytes {
            return Err(HelloError::Malformed(format!("more than {} bytes read", self.limits.read_bytes)));
        }
        if self.sent.fetch_add(1, Ordering::Relaxed) >= self.limits.hellos {
            return Err(HelloError::Malformed(format!("the cap of {} hellos was reached", self.limits.hellos)));
        }
        let hello = ClientHello {
            version,
            suites,
            server_name: self.server_name.filter(|n| n.parse::<std::net::IpAddr>().is_err()).map(str::to_string),
            alpn: Vec::new(),
        };
        let until = (Instant::now() + self.limits.each).min(self.until);
        let io = tokio::time::timeout_at(until, (self.connect)()).await.map_err(|_| HelloError::Timeout)??;
        exchange(&mut Watched { io, watch: self.read }, &hello, until).await
    }

    /// Every suite `version` accepts, and in whose order. The first round
    /// offers every suite twice at once, in our order and reversed: a server
    /// that answers both with the same suite imposes its own order (or takes
    /// one suite), and the rest is taken away one hello after another; one
    /// that answers with two suites, and picks the first of those two when
    /// offered them in that order, follows the client's, and the rest is
    /// found in parallel (the order is ours anyway).
    async fn version(&self, version: u16) -> VersionResult {
        let ours = suites_for(version);
        let mut out =
            VersionResult { version, accepted: Vec::new(), preference: Preference::Indeterminate, error: None };
        let mut left = ours.clone();
        let reversed: Vec<u16> = ours.iter().rev().copied().collect();
        let (a, b) = futures_util::join!(self.hello(version, ours.clone()), self.hello(version, reversed));
        let stopped = match self.take(version, a, &mut left, &mut out.accepted) {
            Err(stop) => stop,
            Ok(first) => match b {
                // Two suites: the client's order, unless the server has
                // groups of equal preference (or favours ChaCha20 for
                // clients that do): offered the two, the client's first
                // must win.
                Ok(f) if f.version == version && f.suite != first && left.contains(&f.suite) => {
                    let other = f.suite;
                    let confirmed = matches!(
                        self.hello(version, vec![other, first]).await,
                        Ok(c) if c.version == version && c.suite == other
                    );
                    if confirmed {
                        out.preference = Preference::Client;
                        let _ = self.take(version, Ok(f), &mut left, &mut out.accepted);
                        let stop = self.in_parallel(version, left, &mut out.accepted).await;
                        let rank = |id: u16| ours.iter().position(|&s| s == id).unwrap_or(usize::MAX);
                        out.accepted.sort_by_key(|a| rank(a.suite));
                        stop
                    } else {
                        let stop = self.drain(version, &mut left, &mut out.accepted).await;
                        out.preference = Preference::Server;
                        stop
                    }
                }
                Ok(f) if f.version == version && f.suite == first => {
                    let stop = self.drain(version, &mut left, &mut out.accepted).await;
                    if out.accepted.len() > 1 {
                        out.preference = Preference::Server;
                    }
                    stop
                }
                // The reversed hello failed: find the rest one by one, then
                // offer the first two found, the server's first last.
                _ => {
                    let stop = self.drain(version, &mut left, &mut out.accepted).await;
                    if let [first, second, ..] = &out.accepted[..] {
                        let (a, b) = (first.suite, second.suite);
                        out.preference = match self.hello(version, vec![b, a]).await {
                            Ok(f) if f.version == version && f.suite == a => Preference::Server,
                            Ok(f) if f.version == version && f.suite == b => Preference::Client,
                            _ => Preference::Indeterminate,
                        };
                    }
                    stop
                }
            },
        };
        if let Stop::Failed(e) = stopped {
            if !out.accepted.is_empty() {
                out.error = Some(e);
            }
        }
        out
    }

    /// `left` dealt round-robin into `parallel` parts (so accepted suites
    /// spread over them), each drained at once.
    async fn in_parallel(&self, version: u16, left: Vec<u16>, accepted: &mut Vec<Accepted>) -> Stop {
        let parts = self.limits.parallel.min(left.len()).max(1);
        let mut split: Vec<Vec<u16>> = vec![Vec::new(); parts];
        for (i, s) in left.iter().enumerate() {
            split[i % parts].push(*s);
        }
        let found = futures_util::future::join_all(split.into_iter().map(|mut part| async move {
            let mut got = Vec::new();
            let stop = self.drain(version, &mut part, &mut got).await;
            (got, stop)
        }))
        .await;
        let mut stop = Stop::Refused;
        for (got, s) in found {
            accepted.extend(got);
            if let Stop::Failed(e) = s {
                stop = Stop::Failed(e);
            }
        }
        stop
    }

    /// Offers `left` again and again, taking away each suite the server
    /// chooses, until it refuses or something fails.
    async fn drain(&self, version: u16, left: &mut Vec<u16>, accepted: &mut Vec<Accepted>) -> Stop {
        while !left.is_empty() {
            let answer = self.hello(version, left.clone()).await;
            if let Err(stop) = self.take(version, answer, left, accepted) {
                return stop;
            }
        }
        Stop::Refused
    }

    /// What one hello at `version` showed: the suite the server chose
    /// (taken from `left` and added to `accepted`), or why to stop.
    fn take(
        &self,
        version: u16,
        answer: Result<Flight, HelloError>,
        left: &mut Vec<u16>,
        accepted: &mut Vec<Accepted>,
    ) -> Result<u16, Stop> {
        match answer {
            // A lower version in answer: this one is not spoken.
            Ok(f) if f.version != version => Err(Stop::Refused),
            Ok(mut f) => {
                left.retain(|&s| s != f.suite);
                // One chain is enough (every suite gets the same one):
                // memory stays one flight's, whatever the server sends, and
                // only the leaf is read again (for the key size of RSA kx).
                let keep = !f.chain.is_empty() && !self.chain_kept.swap(true, Ordering::Relaxed);
                if !keep {
                    f.chain.truncate(1);
                }
                let mut info = info(&f, "hello");
                if !keep {
                    info.chain = Vec::new();
                    info.der = Vec::new();
                    info.chain_cut = 0;
                }
                accepted.push(Accepted { suite: f.suite, info });
                Ok(f.suite)
            }
            Err(e) if e.refused() || matches!(e, HelloError::NotTls | HelloError::Sslv2) => Err(Stop::Refused),
            Err(e) => Err(Stop::Failed(e.to_string())),
        }
    }

    /// An SSLv2 CLIENT-HELLO with its seven suites.
    async fn sslv2(&self) -> bool {
        let Ok(_slot) = self.at_once.acquire().await else { return false };
        if self.sent.fetch_add(1, Ordering::Relaxed) >= self.limits.hellos {
            return false;
        }
        let until = (Instant::now() + self.limits.each).min(self.until);
        let Ok(Ok(io)) = tokio::time::timeout_at(until, (self.connect)()).await else { return false };
        let mut io = Watched { io, watch: self.read };
        let work = async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            io.write_all(&sslv2_client_hello()).await.ok()?;
            let mut head = [0u8; 3];
            io.read_exact(&mut head).await.ok()?;
            // A two-byte header with the high bit, then SERVER-HELLO (4).
            Some(head[0] & 0x80 != 0 && head[2] == 4)
        };
        tokio::time::timeout_at(until, work).await.ok().flatten().unwrap_or(false)
    }
}

fn sslv2_client_hello() -> Vec<u8> {
    const SPECS: [[u8; 3]; 7] =
        [[1, 0, 0x80], [2, 0, 0x80], [3, 0, 0x80], [4, 0, 0x80], [5, 0, 0x80], [6, 0, 0x40], [7, 0, 0xc0]];
    let mut body = vec![1, 0, 2];
    body.extend_from_slice(&((SPECS.len() * 3) as u16).to_be_bytes());
    body.extend_from_slice(&[0, 0, 0, 16]);
    for s in SPECS {
        body.extend_from_slice(&s);
    }
    body.extend_from_slice(&[0x5a; 16]);
    let mut out = vec![0x80 | (body.len() >> 8) as u8, body.len() as u8];
    out.extend(body);
    out
}
