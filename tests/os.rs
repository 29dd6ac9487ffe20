//! OS detection (`-O`) where it cannot run: this machine's own addresses.
//! OS detection, traceroute and `-A` on the lab: tests/lab/os.rs.

use serde_json::Value;

use crate::util::{bin, of_type, stderr, stdout};

/// `-O` of this machine's own address: the port scan runs, the host says
/// why it has no OS, the exit is 0.
#[test]
fn os_detection_of_loopback_says_why_and_scans_on() {
    let out =
        std::process::Command::new(bin()).args(["-n", "-O", "-p", "1", "-oJ", "-", "127.0.0.1"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let evs: Vec<Value> = crate::util::events(&stdout(&out));
    let errors = of_type(&evs, "error");
    assert!(errors.iter().any(|e| e["message"].as_str().is_some_and(|m| m.contains("own addresses"))), "{errors:?}");
    assert!(of_type(&evs, "os").iter().all(|e| e.get("fingerprint").is_none()));
}
