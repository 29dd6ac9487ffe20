//! `moonscan plugins test --record DIR` against the lab's daemons, then
//! `--replay DIR` offline: the same findings from the recorded bytes, and
//! a clear error where a plugin's conversation parts from the recording.

use serde_json::Value;

use crate::util::{bin, events, in_lab, lab, repo, run, stderr, stdout, TARGET};

/// The findings and script results of a `plugins test --json` run, in
/// order, without what differs between runs (the time).
fn findings(out: &str) -> Vec<Value> {
    let mut evs = events(out);
    for e in &mut evs {
        e.as_object_mut().unwrap().remove("t");
    }
    evs.into_iter().filter(|e| e["type"] == "finding" || e["type"] == "script").collect()
}

/// Records `plugin` on `port` of the lab's first target (UDP with `udp`),
/// replays it, and returns both runs' findings and the recording.
fn record_and_replay(plugin: &str, port: &str, udp: bool) -> (Vec<Value>, Vec<Value>, Value) {
    record_and_replay_on(TARGET, plugin, port, udp)
}

fn record_and_replay_on(target: &str, plugin: &str, port: &str, udp: bool) -> (Vec<Value>, Vec<Value>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = repo().join("plugins").join(format!("{plugin}.lua"));
    let mut cmd = in_lab(bin());
    cmd.args(["plugins", "test"]).arg(&file).args(["--target", target, "--port", port, "--json", "--record"]);
    cmd.arg(dir.path());
    if udp {
        cmd.arg("--udp");
    }
    let live = cmd.output().expect("moonscan runs in the lab");
    assert_eq!(live.status.code(), Some(0), "{}{}", stdout(&live), stderr(&live));
    let recording: Value = serde_json::from_slice(&std::fs::read(dir.path().join("recording.json")).unwrap()).unwrap();
    // Offline: no namespace, no network.
    let replayed =
        run(&["plugins", "test", file.to_str().unwrap(), "--json", "--replay", dir.path().to_str().unwrap()]);
    assert_eq!(replayed.status.code(), Some(0), "{}{}", stdout(&replayed), stderr(&replayed));
    (findings(&stdout(&live)), findings(&stdout(&replayed)), recording)
}

#[test]
fn a_tcp_conversation_replays_to_the_same_findings() {
    let _lab = lab();
    let (live, replayed, recording) = record_and_replay("redis-info", "6379", false);
    assert!(live.iter().any(|e| e["type"] == "script"), "redis-info found nothing live: {live:?}");
    assert!(live.iter().any(|e| e["type"] == "finding"), "redis-info found nothing live: {live:?}");
    assert_eq!(live, replayed);
    let steps = recording["sockets"][0]["steps"].as_array().unwrap();
    assert_eq!(recording["sockets"][0]["transport"], "tcp");
    assert!(steps.iter().any(|s| s["op"] == "send") && steps.iter().any(|s| s["op"] == "recv"), "{recording}");
}

/// rdp-ntlm-info on FreeRDP's shadow server: X.224 in the clear, then
/// `sock:tls_handshake()` and CredSSP inside TLS, replayed from what the
/// plugin saw inside TLS.
#[test]
fn a_conversation_through_a_tls_handshake_replays_to_the_same_findings() {
    let _lab = lab();
    let (live, replayed, recording) = record_and_replay_on("198.18.0.3", "rdp-ntlm-info", "3389", false);
    assert!(
        live.iter()
            .any(|r| r["type"] == "script" && r["output"].as_str().is_some_and(|o| o.contains("Product_Version"))),
        "rdp-ntlm-info read no CHALLENGE live: {live:?}"
    );
    assert_eq!(live, replayed);
    let steps = recording["sockets"][0]["steps"].as_array().unwrap();
    let upgrade = steps.iter().position(|s| s["op"] == "starttls").expect("the TLS handshake is a step");
    assert!(steps[..upgrade].iter().any(|s| s["op"] == "recv"), "X.224 comes before TLS: {recording}");
    assert!(steps[upgrade..].iter().any(|s| s["op"] == "send"), "CredSSP comes after: {recording}");
}

#[test]
fn a_udp_conversation_replays_to_the_same_findings() {
    let _lab = lab();
    let (live, replayed, recording) = record_and_replay("snmp-sysdescr", "161", true);
    assert!(!live.is_empty(), "snmp-sysdescr found nothing live");
    assert_eq!(live, replayed);
    assert_eq!(recording["protocol"], "udp");
    assert_eq!(recording["sockets"][0]["transport"], "udp");
}

