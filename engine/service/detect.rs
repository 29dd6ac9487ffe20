//! The prober: what runs on one open TCP port.
//!
//! In: an address and port, the probe database, a [`BufPool`]. Out: a
//! [`Detection`]. What always holds: every response is read into one pooled
//! buffer and never past its end, every read has a deadline, and the whole
//! detection of a port ends by [`DetectOptions::port_timeout`]; so a server
//! that sends a gigabyte, or a byte every ten seconds, costs one buffer and a
//! bounded time.
//!
//! The order is nmap's: the NULL probe first (connect and wait for a banner),
//! then the probes that list the port, then the rest by rarity up to the
//! intensity. A hard match ends detection; a soft match names the service and
//! keeps only the probes that can say more about it. Responses that are not
//! matched by their own probe's rules are also tried against the NULL probe's
//! (a server that talks first sends its banner whatever it was sent). On a
//! port a probe lists, the NULL probe waits only a short grace and the next
//! probe reuses its connection, which keeps HTTP and the like fast. Ports a
//! probe lists as TLS ports, and any response that starts like a TLS record,
//! are probed again inside TLS (`tunnel: ssl`), keeping the chain.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::time::{timeout_at, Instant};
use tokio_rustls::TlsConnector;

use super::pool::{BufPool, Loan};
use super::probes::{Probe, ProbeDb, Transport};
use super::rules::Identity;
use crate::error::{Error, ErrorKind, Result};
use crate::findings::{ServiceMethod, TlsInfo};
use crate::net::conn::{self, Conn, OpenError};
use crate::net::hello;
use crate::net::starttls::Starttls;

/// Most bytes of a response kept as the banner.
pub const BANNER_MAX: usize = 512;

/// How long a match that reaches the end of the data waits for more.
const SETTLE: Duration = Duration::from_millis(60);

/// How detection behaves; the defaults suit a LAN at `-T3`.
#[derive(Clone, Debug)]
pub struct DetectOptions {
    /// Probes rarer than this (1-9) are only tried on ports they list; 0 tries only those.
    pub intensity: u8,
    /// One TCP connect or TLS handshake.
    pub connect_timeout: Duration,
    /// Everything done for one port.
    pub port_timeout: Duration,
    /// How long the NULL probe waits for a banner on a port another probe lists.
    pub banner_grace: Duration,
    /// Once data has come, a response ends after this long without more.
    pub idle: Duration,
    /// Ports probed at once; also the number of receive buffers.
    pub parallelism: usize,
    /// Bytes of one response read at most (the size of each pooled buffer).
    pub buffer_size: usize,
}

impl DetectOptions {
    /// The defaults for nmap's timing template `level` (`-T4` and `-T5`
    /// wait less for banners and responses, and give a port less time).
    pub fn for_timing(level: u8) -> DetectOptions {
        let mut opts = DetectOptions::default();
        if level >= 4 {
            opts.port_timeout = Duration::from_secs(if level == 4 { 12 } else { 6 });
            opts.banner_grace = Duration::from_millis(if level == 4 { 150 } else { 80 });
            opts.idle = Duration::from_millis(if level == 4 { 500 } else { 300 });
        }
        opts
    }
}

impl Default for DetectOptions {
    fn default() -> DetectOptions {
        DetectOptions {
            intensity: 7,
            connect_timeout: Duration::from_secs(5),
            port_timeout: Duration::from_secs(20),
            banner_grace: Duration::from_millis(250),
            idle: Duration::from_millis(800),
            parallelism: 512,
            buffer_size: 4096,
        }
    }
}

