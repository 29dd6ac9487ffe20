//! The detection scheduler of one port, one phase (in the clear, or
//! inside TLS): which probe goes when, and what the replies say, in
//! nmap's order. It does no I/O and reads no clock: detect.rs drives it,
//! and its tests drive it with canned replies on a made-up clock.
//!
//! In: the probe database, the port, the phase, the time as the driver
//! sees it ([`Plan::poll`]), each probe's reply ([`Plan::on_reply`]) or
//! why it could not be sent ([`Plan::on_unsent`]). Out: [`Step`]s (send
//! this probe, with this wait; stop waiting for that one), then an
//! [`End`] and a [`Phase`] report (the soft match, counts, banner, the
//! replies of a port no rule named).
//!
//! What always holds:
//! - Replies are judged one by one in probe order, whenever they came: the
//!   first hard match in that order wins, a soft match keeps only the
//!   probes that can say more about its service (replies of the others are
//!   dropped unread), the NULL probe's banner first of all.
//! - The NULL probe goes alone; once it has been silent for the banner
//!   grace (or was judged), the probes after it go side by side, at most
//!   [`WINDOW`] in flight and none more than [`AHEAD`] past the one being
//!   judged; each one sent ahead holds a buffer of the pool, so what a
//!   port holds is bounded whatever its replies.
//! - One buffer of the port's own carries the probe in turn (the NULL
//!   probe, a probe that could not be sent ahead for want of a buffer, a
//!   second try): a probe in turn never waits for the pool.
//! - A probe that could not be connected or sent ahead goes again in turn,
//!   once; a refused or timed-out connection in turn ends the phase.
//! - On a port no probe lists, the NULL probe listens its whole wait for a
//!   late banner (a server that waits for the client first, as sslh does,
//!   then speaks), but not on a port that answered a ClientHello with a
//!   TLS record: a TLS server never speaks first, so the NULL probe is cut
//!   there and the port goes on inside TLS at once.

use std::time::Duration;

use tokio::time::Instant;

use super::probes::{Probe, ProbeDb, Transport};
use super::rules::Identity;
use crate::findings::ProbeReply;

/// Most probes in flight at once on one port (sent ahead, not yet back).
pub const WINDOW: usize = 32;

/// Furthest past the probe being judged that one is sent: with [`WINDOW`],
/// bounds the pool buffers one port holds, in flight or back and waiting
/// for its turn.
pub const AHEAD: usize = 40;

/// Most bytes of a response kept as the banner.
pub const BANNER_MAX: usize = 512;

/// Most replies kept for a port's fingerprint, and bytes of each.
pub const MAX_REPLIES: usize = 16;

/// How a probe's reply ended, as the driver read it.
#[derive(Debug)]
pub enum Reply {
    /// Closed at once with nothing said, where the probe says `tcpwrapped_ms`.
    Wrapped,
    /// `len` bytes read into the buffer; `open` if the connection is still
    /// usable; `hard` if a rule matched a complete line while reading.
    Data { len: usize, open: bool, hard: Option<Box<Identity>> },
}

/// Why a probe was not sent.
#[derive(Debug)]
pub enum Unsent {
    /// Ahead, and no pool buffer was free: it goes in turn.
    NoBuffer,
    /// The connection or the send failed; `fatal` when the port refused or
    /// did not answer (no point trying more probes).
    Failed { fatal: bool, why: String },
}

/// What the driver is asked to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send the `at`th probe of [`Plan::order`] and read its reply for at
    /// most `wait`: on the port's own buffer when `in_turn` (else a pool
    /// buffer, if one is free), on the connection the NULL probe left open
    /// when `reuse` (if it is still there).
    Send { at: usize, wait: Duration, in_turn: bool, reuse: bool },
    /// Stop reading the `at`th probe's reply if nothing has come yet.
    Cut { at: usize },
}

/// How the phase ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// A hard match: the service, by the probe that found it.
    Hard { id: Identity, probe: String },
    /// A reply in the clear started like a TLS record: probe inside TLS.
    Tls,
    /// Every probe judged, none decided (a soft match may have named it).
    Exhausted,
    /// The port refused or stopped answering; the reason.
    Failed(String),
    /// The port's time ran out.
    Deadline,
}

