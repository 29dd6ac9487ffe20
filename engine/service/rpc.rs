//! The RPC grinder: which ONC RPC program answers on a TCP port, and which
//! versions of it (nmap's RPC grinding, part of its -sV).
//!
//! In: a TCP port that detection left as `rpc` (the RPCNull probe of
//! probes/rpc.yaml soft-matched: it answers ONC RPC) or `rpcbind` (soft,
//! or the port table's guess), a reply buffer (one of the detection pool's),
//! the programs the host's portmapper lists at this port when known, and a
//! deadline within the port's detection budget. Out: a [`Grind`]: the
//! program found (number, nmap's name, lowest and highest version) and,
//! when the port is itself a portmapper, its list (DUMP), which names
//! candidates for the host's other ports.
//!
//! How (RFC 5531 for the messages and TCP's record marking, RFC 1833 for
//! the portmapper): first a portmapper DUMP (program 100000 version 2,
//! procedure 4); then NULL calls (procedure 0) to one candidate program
//! after another, with a version no program has ([`UNLIKELY_VERSION`]): a
//! program that is there answers PROG_MISMATCH with its lowest and highest
//! versions, one that is not PROG_UNAVAIL. Candidates come in this order:
//! the portmapper's list (its own, then the host's), a small table of the
//! common programs ([`COMMON`]), then nmap's nmap-rpc when it is installed
//! (read at run time, never copied).
//!
//! What always holds: all calls go over one connection while the server
//! keeps it open (at most [`MAX_CONNECTS`] in all, a new one only after
//! the last got an answer); at most [`MAX_CALLS`] calls, at most
//! [`WINDOW`] of them unanswered; every reply is read into the one buffer
//! and never past its end (a longer record is cut, and the connection
//! dropped); every connect, write and read ends by the deadline; anything
//! that is not a reply to a call made (garbage, another xid, a record of
//! more than [`MAX_FRAGMENTS`] fragments) ends the grind with what it
//! found so far. The protocol part ([`call`], [`parse_reply`],
//! [`parse_dump`]) does no I/O.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{timeout_at, Instant};

use super::rules::Identity;

/// The name a port named by grinding gives as its probe.
pub const PROBE: &str = "RPCGrind";
/// The portmapper (rpcbind).
pub const PORTMAP: u32 = 100_000;
/// The version the NULL calls ask for: no program has it ("moon").
pub const UNLIKELY_VERSION: u32 = 0x6d6f_6f6e;
/// Most calls to one port (the DUMP included).
pub const MAX_CALLS: u32 = 512;
/// NULL calls sent before their answers are read.
pub const WINDOW: usize = 8;
/// Most connections to one port (a server may close one after a call).
pub const MAX_CONNECTS: u32 = 4;
/// Most fragments one reply record may have.
pub const MAX_FRAGMENTS: usize = 16;
/// Longest fragment a record mark may announce: more is not RPC (text
/// such as "HTTP" read as a mark announces a gigabyte).
pub const MAX_FRAGMENT: usize = 1 << 20;
/// Most entries kept of a portmapper's list.
pub const MAX_MAPPINGS: usize = 256;
/// Most hosts whose portmapper list a scan keeps for their other ports.
pub const MAX_HOSTS: usize = 4096;
/// Largest nmap-rpc read.
const MAX_NMAP_RPC: u64 = 1 << 20;

/// The common programs of Linux and Solaris hosts, by nmap's names, in the
/// order they are tried after the portmapper's list.
pub const COMMON: &[(u32, &str)] = &[
    (100_000, "rpcbind"),
    (100_003, "nfs"),
    (100_005, "mountd"),
    (100_021, "nlockmgr"),
    (100_024, "status"),
    (100_011, "rquotad"),
    (100_227, "nfs_acl"),
    (100_004, "ypserv"),
    (100_007, "ypbind"),
    (100_009, "yppasswdd"),
    (100_069, "ypxfrd"),
    (100_001, "rstatd"),
    (100_002, "rusersd"),
    (100_008, "walld"),
    (100_012, "sprayd"),
    (100_026, "bootparam"),
    (100_029, "keyserv"),
    (100_083, "ttdbserverd"),
    (100_232, "sadmind"),
    (100_249, "snmpXdmid"),
    (150_001, "pcnfsd"),
    (300_019, "amd"),
    (391_002, "sgi_fam"),
    (395_650, "ypupdated"),
];

/// A CALL of `program`/`version`/`procedure` with AUTH_NONE credentials and
/// verifier and no arguments, as one last fragment of TCP record marking.
pub fn call(xid: u32, program: u32, version: u32, procedure: u32) -> [u8; 44] {
    let words = [0x8000_0028, xid, 0, 2, program, version, procedure, 0, 0, 0, 0];
    let mut out = [0u8; 44];
    for (chunk, w) in out.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&w.to_be_bytes());
    }
    out
}

/// A reply to a call, as RFC 5531 section 9 gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply<'a> {
    /// SUCCESS: the procedure's results.
    Success(&'a [u8]),
    ProgUnavail,
    ProgMismatch {
        low: u32,
        high: u32,
    },
    ProcUnavail,
    GarbageArgs,
    SystemErr,
    /// MSG_DENIED: RPC_MISMATCH or AUTH_ERROR.
    Denied,
}

