//! The nmap-os-db parser on a small database written for these tests (in
//! nmap-os-db's syntax, not taken from nmap's), on malformed files, and on
//! the nmap-os-db nmap 7.93 installs.
//!
//! In: texts. Out: nothing. What always holds: every expression form
//! parses as nmap 7.93 reads it; every malformed line is an error naming
//! its line; no text makes the parser panic.

use super::*;

pub(crate) const SAMPLE: &str = "\
# A database for tests, in nmap-os-db syntax.
MatchPoints
SEQ(SP=10%GCD=5%TI=20%TS=30)
OPS(O1=10%O2=10)
T1(R=50%DF=20%W=25%A=5)
T2(R=40%DF=10%Q=5)
U1(R=50%RIPL=30)

# Alpha: every expression form.
Fingerprint Alpha OS 1.0 # a comment nmap drops
Class Alpha | AlphaOS | 1.X | general purpose
CPE cpe:/o:alpha:alphaos:1 auto
CPE cpe:/o:alpha:alphaos
Class Alpha | AlphaOS || router
SEQ(SP=0-5%GCD=1|>1000%TI=Z|RI%TS=<10)
OPS(O1=M5B4ST11NW7%O2=)
T1(R=Y%DF=N%W=FA-104|8000%A=S+)
T2(R=N)
# a comment inside an entry
U1(DF=N%RIPL=G)

Fingerprint Beta
Class Beta |  Beta  |  | WAP
SEQ(SP=1|5-7%GCD=A|C-E)
OPS(O1=|M5B4%O2=O|S+)
T2()
IE(R=N)
";

fn sample() -> OsDb {
    OsDb::parse(SAMPLE).unwrap()
}

#[test]
fn entries_classes_and_cpes() {
    let db = sample();
    assert_eq!(db.len(), 2);
    let a = &db.entries()[0];
    assert_eq!((a.name.as_str(), a.line), ("Alpha OS 1.0", 10));
    assert_eq!(
        a.classes,
        [
            Class {
                vendor: "Alpha".into(),
                family: "AlphaOS".into(),
                generation: Some("1.X".into()),
                device_type: "general purpose".into(),
                cpe: vec!["cpe:/o:alpha:alphaos:1".into(), "cpe:/o:alpha:alphaos".into()],
            },
            Class {
                vendor: "Alpha".into(),
                family: "AlphaOS".into(),
                generation: None,
                device_type: "router".into(),
                cpe: vec![],
            },
        ]
    );
    let b = &db.entries()[1];
    assert_eq!((b.name.as_str(), b.line), ("Beta", 22));
    assert_eq!(b.classes[0].family, "Beta");
    assert_eq!(b.classes[0].generation, None);
    assert_eq!(db.weight("T1", "W"), Some(25));
    assert_eq!(db.weight("T1", "Q"), None);
    assert_eq!(db.weight("T9", "R"), None);
    // Kept, worth nothing: an attribute and a test MatchPoints does not weigh.
    assert_eq!(db.weight("U1", "DF"), None);
    assert_eq!(db.weight("IE", "R"), None);
    assert_eq!(db.conditions(1).last().map(|c| (c.test, c.attr, c.weight)), Some(("IE", "R", 0)));
    let conds: Vec<String> =
        db.conditions(0).map(|c| format!("{}.{}={}:{}", c.test, c.attr, c.expr.source, c.weight)).collect();
    assert_eq!(
        conds,
        [
            "SEQ.SP=0-5:10",
            "SEQ.GCD=1|>1000:5",
            "SEQ.TI=Z|RI:20",
            "SEQ.TS=<10:30",
            "OPS.O1=M5B4ST11NW7:10",
            "OPS.O2=:10",
            "T1.R=Y:50",
            "T1.DF=N:20",
            "T1.W=FA-104|8000:25",
            "T1.A=S+:5",
            "T2.R=N:40",
            "U1.DF=N:0",
            "U1.RIPL=G:30",
        ]
    );
    // T2() has no attributes; an index out of range has no conditions.
    assert_eq!(db.conditions(1).count(), 5);
    assert_eq!(db.conditions(7).count(), 0);
}

fn expr(db: &OsDb, entry: usize, test: &str, attr: &str) -> Expr {
    db.conditions(entry).find(|c| c.test == test && c.attr == attr).unwrap().expr.clone()
}

