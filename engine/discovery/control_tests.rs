//! The controller on a simulated path: a bottleneck with a queue, random
//! loss each way, a round trip with jitter, and a target that answers a
//! share of the probes, all on a simulated clock.

use super::*;
use std::collections::BinaryHeap;

/// A path and a target, as tests/wan-forwarder models a real one.
#[derive(Clone, Copy, Debug)]
struct Path {
    /// Bottleneck, frames a second each way (0: none).
    capacity: f64,
    queue: usize,
    rtt_ms: f64,
    jitter_ms: f64,
    /// Random loss each way.
    loss: f64,
    /// Share of the probes the target answers.
    answers: f64,
}

/// One direction's bottleneck: a FIFO served at `capacity`, tail drop.
struct Link {
    capacity: f64,
    queue: usize,
    /// When each frame in the queue leaves it.
    leaving: VecDeque<f64>,
}

impl Link {
    /// A frame arrives at `t` (seconds): when it leaves, or `None` if dropped.
    fn offer(&mut self, t: f64) -> Option<f64> {
        if self.capacity <= 0.0 {
            return Some(t);
        }
        while self.leaving.front().is_some_and(|&l| l <= t) {
            self.leaving.pop_front();
        }
        if self.leaving.len() >= self.queue {
            return None;
        }
        let out = self.leaving.back().copied().unwrap_or(t).max(t) + 1.0 / self.capacity;
        self.leaving.push_back(out);
        Some(out)
    }
}

struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What a run saw: the rate over time, and what the probes met.
struct Run {
    /// (second, rate) every 10 ms.
    rates: Vec<(f64, f64)>,
    sent: u64,
    /// Dropped at the bottleneck (either way).
    queue_drops: u64,
    answered: u64,
    ctl: Controller,
    t0: Instant,
}

impl Run {
    fn mean_rate(&self, from: f64, to: f64) -> f64 {
        let r: Vec<f64> = self.rates.iter().filter(|(t, _)| *t >= from && *t < to).map(|p| p.1).collect();
        r.iter().sum::<f64>() / r.len() as f64
    }
}

/// Sends as the controller allows for `secs` simulated seconds.
fn simulate(path: Path, limits: Limits, secs: f64, seed: u64) -> Run {
    let t0 = Instant::now();
    let at = |s: f64| t0 + Duration::from_secs_f64(s);
    let mut ctl = Controller::new(limits, Duration::from_secs(1), t0);
    let mut rng = Rng(seed | 1);
    let (mut fwd, mut back) = (
        Link { capacity: path.capacity, queue: path.queue, leaving: VecDeque::new() },
        Link { capacity: path.capacity, queue: path.queue, leaving: VecDeque::new() },
    );
    // Answers on their way back: (arrival in ns, sent in ns), earliest first.
    let mut coming: BinaryHeap<std::cmp::Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut run = Run {
        rates: Vec::new(),
        sent: 0,
        queue_drops: 0,
        answered: 0,
        ctl: Controller::new(limits, Duration::from_secs(1), t0),
        t0,
    };
    let step = 50e-6;
    let mut t = 0.0;
    let mut next_sample = 0.0;
    while t < secs {
        while let Some(&std::cmp::Reverse((arrive, sent))) = coming.peek() {
            if arrive as f64 / 1e9 > t {
                break;
            }
            coming.pop();
            run.answered += 1;
            let rtt = Duration::from_nanos(arrive - sent);
            let a = Answer {
                class: Class::Port,
                sent: t0 + Duration::from_nanos(sent),
                first: true,
                lost: 0,
                rtt: Some(rtt),
            };
            ctl.on_answer(a, at(t));
        }
        ctl.poll(at(t));
        while ctl.try_take(at(t)).is_ok() {
            run.sent += 1;
            ctl.on_send(Class::Port, true, at(t));
            let one_way = |rng: &mut Rng| (path.rtt_ms / 2.0 + path.jitter_ms * (2.0 * rng.unit() - 1.0)) / 1e3;
            let Some(out) = fwd.offer(t) else {
                run.queue_drops += 1;
                continue;
            };
            if rng.unit() < path.loss || rng.unit() >= path.answers {
                continue;
            }
            let reached = out + one_way(&mut rng);
            let Some(back_out) = back.offer(reached) else {
                run.queue_drops += 1;
                continue;
            };
            if rng.unit() < path.loss {
                continue;
            }
            let arrive = back_out + one_way(&mut rng);
            coming.push(std::cmp::Reverse(((arrive * 1e9) as u64, (t * 1e9) as u64)));
        }
        if t >= next_sample {
            run.rates.push((t, ctl.rate()));
            next_sample += 0.01;
        }
        t += step;
    }
    run.ctl = ctl;
    run
}

