//! Matching on small databases written for these tests (weights, missing
//! tests and attributes, expressions, ties, the guess threshold, too many
//! exact matches, classes), and on nmap 7.93's installed nmap-os-db: every
//! entry, given a host that satisfies each of its expressions, scores
//! 100 % and is among the best.
//!
//! In: texts and fingerprints. Out: nothing. What always holds: the
//! outcome is what nmap 7.93 lists for the same database and fingerprint.

use super::*;
use crate::os::db::{Numeric, OsDb};
use crate::os::Test;

/// A fingerprint from lines such as `T1(R=Y%DF=N)`.
fn fp(text: &str) -> Fingerprint {
    let tests = text
        .split_whitespace()
        .map(|t| {
            let (name, body) = t.split_once('(').unwrap();
            let body = body.strip_suffix(')').unwrap();
            let attrs = body
                .split('%')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (a, v) = p.split_once('=').unwrap();
                    (a.to_string(), v.to_string())
                })
                .collect();
            Test { name: name.to_string(), attrs }
        })
        .collect();
    Fingerprint { tests }
}

const WEIGHTS: &str = "\
MatchPoints
SEQ(SP=10%TI=20)
OPS(O1=10)
T1(R=50%DF=20%W=20)
T2(R=40%DF=10)
U1(R=50%DF=10)

Fingerprint Alpha
Class A | Alpha | 1 | general purpose
CPE cpe:/o:a:alpha:1
SEQ(SP=0-5%TI=Z)
OPS(O1=M5B4)
T1(R=Y%DF=N%W=8000)
T2(R=N)
U1(DF=N)
WIN(R=N)
IE(R=N)
";

const HOST: &str = "SEQ(SP=3%TI=Z) OPS(O1=M5B4) T1(R=Y%DF=N%W=8000) T2(R=N) U1(R=Y%DF=N)";

#[test]
fn points_are_summed_over_attributes_both_have() {
    let db = OsDb::parse(WEIGHTS).unwrap();
    let acc = |host: &str| accuracy(&db, 0, &fp(host));
    assert_eq!(acc(HOST), 1.0);
    // TI misses: 20 of 180 points.
    assert_eq!(acc(&HOST.replace("TI=Z", "TI=I")), 160.0 / 180.0);
    // A test the host lacks counts for nothing, and so does an attribute.
    assert_eq!(acc(&HOST.replace("OPS(O1=M5B4) ", "").replace("TI=Z", "TI=I")), 150.0 / 170.0);
    assert_eq!(acc(&HOST.replace("%W=8000", "").replace("TI=Z", "TI=I")), 140.0 / 160.0);
    // Attributes the entry lacks count for nothing: T2(R=Y%DF=N) is judged
    // on R alone; U1(R=N) shares nothing with the entry's U1(DF=N).
    assert_eq!(acc(&HOST.replace("T2(R=N)", "T2(R=Y%DF=N)")), 140.0 / 180.0);
    assert_eq!(acc(&HOST.replace("U1(R=Y%DF=N)", "U1(R=N)")), 1.0);
    // Names are case-sensitive; unknown tests are ignored.
    assert_eq!(acc(&format!("{} X9(R=N) t1(R=N)", HOST)), 1.0);
    // The first of a test given twice, and the first of an attribute.
    assert_eq!(acc(&format!("{} T1(R=N%DF=Y%W=0)", HOST)), 1.0);
    assert_eq!(acc(&HOST.replace("TI=Z", "TI=Z%TI=I")), 1.0);
    // Attributes MatchPoints does not weigh count for nothing (nmap 7.93
    // would stop on them).
    assert_eq!(acc(&format!("{HOST} WIN(R=Y) IE(R=Y)").replace("TI=Z", "TI=I")), 160.0 / 180.0);
    // Nothing in common: 0. An index out of range: 0.
    assert_eq!(acc("T3(R=Y)"), 0.0);
    assert_eq!(accuracy(&db, 5, &fp(HOST)), 0.0);
    // As nmap prints it: (int)(accuracy * 100).
    let o = best(&db, &fp(&HOST.replace("TI=Z", "TI=I")), &MatchOptions::default());
    assert_eq!((o.matches[0].accuracy, o.exact), (88, false));
    assert_eq!(percent(0.57), 56, "57/100 is 0.56999..., which nmap prints as 56");
    assert_eq!(percent(2.0 / 3.0), 66);
    assert_eq!(percent(1.0), 100);
}