fn alts(e: &Expr) -> Vec<(&str, Numeric, bool)> {
    e.alts.iter().map(|a| (a.text.as_str(), a.numeric, a.last)).collect()
}

#[test]
fn every_expression_form() {
    let db = sample();
    use Numeric::*;
    assert_eq!(alts(&expr(&db, 0, "SEQ", "SP")), [("0-5", Range(0, 5), true)]);
    assert_eq!(alts(&expr(&db, 0, "SEQ", "GCD")), [("1", Text, false), (">1000", Greater(0x1000), true)]);
    assert_eq!(alts(&expr(&db, 0, "SEQ", "TI")), [("Z", Text, false), ("RI", Text, true)]);
    assert_eq!(alts(&expr(&db, 0, "SEQ", "TS")), [("<10", Less(0x10), true)]);
    assert_eq!(alts(&expr(&db, 0, "OPS", "O1")), [("M5B4ST11NW7", Text, true)]);
    assert_eq!(alts(&expr(&db, 0, "OPS", "O2")), [("", Text, true)]);
    assert_eq!(alts(&expr(&db, 0, "T1", "W")), [("FA-104", Range(0xfa, 0x104), false), ("8000", Text, true)]);
    // nmap 7.93 looks for '-' in the rest of the expression: a plain
    // alternative before a range never matches a number.
    assert_eq!(alts(&expr(&db, 1, "SEQ", "SP")), [("1", Never, false), ("5-7", Range(5, 7), true)]);
    assert_eq!(alts(&expr(&db, 1, "OPS", "O1")), [("", Text, false), ("M5B4", Text, true)]);
}

#[test]
fn expressions_judge_values_as_nmap_7_93() {
    let db = sample();
    let m = |test, attr, v| expr(&db, 0, test, attr).matches(v);
    let n = |test, attr, v| expr(&db, 1, test, attr).matches(v);
    // Ranges are numeric and inclusive; hex, any case.
    assert!(m("SEQ", "SP", "0") && m("SEQ", "SP", "5") && m("SEQ", "SP", "03") && !m("SEQ", "SP", "6"));
    assert!(m("T1", "W", "FA") && m("T1", "W", "fa") && m("T1", "W", "104") && !m("T1", "W", "105"));
    assert!(m("T1", "W", "8000") && !m("T1", "W", "08000"), "a plain value is compared as text");
    // Comparisons are strict.
    assert!(m("SEQ", "GCD", "1001") && !m("SEQ", "GCD", "FFF") && m("SEQ", "GCD", "1"));
    assert!(m("SEQ", "TS", "F") && !m("SEQ", "TS", "10") && !m("SEQ", "TS", "U"));
    // Strings.
    assert!(m("SEQ", "TI", "Z") && m("SEQ", "TI", "RI") && !m("SEQ", "TI", "I") && !m("SEQ", "TI", "R"));
    assert!(m("OPS", "O1", "M5B4ST11NW7") && !m("OPS", "O1", "M5B4ST11NW"));
    assert!(m("T1", "A", "S+") && !m("T1", "A", "S"));
    // The empty value matches the empty expression only.
    assert!(m("OPS", "O2", "") && !m("OPS", "O2", "M5B4"));
    // nmap 7.93's quirks: an alternative before the last matches a prefix,
    // so an empty one matches any text; `1` before `5-7` matches no number.
    assert!(m("SEQ", "TI", "ZZ"), "Z| matches a value starting with Z");
    assert!(m("SEQ", "GCD", "1000"), "1| matches 1000 by its first digit, though 1000 is not above 1000");
    assert!(n("OPS", "O1", "anything") && n("OPS", "O1", ""));
    assert!(n("OPS", "O2", "O") && n("OPS", "O2", "OX") && n("OPS", "O2", "S+") && !n("OPS", "O2", "S"));
    assert!(!n("SEQ", "SP", "1") && n("SEQ", "SP", "5") && n("SEQ", "SP", "7") && !n("SEQ", "SP", "8"));
    assert!(!n("SEQ", "GCD", "A") && n("SEQ", "GCD", "D"));
    // A value nmap's strtol reads as a number: leading 0x, whitespace, a
    // NUL ending it; an empty value is 0.
    assert!(m("SEQ", "SP", "0x3") && m("SEQ", "SP", " 3") && !m("SEQ", "SP", "3 ") && m("SEQ", "SP", "3\0junk"));
    assert!(m("SEQ", "SP", ""));
}