fn adaptive(initial: f64) -> Limits {
    Limits { initial, min: None, max: None, adaptive: true }
}

/// Paths of the range: RTT 20-200 ms, loss 0-3 % each way,
/// bottlenecks 1,000-100,000 frames a second.
#[test]
fn finds_the_bottleneck_and_keeps_near_it() {
    let paths = [
        Path { capacity: 10_000.0, queue: 500, rtt_ms: 50.0, jitter_ms: 10.0, loss: 0.01, answers: 1.0 },
        Path { capacity: 1_000.0, queue: 100, rtt_ms: 200.0, jitter_ms: 5.0, loss: 0.03, answers: 1.0 },
        Path { capacity: 100_000.0, queue: 1000, rtt_ms: 20.0, jitter_ms: 2.0, loss: 0.0, answers: 1.0 },
        Path { capacity: 30_000.0, queue: 300, rtt_ms: 80.0, jitter_ms: 10.0, loss: 0.02, answers: 0.1 },
    ];
    for (i, path) in paths.into_iter().enumerate() {
        let run = simulate(path, adaptive(1000.0), 12.0, 7 + i as u64);
        let mean = run.mean_rate(6.0, 12.0);
        let cap = path.capacity;
        assert!(mean > 0.6 * cap && mean < 1.3 * cap, "{path:?}: mean rate {mean:.0} over the last 6 s");
        let drops = run.queue_drops as f64 / run.sent as f64;
        // Fewer answers, later and rougher verdicts: more is lost in the
        // overshoots (and tried again by the machine).
        let bound = if path.answers < 0.5 { 0.15 } else { 0.08 };
        assert!(drops < bound, "{path:?}: {:.1} % dropped at the bottleneck", drops * 100.0);
        assert!(run.ctl.status().slowdowns >= 1, "{path:?}");
        let notes = run.ctl.notes.clone();
        assert!(notes.iter().all(|n| n.to < n.from), "{notes:?}");
    }
}

#[test]
fn random_loss_alone_is_not_congestion() {
    let path = Path { capacity: 0.0, queue: 0, rtt_ms: 100.0, jitter_ms: 20.0, loss: 0.03, answers: 1.0 };
    let limits = Limits { max: Some(200_000.0), ..adaptive(1000.0) };
    let run = simulate(path, limits, 3.0, 3);
    assert_eq!(run.ctl.status().slowdowns, 0, "{:?}", run.ctl.notes);
    assert_eq!(run.ctl.rate(), 200_000.0, "climbs to --max-rate");
}

#[test]
fn never_below_min_rate_nor_above_max_rate() {
    let path = Path { capacity: 2_000.0, queue: 100, rtt_ms: 40.0, jitter_ms: 0.0, loss: 0.0, answers: 1.0 };
    let limits = Limits { min: Some(5_000.0), max: Some(8_000.0), ..adaptive(1000.0) };
    let run = simulate(path, limits, 4.0, 5);
    assert!(run.rates.iter().all(|&(_, r)| (5_000.0..=8_000.0).contains(&r)), "{:?}", run.rates);
    assert!(run.ctl.notes.iter().any(|n| n.floored), "the cut said it stopped at --min-rate");
    // And the pace itself: probes sent over the run within the bounds.
    let per_sec = run.sent as f64 / 4.0;
    assert!((4_900.0..=8_200.0).contains(&per_sec), "{per_sec}/s");
}

#[test]
fn sends_into_a_congested_path_are_known_as_such() {
    let path = Path { capacity: 5_000.0, queue: 200, rtt_ms: 50.0, jitter_ms: 0.0, loss: 0.0, answers: 1.0 };
    let run = simulate(path, adaptive(1000.0), 3.0, 9);
    let at = |s: f64| run.t0 + Duration::from_secs_f64(s);
    assert_eq!(run.ctl.congested_at(at(0.01)), Some(false), "the first round trips were clean");
    let first = run.ctl.congested.front().copied().expect("a congested span");
    let mid = first.0 + (first.1 - first.0) / 2;
    assert_eq!(run.ctl.congested_at(mid), Some(true));
    assert_eq!(run.ctl.congested_at(at(2.999)), None, "not judged yet");
}