#[test]
fn ranges_comparisons_and_alternatives() {
    let text =
        "MatchPoints\nSEQ(SP=1%GCD=1%TS=1%TI=1)\n\nFingerprint E\nSEQ(SP=3B-45|FA-104%GCD=>1000|1%TS=<A%TI=I|RD)\n";
    let db = OsDb::parse(text).unwrap();
    let acc = |host: &str| percent(accuracy(&db, 0, &fp(host)));
    assert_eq!(acc("SEQ(SP=3B%GCD=1001%TS=9%TI=I)"), 100);
    assert_eq!(acc("SEQ(SP=104%GCD=1%TS=0%TI=RD)"), 100);
    assert_eq!(acc("SEQ(SP=46%GCD=1000%TS=A%TI=R)"), 0);
    assert_eq!(acc("SEQ(SP=F9%GCD=01%TS=U%TI=RI)"), 0);
    assert_eq!(acc("SEQ(SP=FA%GCD=2%TS=U%TI=RI)"), 25);
}

/// MatchPoints worth 100 in all; an entry misses the attributes named
/// in its spec (A 50, B 30, C 15, D 4, E 1): `-` is exact, `E` is 99 %,
/// `D` 96 %, `C` 85 %, `CE` 84 %.
fn ranked_db(entries: &[(&str, &str)]) -> OsDb {
    let mut text = String::from("MatchPoints\nT1(A=50%B=30%C=15%D=4%E=1)\n\n");
    for (name, misses) in entries {
        let attrs: Vec<String> =
            ["A", "B", "C", "D", "E"].iter().map(|a| format!("{a}={}", u8::from(!misses.contains(a)))).collect();
        text += &format!("Fingerprint {name}\nClass V | {name} | | general purpose\nT1({})\n\n", attrs.join("%"));
    }
    OsDb::parse(&text).unwrap()
}

const ALL: &str = "T1(A=1%B=1%C=1%D=1%E=1)";

fn shown(o: &Outcome) -> Vec<(String, u8)> {
    o.matches.iter().map(|m| (m.name.clone(), m.accuracy)).collect()
}

fn names(v: &[(&str, u8)]) -> Vec<(String, u8)> {
    v.iter().map(|(n, a)| (n.to_string(), *a)).collect()
}

#[test]
fn the_guess_threshold_is_85_percent() {
    let db = ranked_db(&[("low", "CE"), ("edge", "C"), ("none", "B")]);
    let o = best(&db, &fp(ALL), &MatchOptions { guess: true });
    assert_eq!(shown(&o), names(&[("edge", 85)]));
    assert!(!o.exact && !o.too_many);
    assert_eq!(o, best(&db, &fp(ALL), &MatchOptions { guess: false }), "--osscan-guess changes no match");
    let o = best(&ranked_db(&[("low", "CE"), ("none", "B")]), &fp(ALL), &MatchOptions::default());
    assert_eq!(o, Outcome::default());
}

#[test]
fn guesses_within_ten_points_of_the_best_and_ten_at_most() {
    let db = ranked_db(&[("c", "C"), ("d1", "D"), ("e", "E"), ("d2", "D")]);
    let o = best(&db, &fp(ALL), &MatchOptions::default());
    // Ties keep the file's order; 85 is not above 99 - 10.
    assert_eq!(shown(&o), names(&[("e", 99), ("d1", 96), ("d2", 96)]));
    assert_eq!(o.matches[0].line, db.entries()[2].line);
    assert_eq!(o.matches[0].classes[0].accuracy, 99);
    let many: Vec<(String, &str)> = (0..40).map(|i| (format!("n{i:02}"), "E")).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(n, m)| (n.as_str(), *m)).collect();
    let o = best(&ranked_db(&many), &fp(ALL), &MatchOptions::default());
    assert_eq!(o.matches.len(), 10);
    assert_eq!(o.matches[9].name, "n09");
    // The classes come from all 36 ranked, not only the ten shown.
    assert_eq!(o.classes.len(), 36);
    assert_eq!(o.classes[35].family, "n35");
}

