//! `moonscan probes import`: converts an nmap-service-probes file that the
//! user has into moonscan's probe YAML.
//!
//! nmap's patterns are PCRE; moonscan's are the regex crate's, which has no
//! lookaround, backreferences, atomic groups or possessive quantifiers (the
//! price of linear-time matching). Patterns are rewritten (byte mode, octal
//! escapes, `\Z`); nmap's header-skipping idiom
//! `(?:[^\r\n]*\r\n(?!\r\n))*?` becomes the equivalent `(?:[^\r\n]+\r\n)*?`
//! (a header line, never the blank line that ends the headers). The few
//! rules that still need lookaround or backreferences are kept as
//! `backtrack` rules (fancy-regex with a step limit); what compiles on
//! neither engine is left out and counted by reason. `fallback`, `Exclude`
//! (TCP ports), `tcpwrappedms` and `totalwaitms` carry over. nmap's
//! `$SUBST()` and `$I()` template helpers become plain `$n` and are counted.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::probes::{FileSpec, ProbeSpec, RuleSpec};
use super::rules::Identity;
use super::rules::{compile, Rule};

/// What a conversion kept and left out.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub probes: usize,
    pub rules_seen: usize,
    pub rules_kept: usize,
    /// Kept rules that run on the backtracking engine.
    pub rules_backtracking: usize,
    /// Rules left out, by reason.
    pub skipped: BTreeMap<&'static str, usize>,
    /// Templates whose nmap helpers were simplified.
    pub approximated: usize,
    /// Lines not understood (with their line numbers), first few only.
    pub unparsed: Vec<String>,
}

/// Converts the text of an nmap-service-probes file.
pub fn convert(text: &str) -> (FileSpec, Report) {
    let mut spec = FileSpec::default();
    let mut report = Report::default();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        let current = spec.probes.last_mut();
        let ok = match (word, current) {
            ("Probe", _) => probe(rest).map(|p| spec.probes.push(p)).is_some(),
            ("match" | "softmatch", Some(p)) => {
                report.rules_seen += 1;
                match rule(rest, &mut report.approximated) {
                    Ok(r) => {
                        report.rules_kept += 1;
                        report.rules_backtracking += usize::from(r.backtrack);
                        if word == "match" {
                            p.matches.push(r)
                        } else {
                            p.soft_matches.push(r)
                        }
                    }
                    Err(reason) => *report.skipped.entry(reason).or_default() += 1,
                }
                true
            }
            ("ports", Some(p)) => ports(rest).map(|v| p.ports = v).is_some(),
            ("sslports", Some(p)) => ports(rest).map(|v| p.tls_ports = v).is_some(),
            ("rarity", Some(p)) => {
                rest.trim().parse().ok().filter(|r| (1..=9).contains(r)).map(|r| p.rarity = r).is_some()
            }
            ("totalwaitms", Some(p)) => {
                rest.trim().parse::<u64>().ok().map(|w| p.wait_ms = w.clamp(1, 60_000)).is_some()
            }
            ("tcpwrappedms", Some(p)) => {
                rest.trim().parse::<u64>().ok().map(|w| p.tcpwrapped_ms = Some(w.clamp(1, 60_000))).is_some()
            }
            ("fallback", Some(p)) => {
                p.fallback = rest.split(',').map(|f| f.trim().to_string()).filter(|f| !f.is_empty()).take(8).collect();
                !p.fallback.is_empty()
            }
            ("Exclude", _) => exclude(rest).map(|ports| spec.exclude.extend(ports)).is_some(),
            _ => false,
        };
        if !ok && report.unparsed.len() < 20 {
            report.unparsed.push(format!("line {}: {}", n + 1, line.chars().take(80).collect::<String>()));
        }
    }
    report.probes = spec.probes.len();
    (spec, report)
}

