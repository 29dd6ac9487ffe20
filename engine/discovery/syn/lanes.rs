//! Hosts that rate-limit their ICMP errors, for the UDP scan.
//!
//! A closed UDP port says so with an ICMP port unreachable, and most
//! systems send few of those: Linux one a second to each peer after a
//! burst of six, so a fast scan sees six closed ports and silence for the
//! rest. The silence of a host that has said "closed" before may be that
//! limit, not an open|filtered port. Such a port is not given up after
//! its tries: it waits in its host's *lane*, and each lane sends one probe
//! at a time, [`INTERVAL`] apart (a little over Linux's one error a
//! second), so each probe finds the host with an error to spare. Many
//! hosts' lanes run side by side: one host's limit never slows another's.
//!
//! A limit that lets an error through at most once a second cannot be
//! asked faster without losing answers (what a scan gains by racing it,
//! it loses in closed ports taken for open|filtered), so the interval is
//! fixed rather than probed: a second a port is what such a host costs,
//! spent in parallel with every other host. A silent lane probe is asked
//! once more (a path's jitter, or the host's errors to the scan's other
//! probes, may have used its turn); four silent lane probes in a row end the lane:
//! its host's silence is real, and its ports are given up at once. No
//! I/O, the time passed in.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

/// Between two probes of a lane: Linux's default `icmp_ratelimit` (one
/// error a second to each peer) and a margin for the path's jitter.
pub const INTERVAL: Duration = Duration::from_millis(1050);
/// Silent lane probes in a row that end a lane.
const SILENT_LANE: u32 = 4;

#[derive(Debug)]
struct Lane {
    ports: VecDeque<u16>,
    /// The lane's probe out now.
    current: Option<u16>,
    next_at: Instant,
    answered: u32,
    /// Silent lane probes in a row.
    silent: u32,
    /// Ports asked again after a silence on trial (once each).
    again: HashSet<u16>,
    over: bool,
}

/// Every host's lane.
#[derive(Debug, Default)]
pub struct Lanes {
    /// Hosts that sent a port unreachable (trimmed by [`Lanes::trim`]).
    told: HashSet<u128>,
    lanes: HashMap<u128, Lane>,
    /// Hosts whose lane found real silence: their ports are not taken.
    ended: HashSet<u128>,
    due: BinaryHeap<Reverse<(Instant, u128)>>,
    /// Ports waiting in lanes (and lane probes out).
    waiting: usize,
}

impl Lanes {
    /// `host` said a port is closed.
    pub fn told(&mut self, host: u128) {
        self.told.insert(host);
    }

    /// Ports waiting in lanes, their probes out included.
    pub fn len(&self) -> usize {
        self.waiting
    }

    pub fn is_empty(&self) -> bool {
        self.waiting == 0
    }

    /// A port whose tries all went silent: true if it waits in its host's
    /// lane (the host has said "closed" before), false if its silence
    /// stands.
    pub fn take(&mut self, host: u128, port: u16, now: Instant) -> bool {
        if !self.told.contains(&host) || self.ended.contains(&host) {
            return false;
        }
        let lane = self.lanes.entry(host).or_insert_with(|| Lane {
            ports: VecDeque::new(),
            current: None,
            next_at: now,
            answered: 0,
            silent: 0,
            again: HashSet::new(),
            over: false,
        });
        if lane.over {
            return false;
        }
        if lane.ports.is_empty() && lane.current.is_none() {
            self.due.push(Reverse((lane.next_at.max(now), host)));
        }
        lane.ports.push_back(port);
        self.waiting += 1;
        true
    }

    /// The next lane probe due at `now`, if any: its host and port.
    pub fn next(&mut self, now: Instant) -> Option<(u128, u16)> {
        while let Some(&Reverse((at, host))) = self.due.peek() {
            if at > now {
                return None;
            }
            self.due.pop();
            let Some(lane) = self.lanes.get_mut(&host) else { continue };
            if lane.current.is_some() || lane.next_at > now {
                continue; // scheduled again when its probe is done
            }
            let Some(port) = lane.ports.pop_front() else { continue };
            lane.current = Some(port);
            lane.next_at = now + INTERVAL;
            return Some((host, port));
        }
        None
    }

