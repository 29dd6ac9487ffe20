//! The hardening review's cases that need no lab, each run as an attacker
//! would: report lines a value or a certificate name could forge, quoted
//! input that could drive the terminal, input files that never end or are
//! huge, and a resume file that repeats a segment or is for another
//! target space. Against the lab (plugins stuck in slow host calls, Ctrl-C
//! while they run, a server that sends terminal escapes, budgets):
//! tests/lab/hardening.rs. Packs and keys are in tests/packs.rs.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{bin, events, repo, run, stderr, stdout};

/// The forged line the hostile plugins and certificate carry.
const FORGED: &str = "Discovered open port 31337";

/// Lines whose text, after nmap's script bars, starts with the forged line.
fn forged_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.trim_start_matches(['|', '_', ' ']).starts_with(FORGED)).collect()
}

fn data_plugin(name: &str) -> String {
    repo().join("tests/data/plugins").join(name).to_string_lossy().into_owned()
}

/// Every string in a JSON document.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.iter().for_each(|(k, x)| {
            out.push(k.clone());
            strings(x, out)
        }),
        _ => {}
    }
}

/// A line break in a value (a plugin's title, its data, its returned
/// table, as a server sent them) stays on its line in the text outputs
/// (the line-per-event text, the terminal's report, -oN, -oG, -oX); SARIF's
/// text fields hold no control character but line feeds.
#[test]
fn line_breaks_in_values_cannot_forge_report_lines() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    let plugins = format!("{},{}", data_plugin("forge-lines.lua"), data_plugin("forge-titles.lua"));
    let args = ["-sT", "-n", "-p", &port, "--script", &plugins, "127.0.0.1"];
    let outputs = ["-oN", &file("n"), "-oG", &file("g"), "-oX", &file("x"), "--sarif", &file("s")];
    let out = run(&[&args[..], &outputs[..]].concat());
    let text = stdout(&out);
    assert!(text.contains("forge-lines") && text.contains("forge-titles"), "{text}{}", stderr(&out));
    // The terminal's report (a terminal: `script`).
    let cmd = format!("{} {} 2>/dev/null", bin(), args.join(" "));
    let tty = Command::new("script").args(["-qec", &cmd, "/dev/null"]).stdin(Stdio::null()).output().unwrap();
    let tty = String::from_utf8_lossy(&tty.stdout).replace("\r\n", "\n");
    assert!(tty.contains("|_forge-titles") || tty.contains("| forge-titles"), "{tty}");
    let normal = std::fs::read_to_string(file("n")).unwrap();
    assert!(normal.contains("x\\x0A|Discovered open port 31337/tcp"), "{normal}");
    for (what, t) in [
        ("text", text.as_str()),
        ("terminal", tty.as_str()),
        ("-oN", normal.as_str()),
        ("-oG", &std::fs::read_to_string(file("g")).unwrap()),
        ("-oX", &std::fs::read_to_string(file("x")).unwrap()),
    ] {
        assert_eq!(forged_lines(t), Vec::<&str>::new(), "{what}:\n{t}");
        for bad in ["\x1b", "\r", "\0"] {
            assert!(!t.contains(bad), "{what}: {bad:?}:\n{t}");
        }
    }
    let sarif: Value = serde_json::from_str(&std::fs::read_to_string(file("s")).unwrap()).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert!(results.len() >= 3, "{sarif}");
    let mut texts = Vec::new();
    for r in results {
        texts.push(r["message"]["text"].as_str().unwrap().to_string());
    }
    for rule in sarif["runs"][0]["tool"]["driver"]["rules"].as_array().unwrap() {
        for k in ["shortDescription", "fullDescription", "help"] {
            strings(&rule[k], &mut texts);
        }
    }
    for t in &texts {
        assert!(!t.chars().any(|c| c.is_control() && c != '\n' && c != '\t'), "{t:?}");
        assert_eq!(forged_lines(t), Vec::<&str>::new(), "{t:?}");
    }
}

/// A certificate whose CN, O and SAN hold a line break and a forged line
/// (tests/data/tls/newline-cn.pem): ssl-cert's lines stay its own.
#[test]
fn a_line_break_in_a_certificate_name_cannot_forge_report_lines() {
    let pem = repo().join("tests/data/tls/newline-cn.pem");
    let plugin = repo().join("plugins/ssl-cert.lua");
    for json in [false, true] {
        let mut args = vec!["plugins", "test", plugin.to_str().unwrap(), "--port", "443"];
        args.extend(["--tls-chain", pem.to_str().unwrap()]);
        if json {
            args.push("--json");
        }
        let out = run(&args);
        let text = stdout(&out);
        let shown = if json { "lab\\\\x0A|Discovered" } else { "lab\\x0A|Discovered open port 31337/tcp" };
        assert!(text.contains(shown), "{text}{}", stderr(&out));
        assert_eq!(forged_lines(&text), Vec::<&str>::new(), "{text}");
        if json {
            for ev in events(&text) {
                let mut all = Vec::new();
                strings(&ev, &mut all);
                assert!(all.iter().all(|s| !s.contains("\n|Discovered")), "{ev}");
            }
        }
    }
}

