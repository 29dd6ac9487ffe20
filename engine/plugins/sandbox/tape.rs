//! Recorded conversations: `moonscan plugins test FILE --record DIR` keeps
//! every socket exchange of a run against a live target, `--replay DIR`
//! runs the plugin again offline against them.
//!
//! In: a run's sockets (`ctx:connect`, `ctx.http`, `ctx:udp`) while
//! recording; a recording while replaying. Out: the [`Recording`] (written
//! as DIR/recording.json), or the recorded bytes handed to the plugin's
//! reads. What always holds: a replayed run never touches the network (its
//! guard is offline; the sockets it opens are the recording's, in order,
//! each for the transport and port the plugin asks for); what the plugin
//! sends must be what was recorded, or the send fails saying where the
//! conversation parted; reads are still charged to the read budget. The
//! host's own protocol helpers (ctx.ssh, ctx:tls_enum, ctx:server_hello,
//! ctx:ssh_auth_methods) speak to the server themselves: they are not
//! recorded, and a replayed run gets `nil, why` from them. A recording
//! holds at most [`MAX_SOCKETS`] sockets, [`MAX_STEPS`] steps,
//! [`MAX_CERTIFICATES`] certificates and [`MAX_NAMES`] alternative names
//! (counted as the file streams by, before anything is built from it: a
//! hostile file is refused in memory that does not grow with it), and a
//! run that recorded more is not saved.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result};
use crate::findings::TlsInfo;

/// Bytes as base64 in the recording's JSON.
mod b64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// Most bytes one recording may hold (a run reads at most its read budget).
pub const MAX_RECORDING: u64 = 64 << 20;

/// Most sockets one recording holds: a run opens at most its socket budget
/// (`plugins test` runs with the default, 16; refused opens count too).
pub const MAX_SOCKETS: u64 = 1_024;

/// Most steps (sends, reads, ends, failures, upgrades) of all its sockets
/// together: each read or send moves at least one byte of a run's budgets
/// (4 MiB read, 4 MiB sent), and real runs record tens to thousands; this
/// is 16 bytes a step at both budgets' end, about 12 MiB of steps in memory.
pub const MAX_STEPS: u64 = 1 << 18;

/// Most certificate summaries of all its TLS sessions together (a chain
/// is a handful; one per socket and upgrade).
pub const MAX_CERTIFICATES: u64 = 4_096;

/// Most subject alternative names of all those certificates.
pub const MAX_NAMES: u64 = 1 << 16;

/// What a run saw: the port it ran on, and each socket's exchange in the
/// order the sockets were opened.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Recording {
    /// The format's version (1).
    pub version: u32,
    /// The plugin's id.
    pub plugin: String,
    pub ip: std::net::IpAddr,
    pub port: u16,
    /// "tcp" or "udp".
    pub protocol: String,
    pub service: Option<String>,
    #[serde(with = "b64")]
    pub banner: Vec<u8>,
    /// What service detection read of the TLS session (ctx.tls), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsInfo>,
    pub sockets: Vec<Exchange>,
}

/// One socket's conversation.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Exchange {
    /// "tcp" or "udp".
    pub transport: String,
    pub port: u16,
    /// Opened with `tls`.
    #[serde(default)]
    pub tls_asked: bool,
    /// The TLS session of a socket opened with `tls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsInfo>,
    /// Why the socket did not open (then there are no steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_error: Option<String>,
    pub steps: Vec<Step>,
}

/// One thing that happened on a socket.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Step {
    /// The plugin sent these bytes (one datagram, on UDP).
    Send {
        #[serde(with = "b64")]
        data: Vec<u8>,
    },
    /// A read returned these bytes (one datagram, on UDP).
    Recv {
        #[serde(with = "b64")]
        data: Vec<u8>,
    },
    /// The peer closed the connection.
    End,
    /// A read (or, with `send`, a send) failed: a timeout, a reset, a port
    /// unreachable.
    Fail {
        error: String,
        #[serde(default)]
        timeout: bool,
        #[serde(default)]
        send: bool,
    },
    /// `sock:starttls()`: its TLS session, or why it failed, and the bytes
    /// its exchange read (charged again when replayed).
    Starttls {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tls: Option<Box<TlsInfo>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        #[serde(default)]
        read: usize,
    },
}

