//! Flags, specs and exit codes: bad input gets one clear line and status 2.

use crate::util::{run, stderr, stdout};

#[test]
fn bad_specs_print_one_line_and_exit_2() {
    for (args, needle) in [
        (&["-sT", "-p", "70000", "127.0.0.1"][..], "port 70000 is out of range"),
        (&["-sT", "-p", "5-1", "127.0.0.1"], "port range 5-1 is reversed"),
        (&["-sT", "-p", "22", "300.1.1.1"], "octet 300 is out of range"),
        (&["-sT", "-p", "22", "198.18.0.0/33"], "prefix length 33 is out of range"),
        (&["-sT", "-p", "22"], "no targets given"),
        (&["-sT", "-p", "22", "-iL", "/nonexistent/list"], "-iL /nonexistent/list"),
        (&["-sT", "-p", "22", "--dns-servers", "ns.example", "127.0.0.1"], "--dns-servers"),
        (&["-sT", "-p", "22", "--exclude", "127.0.0.0/8", "127.0.0.1"], "every target is excluded"),
        (&["-sT", "-p", "22", "--shard", "0/2", "127.0.0.1"], "invalid shard"),
        (&["-sT", "-p", "22", "--max-rate", "-5", "127.0.0.1"], "--max-rate"),
    ] {
        let out = run(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: want one line, got {err:?}");
        assert!(err.starts_with("moonscan: ") && err.contains(needle), "{args:?}: {err}");
        assert!(stdout(&out).is_empty(), "{args:?}: nothing on stdout");
    }
}

#[test]
fn unknown_flags_are_usage_errors() {
    let out = run(&["--no-such-flag", "127.0.0.1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--no-such-flag"));
}

#[test]
fn help_and_version_exit_0() {
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("--top-ports"));
    let out = run(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).starts_with("moonscan "));
}

/// Garbage in any position never panics: every run ends with 0, 1 or 2.
#[test]
fn garbage_arguments_never_panic() {
    let pieces = [
        "-p",
        "-p-",
        "--top-ports",
        "-F",
        "-T9",
        "-T",
        "--max-rate",
        "nan",
        "inf",
        "1e400",
        "-",
        "--",
        "/",
        "1.2.3.4/",
        "::/0",
        "1.1.1.1-0.0.0.0",
        "0-",
        "-0",
        ",",
        "T:",
        "U:1",
        "999999999999999999999",
        "-iL",
        "--exclude",
        ",,",
        "*.*.*.*",
        "ü.example",
        "[::1]",
        "--shard",
        "1/0",
        "--seed",
        "-1",
        "-oJ",
        "--max-rtt-timeout",
        "0ms",
    ];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..150 {
        let mut args = Vec::new();
        for _ in 0..4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            args.push(pieces[(x % pieces.len() as u64) as usize]);
        }
        // Never a real target outside loopback: the last word is always loopback-only.
        args.extend(["-n", "--exclude", "0.0.0.0-126.255.255.255,128.0.0.0-255.255.255.255", "127.0.0.1"]);
        let out = run(&args);
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        assert!(matches!(out.status.code(), Some(0..=2)), "{args:?}: status {:?}: {err}", out.status);
    }
}

