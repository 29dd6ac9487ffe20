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

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use tokio::sync::Notify;
use tokio::time::{timeout_at, Instant};
use tokio_rustls::TlsConnector;

pub use super::plan::MAX_REPLIES;
use super::plan::{self, End, Plan, Reply, Step, Unsent};
use super::pool::{BufPool, Loan};
use super::probes::{Probe, ProbeDb, Transport};
use super::rules::Identity;
use crate::error::{Error, ErrorKind, Result};
use crate::findings::{ServiceMethod, TlsInfo};
use crate::wire::conn::{self, Conn, OpenError};
use crate::wire::hello;
use crate::wire::starttls::Starttls;

/// How far past the port's deadline its detection is cut short if a
/// phase has not ended by itself.
const DEADLINE_SLACK: Duration = Duration::from_millis(250);

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
    /// Give each port no rule named nmap's `fingerprint-strings` script
    /// result (nmap does when scripts run: `--script`, `-sC`; not with the
    /// version scripts `-sV` runs alone).
    pub fingerprint_strings: bool,
    /// nmap's folders, where RPC grinding finds nmap-rpc's program names
    /// (default: [`crate::places::Places`]'s).
    pub nmap_dirs: Vec<std::path::PathBuf>,
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
            fingerprint_strings: false,
            nmap_dirs: crate::places::Places::default().nmap,
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
    /// What the service sent before it was sent anything (at most the
    /// scheduler's `BANNER_MAX` bytes).
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