/// Why bytes are not a reply to the call made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

fn word(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
}

/// The reply in `msg` (a whole record, without its marks) to the call `xid`.
pub fn parse_reply(msg: &[u8], xid: u32) -> Result<Reply<'_>, Malformed> {
    let (Some(rxid), Some(mtype), Some(stat)) = (word(msg, 0), word(msg, 4), word(msg, 8)) else {
        return Err(Malformed("shorter than a reply's header"));
    };
    if mtype != 1 {
        return Err(Malformed("not a REPLY"));
    }
    if rxid != xid {
        return Err(Malformed("a reply to another call (xid)"));
    }
    match stat {
        0 => {}
        1 => return Ok(Reply::Denied),
        _ => return Err(Malformed("reply_stat neither accepted nor denied")),
    }
    // The verifier: flavor, then opaque body (at most 400 bytes, padded to 4).
    let vlen = word(msg, 16).ok_or(Malformed("cut in its verifier"))?;
    if vlen > 400 {
        return Err(Malformed("verifier longer than 400 bytes"));
    }
    let at = 20 + vlen as usize + (4 - vlen as usize % 4) % 4;
    let accept = word(msg, at).ok_or(Malformed("cut before accept_stat"))?;
    Ok(match accept {
        0 => Reply::Success(&msg[at + 4..]),
        1 => Reply::ProgUnavail,
        2 => match (word(msg, at + 4), word(msg, at + 8)) {
            (Some(low), Some(high)) => Reply::ProgMismatch { low, high },
            _ => return Err(Malformed("PROG_MISMATCH without its versions")),
        },
        3 => Reply::ProcUnavail,
        4 => Reply::GarbageArgs,
        5 => Reply::SystemErr,
        _ => return Err(Malformed("unknown accept_stat")),
    })
}

/// One entry of a portmapper's list (version 2: RFC 1833 section 3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub program: u32,
    pub version: u32,
    /// IPPROTO_TCP (6) or IPPROTO_UDP (17).
    pub protocol: u32,
    pub port: u32,
}

/// A DUMP's results: the entries that are whole (at most [`MAX_MAPPINGS`]),
/// and whether the list ended where it should (false: cut short or bad).
pub fn parse_dump(body: &[u8]) -> (Vec<Mapping>, bool) {
    let mut list = Vec::new();
    let mut at = 0;
    loop {
        match word(body, at) {
            Some(0) => return (list, true),
            Some(1) if list.len() < MAX_MAPPINGS => {}
            _ => return (list, false),
        }
        let entry = (word(body, at + 4), word(body, at + 8), word(body, at + 12), word(body, at + 16));
        let (Some(program), Some(version), Some(protocol), Some(port)) = entry else { return (list, false) };
        list.push(Mapping { program, version, protocol, port });
        at += 20;
    }
}

/// The program found on a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub number: u32,
    /// nmap's name for it (nmap-rpc, else [`COMMON`]), if either has one.
    pub name: Option<String>,
    /// Lowest and highest version (from PROG_MISMATCH); none when the
    /// server answered the unlikely version in another way.
    pub versions: Option<(u32, u32)>,
}

impl Program {
    /// How nmap names the port: the program's name, its versions
    /// (`2-4`, or `3` for one), and `RPC #100000` as extra information.
    pub fn identity(&self) -> Identity {
        let version = self.versions.map(|(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") });
        Identity {
            service: self.name.clone().unwrap_or_else(|| "rpc".into()),
            version,
            info: Some(format!("RPC #{}", self.number)),
            ..Identity::default()
        }
    }
}

/// Why a grind stopped before it found the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The deadline came.
    Timeout,
    /// A connect, read or write failed (the last connection's).
    Io(String),
    /// The server sent what is not a reply to the call.
    Malformed(&'static str),
    /// [`MAX_CONNECTS`] connections were used up.
    Connections,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout => write!(f, "RPC grinding timed out"),
            Failure::Io(e) => write!(f, "RPC grinding: {e}"),
            Failure::Malformed(why) => write!(f, "RPC grinding: not an RPC reply: {why}"),
            Failure::Connections => write!(f, "RPC grinding: the server closed {MAX_CONNECTS} connections"),
        }
    }
}

/// What grinding a port found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grind {
    pub program: Option<Program>,
    /// The port's own list, when it is a portmapper.
    pub portmap: Option<Vec<Mapping>>,
    /// Calls made.
    pub calls: u32,
    /// Why it stopped without a program (none: every candidate answered
    /// PROG_UNAVAIL, or the server refused the calls).
    pub failure: Option<Failure>,
}

/// nmap's program names and the order of the candidates after a
/// portmapper's list: [`COMMON`], then nmap-rpc's programs.
#[derive(Debug, Default)]
pub struct Programs {
    names: HashMap<u32, String>,
    order: Vec<u32>,
}

