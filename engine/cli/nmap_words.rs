//! nmap's spellings on the command line: the multi-letter single-dash
//! flags (`-sT`, `-oJ`, `-Pn`), run-together scan letters (`-sCV`) and
//! debugging levels (`-dd`) rewritten into the long flags clap parses, and
//! the one line that answers an nmap option moonscan does not support.

/// nmap flags of more than one letter after a single dash, and their long names here.
pub const NMAP_FLAGS: &[(&str, &str)] = &[
    ("-sS", "--syn"),
    ("-sT", "--connect"),
    ("-sA", "--ack-scan"),
    ("-sW", "--window-scan"),
    ("-sF", "--fin-scan"),
    ("-sN", "--null-scan"),
    ("-sX", "--xmas-scan"),
    ("-sM", "--maimon-scan"),
    ("-sU", "--udp"),
    ("-sV", "--service-version"),
    ("-sC", "--script-default"),
    ("-sn", "--ping-scan"),
    // nmap's older names of -sn and -Pn.
    ("-sP", "--ping-scan"),
    ("-sL", "--list-scan"),
    ("-Pn", "--no-ping"),
    ("-PN", "--no-ping"),
    ("-P0", "--no-ping"),
    ("-oN", "--output-normal"),
    ("-oX", "--output-xml"),
    ("-oG", "--output-grepable"),
    ("-oJ", "--output-json"),
    ("-oA", "--output-all"),
    ("-iL", "--input-list"),
];

/// nmap options moonscan does not support (yet), with what they do (and,
/// after "; ", what to use instead), and whether they take a value.
const UNSUPPORTED: &[(&str, &str, bool)] = &[
    ("-sI", "idle scan", true),
    ("-sY", "SCTP INIT scan", false),
    ("-sZ", "SCTP COOKIE-ECHO scan", false),
    ("-sO", "IP protocol scan", false),
    ("-sR", "RPC scan", false),
    ("-b", "FTP bounce scan", true),
    ("-PY", "SCTP ping", false),
    ("-PO", "IP protocol ping", false),
    ("-iR", "random targets", true),
    ("-f", "packet fragmentation", false),
    ("-ff", "packet fragmentation", false),
    ("--mtu", "packet fragmentation", true),
    ("-D", "decoys", true),
    ("-g", "a fixed source port", true),
    ("--source-port", "a fixed source port", true),
    ("--spoof-mac", "MAC address spoofing", true),
    ("--data", "custom payloads", true),
    ("--data-string", "custom payloads", true),
    ("--data-length", "random payload padding", true),
    ("--ip-options", "IP options", true),
    ("--ttl", "a fixed IP time-to-live", true),
    ("--badsum", "bad checksums", false),
    ("--proxies", "relaying through proxies", true),
    ("--min-hostgroup", "host groups", true),
    ("--max-hostgroup", "host groups", true),
    ("--min-parallelism", "a probe parallelism floor", true),
    ("--min-rtt-timeout", "RTT timeout tuning", true),
    ("--initial-rtt-timeout", "RTT timeout tuning", true),
    ("--max-scan-delay", "scan delay tuning", true),
    ("--defeat-rst-ratelimit", "rate-limit workarounds", false),
    ("--defeat-icmp-ratelimit", "rate-limit workarounds", false),
    ("--script-updatedb", "a script database; plugins are found at each run", false),
    ("--privileged", "privilege overrides", false),
    ("--unprivileged", "privilege overrides", false),
    ("--send-eth", "sending choices", false),
    ("--send-ip", "sending choices", false),
    ("-oS", "script kiddie output", true),
    ("-oM", "machine output", true),
    ("--append-output", "appending to output files", false),
    ("--datadir", "nmap's data directory", true),
    ("--servicedb", "nmap's services file", true),
    ("--versiondb", "nmap's probe file; moonscan probes import converts it", true),
    ("--packet-trace", "packet tracing", false),
    ("--version-trace", "version detection tracing", false),
    ("--iflist", "interface listing", false),
    ("--stats-every", "periodic status lines; the progress line is live", true),
    ("--noninteractive", "the interactive switch", false),
    ("--nsock-engine", "nsock engines", true),
    ("--discovery-ignore-rst", "discovery tuning", false),
    ("--allports", "version detection of excluded ports", false),
    ("--exclude-ports-file", "port exclusion files", true),
];

/// nmap's timing templates by name (`-T aggressive`), as `-T4`.
const TEMPLATES: [&str; 6] = ["paranoid", "sneaky", "polite", "normal", "aggressive", "insane"];

/// The one line that answers an nmap option moonscan does not support
/// (`--opt=value` and values attached to short options included), or an
/// nmap flag spelled in the wrong case (`-sv`: nmap's flags are
/// case-sensitive, and `-sn` and `-sN` differ), if argv has one before `--`.
pub fn unsupported(argv: &[String]) -> Option<String> {
    for a in argv.iter().skip(1).take_while(|a| *a != "--") {
        let exact = NMAP_FLAGS.iter().any(|(f, _)| f == a);
        if let Some((f, long)) = NMAP_FLAGS.iter().find(|(f, _)| !exact && f.eq_ignore_ascii_case(a)) {
            return Some(format!(
                "moonscan: {a} is not an option (nmap's flags are case-sensitive); did you mean {f} ({long})?"
            ));
        }
        let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
        let hit = UNSUPPORTED.iter().find(|(flag, _, takes)| {
            name == *flag
                // -Ddecoy1, -sIzombie, -oSfile: single-dash options with a value attached.
                || (*takes && !flag.starts_with("--") && a.starts_with(flag) && !a.starts_with("--"))
                // -PY22 and -PO1: ping types with their ports attached.
                || (flag.starts_with("-P") && a.starts_with(flag))
        });
        if let Some((flag, what, _)) = hit {
            return Some(match what.split_once("; ") {
                Some((what, instead)) => format!("moonscan: {flag} ({what}) is not supported yet; {instead}"),
                None => format!("moonscan: {flag} ({what}) is not supported yet"),
            });
        }
    }
    None
}

