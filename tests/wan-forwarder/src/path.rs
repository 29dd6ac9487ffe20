//! One direction of the WAN as a model with no I/O: frames go in with the
//! time they arrived and come out at the time they are due.
//!
//! In: a `Config` and frames with their arrival time. The time is passed
//!     in, so the tests below drive a path on a simulated clock.
//! Out: each frame is dropped (and counted) or held until it is due:
//!     `next_due` says when the next one is, `pop_due` hands it back.
//!
//! The path, in the order a frame meets it:
//!   1. The bottleneck: a FIFO served at `rate` frames/s (none if `rate` is
//!      0) holding at most `queue` frames, the one being sent included. A
//!      frame that finds it full is dropped (tail drop, `queue_dropped`).
//!      A frame leaves it 1/rate after the later of its arrival and the
//!      departure of the frame before it.
//!   2. The link: a frame that left the bottleneck is lost with probability
//!      `loss`/100, each frame independently (`lost`). It had its turn at
//!      the bottleneck: loss after the bottleneck, as on a lossy last hop.
//!   3. Propagation: `delay` plus a uniform draw in [-jitter, +jitter],
//!      independent per frame. Order is NOT kept: two frames closer than
//!      2 x jitter may swap, as netem's jitter does. (Keeping order would
//!      hold each frame until every earlier one is out, which at high rates
//!      turns the jitter into a constant extra delay of about +jitter.)
//!
//! What always holds:
//!   - At most `queue` frames are in the bottleneck and at most `LINE_CAP`
//!     frames are held in all; a frame beyond that is dropped and counted
//!     as `line_dropped` (a limit of this program, not of the path being
//!     modelled: it shows in the counters if a setting ever reaches it).
//!   - No frame is due before arrival + delay - jitter, and jitter <= delay
//!     (`Config::check`), so never before it arrived.
//!   - Every frame is counted once: arrived = queue_dropped + lost +
//!     line_dropped + held() + the frames `pop_due` handed out.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

/// Frames held (in flight) per direction at most.
pub const LINE_CAP: usize = 65_536;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// One-way delay, ms.
    pub delay_ms: f64,
    /// Uniform jitter, +/- ms, at most `delay_ms`.
    pub jitter_ms: f64,
    /// Random loss, percent of the frames that left the bottleneck.
    pub loss_pct: f64,
    /// Bottleneck rate, frames/s; 0 means no bottleneck (and no queue).
    pub rate_pps: u64,
    /// Bottleneck queue, frames (the one being sent included).
    pub queue: usize,
}