impl Step {
    /// A failed read, or send.
    pub(crate) fn failed(e: &Error, send: bool) -> Step {
        Step::Fail { error: e.to_string(), timeout: e.kind() == ErrorKind::Timeout, send }
    }

    fn error(error: String, timeout: bool) -> Error {
        Error::new(if timeout { ErrorKind::Timeout } else { ErrorKind::Io }, error)
    }
}

/// What a run does with its sockets' conversations.
pub enum Tape {
    /// Keeps them (each socket's exchange, shared with its socket).
    Record(Mutex<Vec<Arc<Mutex<Exchange>>>>),
    /// Hands them out, in order.
    Replay(Mutex<VecDeque<Exchange>>),
}

impl Tape {
    pub fn record() -> Tape {
        Tape::Record(Mutex::new(Vec::new()))
    }

    pub fn replay(r: &Recording) -> Tape {
        Tape::Replay(Mutex::new(r.sockets.iter().cloned().collect()))
    }

    /// The exchanges recorded so far.
    pub fn recorded(&self) -> Vec<Exchange> {
        match self {
            Tape::Record(all) => all
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|x| x.lock().unwrap_or_else(|e| e.into_inner()).clone())
                .collect(),
            Tape::Replay(_) => Vec::new(),
        }
    }

    pub fn replaying(&self) -> bool {
        matches!(self, Tape::Replay(_))
    }

    /// A new socket's part: a fresh exchange to record into, or the next
    /// recorded one, which must be for `transport`, `port` and `tls_asked`
    /// (a recorded open that failed fails again, with its error).
    pub(super) fn open(&self, transport: &str, port: u16, tls_asked: bool, tls: Option<TlsInfo>) -> Result<SocketTape> {
        match self {
            Tape::Record(all) => {
                let x = Exchange { transport: transport.into(), port, tls_asked, tls, ..Exchange::default() };
                let x = Arc::new(Mutex::new(x));
                all.lock().unwrap_or_else(|e| e.into_inner()).push(x.clone());
                Ok(SocketTape::Record(x))
            }
            Tape::Replay(left) => {
                let mut left = left.lock().unwrap_or_else(|e| e.into_inner());
                let parted = |why: String| Error::new(ErrorKind::Protocol, format!("replay: {why}"));
                let tls_word = |t: bool| if t { " with TLS" } else { "" };
                let Some(next) = left.front() else {
                    return Err(parted(format!("the recording has no more sockets (this one is {transport}/{port})")));
                };
                if next.transport != transport || next.port != port || next.tls_asked != tls_asked {
                    return Err(parted(format!(
                        "the recording's next socket is {}/{}{}, not {transport}/{port}{}",
                        next.transport,
                        next.port,
                        tls_word(next.tls_asked),
                        tls_word(tls_asked)
                    )));
                }
                let next = left.pop_front().unwrap_or_default();
                if let Some(e) = next.open_error {
                    return Err(Error::new(ErrorKind::Io, e));
                }
                Ok(SocketTape::Replay { tls: next.tls.map(Box::new), steps: next.steps.into(), taken: 0, open: true })
            }
        }
    }

    /// Records an open that failed (recording only).
    pub(super) fn open_failed(&self, transport: &str, port: u16, tls_asked: bool, e: &Error) {
        if let Tape::Record(all) = self {
            let x = Exchange {
                transport: transport.into(),
                port,
                tls_asked,
                open_error: Some(e.to_string()),
                ..Exchange::default()
            };
            all.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::new(Mutex::new(x)));
        }
    }
}

/// One socket's part of a tape.
pub(crate) enum SocketTape {
    Record(Arc<Mutex<Exchange>>),
    Replay {
        tls: Option<Box<TlsInfo>>,
        steps: VecDeque<Step>,
        /// Steps taken (for saying where a conversation parted).
        taken: usize,
        open: bool,
    },
}

impl SocketTape {
    /// Records a step (recording only).
    pub(crate) fn note(&self, step: Step) {
        if let SocketTape::Record(x) = self {
            x.lock().unwrap_or_else(|e| e.into_inner()).steps.push(step);
        }
    }

    /// The recorded TLS session of a replayed socket.
    pub(crate) fn tls(&self) -> Option<TlsInfo> {
        match self {
            SocketTape::Replay { tls, .. } => tls.as_deref().cloned(),
            SocketTape::Record(_) => None,
        }
    }