/// What the command line quotes back (a bad flag, a bad target, a resume
/// file's command line, a file name) is screened as well.
#[test]
fn quoted_input_cannot_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let resume = dir.path().join("x.resume");
    let file = serde_json::json!({
        "moonscan_resume": 1,
        "args": ["moonscan", "--\u{1b}]0;owned\u{7}", "127.0.0.1"],
        "seed": "1",
        "space_len": 1,
        "segments": [],
    });
    std::fs::write(&resume, file.to_string().replace("\"seed\":\"1\"", "\"seed\":1")).unwrap();
    let cases: &[&[&str]] = &[
        &["--bogus\x1b[2J"],
        &["--max-rate", "1\rDiscovered open port 31337/tcp on 198.18.0.2\x1b[2J"],
        &["-p", "80", "198.18.0.2\x1b[2J\x07"],
        &["-iL", "/nonexistent/\x1b]0;owned\x07"],
        &["--resume", resume.to_str().unwrap()],
    ];
    for args in cases {
        let out = run(args);
        let (text, err) = (stdout(&out), stderr(&out));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.is_empty(), "{args:?}");
        for bad in ["\x1b", "\x07", "\r"] {
            assert!(!err.contains(bad) && !text.contains(bad), "{args:?}: {bad:?} reached the terminal: {err:?}");
        }
    }
}

// Case 6: input files are streamed or capped.
#[test]
fn endless_input_files_are_refused_with_a_message() {
    let cases: &[&[&str]] = &[
        &["-iL", "/dev/zero", "-p", "80"],
        &["--excludefile", "/dev/zero", "-p", "80", "127.0.0.1"],
        &["--script", "banner", "--script-args-file", "/dev/zero", "-p", "80", "127.0.0.1"],
        &["--resume", "/dev/zero"],
    ];
    for args in cases {
        let started = Instant::now();
        let out = run(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("/dev/zero") && (err.contains("larger than") || err.contains("longer than")), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10), "{args:?}");
    }
    let banner = repo().join("plugins/banner.lua");
    let out = run(&["plugins", "test", banner.to_str().unwrap(), "--banner-file", "/dev/zero"]);
    assert!(!out.status.success() && stderr(&out).contains("larger than"), "{}", stderr(&out));
}

#[test]
fn a_large_target_list_is_read_as_a_stream() {
    // 2.8 million lines (37 MB), every address of the lab's 198.18.0.0/15
    // about 21 times over; all excluded, so nothing is sent.
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("targets.txt");
    let mut text = String::with_capacity(40 << 20);
    for i in 0..2_800_000u32 {
        let host = (i.wrapping_mul(2_654_435_761) >> 15) & 0x1ffff;
        text.push_str(&format!("198.{}.{}.{}\n", 18 + (host >> 16), (host >> 8) & 0xff, host & 0xff));
    }
    std::fs::write(&list, &text).unwrap();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "maxrss=%M", bin(), "-n", "-p", "80", "-iL", list.to_str().unwrap()])
        .args(["--exclude", "198.18.0.0/15"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = stderr(&out);
    let rss_kb: u64 = err.lines().find_map(|l| l.strip_prefix("maxrss=")).and_then(|v| v.trim().parse().ok()).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("excluded"), "{err}");
    assert!(rss_kb < 64 * 1024, "a 37 MB list took {rss_kb} kB");
}

// Case 7: a resume file is checked like a command line.
#[test]
fn a_resume_file_that_repeats_a_segment_is_refused() {
    // The review's case listed one segment 2,000 times: past the count cap
    // now; 1,000 copies are refused as repeats.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.resume");
    let seg = serde_json::json!({ "next": 0, "step": 1 });
    let file = serde_json::json!({
        "moonscan_resume": 1,
        "args": ["moonscan", "-sT", "-p", "9", "127.0.0.1"],
        "seed": "1",
        "space_len": 1,
        "segments": vec![seg; 1000],
    });
    std::fs::write(&path, file.to_string().replace("\"seed\":\"1\"", "\"seed\":1")).unwrap();
    let out = run(&["--resume", path.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("not in order (or repeat)"), "{err}");
}

/// A resume file whose space no longer matches its command line (a
/// hostname that resolves elsewhere, an exclude file that changed) is
/// refused by the library's builder, not probed.
#[test]
fn a_resume_file_for_another_space_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.resume");
    // -Pn walks (address, port) pairs, discovery hosts; a host to redo must
    // be a target.
    for (args, hosts, len, said) in [
        (&["-Pn"][..], &[][..], 5, "resuming: the targets now make 1 (address, port) pairs, not 5"),
        (&[][..], &[][..], 5, "resuming: the targets now make 1 hosts, not 5"),
        (&[][..], &["127.0.0.2"][..], 1, "resuming: host 127.0.0.2 of the resume file is not among the targets"),
        (&["-Pn"][..], &["127.0.0.1"][..], 1, "the resume file lists hosts, but the scan has no host discovery"),
    ] {
        let mut argv = vec!["moonscan", "-sT", "-p", "9", "127.0.0.1"];
        argv.extend(args);
        let file = serde_json::json!({
            "moonscan_resume": 1,
            "args": argv,
            "seed": 1,
            "space_len": len,
            "segments": [{ "next": 0, "step": 1 }],
            "hosts": hosts,
        });
        std::fs::write(&path, file.to_string()).unwrap();
        let out = run(&["--resume", path.to_str().unwrap()]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(said), "{err}");
    }
}