/// `TCP GetRequest q|GET / HTTP/1.0\r\n\r\n|`
fn probe(rest: &str) -> Option<ProbeSpec> {
    let mut parts = rest.splitn(3, ' ');
    let protocol = match parts.next()? {
        "TCP" => "tcp",
        "UDP" => "udp",
        _ => return None,
    };
    let name = parts.next()?.to_string();
    let q = parts.next()?.strip_prefix('q')?;
    let (payload, _) = delimited(q)?;
    Some(ProbeSpec {
        rarity: if name == "NULL" { 1 } else { 5 },
        name,
        protocol: protocol.into(),
        payload: payload_escapes(payload),
        ports: Vec::new(),
        tls_ports: Vec::new(),
        wait_ms: 5000,
        matches: Vec::new(),
        soft_matches: Vec::new(),
        fallback: Vec::new(),
        tcpwrapped_ms: None,
        txid: None,
        answers_from_any_port: false,
    })
}

/// Splits `<d>text<d>rest` on its delimiter `d`.
fn delimited(s: &str) -> Option<(&str, &str)> {
    let d = s.chars().next()?;
    let body = &s[d.len_utf8()..];
    let end = body.find(d)?;
    Some((&body[..end], &body[end + d.len_utf8()..]))
}

/// nmap payload escapes to ours (`\a \b \f \v` become `\xHH`).
fn payload_escapes(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut it = p.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            if c.is_ascii() && !c.is_ascii_control() {
                out.push(c);
            } else {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
            continue;
        }
        match it.next() {
            Some('a') => out.push_str("\\x07"),
            Some('b') => out.push_str("\\x08"),
            Some('f') => out.push_str("\\x0c"),
            Some('v') => out.push_str("\\x0b"),
            Some(e @ ('r' | 'n' | 't' | '0' | '\\' | 'x')) => {
                out.push('\\');
                out.push(e);
            }
            Some(other) => out.push(other),
            None => out.push_str("\\\\"),
        }
    }
    out
}

fn ports(list: &str) -> Option<Vec<u16>> {
    let mut out = Vec::new();
    for item in list.trim().split(',') {
        let (a, b) = item.split_once('-').unwrap_or((item, item));
        let (a, b): (u16, u16) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
        out.extend(a..=b.max(a));
        if out.len() > 4096 {
            return None;
        }
    }
    Some(out)
}

/// `http m|^HTTP/1\.[01] (\d\d\d)|s p/nginx/ v/$1/ cpe:/a:igor_sysoev:nginx:$1/`
fn rule(rest: &str, approximated: &mut usize) -> Result<RuleSpec, &'static str> {
    let (service, rest) = rest.split_once(' ').ok_or("unreadable rule")?;
    let m = rest.strip_prefix('m').ok_or("unreadable rule")?;
    let (pattern, rest) = delimited(m).ok_or("unreadable rule")?;
    let flags: String = rest.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    let id = Identity { service: service.to_string(), ..Identity::default() };
    let linear = pcre_to_rust(&skip_headers(pattern), &flags).and_then(|p| {
        compile(&p).map_err(|_| "does not compile as a regex-crate pattern")?;
        Ok(p)
    });
    let mut r = match linear {
        Ok(p) => RuleSpec { pattern: p, id, ..RuleSpec::default() },
        Err(why) => {
            // Lookaround and the like: fancy-regex, on the response read as Latin-1.
            let p = pcre_to_fancy(pattern, &flags);
            Rule::backtracking(&p, id.clone()).and_then(|r| r.compiles()).map_err(|_| why)?;
            RuleSpec { pattern: p, backtrack: true, id, ..RuleSpec::default() }
        }
    };
    let mut rest = &rest[flags.len()..];
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let (key, body) = if let Some(b) = rest.strip_prefix("cpe:") { ("cpe", b) } else { rest.split_at(1) };
        let Some((value, after)) = delimited(body) else { break };
        let value = simplify_template(value, approximated);
        match key {
            "p" => r.id.product = Some(value),
            "v" => r.id.version = Some(value),
            "i" => r.id.info = Some(value),
            "o" => r.id.os = Some(value),
            "h" => r.id.hostname = Some(value),
            "d" => r.id.device = Some(value),
            "cpe" => r.id.cpe.push(format!("cpe:/{value}")),
            _ => {}
        }
        // A cpe may end with an `a` flag (application); nothing to keep.
        rest = after.strip_prefix('a').filter(|_| key == "cpe").unwrap_or(after);
    }
    Ok(r)
}

