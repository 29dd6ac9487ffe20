//! The library's settings as the command names them: its messages say
//! `` `max_rate` ``, the command says `--max-rate`.
//!
//! In: a message of the library (an error, a note, an event's text). Out:
//! the same message with every setting it names in backticks replaced by
//! the command's option (or variable) for it. What always holds: only the
//! names of [`FLAGS`] change; other backticked words (`` `moonscan pack
//! sign` ``) and everything else are kept byte for byte; a plugin's own
//! messages (errors and logs a plugin wrote) are never rewritten.

use std::borrow::Cow;
use std::io;

use moonscan::findings::Event;
use moonscan::output::Sink;

/// Each setting the library's messages name, and the command's word for it.
pub const FLAGS: &[(&str, &str)] = &[
    ("targets", "moonscan --help"),
    ("target_file", "-iL"),
    ("exclude_file", "--excludefile"),
    ("ports", "-p"),
    ("top_ports", "--top-ports"),
    ("exclude_ports", "--exclude-ports"),
    ("scan_type(Connect)", "-sT"),
    ("scan_type(Syn)", "-sS"),
    ("scan_type(Ack)", "-sA"),
    ("scan_type(Window)", "-sW"),
    ("scan_type(Fin)", "-sF"),
    ("scan_type(Null)", "-sN"),
    ("scan_type(Xmas)", "-sX"),
    ("scan_type(Maimon)", "-sM"),
    ("udp", "-sU"),
    ("timing_template", "-T"),
    ("max_rate", "--max-rate"),
    ("min_rate", "--min-rate"),
    ("max_parallelism", "--max-parallelism"),
    ("initial_rtt_timeout", "--initial-rtt-timeout"),
    ("max_rtt_timeout", "--max-rtt-timeout"),
    ("scan_delay", "--scan-delay"),
    ("host_timeout", "--host-timeout"),
    ("ping_only", "-sn"),
    ("list_only", "-sL"),
    ("skip_discovery", "-Pn"),
    ("ping_probe", "-P"),
    ("ipv6", "-6"),
    ("link.iface", "-e"),
    ("link.src", "-S"),
    ("rdns::When::Never", "-n"),
    ("rdns::Via::Servers", "--dns-servers"),
    ("rdns::Via::System", "--system-dns"),
    ("service_detection", "-sV"),
    ("detection.parallelism", "--version-parallelism"),
    ("scripts", "--script"),
    ("script_settings.args", "--script-args"),
    ("script_settings.parallelism", "--script-parallelism"),
    ("os_detection", "-O"),
    ("os_detection.db", "--os-db"),
    ("os_detection.max_tries", "--max-os-tries"),
    ("traceroute", "--traceroute"),
    ("output::store", "--db"),
    ("places.data", "MOONSCAN_HOME"),
    ("Trust::allow_unsigned", "--allow-unsigned"),
    ("install(force)", "--force"),
    ("install(allow_downgrade)", "--allow-downgrade"),
    ("key_password", "MOONSCAN_KEY_PASSWORD"),
];