/// What a phase learned, beside its end.
#[derive(Debug, Default)]
pub struct Phase {
    /// The soft match (an earlier phase's, or this one's first).
    pub soft: Option<Identity>,
    /// The probe of this phase's soft match, if it found it.
    pub soft_probe: Option<String>,
    /// Probes judged (the NULL probe counts: it costs a connection).
    pub probes_sent: u32,
    pub bytes_read: u64,
    /// The NULL probe's reply, if it got one.
    pub banner: Vec<u8>,
    /// What each probe that got a reply got, in order, bounded.
    pub replies: Vec<ProbeReply>,
    /// The last connection error, if any.
    pub error: Option<String>,
}

enum Slot<B> {
    /// Not sent yet.
    Later,
    /// Sent: `ahead` of its turn (on a pool buffer), or in turn (on the
    /// port's own); `retry` if a second try.
    Flying { retry: bool, ahead: bool },
    /// Back with a reply that may decide, waiting for its turn to be judged.
    Got(Reply, B),
    /// Back with a reply no rule can take whatever comes before it (silence,
    /// or bytes nothing matches): its buffer went back at once; `data`
    /// keeps what the fingerprint may want of it.
    Seen { len: usize, open: bool, data: Vec<u8> },
    /// Not sent ahead (no buffer, or it failed): goes in turn.
    Again { retry: bool, failed: Option<(bool, String)> },
    /// Judged, or ruled out by a soft match.
    Done,
}

/// The scheduler of one port's phase; `B` is the driver's buffer type.
pub struct Plan<'d, B> {
    db: &'d ProbeDb,
    null: Option<usize>,
    /// Indices into `db.probes()`, in the order they are judged.
    order: Vec<usize>,
    slots: Vec<Slot<B>>,
    /// The next slot to judge.
    cur: usize,
    /// The next slot to consider sending ahead.
    next_ahead: usize,
    side_by_side: bool,
    /// Sent ahead and still wanted, not back yet.
    flying_ahead: usize,
    /// A pool buffer was missing: send no more ahead until a reply frees one.
    starved: bool,
    /// The NULL probe ended silent on an open connection: the next probe
    /// sent may carry on it.
    carry: bool,
    tunnel: bool,
    some_listed: bool,
    grace: Duration,
    deadline: Instant,
    /// When the NULL probe went (its banner grace runs from there).
    null_sent: Option<Instant>,
    /// Set when a ClientHello was answered with a TLS record: cut the NULL probe.
    cut_null: bool,
    cut_sent: bool,
    steps: Vec<Step>,
    end: Option<End>,
    phase: Phase,
    /// The buffer of the last reply judged: the next probe in turn's.
    spare: Option<B>,
    /// Replies back and not judged yet whose bytes are kept (for the
    /// fingerprint): with those judged, at most [`MAX_REPLIES`].
    copies: usize,
}