    /// The lane probe just taken could not go (no token): due again at `now`.
    pub fn unsend(&mut self, host: u128, port: u16, now: Instant) {
        if let Some(lane) = self.lanes.get_mut(&host).filter(|l| l.current == Some(port)) {
            lane.current = None;
            lane.ports.push_front(port);
            lane.next_at = now;
            self.due.push(Reverse((now, host)));
        }
    }

    /// Whether `port` of `host` is its lane's probe out now.
    pub fn is_current(&self, host: u128, port: u16) -> bool {
        self.lanes.get(&host).is_some_and(|l| l.current == Some(port))
    }

    /// `port` of `host` was answered (its lane probe, or a late answer
    /// to an earlier try while it waits in the lane): out of the lane.
    pub fn forget(&mut self, host: u128, port: u16) {
        if self.is_current(host, port) {
            return self.answered(host, port);
        }
        if let Some(lane) = self.lanes.get_mut(&host) {
            if let Some(at) = lane.ports.iter().position(|&p| p == port) {
                lane.ports.remove(at);
                self.waiting -= 1;
            }
        }
    }

    /// The lane probe of `port` on `host` is over without a word (the
    /// scan stops, or the port was already decided): out of the lane.
    pub fn drop_current(&mut self, host: u128, port: u16) {
        let Some(lane) = self.lanes.get_mut(&host).filter(|l| l.current == Some(port)) else { return };
        lane.current = None;
        self.waiting -= 1;
        Self::schedule(&mut self.due, host, lane);
    }

    /// Forgets what no probe out needs: idle lanes whose turn has passed,
    /// and hosts that said "closed" but have no probe out (`live` says
    /// which hosts have).
    pub fn trim(&mut self, now: Instant, live: impl Fn(u128) -> bool) {
        self.lanes.retain(|_, l| l.over || l.current.is_some() || !l.ports.is_empty() || l.next_at > now);
        let ended: Vec<u128> =
            self.lanes.iter().filter(|(_, l)| l.over && l.ports.is_empty()).map(|(&h, _)| h).collect();
        for h in ended {
            if self.lanes.get(&h).is_some_and(|l| l.current.is_none()) {
                self.lanes.remove(&h);
                self.ended.insert(h);
            }
        }
        self.told.retain(|&h| live(h));
        self.ended.retain(|&h| live(h));
    }

    /// Hosts remembered (to tell when to [`Lanes::trim`]).
    pub fn hosts(&self) -> usize {
        self.told.len() + self.lanes.len() + self.ended.len()
    }

    /// The lane probe of `port` on `host` was answered.
    fn answered(&mut self, host: u128, port: u16) {
        let Some(lane) = self.lanes.get_mut(&host).filter(|l| l.current == Some(port)) else { return };
        lane.current = None;
        lane.answered += 1;
        lane.silent = 0;
        self.waiting -= 1;
        Self::schedule(&mut self.due, host, lane);
    }

    /// The lane probe of `port` on `host` stayed silent: the ports whose
    /// silence now stands (this one, or every port of a lane found to be
    /// real silence; none if the port is asked again).
    pub fn silent(&mut self, host: u128, port: u16) -> Vec<u16> {
        let Some(lane) = self.lanes.get_mut(&host).filter(|l| l.current == Some(port)) else { return Vec::new() };
        lane.current = None;
        lane.silent += 1;
        let mut done = Vec::new();
        if lane.over {
            done.push(port);
        } else if lane.silent >= SILENT_LANE {
            lane.over = true;
            done.push(port);
            done.extend(lane.ports.drain(..));
        } else if lane.again.insert(port) {
            lane.ports.push_front(port);
        } else {
            done.push(port);
        }
        self.waiting -= done.len();
        Self::schedule(&mut self.due, host, lane);
        done
    }

    fn schedule(due: &mut BinaryHeap<Reverse<(Instant, u128)>>, host: u128, lane: &Lane) {
        if !lane.ports.is_empty() {
            due.push(Reverse((lane.next_at, host)));
        }
    }