/// What detection found on one port.
#[derive(Clone, Debug, Default)]
pub struct Detection {
    /// The service, from a hard match, a soft match (service only), or nothing.
    pub identity: Option<Identity>,
    pub method: Option<ServiceMethod>,
    /// The probe whose response decided it.
    pub probe: Option<String>,
    /// Found inside TLS.
    pub tunnel: bool,
    /// The first TLS session's facts and chain.
    pub tls: Option<TlsInfo>,
    /// What the service sent before it was sent anything (at most [`BANNER_MAX`]).
    pub banner: Vec<u8>,
    /// Probes sent (the NULL probe counts: it costs a connection).
    pub probes_sent: u32,
    /// Response bytes read, over all probes (each at most one buffer).
    pub bytes_read: u64,
    /// Why detection stopped short, if it did.
    pub error: Option<DetectError>,
    /// On a port no rule identified: what each probe that got a reply
    /// got, in probe order (at most [`MAX_REPLIES`]).
    pub replies: Vec<crate::findings::ProbeReply>,
}

/// Most probe replies a [`Detection`] keeps.
pub const MAX_REPLIES: usize = 16;

/// Why detection of a port did not finish normally.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DetectError {
    /// The port time budget ran out.
    Timeout(String),
    /// A connection or TLS failure that ended detection.
    Io(String),
}

/// Detects services with a shared probe database, buffer pool and TLS configuration.
#[derive(Clone)]
pub struct Detector {
    db: Arc<ProbeDb>,
    null: Option<usize>,
    opts: DetectOptions,
    pool: BufPool,
    /// TLS offering ALPN `http/1.1`, for the ports an HTTP probe lists as TLS.
    tls: TlsConnector,
    /// TLS offering no ALPN (as nmap): some servers (Exim's SMTPS) refuse a
    /// handshake that offers a protocol they do not speak.
    tls_no_alpn: TlsConnector,
}

impl std::fmt::Debug for Detector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detector").field("probes", &self.db.probes().len()).field("opts", &self.opts).finish()
    }
}

/// How one probe's exchange ended.
enum Outcome {
    Hard(Identity),
    Soft(Identity),
    /// The response starts like a TLS record: probe again inside TLS.
    LooksLikeTls,
    Nothing,
}

impl Detector {
    pub fn new(db: ProbeDb, opts: DetectOptions) -> Result<Detector> {
        let tls_config = |alpn: &[Vec<u8>]| {
            crate::net::dangerously::client_config(&[12, 13], alpn)
                .map_err(|e| Error::with_source(ErrorKind::Config, format!("TLS configuration: {e}"), e))
        };
        let config = tls_config(&[b"http/1.1".to_vec()])?;
        let plain = tls_config(&[])?;
        let null = db.probes().iter().position(|p| p.transport == Transport::Tcp && p.payload.is_empty());
        let pool = BufPool::new(opts.parallelism, opts.buffer_size.max(64));
        Ok(Detector {
            db: Arc::new(db),
            null,
            opts,
            pool,
            tls: TlsConnector::from(config),
            tls_no_alpn: TlsConnector::from(plain),
        })
    }

    /// The probes it sends.
    pub fn db(&self) -> &ProbeDb {
        &self.db
    }

    pub fn options(&self) -> &DetectOptions {
        &self.opts
    }

    pub fn pool(&self) -> &BufPool {
        &self.pool
    }

    /// Detects the service on `ip:port`; waits for a free buffer first.
    pub async fn detect(&self, ip: IpAddr, port: u16) -> Detection {
        self.detect_named(ip, port, None).await
    }

    /// [`Detector::detect`] of a host the user named `name`: every TLS
    /// handshake (rustls, the own ClientHello, after STARTTLS) names it
    /// in SNI, and STARTTLS greets with it.
    pub async fn detect_named(&self, ip: IpAddr, port: u16, name: Option<&str>) -> Detection {
        let mut buf = self.pool.get().await;
        let deadline = Instant::now() + self.opts.port_timeout;
        let mut run = Run {
            det: self,
            addr: SocketAddr::new(ip, port),
            name,
            deadline,
            soft: None,
            tls_error: None,
            client_first: false,
            out: Detection::default(),
        };
        let finished = timeout_at(deadline, run.all(&mut buf)).await;
        let mut out = run.out;
        let tls = run.tls_error;
        if finished.is_err() || Instant::now() >= deadline {
            let stopped = format!("service detection stopped after {} ms", self.opts.port_timeout.as_millis());
            out.error = Some(DetectError::Timeout(match &tls {
                Some(t) => format!("{t}; {stopped}"),
                None => stopped,
            }));
        } else if let Some(t) = tls {
            if out.identity.is_none() {
                out.error = Some(DetectError::Io(t));
            }
        }
        out.tunnel |= out.tls.as_ref().is_some_and(|t| t.starttls.is_none());
        if out.identity.is_none() {
            if let Some(soft) = run.soft {
                out.identity = Some(soft);
                out.method = Some(ServiceMethod::Soft);
            }
        }
        out
    }
}