impl Programs {
    /// [`COMMON`], with the names and further programs of an nmap-rpc
    /// text (`name number aliases... # comment` lines) when there is one.
    pub fn new(nmap_rpc: Option<&str>) -> Programs {
        let mut p = Programs::default();
        let mut seen = HashSet::new();
        for &(n, name) in COMMON {
            p.names.insert(n, name.to_string());
            if seen.insert(n) {
                p.order.push(n);
            }
        }
        for line in nmap_rpc.unwrap_or_default().lines() {
            let line = line.split('#').next().unwrap_or_default();
            let mut words = line.split_whitespace();
            let (Some(name), Some(Ok(n))) = (words.next(), words.next().map(str::parse::<u32>)) else { continue };
            if name.len() > 64 || !name.bytes().all(|c| c.is_ascii_graphic()) {
                continue;
            }
            p.names.insert(n, name.to_string());
            if seen.insert(n) {
                p.order.push(n);
            }
        }
        p
    }

    pub fn name(&self, n: u32) -> Option<&str> {
        self.names.get(&n).map(String::as_str)
    }
}

/// What grinding shares across a scan: nmap's names (read once, at the
/// first grind, from nmap's folders `nmap_dirs`) and each host's
/// portmapper list (at most [`MAX_HOSTS`]).
#[derive(Debug, Default)]
pub struct Shared {
    programs: OnceLock<Programs>,
    lists: Mutex<BTreeMap<IpAddr, Arc<[Mapping]>>>,
    nmap_dirs: Vec<std::path::PathBuf>,
}

impl Shared {
    /// Reading nmap-rpc, at the first grind, from one of `nmap_dirs`.
    pub fn new(nmap_dirs: Vec<std::path::PathBuf>) -> Shared {
        Shared { nmap_dirs, ..Shared::default() }
    }

    /// The names and order: nmap-rpc's from the user's nmap, when installed.
    pub fn programs(&self) -> &Programs {
        self.programs.get_or_init(|| {
            Programs::new(crate::files::nmap_data(&self.nmap_dirs, "nmap-rpc", MAX_NMAP_RPC).as_deref())
        })
    }

    /// With these names and no nmap-rpc read (tests).
    pub fn with_programs(programs: Programs) -> Shared {
        let s = Shared::default();
        let _ = s.programs.set(programs);
        s
    }

    /// The programs `ip`'s portmapper lists at TCP `port`, if its list is known.
    pub fn listed_at(&self, ip: IpAddr, port: u16) -> Vec<u32> {
        let lists = self.lists.lock().unwrap_or_else(|p| p.into_inner());
        lists.get(&ip).map_or_else(Vec::new, |l| at_port(l, port))
    }

    /// Keeps `ip`'s portmapper list (the first one, while there is room).
    pub fn keep(&self, ip: IpAddr, list: &[Mapping]) {
        let mut lists = self.lists.lock().unwrap_or_else(|p| p.into_inner());
        if lists.len() < MAX_HOSTS && !lists.contains_key(&ip) {
            lists.insert(ip, list.into());
        }
    }
}

/// The programs of `list` registered at TCP `port`.
fn at_port(list: &[Mapping], port: u16) -> Vec<u32> {
    list.iter().filter(|m| m.protocol == 6 && m.port == u32::from(port)).map(|m| m.program).collect()
}

/// One record read into `buf`: its length, and whether it was longer
/// than the buffer (the rest is left unread: the connection is spent).
async fn read_record<S: AsyncRead + Unpin>(
    s: &mut S,
    buf: &mut [u8],
    until: Instant,
) -> Result<(usize, bool), Failure> {
    let mut filled = 0;
    for _ in 0..MAX_FRAGMENTS {
        let mut mark = [0u8; 4];
        read_exact(s, &mut mark, until).await?;
        let mark = u32::from_be_bytes(mark);
        let (last, len) = (mark & 0x8000_0000 != 0, (mark & 0x7fff_ffff) as usize);
        if len > MAX_FRAGMENT {
            return Err(Failure::Malformed("a record mark of more than a megabyte"));
        }
        let take = len.min(buf.len() - filled);
        read_exact(s, &mut buf[filled..filled + take], until).await?;
        filled += take;
        if take < len {
            return Ok((filled, true));
        }
        if last {
            return Ok((filled, false));
        }
    }
    Err(Failure::Malformed("a record of too many fragments"))
}

async fn read_exact<S: AsyncRead + Unpin>(s: &mut S, buf: &mut [u8], until: Instant) -> Result<(), Failure> {
    match timeout_at(until, s.read_exact(buf)).await {
        Err(_) => Err(Failure::Timeout),
        Ok(Err(e)) => Err(Failure::Io(e.to_string())),
        Ok(Ok(_)) => Ok(()),
    }
}

async fn send<S: AsyncWrite + Unpin>(s: &mut S, msg: &[u8], until: Instant) -> Result<(), Failure> {
    match timeout_at(until, s.write_all(msg)).await {
        Err(_) => Err(Failure::Timeout),
        Ok(Err(e)) => Err(Failure::Io(e.to_string())),
        Ok(Ok(())) => Ok(()),
    }
}

/// The connections of one grind: at most [`MAX_CONNECTS`], each by the deadline.
struct Connections<C> {
    connect: C,
    made: u32,
}