#[test]
fn exact_matches_hide_guesses_and_same_names_count_once() {
    let db = ranked_db(&[("x", "E"), ("y", "-"), ("dup", "D"), ("dup", "-"), ("z", "-"), ("dup", "-")]);
    let o = best(&db, &fp(ALL), &MatchOptions::default());
    assert_eq!(shown(&o), names(&[("y", 100), ("dup", 100), ("z", 100)]));
    assert!(o.exact && !o.too_many);
    // The first exact "dup" (line of the fourth entry) stays.
    assert_eq!(o.matches[1].line, db.entries()[3].line);
    // Classes: only the exact matches'.
    let fams: Vec<&str> = o.classes.iter().map(|c| c.family.as_str()).collect();
    assert_eq!(fams, ["y", "dup", "z"]);
    // A better entry of the same name replaces a worse one.
    let o = best(&ranked_db(&[("dup", "D"), ("dup", "E")]), &fp(ALL), &MatchOptions::default());
    assert_eq!(shown(&o), names(&[("dup", 99)]));
    assert_eq!(o.matches[0].line, 8);
}

/// `n` entries with `classes_each` classes: exact for `T1(R=Y%W=1)`, 99 %
/// for `T1(R=Y%W=0)`.
fn exact_db(n: usize, classes_each: usize) -> OsDb {
    let mut text = String::from("MatchPoints\nT1(R=99%W=1)\n\n");
    for i in 0..n {
        text += &format!("Fingerprint os{i}\n");
        for c in 0..classes_each {
            text += &format!("Class V | F{i} | {c} | general purpose\nCPE cpe:/o:v:f{i}:{c} auto\n");
        }
        text += "T1(R=Y%W=1)\n\n";
    }
    OsDb::parse(&text).unwrap()
}

#[test]
fn too_many_exact_matches() {
    let host = fp("T1(R=Y%W=1)");
    let o = best(&exact_db(8, 1), &host, &MatchOptions::default());
    assert_eq!((o.matches.len(), o.exact, o.too_many), (8, true, false));
    assert_eq!(o.matches[7].classes[0].cpe, ["cpe:/o:v:f7:0"]);
    // Nine: nmap names none, but still sums up their classes.
    let o = best(&exact_db(9, 1), &host, &MatchOptions::default());
    assert_eq!((o.matches.len(), o.exact, o.too_many, o.classes.len()), (0, true, true, 9));
    // More than 36: the list overflows and there is no classification.
    let o = best(&exact_db(36, 1), &host, &MatchOptions::default());
    assert_eq!((o.too_many, o.classes.len()), (true, 36));
    let o = best(&exact_db(37, 1), &host, &MatchOptions::default());
    assert_eq!((o.matches.len(), o.too_many, o.classes.len()), (0, true, 0));
    // Exact classes that do not fit in 36: no classification either, but
    // the matches are named.
    let o = best(&exact_db(5, 8), &host, &MatchOptions::default());
    assert_eq!((o.matches.len(), o.too_many, o.classes.len()), (5, false, 0));
    // Guessed classes that do not fit are cut at 36.
    let o = best(&exact_db(5, 8), &fp("T1(R=Y%W=0)"), &MatchOptions::default());
    assert_eq!((o.matches.len(), o.exact, o.too_many, o.classes.len()), (5, false, false, 36));
    assert_eq!(o.classes[35].cpe, ["cpe:/o:v:f4:3"]);
}

