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
//! recorded, and a replayed run gets `nil, why` from them.

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
            return Err(Error::new(ErrorKind::Io, "socket is closed"));
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
            return Err(Error::new(ErrorKind::Io, "socket is closed"));
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
            return (Err(Error::new(ErrorKind::Io, "socket is closed")), 0);
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

/// Reads DIR/recording.json.
pub fn load(dir: &std::path::Path) -> Result<Recording> {
    let path = dir.join("recording.json");
    let bytes = crate::files::read_capped(&path, MAX_RECORDING, "recording")?;
    let bad = |e: serde_json::Error| {
        Error::with_source(ErrorKind::Config, format!("{}: not a recording: {e}", path.display()), e)
    };
    // The version first: a newer format says so, not which field it lacks.
    #[derive(Deserialize)]
    struct Version {
        version: u32,
    }
    let v: Version = serde_json::from_slice(&bytes).map_err(bad)?;
    if v.version != 1 {
        let why = format!("{}: recording version {} (this build reads 1)", path.display(), v.version);
        return Err(Error::new(ErrorKind::Config, why));
    }
    serde_json::from_slice(&bytes).map_err(bad)
}

/// Writes DIR/recording.json (DIR made if need be).
pub fn save(dir: &std::path::Path, r: &Recording) -> Result<()> {
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