impl Detector {
    pub fn new(db: ProbeDb, opts: DetectOptions) -> Result<Detector> {
        let tls_config = |alpn: &[Vec<u8>]| {
            crate::wire::dangerously::client_config(&[12, 13], alpn)
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
        let mut own = Some(self.pool.get().await);
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
        // The plan ends a phase at the deadline itself, keeping what it
        // judged; this bound is a safety net past it.
        let finished = timeout_at(deadline + DEADLINE_SLACK, run.all(&mut own)).await;
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
        // Replies are kept for a port no rule named (its fingerprint).
        if out.method == Some(ServiceMethod::Probed) {
            out.replies.clear();
        }
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
    async fn all(&mut self, own: &mut Option<Loan>) {
        let port = self.addr.port();
        // Excluded ports (printers that print what they are sent) get no probe.
        if self.det.db.excluded(port) {
            return;
        }
        if self.det.db.probes().iter().any(|p| p.tls_ports.contains(&port)) {
            match self.open(true).await {
                Ok(conn) => {
                    self.probes(true, Some(conn), own).await;
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
        if !self.probes(false, None, own).await || self.client_first {
            self.starttls().await;
            return;
        }
        match self.open(true).await {
            Ok(conn) => {
                self.probes(true, Some(conn), own).await;
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
        let name = found.or_else(|| crate::ports::service_name(self.addr.port(), "tcp"));
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

    /// The probes of one phase (in the clear, or inside TLS), as the plan
    /// (plan.rs) schedules and judges them: this loop only sends, reads
    /// and tells it the time. Returns true when a reply looked like TLS
    /// and the caller should probe again inside TLS. `own` is the port's
    /// own buffer (for the probe in turn); it is there again after.
    async fn probes(&mut self, tunnel: bool, mut kept: Option<Conn>, own: &mut Option<Loan>) -> bool {
        let det = self.det;
        let opts = &det.opts;
        let port = self.addr.port();
        let soft = self.soft.clone();
        let (client_first, carried) = (self.client_first, kept.is_some());
        let mut plan = Plan::new(
            &det.db,
            port,
            tunnel,
            client_first,
            opts.intensity,
            opts.banner_grace,
            self.deadline,
            soft,
            carried,
        );
        let cut = Arc::new(Notify::new());
        let mut flying = FuturesUnordered::new();
        // Pool buffers won while the plan was starved, for probes ahead.
        let mut won: Vec<Loan> = Vec::new();
        loop {
            for step in plan.poll(Instant::now()) {
                match step {
                    Step::Send { at, wait, in_turn, reuse } => {
                        let loan = self.loan_for(in_turn, own, &mut plan, &mut won).await;
                        let Some(loan) = loan else {
                            plan.on_unsent(at, Unsent::NoBuffer);
                            continue;
                        };
                        let on = if reuse { kept.take() } else { None };
                        let fetch = self.fetch(&plan, at, tunnel, &cut);
                        flying.push(fetch.run(at, plan.probe(at), wait, on, loan));
                    }
                    Step::Cut { .. } => cut.notify_one(),
                }
            }
            if !plan.carrying() {
                kept = None;
            }
            if !plan.starved() {
                won.clear();
            }
            if plan.end().is_some() {
                break;
            }
            // Replies first: one read to the deadline is judged before it.
            let starved = plan.starved();
            tokio::select! {
                biased;
                Some((at, got, loan)) = flying.next() => match got {
                    Ok((reply, conn)) => {
                        if conn.is_some() {
                            kept = conn;
                        }
                        plan.on_reply(at, reply, loan);
                    }
                    Err(why) => {
                        own.get_or_insert(loan);
                        plan.on_unsent(at, why);
                    }
                },
                loan = det.pool.get(), if starved => {
                    won.push(loan);
                    plan.unstarve();
                }
                () = tokio::time::sleep_until(plan.next_wakeup()) => {}
            }
            // At the deadline, every read that ended with it is judged, not
            // only the first to be polled.
            if Instant::now() >= self.deadline {
                while let Some(Some((at, got, loan))) = flying.next().now_or_never() {
                    match got {
                        Ok((reply, _)) => plan.on_reply(at, reply, loan),
                        Err(why) => plan.on_unsent(at, why),
                    }
                }
            }
        }
        if own.is_none() {
            *own = plan.take_spare();
        }
        let (end, phase) = plan.finish();
        self.close_phase(tunnel, end, phase)
    }

    /// A buffer for the probe about to go. One in turn takes the port's
    /// own, a spare, one won from the pool or a free one (waiting for the
    /// pool, but never past the deadline); one ahead takes a won or free
    /// one, or none.
    async fn loan_for(
        &self,
        in_turn: bool,
        own: &mut Option<Loan>,
        plan: &mut Plan<'_, Loan>,
        won: &mut Vec<Loan>,
    ) -> Option<Loan> {
        let det = self.det;
        if in_turn {
            let free = own.take().or_else(|| plan.take_spare()).or_else(|| won.pop());
            match free.or_else(|| det.pool.try_get()) {
                Some(loan) => Some(loan),
                // Not reached (a probe in turn has the
                // buffer of the one judged before it), but
                // never stuck on the pool past the deadline.
                None => timeout_at(self.deadline, det.pool.get()).await.ok(),
            }
        } else {
            won.pop().or_else(|| det.pool.try_get())
        }
    }

    /// What a phase found goes into the detection (replies in the clear of
    /// a port that turned out to be TLS are dropped); true when the port
    /// is to be probed again inside TLS.
    fn close_phase(&mut self, tunnel: bool, end: End, phase: plan::Phase) -> bool {
        self.out.probes_sent += phase.probes_sent;
        self.out.bytes_read += phase.bytes_read;
        if self.out.banner.is_empty() {
            self.out.banner = phase.banner;
        }
        // Replies in the clear of a port that turned out to be TLS are
        // handshake bytes, not the service's: those inside TLS replace them.
        if tunnel {
            self.out.replies.clear();
        }
        let room = MAX_REPLIES.saturating_sub(self.out.replies.len());
        self.out.replies.extend(phase.replies.into_iter().take(room));
        if let (Some(probe), None) = (phase.soft_probe, &self.soft) {
            self.out.probe = Some(probe);
            self.out.tunnel = tunnel;
        }
        self.soft = phase.soft;
        match end {
            End::Hard { mut id, probe } => {
                // nmap's `ssl/` services: what a TLS port answers a probe
                // sent in the clear (an HTTPS server's "plain HTTP request"
                // page). The identity holds, and the port is TLS: its
                // chain and what runs inside come next.
                let through_tls = match id.service.strip_prefix("ssl/") {
                    Some(inner) => {
                        id.service = inner.to_string();
                        !tunnel
                    }
                    None => false,
                };
                self.out.identity = Some(id);
                self.out.method = Some(ServiceMethod::Probed);
                self.out.probe = Some(probe);
                // `ssl` once TLS is read (a handshake, or the first flight).
                self.out.tunnel = tunnel;
                through_tls
            }
            End::Tls => true,
            End::Failed(why) => {
                self.out.error = Some(DetectError::Io(why));
                false
            }
            End::Exhausted | End::Deadline => {
                if let Some(why) = phase.error {
                    self.out.error.get_or_insert(DetectError::Io(why));
                }
                false
            }
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

impl<'a> Run<'a> {
    /// The read of probe `at` of `plan` (inside TLS when `tls`); the NULL
    /// probe's ends at `cut`.
    fn fetch(&self, plan: &Plan<'_, Loan>, at: usize, tls: bool, cut: &Arc<Notify>) -> Fetch<'a> {
        Fetch {
            det: self.det,
            addr: self.addr,
            name: self.name,
            tls,
            deadline: self.deadline,
            soft: plan.soft().map(str::to_string),
            cut: plan.is_null(at).then(|| cut.clone()),
        }
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

/// One probe's exchange: connect (or carry on the NULL probe's
/// connection), send, read the reply into a pool buffer.
struct Fetch<'a> {
    det: &'a Detector,
    addr: SocketAddr,
    name: Option<&'a str>,
    tls: bool,
    deadline: Instant,
    /// The soft match when it was sent: only its rules end a read early.
    soft: Option<String>,
    /// The NULL probe's: ends a read that has had nothing yet.
    cut: Option<Arc<Notify>>,
}

/// A probe's reply (and, for the NULL probe left open and silent, its
/// connection), or why it was not sent; with the buffer either way.
type Fetched = (usize, std::result::Result<(Reply, Option<Conn>), Unsent>, Loan);

impl Fetch<'_> {
    async fn run(self, at: usize, probe: &Probe, wait: Duration, on: Option<Conn>, mut loan: Loan) -> Fetched {
        let mut c = match on {
            Some(c) => c,
            None => match connect(self.det, self.addr, self.name, self.tls, self.deadline).await {
                Ok((c, _)) => c,
                Err(e) => {
                    let fatal =
                        matches!(e.kind(), std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::TimedOut);
                    return (at, Err(Unsent::Failed { fatal, why: e.to_string() }), loan);
                }
            },
        };
        // A send the server refused (it closed or reset first) is still an
        // answer: what it said before is read, and its close is the reply.
        if !probe.payload.is_empty() {
            let _ = c.send(&probe.payload).await;
        }
        let reply = read_reply(&self, &mut c, probe, wait, &mut loan).await;
        let keep = matches!(reply, Reply::Data { len: 0, open: true, .. }) && probe.payload.is_empty();
        (at, Ok((reply, keep.then_some(c))), loan)
    }
}

/// Reads one reply into `buf`, until the probe's wait, an idle gap after
/// data, the port's deadline, a full buffer, or (the NULL probe) a cut
/// before anything came; a rule matching a complete line ends it at once
/// (a partial one waits a moment for the rest).
async fn read_reply(f: &Fetch<'_>, c: &mut Conn, probe: &Probe, wait: Duration, buf: &mut [u8]) -> Reply {
    let det = f.det;
    let start = Instant::now();
    let limit = (start + wait).min(f.deadline);
    let mut until = limit;
    let (mut len, mut open) = (0, true);
    while len < buf.len() {
        let read = timeout_at(until, c.read(&mut buf[len..]));
        let got = match &f.cut {
            Some(cut) if len == 0 => tokio::select! {
                got = read => Some(got),
                () = cut.notified() => None,
            },
            _ => Some(read.await),
        };
        match got {
            None | Some(Err(_)) => break,
            // Closed at once with nothing said: a wrapper (tcpd) refused us.
            Some(Ok(Ok(0))) if len == 0 && probe.tcpwrapped.is_some_and(|w| start.elapsed() <= w) => {
                return Reply::Wrapped
            }
            Some(Ok(Ok(0)) | Ok(Err(_))) => {
                open = false;
                break;
            }
            Some(Ok(Ok(n))) => {
                len += n;
                let mut quiet = det.opts.idle;
                if let Some(id) = plan::hard_match(&det.db, det.null, probe, &buf[..len], f.soft.as_deref()) {
                    // A complete line cannot change with more data; otherwise
                    // a more specific rule may still match once the rest of
                    // the field has come, so wait a moment first.
                    if buf[len - 1] == b'\n' {
                        return Reply::Data { len, open: true, hard: Some(Box::new(id)) };
                    }
                    quiet = quiet.min(SETTLE);
                } else if f.soft.is_none() && probe.soft_matches.iter().any(|r| r.apply(&buf[..len]).is_some()) {
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

#[cfg(test)]
#[path = "detect_tests.rs"]
mod tests;
