//! Reverse DNS: the name (PTR record) of each host a scan reports, as
//! nmap finds it.
//!
//! In: the scan's events through a [`Tap`] (a host up, a port, a host's
//! ports not shown: every host the report shows), or every target address
//! (`-R`, and `-sL` as nmap's list scan). Out: one `rdns` event for each
//! address that has a name, joined to the host's report when it arrives.
//! What always holds: a lookup never holds the scan up (the tap notes an
//! address in a set and a channel that never waits); at most
//! [`MAX_ADDRESSES`] addresses are looked up a scan, at most [`PARALLEL`]
//! at once, each for at most [`LOOKUP_TIME`]; once the rest of the scan is
//! done, the lookups still pending get at most [`GRACE`], and a stop ends
//! them at once. The hosts file answers first, as the system resolver's
//! `files` source does, and a loopback address is never asked of a DNS
//! server (no server outside this machine knows 127.0.0.0/8 or ::1).

pub mod tap;

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::error::{Error, ErrorKind, Result};
use crate::findings::{Event, RdnsEvent};
use crate::pipeline::Ctx;
use tap::{Learnt, Lookup, Tap, LOOKUP_TIME, MAX_ADDRESSES};

/// Lookups at once.
pub const PARALLEL: usize = 32;
/// Longest the scan's end waits for the lookups still pending.
pub const GRACE: Duration = Duration::from_secs(3);
/// Largest hosts file read.
const MAX_HOSTS_FILE: u64 = 1 << 20;

/// Which hosts get a reverse lookup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum When {
    /// None (`-n`).
    Never,
    /// Each host the scan reports (nmap's default).
    #[default]
    Up,
    /// Every target, up or not (`-R`; `-sL` too).
    Always,
}

/// Who answers the lookups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Via {
    /// The servers of /etc/resolv.conf, asked by moonscan's own resolver,
    /// many at once (nmap's default).
    #[default]
    Resolver,
    /// These servers (`--dns-servers`).
    Servers(Vec<SocketAddr>),
    /// The system's resolver (`getnameinfo`: nsswitch, /etc/hosts,
    /// resolv.conf), one lookup a thread (`--system-dns`).
    System,
}

/// Reverse DNS settings of a scan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    pub when: When,
    pub via: Via,
}

/// Parses `--dns-servers`: addresses (a port after `:`, or `[v6]:port`),
/// separated by commas.
pub fn parse_servers(list: &str) -> Result<Vec<SocketAddr>> {
    let bad = |s: &str| {
        Error::new(
            ErrorKind::Config,
            format!("`rdns::Via::Servers`: '{s}' is not an IP address (a port may follow: 198.18.0.2:53)"),
        )
    };
    let mut out = Vec::new();
    for s in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let addr = match s.parse::<IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, 53),
            Err(_) => s.parse::<SocketAddr>().map_err(|_| bad(s))?,
        };
        out.push(addr);
    }
    if out.is_empty() {
        return Err(Error::new(ErrorKind::Config, "`rdns::Via::Servers` names no server"));
    }
    Ok(out)
}

/// What one lookup learnt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Named(String),
    /// The address has no name.
    NoName,
    /// No server answered in time.
    NoAnswer,
}

/// Every target address a scan asks names of with `When::Always` (its
/// shard's, in the scan's order).
pub type Targets = Box<dyn Iterator<Item = IpAddr> + Send>;

/// Starts reverse DNS for a scan (none when `settings.when` is `Never`):
/// a task that looks up what the returned tap is told of, and, for
/// `Always`, the first [`MAX_ADDRESSES`] of `targets` (`-R`, `-sL`).
/// `ctx` is where the names go.
pub fn start(settings: &Settings, targets: impl FnOnce() -> Targets, ctx: &Ctx) -> Result<Option<Arc<Tap>>> {
    if settings.when == When::Never {
        return Ok(None);
    }
    let (namer, note) = Namer::new(&settings.via)?;
    let namer = Arc::new(namer);
    let name: NameFn = Arc::new(move |ip| {
        let namer = namer.clone();
        Box::pin(async move { namer.name(ip).await })
    });
    let (tx, rx) = mpsc::unbounded_channel();
    let learnt = Arc::new(Learnt::default());
    let every: Option<Targets> =
        (settings.when == When::Always).then(|| Box::new(targets().take(MAX_ADDRESSES)) as Targets);
    let ctx = ctx.clone();
    let task = tokio::spawn({
        let learnt = learnt.clone();
        async move {
            if let Some(note) = note {
                warn(&ctx, crate::error::ErrorKind::Io, note).await;
            }
            lookups(name, rx, every, learnt, ctx).await;
        }
    });
    Ok(Some(Arc::new(Tap {
        learnt,
        seen: Mutex::default(),
        to_lookups: Mutex::new(Some(tx)),
        lookups: Mutex::new(Some(task)),
        full: AtomicBool::new(false),
    })))
}