/// `probes import` on the nmap-service-probes file that Debian's nmap ships
/// (scripts/test.sh installs nmap): most rules convert, the rest are counted
/// by reason, and the result loads back as a probe database.
#[test]
fn probes_import_converts_nmaps_own_file() {
    let src = "/usr/share/nmap/nmap-service-probes";
    assert!(std::path::Path::new(src).exists(), "{src} missing: scripts/test.sh installs nmap");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nmap.yaml");
    let res = run(&["probes", "import", src, "-o", out.to_str().unwrap()]);
    let err = stderr(&res);
    assert_eq!(res.status.code(), Some(0), "{err}");
    let summary = err.lines().next().unwrap();
    let nums: Vec<usize> = summary.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    let (probes, kept, seen, backtracking) = (nums[0], nums[1], nums[2], nums[3]);
    assert!(probes > 100, "{summary}");
    // nmap's header-skipping lookahead is translated; the few rules that
    // still need lookaround or backreferences run on the backtracking engine.
    assert!(kept * 1000 >= seen * 995, "at least 99.5 % of the rules convert: {summary}");
    assert!(backtracking > 0 && backtracking * 20 < kept, "{summary}");
    assert!(!err.contains("lookaround"), "no rule is left out for lookaround: {err}");
    let list = run(&["probes", "--dir", dir.path().to_str().unwrap(), "list"]);
    assert_eq!(list.status.code(), Some(0), "{}", stderr(&list));
    let text = stdout(&list);
    assert!(
        text.lines().any(|l| l.starts_with("NULL ")) && text.lines().any(|l| l.starts_with("GetRequest ")),
        "{text}"
    );
}

#[test]
fn probes_import_of_a_missing_file_is_a_usage_error() {
    let res = run(&["probes", "import", "/nonexistent/probes"]);
    assert_eq!(res.status.code(), Some(2));
    assert!(stderr(&res).contains("/nonexistent/probes"));
}

#[test]
fn subcommands_are_listed_and_a_host_named_like_one_can_be_scanned() {
    let help = stdout(&run(&["--help"]));
    for word in ["pack", "db", "probes", "plugins", "--resume"] {
        assert!(help.contains(word), "--help does not mention {word}:\n{help}");
    }
    let o = run(&["help", "pack"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("Usage: moonscan pack <COMMAND>"), "{}", stdout(&o));
    // With an option first (or after --), `db` is a target, not the command:
    // here a hostname the system resolver does not know.
    for (args, name) in [(&["-sT", "-p", "9", "db"][..], "db"), (&["-sT", "-p", "9", "--", "pack"][..], "pack")] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(&format!("cannot resolve '{name}'")), "{args:?}: {}", stderr(&o));
    }
    let o = run(&["--resume", "x.resume", "198.18.0.2"]);
    assert_eq!(o.status.code(), Some(2), "--resume takes no other arguments");
}