    /// Replays a send: it must be the next step and carry the same bytes.
    pub(crate) fn replay_send(&mut self, data: &[u8]) -> Result<()> {
        let SocketTape::Replay { steps, taken, open, .. } = self else { return Ok(()) };
        if !*open {
            return Err(super::failure::closed());
        }
        let at = *taken + 1;
        let parted = |why: String| Error::new(ErrorKind::Protocol, format!("replay: step {at}: {why}"));
        let r = match steps.pop_front() {
            Some(Step::Send { data: want }) if want == data => Ok(()),
            Some(Step::Send { data: want }) => Err(parted(format!(
                "the plugin sent {} bytes ({}) where the recording sent {} bytes ({})",
                data.len(),
                preview(data),
                want.len(),
                preview(&want)
            ))),
            Some(Step::Fail { error, timeout, send: true }) => Err(Step::error(error, timeout)),
            Some(other) => {
                let what = describe(&other);
                steps.push_front(other);
                return Err(parted(format!("the plugin sent where the recording has {what}")));
            }
            None => return Err(parted("the plugin sent past the end of the recording".into())),
        };
        *taken += 1;
        r
    }

    /// Replays a read of at most `max` bytes into `out`: the next recorded
    /// bytes (what is left of them stays for the next read), 0 at the end.
    pub(crate) fn replay_read(&mut self, max: usize, out: &mut Vec<u8>) -> Result<usize> {
        let SocketTape::Replay { steps, taken, open, .. } = self else { return Ok(0) };
        if !*open {
            return Err(super::failure::closed());
        }
        let at = *taken + 1;
        match steps.pop_front() {
            Some(Step::Recv { mut data }) => {
                if data.len() > max {
                    // The rest stays, as the same step.
                    let rest = data.split_off(max);
                    steps.push_front(Step::Recv { data: rest });
                } else {
                    *taken += 1;
                }
                out.extend_from_slice(&data);
                Ok(data.len())
            }
            Some(Step::End) => {
                // The end stays the end.
                steps.push_front(Step::End);
                Ok(0)
            }
            None => Ok(0),
            Some(Step::Fail { error, timeout, send: false }) => {
                *taken += 1;
                Err(Step::error(error, timeout))
            }
            Some(other) => {
                let what = describe(&other);
                steps.push_front(other);
                Err(Error::new(
                    ErrorKind::Protocol,
                    format!("replay: step {at}: the plugin read where the recording has {what}"),
                ))
            }
        }
    }

    /// Replays a `sock:starttls()`: its session and the bytes its exchange
    /// read, or why it failed (with those bytes).
    pub(crate) fn replay_starttls(&mut self) -> (Result<Option<TlsInfo>>, usize) {
        let SocketTape::Replay { steps, taken, open, .. } = self else { return (Ok(None), 0) };
        if !*open {
            return (Err(super::failure::closed()), 0);
        }
        let r = match steps.pop_front() {
            Some(Step::Starttls { tls, error: None, read }) => (Ok(tls.map(|t| *t)), read),
            Some(Step::Starttls { error: Some(e), read, .. }) => (Err(Error::new(ErrorKind::Protocol, e)), read),
            Some(other) => {
                let what = describe(&other);
                steps.push_front(other);
                let why = format!("replay: the plugin asked for STARTTLS where the recording has {what}");
                return (Err(Error::new(ErrorKind::Protocol, why)), 0);
            }
            None => return (Err(Error::new(ErrorKind::Protocol, "replay: STARTTLS past the end of the recording")), 0),
        };
        *taken += 1;
        r
    }

    pub(crate) fn close(&mut self) {
        if let SocketTape::Replay { open, .. } = self {
            *open = false;
        }
    }
}

fn describe(s: &Step) -> String {
    match s {
        Step::Send { data } => format!("a send of {} bytes", data.len()),
        Step::Recv { data } => format!("a read of {} bytes", data.len()),
        Step::End => "the end of the connection".into(),
        Step::Fail { error, .. } => format!("a failure ({error})"),
        Step::Starttls { .. } => "STARTTLS".into(),
    }
}

/// The first bytes of `b`, escaped, for an error message.
fn preview(b: &[u8]) -> String {
    let head: String = b.iter().take(24).flat_map(|&c| std::ascii::escape_default(c)).map(char::from).collect();
    if b.len() > 24 {
        format!("\"{head}...\"")
    } else {
        format!("\"{head}\"")
    }
}