/// What names one address.
type NameFn = Arc<dyn Fn(IpAddr) -> std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send>> + Send + Sync>;

/// The lookups' loop: at most [`PARALLEL`] at once, names sent as events
/// and noted in `learnt` (which says when they are over).
async fn lookups(
    name: NameFn,
    rx: mpsc::UnboundedReceiver<IpAddr>,
    every: Option<Targets>,
    learnt: Arc<Learnt>,
    ctx: Ctx,
) {
    lookups_until_done(name, rx, every, &learnt, ctx).await;
    learnt.over.store(true, Ordering::Relaxed);
    learnt.changed.notify_waiters();
}

/// [`lookups`]' loop itself. Once the tap closes, the lookups left get
/// [`GRACE`]; with every target to name (`every`, `-R`, `-sL`), the grace
/// starts again at each answer (a server that answers is asked on; one
/// that has stopped answering ends it).
async fn lookups_until_done(
    name: NameFn,
    mut rx: mpsc::UnboundedReceiver<IpAddr>,
    mut every: Option<Targets>,
    learnt: &Learnt,
    ctx: Ctx,
) {
    let renew = every.is_some();
    let mut queue = VecDeque::new();
    let mut running = tokio::task::JoinSet::new();
    let mut done_with = HashSet::new();
    let (mut closed, mut deadline) = (false, None::<tokio::time::Instant>);
    let (mut asked, mut unanswered) = (0u64, 0u64);
    let mut stop = ctx.stop.clone();
    loop {
        while running.len() < PARALLEL {
            let next = match queue.pop_front() {
                Some(ip) => Some(ip),
                None => match every.as_mut().and_then(Iterator::next) {
                    Some(ip) => Some(ip),
                    None => {
                        every = None;
                        None
                    }
                },
            };
            let Some(ip) = next else { break };
            if !done_with.insert(ip) {
                continue;
            }
            asked += 1;
            learnt.note(ip, Lookup::Running(tokio::time::Instant::now()));
            let lookup = name(ip);
            running.spawn(async move { (ip, lookup.await) });
        }
        if closed && running.is_empty() && queue.is_empty() && every.is_none() {
            break;
        }
        let until = deadline.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            got = rx.recv(), if !closed => match got {
                Some(ip) => queue.push_back(ip),
                None => {
                    closed = true;
                    deadline = Some(tokio::time::Instant::now() + GRACE);
                }
            },
            Some(done) = running.join_next(), if !running.is_empty() => {
                let answered = matches!(done, Ok((_, Outcome::Named(_) | Outcome::NoName)));
                if let (true, Some(d)) = (renew && answered, deadline.as_mut()) {
                    *d = tokio::time::Instant::now() + GRACE;
                }
                match done {
                    Ok((ip, Outcome::Named(name))) => {
                        learnt.note(ip, Lookup::Done(Some(name.clone())));
                        ctx.emit(Event::Rdns(RdnsEvent { scan_id: ctx.scan_id.clone(), ip, name, t: ctx.t() })).await;
                    }
                    Ok((ip, outcome)) => {
                        unanswered += u64::from(outcome == Outcome::NoAnswer);
                        learnt.note(ip, Lookup::Done(None));
                    }
                    Err(_) => {}
                }
            }
            () = tokio::time::sleep_until(until), if deadline.is_some() => {
                unanswered += running.len() as u64;
                let left = queue.len() + every.as_mut().map_or(0, |e| e.count());
                if left > 0 {
                    let message = format!(
                        "reverse DNS: {left} hosts were not looked up when the scan ended (`rdns::When::Never` skips reverse DNS)"
                    );
                    warn(&ctx, crate::error::ErrorKind::Timeout, message).await;
                }
                break;
            }
            () = stop.wait() => return,
        }
    }
    if unanswered > 0 {
        let message = format!(
            "reverse DNS: {unanswered} of {asked} lookups got no answer in time (see `rdns::Via::Servers`, `rdns::Via::System`; `rdns::When::Never` skips reverse DNS)"
        );
        warn(&ctx, crate::error::ErrorKind::Timeout, message).await;
    }
}

