//! Matching a host's fingerprint against nmap-os-db, as nmap 7.93 does.
//!
//! In: an [`OsDb`] and a subject [`Fingerprint`]. Out: an [`Outcome`]: the
//! matches nmap 7.93 lists (its XML `<osmatch>` elements, and the names
//! of its "OS details" or "Aggressive OS guesses" line), whether they are
//! exact or there were too many exact ones, and the deduplicated OS
//! classes its "Device type/Running/OS CPE" summary is made from. What
//! always holds: no input makes it panic; the same database and subject
//! give the same outcome; each accuracy is nmap's ratio of points, printed
//! as nmap prints it (truncated to a whole percent).
//!
//! The rules, from nmap 7.93's osscan.cc (`compare_fingerprints`,
//! `AVal_match`, `match_fingerprint`), FingerPrintResults.cc
//! (`populateClassification`) and output.cc (`printosscanoutput`):
//!
//! - An entry's score sums, over every attribute present both in the entry
//!   and in the subject, the points `MatchPoints` gives it; the attributes
//!   whose expression matches earn them. A test missing on either side,
//!   or an attribute missing on either side, counts for nothing: so a
//!   subject `T2(R=N)` is judged against an entry's `T2` on `R` alone, and
//!   against an entry's `U1(DF=N%...)` (no `R`) not at all. Accuracy is
//!   earned / possible, 0 when nothing is in common. A subject that gives
//!   a test or attribute twice is read by its first one, as nmap does.
//! - Entries are walked in file order. One whose accuracy is at least
//!   [`GUESS_THRESHOLD`] (or is exactly 1) enters the ranked list, unless
//!   an entry of the same name is already listed with an accuracy at least
//!   as high (a lower one of the same name is replaced). It goes before
//!   the first listed entry with a strictly lower accuracy, so ties keep
//!   the file's order. The list holds [`MAX_RESULTS`]; once full, an entry
//!   must beat the last one by 0.00001. An exact entry arriving when
//!   [`MAX_RESULTS`] exact ones are listed stops the walk: too many.
//! - Shown: with more than [`MAX_EXACT_SHOWN`] exact matches (or the
//!   overflow above), none, and `too_many`; with some exact matches, all
//!   of them; otherwise the first [`MAX_GUESSES_SHOWN`] listed whose
//!   accuracy is above the best's minus 0.10. Each match's classes get the
//!   match's accuracy. nmap writes these to XML with or without
//!   `--osscan-guess`, which only decides whether normal output prints the
//!   guesses ("Aggressive OS guesses", when nmap also does so for a
//!   fingerprint that is not ideal); so [`MatchOptions::guess`] changes
//!   nothing here, and whoever prints decides with it.
//! - Classes ([`Outcome::classes`], nmap's classification): the classes of
//!   the ranked list in order, each (vendor, family, generation, device
//!   type) once with the accuracy of the first match that has it; at most
//!   [`MAX_RESULTS`]; with exact matches, only theirs. None when the walk
//!   overflowed, or when an exact match's class finds no room (nmap then
//!   prints no summary). The printer takes, as nmap does, classes while
//!   their accuracy is above the first's minus 0.1, only exact ones unless
//!   guessing, and no guessed one past the tenth.

use crate::findings::{OsClass, OsMatch};

use super::db::{OsDb, Value};
use super::Fingerprint;

/// nmap's `OSSCAN_GUESS_THRESHOLD`: the least accuracy a match is kept with.
pub const GUESS_THRESHOLD: f64 = 0.85;
/// nmap's `MAX_FP_RESULTS`: the most matches (and classes) kept.
pub const MAX_RESULTS: usize = 36;
/// With more exact matches than this, nmap names none ("Too many
/// fingerprints match this host to give specific OS details").
pub const MAX_EXACT_SHOWN: usize = 8;
/// The most guesses nmap shows.
pub const MAX_GUESSES_SHOWN: usize = 10;

/// How to match.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatchOptions {
    /// `--osscan-guess`/`--fuzzy`. In nmap 7.93 it changes no match, only
    /// whether normal output prints the guesses (see the module's doc);
    /// kept so that the choice travels with the matching.
    pub guess: bool,
}

/// What matching found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// What nmap lists as `<osmatch>`, best first (see the module's doc);
    /// empty when nothing reached [`GUESS_THRESHOLD`] or `too_many`.
    pub matches: Vec<OsMatch>,
    /// The matches are exact (100 %); also set with `too_many`.
    pub exact: bool,
    /// Too many entries matched exactly to name one.
    pub too_many: bool,
    /// nmap's deduplicated OS classification, in order (see the module's doc).
    pub classes: Vec<OsClass>,
}

/// An accuracy as nmap prints it: `(int)(accuracy * 100)`.
pub fn percent(accuracy: f64) -> u8 {
    (accuracy * 100.0) as u8
}

/// The subject's value for each attribute slot of the database.
fn subject_values<'a>(db: &OsDb, subject: &'a Fingerprint) -> Vec<Option<Value<'a>>> {
    let mut values = vec![None; db.slot_count()];
    let mut seen_tests = Vec::new();
    for test in &subject.tests {
        if seen_tests.contains(&test.name.as_str()) {
            continue;
        }
        seen_tests.push(test.name.as_str());
        if db.test_index(&test.name).is_none() {
            continue;
        }
        for (attr, value) in &test.attrs {
            if let Some(slot) = db.slot(&test.name, attr) {
                if values[slot].is_none() {
                    values[slot] = Some(Value::new(value));
                }
            }
        }
    }
    values
}

fn ratio(earned: u64, possible: u64) -> f64 {
    if possible == 0 {
        0.0
    } else {
        earned as f64 / possible as f64
    }
}