/// How much of each kind a recording holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    sockets: u64,
    steps: u64,
    certificates: u64,
    names: u64,
}

impl Tally {
    fn add(self, o: Tally) -> Tally {
        Tally {
            sockets: self.sockets.saturating_add(o.sockets),
            steps: self.steps.saturating_add(o.steps),
            certificates: self.certificates.saturating_add(o.certificates),
            names: self.names.saturating_add(o.names),
        }
    }

    fn of_tls(t: Option<&TlsInfo>) -> Tally {
        let chain = t.map_or(&[][..], |t| &t.chain[..]);
        Tally {
            certificates: chain.len() as u64,
            names: chain.iter().map(|c| c.san.len() as u64).sum(),
            ..Tally::default()
        }
    }

    /// The counts of a recording made.
    fn of(r: &Recording) -> Tally {
        let mut t = Tally::of_tls(r.tls.as_ref()).add(Tally { sockets: r.sockets.len() as u64, ..Tally::default() });
        for x in &r.sockets {
            t = t.add(Tally::of_tls(x.tls.as_ref()));
            t = t.add(Tally { steps: x.steps.len() as u64, ..Tally::default() });
            for s in &x.steps {
                if let Step::Starttls { tls: Some(info), .. } = s {
                    t = t.add(Tally::of_tls(Some(info)));
                }
            }
        }
        t
    }

    /// What is past its cap, if anything is.
    fn over(&self) -> Option<String> {
        let caps = [
            (self.sockets, MAX_SOCKETS, "sockets"),
            (self.steps, MAX_STEPS, "steps"),
            (self.certificates, MAX_CERTIFICATES, "certificates"),
            (self.names, MAX_NAMES, "subject alternative names"),
        ];
        caps.iter()
            .find(|(n, max, _)| n > max)
            .map(|(_, max, what)| format!("more than {max} {what}, the most a recording holds"))
    }
}

/// The shape of a recording, read only to count what it holds: every
/// list is walked one element at a time and dropped, so counting a file
/// takes memory that does not grow with its lists (only with its longest
/// string), and stops at the first list whose count passes a cap.
mod shape {
    use std::marker::PhantomData;

    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use serde::Deserialize;

    use super::Tally;

    /// What one element adds to the count.
    pub(super) trait Counted {
        fn tally(&self) -> Tally;
    }

    /// A list, counted: the sum of its elements' tallies.
    pub(super) struct Many<T>(pub(super) Tally, PhantomData<T>);

    impl<T> Default for Many<T> {
        fn default() -> Self {
            Many(Tally::default(), PhantomData)
        }
    }