/// `text` in the command's words.
pub fn word(text: &str) -> Cow<'_, str> {
    if !text.contains('`') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // Backticks come in pairs: a pair that names no setting is kept whole.
    while let Some(open) = rest.find('`') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('`') else { break };
        let name = &after[..close];
        match FLAGS.iter().find(|(setting, _)| *setting == name) {
            Some((_, flag)) => {
                out.push_str(&rest[..open]);
                out.push_str(flag);
            }
            None => out.push_str(&rest[..open + close + 2]),
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The engine's own messages of `event` in the command's words (a
/// plugin's are its own).
pub fn event(event: &Event) -> Option<Event> {
    match event {
        Event::Error(e) if e.plugin.is_none() && e.message.contains('`') => {
            let mut e = e.clone();
            e.message = word(&e.message).into_owned();
            Some(Event::Error(e))
        }
        Event::Timing(t) if t.slowdown.as_deref().is_some_and(|s| s.contains('`')) => {
            let mut t = t.clone();
            t.slowdown = t.slowdown.as_deref().map(|s| word(s).into_owned());
            Some(Event::Timing(t))
        }
        _ => None,
    }
}

/// A sink that gets the engine's messages in the command's words.
pub struct Worded(pub Box<dyn Sink>);

impl Sink for Worded {
    fn record(&mut self, e: &Event) -> io::Result<()> {
        match event(e) {
            Some(worded) => self.0.record(&worded),
            None => self.0.record(e),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
    fn close(&mut self) -> io::Result<()> {
        self.0.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_become_flags_and_nothing_else_changes() {
        assert_eq!(word("`min_rate` is above `max_rate`"), "--min-rate is above --max-rate");
        assert_eq!(word("`ping_only` `skip_discovery` would send nothing"), "-sn -Pn would send nothing");
        assert_eq!(word("sign it with `moonscan pack sign`, or"), "sign it with `moonscan pack sign`, or");
        assert_eq!(
            word("if you trust it: `moonscan pack trust add KEYFILE`), or pass `Trust::allow_unsigned`"),
            "if you trust it: `moonscan pack trust add KEYFILE`), or pass --allow-unsigned"
        );
        assert_eq!(word("`max_rate` and a ` alone"), "--max-rate and a ` alone");
        assert_eq!(word("`max_rate"), "`max_rate");
        assert_eq!(word("``"), "``");
        assert_eq!(word("no settings here"), "no settings here");
        assert_eq!(word("`ports`/`top_ports`"), "-p/--top-ports");
        assert_eq!(word("é`udp`é"), "é-sUé");
    }

    #[test]
    fn every_setting_is_named_once() {
        let mut names: Vec<&str> = FLAGS.iter().map(|(s, _)| *s).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FLAGS.len());
        assert!(FLAGS.iter().all(|(s, f)| !s.contains('`') && !f.contains('`') && !f.is_empty()));
    }

    /// Every setting a message of the library names in backticks has the
    /// command's word here: none reaches the user untranslated.
    #[test]
    fn every_setting_the_library_names_has_a_flag() {
        use std::collections::BTreeSet;
        // Backticked words in the library's strings that are not settings.
        const NOT_SETTINGS: &[&str] = &["colour", "max", "homepage"];
        let literal = regex::Regex::new(r#""(?:[^"\\]|\\.)*""#).unwrap();
        let name = regex::Regex::new(r"`([A-Za-z_][A-Za-z0-9_:.()]*)`").unwrap();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("engine");
        let (mut files, mut named) = (vec![root.clone()], BTreeSet::new());
        while let Some(path) = files.pop() {
            if path.is_dir() {
                if path != root.join("cli") {
                    files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || path == root.join("main.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.lines().filter(|l| !l.trim_start().starts_with("//"));
            for line in code {
                for lit in literal.find_iter(line) {
                    named.extend(name.captures_iter(lit.as_str()).map(|c| c[1].to_string()));
                }
            }
        }
        assert!(named.len() > 30, "the library's messages were read: {named:?}");
        let missing: Vec<&String> = named
            .iter()
            .filter(|n| !NOT_SETTINGS.contains(&n.as_str()) && word(&format!("`{n}`")).contains('`'))
            .collect();
        assert!(missing.is_empty(), "settings without a flag: {missing:?}");
        use moonscan::findings::ScanType::*;
        for t in [Connect, Syn, Ack, Window, Fin, Null, Xmas, Maimon, Udp] {
            assert!(word(&t.setting()).starts_with("-s"), "{t:?}: {}", word(&t.setting()));
        }
    }

    #[test]
    fn a_plugins_messages_stay_its_own() {
        use moonscan::findings::{ErrorEvent, ErrorKind, ScanId};
        let error = |plugin: Option<&str>| {
            Event::Error(ErrorEvent {
                scan_id: ScanId::from("s"),
                ip: None,
                port: None,
                plugin: plugin.map(str::to_string),
                kind: ErrorKind::Config,
                message: "see `rdns::Via::Servers`".into(),
            })
        };
        let Some(Event::Error(e)) = event(&error(None)) else { panic!("the engine's error is reworded") };
        assert_eq!(e.message, "see --dns-servers");
        assert!(event(&error(Some("p"))).is_none());
    }
}