/// The accuracy (0 to 1, nmap's `compare_fingerprints`) of entry
/// `entry` for `subject`; 0 for an index out of range.
pub fn accuracy(db: &OsDb, entry: usize, subject: &Fingerprint) -> f64 {
    let values = subject_values(db, subject);
    let (mut earned, mut possible) = (0u64, 0u64);
    for &c in db.cond_ids(entry) {
        let cond = db.conds()[c as usize];
        if let Some(v) = &values[cond.slot as usize] {
            let w = u64::from(db.slot_weight(cond.slot as usize));
            possible += w;
            if db.expr(cond.expr).matches_value(v) {
                earned += w;
            }
        }
    }
    ratio(earned, possible)
}

/// The accuracy of every entry, in file order: each distinct condition is
/// judged once, then entries only add up points.
fn all_accuracies(db: &OsDb, subject: &Fingerprint) -> Vec<f64> {
    let values = subject_values(db, subject);
    // (possible, earned) points of each distinct condition.
    let points: Vec<(u32, u32)> = db
        .conds()
        .iter()
        .map(|cond| match &values[cond.slot as usize] {
            None => (0, 0),
            Some(v) => {
                let w = db.slot_weight(cond.slot as usize);
                (w, if db.expr(cond.expr).matches_value(v) { w } else { 0 })
            }
        })
        .collect();
    (0..db.len())
        .map(|e| {
            let (mut possible, mut earned) = (0u64, 0u64);
            for &c in db.cond_ids(e) {
                let (p, g) = points[c as usize];
                possible += u64::from(p);
                earned += u64::from(g);
            }
            ratio(earned, possible)
        })
        .collect()
}

/// nmap's ranked list (`match_fingerprint`): entries with their accuracy,
/// best first, how many are exact, and whether exact ones overflowed.
struct Ranked {
    list: Vec<(usize, f64)>,
    exact: usize,
    overflow: bool,
}

fn rank(db: &OsDb, accuracies: &[f64]) -> Ranked {
    let entries = db.entries();
    let mut r = Ranked { list: Vec::with_capacity(MAX_RESULTS + 1), exact: 0, overflow: false };
    let mut entrance = GUESS_THRESHOLD;
    for (i, &acc) in accuracies.iter().enumerate() {
        if !(acc >= entrance || acc == 1.0) {
            continue;
        }
        if let Some(pos) = r.list.iter().position(|&(j, _)| entries[j].name == entries[i].name) {
            if r.list[pos].1 >= acc {
                continue;
            }
            r.list.remove(pos);
        }
        if acc == 1.0 {
            if r.exact == MAX_RESULTS {
                r.overflow = true;
                return r;
            }
            r.exact += 1;
        }
        let at = r.list.iter().position(|&(_, a)| a < acc).unwrap_or(r.list.len());
        r.list.insert(at, (i, acc));
        r.list.truncate(MAX_RESULTS);
        if r.list.len() == MAX_RESULTS {
            entrance = r.list[MAX_RESULTS - 1].1 + 0.00001;
        }
    }
    r
}

fn os_class(c: &super::db::Class, accuracy: u8) -> OsClass {
    OsClass {
        vendor: c.vendor.clone(),
        family: c.family.clone(),
        generation: c.generation.clone(),
        device_type: c.device_type.clone(),
        accuracy,
        cpe: c.cpe.clone(),
    }
}

/// nmap's `populateClassification`.
fn classification(db: &OsDb, r: &Ranked) -> Vec<OsClass> {
    if r.overflow {
        return Vec::new();
    }
    let mut out: Vec<OsClass> = Vec::new();
    let mut exact_classes = 0;
    for (n, &(e, acc)) in r.list.iter().enumerate() {
        for c in &db.entries()[e].classes {
            let dup = out.iter().any(|o| {
                o.vendor == c.vendor
                    && o.family == c.family
                    && o.device_type == c.device_type
                    && o.generation == c.generation
            });
            if dup {
                continue;
            }
            if out.len() == MAX_RESULTS {
                return if n < r.exact { Vec::new() } else { out };
            }
            if exact_classes > 0 && n >= r.exact {
                return out;
            }
            out.push(os_class(c, percent(acc)));
            if n < r.exact {
                exact_classes += 1;
            }
        }
    }
    out
}

/// Matches `subject` against every entry of `db` as nmap 7.93 does (the
/// rules are in the module's doc).
pub fn best(db: &OsDb, subject: &Fingerprint, opts: &MatchOptions) -> Outcome {
    let _ = opts.guess; // Changes nothing in nmap 7.93's matching.
    let r = rank(db, &all_accuracies(db, subject));
    let classes = classification(db, &r);
    if r.overflow || r.exact > MAX_EXACT_SHOWN {
        return Outcome { matches: Vec::new(), exact: true, too_many: true, classes };
    }
    let shown: Vec<(usize, f64)> = if r.exact > 0 {
        r.list[..r.exact].to_vec()
    } else {
        let floor = r.list.first().map_or(0.0, |&(_, a)| a - 0.10);
        r.list.iter().take(MAX_GUESSES_SHOWN).take_while(|&&(_, a)| a > floor).copied().collect()
    };
    let matches = shown
        .into_iter()
        .map(|(e, acc)| {
            let entry = &db.entries()[e];
            let accuracy = percent(acc);
            OsMatch {
                name: entry.name.clone(),
                accuracy,
                line: entry.line,
                classes: entry.classes.iter().map(|c| os_class(c, accuracy)).collect(),
            }
        })
        .collect();
    Outcome { matches, exact: r.exact > 0, too_many: false, classes }
}

#[cfg(test)]
#[path = "matching_tests.rs"]
mod tests;