/// `$SUBST(1,"_",".")` and `$I(1,">")` become `$1`.
fn simplify_template(t: &str, approximated: &mut usize) -> String {
    let mut out = t.to_string();
    for helper in ["$SUBST(", "$I("] {
        while let Some(i) = out.find(helper) {
            let Some(len) = out[i..].find(')') else { break };
            let digit = out[i + helper.len()..].chars().next().filter(char::is_ascii_digit).unwrap_or('1');
            out.replace_range(i..i + len + 1, &format!("${digit}"));
            *approximated += 1;
        }
    }
    out
}

/// nmap's idiom for "any header lines, but never past the blank line":
/// each line consumed must not be followed by CRLF. Consuming only
/// non-empty lines says the same, in a form without lookahead.
const HEADER_SKIP: &str = r"(?:[^\r\n]*\r\n(?!\r\n))*?";
const HEADER_SKIP_LINEAR: &str = r"(?:[^\r\n]+\r\n)*?";

fn skip_headers(p: &str) -> Cow<'_, str> {
    if p.contains(HEADER_SKIP) {
        Cow::Owned(p.replace(HEADER_SKIP, HEADER_SKIP_LINEAR))
    } else {
        Cow::Borrowed(p)
    }
}

/// A PCRE pattern in fancy-regex's syntax, which is PCRE's for what nmap
/// uses: flags in front, octal `\0NN` as `\xNN`, `\Z` and `\h` spelled out.
fn pcre_to_fancy(p: &str, flags: &str) -> String {
    let mut out = String::new();
    let on: String = flags.chars().filter(|c| matches!(c, 's' | 'i')).collect();
    if !on.is_empty() {
        out.push_str(&format!("(?{on})"));
    }
    let b = p.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            i = escape(b, i, &mut out);
            continue;
        }
        let ch_len = std::str::from_utf8(&b[i..]).ok().and_then(|s| s.chars().next()).map_or(1, char::len_utf8);
        out.push_str(std::str::from_utf8(&b[i..i + ch_len]).unwrap_or("?"));
        i += ch_len;
    }
    out
}

/// Writes the escape at `b[i]` (a backslash and what follows) as both
/// engines read it: octal `\0`, `\0N`, `\0NN` as `\xNN`, `\Z` and `\h`
/// spelled out, the rest as it is. Returns where the pattern goes on.
fn escape(b: &[u8], i: usize, out: &mut String) -> usize {
    match b[i + 1] {
        b'0' => {
            let digits = b[i + 2..].iter().take(2).take_while(|d| (b'0'..=b'7').contains(d)).count();
            let v = u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 2 + digits]).unwrap_or("0"), 8);
            out.push_str(&format!("\\x{:02x}", v.unwrap_or(0)));
            return i + 2 + digits;
        }
        b'Z' => out.push_str("(?:\\n?\\z)"),
        b'h' => out.push_str("[ \\t]"),
        e => {
            out.push('\\');
            out.push(e as char);
        }
    }
    i + 2
}

/// `T:9100-9107,U:53`: the TCP ports of nmap's `Exclude`.
fn exclude(list: &str) -> Option<Vec<u16>> {
    let mut out = Vec::new();
    for item in list.split(',') {
        let item = item.trim();
        if let Some(t) = item.strip_prefix("T:") {
            out.extend(ports(t)?);
        } else if !item.starts_with("U:") {
            out.extend(ports(item)?);
        }
    }
    Some(out)
}