impl<C> Connections<C> {
    async fn open<S, F>(&mut self, until: Instant) -> Result<S, Failure>
    where
        C: FnMut() -> F,
        F: Future<Output = std::io::Result<S>>,
    {
        if self.made >= MAX_CONNECTS {
            return Err(Failure::Connections);
        }
        self.made += 1;
        match timeout_at(until, (self.connect)()).await {
            Err(_) => Err(Failure::Timeout),
            Ok(Err(e)) => Err(Failure::Io(format!("connect: {e}"))),
            Ok(Ok(s)) => Ok(s),
        }
    }
}

/// Grinds a port: connections come from `connect`, replies go into `buf`,
/// `listed` are the programs the host's portmapper lists at this port (if
/// known), `programs` the names and table; all ends by `until`.
///
/// The DUMP goes alone (its answer orders the candidates); the NULL calls
/// go [`WINDOW`] at a time on the connection (a server answers a
/// connection's calls in order; each reply is matched by its xid), so a
/// slow path costs a round trip per window, not per call. A connection the
/// server closes is replaced, and the calls it left unanswered sent again,
/// as long as each connection got an answer.
pub async fn grind<S, C, F>(connect: C, buf: &mut [u8], listed: &[u32], programs: &Programs, until: Instant) -> Grind
where
    S: AsyncRead + AsyncWrite + Unpin,
    C: FnMut() -> F,
    F: Future<Output = std::io::Result<S>>,
{
    let mut g = Grind::default();
    let mut conns = Connections { connect, made: 0 };
    let mut xid = 0x6d73_0000u32;

    let (mut conn, own) = match dump(&mut conns, buf, &mut g, &mut xid, until).await {
        Ok(got) => got,
        Err(Some(f)) => return g.failed(f),
        Err(None) => return g,
    };

    let mut seen = HashSet::new();
    let all = own.iter().chain(listed).chain(programs.order.iter());
    let queue: Vec<u32> = all.copied().filter(|p| seen.insert(*p)).collect();
    // Calls sent and not yet answered: (xid, index in the queue), oldest first.
    let mut waiting: VecDeque<(u32, usize)> = VecDeque::new();
    let mut next = 0;
    // The DUMP was answered.
    let (mut answered, mut writable) = (true, true);
    loop {
        let s = match conn.as_mut() {
            Some(s) => s,
            None => {
                // Only a connection that got an answer earns another.
                if !answered {
                    return g.failed(Failure::Io("the server closed the connection unanswered".into()));
                }
                answered = false;
                writable = true;
                next = waiting.front().map_or(next, |w| w.1);
                waiting.clear();
                match conns.open(until).await {
                    Ok(s) => conn.insert(s),
                    Err(f) => return g.failed(f),
                }
            }
        };
        // A server that closed the connection may have answered calls
        // before: their replies are read before a new one is opened.
        while writable && waiting.len() < WINDOW && next < queue.len() && g.calls < MAX_CALLS {
            xid = xid.wrapping_add(1);
            match send(s, &call(xid, queue[next], UNLIKELY_VERSION, 0), until).await {
                Ok(()) => {}
                Err(Failure::Io(_)) => {
                    writable = false;
                    break;
                }
                Err(f) => return g.failed(f),
            }
            g.calls += 1;
            waiting.push_back((xid, next));
            next += 1;
        }
        if waiting.is_empty() {
            if writable {
                return g;
            }
            conn = None;
            continue;
        }
        let (len, cut) = match read_record(s, buf, until).await {
            Ok(r) => r,
            Err(Failure::Io(_)) => {
                conn = None;
                continue;
            }
            Err(f) => return g.failed(f),
        };
        if cut {
            return g.failed(Failure::Malformed("a reply larger than the buffer"));
        }
        let rxid = word(&buf[..len], 0).unwrap_or_default();
        let Some(at) = waiting.iter().position(|w| w.0 == rxid) else {
            return g.failed(match parse_reply(&buf[..len], xid) {
                Err(Malformed(why)) => Failure::Malformed(why),
                Ok(_) => Failure::Malformed("a reply to another call (xid)"),
            });
        };
        let (rxid, index) = waiting.remove(at).unwrap_or_default();
        answered = true;
        let versions = match parse_reply(&buf[..len], rxid) {
            Err(Malformed(why)) => return g.failed(Failure::Malformed(why)),
            Ok(Reply::Denied) => return g,
            Ok(Reply::ProgUnavail) => continue,
            Ok(Reply::ProgMismatch { low, high }) => Some((low.min(high), low.max(high))),
            Ok(_) => None,
        };
        let number = queue[index];
        let name = programs.name(number).map(str::to_string);
        g.program = Some(Program { number, name, versions });
        return g;
    }
}