/// The state of one port's detection.
struct Run<'a> {
    det: &'a Detector,
    addr: SocketAddr,
    /// The name the user gave for the host, if any.
    name: Option<&'a str>,
    deadline: Instant,
    soft: Option<Identity>,
    /// Why a TLS handshake failed, reported if nothing better is found.
    tls_error: Option<String>,
    /// The server waits for the client to speak (TLS): no NULL probe.
    client_first: bool,
    out: Detection,
}

impl Run<'_> {
    async fn all(&mut self, buf: &mut [u8]) {
        let port = self.addr.port();
        // Excluded ports (printers that print what they are sent) get no probe.
        if self.det.db.excluded(port) {
            return;
        }
        if self.det.db.probes().iter().any(|p| p.tls_ports.contains(&port)) {
            match self.open(true).await {
                Ok(conn) => {
                    self.probes(true, Some(conn), buf).await;
                    return;
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    self.out.error = Some(DetectError::Io(e.to_string()));
                    return;
                }
                // A TLS server rustls refuses (SSLv3, TLS 1.0/1.1, RSA key
                // exchange, DHE): its chain from its first flight, then the
                // probes in the clear (what it answers to them is all that
                // can be seen without a handshake). TLS servers never speak
                // first, so no NULL probe.
                Err(e @ OpenError::Handshake(_)) => {
                    self.tls_error = Some(e.to_string());
                    self.client_first = self.legacy().await;
                }
                // Not TLS after all, or TLS that fails: probe in the clear,
                // and say why TLS failed if nothing is found.
                Err(e) => self.tls_error = Some(e.to_string()),
            }
        }
        // A port already known as TLS (its chain read from its first
        // flight) is not handed to rustls again.
        if !self.probes(false, None, buf).await || self.client_first {
            self.starttls().await;
            return;
        }
        match self.open(true).await {
            Ok(conn) => {
                self.probes(true, Some(conn), buf).await;
            }
            Err(e) => {
                let handshake = matches!(e, OpenError::Handshake(_));
                self.tls_error = Some(e.to_string());
                // It answered like TLS: its chain if rustls refused it.
                if handshake {
                    self.legacy().await;
                }
                if self.out.identity.is_none() && self.soft.is_none() {
                    self.soft = Some(Identity { service: "ssl".into(), ..Default::default() });
                }
            }
        }
    }

    /// A service that upgrades to TLS in the clear (mail, LDAP, databases,
    /// XMPP, news): its chain through STARTTLS on a fresh connection, by
    /// rustls or, if it refuses the server, the first-flight reader. A
    /// server that does not offer STARTTLS, or whose TLS fails, keeps the
    /// service found in the clear and no `tls`. A port nothing identified
    /// goes by the port table's name.
    async fn starttls(&mut self) {
        let found = self.out.identity.as_ref().or(self.soft.as_ref()).map(|id| id.service.as_str());
        let name = found.or_else(|| crate::targets::ports::service_name(self.addr.port(), "tcp"));
        let Some(proto) = name.and_then(Starttls::parse) else { return };
        if self.out.tls.is_some() {
            return;
        }
        let until = (Instant::now() + self.det.opts.connect_timeout).min(self.deadline);
        let addr = self.addr;
        let host = self.name.map_or_else(|| addr.ip().to_string(), str::to_string);
        let upgraded = || async {
            let mut tcp = conn::tcp_for_hello(addr, until).await?;
            proto.upgrade(&mut tcp, &host, until).await.map_err(|e| hello::HelloError::Malformed(e.to_string()))?;
            Ok::<_, hello::HelloError>(tcp)
        };
        let Ok(tcp) = upgraded().await else { return };
        let info = match conn::handshake(tcp, addr.ip(), self.name, &self.det.tls_no_alpn, until).await {
            Ok((_, info)) => Some(info),
            Err(OpenError::Handshake(_)) => hello::legacy_chain(upgraded, self.name, until).await.ok(),
            Err(_) => None,
        };
        if let Some(mut info) = info {
            info.starttls = Some(proto.name().to_string());
            self.out.tls = Some(info);
        }
    }

    /// Reads the chain of a server rustls refused with a ClientHello of
    /// our own; true when it did (the port is TLS, `out.tls` holds it).
    async fn legacy(&mut self) -> bool {
        if self.out.tls.is_some() {
            return true;
        }
        let until = (Instant::now() + self.det.opts.connect_timeout).min(self.deadline);
        let addr = self.addr;
        match hello::legacy_chain(|| conn::tcp_for_hello(addr, until), self.name, until).await {
            Ok(info) => {
                self.out.tls = Some(info);
                self.tls_error = None;
                true
            }
            Err(e) => {
                let rustls = self.tls_error.take().unwrap_or_default();
                self.tls_error = Some(format!("{rustls}; own ClientHello: {e}"));
                false
            }
        }
    }

    /// The probes in order, for plain or TLS. Returns true when a response
    /// looked like TLS and the caller should probe again inside TLS.
    async fn probes(&mut self, tunnel: bool, mut conn: Option<Conn>, buf: &mut [u8]) -> bool {
        let db = self.det.db.clone();
        let port = self.addr.port();
        let lists = |p: &Probe| if tunnel { p.tls_ports.contains(&port) } else { p.ports.contains(&port) };
        let tcp = db.probes().iter().filter(|p| p.transport == Transport::Tcp);
        let client_first = self.client_first;
        let mut order: Vec<&Probe> = tcp.clone().filter(|p| p.payload.is_empty() && !client_first).collect();
        let mut listed: Vec<&Probe> = tcp.clone().filter(|p| !p.payload.is_empty() && lists(p)).collect();
        listed.sort_by_key(|p| p.rarity);
        let mut rest: Vec<&Probe> =
            tcp.filter(|p| !p.payload.is_empty() && !lists(p) && p.rarity <= self.det.opts.intensity).collect();
        // A port known to be TLS that rustls could not talk to: ClientHello
        // probes can only say "ssl" again; the others may say what runs
        // inside (a web server answering plain HTTP with an error page).
        if client_first {
            listed.retain(|p| !looks_like_tls(&p.payload));
            rest.retain(|p| !looks_like_tls(&p.payload));
        }
        rest.sort_by_key(|p| p.rarity);
        let some_listed = !listed.is_empty();
        order.extend(listed);
        order.extend(rest);

        // After a probe that decided nothing (the NULL probe first of all),
        // the candidates that follow are sent side by side, up to PROBES_AT_ONCE
        // in flight at any time, each on its own connection with a buffer of
        // its own from the pool (as many as it has free): a silent port is
        // decided in about one probe's wait, not the sum of them. Their
        // replies are still judged one by one in probe order, so the first
        // hard match in that order wins and soft matches narrow, as when
        // sent in turn.
        let mut ahead: FuturesUnordered<_> = FuturesUnordered::new();
        // Probes sent ahead and not judged yet, in order; the replies of
        // those that are done; those a soft match ruled out before they
        // were done (their replies are dropped as they come).
        let mut ahead_at: VecDeque<usize> = VecDeque::new();
        let mut fetched: BTreeMap<usize, (Option<Reply>, Loan)> = BTreeMap::new();
        let mut unwanted: BTreeSet<usize> = BTreeSet::new();
        // Whether probes go side by side now, and the next one to send ahead.
        let (mut side_by_side, mut next_ahead) = (false, 0);
        // Sends probes from `$from` on ahead while fewer than PROBES_AT_ONCE
        // that still count are in flight, and none further than AHEAD_MAX
        // past the one being judged (`$cur`), so that what is in flight and
        // what waits for its turn holds at most that many buffers; skips
        // those a soft match rules out; `$first` carries the first sent,
        // and comes back if none was (no buffer free).
        macro_rules! top_up {
            ($cur:expr, $from:expr, $first:expr) => {{
                let soft = self.soft.as_ref().map(|s| s.service.clone());
                let mut first: Option<Conn> = $first;
                next_ahead = usize::max(next_ahead, $from);
                while ahead.len() - unwanted.len() < PROBES_AT_ONCE
                    && next_ahead <= $cur + AHEAD_MAX
                    && next_ahead < order.len()
                {
                    let p = order[next_ahead];
                    let says = |s: &str| p.matches.iter().chain(&p.soft_matches).any(|r| r.service() == s);
                    if soft.as_deref().is_none_or(says) {
                        let Some(loan) = self.det.pool.try_get() else { break };
                        let on = first.take();
                        ahead.push(fetch(
                            self.det,
                            self.addr,
                            self.name,
                            tunnel,
                            self.deadline,
                            next_ahead,
                            p,
                            soft.clone(),
                            on,
                            loan,
                        ));
                        ahead_at.push_back(next_ahead);
                    }
                    next_ahead += 1;
                }
                first
            }};
        }
        // Keeps a reply fetched ahead (unless unwanted) and sends the next.
        macro_rules! keep {
            ($cur:expr, $done:expr) => {{
                let (at, done) = $done;
                if !unwanted.remove(&at) {
                    fetched.insert(at, done);
                }
                let _none: Option<Conn> = top_up!($cur, next_ahead, None);
            }};
        }
        for (i, probe) in order.iter().copied().enumerate() {
            if Instant::now() >= self.deadline {
                return false;
            }
            if side_by_side {
                // A connection kept for the next probe in turn carries it.
                let kept = conn.take();
                conn = top_up!(i, i, kept);
            }
            // Replies fetched for probes a soft match has since ruled out.
            while let Some(at) = ahead_at.front().copied().filter(|&at| at < i) {
                ahead_at.pop_front();
                if fetched.remove(&at).is_none() {
                    unwanted.insert(at);
                }
            }
            if let Some(soft) = &self.soft {
                let says = |p: &Probe| p.matches.iter().chain(&p.soft_matches).any(|r| r.service() == soft.service);
                if !says(probe) {
                    continue;
                }
            }
            let null = probe.payload.is_empty();
            // Sent ahead: its reply, when it was sent and answered. One that
            // could not be connected or sent goes again in turn below (a
            // server that takes one connection at a time, or refuses).
            let fetched_reply = if ahead_at.front() == Some(&i) {
                ahead_at.pop_front();
                let next = loop {
                    if let Some(done) = fetched.remove(&i) {
                        break Some(done);
                    }
                    match ahead.next().await {
                        Some(done) => keep!(i, done),
                        None => break None,
                    }
                };
                match next {
                    Some((Some(reply), loan)) => Some((reply, loan)),
                    _ => None,
                }
            } else {
                None
            };
            let (outcome, len, open, c) = if let Some((reply, loan)) = fetched_reply {
                self.out.probes_sent += 1;
                let (outcome, len, open) = self.judge(probe, reply, tunnel, &loan[..]);
                (outcome, len, open, None)
            } else {
                let mut c = match conn.take() {
                    Some(c) => c,
                    None => match self.open(tunnel).await {
                        Ok(c) => c,
                        Err(_) if Instant::now() >= self.deadline => return false,
                        Err(e) => {
                            self.out.error = Some(DetectError::Io(e.to_string()));
                            if matches!(e.kind(), std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::TimedOut)
                            {
                                return false;
                            }
                            continue;
                        }
                    },
                };
                let wait = if null && some_listed { self.det.opts.banner_grace.min(probe.wait) } else { probe.wait };
                if !null && c.send(&probe.payload).await.is_err() {
                    continue;
                }
                self.out.probes_sent += 1;
                let (outcome, len, open) = if null && !some_listed && ahead_at.is_empty() {
                    // No probe lists this port: the NULL probe listens for a
                    // late banner as long as its wait, but once the banner
                    // grace has passed in silence the next probes start
                    // side by side. Their replies are still judged after it.
                    let soft = self.soft.as_ref().map(|s| s.service.clone());
                    // A quarter of what is left stays for judging the rest
                    // (a short --service-timeout, -T5).
                    let wait = if order.len() > i + 1 {
                        wait.min(self.deadline.saturating_duration_since(Instant::now()) * 3 / 4)
                    } else {
                        wait
                    };
                    let reply = {
                        let read = read_reply(self.det, &mut c, probe, wait, self.deadline, soft.as_deref(), buf);
                        tokio::pin!(read);
                        tokio::select! {
                            reply = &mut read => reply,
                            () = tokio::time::sleep(self.det.opts.banner_grace) => {
                                side_by_side = true;
                                let _none: Option<Conn> = top_up!(i, i + 1, None);
                                // Drive them meanwhile, keeping what they fetch.
                                loop {
                                    tokio::select! {
                                        reply = &mut read => break reply,
                                        Some(done) = ahead.next() => keep!(i, done),
                                    }
                                }
                            }
                        }
                    };
                    self.judge(probe, reply, tunnel, buf)
                } else {
                    self.exchange(&mut c, probe, wait, tunnel, buf).await
                };
                (outcome, len, open, Some(c))
            };
            match outcome {
                Outcome::Hard(mut id) => {
                    // nmap's `ssl/` services: what a TLS port answers a
                    // probe sent in the clear (an HTTPS server's "plain HTTP
                    // request" page). The identity holds, and the port is
                    // TLS: its chain and what runs inside come next.
                    let through_tls = match id.service.strip_prefix("ssl/") {
                        Some(inner) => {
                            id.service = inner.to_string();
                            !tunnel
                        }
                        None => false,
                    };
                    self.out.identity = Some(id);
                    self.out.method = Some(ServiceMethod::Probed);
                    self.out.probe = Some(probe.name.clone());
                    // `ssl` once TLS is read (a handshake, or the first flight).
                    self.out.tunnel = tunnel;
                    return through_tls;
                }
                Outcome::LooksLikeTls => return true,
                Outcome::Soft(id) => {
                    if self.soft.is_none() {
                        self.out.probe = Some(probe.name.clone());
                        self.out.tunnel = tunnel;
                        self.soft = Some(id);
                    }
                }
                Outcome::Nothing => {}
            }
            // Undecided (silence, or a reply no rule settles): the rest go
            // side by side from here on.
            if !side_by_side {
                // A silent NULL connection carries the first of them.
                let first = if null && len == 0 && open { c } else { None };
                // No buffer free: the next probe goes in turn, on the same connection.
                side_by_side = true;
                conn = top_up!(i, i + 1, first);
                continue;
            }
            // A silent NULL probe leaves its connection to the next probe,
            // if that one goes in turn (else it would only sit open).
            if null && len == 0 && open && next_ahead <= i + 1 {
                conn = c;
            }
        }
        false
    }

    /// Reads one response into `buf` and matches it. Returns the outcome,
    /// the bytes read and whether the connection is still usable.
    async fn exchange(
        &mut self,
        c: &mut Conn,
        probe: &Probe,
        wait: Duration,
        tunnel: bool,
        buf: &mut [u8],
    ) -> (Outcome, usize, bool) {
        let soft = self.soft.as_ref().map(|s| s.service.clone());
        let reply = read_reply(self.det, c, probe, wait, self.deadline, soft.as_deref(), buf).await;
        self.judge(probe, reply, tunnel, buf)
    }

    /// What a reply says, in probe order's terms (with the state it updates:
    /// bytes read, the banner).
    fn judge(&mut self, probe: &Probe, reply: Reply, tunnel: bool, buf: &[u8]) -> (Outcome, usize, bool) {
        let (len, open, early) = match reply {
            Reply::Wrapped => {
                let id = Identity { service: "tcpwrapped".into(), ..Identity::default() };
                return (Outcome::Hard(id), 0, false);
            }
            Reply::Data { len, open, hard } => (len, open, hard),
        };
        self.out.bytes_read += len as u64;
        let data = &buf[..len];
        if probe.payload.is_empty() {
            self.keep_banner(data);
        }
        // A hard match found while reading (before a soft match that came
        // from an earlier probe in order) counts only if it agrees with it.
        if let Some(id) = early.filter(|id| self.soft.as_ref().is_none_or(|s| s.service == id.service)) {
            return (Outcome::Hard(*id), len, true);
        }
        if len == 0 {
            return (Outcome::Nothing, 0, open);
        }
        // A reply that is the probe itself: an echo service (RFC 862), not
        // whatever the probe's rules would take its own bytes for.
        if !probe.payload.is_empty() && data == &probe.payload[..] {
            return (Outcome::Hard(Identity { service: "echo".into(), ..Identity::default() }), len, open);
        }
        if let Some(id) = self.hard(probe, data) {
            return (Outcome::Hard(id), len, open);
        }
        if !tunnel && looks_like_tls(data) {
            return (Outcome::LooksLikeTls, len, open);
        }
        match self.soft_match(probe, data) {
            Some(id) => (Outcome::Soft(id), len, open),
            None => (Outcome::Nothing, len, open),
        }
    }

    /// The probe's own rules, then its fallbacks'.
    fn hard(&self, probe: &Probe, data: &[u8]) -> Option<Identity> {
        hard_match(self.det, probe, data, self.soft.as_ref().map(|s| s.service.as_str()))
    }

    fn soft_match(&self, probe: &Probe, data: &[u8]) -> Option<Identity> {
        let own = probe.soft_matches.iter();
        own.chain(fallbacks(self.det, probe).flat_map(|f| f.soft_matches.iter())).find_map(|r| r.apply(data))
    }

    fn keep_banner(&mut self, data: &[u8]) {
        if self.out.banner.is_empty() && !data.is_empty() {
            self.out.banner = data[..data.len().min(BANNER_MAX)].to_vec();
        }
    }

    /// Connects, and for TLS does the handshake, within the connect timeout.
    async fn open(&mut self, tls: bool) -> std::result::Result<Conn, OpenError> {
        let (conn, info) = connect(self.det, self.addr, self.name, tls, self.deadline).await?;
        if self.out.tls.is_none() {
            self.out.tls = info;
        }
        Ok(conn)
    }
}

