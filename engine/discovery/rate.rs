//! A token bucket that paces probes, with the time passed in.
//!
//! The bucket refills at `rate` tokens a second and holds at most `burst`
//! (1 % of a second's worth, at least one), so over any second no more than
//! `rate + burst + 1` probes pass: within 5 % of the asked rate once the rate
//! is 40/s or more. It starts with one token so a scan does not open with a
//! burst. Sleeping and clocks are the caller's business, which lets the tests
//! drive it on a simulated clock.

use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

/// A token short by less than this (a float's rounding) is a whole one.
const ROUNDING: f64 = 1e-9;

impl TokenBucket {
    /// A bucket for `rate` probes a second (must be positive and finite).
    pub fn new(rate: f64, now: Instant) -> TokenBucket {
        assert!(rate.is_finite() && rate > 0.0, "rate must be positive");
        TokenBucket { rate, burst: (rate * 0.01).max(1.0), tokens: 1.0, last: now }
    }

    /// Takes one token, or says how long until one is there.
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        if self.tokens >= 1.0 - ROUNDING {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
        }
    }

    /// Gives back a token taken for a probe that was not sent after all.
    pub fn give_back(&mut self) {
        self.tokens += 1.0;
    }

    /// Refills at `rate` from now on (positive and finite), its burst
    /// following; what is in the bucket stays, up to the new burst.
    pub fn set_rate(&mut self, rate: f64) {
        assert!(rate.is_finite() && rate > 0.0, "rate must be positive");
        self.rate = rate;
        self.burst = (rate * 0.01).max(1.0);
        self.tokens = self.tokens.min(self.burst);
    }

    /// When a token will be there (`now` if one is), taking none.
    pub fn ready_at(&self, now: Instant) -> Instant {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        let tokens = (self.tokens + dt * self.rate).min(self.burst);
        if tokens >= 1.0 - ROUNDING {
            now
        } else {
            // Rounded up: at that instant `try_take` has its token (a
            // caller that waits until then never finds it short and spins).
            now + Duration::from_secs_f64((1.0 - tokens) / self.rate) + Duration::from_nanos(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives the bucket like a sender that sleeps as told, but whose wake-ups
    /// come late by up to `slack` (as real timers do), for `secs` seconds.
    fn simulate(rate: f64, secs: f64, slack: Duration) -> u64 {
        let t0 = Instant::now();
        let mut now = t0;
        let mut b = TokenBucket::new(rate, now);
        let mut sent = 0u64;
        let mut jitter = 0u32;
        while now.duration_since(t0).as_secs_f64() < secs {
            match b.try_take(now) {
                Ok(()) => sent += 1,
                Err(wait) => {
                    jitter = (jitter.wrapping_mul(1_103_515_245).wrapping_add(12_345)) % 1000;
                    now += wait + slack.mul_f64(f64::from(jitter) / 1000.0);
                }
            }
        }
        sent
    }

    #[test]
    fn holds_the_rate_within_5_percent_over_a_second() {
        for rate in [50.0, 500.0, 10_000.0, 250_000.0] {
            let sent = simulate(rate, 1.0, Duration::from_millis(2)) as f64;
            let err = (sent - rate).abs() / rate;
            assert!(err <= 0.05, "rate {rate}: sent {sent} in 1 s ({:.1} % off)", err * 100.0);
        }
    }

    #[test]
    fn never_bursts_past_the_bucket_after_idling() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1000.0, t0);
        let later = t0 + Duration::from_secs(60);
        let mut n = 0;
        while b.try_take(later).is_ok() {
            n += 1;
        }
        assert_eq!(n, 10, "an idle minute must not bank more than the 10 ms burst");
    }

    #[test]
    fn a_new_rate_paces_from_then_on_and_ready_at_takes_nothing() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, t0);
        // Within a nanosecond (rounded up, so a token is there then).
        let near = |a: Instant, b: Instant| a >= b && a - b <= Duration::from_nanos(1);
        assert!(b.try_take(t0).is_ok());
        assert!(near(b.ready_at(t0), t0 + Duration::from_millis(100)));
        b.set_rate(1000.0);
        assert!(near(b.ready_at(t0), t0 + Duration::from_millis(1)), "the new rate refills");
        assert!(near(b.ready_at(t0), t0 + Duration::from_millis(1)), "asking takes no token");
        let at = b.ready_at(t0);
        assert!(b.clone().try_take(at).is_ok(), "a token is there when it says");
        let later = t0 + Duration::from_secs(1);
        let mut n = 0;
        while b.try_take(later).is_ok() {
            n += 1;
        }
        assert_eq!(n, 10, "the burst follows the rate (1 % of a second's worth)");
    }

    #[test]
    fn slow_rates_wait_between_probes() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(2.0, t0);
        assert!(b.try_take(t0).is_ok());
        let wait = b.try_take(t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.5).abs() < 1e-9, "{wait:?}");
        assert!(b.try_take(t0 + wait).is_ok());
    }
}
