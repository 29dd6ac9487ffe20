//! The hardening review's cases, each run as an attacker would: a plugin
//! whose findings repeat a large string, plugins and portrules stuck in
//! slow host calls (and Ctrl-C while they run), a server that sends
//! terminal escapes, input files that never end, and a resume file that
//! repeats a segment. Packs and keys are in tests/packs.rs.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::service::{Hostile, HOSTILE_IP};
use crate::util::{bin, events, in_lab, lab, lab_scan, of_type, repo, run, stderr, stdout, TARGET};

fn sandbox(name: &str) -> String {
    repo().join("tests/sandbox").join(name).to_string_lossy().into_owned()
}

/// Budget errors of one plugin.
fn budget_messages<'a>(evs: &'a [Value], plugin: &str) -> Vec<&'a str> {
    of_type(evs, "error")
        .into_iter()
        .filter(|e| e["plugin"] == plugin && e["kind"] == "budget")
        .map(|e| e["message"].as_str().unwrap_or(""))
        .collect()
}

// Case 1: one 64 KiB string referenced ten thousand times per finding.
#[test]
fn repeated_finding_data_trips_the_output_budget_with_bounded_memory() {
    let _lab = lab();
    let plugins = format!("{},{}", sandbox("finding-bomb.lua"), sandbox("return-bomb.lua"));
    let out = Command::new("ip")
        .args(["netns", "exec", "msscan", "/usr/bin/time", "-f", "maxrss=%M", bin()])
        .args(["-n", "-p", "80,443", "--script", &plugins, "-oJ", "-", TARGET])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = stderr(&out);
    let rss_kb: u64 = err.lines().find_map(|l| l.strip_prefix("maxrss=")).and_then(|v| v.trim().parse().ok()).unwrap();
    let evs = events(&stdout(&out));
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(of_type(&evs, "scan_end").len(), 1, "the scan ends and says so");
    for plugin in ["sandbox-finding-bomb", "sandbox-return-bomb"] {
        let m = budget_messages(&evs, plugin);
        assert_eq!(m.len(), 2, "{plugin}: {m:?}");
        assert!(m.iter().all(|m| m.contains("more than 1048576 bytes of findings")), "{m:?}");
    }
    assert!(of_type(&evs, "finding").iter().all(|f| !f["title"].as_str().unwrap().starts_with("escaped")));
    // The returned bomb is dropped, not made a script result.
    assert!(!of_type(&evs, "script").iter().any(|r| r["plugin"] == "sandbox-return-bomb"), "{evs:?}");
    assert!(rss_kb < 100 * 1024, "peak RSS {rss_kb} kB");
}

// Case 2: a run looping over slow host calls ends at its deadline.
#[test]
fn slow_host_calls_end_at_the_script_timeout() {
    let _lab = lab();
    let started = Instant::now();
    let (out, evs) =
        lab_scan(&["-n", "-p", "80", "--script", &sandbox("slow-calls.lua"), "--script-timeout", "1s", TARGET]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(budget_messages(&evs, "sandbox-slow-calls"), ["ran longer than 1000 ms"]);
    assert!(took < Duration::from_secs(2), "a 1 s plugin run took the scan {took:?}");
}

#[test]
fn a_stuck_portrule_is_an_error_event_within_a_second() {
    let _lab = lab();
    let started = Instant::now();
    let (out, evs) = lab_scan(&["-n", "-p", "80", "--script", &sandbox("slow-portrule.lua"), TARGET]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(budget_messages(&evs, "sandbox-slow-portrule"), ["portrule ran longer than 1000 ms"]);
    assert!(of_type(&evs, "finding").is_empty());
    assert!(of_type(&evs, "script").is_empty());
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[test]
fn ctrl_c_ends_a_scan_of_busy_plugins_within_a_second() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let ndjson = dir.path().join("out.ndjson");
    let mut child = in_lab(bin())
        .args(["-n", "-p", "80,443", "--script", &sandbox("slow-calls.lua"), "--script-timeout", "60s"])
        .args(["--script-parallelism", "2", "-oJ", ndjson.to_str().unwrap(), TARGET])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both ports found, so both runs are starting; a moment for them to be in their slow calls.
    let open = |e: &Value| e["type"] == "port" && e["state"] == "open";
    crate::util::wait_for_events(&ndjson, 2, open, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(200));
    let st = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(st.success());
    let signalled = Instant::now();
    let deadline = signalled + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the scan ignored Ctrl-C");
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = signalled.elapsed();
    let evs = events(&std::fs::read_to_string(&ndjson).unwrap());
    assert_eq!(status.code(), Some(1));
    assert!(took < Duration::from_secs(1), "Ctrl-C took {took:?} to end the scan");
    let end = of_type(&evs, "scan_end");
    assert_eq!(end.len(), 1);
    assert_eq!(end[0]["interrupted"], true);
    assert_eq!(crate::util::open_ports(&evs).len(), 2, "what was found is kept");
    let m = budget_messages(&evs, "sandbox-slow-calls");
    assert_eq!(m, ["stopped: the scan was interrupted"; 2]);
}

// Case 5: a server's escapes reach the terminal as visible text.
#[test]
fn server_strings_cannot_drive_the_terminal() {
    let _lab = lab();
    let _server = Hostile::start("escape_http.py", 7080, &[]);
    let out = in_lab(bin())
        .args(["-n", "-sV", "-p", "7080", "--script", "http-title,http-server-header,banner", "-v", HOSTILE_IP])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(text.contains("http-title"), "{text}");
    for bad in ["\x1b", "\x07", "\r", "\u{9b}", "\u{202e}"] {
        assert!(!text.contains(bad), "{bad:?} reached the terminal:\n{text}");
        assert!(!stderr(&out).contains(bad), "{bad:?} reached stderr");
    }
    assert!(text.contains("\\x1B]0;owned\\x07"), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("Discovered open port 31337")), "{text}");
}

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

// Second review, case 1: a Certificate message of 87,000 empty
// certificates on 80 ports, under -sV and the TLS plugins. Each port keeps
// the chain's first 16 and counts the rest; memory stays that of a scan.
#[test]
fn a_chain_of_empty_certificates_on_many_ports_costs_bounded_memory() {
    let _lab = lab();
    let _server = Hostile::start("tls_empty_chain.py", 20000, &["--ports", "80"]);
    let (out, rss_kb) = crate::service::time_v(&[
        "-sV",
        "-n",
        "-Pn",
        "--script",
        "ssl-cert,ssl-enum-ciphers",
        "-p",
        "20000-20079",
        HOSTILE_IP,
        "-oJ",
        "-",
    ]);
    let text = stdout(&out);
    let evs = events(&text);
    let services: Vec<&Value> = of_type(&evs, "service").into_iter().filter(|s| s["ip"] == HOSTILE_IP).collect();
    assert_eq!(services.len(), 80, "{}", stderr(&out));
    for s in &services {
        let chain = s["tls"]["chain"].as_array().unwrap_or_else(|| panic!("no chain: {s}"));
        assert_eq!((chain.len(), &s["tls"]["chain_cut"]), (16, &Value::from(86_984)), "{}", s["port"]);
    }
    assert!(text.len() < 4 << 20, "{} bytes of NDJSON for 80 ports", text.len());
    assert!(rss_kb < 80 * 1024, "peak RSS {rss_kb} kB");
}