/// Connects to `addr` (TLS when `tls`) within the connect timeout. ALPN
/// `http/1.1` is offered only where an HTTP probe lists the port as TLS.
async fn connect(
    det: &Detector,
    addr: SocketAddr,
    name: Option<&str>,
    tls: bool,
    deadline: Instant,
) -> std::result::Result<(Conn, Option<TlsInfo>), OpenError> {
    let until = (Instant::now() + det.opts.connect_timeout).min(deadline);
    let port = addr.port();
    let http = |p: &Probe| p.matches.iter().chain(&p.soft_matches).any(|r| r.service() == "http");
    let https = det.db.probes().iter().any(|p| p.tls_ports.contains(&port) && http(p));
    let connector = if https { &det.tls } else { &det.tls_no_alpn };
    conn::open(addr, tls.then_some(connector), name, until).await
}

/// The probes whose rules also apply to `probe`'s responses: its
/// `fallback` list in order, then the NULL probe (banners), each once.
fn fallbacks<'p>(det: &'p Detector, probe: &'p Probe) -> impl Iterator<Item = &'p Probe> {
    let named = probe.fallback.iter().filter_map(|n| det.db.get(n));
    let null = det.null.map(|i| &det.db.probes()[i]).filter(|n| !probe.fallback.contains(&n.name));
    named.chain(null).filter(move |f| f.name != probe.name)
}