/// The nmap command lines people type most, on this machine's loopback:
/// each either runs (exit 0, a report on stdout) or answers in one line
/// (exit 2, "moonscan: ..." on stderr), never clap's five-line error.
#[test]
fn the_most_used_nmap_command_lines_run_or_answer_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("scan");
    let base = base.to_str().unwrap();
    let list = dir.path().join("targets.txt");
    std::fs::write(&list, "127.0.0.1\n").unwrap();
    let list = list.to_str().unwrap();
    let runs: &[&[&str]] = &[
        &["127.0.0.1"],
        &["-sV", "-p", "1-100", "127.0.0.1"],
        &["-sC", "-sV", "-p", "1-100", "127.0.0.1"],
        &["-sCV", "-p", "1-100", "127.0.0.1"],
        &["-sVC", "-p", "1-100", "127.0.0.1"],
        &["-p-", "127.0.0.1"],
        &["-p", "22,80,443", "127.0.0.1"],
        &["-sS", "-p", "22", "127.0.0.1"],
        &["-sT", "-p", "22", "127.0.0.1"],
        &["-sU", "-p", "53", "127.0.0.1"],
        &["-sn", "127.0.0.1"],
        &["-Pn", "-p", "22", "127.0.0.1"],
        &["-F", "127.0.0.1"],
        &["--top-ports", "100", "127.0.0.1"],
        &["-T4", "-F", "127.0.0.1"],
        &["-v", "-p", "22", "127.0.0.1"],
        &["-vv", "-p", "22", "127.0.0.1"],
        &["-d", "-p", "22", "127.0.0.1"],
        &["-n", "--open", "--reason", "-p", "22", "127.0.0.1"],
        &["-oA", base, "-p", "22", "127.0.0.1"],
        &["-iL", list, "-p", "22"],
        &["-6", "-p", "22", "::1"],
        &["--script", "http-title", "-p", "80", "127.0.0.1"],
        // http-git is in nmap's vuln category too.
        &["--script", "vuln", "-p", "80", "127.0.0.1"],
        &["--script-help", "default"],
        &["-sV", "--version-intensity", "5", "-p", "22", "127.0.0.1"],
    ];
    for args in runs {
        let out = run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(!stdout(&out).is_empty(), "{args:?}: no report");
    }
    let answered: &[(&[&str], &str)] = &[
        (&["-f", "127.0.0.1"], "-f (packet fragmentation) is not supported yet"),
        (&["-D", "RND:10", "127.0.0.1"], "-D (decoys) is not supported yet"),
        (&["-oS", "x", "127.0.0.1"], "-oS (script kiddie output) is not supported yet"),
        (&["--script", "exploit", "127.0.0.1"], "'exploit' did not match"),
        (&["-sI", "zombie", "127.0.0.1"], "-sI (idle scan) is not supported yet"),
        (&["--data-length=25", "127.0.0.1"], "--data-length (random payload padding) is not supported yet"),
        (&["-PY22", "127.0.0.1"], "-PY (SCTP ping) is not supported yet"),
    ];
    for (args, says) in answered {
        let out = run(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("moonscan: ") && err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn man_page_completions_and_script_help_come_from_the_definitions() {
    let man = run(&["man"]);
    assert_eq!(man.status.code(), Some(0));
    let page = stdout(&man);
    assert!(page.contains(".TH moonscan 1") && page.contains("\\-\\-top\\-ports"), "{page}");
    // nmap users' sections, no empty placeholders in the synopsis, a page per subcommand.
    for section in
        [".SH SYNOPSIS", ".SH EXAMPLES", ".SH EXIT STATUS", ".SH ENVIRONMENT", ".SH FILES", "moonscan\\-pack\\fR(1)"]
    {
        assert!(page.contains(section), "{section}: {page}");
    }
    let synopsis = &page[page.find(".SH SYNOPSIS").unwrap()..page.find(".SH DESCRIPTION").unwrap()];
    assert!(!synopsis.contains(" \\fR]"), "an empty placeholder: {synopsis}");
    for sub in ["pack", "db", "probes", "plugins"] {
        let o = run(&["man", sub]);
        assert_eq!(o.status.code(), Some(0), "{sub}");
        assert!(stdout(&o).contains(&format!(".TH moonscan-{sub} 1")), "{sub}: {}", stdout(&o));
    }
    assert_eq!(run(&["man", "nope"]).status.code(), Some(2));
    for (shell, marker) in [("bash", "_moonscan()"), ("zsh", "#compdef moonscan"), ("fish", "complete -c moonscan")] {
        let o = run(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}");
        let text = stdout(&o);
        assert!(text.contains(marker) && text.contains("top-ports"), "{shell}: {text}");
    }
    // bash completes nmap's spellings, and plugin ids after --script.
    let bin_dir = std::path::Path::new(crate::util::bin()).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let complete = |words: &str, cword: usize| {
        let script = format!(
            "source <(moonscan completions bash); COMP_WORDS=({words}); COMP_CWORD={cword}; \
             _moonscan moonscan \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; echo \"${{COMPREPLY[*]}}\""
        );
        let o = std::process::Command::new("bash").args(["-c", &script]).env("PATH", &path).output().unwrap();
        stdout(&o).trim().to_string()
    };
    let s = complete("moonscan -s", 1);
    assert!(s.split(' ').any(|w| w == "-sS") && s.split(' ').any(|w| w == "-sV"), "{s}");
    let o = complete("moonscan -o", 1);
    assert!(o.split(' ').any(|w| w == "-oN") && o.split(' ').any(|w| w == "-oX"), "{o}");
    let ssl = complete("moonscan --script ssl-", 2);
    assert_eq!(ssl.split(' ').collect::<Vec<_>>(), ["ssl-cert", "ssl-date", "ssl-enum-ciphers"], "{ssl}");
    assert_eq!(complete("moonscan --script vu", 2), "vuln");
    // zsh and fish get the same spellings, and plugins after --script.
    let zsh = stdout(&run(&["completions", "zsh"]));
    assert!(zsh.contains("'-sS[--syn]' \\\n") && zsh.contains("'-oN[--output-normal]' \\\n"), "{zsh}");
    let fish = stdout(&run(&["completions", "fish"]));
    assert!(fish.contains("complete -c moonscan -o sS -d '--syn'\n"), "{fish}");
    assert!(fish.contains("complete -c moonscan -l script -x -a '(moonscan plugins list"), "{fish}");
    for (shell, text) in [("zsh", &zsh), ("fish", &fish)] {
        // scripts/test.sh installs both shells.
        let mut child = std::process::Command::new(shell)
            .arg("-n")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{shell} is not installed (scripts/test.sh installs it): {e}"));
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        assert!(child.wait().unwrap().success(), "{shell} -n refuses the completions");
    }
    let o = run(&["--script-help", "http-title"]);
    assert_eq!(o.status.code(), Some(0));
    let help = stdout(&o);
    assert!(help.contains("\nhttp-title\nCategories: default discovery safe\n"), "{help}");
    assert!(help.contains("  Shows the title of a web server's default page."), "{help}");
    let o = run(&["--script-help", "no-such-plugin"]);
    assert_eq!(o.status.code(), Some(2));
    // --top-ports past the table says how many it has.
    let o = run(&["-sT", "--top-ports", "100000", "-p", "1", "127.0.0.1"]);
    assert_eq!(o.status.code(), Some(2), "-p and --top-ports together: {}", stderr(&o));
    let o = run(&["-sT", "--top-ports", "100000", "127.0.0.1"]);
    assert!(stderr(&o).contains("--top-ports 100000: the port table ranks "), "{}", stderr(&o));
}

/// scripts/install.sh puts the binary, the man page and the completions
/// under a prefix (here this build's binary, into a temporary folder).
#[test]
fn install_sh_installs_the_binary_man_page_and_completions() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path();
    let out = std::process::Command::new("bash")
        .arg(crate::util::repo().join("scripts/install.sh"))
        .args(["--binary", crate::util::bin(), "--prefix"])
        .arg(prefix)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let version = std::process::Command::new(prefix.join("bin/moonscan")).arg("--version").output().unwrap();
    assert!(stdout(&version).starts_with("moonscan "), "{}", stdout(&version));
    for (file, marker) in [
        ("share/man/man1/moonscan.1", ".TH moonscan 1"),
        ("share/man/man1/moonscan-pack.1", ".TH moonscan-pack 1"),
        ("share/man/man1/moonscan-db.1", ".TH moonscan-db 1"),
        ("share/bash-completion/completions/moonscan", "_moonscan()"),
        ("share/zsh/site-functions/_moonscan", "#compdef moonscan"),
        ("share/fish/vendor_completions.d/moonscan.fish", "complete -c moonscan"),
    ] {
        let text = std::fs::read_to_string(prefix.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(text.contains(marker), "{file}");
    }
    let bad = std::process::Command::new("bash")
        .arg(crate::util::repo().join("scripts/install.sh"))
        .arg("--nope")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// nmap's other spellings work as in nmap: an unambiguous prefix of a long
/// option, the templates by name, -v3, -sP/-PN/-P0; a flag in the wrong
/// case says what was meant in one line.
#[test]
fn nmaps_other_spellings_work() {
    let o = run(&["--script-hel", "http-title"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("http-title"));
    let o = run(&["-sL", "-n", "-T", "aggressive", "-v3", "--see", "7", "127.0.0.1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("127.0.0.1"), "{}", stdout(&o));
    let o = run(&["-sP", "-sL", "127.0.0.1"]);
    assert!(stderr(&o).contains("cannot be combined with -sn"), "-sP is -sn: {}", stderr(&o));
    let o = run(&["-sv", "127.0.0.1"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("did you mean -sV") && err.lines().count() == 1, "{err}");
}