#[test]
fn a_replay_that_parts_from_the_recording_says_where() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let file = repo().join("plugins/redis-info.lua");
    let live = in_lab(bin())
        .args(["plugins", "test"])
        .arg(&file)
        .args(["--target", TARGET, "--port", "6379", "--record"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(live.status.code(), Some(0), "{}", stderr(&live));
    // The recording says the plugin sent something else first.
    let path = dir.path().join("recording.json");
    let mut r: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let steps = r["sockets"][0]["steps"].as_array_mut().unwrap();
    let first = steps.iter_mut().find(|s| s["op"] == "send").unwrap();
    first["data"] = Value::String("UElORw0K".into()); // "PING\r\n"
    std::fs::write(&path, serde_json::to_vec(&r).unwrap()).unwrap();
    let o = run(&["plugins", "test", file.to_str().unwrap(), "--replay", dir.path().to_str().unwrap()]);
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(said.contains("replay: step 1: the plugin sent") && said.contains("(\"PING\\r\\n\")"), "{said}");
    // A recording that is not one is refused with a clear message.
    std::fs::write(&path, "{\"version\": 1}").unwrap();
    let o = run(&["plugins", "test", file.to_str().unwrap(), "--replay", dir.path().to_str().unwrap()]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("not a recording"), "{}", stderr(&o));
}

#[test]
fn recording_needs_an_address_and_reaches_only_its_port() {
    let file = repo().join("plugins/redis-info.lua");
    let o = run(&["plugins", "test", file.to_str().unwrap(), "--record", "/tmp/never"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = run(&["plugins", "test", file.to_str().unwrap(), "--record", "/tmp/never", "--target", "lab.example"]);
    assert_eq!(o.status.code(), Some(2), "a name is refused: {}", stderr(&o));
    assert!(!std::path::Path::new("/tmp/never/recording.json").exists());
}

/// Peak RSS in kB of moonscan run with `args` under /usr/bin/time (no lab).
fn peak_rss(args: &[&str]) -> (std::process::Output, u64) {
    let out = std::process::Command::new("/usr/bin/time")
        .args(["-f", "maxrss=%M", bin()])
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("/usr/bin/time runs");
    let err = stderr(&out);
    let rss = err.lines().find_map(|l| l.strip_prefix("maxrss=")).and_then(|v| v.trim().parse().ok());
    (out, rss.unwrap_or_else(|| panic!("no maxrss in {err}")))
}

/// Recordings under the 64 MiB file cap whose lists would each have taken
/// hundreds of MB once built (5.1 M steps: 434 MB; 1.6 M empty sockets:
/// 1.26 GB; 200,000 certificate summaries: 387 MB; 22 M names: 1.6 GB) are
/// refused as they are read, in a few MB.
#[test]
fn hostile_recordings_are_refused_in_bounded_memory() {
    use std::io::Write;
    let head =
        r#"{"version":1,"plugin":"banner","ip":"127.0.0.1","port":80,"protocol":"tcp","service":null,"banner":"","#;
    let cert = r#"{"subject":"CN=a","issuer":"CN=a","not_before":"","not_after":"","serial":"01","key_type":"ec",
        "key_bits":256,"signature_algorithm":"x","self_signed":true,"sha256":"00","san":["DNS:a","DNS:b"]}"#;
    let empty_cert = r#"{"subject":"","issuer":"","not_before":"","not_after":"","serial":"","key_type":"",
        "key_bits":0,"signature_algorithm":"","self_signed":false,"sha256":"","san":["#;
    // (name, what comes before the list, one item, what comes after, how
    // many items (None: as many as fit), what the refusal names).
    type Case<'a> = (&'a str, String, &'a str, &'a str, Option<u64>, &'a str);
    let cases: [Case; 4] = [
        (
            "steps",
            format!(r#"{head}"sockets":[{{"transport":"tcp","port":80,"steps":["#),
            r#"{"op":"end"}"#,
            "]}]}",
            None,
            "steps",
        ),
        (
            "sockets",
            format!(r#"{head}"sockets":["#),
            r#"{"transport":"tcp","port":80,"steps":[]}"#,
            "]}",
            None,
            "sockets",
        ),
        (
            "certificates",
            format!(r#"{head}"tls":{{"version":"","cipher":"","chain":["#),
            cert,
            r#"]},"sockets":[]}"#,
            Some(200_000),
            "certificates",
        ),
        (
            "names",
            format!(r#"{head}"tls":{{"version":"","cipher":"","chain":[{empty_cert}"#),
            r#""""#,
            r#"]}]},"sockets":[]}"#,
            None,
            "subject alternative names",
        ),
    ];
    let plugin = repo().join("plugins/banner.lua");
    for (name, pre, item, post, n, what) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("recording.json");
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        // As many as fit under the 64 MiB cap (or n).
        let n = n.unwrap_or(((64 << 20) - pre.len() - post.len()) as u64 / (item.len() as u64 + 1));
        w.write_all(pre.as_bytes()).unwrap();
        for i in 0..n {
            if i > 0 {
                w.write_all(b",").unwrap();
            }
            w.write_all(item.as_bytes()).unwrap();
        }
        w.write_all(post.as_bytes()).unwrap();
        w.flush().unwrap();
        drop(w);
        assert!(std::fs::metadata(&path).unwrap().len() <= 64 << 20);
        let (out, rss_kb) =
            peak_rss(&["plugins", "test", plugin.to_str().unwrap(), "--replay", dir.path().to_str().unwrap()]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains("refused: more than") && err.contains(what), "{name}: {err}");
        assert!(rss_kb < 64 * 1024, "{name}: peak RSS {rss_kb} kB");
    }
}