/// Rewrites a PCRE pattern for the regex crate, or says why it cannot.
fn pcre_to_rust(p: &str, flags: &str) -> Result<String, &'static str> {
    let b = p.as_bytes();
    // Flags turned on come before the dash: `(?si-u)`.
    let mut out = String::from("(?");
    if flags.contains('s') {
        out.push('s');
    }
    if flags.contains('i') {
        out.push('i');
    }
    out.push_str("-u)");
    let (mut i, mut in_class) = (0, false);
    while i < b.len() {
        let c = b[i];
        match c {
            b'\\' if i + 1 < b.len() => {
                if !in_class && b[i + 1].is_ascii_digit() && b[i + 1] != b'0' {
                    return Err("backreference");
                }
                i = escape(b, i, &mut out);
                continue;
            }
            b'[' if !in_class => in_class = true,
            b']' if in_class => in_class = false,
            b'(' if !in_class && b[i + 1..].starts_with(b"?") => {
                let r = &b[i + 2..];
                if r.starts_with(b"=") || r.starts_with(b"!") || r.starts_with(b"<=") || r.starts_with(b"<!") {
                    return Err("lookaround");
                }
                if r.starts_with(b">") {
                    return Err("atomic group");
                }
            }
            b'*' | b'+' | b'?' | b'}' if !in_class && b.get(i + 1) == Some(&b'+') => {
                return Err("possessive quantifier");
            }
            _ => {}
        }
        // Bytes of the pattern are copied as they are (UTF-8 stays UTF-8).
        let ch_len = std::str::from_utf8(&b[i..]).ok().and_then(|s| s.chars().next()).map_or(1, char::len_utf8);
        out.push_str(std::str::from_utf8(&b[i..i + ch_len]).unwrap_or("?"));
        i += ch_len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // A file in nmap's format, written for this test (not taken from nmap).
    const SAMPLE: &str = r#"
# comment
Exclude T:9100
Probe TCP NULL q||
totalwaitms 6000
tcpwrappedms 3000
match ssh m|^SSH-([\d.]+)-OpenSSH_([\w._-]+)\r?\n| p/OpenSSH/ v/$2/ i/protocol $1/ cpe:/a:openbsd:openssh:$2/a
match ftp m/^220 (?=vsFTPd)/ p/vsftpd/
match echo m|^(.)\1| p/echo/
match foo m|^(?>abc)| p/foo/
match bar m|^a++b| p/bar/
match nul m|^\0\x01(\w+)\Z|s p/nul/ v/$SUBST(1,"_",".")/
softmatch smtp m|^220 .*smtp|i
Probe TCP GetRequest q|GET / HTTP/1.0\r\n\r\n\a|
rarity 1
ports 80,8000-8002
sslports 443
fallback NULL
match http m|^HTTP/1\.[01] \d\d\d.*\r\nServer: nginx/([\d.]+)|s p/nginx/ v/$1/
match http m|^HTTP/1\.[01] \d\d\d [^\r\n]*\r\n(?:[^\r\n]*\r\n(?!\r\n))*?Server: Apache/([\d.]+)|s p/Apache httpd/ v/$1/
match weird m|(?\|a(b)\|c(d))| p/branch reset/
Probe UDP Weird q|x|
bogus line here
"#;

    #[test]
    fn converts_what_the_regex_crate_can_do_and_counts_the_rest() {
        let (spec, r) = convert(SAMPLE);
        assert_eq!(r.probes, 3);
        assert_eq!(r.rules_seen, 10);
        assert_eq!((r.rules_kept, r.rules_backtracking), (9, 4));
        let want: BTreeMap<&str, usize> = [("does not compile as a regex-crate pattern", 1)].into_iter().collect();
        assert_eq!(r.skipped, want);
        assert_eq!(r.approximated, 1);
        assert_eq!(r.unparsed, ["line 23: bogus line here"]);
        assert_eq!(spec.exclude, [9100]);
        let null = &spec.probes[0];
        assert_eq!((null.name.as_str(), null.wait_ms, null.rarity), ("NULL", 6000, 1));
        assert_eq!(null.tcpwrapped_ms, Some(3000));
        assert_eq!(null.matches[0].id.cpe, ["cpe:/a:openbsd:openssh:$2"]);
        let backtracking: Vec<&str> =
            null.matches.iter().filter(|m| m.backtrack).filter_map(|m| m.id.product.as_deref()).collect();
        assert_eq!(backtracking, ["vsftpd", "echo", "foo", "bar"]);
        assert_eq!(null.soft_matches.len(), 1);
        let get = &spec.probes[1];
        assert_eq!(get.payload, r"GET / HTTP/1.0\r\n\r\n\x07");
        assert_eq!((get.ports.clone(), get.tls_ports.clone(), get.rarity), (vec![80, 8000, 8001, 8002], vec![443], 1));
        assert_eq!(get.fallback, ["NULL"]);
        // nmap's header-skipping lookahead becomes a linear pattern.
        let apache = &get.matches[1];
        assert!(!apache.backtrack && apache.pattern.contains(r"(?:[^\r\n]+\r\n)*?"), "{}", apache.pattern);
        assert_eq!(spec.probes[2].protocol, "udp");
    }

    #[test]
    fn converted_output_loads_and_matches() {
        let (spec, _) = convert(SAMPLE);
        let yaml = serde_yaml::to_string(&spec).unwrap();
        let mut db = super::super::ProbeDb::default();
        db.add_str(&yaml, std::path::Path::new("imported.yaml")).unwrap();
        assert!(db.excluded(9100));
        let null = db.get("NULL").unwrap();
        assert_eq!(null.tcpwrapped, Some(std::time::Duration::from_secs(3)));
        let first = |data: &[u8]| null.matches.iter().find_map(|m| m.apply(data));
        let id = first(b"SSH-2.0-OpenSSH_9.2p1\r\n").unwrap();
        assert_eq!((id.version.as_deref(), id.info.as_deref()), (Some("9.2p1"), Some("protocol 2.0")));
        let id = first(b"\x00\x01abc").unwrap();
        assert_eq!(id.version.as_deref(), Some("abc"), "octal \\0 and \\Z converted");
        assert!(null.soft_matches[0].apply(b"220 mail SMTP ready").is_some(), "i flag kept");
        // The backtracking rules run: lookahead, backreference, atomic group, possessive.
        assert_eq!(first(b"220 vsFTPd 3.0.3").unwrap().product.as_deref(), Some("vsftpd"));
        assert_eq!(first(b"xx").unwrap().product.as_deref(), Some("echo"));
        assert!(first(b"xy").is_none());
        assert_eq!(first(b"abc").unwrap().product.as_deref(), Some("foo"));
        assert_eq!(first(b"ab").unwrap().product.as_deref(), Some("bar"));
        // The translated header skip finds a Server line, never one in the body.
        let get = db.get("GetRequest").unwrap();
        let apache = |r: &[u8]| get.matches.iter().find_map(|m| m.apply(r)).and_then(|id| id.version);
        assert_eq!(apache(b"HTTP/1.1 200 OK\r\nDate: x\r\nServer: Apache/2.4.57\r\n\r\n").as_deref(), Some("2.4.57"));
        assert_eq!(apache(b"HTTP/1.1 200 OK\r\nDate: x\r\n\r\nServer: Apache/2.4.57\r\n"), None);
    }

    /// Bytes above 0x7f reach a backtracking rule as themselves (`\xHH`).
    #[test]
    fn backtracking_rules_see_bytes() {
        let id = Identity { service: "bin".into(), version: Some("$1".into()), ..Identity::default() };
        let r = Rule::backtracking(r"^\xff(\w)(?=\xfe)", id).unwrap();
        assert_eq!(r.apply(b"\xffA\xfe").unwrap().version.as_deref(), Some("A"));
        assert!(r.apply(b"\xffA\xfd").is_none());
    }
}