#[test]
fn classes_are_deduplicated_with_the_first_accuracy() {
    let text = "MatchPoints\nT1(A=50%B=30%C=15%D=4%E=1)\n\n\
        Fingerprint one\nClass V | F | 1 | router\nClass V | F | | router\nT1(A=1%B=1%C=1%D=1%E=0)\n\n\
        Fingerprint two\nClass V | F | 1 | router\nClass V | G | 1 | router\nCPE cpe:/o:v:g\nT1(A=1%B=1%C=1%D=0%E=1)\n";
    let db = OsDb::parse(text).unwrap();
    let o = best(&db, &fp(ALL), &MatchOptions::default());
    let got: Vec<(&str, Option<&str>, u8)> =
        o.classes.iter().map(|c| (c.family.as_str(), c.generation.as_deref(), c.accuracy)).collect();
    assert_eq!(got, [("F", Some("1"), 99), ("F", None, 99), ("G", Some("1"), 96)]);
    assert_eq!(o.classes[2].cpe, ["cpe:/o:v:g"]);
    // Each match keeps all its own classes.
    assert_eq!(o.matches[1].classes.len(), 2);
}

/// A value that satisfies `expr`, tried alternative by alternative.
fn satisfying(expr: &crate::os::db::Expr) -> Option<String> {
    for alt in &expr.alts {
        let mut candidates = match alt.numeric {
            Numeric::Less(n) if n > 0 => vec![format!("{:X}", n - 1)],
            Numeric::Greater(n) if n < u32::MAX => vec![format!("{:X}", n + 1)],
            Numeric::Range(lo, _) => vec![format!("{lo:X}")],
            _ => vec![],
        };
        candidates.push(alt.text.clone());
        if let Some(c) = candidates.into_iter().find(|c| expr.matches(c)) {
            return Some(c);
        }
    }
    None
}

fn host_for(db: &OsDb, entry: usize) -> Fingerprint {
    let mut tests: Vec<Test> = Vec::new();
    for c in db.conditions(entry) {
        let value = satisfying(c.expr)
            .unwrap_or_else(|| panic!("line {}: nothing satisfies {:?}", db.entries()[entry].line, c.expr.source));
        if tests.last().is_none_or(|t| t.name != c.test) {
            tests.push(Test { name: c.test.to_string(), attrs: Vec::new() });
        }
        tests.last_mut().unwrap().attrs.push((c.attr.to_string(), value));
    }
    Fingerprint { tests }
}

/// Every entry of nmap 7.93's database, given a host that satisfies each
/// of its expressions, scores 100 % and is among the best: named among
/// the exact matches (itself, or an earlier entry of the same name), or
/// tied with more than eight other entries (too many to name).
#[test]
fn every_installed_entry_matches_a_host_made_from_it() {
    let (_, db) = crate::os::db::tests::installed();
    let n = db.len();
    let threads = std::thread::available_parallelism().map_or(1, |p| p.get()).min(8);
    let (alone, too_many) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let db = &db;
                s.spawn(move || {
                    let (mut alone, mut too_many) = (0, 0);
                    for e in (t..n).step_by(threads) {
                        let host = host_for(db, e);
                        let entry = &db.entries()[e];
                        assert_eq!(accuracy(db, e, &host), 1.0, "line {}", entry.line);
                        let o = best(db, &host, &MatchOptions::default());
                        assert!(o.exact, "line {}", entry.line);
                        if o.too_many {
                            too_many += 1;
                            continue;
                        }
                        let m = o.matches.iter().find(|m| m.name == entry.name);
                        let m = m.unwrap_or_else(|| panic!("line {}: not among {:?}", entry.line, o.matches));
                        assert_eq!(m.accuracy, 100);
                        assert!(m.line <= entry.line);
                        if o.matches.len() == 1 {
                            alone += 1;
                        }
                    }
                    (alone, too_many)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    });
    eprintln!("{n} entries: {alone} the only exact match, {too_many} tied with more than eight others");
    assert!(alone > n / 2, "{alone} of {n}");
}