/// An `error` event that does not count among the scan's errors: a DNS
/// server that does not answer costs names, not the scan (nmap's warns).
async fn warn(ctx: &Ctx, kind: crate::error::ErrorKind, message: String) {
    let _ = ctx.events.send(ctx.error(None, None, None, kind, message)).await;
}

/// Names an address: from the hosts file, else from DNS.
struct Namer {
    hosts: HashMap<IpAddr, String>,
    via: Backend,
    /// System lookups under way, each holding a permit until its thread
    /// returns (a timed-out getnameinfo goes on in its thread: at most
    /// [`PARALLEL`] threads are ever so held).
    threads: Arc<tokio::sync::Semaphore>,
}

enum Backend {
    Dns(Box<hickory_resolver::TokioResolver>),
    System,
    /// resolv.conf names no server: the hosts file alone (nmap's "Reverse
    /// DNS is disabled", but for the hosts file).
    HostsOnly,
}

impl Namer {
    /// The namer, and what to tell the user when resolv.conf gives no
    /// server to ask (the scan goes on, named by the hosts file alone).
    fn new(via: &Via) -> Result<(Namer, Option<String>)> {
        let hosts = std::fs::File::open("/etc/hosts").map(|f| hosts_file(f, MAX_HOSTS_FILE)).unwrap_or_default();
        let (via, note) = match via {
            Via::System => (Backend::System, None),
            Via::Resolver => match resolver(None) {
                Ok(r) => (Backend::Dns(Box::new(r)), None),
                Err(e) => (Backend::HostsOnly, Some(e.to_string())),
            },
            Via::Servers(s) => (Backend::Dns(Box::new(resolver(Some(s))?)), None),
        };
        Ok((Namer { hosts, via, threads: Arc::new(tokio::sync::Semaphore::new(PARALLEL)) }, note))
    }

    async fn name(&self, ip: IpAddr) -> Outcome {
        if let Some(name) = self.hosts.get(&ip) {
            return Outcome::Named(name.clone());
        }
        match &self.via {
            Backend::System => {
                let threads = self.threads.clone();
                let asked = async move {
                    let permit = threads.acquire_owned().await.ok()?;
                    tokio::task::spawn_blocking(move || {
                        let outcome = system_name(ip);
                        drop(permit);
                        outcome
                    })
                    .await
                    .ok()
                };
                match tokio::time::timeout(LOOKUP_TIME, asked).await {
                    Ok(Some(outcome)) => outcome,
                    _ => Outcome::NoAnswer,
                }
            }
            // No server outside this machine names a loopback address.
            Backend::HostsOnly => Outcome::NoName,
            Backend::Dns(_) if ip.is_loopback() => Outcome::NoName,
            Backend::Dns(r) => match tokio::time::timeout(LOOKUP_TIME, dns_name(r, ip)).await {
                Ok(outcome) => outcome,
                Err(_) => Outcome::NoAnswer,
            },
        }
    }
}

/// The first name of each address in a hosts file (its canonical name, as
/// the system resolver gives it; the first line for an address wins), of
/// the first `limit` bytes (a line cut there is left out); lines that are
/// not text, and names that are not hostnames, are passed over.
fn hosts_file(file: impl std::io::Read, limit: u64) -> HashMap<IpAddr, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let _ = file.take(limit).read_to_end(&mut bytes);
    if bytes.len() as u64 >= limit {
        let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(end);
    }
    let mut names = HashMap::new();
    for line in bytes.split(|&b| b == b'\n') {
        let Ok(line) = std::str::from_utf8(line) else { continue };
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let (Some(addr), Some(name)) = (words.next(), words.next()) else { continue };
        // An IPv6 address with a zone (fe80::1%eth0) names no scanned address.
        if let (Ok(ip), Some(name)) = (addr.parse::<IpAddr>(), hostname(name)) {
            names.entry(ip).or_insert(name);
        }
    }
    names
}