/// The first of the probe's own rules, then its fallbacks', that matches;
/// after a soft match (`soft`) only rules for that service can decide.
fn hard_match(det: &Detector, probe: &Probe, data: &[u8], soft: Option<&str>) -> Option<Identity> {
    let rules = probe.matches.iter().chain(fallbacks(det, probe).flat_map(|f| f.matches.iter()));
    rules.filter(|r| soft.is_none_or(|s| r.service() == s)).find_map(|r| r.apply(data))
}

/// Most probes sent side by side on one silent port.
const PROBES_AT_ONCE: usize = 6;

/// Furthest ahead of the probe being judged that one is sent: bounds the
/// pool buffers one port holds (in flight or waiting for its turn).
const AHEAD_MAX: usize = 16;

/// Sends one probe (the `at`th in order) on `on` (or a connection of its
/// own) and reads its reply into `loan`; None when it could not be
/// connected or sent.
#[allow(clippy::too_many_arguments)]
async fn fetch(
    det: &Detector,
    addr: SocketAddr,
    name: Option<&str>,
    tls: bool,
    deadline: Instant,
    at: usize,
    probe: &Probe,
    soft: Option<String>,
    on: Option<Conn>,
    mut loan: Loan,
) -> (usize, (Option<Reply>, Loan)) {
    let reply = async {
        let mut c = match on {
            Some(c) => c,
            None => connect(det, addr, name, tls, deadline).await.ok()?.0,
        };
        c.send(&probe.payload).await.ok()?;
        Some(read_reply(det, &mut c, probe, probe.wait, deadline, soft.as_deref(), &mut loan).await)
    }
    .await;
    (at, (reply, loan))
}