    impl<'de, T: Deserialize<'de> + Counted> Deserialize<'de> for Many<T> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Walk<T>(PhantomData<T>);
            impl<'de, T: Deserialize<'de> + Counted> Visitor<'de> for Walk<T> {
                type Value = Many<T>;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a list")
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Many<T>, A::Error> {
                    let mut sum = Tally::default();
                    while let Some(item) = seq.next_element::<T>()? {
                        sum = sum.add(item.tally());
                        // Past a cap the file is refused here, not read to its end.
                        if let Some(why) = sum.over() {
                            return Err(serde::de::Error::custom(why));
                        }
                    }
                    Ok(Many(sum, PhantomData))
                }
            }
            d.deserialize_seq(Walk(PhantomData))
        }
    }

    /// A whole recording, counted; its version kept in `version` as soon
    /// as it is read, and the count stopped there if it is not 1 (a newer
    /// format says so, not which field it lacks).
    pub(super) struct Recording<'a> {
        pub(super) version: &'a std::cell::Cell<Option<u32>>,
    }

    impl<'de> DeserializeSeed<'de> for Recording<'_> {
        type Value = Tally;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Tally, D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for Recording<'_> {
        type Value = Tally;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a recording")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tally, A::Error> {
            let mut sum = Tally::default();
            while let Some(key) = map.next_key::<String>()? {
                match key.as_str() {
                    "version" => {
                        let v = map.next_value::<u32>()?;
                        self.version.set(Some(v));
                        if v != 1 {
                            return Err(serde::de::Error::custom("a version this build does not read"));
                        }
                    }
                    "tls" => {
                        sum = sum.add(map.next_value::<Option<Tls>>()?.as_ref().map(Tls::tally).unwrap_or_default())
                    }
                    "sockets" => sum = sum.add(map.next_value::<Many<Socket>>()?.0),
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                if let Some(why) = sum.over() {
                    return Err(serde::de::Error::custom(why));
                }
            }
            Ok(sum)
        }
    }

    #[derive(Deserialize)]
    struct Socket {
        #[serde(default)]
        tls: Option<Tls>,
        #[serde(default)]
        steps: Many<Step>,
    }

    impl Counted for Socket {
        fn tally(&self) -> Tally {
            let me = Tally { sockets: 1, ..Tally::default() };
            me.add(self.tls.as_ref().map(Tls::tally).unwrap_or_default()).add(self.steps.0)
        }
    }

    #[derive(Deserialize)]
    struct Step {
        #[serde(default)]
        tls: Option<Tls>,
    }

    impl Counted for Step {
        fn tally(&self) -> Tally {
            let me = Tally { steps: 1, ..Tally::default() };
            me.add(self.tls.as_ref().map(Tls::tally).unwrap_or_default())
        }
    }

    #[derive(Deserialize)]
    struct Tls {
        #[serde(default)]
        chain: Many<Certificate>,
    }

    impl Counted for Tls {
        fn tally(&self) -> Tally {
            self.chain.0
        }
    }

    #[derive(Deserialize)]
    struct Certificate {
        #[serde(default)]
        san: Many<Name>,
    }

    impl Counted for Certificate {
        fn tally(&self) -> Tally {
            Tally { certificates: 1, ..Tally::default() }.add(self.san.0)
        }
    }

    #[derive(Deserialize)]
    struct Name(IgnoredAny);

    impl Counted for Name {
        fn tally(&self) -> Tally {
            Tally { names: 1, ..Tally::default() }
        }
    }
}

/// A file read through a cap: past `left` bytes, an error.
struct Capped<R> {
    inner: R,
    left: u64,
}

impl<R: std::io::Read> std::io::Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self.left.checked_sub(n as u64).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("larger than {MAX_RECORDING} bytes"))
        })?;
        Ok(n)
    }
}

/// Reads DIR/recording.json: its version, then what it holds counted
/// against the caps, then (only within them) the recording itself, each
/// pass streaming from the same open file.
pub fn load(dir: &std::path::Path) -> Result<Recording> {
    use std::io::{BufReader, Seek};
    let path = dir.join("recording.json");
    let io = |e: std::io::Error| Error::with_source(ErrorKind::Config, format!("recording {}: {e}", path.display()), e);
    let mut file = std::fs::File::open(&path).map_err(io)?;
    let bad = |e: serde_json::Error| {
        Error::with_source(ErrorKind::Config, format!("{}: not a recording: {e}", path.display()), e)
    };
    fn pass(file: &mut std::fs::File) -> std::io::Result<BufReader<Capped<&mut std::fs::File>>> {
        file.rewind()?;
        Ok(BufReader::with_capacity(64 << 10, Capped { inner: file, left: MAX_RECORDING }))
    }
    // Counted first, the version with it: a newer format says so, not which
    // field it lacks, and a file past a cap is refused before it is built.
    let version = std::cell::Cell::new(None);
    let mut de = serde_json::Deserializer::from_reader(pass(&mut file).map_err(io)?);
    let counted = serde::de::DeserializeSeed::deserialize(shape::Recording { version: &version }, &mut de)
        .and_then(|t| de.end().map(|()| t));
    match (version.get(), counted) {
        (Some(v), _) if v != 1 => {
            let why = format!("{}: recording version {v} (this build reads 1)", path.display());
            return Err(Error::new(ErrorKind::Config, why));
        }
        // What it is not is said by the reading that builds it.
        (_, Err(e)) if e.is_syntax() || e.is_eof() || e.is_io() => return Err(bad(e)),
        (_, Err(e)) => {
            return Err(Error::with_source(ErrorKind::Config, format!("{}: refused: {e}", path.display()), e))
        }
        (_, Ok(_)) => {}
    }
    serde_json::from_reader(pass(&mut file).map_err(io)?).map_err(bad)
}