/// Rewrites nmap's multi-letter single-dash flags into long flags.
pub(super) fn rewrite(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut rest = false;
    let mut args = argv.iter().peekable();
    while let Some(a) = args.next() {
        if rest || a == "--" {
            rest = true;
            out.push(a.clone());
            continue;
        }
        // -T aggressive, -Tinsane: the templates by name.
        let template = |name: &str| TEMPLATES.iter().position(|t| t.eq_ignore_ascii_case(name));
        if let Some(n) = a.strip_prefix("-T").and_then(template) {
            out.push(format!("-T{n}"));
            continue;
        }
        if a == "-T" {
            if let Some(n) = args.peek().and_then(|v| template(v)) {
                args.next();
                out.push(format!("-T{n}"));
                continue;
            }
        }
        // -v3: nmap's verbosity level, as -v -v -v.
        if let Some(n) = a.strip_prefix("-v").and_then(|l| l.parse::<usize>().ok()).filter(|&n| n <= 9) {
            out.extend(std::iter::repeat_n("-v".to_string(), n));
            continue;
        }
        // -sCV, -sVC, -sSV...: nmap's scan letters run together.
        if a.len() > 3 && a.starts_with("-s") && a[2..].chars().all(|c| c.is_ascii_alphabetic()) {
            let each: Vec<Option<&str>> = a[2..]
                .chars()
                .map(|c| NMAP_FLAGS.iter().find(|(short, _)| *short == format!("-s{c}")).map(|(_, long)| *long))
                .collect();
            if each.iter().all(Option::is_some) {
                out.extend(each.into_iter().flatten().map(str::to_string));
                continue;
            }
        }
        // nmap's debugging levels (-d, -dd, -d3): more output, as -v.
        if a.len() >= 2 && a.starts_with("-d") && !a.starts_with("--") {
            let rest = &a[2..];
            let level = if rest.chars().all(|c| c == 'd') {
                Some(rest.len() + 1)
            } else {
                rest.parse::<usize>().ok().filter(|&n| n <= 9)
            };
            if let Some(n) = level {
                out.extend(std::iter::repeat_n("-v".to_string(), n.max(1)));
                continue;
            }
        }
        match NMAP_FLAGS.iter().find(|(short, _)| a == short) {
            Some((_, long)) => out.push((*long).to_string()),
            // -PE, -PS22,80, -PU...: host discovery probes, the rest attached.
            None if a.len() > 2 && a.starts_with("-P") && !a.starts_with("-P=") => {
                out.push(format!("--ping={}", &a[2..]));
            }
            None => out.push(a.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        std::iter::once("moonscan").chain(s.split_whitespace()).map(String::from).collect()
    }

    #[test]
    fn nmaps_other_spellings_mean_what_they_mean_in_nmap() {
        assert_eq!(rewrite(&argv("-sP -PN 10.0.0.1")), argv("--ping-scan --no-ping 10.0.0.1"));
        assert_eq!(rewrite(&argv("-P0 -v3 -v0")), argv("--no-ping -v -v -v"));
        assert_eq!(rewrite(&argv("-T aggressive -Tinsane -T Paranoid -T 4")), argv("-T4 -T5 -T0 -T 4"));
        assert_eq!(rewrite(&argv("-T -- aggressive")), argv("-T -- aggressive"), "after --, a target");
        let said = unsupported(&argv("-sv 10.0.0.1")).unwrap();
        assert_eq!(
            said,
            "moonscan: -sv is not an option (nmap's flags are case-sensitive); did you mean -sV (--service-version)?"
        );
        assert!(unsupported(&argv("-pn 10.0.0.1")).unwrap().contains("did you mean -Pn"));
        assert!(unsupported(&argv("-sn -sN -PN 10.0.0.1")).is_none(), "both are flags");
    }

    #[test]
    fn rewrite_stops_at_double_dash() {
        assert_eq!(rewrite(&argv("-sT -- -sT")), argv("--connect -- -sT"));
    }

    #[test]
    fn run_together_letters_and_debug_levels_are_nmaps() {
        assert_eq!(rewrite(&argv("-sCV -dd")), argv("--script-default --service-version -v -v"));
        assert!(unsupported(&argv("-sV -Ddecoy 127.0.0.1")).unwrap().contains("-D (decoys)"));
        assert!(unsupported(&argv("-sIzombie 127.0.0.1")).unwrap().contains("-sI (idle scan)"));
        assert!(unsupported(&argv("-oSkiddie.txt 127.0.0.1")).unwrap().contains("-oS (script kiddie output)"));
        assert!(unsupported(&argv("-sS -oX scan.xml 127.0.0.1")).is_none());
        assert!(unsupported(&argv("-sV -- -O")).is_none(), "after --, a target");
    }
}