    /// When the next lane probe is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.peek().map(|r| r.0 .0)
    }

    /// Every port waiting (not the probes out): their silence stands.
    pub fn drain(&mut self) -> Vec<(u128, u16)> {
        let mut out = Vec::new();
        for (&host, lane) in &mut self.lanes {
            out.extend(lane.ports.drain(..).map(|p| (host, p)));
            lane.over = true;
        }
        self.waiting -= out.len();
        self.due.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One probe at a time, a little over a second apart; a silence is
    /// asked once more, then stands.
    #[test]
    fn a_lane_asks_at_the_hosts_pace() {
        let t0 = Instant::now();
        let mut l = Lanes::default();
        assert!(!l.take(1, 53, t0), "a host that never said closed: its silence stands");
        l.told(1);
        for p in 1..=4 {
            assert!(l.take(1, p, t0));
        }
        assert_eq!(l.len(), 4);
        assert_eq!(l.next(t0), Some((1, 1)));
        assert_eq!(l.next(t0), None, "one probe at a time");
        l.answered(1, 1);
        assert_eq!(l.next(t0 + INTERVAL - Duration::from_millis(1)), None, "a second apart");
        let t1 = t0 + INTERVAL;
        assert_eq!(l.next(t1), Some((1, 2)));
        assert_eq!(l.silent(1, 2), Vec::<u16>::new(), "asked again");
        assert_eq!(l.next(t1 + INTERVAL), Some((1, 2)));
        assert_eq!(l.silent(1, 2), vec![2], "silent twice: open|filtered");
        assert_eq!(l.next(t1 + 2 * INTERVAL), Some((1, 3)));
        l.answered(1, 3);
        assert_eq!(l.len(), 1);
        assert_eq!(l.drain(), vec![(1, 4)]);
        assert!(l.is_empty());
    }

    #[test]
    fn a_lane_of_real_silence_ends_after_four_probes() {
        let t0 = Instant::now();
        let mut l = Lanes::default();
        l.told(7);
        for p in 1..=10 {
            l.take(7, p, t0);
        }
        let mut t = t0;
        let mut given_up = Vec::new();
        for _ in 0..4 {
            let (_, p) = l.next(t).expect("due");
            given_up.extend(l.silent(7, p));
            t += INTERVAL;
        }
        assert_eq!(given_up.len(), 10, "the last silence gives up the lane: {given_up:?}");
        assert!(l.is_empty());
        assert!(!l.take(7, 11, t), "the lane is over");
    }

    /// A port answered late while it waits leaves the lane; a stop ends
    /// the probe out; idle lanes and hosts without probes are forgotten.
    #[test]
    fn late_answers_stops_and_trims_leave_nothing_behind() {
        let t0 = Instant::now();
        let mut l = Lanes::default();
        l.told(3);
        for p in [1, 2, 3] {
            l.take(3, p, t0);
        }
        assert_eq!(l.next(t0), Some((3, 1)));
        l.forget(3, 2);
        assert_eq!(l.len(), 2, "2 answered late: out of the lane");
        l.forget(3, 1);
        assert_eq!(l.len(), 1, "the probe out answered");
        let t1 = t0 + INTERVAL;
        assert_eq!(l.next(t1), Some((3, 3)), "2 is skipped");
        assert_eq!(l.drain(), vec![]);
        assert_eq!(l.silent(3, 3), vec![3], "a lane stopped asks nothing again");
        assert!(l.is_empty());
        l.trim(t1 + INTERVAL, |_| false);
        assert_eq!(l.hosts(), 0, "nothing kept for a host without probes out");
        assert!(!l.take(3, 9, t1), "a host forgotten has to say closed again");
        l.told(4);
        l.take(4, 1, t1);
        assert_eq!(l.next(t1), Some((4, 1)));
        l.drop_current(4, 1);
        assert!(l.is_empty());
    }

    #[test]
    fn lanes_of_many_hosts_run_side_by_side() {
        let t0 = Instant::now();
        let mut l = Lanes::default();
        for h in 0..100u128 {
            l.told(h);
            l.take(h, 9, t0);
            l.take(h, 10, t0);
        }
        let mut first = HashSet::new();
        while let Some((h, p)) = l.next(t0) {
            assert_eq!(p, 9);
            first.insert(h);
        }
        assert_eq!(first.len(), 100, "every host's lane at once");
    }
}
