//! A keyed pseudo-random permutation of `[0, n)` for any `n`.
//!
//! The domain is split as `a * b >= n` with `a ~ sqrt(n)`, and a four-round
//! Feistel network over mixed radix (one half mod `a`, the other mod `b`)
//! encrypts an index; values that land in `[n, a*b)` are encrypted again
//! (cycle walking) until they fall inside. This is the construction masscan
//! calls BlackRock; the round function here is SipHash-1-3 keyed by the seed.
//! Every round is invertible, so the whole map is a bijection: each index in
//! `[0, n)` comes out exactly once, which the tests check exhaustively.

use std::hash::Hasher;

use siphasher::sip::SipHasher13;

const ROUNDS: u32 = 4;

#[derive(Clone, Debug)]
pub struct Permutation {
    n: u64,
    a: u64,
    b: u64,
    k0: u64,
    k1: u64,
    /// The identity: positions in index order (nmap's -r).
    identity: bool,
}

impl Permutation {
    /// A permutation of `[0, n)` keyed by `seed`. `n` must be below 2^62.
    pub fn new(n: u64, seed: u64) -> Permutation {
        assert!(n < 1 << 62, "permutation domain too large");
        let a = (n as f64).sqrt().ceil().max(1.0) as u64;
        let a = if a * a < n { a + 1 } else { a };
        let b = n.div_ceil(a).max(1);
        Permutation { n, a, b, k0: seed, k1: seed.rotate_left(32) ^ 0x6d6f_6f6e_7363_616e, identity: false }
    }

    /// `[0, n)` in order.
    pub fn identity(n: u64) -> Permutation {
        Permutation { identity: true, ..Permutation::new(n, 0) }
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn round(&self, j: u32, r: u64) -> u64 {
        let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
        h.write_u64(r);
        h.write_u32(j);
        h.finish()
    }

    fn encrypt(&self, m: u64) -> u64 {
        let (a, b) = (self.a, self.b);
        let (mut l, mut r) = (m % a, m / a);
        for j in 1..=ROUNDS {
            let modulus = if j % 2 == 1 { a } else { b };
            let t = (l % modulus + self.round(j, r) % modulus) % modulus;
            l = r;
            r = t;
        }
        // ROUNDS is even: l < a and r < b.
        a * r + l
    }

    /// The value at position `i` of the permuted order. `i` must be below `len()`.
    pub fn at(&self, i: u64) -> u64 {
        debug_assert!(i < self.n);
        if self.identity {
            return i;
        }
        let mut x = self.encrypt(i);
        while x >= self.n {
            x = self.encrypt(x);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every index appears exactly once (masscan's blackrock_verify, done fully).
    fn verify(n: u64, seed: u64) {
        let p = Permutation::new(n, seed);
        let mut seen = vec![false; n as usize];
        for i in 0..n {
            let v = p.at(i);
            assert!(v < n, "n={n}: value {v} out of range");
            assert!(!seen[v as usize], "n={n}: value {v} produced twice");
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "n={n}: some value never produced");
    }

    #[test]
    fn bijective_on_small_and_awkward_sizes() {
        for n in [1, 2, 3, 4, 5, 7, 10, 16, 17, 97, 255, 256, 1000, 4099] {
            verify(n, 42);
        }
    }

    #[test]
    fn bijective_on_prime_sizes() {
        for n in [65_521, 65_537, 1_000_003] {
            verify(n, 7);
        }
    }

    #[test]
    fn bijective_on_2_pow_20_with_several_seeds() {
        for seed in [0, 1, u64::MAX] {
            verify(1 << 20, seed);
        }
    }

    #[test]
    fn seed_decides_the_order() {
        let a: Vec<u64> = (0..1000).map(|i| Permutation::new(1000, 1).at(i)).collect();
        let b: Vec<u64> = (0..1000).map(|i| Permutation::new(1000, 1).at(i)).collect();
        let c: Vec<u64> = (0..1000).map(|i| Permutation::new(1000, 2).at(i)).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        // Not the identity nor a plain rotation.
        let in_place = a.iter().enumerate().filter(|(i, v)| *i as u64 == **v).count();
        assert!(in_place < 20, "{in_place} fixed points");
    }
}