#[test]
fn a_fixed_pace_never_moves() {
    let path = Path { capacity: 1_000.0, queue: 10, rtt_ms: 10.0, jitter_ms: 0.0, loss: 0.0, answers: 1.0 };
    let run = simulate(path, Limits::fixed(Some(4_000.0)), 2.0, 11);
    assert!(run.rates.iter().all(|&(_, r)| r == 4_000.0));
    assert!((7_800..=8_100).contains(&run.sent), "{}", run.sent);
    assert_eq!(run.ctl.congested_at(run.t0), Some(false));
}

/// Few answers (one probe in 500 answered, as a mostly filtered host):
/// epochs pool until they can be judged (two seconds at most), and the
/// bottleneck is still found, more slowly and more roughly: the pace stays
/// within a few times the path's.
#[test]
fn sparse_answers_still_find_the_bottleneck() {
    let path = Path { capacity: 10_000.0, queue: 500, rtt_ms: 50.0, jitter_ms: 5.0, loss: 0.0, answers: 0.002 };
    let run = simulate(path, adaptive(1000.0), 40.0, 13);
    let mean = run.mean_rate(20.0, 40.0);
    assert!(mean < 2.5 * path.capacity, "mean rate {mean:.0} over the last 20 s");
    assert!(run.ctl.status().slowdowns >= 1);
}

/// A --max-rate below one a second holds; no pace grows without bound,
/// and a pace the scan does not reach does not grow.
#[test]
fn the_pace_stays_within_its_bounds() {
    let t0 = Instant::now();
    let mut slow = Controller::new(Limits { max: Some(0.5), ..adaptive(1000.0) }, Duration::from_secs(1), t0);
    assert_eq!(slow.rate(), 0.5);
    slow.set_rate(100.0);
    assert_eq!(slow.rate(), 0.5, "--max-rate 0.5 holds");
    // Nothing ever answers, and the sender sends 100 a second whatever its pace.
    let mut c = Controller::new(adaptive(1000.0), Duration::from_secs(1), t0);
    let mut t = t0;
    for _ in 0..20_000u32 {
        t += Duration::from_millis(10);
        c.on_send(Class::Port, true, t);
        c.poll(t);
    }
    assert!(c.rate().is_finite() && c.rate() <= 1000.0 * 1.25f64.powi(3), "{}", c.rate());
}

/// Sends of an epoch pooled with later ones (too few answers to judge it
/// alone) are decided on what the pool shows so far: a scan never waits
/// seconds for a pool, and a clear drop already counts.
#[test]
fn pooled_sends_are_decided_on_what_the_pool_shows() {
    let t0 = Instant::now();
    let mut c = Controller::new(Limits { max: Some(10_000.0), ..adaptive(10_000.0) }, Duration::from_millis(200), t0);
    let rtt = Duration::from_millis(1);
    let mut t = t0;
    // 300 probes, every one answered: the baseline is 1.
    for _ in 0..300 {
        t += Duration::from_micros(100);
        c.on_send(Class::Port, true, t);
        c.on_answer(Answer { class: Class::Port, sent: t, first: true, lost: 0, rtt: Some(rtt) }, t + rtt);
        c.poll(t + rtt);
    }
    // Then 20 probes in one epoch, none answered: too few to judge alone, a clear drop.
    let silent = t + Duration::from_millis(10);
    for i in 0..20 {
        c.on_send(Class::Port, true, silent + Duration::from_micros(10 * i));
    }
    let later = silent + Duration::from_millis(40);
    c.poll(later);
    c.poll(later + Duration::from_millis(40));
    assert_eq!(c.congested_at(t0 + Duration::from_millis(5)), Some(false), "answered: clean");
    assert_eq!(c.congested_at(silent + Duration::from_micros(50)), Some(true), "the pool shows the drop");
}

