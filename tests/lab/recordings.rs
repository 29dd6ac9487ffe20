//! `moonscan plugins test --record DIR` against the lab's daemons, then
//! `--replay DIR` offline: the same findings from the recorded bytes, and
//! a clear error where a plugin's conversation parts from the recording.
//! What needs no lab is in tests/recordings.rs.

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