/// The DUMP call, sent again once on a new connection if the first
/// closed: its list goes into `g`. Gives the connection (unless the
/// reply was cut) and the TCP programs the list names; `Err` ends the
/// grind (with its failure, or none when the call was denied).
async fn dump<S, C, F>(
    conns: &mut Connections<C>,
    buf: &mut [u8],
    g: &mut Grind,
    xid: &mut u32,
    until: Instant,
) -> Result<(Option<S>, Vec<u32>), Option<Failure>>
where
    S: AsyncRead + AsyncWrite + Unpin,
    C: FnMut() -> F,
    F: Future<Output = std::io::Result<S>>,
{
    // The DUMP, sent again once on a new connection if the first closed.
    let mut conn = None;
    let mut own = Vec::new();
    for attempt in 0..2 {
        let mut s = match conns.open(until).await {
            Ok(s) => s,
            Err(f) => return Err(Some(f)),
        };
        *xid = xid.wrapping_add(1);
        g.calls += 1;
        let read = match send(&mut s, &call(*xid, PORTMAP, 2, 4), until).await {
            Ok(()) => read_record(&mut s, buf, until).await,
            Err(f) => Err(f),
        };
        let (len, cut) = match read {
            Ok(r) => r,
            Err(Failure::Io(_)) if attempt == 0 => continue,
            Err(f) => return Err(Some(f)),
        };
        // A DUMP cut at the buffer's end keeps its whole entries; the rest
        // of its record is still on the wire, so its connection goes.
        match parse_reply(&buf[..len], *xid) {
            Err(Malformed(why)) => return Err(Some(Failure::Malformed(why))),
            Ok(Reply::Denied) => return Err(None),
            Ok(Reply::Success(body)) => {
                let (list, _whole) = parse_dump(body);
                own = list.iter().filter(|m| m.protocol == 6).map(|m| m.program).collect();
                g.portmap = Some(list);
            }
            Ok(_) => {}
        }
        conn = (!cut).then_some(s);
        break;
    }
    Ok((conn, own))
}

