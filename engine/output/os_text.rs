//! What nmap prints of OS detection (`-O`), as pure functions of an
//! [`OsEvent`]: the `-oN` lines after a host's MAC address (nmap's
//! `printosscanoutput`), the `-oG` fields, the `-oX` elements inside
//! `<host>`, and moonscan's own line for a passive hint.
//!
//! In: one host's [`OsEvent`] (whether guesses were asked for is its
//! `guess`) and an [`OsView`] (verbosity). Out: text in nmap 7.93's words
//! and order.
//! What always holds: a line nmap prints only with `-v` (uptime, sequence
//! prediction, IP ID class) or `-vv` (the fingerprint of a matched host)
//! is printed under the same verbosity; the `-oX` fingerprint is written
//! exactly when `-oN` shows it, as nmap does; a passive hint never takes
//! the shape of nmap's match lines and is not written where nmap has no
//! place for it (`-oX`, `-oG`).

use std::fmt::Write as _;

use super::report::Collected;
use super::screen::screen_text;
use super::xml_esc::esc;
use crate::findings::{OsClass, OsEvent, OsHint, Proto};

/// How much of OS detection's result the reports show. Whether guesses
/// were asked for (`--osscan-guess`) travels with the event
/// ([`OsEvent::guess`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OsView {
    /// `-v` counted.
    pub verbosity: usize,
}

impl OsView {
    /// The view of a scan: its verbosity.
    pub fn of(scan: &Collected) -> OsView {
        OsView { verbosity: scan.verbosity() }
    }
}

/// Whether OS detection ran on the host (not only the passive hint).
pub fn detected(os: &OsEvent) -> bool {
    !os.ports_used.is_empty()
        || !os.matches.is_empty()
        || os.fingerprint.is_some()
        || os.too_many
        || os.distance.is_some()
        || os.tcp_sequence.is_some()
}

/// The best match and its accuracy, if any.
pub fn best(os: &OsEvent) -> Option<(&str, u8)> {
    os.matches.first().map(|m| (m.name.as_str(), m.accuracy))
}

/// moonscan's line for a passive hint (never nmap's words for a match).
pub fn hint_line(h: &OsHint) -> String {
    format!("OS hint (passive, guess): {} ({})", screen_text(&h.family), screen_text(&h.evidence))
}

/// What nmap decides before printing: whether the matches are shown as
/// exact, as guesses, or not at all.
enum Outcome {
    TooMany,
    Exact,
    Guesses,
    NoMatches,
}

fn outcome(os: &OsEvent) -> Outcome {
    if os.too_many || (os.exact && os.matches.len() > 8) {
        Outcome::TooMany
    } else if os.matches.is_empty() {
        Outcome::NoMatches
    } else if os.exact {
        Outcome::Exact
    } else {
        Outcome::Guesses
    }
}

/// Whether nmap prints the fingerprint (and writes `<osfingerprint>`).
pub fn fingerprint_shown(os: &OsEvent, view: OsView) -> bool {
    if os.fingerprint.is_none() {
        return false;
    }
    let vv = view.verbosity > 1;
    match outcome(os) {
        Outcome::TooMany | Outcome::Exact => vv,
        Outcome::Guesses | Outcome::NoMatches => os.not_ideal.is_none() || vv,
    }
}

/// The fingerprint as nmap's `merge_fpr` gives it: ending in a line break.
fn fingerprint_text(os: &OsEvent) -> String {
    let fp = os.fingerprint.as_deref().unwrap_or("");
    if fp.ends_with('\n') {
        fp.to_string()
    } else {
        format!("{fp}\n")
    }
}

/// The guesses nmap lists: at most 10, within 0.10 of the best. The
/// event's matches were cut so on nmap's own ratios; its whole percents
/// (truncated) can only tell a match 11 points or more below the best,
/// which is surely out; one exactly 10 below may be in, and is kept.
fn shown_guesses(os: &OsEvent) -> impl Iterator<Item = &crate::findings::OsMatch> {
    let top = os.matches.first().map_or(0, |m| i32::from(m.accuracy));
    os.matches.iter().take(10).filter(move |m| i32::from(m.accuracy) >= top - 10)
}