/// A silent probe's extra tries follow the loss the answers show: the
/// template's on a path that loses nothing, more on a lossy one, never
/// above the cap (a cap below the template's leaves the template's).
#[test]
fn retries_follow_the_loss_seen() {
    let t0 = Instant::now();
    let answers = |n: u32, lost_every: u32| {
        let mut c = Controller::new(adaptive(1000.0), Duration::from_secs(1), t0);
        for i in 0..n {
            let lost = u32::from(lost_every > 0 && i % lost_every == 0);
            let a = Answer { class: Class::Port, sent: t0, first: lost == 0, lost, rtt: None };
            c.on_answer(a, t0 + Duration::from_millis(1));
        }
        c
    };
    let fresh = answers(0, 0);
    assert_eq!(fresh.retries(0, 10), 1, "one more try before any answer says how lossy the path is");
    let clean = answers(10_000, 0);
    assert_eq!(clean.retries(0, 10), 0, "a path that loses nothing: the template's");
    assert_eq!(clean.retries(2, 10), 2, "never fewer than the template's");
    // 3 % of the tries lost: 0.03^2 > 1e-4 >= 0.03^3, three tries.
    let lossy = answers(10_000, 33);
    assert_eq!(lossy.retries(0, 10), 2);
    assert_eq!(lossy.retries(1, 6), 2);
    assert_eq!(lossy.retries(0, 1), 1, "--max-retries caps it");
    assert_eq!(lossy.retries(2, 0), 2, "a cap below the template's leaves the template's");
    // Every other answer came after a lost try: many tries, at most the cap.
    let awful = answers(10_000, 2);
    assert_eq!(awful.retries(0, 6), 6);
    assert!(awful.retries(0, 100) > 6);
}

/// On a fast path the startup's overshoot is cut to near the bottleneck
/// (what the path delivered as the overshoot began, not a few round trips
/// earlier, when the rate was a fraction of it), so 65,535 probes get
/// through within twice the path's own time.
#[test]
fn a_fast_paths_first_cut_lands_near_its_bottleneck() {
    for (i, path) in [
        Path { capacity: 100_000.0, queue: 1000, rtt_ms: 20.0, jitter_ms: 2.0, loss: 0.0, answers: 1.0 },
        Path { capacity: 10_000.0, queue: 500, rtt_ms: 50.0, jitter_ms: 10.0, loss: 0.01, answers: 1.0 },
        Path { capacity: 30_000.0, queue: 300, rtt_ms: 100.0, jitter_ms: 10.0, loss: 0.02, answers: 1.0 },
    ]
    .into_iter()
    .enumerate()
    {
        let secs = 2.0 * 65_535.0 / path.capacity;
        let run = simulate(path, adaptive(1000.0), secs, 11 + i as u64);
        let first = run.ctl.notes.first().copied().expect("the overshoot is cut");
        // Measured a judge's delay late, the cut fell to 54-71 % of it.
        assert!(first.to >= 0.75 * path.capacity, "{path:?}: cut to {:.0}", first.to);
        let through = run.sent - run.queue_drops;
        assert!(through >= 65_535, "{path:?}: {through} probes through in {secs:.2} s");
    }
}

/// A policer (a rate limit without a queue: what goes over is dropped at
/// once, so round trips never grow) shows itself only in the answers that
/// go missing. The pace settles near its rate and stays there: the
/// baseline is not dragged down by epochs sent over the limit, whose
/// losses are too small to judge one by one.
#[test]
fn a_policer_is_found_by_its_losses_alone() {
    for (i, path) in [
        Path { capacity: 3_000.0, queue: 2, rtt_ms: 0.1, jitter_ms: 0.0, loss: 0.0, answers: 1.0 },
        Path { capacity: 3_000.0, queue: 20, rtt_ms: 50.0, jitter_ms: 5.0, loss: 0.01, answers: 1.0 },
        Path { capacity: 20_000.0, queue: 4, rtt_ms: 20.0, jitter_ms: 2.0, loss: 0.0, answers: 0.3 },
    ]
    .into_iter()
    .enumerate()
    {
        let run = simulate(path, adaptive(1000.0), 20.0, 17 + i as u64);
        let mean = run.mean_rate(5.0, 20.0);
        let cap = path.capacity;
        assert!(mean > 0.6 * cap && mean < 1.2 * cap, "{path:?}: mean rate {mean:.0} over the last 15 s");
        let drops = run.queue_drops as f64 / run.sent as f64;
        assert!(drops < 0.10, "{path:?}: {:.1} % dropped at the policer", drops * 100.0);
    }
}