impl Grind {
    fn failed(mut self, f: Failure) -> Grind {
        self.failure = Some(f);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{duplex, DuplexStream};

    /// A reply record to `xid` with `accept` (and its words after).
    fn accepted(xid: u32, accept: u32, rest: &[u32]) -> Vec<u8> {
        let mut words = vec![xid, 1, 0, 0, 0, accept];
        words.extend_from_slice(rest);
        record(&words)
    }

    fn record(words: &[u32]) -> Vec<u8> {
        let mut out = (0x8000_0000 | (words.len() as u32 * 4)).to_be_bytes().to_vec();
        for w in words {
            out.extend_from_slice(&w.to_be_bytes());
        }
        out
    }

    /// A server that reads calls and answers each with what `answer`
    /// makes of (program, version, procedure, xid); None: say nothing more.
    fn server(answer: impl Fn(u32, u32, u32, u32) -> Option<Vec<u8>> + Send + 'static) -> DuplexStream {
        let (client, mut srv) = duplex(1 << 16);
        tokio::spawn(async move {
            let mut call = [0u8; 44];
            while srv.read_exact(&mut call).await.is_ok() {
                let w = |i: usize| u32::from_be_bytes(call[i * 4..i * 4 + 4].try_into().unwrap());
                match answer(w(4), w(5), w(6), w(1)) {
                    Some(bytes) => {
                        if srv.write_all(&bytes).await.is_err() {
                            return;
                        }
                    }
                    None => {
                        // Hold the connection open, silent.
                        std::future::pending::<()>().await;
                    }
                }
            }
        });
        client
    }

    async fn run_on(s: DuplexStream, buf_size: usize, within: Duration) -> Grind {
        let mut one = Some(s);
        let mut buf = vec![0u8; buf_size];
        let programs = Programs::new(None);
        let connect = move || {
            let s = one.take();
            async move { s.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "no more")) }
        };
        grind(connect, &mut buf, &[], &programs, Instant::now() + within).await
    }

    #[test]
    fn a_call_is_a_44_byte_record_with_auth_none() {
        let c = call(7, 100_003, 3, 0);
        assert_eq!(&c[..4], &[0x80, 0, 0, 40]);
        assert_eq!(&c[4..8], &7u32.to_be_bytes());
        assert_eq!(&c[16..20], &100_003u32.to_be_bytes());
        assert!(c[28..].iter().all(|&b| b == 0));
    }

    #[test]
    fn replies_are_parsed_and_garbage_refused() {
        let r = accepted(9, 2, &[2, 4]);
        assert_eq!(parse_reply(&r[4..], 9), Ok(Reply::ProgMismatch { low: 2, high: 4 }));
        assert_eq!(parse_reply(&accepted(9, 1, &[])[4..], 9), Ok(Reply::ProgUnavail));
        assert_eq!(parse_reply(&record(&[9, 1, 1, 0, 2, 2])[4..], 9), Ok(Reply::Denied));
        assert!(parse_reply(&r[4..], 10).is_err(), "another xid");
        assert!(parse_reply(&accepted(9, 2, &[2])[4..], 9).is_err(), "mismatch without its high version");
        assert!(parse_reply(b"HTTP/1.1 400 Bad Request\r\n", 9).is_err());
        assert!(parse_reply(&record(&[9, 1, 0, 0, 0xffff_ffff])[4..], 9).is_err(), "a verifier of 4 GB");
        assert!(parse_reply(&[], 9).is_err());
    }

    #[test]
    fn the_fuzz_entry_takes_every_cut_of_replies_without_panicking() {
        let mut dump = accepted(5, 0, &[1, PORTMAP, 2, 6, 111, 1, 100_005, 3, 17, 20048, 0]);
        dump.extend(accepted(5, 2, &[2, 4]));
        let verifier = record(&[5, 1, 0, 1, 0xffff_fff0, 0]);
        for data in [&dump[4..], &verifier[4..]] {
            for cut in 0..=data.len() {
                crate::fuzz::rpc_reply(&data[..cut]);
                crate::fuzz::rpc_reply(&data[cut..]);
            }
        }
    }

    #[test]
    fn a_dump_is_read_to_its_end_and_a_cut_one_keeps_its_whole_entries() {
        let words = [1, 100_000, 2, 6, 111, 1, 100_000, 2, 17, 111, 0];
        let body: Vec<u8> = words.iter().flat_map(|w: &u32| w.to_be_bytes()).collect();
        let (list, whole) = parse_dump(&body);
        assert!(whole);
        assert_eq!(list.len(), 2);
        assert_eq!(list[1], Mapping { program: 100_000, version: 2, protocol: 17, port: 111 });
        let (list, whole) = parse_dump(&body[..30]);
        assert!(!whole);
        assert_eq!(list.len(), 1);
        // A list that never ends stops at MAX_MAPPINGS.
        let endless: Vec<u8> =
            std::iter::repeat_n([1u32, 1, 1, 6, 1], 1000).flatten().flat_map(u32::to_be_bytes).collect();
        assert_eq!(parse_dump(&endless).0.len(), MAX_MAPPINGS);
    }

    #[test]
    fn nmap_rpc_names_programs_and_adds_candidates_after_the_common_ones() {
        let p = Programs::new(Some("# comment\nrpcbind\t100000\tportmap\nfoo 123456 # x\nbad\nlong 12x\n"));
        assert_eq!(p.name(100_000), Some("rpcbind"));
        assert_eq!(p.name(123_456), Some("foo"));
        assert_eq!(p.order.last(), Some(&123_456));
        assert_eq!(p.order.len(), COMMON.len() + 1);
    }

    #[tokio::test]
    async fn a_portmapper_is_named_from_prog_mismatch_after_its_dump() {
        let s = server(|prog, vers, proc_, xid| match (prog, vers, proc_) {
            // DUMP: rpcbind 2 at tcp/111 and udp/111, then mountd at tcp/20048.
            (PORTMAP, 2, 4) => {
                Some(accepted(xid, 0, &[1, PORTMAP, 2, 6, 111, 1, PORTMAP, 2, 17, 111, 1, 100_005, 3, 6, 20048, 0]))
            }
            (PORTMAP, UNLIKELY_VERSION, 0) => Some(accepted(xid, 2, &[2, 4])),
            _ => Some(accepted(xid, 1, &[])),
        });
        let g = run_on(s, 4096, Duration::from_secs(5)).await;
        let p = g.program.expect("found");
        assert_eq!((p.number, p.versions), (PORTMAP, Some((2, 4))));
        let id = p.identity();
        assert_eq!(
            (id.service.as_str(), id.version.as_deref(), id.info.as_deref()),
            ("rpcbind", Some("2-4"), Some("RPC #100000"))
        );
        assert_eq!(g.calls as usize, 1 + WINDOW, "the DUMP and one window of NULL calls, the first answered");
        assert_eq!(g.portmap.map(|l| at_port(&l, 20048)), Some(vec![100_005]));
    }

    #[tokio::test]
    async fn prog_unavail_moves_on_to_the_next_program_on_one_connection() {
        // Not a portmapper: the DUMP gets PROG_UNAVAIL, so do the programs before mountd.
        let s = server(|prog, _, _, xid| {
            Some(if prog == 100_005 { accepted(xid, 2, &[3, 3]) } else { accepted(xid, 1, &[]) })
        });
        let g = run_on(s, 4096, Duration::from_secs(5)).await;
        let p = g.program.expect("mountd");
        assert_eq!(p.identity().version.as_deref(), Some("3"), "one version is written alone");
        assert_eq!(p.identity().service, "mountd");
        assert!(g.portmap.is_none() && g.failure.is_none());
        // DUMP, a window, and one more call for each of rpcbind and nfs.
        assert_eq!(g.calls as usize, 1 + WINDOW + 2);
    }

    #[tokio::test]
    async fn a_server_with_no_known_program_costs_at_most_max_calls() {
        let s = server(|_, _, _, xid| Some(accepted(xid, 1, &[])));
        let mut one = Some(s);
        let mut buf = vec![0u8; 512];
        // Enough candidates to pass the bound.
        let text: String = (0..2 * MAX_CALLS).map(|i| format!("p{i} {}\n", 200_000 + i)).collect();
        let programs = Programs::new(Some(&text));
        let connect = move || {
            let s = one.take();
            async move { s.ok_or_else(|| std::io::Error::other("no more")) }
        };
        let g = grind(connect, &mut buf, &[], &programs, Instant::now() + Duration::from_secs(20)).await;
        assert_eq!((g.program, g.calls, g.failure), (None, MAX_CALLS, None));
    }

    #[tokio::test]
    async fn the_programs_a_hosts_portmapper_lists_at_the_port_are_tried_first() {
        let s = server(|prog, _, _, xid| {
            Some(if prog == 100_021 { accepted(xid, 2, &[1, 4]) } else { accepted(xid, 1, &[]) })
        });
        let mut one = Some(s);
        let mut buf = vec![0u8; 4096];
        let programs = Programs::new(None);
        let connect = move || {
            let s = one.take();
            async move { s.ok_or_else(|| std::io::Error::other("no more")) }
        };
        let g = grind(connect, &mut buf, &[100_021], &programs, Instant::now() + Duration::from_secs(5)).await;
        let p = g.program.expect("nlockmgr");
        assert_eq!((p.name.as_deref(), p.versions), (Some("nlockmgr"), Some((1, 4))));
        assert_eq!(g.calls as usize, 1 + WINDOW, "the DUMP, then nlockmgr first");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_path_costs_a_round_trip_per_window_not_per_call() {
        // Each reply leaves 100 ms after its call came: a 100 ms path.
        let (client, srv) = duplex(1 << 16);
        let (mut rd, mut wr) = tokio::io::split(srv);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
        tokio::spawn(async move {
            let mut call = [0u8; 44];
            while rd.read_exact(&mut call).await.is_ok() {
                let w = |i: usize| u32::from_be_bytes(call[i * 4..i * 4 + 4].try_into().unwrap());
                let reply = if w(4) == 200_060 { accepted(w(1), 2, &[1, 1]) } else { accepted(w(1), 1, &[]) };
                let _ = tx.send((Instant::now() + Duration::from_millis(100), reply));
            }
        });
        tokio::spawn(async move {
            while let Some((due, reply)) = rx.recv().await {
                tokio::time::sleep_until(due).await;
                if wr.write_all(&reply).await.is_err() {
                    return;
                }
            }
        });
        let text: String = (0..100).map(|i| format!("p{i} {}\n", 200_000 + i)).collect();
        let programs = Programs::new(Some(&text));
        let mut one = Some(client);
        let connect = move || {
            let s = one.take();
            async move { s.ok_or_else(|| std::io::Error::other("no more")) }
        };
        let mut buf = vec![0u8; 4096];
        let start = Instant::now();
        let g = grind(connect, &mut buf, &[], &programs, Instant::now() + Duration::from_secs(20)).await;
        let took = start.elapsed();
        assert_eq!(g.program.map(|p| (p.number, p.name)), Some((200_060, Some("p60".to_string()))));
        // 85 calls one after another would take 8.6 s.
        assert!(took < Duration::from_millis(1500), "{took:?}");
    }

    #[tokio::test]
    async fn a_closed_connections_unanswered_calls_go_again_on_the_next() {
        // Each connection answers five calls, then closes; walld is 13th.
        let mut conns: Vec<DuplexStream> = (0..MAX_CONNECTS)
            .map(|_| {
                let (client, mut srv) = duplex(1 << 16);
                tokio::spawn(async move {
                    let mut call = [0u8; 44];
                    for _ in 0..5 {
                        if srv.read_exact(&mut call).await.is_err() {
                            return;
                        }
                        let w = |i: usize| u32::from_be_bytes(call[i * 4..i * 4 + 4].try_into().unwrap());
                        let reply = if w(4) == 100_008 { accepted(w(1), 2, &[1, 1]) } else { accepted(w(1), 1, &[]) };
                        let _ = srv.write_all(&reply).await;
                    }
                });
                client
            })
            .collect();
        conns.reverse();
        let mut buf = vec![0u8; 4096];
        let programs = Programs::new(None);
        let connect = move || {
            let s = conns.pop();
            async move { s.ok_or_else(|| std::io::Error::other("no more")) }
        };
        let g = grind(connect, &mut buf, &[], &programs, Instant::now() + Duration::from_secs(5)).await;
        assert_eq!(g.program.map(|p| p.name), Some(Some("walld".to_string())), "{:?}", g.failure);
    }

    #[tokio::test]
    async fn garbage_ends_the_grind_with_nothing() {
        let s = server(|_, _, _, _| Some(b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec()));
        let g = run_on(s, 4096, Duration::from_secs(5)).await;
        assert!(g.program.is_none());
        assert_eq!(g.failure, Some(Failure::Malformed("a record mark of more than a megabyte")));
        assert_eq!(g.calls, 1);
        // A mark of the right size and a body that is no reply.
        let s = server(|_, _, _, _| Some(record(&[0x4854_5450, 0x2f31_2e31, 0x2034_3030])));
        let g = run_on(s, 4096, Duration::from_secs(5)).await;
        assert_eq!(g.failure, Some(Failure::Malformed("not a REPLY")));
    }

    #[tokio::test]
    async fn a_reply_to_another_xid_ends_the_grind() {
        let s = server(|_, _, _, xid| Some(accepted(xid ^ 1, 2, &[1, 1])));
        let g = run_on(s, 4096, Duration::from_secs(5)).await;
        assert_eq!((g.program, g.failure), (None, Some(Failure::Malformed("a reply to another call (xid)"))));
    }

    #[tokio::test]
    async fn an_endless_record_of_empty_fragments_is_refused() {
        let s = server(|_, _, _, _| Some([0u8; 4].repeat(100)));
        let g = run_on(s, 4096, Duration::from_secs(5)).await;
        assert_eq!((g.program, g.failure), (None, Some(Failure::Malformed("a record of too many fragments"))));
    }

    #[tokio::test]
    async fn a_hostile_reply_larger_than_the_buffer_is_read_no_further() {
        // A NULL reply claiming 100,000 bytes, then 60,000 of them: at most the buffer is read.
        let s = server(|prog, _, proc_, xid| {
            if prog == PORTMAP && proc_ == 0 {
                let mut r = accepted(xid, 2, &[2, 4]);
                r[..4].copy_from_slice(&(0x8000_0000u32 + 100_000).to_be_bytes());
                r.extend(std::iter::repeat_n(0x41, 60_000));
                Some(r)
            } else {
                Some(accepted(xid, 1, &[]))
            }
        });
        let g = run_on(s, 256, Duration::from_secs(5)).await;
        assert_eq!(g.failure, Some(Failure::Malformed("a reply larger than the buffer")));
        assert!(g.program.is_none());
    }

    #[tokio::test]
    async fn a_dump_larger_than_the_buffer_keeps_its_whole_entries_and_goes_on_on_a_new_connection() {
        let mut conns = Vec::new();
        for _ in 0..2 {
            conns.push(server(|prog, vers, proc_, xid| {
                Some(match (prog, vers, proc_) {
                    (PORTMAP, 2, 4) => {
                        let mut words = vec![];
                        for i in 0..100 {
                            words.extend([1, 300_000 + i, 1, 6, 111]);
                        }
                        words.push(0);
                        accepted(xid, 0, &words)
                    }
                    (PORTMAP, _, 0) => accepted(xid, 2, &[2, 4]),
                    _ => accepted(xid, 1, &[]),
                })
            }));
        }
        let mut buf = vec![0u8; 512];
        let programs = Programs::new(None);
        let connect = move || {
            let s = conns.pop();
            async move { s.ok_or_else(|| std::io::Error::other("no more")) }
        };
        let g = grind(connect, &mut buf, &[], &programs, Instant::now() + Duration::from_secs(5)).await;
        let list = g.portmap.expect("the list's whole entries");
        assert!(!list.is_empty() && list.len() < 100, "{}", list.len());
        // Its programs first, then rpcbind.
        assert_eq!(g.program.map(|p| p.number), Some(PORTMAP));
        assert_eq!(g.calls as usize, 1 + list.len() + WINDOW);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_server_times_out_by_the_deadline() {
        let s = server(|_, _, _, _| None);
        let start = Instant::now();
        let g = run_on(s, 4096, Duration::from_millis(1500)).await;
        assert_eq!(g.failure, Some(Failure::Timeout));
        assert!(start.elapsed() <= Duration::from_millis(1600));
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickling_record_ends_by_the_deadline() {
        let (client, mut srv) = duplex(1 << 16);
        tokio::spawn(async move {
            let mut call = [0u8; 44];
            let _ = srv.read_exact(&mut call).await;
            let _ = srv.write_all(&0x8000_1000u32.to_be_bytes()).await;
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if srv.write_all(b"x").await.is_err() {
                    return;
                }
            }
        });
        let g = run_on(client, 8192, Duration::from_secs(2)).await;
        assert_eq!(g.failure, Some(Failure::Timeout));
    }

    #[tokio::test]
    async fn a_server_that_closes_after_each_call_gets_at_most_max_connects() {
        let mut conns: Vec<DuplexStream> = (0..10)
            .map(|_| {
                let (client, mut srv) = duplex(1024);
                tokio::spawn(async move {
                    let mut call = [0u8; 44];
                    let _ = srv.read_exact(&mut call).await;
                    // Closes without a word.
                });
                client
            })
            .collect();
        let mut made = 0;
        let mut buf = vec![0u8; 512];
        let programs = Programs::new(None);
        let g = {
            let connect = || {
                made += 1;
                let s = conns.pop();
                async move { s.ok_or_else(|| std::io::Error::other("no more")) }
            };
            grind(connect, &mut buf, &[], &programs, Instant::now() + Duration::from_secs(5)).await
        };
        assert!(g.program.is_none() && g.failure.is_some());
        assert!(made <= MAX_CONNECTS, "{made} connections");
    }

    #[test]
    fn shared_lists_are_bounded_and_give_the_programs_at_a_port() {
        let s = Shared::with_programs(Programs::new(None));
        let ip: IpAddr = "198.18.0.5".parse().unwrap();
        s.keep(ip, &[Mapping { program: 100_005, version: 3, protocol: 6, port: 20048 }]);
        assert_eq!(s.listed_at(ip, 20048), vec![100_005]);
        assert!(s.listed_at(ip, 111).is_empty());
        for i in 0..(MAX_HOSTS as u32 + 10) {
            s.keep(IpAddr::from(i.to_be_bytes()), &[]);
        }
        assert_eq!(s.lists.lock().unwrap().len(), MAX_HOSTS);
    }
}