/// nmap's "Warning: OSScan results may be unreliable" condition: no open
/// or no closed TCP port to send the probes to.
fn unreliable(os: &OsEvent) -> bool {
    let has = |state: &str| os.ports_used.iter().any(|p| p.proto == Proto::Tcp && p.state == state);
    !(has("open") && has("closed"))
}

/// The `-oN` lines of a host's OS detection (each ending in a newline),
/// in nmap's order; or, with -v, the passive hint's line when detection
/// did not run.
pub fn normal_lines(os: &OsEvent, view: OsView) -> String {
    let mut t = String::new();
    if !detected(os) {
        // The passive hint is moonscan's own: shown with -v, so a report
        // without it keeps nmap's layout line for line.
        if let Some(h) = os.hint.as_ref().filter(|_| view.verbosity > 0) {
            let _ = writeln!(t, "{}", hint_line(h));
        }
        return t;
    }
    let outcome = outcome(os);
    let vv = view.verbosity > 1;
    if unreliable(os) && !matches!(outcome, Outcome::TooMany) {
        t.push_str(
            "Warning: OSScan results may be unreliable because we could not find at least 1 open and 1 closed port\n",
        );
    }
    // nmap: "If the FP can't be submitted anyway, might as well make a guess."
    let guess = os.guess || os.not_ideal.is_some();
    classification(&mut t, os, guess);
    let fp = |t: &mut String| {
        if fingerprint_shown(os, view) {
            let _ = writeln!(t, "TCP/IP fingerprint:\n{}", screen_text(&fingerprint_text(os)));
        }
    };
    match outcome {
        Outcome::TooMany => {
            t.push_str("Too many fingerprints match this host to give specific OS details\n");
            fp(&mut t);
        }
        Outcome::Exact => {
            let names: Vec<String> = os.matches.iter().map(|m| screen_text(&m.name).into_owned()).collect();
            let _ = writeln!(t, "OS details: {}", names.join(", "));
            fp(&mut t);
        }
        Outcome::Guesses => {
            if let (true, Some(why)) = (vv, &os.not_ideal) {
                let _ = writeln!(t, "OS fingerprint not ideal because: {}", screen_text(why));
            }
            if guess {
                let guesses: Vec<String> =
                    shown_guesses(os).map(|m| format!("{} ({}%)", screen_text(&m.name), m.accuracy)).collect();
                let _ = writeln!(t, "Aggressive OS guesses: {}", guesses.join(", "));
            }
            if os.not_ideal.is_none() {
                t.push_str(
                    "No exact OS matches for host (If you know what OS is running on it, see https://nmap.org/submit/ ).\n",
                );
            } else {
                t.push_str("No exact OS matches for host (test conditions non-ideal).\n");
            }
            fp(&mut t);
        }
        Outcome::NoMatches => {
            match &os.not_ideal {
                None => t.push_str(
                    "No OS matches for host (If you know what OS is running on it, see https://nmap.org/submit/ ).\n",
                ),
                Some(why) => {
                    let _ =
                        writeln!(t, "OS fingerprint not ideal because: {}\nNo OS matches for host", screen_text(why));
                }
            }
            fp(&mut t);
        }
    }
    if let (Some(u), true) = (&os.uptime, view.verbosity > 0) {
        let days = u.seconds as f64 / 86400.0;
        let _ = writeln!(t, "Uptime guess: {days:.3} days (since {})", screen_text(&u.lastboot));
    }
    if let Some(d) = os.distance {
        let _ = writeln!(t, "Network Distance: {d} hop{}", if d == 1 { "" } else { "s" });
    }
    if view.verbosity > 0 {
        if let Some(s) = &os.tcp_sequence {
            let _ =
                writeln!(t, "TCP Sequence Prediction: Difficulty={} ({})", s.index.unwrap_or(0), screen_text(&s.class));
        }
        if let Some(s) = &os.ip_id_sequence {
            let _ = writeln!(t, "IP ID Sequence Generation: {}", screen_text(&s.class));
        }
    }
    t
}