impl Config {
    /// The reason a setting is out of range, if one is.
    pub fn check(&self) -> Result<(), String> {
        let ok = |v: f64, hi: f64| v.is_finite() && (0.0..=hi).contains(&v);
        if !ok(self.delay_ms, 10_000.0) {
            return Err(format!("delay {} ms: must be 0 to 10000", self.delay_ms));
        }
        if !ok(self.jitter_ms, self.delay_ms) {
            return Err(format!("jitter {} ms: must be 0 to the delay ({} ms)", self.jitter_ms, self.delay_ms));
        }
        if !ok(self.loss_pct, 100.0) {
            return Err(format!("loss {} %: must be 0 to 100", self.loss_pct));
        }
        if self.rate_pps > 10_000_000 {
            return Err(format!("rate {} frames/s: must be 0 (none) to 10000000", self.rate_pps));
        }
        if !(1..=1_000_000).contains(&self.queue) {
            return Err(format!("queue {} frames: must be 1 to 1000000", self.queue));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counters {
    pub arrived: u64,
    pub queue_dropped: u64,
    pub lost: u64,
    pub line_dropped: u64,
}

/// SplitMix64: small, fast, good enough for loss and jitter draws.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Held {
    due: Instant,
    seq: u64,
    frame: Vec<u8>,
}

// BinaryHeap is a max-heap: the earliest (due, seq) must compare greatest.
impl Ord for Held {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Held {}

pub struct Path {
    cfg: Config,
    rng: Rng,
    /// Departure times of the frames still in the bottleneck, oldest first.
    departures: VecDeque<Instant>,
    last_departure: Option<Instant>,
    line: BinaryHeap<Held>,
    seq: u64,
    pub counters: Counters,
}

impl Path {
    pub fn new(cfg: Config, rng: Rng) -> Path {
        Path {
            cfg,
            rng,
            departures: VecDeque::new(),
            last_departure: None,
            line: BinaryHeap::new(),
            seq: 0,
            counters: Counters::default(),
        }
    }

    /// A frame arrives at `now`.
    pub fn arrive(&mut self, now: Instant, frame: Vec<u8>) {
        self.counters.arrived += 1;
        let left = if self.cfg.rate_pps == 0 {
            now
        } else {
            while self.departures.front().is_some_and(|&d| d <= now) {
                self.departures.pop_front();
            }
            if self.departures.len() >= self.cfg.queue {
                self.counters.queue_dropped += 1;
                return;
            }
            let service = Duration::from_nanos((1e9 / self.cfg.rate_pps as f64).round() as u64);
            let start = self.last_departure.map_or(now, |d| d.max(now));
            let left = start + service;
            self.last_departure = Some(left);
            self.departures.push_back(left);
            left
        };
        if self.cfg.loss_pct > 0.0 && self.rng.unit() * 100.0 < self.cfg.loss_pct {
            self.counters.lost += 1;
            return;
        }
        if self.line.len() >= LINE_CAP {
            self.counters.line_dropped += 1;
            return;
        }
        let ms = self.cfg.delay_ms + self.cfg.jitter_ms * (2.0 * self.rng.unit() - 1.0);
        let due = left + Duration::from_secs_f64(ms.max(0.0) / 1000.0);
        self.seq += 1;
        self.line.push(Held { due, seq: self.seq, frame });
    }

    /// When the next held frame is due, if one is held.
    pub fn next_due(&self) -> Option<Instant> {
        self.line.peek().map(|h| h.due)
    }

    /// The next frame due at or before `now`, if any.
    pub fn pop_due(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.next_due()? > now {
            return None;
        }
        self.line.pop().map(|h| h.frame)
    }

    /// Frames held (in flight).
    pub fn held(&self) -> usize {
        self.line.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(delay_ms: f64, jitter_ms: f64, loss_pct: f64, rate_pps: u64, queue: usize) -> Config {
        Config { delay_ms, jitter_ms, loss_pct, rate_pps, queue }
    }

    /// Every frame handed out, with the time it came out, stepping a
    /// simulated clock by `step` until `end`.
    fn drain(p: &mut Path, t0: Instant, step: Duration, end: Duration) -> Vec<(Duration, Vec<u8>)> {
        let mut out = Vec::new();
        let mut t = t0;
        while t <= t0 + end {
            while let Some(f) = p.pop_due(t) {
                out.push((t - t0, f));
            }
            t += step;
        }
        out
    }

    #[test]
    fn delay_and_jitter_stay_in_their_bounds() {
        let mut p = Path::new(cfg(25.0, 10.0, 0.0, 0, 1), Rng::new(1));
        let t0 = Instant::now();
        for i in 0..1000u32 {
            p.arrive(t0, i.to_be_bytes().to_vec());
        }
        let out = drain(&mut p, t0, Duration::from_micros(100), Duration::from_millis(40));
        assert_eq!(out.len(), 1000);
        let ms: Vec<f64> = out.iter().map(|(d, _)| d.as_secs_f64() * 1000.0).collect();
        assert!(ms.iter().all(|&m| (15.0..=35.2).contains(&m)), "{ms:?}");
        let mean = ms.iter().sum::<f64>() / ms.len() as f64;
        assert!((mean - 25.0).abs() < 1.0, "mean {mean}");
        // Jitter is independent per frame: order is not kept.
        assert!(out.windows(2).any(|w| w[0].1 > w[1].1), "no reordering with jitter");
    }

    #[test]
    fn without_jitter_order_is_kept() {
        let mut p = Path::new(cfg(5.0, 0.0, 0.0, 0, 1), Rng::new(2));
        let t0 = Instant::now();
        for i in 0..100u32 {
            p.arrive(t0 + Duration::from_micros(i as u64), i.to_be_bytes().to_vec());
        }
        let out = drain(&mut p, t0, Duration::from_micros(50), Duration::from_millis(10));
        assert_eq!(out.len(), 100);
        assert!(out.windows(2).all(|w| w[0].1 < w[1].1));
    }

    #[test]
    fn loss_is_about_its_share() {
        let mut p = Path::new(cfg(0.0, 0.0, 10.0, 0, 1), Rng::new(3));
        let t0 = Instant::now();
        for _ in 0..50_000 {
            p.arrive(t0, vec![0]);
        }
        let lost = p.counters.lost as f64 / 50_000.0;
        assert!((0.09..0.11).contains(&lost), "lost {lost}");
        assert_eq!(p.counters.lost + p.held() as u64, 50_000);
    }

    #[test]
    fn the_bottleneck_paces_and_its_queue_tail_drops() {
        // A burst of 5000 frames at one instant into 1000 frames/s, queue 500.
        let mut p = Path::new(cfg(0.0, 0.0, 0.0, 1000, 500), Rng::new(4));
        let t0 = Instant::now();
        for _ in 0..5000 {
            p.arrive(t0, vec![0]);
        }
        assert_eq!(p.counters.queue_dropped, 4500);
        let out = drain(&mut p, t0, Duration::from_micros(100), Duration::from_secs(1));
        assert_eq!(out.len(), 500);
        // One each ms, the first after 1 ms.
        for (i, (d, _)) in out.iter().enumerate() {
            let want = Duration::from_millis(i as u64 + 1);
            assert!(d.abs_diff(want) < Duration::from_micros(101), "frame {i} out at {d:?}");
        }
        // The queue empties as frames leave: 1 ms later one frame fits again.
        p.arrive(t0 + Duration::from_millis(1), vec![1]);
        assert_eq!(p.counters.queue_dropped, 4500);
    }

    #[test]
    fn a_steady_stream_under_the_rate_is_never_dropped() {
        let mut p = Path::new(cfg(1.0, 0.0, 0.0, 1000, 2), Rng::new(5));
        let t0 = Instant::now();
        for i in 0..1000u64 {
            p.arrive(t0 + Duration::from_micros(1100 * i), vec![0]);
        }
        assert_eq!(p.counters.queue_dropped, 0);
    }

    #[test]
    fn the_line_cap_trips() {
        let mut p = Path::new(cfg(1000.0, 0.0, 0.0, 0, 1), Rng::new(6));
        let t0 = Instant::now();
        for _ in 0..LINE_CAP + 10 {
            p.arrive(t0, vec![0]);
        }
        assert_eq!(p.held(), LINE_CAP);
        assert_eq!(p.counters.line_dropped, 10);
        assert_eq!(p.pop_due(t0), None, "nothing is due before the delay");
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(cfg(5.0, 6.0, 0.0, 0, 1).check().unwrap_err().contains("jitter"));
        assert!(cfg(5.0, 1.0, 101.0, 0, 1).check().unwrap_err().contains("loss"));
        assert!(cfg(f64::NAN, 0.0, 0.0, 0, 1).check().unwrap_err().contains("delay"));
        assert!(cfg(5.0, 1.0, 1.0, 0, 0).check().unwrap_err().contains("queue"));
        assert!(cfg(5.0, 1.0, 1.0, 20_000_000, 10).check().unwrap_err().contains("rate"));
        assert_eq!(cfg(25.0, 10.0, 1.0, 10_000, 500).check(), Ok(()));
    }
}