/// How a probe's reply ended.
enum Reply {
    /// Closed at once with nothing said, where the probe says `tcpwrapped_ms`.
    Wrapped,
    /// `len` bytes read into the buffer; `open` if the connection is still
    /// usable; `hard` if a rule matched a complete line (read no further).
    Data { len: usize, open: bool, hard: Option<Box<Identity>> },
}

/// Reads one reply into `buf`, until the probe's wait, an idle gap after
/// data, the port's deadline or a full buffer; a rule matching a complete
/// line ends it at once (a partial one waits a moment for the rest).
async fn read_reply(
    det: &Detector,
    c: &mut Conn,
    probe: &Probe,
    wait: Duration,
    deadline: Instant,
    soft: Option<&str>,
    buf: &mut [u8],
) -> Reply {
    let start = Instant::now();
    let limit = (start + wait).min(deadline);
    let mut until = limit;
    let (mut len, mut open) = (0, true);
    while len < buf.len() {
        match timeout_at(until, c.read(&mut buf[len..])).await {
            Err(_) => break,
            // Closed at once with nothing said: a wrapper (tcpd) refused us.
            Ok(Ok(0)) if len == 0 && probe.tcpwrapped.is_some_and(|w| start.elapsed() <= w) => return Reply::Wrapped,
            Ok(Ok(0)) | Ok(Err(_)) => {
                open = false;
                break;
            }
            Ok(Ok(n)) => {
                len += n;
                let mut quiet = det.opts.idle;
                if let Some(id) = hard_match(det, probe, &buf[..len], soft) {
                    // A complete line cannot change with more data; otherwise
                    // a more specific rule may still match once the rest of
                    // the field has come, so wait a moment first.
                    if buf[len - 1] == b'\n' {
                        return Reply::Data { len, open: true, hard: Some(Box::new(id)) };
                    }
                    quiet = quiet.min(SETTLE);
                } else if soft.is_none() && probe.soft_matches.iter().any(|r| r.apply(&buf[..len]).is_some()) {
                    // A soft match says what it is; the probes that follow
                    // say the rest: no long wait for more of this reply.
                    quiet = quiet.min(SETTLE);
                }
                until = (Instant::now() + quiet).min(limit);
            }
        }
    }
    Reply::Data { len, open, hard: None }
}

/// A TLS record header: handshake (22) or alert (21), version 3.x.
fn looks_like_tls(data: &[u8]) -> bool {
    data.len() >= 3 && matches!(data[0], 0x15 | 0x16) && data[1] == 3 && data[2] <= 4
}

#[cfg(test)]
#[path = "detect_tests.rs"]
mod tests;