/// The classes nmap's summary is made from: the event's classification,
/// or, for an event without one, the same rules applied to the matches
/// it holds (each class once, in order; once a match is exact, no class
/// of an inexact one).
fn classes_of(os: &OsEvent) -> Vec<&OsClass> {
    if !os.classification.is_empty() {
        return os.classification.iter().collect();
    }
    let mut classes: Vec<&OsClass> = Vec::new();
    let mut perfect = false;
    for m in &os.matches {
        for c in &m.classes {
            let same = |x: &&OsClass| {
                x.vendor == c.vendor
                    && x.family == c.family
                    && x.generation == c.generation
                    && x.device_type == c.device_type
            };
            if classes.iter().any(same) {
                continue;
            }
            if perfect && m.accuracy < 100 {
                return classes;
            }
            perfect |= m.accuracy >= 100;
            classes.push(c);
        }
    }
    classes
}

/// nmap's "Device type", "Running" and "OS CPE" lines
/// (`printosclassificationoutput`): classes are taken in order while
/// their accuracy is above the first's minus 0.1, only exact ones unless
/// guessing, no inexact one past the tenth; more than 8 device types,
/// CPEs or families (nmap's `MAX_OS_CLASSMEMBERS`) and nothing is printed.
/// Accuracies are whole percents (nmap's ratios truncated): a class
/// exactly 10 points below the first is taken as out, where nmap, on its
/// ratios, may keep it (it does when the ratios differ by less than 0.1).
fn classification(t: &mut String, os: &OsEvent, guess: bool) {
    let classes = classes_of(os);
    // nmap's OSC_num_perfect_matches: exact classes come first.
    let perfect = classes.iter().take_while(|c| c.accuracy >= 100).count();
    let (mut types, mut cpes): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    // (vendor family, generations, best accuracy)
    let mut families: Vec<(String, String, u8)> = Vec::new();
    let mut overflow = false;
    let top = classes.first().map_or(0, |c| i32::from(c.accuracy));
    for (i, c) in classes.iter().enumerate() {
        let acc = i32::from(c.accuracy);
        if (!guess && i >= perfect) || acc <= top - 10 || (acc < 100 && i > 9) {
            break;
        }
        overflow |= !add_new(&mut types, &c.device_type);
        for cpe in &c.cpe {
            overflow |= !add_new(&mut cpes, cpe);
        }
        let full = if c.vendor == c.family { c.family.clone() } else { format!("{} {}", c.vendor, c.family) };
        match families.iter().position(|f| f.0 == full) {
            Some(at) => {
                let gens = &mut families[at].1;
                if let Some(g) = &c.generation {
                    if !gens.contains(g.as_str()) {
                        if !gens.is_empty() {
                            gens.push('|');
                        }
                        gens.push_str(g);
                    }
                }
            }
            None if families.len() >= 8 => {
                overflow = true;
                break;
            }
            None => families.push((full, c.generation.clone().unwrap_or_default(), c.accuracy)),
        }
    }
    if overflow || families.is_empty() {
        return;
    }
    let _ = writeln!(t, "Device type: {}", screen_text(&types.join("|")));
    let running: Vec<String> = families
        .iter()
        .enumerate()
        .map(|(i, (name, gens, acc))| {
            let mut s = name.clone();
            if !gens.is_empty() {
                let _ = write!(s, " {gens}");
            }
            if i >= perfect {
                let _ = write!(s, " ({acc}%)");
            }
            s
        })
        .collect();
    let guessing = if perfect == 0 { " (JUST GUESSING)" } else { "" };
    let _ = writeln!(t, "Running{guessing}: {}", screen_text(&running.join(", ")));
    if !cpes.is_empty() {
        let _ = writeln!(t, "OS CPE: {}", screen_text(&cpes.join(" ")));
    }
}

/// nmap's `addtochararrayifnew`: false when the list is full.
fn add_new<'a>(list: &mut Vec<&'a str>, v: &'a str) -> bool {
    const MAX: usize = 8;
    if list.contains(&v) {
        return true;
    }
    if list.len() >= MAX {
        return false;
    }
    list.push(v);
    true
}

/// nmap's `-oG` fields of OS detection, each after a tab: `OS:` (exact
/// matches only, joined by `|`), `Seq Index:`, `IP ID Seq:`.
pub fn grepable_fields(os: &OsEvent) -> String {
    let mut t = String::new();
    // A field stays on its line: control characters become spaces.
    let field = |s: &str| -> String { s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect() };
    if matches!(outcome(os), Outcome::Exact) {
        let names: Vec<String> = os.matches.iter().map(|m| field(&m.name)).collect();
        let _ = write!(t, "\tOS: {}", names.join("|"));
    }
    if let Some(s) = &os.tcp_sequence {
        let _ = write!(t, "\tSeq Index: {}", s.index.unwrap_or(0));
    }
    if let Some(s) = &os.ip_id_sequence {
        let _ = write!(t, "\tIP ID Seq: {}", field(&s.class));
    }
    t
}

