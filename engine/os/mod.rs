//! OS detection (`-O`): nmap's second-generation probes, tests and
//! matching against the user's own nmap-os-db.
//!
//! In: a host's replies to nmap's 16 OS probes (six SEQ SYNs 100 ms apart,
//! two ICMP echoes, the ECN SYN, T2-T7, the closed-port UDP U1). Out: a
//! [`Fingerprint`] in nmap's terms (tests SEQ, OPS, WIN, ECN, T1-T7, U1, IE
//! with their attributes, values as nmap writes them) and its matches in
//! the database. What always holds: a fingerprint is data (names and
//! strings), so what computes it, what matches it and what prints it are
//! apart and each is tested on its own.

pub mod compute;
pub mod db;
pub mod hints;
pub mod matching;
pub mod passive;
pub mod probes;
#[cfg(test)]
mod recorded_tests;
pub mod run;
pub mod seen;
pub mod stage;
pub mod submit;

/// One test of a fingerprint: `SEQ(SP=105%GCD=1%...)` is the test `SEQ`
/// with its attributes in nmap's order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Test {
    pub name: String,
    pub attrs: Vec<(String, String)>,
}

/// A host's fingerprint: its tests in nmap's order (SEQ, OPS, WIN, ECN,
/// T1-T7, U1, IE). A test the host gave no reply for is kept with
/// `R=N` where nmap keeps it, and absent where nmap leaves it out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fingerprint {
    pub tests: Vec<Test>,
}

impl Fingerprint {
    /// The test named `name`.
    pub fn test(&self, name: &str) -> Option<&Test> {
        self.tests.iter().find(|t| t.name == name)
    }

    /// The value of `attr` in test `test`.
    pub fn get(&self, test: &str, attr: &str) -> Option<&str> {
        self.test(test)?.attrs.iter().find(|(a, _)| a == attr).map(|(_, v)| v.as_str())
    }
}