/// Writes DIR/recording.json (DIR made if need be); a run that recorded
/// more than a recording holds is not saved (it could not be replayed).
pub fn save(dir: &std::path::Path, r: &Recording) -> Result<()> {
    if let Some(why) = Tally::of(r).over() {
        return Err(Error::new(ErrorKind::Budget, format!("the run recorded {why}; not saved")));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::with_source(ErrorKind::Io, format!("cannot make {}", dir.display()), e))?;
    let json =
        serde_json::to_vec_pretty(r).map_err(|e| Error::with_source(ErrorKind::Io, "cannot write the recording", e))?;
    crate::files::write_atomic(&dir.join("recording.json"), &json)
}

/// The base64 of `b` (for tests and tools).
pub fn encode(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replayed(steps: Vec<Step>) -> SocketTape {
        let x = Exchange { transport: "tcp".into(), port: 80, steps, ..Exchange::default() };
        Tape::Replay(Mutex::new(VecDeque::from([x]))).open("tcp", 80, false, None).unwrap()
    }

    #[test]
    fn a_replay_hands_out_recorded_reads_in_pieces_and_checks_sends() {
        let mut s = replayed(vec![
            Step::Recv { data: b"220 hello\r\n".to_vec() },
            Step::Send { data: b"QUIT\r\n".to_vec() },
            Step::Recv { data: b"221 bye\r\n".to_vec() },
            Step::End,
        ]);
        let mut out = Vec::new();
        assert_eq!(s.replay_read(4, &mut out).unwrap(), 4);
        assert_eq!(s.replay_read(100, &mut out).unwrap(), 7);
        assert_eq!(out, b"220 hello\r\n");
        // A read where the recording sent says so, and leaves the step.
        let e = s.replay_read(100, &mut out).unwrap_err().to_string();
        assert!(e.contains("step 2: the plugin read where the recording has a send of 6 bytes"), "{e}");
        let e = s.replay_send(b"HELP\r\n").unwrap_err().to_string();
        assert!(e.contains("step 2: the plugin sent 6 bytes (\"HELP\\r\\n\") where the recording sent 6 bytes"), "{e}");
        let mut s = replayed(vec![Step::Send { data: b"QUIT\r\n".to_vec() }, Step::End]);
        s.replay_send(b"QUIT\r\n").unwrap();
        assert_eq!(s.replay_read(10, &mut out).unwrap(), 0, "the end reads as 0");
        assert_eq!(s.replay_read(10, &mut out).unwrap(), 0, "and stays at the end");
        s.close();
        assert!(s.replay_send(b"x").is_err(), "closed");
    }

    #[test]
    fn sockets_must_come_in_the_recorded_order() {
        let x = |t: &str, p| Exchange { transport: t.into(), port: p, ..Exchange::default() };
        let failed = Exchange { open_error: Some("connection refused".into()), tls_asked: true, ..x("tcp", 443) };
        let tape = Tape::Replay(Mutex::new(VecDeque::from([x("udp", 161), x("tcp", 22), failed])));
        let e = tape.open("tcp", 22, false, None).err().unwrap().to_string();
        assert!(e.contains("next socket is udp/161, not tcp/22"), "{e}");
        // A socket that does not match is left for the one that does.
        tape.open("udp", 161, false, None).unwrap();
        tape.open("tcp", 22, false, None).unwrap();
        // Whether TLS was asked must match too; an open that failed fails again.
        let e = tape.open("tcp", 443, false, None).err().unwrap().to_string();
        assert!(e.contains("next socket is tcp/443 with TLS, not tcp/443"), "{e}");
        let e = tape.open("tcp", 443, true, None).err().unwrap().to_string();
        assert_eq!(e, "connection refused");
        assert!(tape.open("tcp", 22, false, None).err().unwrap().to_string().contains("no more sockets"));
    }

    #[test]
    fn a_failure_replays_as_its_kind() {
        let mut s = replayed(vec![Step::Fail { error: "Connection timed out".into(), timeout: true, send: false }]);
        let e = s.replay_read(10, &mut Vec::new()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Timeout);
    }

    /// A recording of `items` joined by commas between `pre` and `post`.
    fn hostile(pre: &str, item: &str, n: u64, post: &str) -> tempfile::TempDir {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(dir.path().join("recording.json")).unwrap();
        let mut w = std::io::BufWriter::new(f);
        write!(w, "{{\"version\":1,\"plugin\":\"t\",\"ip\":\"127.0.0.1\",\"port\":80,\"protocol\":\"tcp\",").unwrap();
        write!(w, "\"service\":null,\"banner\":\"\",{pre}").unwrap();
        for i in 0..n {
            w.write_all(if i == 0 { b"" } else { b"," }).unwrap();
            w.write_all(item.as_bytes()).unwrap();
        }
        w.write_all(post.as_bytes()).unwrap();
        w.flush().unwrap();
        dir
    }

    const SOCKET: &str = r#"{"transport":"tcp","port":80,"steps":[]}"#;
    const CERT: &str = r#"{"subject":"","issuer":"","not_before":"","not_after":"","serial":"","key_type":"",
        "key_bits":0,"signature_algorithm":"","self_signed":false,"sha256":""}"#;

    #[test]
    fn recordings_past_a_cap_are_refused_and_at_it_read() {
        let steps = |n| hostile(r#""sockets":[{"transport":"tcp","port":80,"steps":["#, r#"{"op":"end"}"#, n, "]}]}");
        let sockets = |n| hostile(r#""sockets":["#, SOCKET, n, "]}");
        // Certificates of every session count together: 2 sockets' chains.
        let certs = |n| {
            let socket = format!(
                r#"{{"transport":"tcp","port":443,"tls":{{"version":"","cipher":"","chain":[{}]}},"steps":[]}}"#,
                vec![CERT; n as usize].join(",")
            );
            hostile(r#""sockets":["#, &socket, 2, "]}")
        };
        let names = |n| {
            let cert = CERT.replace(
                "\"sha256\":\"\"",
                &format!("\"sha256\":\"\",\"san\":[{}]", vec!["\"DNS:a\""; n as usize].join(",")),
            );
            hostile(r#""tls":{"version":"","cipher":"","chain":["#, &cert, 1, "]},\"sockets\":[]}")
        };
        let refused = |d: tempfile::TempDir| load(d.path()).unwrap_err().to_string();
        type Make<'a> = &'a dyn Fn(u64) -> tempfile::TempDir;
        let cases: [(Make, u64, &str); 4] = [
            (&steps, MAX_STEPS, "more than 262144 steps"),
            (&sockets, MAX_SOCKETS, "more than 1024 sockets"),
            (&certs, MAX_CERTIFICATES / 2, "more than 4096 certificates"),
            (&names, MAX_NAMES, "more than 65536 subject alternative names"),
        ];
        for (make, at, why) in cases {
            let e = refused(make(at + 1));
            assert!(e.contains(&format!("refused: {why}, the most a recording holds")), "{e}");
            let r = load(make(at).path()).unwrap_or_else(|e| panic!("{why}: at the cap: {e}"));
            assert_eq!(Tally::of(&r).over(), None);
        }
        // A run that recorded past a cap is not saved.
        let mut r = load(sockets(MAX_SOCKETS).path()).unwrap();
        r.sockets.push(Exchange::default());
        let e = save(tempfile::tempdir().unwrap().path(), &r).unwrap_err().to_string();
        assert!(e.contains("the run recorded more than 1024 sockets"), "{e}");
    }

    #[test]
    fn recordings_round_trip_through_json() {
        let r = Recording {
            version: 1,
            plugin: "t".into(),
            ip: "198.18.0.2".parse().unwrap(),
            port: 6379,
            protocol: "tcp".into(),
            service: Some("redis".into()),
            banner: vec![0, 255, b'a'],
            tls: None,
            sockets: vec![Exchange {
                transport: "tcp".into(),
                port: 6379,
                steps: vec![Step::Send { data: b"INFO\r\n".to_vec() }, Step::Recv { data: vec![1, 2] }, Step::End],
                ..Exchange::default()
            }],
        };
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), &r).unwrap();
        let text = std::fs::read_to_string(dir.path().join("recording.json")).unwrap();
        assert!(text.contains("\"op\": \"send\"") && text.contains(&encode(b"INFO\r\n")), "{text}");
        let back = load(dir.path()).unwrap();
        assert_eq!((back.banner, back.sockets[0].steps.clone()), (r.banner, r.sockets[0].steps.clone()));
        std::fs::write(dir.path().join("recording.json"), "{\"version\": 2}").unwrap();
        let e = load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("recording version 2 (this build reads 1)"), "{e}");
    }
}