/// `name` without the root's dot, if it is a hostname (as a target's name
/// must be: [`crate::targets::is_hostname`]). A PTR record is the
/// target's owner's to write: anything else (control characters, spaces,
/// an IDNA label that decodes to them) is no name, never text for a
/// report or an HTTP `Host:` header.
fn hostname(name: &str) -> Option<String> {
    crate::targets::is_hostname(name).then(|| name.strip_suffix('.').unwrap_or(name).to_string())
}

/// moonscan's own resolver: resolv.conf's servers, or `servers`; one
/// second a try, two tries, no search domains (a PTR name is absolute),
/// and its own hosts-file lookup off (the [`Namer`] reads the file).
fn resolver(servers: Option<&[SocketAddr]>) -> Result<hickory_resolver::TokioResolver> {
    use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolveHosts, ResolverConfig};
    use hickory_resolver::net::runtime::TokioRuntimeProvider;
    use hickory_resolver::TokioResolver;
    let failed = |e: &dyn std::fmt::Display| {
        Error::new(
            ErrorKind::Config,
            format!("reverse DNS: no DNS server to ask ({e}); names come from the hosts file alone (`rdns::Via::Servers` or `rdns::Via::System` ask others; `rdns::When::Never` skips reverse DNS)"),
        )
    };
    let mut builder = match servers {
        None => TokioResolver::builder_tokio().map_err(|e| failed(&e))?,
        Some(list) => {
            let servers = list
                .iter()
                .map(|a| {
                    let mut udp = ConnectionConfig::udp();
                    udp.port = a.port();
                    let mut tcp = ConnectionConfig::tcp();
                    tcp.port = a.port();
                    NameServerConfig::new(a.ip(), true, vec![udp, tcp])
                })
                .collect();
            TokioResolver::builder_with_config(
                ResolverConfig::from_name_servers(servers),
                TokioRuntimeProvider::default(),
            )
        }
    };
    let opts = builder.options_mut();
    opts.timeout = Duration::from_secs(1);
    opts.attempts = 1;
    opts.cache_size = 0;
    opts.use_hosts_file = ResolveHosts::Never;
    builder.build().map_err(|e| failed(&e))
}

/// The PTR name of `ip` from DNS.
async fn dns_name(r: &hickory_resolver::TokioResolver, ip: IpAddr) -> Outcome {
    use hickory_resolver::proto::rr::RData;
    match r.reverse_lookup(ip).await {
        Ok(found) => found
            .answers()
            .iter()
            .find_map(|rec| match &rec.data {
                RData::PTR(name) => Some(hostname(&name.0.to_ascii()).map_or(Outcome::NoName, Outcome::Named)),
                _ => None,
            })
            .unwrap_or(Outcome::NoName),
        Err(e) if e.is_no_records_found() || e.is_nx_domain() => Outcome::NoName,
        Err(_) => Outcome::NoAnswer,
    }
}