#[test]
fn strtol_as_glibc() {
    assert_eq!(strtol16(b"1F4"), (0x1f4, 3));
    assert_eq!(strtol16(b"0x1f|"), (0x1f, 4));
    assert_eq!(strtol16(b"0xz"), (0, 1));
    assert_eq!(strtol16(b"zz"), (0, 0));
    assert_eq!(strtol16(b" -"), (0, 0));
    assert_eq!(strtol16(b"-1"), (u32::MAX, 2));
    assert_eq!(strtol16(b"123456789"), (0x23456789, 9));
    assert_eq!(strtol16(b"FFFFFFFFFFFFFFFFFFFF"), (u32::MAX, 20));
}

const HEAD: &str = "MatchPoints\nSEQ(SP=10%TI=20)\nT1(R=50%W=25)\n\nFingerprint X\nClass A | B | C | D\n";

#[test]
fn malformed_files_name_their_line() {
    let cases: &[(String, usize, &str)] = &[
        ("Fingerprint X\n".into(), 1, "before the MatchPoints"),
        ("MatchPoints\nT1(R=1)\n\nhello\n".into(), 4, "expected a Fingerprint or MatchPoints"),
        ("MatchPoints\nT1(R=1)\n\nMatchPoints\n".into(), 4, "second MatchPoints section (the first is on line 1)"),
        ("MatchPoints extra\n".into(), 1, "text after MatchPoints"),
        ("MatchPoints\nT1(R=x)\n".into(), 2, "T1.R: \"x\" is not a number of points"),
        ("MatchPoints\nT1(R=-1)\n".into(), 2, "not a number of points"),
        ("MatchPoints\nT1(R=1)\nT1(W=1)\n".into(), 3, "test T1 is given twice in MatchPoints"),
        ("MatchPoints\nT1(R=1%R=2)\n".into(), 2, "T1.R is given twice in MatchPoints"),
        ("MatchPoints\nClass A | B | C | D\n".into(), 2, "belong to a Fingerprint"),
        ("MatchPoints\nT1(R=1)\n\nFingerprint X\n\nMatchPoints\n".into(), 6, "second MatchPoints"),
        (format!("{HEAD}Fingerprint   # only a comment\n"), 7, "no name"),
        (format!("{HEAD}Class A | B\n"), 7, "vendor | family | generation | device type"),
        ("MatchPoints\nT1(R=1)\n\nFingerprint X\nCPE cpe:/o:x\n".into(), 5, "CPE line before any Class"),
        (format!("{HEAD}CPE   \n"), 7, "CPE line with no CPE name"),
        (format!("{HEAD}T1 R=Y\n"), 7, "expected a test"),
        (format!("{HEAD}T1(R=Y\n"), 7, "no ')'"),
        (format!("{HEAD}T1(R=Y)x\n"), 7, "text after ')'"),
        (format!("{HEAD}(R=Y)\n"), 7, "a test with no name"),
        (format!("{HEAD}T1(R)\n"), 7, "T1: \"R\" is not attribute=value"),
        (format!("{HEAD}T1(R=Y%)\n"), 7, "is not attribute=value"),
        (format!("{HEAD}T1(R=Y)\nT1(W=0)\n"), 8, "test T1 is given twice in this Fingerprint"),
        (format!("{HEAD}T1(R=Y%R=N)\n"), 7, "T1.R is given twice"),
        (format!("{HEAD}T1(W=10-5)\n"), 7, "T1.W: the range 10-5 in \"10-5\" does not increase"),
        (format!("{HEAD}T1(W=1|5-5)\n"), 7, "the range 5-5"),
        (format!("{HEAD}T1(W=\0)\n"), 7, "a NUL byte"),
    ];
    for (text, line, what) in cases {
        let e = OsDb::parse(text).expect_err(text);
        assert_eq!(e.kind(), ErrorKind::Config);
        let msg = e.to_string();
        assert!(msg.starts_with(&format!("line {line}: ")), "{text:?}: {msg}");
        assert!(msg.contains(what), "{text:?}: {msg}");
    }
    for text in ["", "# only comments\n\n", "Fingerprint\n"] {
        let e = OsDb::parse(text).unwrap_err().to_string();
        assert!(e.contains("MatchPoints"), "{text:?}: {e}");
    }
    // What nmap accepts and so do we: CRLF, a Fingerprint line straight
    // after another entry's tests, comments, Class line spacing.
    let ok =
        "MatchPoints\r\nT1(R=1%W=2)\r\n\r\nFingerprint X\r\nClass A|B|C|D\r\nT1(R=Y)\r\nfingerprint Y\r\nT1(W=1-2)\r\n";
    let db = OsDb::parse(ok).unwrap();
    assert_eq!(db.entries().iter().map(|e| (e.name.as_str(), e.line)).collect::<Vec<_>>(), [("X", 4), ("Y", 7)]);
    assert_eq!(db.conditions(1).next().unwrap().expr.alts[0].numeric, Numeric::Range(1, 2));
}