impl<'d, B: AsRef<[u8]>> Plan<'d, B> {
    /// The plan of one phase on `port`: nmap's order (the NULL probe unless
    /// the server is known to wait for the client, the probes that list
    /// the port by rarity, then the others up to `intensity`). `soft` is
    /// an earlier phase's soft match; `carried`: the driver holds an open
    /// connection the first probe in turn may go on (the handshaken one of
    /// a TLS phase).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        db: &'d ProbeDb,
        port: u16,
        tunnel: bool,
        client_first: bool,
        intensity: u8,
        grace: Duration,
        deadline: Instant,
        soft: Option<Identity>,
        carried: bool,
    ) -> Plan<'d, B> {
        let probes = db.probes();
        let null = probes.iter().position(|p| p.transport == Transport::Tcp && p.payload.is_empty());
        let lists = |p: &Probe| if tunnel { p.tls_ports.contains(&port) } else { p.ports.contains(&port) };
        let tcp = || probes.iter().enumerate().filter(|(_, p)| p.transport == Transport::Tcp);
        let mut order: Vec<usize> =
            tcp().filter(|(_, p)| p.payload.is_empty() && !client_first).map(|(i, _)| i).take(1).collect();
        // A port known to be TLS that rustls could not talk to: ClientHello
        // probes can only say "ssl" again; the others may say what runs
        // inside (a web server answering plain HTTP with an error page).
        let fits = |p: &Probe| !(p.payload.is_empty() || client_first && looks_like_tls(&p.payload));
        let mut listed: Vec<usize> = tcp().filter(|(_, p)| fits(p) && lists(p)).map(|(i, _)| i).collect();
        listed.sort_by_key(|&i| probes[i].rarity);
        let mut rest: Vec<usize> =
            tcp().filter(|(_, p)| fits(p) && !lists(p) && p.rarity <= intensity).map(|(i, _)| i).collect();
        rest.sort_by_key(|&i| probes[i].rarity);
        let some_listed = !listed.is_empty();
        order.extend(listed);
        order.extend(rest);
        let mut plan = Plan {
            db,
            null,
            slots: order.iter().map(|_| Slot::Later).collect(),
            order,
            cur: 0,
            next_ahead: 0,
            side_by_side: false,
            flying_ahead: 0,
            starved: false,
            carry: carried,
            tunnel,
            some_listed,
            grace,
            deadline,
            null_sent: None,
            cut_null: false,
            cut_sent: false,
            steps: Vec::new(),
            end: None,
            phase: Phase { soft, ..Phase::default() },
            spare: None,
            copies: 0,
        };
        plan.rule_out();
        plan
    }

    /// The probes of this phase, in order (indices into the database).
    #[cfg(test)]
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// The `at`th probe of the order.
    pub fn probe(&self, at: usize) -> &'d Probe {
        &self.db.probes()[self.order[at]]
    }

    /// The soft match so far: the service only its rules may now decide.
    pub fn soft(&self) -> Option<&str> {
        self.phase.soft.as_ref().map(|s| s.service.as_str())
    }

    /// Whether the connection the NULL probe left open is still wanted.
    pub fn carrying(&self) -> bool {
        self.carry
    }

    /// How the phase ended, once it has.
    pub fn end(&self) -> Option<&End> {
        self.end.as_ref()
    }

    /// The phase's end and what it learned (the end is `Deadline` if it
    /// had not ended).
    pub fn finish(self) -> (End, Phase) {
        (self.end.unwrap_or(End::Deadline), self.phase)
    }

    /// When to be polled again if nothing comes back before: the end of the
    /// NULL probe's banner grace, or the port's deadline.
    pub fn next_wakeup(&self) -> Instant {
        match self.null_sent {
            Some(at)
                if !self.side_by_side
                    && !self.some_listed
                    && matches!(self.slots.first(), Some(Slot::Flying { .. })) =>
            {
                (at + self.grace).min(self.deadline)
            }
            _ => self.deadline,
        }
    }

    /// Judges what can be judged and says what to do next.
    pub fn poll(&mut self, now: Instant) -> Vec<Step> {
        if self.end.is_some() {
            return Vec::new();
        }
        if now >= self.deadline {
            // What came back by the deadline is still judged; nothing more goes.
            self.judge_in_order(now, false);
            self.end.get_or_insert(End::Deadline);
            self.steps.clear();
            return Vec::new();
        }
        // On a port a probe lists the NULL probe's own wait is the grace:
        // its silence, when it comes back, hands its connection on.
        if let (Some(sent), false) = (self.null_sent, self.some_listed) {
            if !self.side_by_side && now >= sent + self.grace {
                self.side_by_side = true;
            }
        }
        self.judge_in_order(now, true);
        if self.end.is_none() {
            self.top_up(now);
            if self.cut_null && !self.cut_sent && self.cur == 0 && self.is_null(0) {
                if let Some(Slot::Flying { .. }) = self.slots.first() {
                    self.cut_sent = true;
                    self.steps.push(Step::Cut { at: 0 });
                }
            }
        }
        std::mem::take(&mut self.steps)
    }

    /// The `at`th probe's reply, in the buffer it was read into.
    pub fn on_reply(&mut self, at: usize, reply: Reply, buf: B) {
        let Some(&Slot::Flying { ahead, .. }) = self.slots.get(at) else {
            // Ruled out meanwhile: its reply is dropped unread.
            return;
        };
        // A ClientHello answered with a TLS record while the NULL probe
        // still listens: a TLS server, which never speaks first.
        if let Reply::Data { len, .. } = &reply {
            let sent = &self.probe(at).payload;
            let data = &buf.as_ref()[..(*len).min(buf.as_ref().len())];
            if !self.tunnel && looks_like_tls(sent) && looks_like_tls(data) {
                self.cut_null = true;
            }
        }
        // A reply that cannot decide gives its buffer back now (to be the
        // next probe in turn's, or the pool's), not when its turn comes:
        // on a port whose NULL probe listens on, the replies to the probes
        // sent meanwhile would hold the pool for the whole wait.
        self.slots[at] = match reply {
            Reply::Data { len, open, hard: None }
                if self.says_nothing(at, &buf.as_ref()[..len.min(buf.as_ref().len())]) =>
            {
                // Kept: the NULL probe's (the banner), and the others' while
                // the fingerprint has room for them.
                let room = self.phase.replies.len() + self.copies < MAX_REPLIES;
                let keep = if room || self.is_null(at) { len.min(buf.as_ref().len()).min(ProbeReply::MAX) } else { 0 };
                self.copies += usize::from(keep > 0);
                let data = buf.as_ref()[..keep].to_vec();
                self.spare.get_or_insert(buf);
                Slot::Seen { len, open, data }
            }
            reply => Slot::Got(reply, buf),
        };
        if ahead {
            self.flying_ahead = self.flying_ahead.saturating_sub(1);
        }
        self.starved = false;
    }

    /// The `at`th probe could not be sent.
    pub fn on_unsent(&mut self, at: usize, why: Unsent) {
        let Some(slot) = self.slots.get_mut(at) else { return };
        let Slot::Flying { retry, ahead } = *slot else { return };
        if ahead {
            self.flying_ahead = self.flying_ahead.saturating_sub(1);
        }
        *slot = match why {
            // No buffer to send it ahead: it goes when one is free (the
            // driver waits for the pool), or in turn, whichever is first.
            Unsent::NoBuffer => {
                self.starved = true;
                self.next_ahead = self.next_ahead.min(at);
                if retry {
                    Slot::Again { retry, failed: None }
                } else {
                    Slot::Later
                }
            }
            // Sent ahead and lost: once more in turn (a server that takes
            // one connection at a time). In turn: that was its last try.
            Unsent::Failed { .. } if ahead && !retry => Slot::Again { retry: true, failed: None },
            Unsent::Failed { fatal, why } => Slot::Again { retry: true, failed: Some((fatal, why)) },
        };
    }

    /// The buffer of a reply judged, for the next probe in turn (so a
    /// probe in turn never waits for the pool).
    pub fn take_spare(&mut self) -> Option<B> {
        self.spare.take()
    }

    /// Whether the `at`th probe is the NULL probe.
    pub fn is_null(&self, at: usize) -> bool {
        self.null.is_some_and(|n| self.order.get(at) == Some(&n))
    }

    /// Whether the soft match (if any) leaves the `at`th probe wanted.
    fn wanted(&self, at: usize) -> bool {
        let Some(soft) = &self.phase.soft else { return true };
        let p = self.probe(at);
        p.matches.iter().chain(&p.soft_matches).any(|r| r.service() == soft.service)
    }

    /// After a soft match: the probes that cannot say more are done.
    fn rule_out(&mut self) {
        for at in self.cur..self.slots.len() {
            if self.wanted(at) {
                continue;
            }
            if matches!(self.slots[at], Slot::Flying { ahead: true, .. }) {
                self.flying_ahead = self.flying_ahead.saturating_sub(1);
            }
            self.slots[at] = Slot::Done;
        }
    }

    /// The wait of the `at`th probe.
    fn wait(&self, at: usize, now: Instant) -> Duration {
        let wait = self.probe(at).wait;
        if !self.is_null(at) {
            return wait;
        }
        if self.some_listed {
            return self.grace.min(wait);
        }
        // A quarter of what is left stays for judging the probes sent
        // meanwhile (a short --service-timeout, -T5).
        if self.order.len() > at + 1 {
            wait.min(self.deadline.saturating_duration_since(now) * 3 / 4)
        } else {
            wait
        }
    }

    fn send(&mut self, at: usize, in_turn: bool, retry: bool, now: Instant) {
        let wait = self.wait(at, now);
        let reuse = std::mem::take(&mut self.carry);
        if self.is_null(at) {
            self.null_sent = Some(now);
        }
        self.slots[at] = Slot::Flying { retry, ahead: !in_turn };
        if !in_turn {
            self.flying_ahead += 1;
        }
        self.steps.push(Step::Send { at, wait, in_turn, reuse });
    }

    /// Judges the replies back in order, up to the first still out; sends
    /// the next probe in turn if it has not gone (when `send`).
    fn judge_in_order(&mut self, now: Instant, send: bool) {
        while self.end.is_none() {
            let at = self.cur;
            if at >= self.slots.len() {
                self.end = Some(End::Exhausted);
                return;
            }
            if !send && matches!(self.slots[at], Slot::Later | Slot::Again { failed: None, .. }) {
                return;
            }
            match std::mem::replace(&mut self.slots[at], Slot::Done) {
                Slot::Done => self.cur += 1,
                Slot::Later => {
                    self.send(at, true, false, now);
                    return;
                }
                Slot::Again { retry, failed: None } => {
                    self.send(at, true, retry, now);
                    return;
                }
                Slot::Again { failed: Some((fatal, why)), .. } => {
                    self.phase.error = Some(why.clone());
                    if fatal {
                        self.end = Some(End::Failed(why));
                        return;
                    }
                    self.cur += 1;
                }
                flying @ Slot::Flying { .. } => {
                    self.slots[at] = flying;
                    return;
                }
                Slot::Got(reply, buf) => {
                    self.cur += 1;
                    self.judge(at, reply, buf.as_ref());
                    self.spare.get_or_insert(buf);
                }
                Slot::Seen { len, open, data } => {
                    self.cur += 1;
                    self.copies -= usize::from(!data.is_empty());
                    self.judge_data(at, len, open, None, &data, true);
                }
            }
        }
    }

    /// Sends probes ahead while the window has room.
    fn top_up(&mut self, now: Instant) {
        if !self.side_by_side {
            return;
        }
        self.next_ahead = self.next_ahead.max(self.cur + 1);
        while !self.starved
            && self.flying_ahead < WINDOW
            && self.next_ahead <= self.cur + AHEAD
            && self.next_ahead < self.slots.len()
        {
            let at = self.next_ahead;
            self.next_ahead += 1;
            if matches!(self.slots[at], Slot::Later) {
                self.send(at, false, false, now);
            }
        }
    }

    /// Whether no rule can take this reply, whatever soft match comes
    /// before it in order (a soft match only narrows the rules).
    fn says_nothing(&self, at: usize, data: &[u8]) -> bool {
        let probe = self.probe(at);
        let null = probe.payload.is_empty();
        data.is_empty()
            || !(!null && data == &probe.payload[..]
                || hard_match(self.db, self.null, probe, data, None).is_some()
                || !self.tunnel && looks_like_tls(data)
                || soft_match(self.db, self.null, probe, data).is_some())
    }

    /// The pool buffer a probe sent ahead needs is free again (or may be):
    /// probes may go ahead again.
    pub fn unstarve(&mut self) {
        self.starved = false;
    }

    /// Whether a probe could not go ahead for want of a buffer.
    pub fn starved(&self) -> bool {
        self.starved
    }

    /// What one reply says, in order; ends the phase on a decision.
    fn judge(&mut self, at: usize, reply: Reply, buf: &[u8]) {
        match reply {
            Reply::Wrapped => {
                self.phase.probes_sent += 1;
                let id = Identity { service: "tcpwrapped".into(), ..Identity::default() };
                self.end = Some(End::Hard { id, probe: self.probe(at).name.clone() });
            }
            Reply::Data { len, open, hard } => self.judge_data(at, len, open, hard, &buf[..len.min(buf.len())], false),
        }
    }

    /// [`Plan::judge`] of `len` bytes read, of which `data` is kept (all,
    /// or the first [`ProbeReply::MAX`] of a reply that cannot decide).
    /// `seen`: no rule can take it (it was found so when it came, on all
    /// of it; `data` may be only its first bytes): only counted and kept.
    fn judge_data(&mut self, at: usize, len: usize, open: bool, early: Option<Box<Identity>>, data: &[u8], seen: bool) {
        let probe = self.probe(at);
        let null = probe.payload.is_empty();
        self.phase.probes_sent += 1;
        self.phase.bytes_read += len as u64;
        if null && self.phase.banner.is_empty() {
            self.phase.banner = data[..data.len().min(BANNER_MAX)].to_vec();
        }
        if !data.is_empty() && self.phase.replies.len() < MAX_REPLIES {
            let keep = data.len().min(ProbeReply::MAX);
            self.phase.replies.push(ProbeReply { probe: probe.name.clone(), data: data[..keep].to_vec() });
        }
        let decided = |id: Identity| Some(End::Hard { id, probe: probe.name.clone() });
        let soft = self.soft().map(str::to_string);
        // A hard match found while reading (before a soft match that came
        // from an earlier probe in order) counts only if it agrees with it.
        if let Some(id) = early.filter(|id| soft.as_deref().is_none_or(|s| s == id.service)) {
            self.end = decided(*id);
            return;
        }
        if len == 0 {
            // Silent: the probes after it go side by side from here on; a
            // silent NULL probe's open connection carries the next one.
            self.carry = null && open && matches!(self.slots.get(at + 1), Some(Slot::Later));
            self.side_by_side = true;
            return;
        }
        if seen {
            self.side_by_side = true;
            return;
        }
        // A reply that is the probe itself: an echo service (RFC 862), not
        // whatever the probe's rules would take its own bytes for.
        if !null && data == &probe.payload[..] {
            self.end = decided(Identity { service: "echo".into(), ..Identity::default() });
            return;
        }
        if let Some(id) = hard_match(self.db, self.null, probe, data, soft.as_deref()) {
            self.end = decided(id);
            return;
        }
        if !self.tunnel && looks_like_tls(data) {
            self.end = Some(End::Tls);
            return;
        }
        if self.phase.soft.is_none() {
            if let Some(id) = soft_match(self.db, self.null, probe, data) {
                self.phase.soft = Some(id);
                self.phase.soft_probe = Some(probe.name.clone());
                self.rule_out();
            }
        }
        self.side_by_side = true;
    }
}