/// nmap's `-oX` elements of OS detection, in `<host>` after `<ports>`:
/// `<os>` (ports used, matches with their classes, the fingerprint when
/// shown), `<uptime>`, `<distance>`, `<tcpsequence>`, `<ipidsequence>`,
/// `<tcptssequence>`. Nothing for a passive hint alone.
pub fn xml(doc: &mut String, os: &OsEvent, view: OsView) {
    if !detected(os) {
        return;
    }
    doc.push_str("<os>");
    for p in &os.ports_used {
        let _ = writeln!(doc, "<portused state=\"{}\" proto=\"{}\" portid=\"{}\"/>", esc(&p.state), p.proto, p.port);
    }
    let shown: Vec<&crate::findings::OsMatch> = match outcome(os) {
        Outcome::TooMany | Outcome::NoMatches => Vec::new(),
        Outcome::Exact => os.matches.iter().collect(),
        Outcome::Guesses => shown_guesses(os).collect(),
    };
    for m in shown {
        let _ = write!(doc, "<osmatch name=\"{}\" accuracy=\"{}\" line=\"{}\"", esc(&m.name), m.accuracy, m.line);
        if m.classes.is_empty() {
            doc.push_str("/>\n");
            continue;
        }
        doc.push_str(">\n");
        for c in &m.classes {
            let _ = write!(
                doc,
                "<osclass type=\"{}\" vendor=\"{}\" osfamily=\"{}\"",
                esc(&c.device_type),
                esc(&c.vendor),
                esc(&c.family)
            );
            if let Some(g) = &c.generation {
                let _ = write!(doc, " osgen=\"{}\"", esc(g));
            }
            let _ = write!(doc, " accuracy=\"{}\"", c.accuracy);
            if c.cpe.is_empty() {
                doc.push_str("/>\n");
            } else {
                doc.push('>');
                for cpe in &c.cpe {
                    let _ = write!(doc, "<cpe>{}</cpe>", esc(cpe));
                }
                doc.push_str("</osclass>\n");
            }
        }
        doc.push_str("</osmatch>\n");
    }
    if fingerprint_shown(os, view) {
        let _ = writeln!(doc, "<osfingerprint fingerprint=\"{}\"/>", esc(&fingerprint_text(os)));
    }
    doc.push_str("</os>\n");
    if let Some(u) = &os.uptime {
        let _ = writeln!(doc, "<uptime seconds=\"{}\" lastboot=\"{}\"/>", u.seconds, esc(&u.lastboot));
    }
    if let Some(d) = os.distance {
        let _ = writeln!(doc, "<distance value=\"{d}\"/>");
    }
    if let Some(s) = &os.tcp_sequence {
        let _ = writeln!(
            doc,
            "<tcpsequence index=\"{}\" difficulty=\"{}\" values=\"{}\"/>",
            s.index.unwrap_or(0),
            esc(&s.class),
            esc(&s.values)
        );
    }
    if let Some(s) = &os.ip_id_sequence {
        let _ = writeln!(doc, "<ipidsequence class=\"{}\" values=\"{}\"/>", esc(&s.class), esc(&s.values));
    }
    if let Some(s) = &os.tcp_ts_sequence {
        if s.values.is_empty() {
            let _ = writeln!(doc, "<tcptssequence class=\"{}\"/>", esc(&s.class));
        } else {
            let _ = writeln!(doc, "<tcptssequence class=\"{}\" values=\"{}\"/>", esc(&s.class), esc(&s.values));
        }
    }
}

/// nmap's line near the end of `-oN` when any host had OS detection.
pub fn performed_line(version_scan: bool) -> &'static str {
    if version_scan {
        "OS and Service detection performed. Please report any incorrect results at https://nmap.org/submit/ .\n"
    } else {
        "OS detection performed. Please report any incorrect results at https://nmap.org/submit/ .\n"
    }
}

#[cfg(test)]
#[path = "os_text_tests.rs"]
mod tests;