#[test]
fn no_text_makes_it_panic() {
    // Every cut of the sample, and the sample with bytes replaced.
    for i in (0..=SAMPLE.len()).filter(|&i| SAMPLE.is_char_boundary(i)) {
        let _ = OsDb::parse(&SAMPLE[..i]);
    }
    let mut seed = 0x2545_f491_u64;
    let bytes = b"|-<>%=()#\n \0AZ9";
    for _ in 0..3000 {
        let mut t = SAMPLE.as_bytes().to_vec();
        for _ in 0..3 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let at = (seed >> 33) as usize % t.len();
            t[at] = bytes[(seed >> 20) as usize % bytes.len()];
        }
        if let Ok(db) = OsDb::parse(&String::from_utf8_lossy(&t)) {
            for e in 0..db.len() {
                for c in db.conditions(e) {
                    let _ = c.expr.matches("5");
                    let _ = c.expr.matches("Z");
                }
            }
        }
    }
}

#[test]
fn load_names_the_file() {
    let e = OsDb::load(Some(Path::new("/nonexistent/os-db")), &[]).unwrap_err().to_string();
    assert!(e.contains("/nonexistent/os-db"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("os-db");
    std::fs::write(&p, format!("{HEAD}T1(R\n")).unwrap();
    let e = OsDb::load(Some(&p), &[]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);
    assert!(e.to_string().contains(&format!("nmap-os-db {}: line 7: ", p.display())), "{e}");
    std::fs::write(&p, SAMPLE).unwrap();
    assert_eq!(OsDb::load(Some(&p), &[]).unwrap().unwrap().len(), 2);
}

/// nmap 7.93's nmap-os-db, which the project's test setup installs.
pub(crate) fn installed() -> (String, OsDb) {
    let path = Path::new("/usr/share/nmap/nmap-os-db");
    assert!(path.is_file(), "nmap's nmap-os-db is not installed at {}", path.display());
    let text = std::fs::read_to_string(path).unwrap();
    let db = OsDb::parse(&text).unwrap();
    (text, db)
}

#[test]
fn the_installed_database_parses_whole() {
    let (text, db) = installed();
    let lines: Vec<&str> = text.lines().collect();
    let fingerprints: Vec<usize> =
        lines.iter().enumerate().filter(|(_, l)| l.starts_with("Fingerprint ")).map(|(i, _)| i + 1).collect();
    assert_eq!(db.entries().iter().map(|e| e.line).collect::<Vec<_>>(), fingerprints);
    let classes = lines.iter().filter(|l| l.starts_with("Class ")).count();
    let cpes = lines.iter().filter(|l| l.starts_with("CPE ")).count();
    assert_eq!(db.entries().iter().map(|e| e.classes.len()).sum::<usize>(), classes);
    assert_eq!(db.entries().iter().flat_map(|e| &e.classes).map(|c| c.cpe.len()).sum::<usize>(), cpes);
    assert!(db.entries().iter().flat_map(|e| &e.classes).flat_map(|c| &c.cpe).all(|c| c.starts_with("cpe:/")));
    // Every attribute of every test line is a condition.
    let attrs: usize = lines
        .iter()
        .skip_while(|l| !l.starts_with("Fingerprint "))
        .filter(|l| !["#", "Fingerprint ", "Class ", "CPE "].iter().any(|p| l.starts_with(p)))
        .filter(|l| l.contains('(') && l.ends_with(')'))
        .map(|l| {
            let body = &l[l.find('(').unwrap() + 1..l.len() - 1];
            if body.is_empty() {
                0
            } else {
                body.split('%').count()
            }
        })
        .sum();
    assert_eq!((0..db.len()).map(|e| db.conditions(e).count()).sum::<usize>(), attrs);
    assert_eq!(db.weight("SEQ", "TS"), Some(100));
    assert_eq!(db.weight("U1", "RIPCK"), Some(100));
}