/// The probes whose rules also apply to `probe`'s replies: its `fallback`
/// list in order, then the NULL probe (banners), each once.
pub fn fallbacks<'p>(db: &'p ProbeDb, null: Option<usize>, probe: &'p Probe) -> impl Iterator<Item = &'p Probe> {
    let named = probe.fallback.iter().filter_map(|n| db.get(n));
    let null = null.map(|i| &db.probes()[i]).filter(|n| !probe.fallback.contains(&n.name));
    named.chain(null).filter(move |f| f.name != probe.name)
}

/// The first of the probe's own rules, then its fallbacks', that matches;
/// after a soft match (`soft`) only rules for that service can decide.
pub fn hard_match(
    db: &ProbeDb,
    null: Option<usize>,
    probe: &Probe,
    data: &[u8],
    soft: Option<&str>,
) -> Option<Identity> {
    let rules = probe.matches.iter().chain(fallbacks(db, null, probe).flat_map(|f| f.matches.iter()));
    rules.filter(|r| soft.is_none_or(|s| r.service() == s)).find_map(|r| r.apply(data))
}

/// The first soft rule of the probe, then of its fallbacks, that matches.
fn soft_match(db: &ProbeDb, null: Option<usize>, probe: &Probe, data: &[u8]) -> Option<Identity> {
    let own = probe.soft_matches.iter();
    own.chain(fallbacks(db, null, probe).flat_map(|f| f.soft_matches.iter())).find_map(|r| r.apply(data))
}

/// A TLS record header: handshake (22) or alert (21), version 3.x.
pub(super) fn looks_like_tls(data: &[u8]) -> bool {
    data.len() >= 3 && matches!(data[0], 0x15 | 0x16) && data[1] == 3 && data[2] <= 4
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