/// The system resolver's name for `ip` (blocking).
fn system_name(ip: IpAddr) -> Outcome {
    match dns_lookup::lookup_addr(&ip) {
        Ok(name) if name != ip.to_string() => hostname(&name).map_or(Outcome::NoName, Outcome::Named),
        _ => Outcome::NoName,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the lookups' loop over `n` addresses told through the tap's
    /// channel, each named by `name`, the channel closed at once; returns
    /// the events sent and how long (on tokio's paused clock) it took.
    async fn run_loop(n: u32, name: NameFn) -> (Vec<Event>, Duration) {
        let (events, mut out) = mpsc::channel(1 << 16);
        let mut ctx = Ctx::detached("s");
        ctx.events = events;
        let (tx, rx) = mpsc::unbounded_channel();
        for i in 0..n {
            tx.send(IpAddr::from(std::net::Ipv4Addr::from(0xc612_0000 + i))).unwrap();
        }
        drop(tx);
        let t0 = tokio::time::Instant::now();
        lookups(name, rx, None, Arc::default(), ctx).await;
        let took = t0.elapsed();
        let mut evs = Vec::new();
        while let Ok(e) = out.try_recv() {
            evs.push(e);
        }
        (evs, took)
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_parallel_lookups_run_at_once_and_every_name_arrives() {
        let now = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (n2, m2) = (now.clone(), most.clone());
        let name: NameFn = Arc::new(move |ip| {
            let (now, most) = (n2.clone(), m2.clone());
            Box::pin(async move {
                let at = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(at, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Outcome::Named(format!(
                    "h{}.example",
                    u32::from(match ip {
                        IpAddr::V4(a) => a,
                        _ => unreachable!(),
                    }) & 0xff
                ))
            })
        });
        let (evs, _) = run_loop(200, name).await;
        assert_eq!(most.load(Ordering::SeqCst), PARALLEL);
        let names = evs.iter().filter(|e| matches!(e, Event::Rdns(_))).count();
        assert_eq!(names, 200, "every lookup's name is sent");
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_never_answers_costs_the_scans_end_at_most_the_grace() {
        let name: NameFn = Arc::new(|_| Box::pin(std::future::pending()));
        let (evs, took) = run_loop(1000, name).await;
        assert!(took <= GRACE + Duration::from_millis(10), "{took:?}");
        let said: Vec<String> = evs
            .iter()
            .filter_map(|e| match e {
                Event::Error(e) => Some(e.message.clone()),
                _ => None,
            })
            .collect();
        assert!(said.iter().any(|m| m.contains("968 hosts were not looked up")), "{said:?}");
        assert!(said.iter().any(|m| m.contains("32 of 32 lookups got no answer")), "{said:?}");
        // A timed-out lookup (NoAnswer) is counted too, and no name is made up.
        let name: NameFn = Arc::new(|_| Box::pin(async { Outcome::NoAnswer }));
        let (evs, _) = run_loop(3, name).await;
        assert!(!evs.iter().any(|e| matches!(e, Event::Rdns(_))));
        assert!(evs.iter().any(|e| matches!(e, Event::Error(e) if e.message.contains("3 of 3 lookups"))), "{evs:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_plugin_waits_for_its_hosts_name_only_while_its_lookup_runs() {
        let tap = Arc::new(Tap {
            learnt: Arc::default(),
            seen: Mutex::default(),
            to_lookups: Mutex::new(None),
            lookups: Mutex::new(None),
            full: AtomicBool::new(false),
        });
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let now = tokio::time::Instant::now;
        // Never asked, or queued behind others: no wait.
        let t0 = now();
        assert_eq!(tap.name_of(ip("198.18.0.2")).await, None);
        assert_eq!(t0.elapsed(), Duration::ZERO);
        // Running: the name when it arrives.
        tap.learnt.note(ip("198.18.0.2"), Lookup::Running(now()));
        let waiting = tokio::spawn({
            let tap = tap.clone();
            async move { tap.name_of(ip("198.18.0.2")).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        tap.learnt.note(ip("198.18.0.2"), Lookup::Done(Some("target.example".into())));
        assert_eq!(waiting.await.unwrap().as_deref(), Some("target.example"));
        // Running, never answered: until one lookup's time after it began.
        tap.learnt.note(ip("198.18.0.3"), Lookup::Running(now()));
        tokio::time::sleep(Duration::from_secs(2)).await;
        let t0 = now();
        assert_eq!(tap.name_of(ip("198.18.0.3")).await, None);
        assert_eq!(t0.elapsed(), LOOKUP_TIME - Duration::from_secs(2));
        // Once the lookups are over, no wait.
        tap.learnt.note(ip("198.18.0.4"), Lookup::Running(now()));
        tap.learnt.over.store(true, Ordering::Relaxed);
        let t0 = now();
        assert_eq!(tap.name_of(ip("198.18.0.4")).await, None);
        assert_eq!(t0.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn every_target_is_named_while_the_server_answers() {
        let name: NameFn = Arc::new(|_| {
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Outcome::NoName
            })
        });
        let (events, mut out) = mpsc::channel(1 << 16);
        let mut ctx = Ctx::detached("s");
        ctx.events = events;
        let (tx, rx) = mpsc::unbounded_channel::<IpAddr>();
        drop(tx);
        let every: Targets = Box::new((0..5000u32).map(|i| IpAddr::from(std::net::Ipv4Addr::from(0xc613_0000 + i))));
        let learnt = Arc::new(Learnt::default());
        let t0 = tokio::time::Instant::now();
        lookups(name, rx, Some(every), learnt.clone(), ctx).await;
        // 5000 lookups of 100 ms, 32 at once: about 16 s, past the grace.
        assert!(t0.elapsed() > GRACE * 5, "{:?}", t0.elapsed());
        assert_eq!(learnt.names.lock().unwrap().len(), 5000);
        assert!(out.try_recv().is_err(), "no warning: every target was asked");
    }

    #[test]
    fn only_hostnames_are_names() {
        assert_eq!(hostname("target.lab.moonscan.test.").as_deref(), Some("target.lab.moonscan.test"));
        assert_eq!(hostname("_ldap-1.Example").as_deref(), Some("_ldap-1.Example"));
        for bad in
            ["\r\nx-evil: 1.example", "a b.example", "a..example", "é.example", "", &"a".repeat(64), &"a.".repeat(128)]
        {
            assert_eq!(hostname(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_hosts_file_gives_each_address_its_first_name() {
        let text = "# comment\n127.0.0.1\tlocalhost\n198.18.0.12 alpha.lab.moonscan.test beta.lab.moonscan.test # two\n\
                    198.18.0.12 other.example\n::1 ip6-localhost ip6-loopback\nfe80::1%eth0 zoned\nbad line\n198.18.0.9\n\
                    198.18.0.10 bad\x1bname\n";
        let mut bytes = text.as_bytes().to_vec();
        // A line that is not text is passed over; the next ones are read.
        bytes.extend_from_slice(b"198.18.0.11 \xff\xfe\n198.18.0.13 after.example\n");
        let names = hosts_file(&bytes[..], MAX_HOSTS_FILE);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(names[&ip("127.0.0.1")], "localhost");
        assert_eq!(names[&ip("198.18.0.12")], "alpha.lab.moonscan.test", "the first line's first name");
        assert_eq!(names[&ip("::1")], "ip6-localhost");
        assert_eq!(names[&ip("198.18.0.13")], "after.example");
        assert_eq!(names.len(), 4, "no name for a zoned address, a bare one, or one not a hostname: {names:?}");
        // The read stops at its limit, and a line cut there is left out.
        let cut = hosts_file(text.as_bytes(), 30);
        assert_eq!(cut.len(), 1, "{cut:?}");
        assert_eq!(hosts_file(&b"127.0.0.1 localhost\n198.18.0.2 targ"[..], 34).len(), 1);
    }

    #[test]
    fn dns_servers_are_addresses_with_an_optional_port() {
        let list = parse_servers("198.18.0.2, 127.0.0.1:5353,[::1]:53,2001:2::2").unwrap();
        let want: Vec<SocketAddr> = ["198.18.0.2:53", "127.0.0.1:5353", "[::1]:53", "[2001:2::2]:53"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(list, want);
        for bad in ["ns.example", "198.18.0.300", ",", "1.2.3.4:99999"] {
            let e = parse_servers(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Config, "{bad}");
            assert!(e.to_string().contains("`rdns::Via::Servers`"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_tap_asks_once_a_host_and_only_of_hosts_a_report_shows() {
        use crate::findings::{HostEvent, HostState, PortEvent, PortState, Proto, Reason};
        let (tx, mut rx) = mpsc::unbounded_channel();
        let tap = Tap {
            learnt: Arc::default(),
            seen: Mutex::default(),
            to_lookups: Mutex::new(Some(tx)),
            lookups: Mutex::new(None),
            full: AtomicBool::new(false),
        };
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let host = |a: &str, state| {
            Event::Host(HostEvent {
                scan_id: "s".into(),
                ip: ip(a),
                state,
                reason: Reason::UserSet,
                ttl: None,
                latency: None,
                mac: None,
                t: 0.0,
            })
        };
        let port = |a: &str| {
            Event::Port(PortEvent {
                scan_id: "s".into(),
                ip: ip(a),
                port: 80,
                proto: Proto::Tcp,
                state: PortState::Open,
                reason: Reason::SynAck,
                ttl: None,
                t: 0.0,
            })
        };
        tap.saw(&host("198.18.0.2", HostState::Up));
        tap.saw(&port("198.18.0.2"));
        tap.saw(&host("198.18.0.3", HostState::Down));
        tap.saw(&port("198.18.0.4"));
        let mut asked = Vec::new();
        while let Ok(a) = rx.try_recv() {
            asked.push(a);
        }
        assert_eq!(asked, [ip("198.18.0.2"), ip("198.18.0.4")], "a down host is not named, a host once");
        // Past the cap nothing more is asked.
        {
            let mut seen = tap.seen.lock().unwrap();
            for i in 0..MAX_ADDRESSES as u32 {
                seen.insert(IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i)));
            }
        }
        tap.saw(&port("198.18.0.5"));
        assert!(rx.try_recv().is_err() && tap.full.load(Ordering::Relaxed));
    }
}
