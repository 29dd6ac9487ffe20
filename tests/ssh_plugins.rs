//! The SSH plugins offline, with no network at all: they fail cleanly.
//! Against the lab's sshd and a second sshd on loopback:
//! tests/lab/ssh_plugins.rs.

use serde_json::Value;

use crate::util::{events, of_type, repo, run, stderr, stdout};

/// `moonscan plugins test` of a plugin file, offline.
fn offline(plugin: &str, banner: &[u8]) -> (Option<i32>, Vec<Value>, String) {
    let dir = tempfile::tempdir().unwrap();
    let banner_file = dir.path().join("banner");
    std::fs::write(&banner_file, banner).unwrap();
    let file = repo().join("plugins").join(format!("{plugin}.lua"));
    let out = run(&[
        "plugins",
        "test",
        file.to_str().unwrap(),
        "--port",
        "22",
        "--service",
        "ssh",
        "--banner-file",
        banner_file.to_str().unwrap(),
        "--json",
    ]);
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    (out.status.code(), events(&stdout(&out)), err)
}

#[test]
fn offline_the_ssh_plugins_fail_cleanly() {
    // Not SSH at all: ssh-hostkey says so without connecting.
    let (code, evs, err) = offline("ssh-hostkey", b"\x16\x03\x01\x00\xff garbage \x00\xff\r\n");
    assert_eq!(code, Some(0), "{err}");
    assert!(of_type(&evs, "finding").is_empty(), "{evs:#?}");
    assert!(of_type(&evs, "script").is_empty(), "{evs:#?}");
    let logs = of_type(&evs, "log");
    assert!(logs.iter().any(|l| l["message"].as_str().unwrap().contains("did not send an SSH version")), "{evs:#?}");
    // An SSH banner but no network: each connection is refused by the guard, reported as an error.
    for plugin in ["ssh-hostkey", "ssh-auth-methods"] {
        for banner in [&b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n"[..], b""] {
            let (code, evs, err) = offline(plugin, banner);
            assert_eq!(code, Some(1), "{plugin}: {err}\n{evs:#?}");
            assert!(of_type(&evs, "finding").is_empty(), "{evs:#?}");
            assert!(of_type(&evs, "script").is_empty(), "{evs:#?}");
            let errors = of_type(&evs, "error");
            assert!(
                errors.iter().any(|e| e["kind"] == "sandbox" && e["message"].as_str().unwrap().contains("offline")),
                "{plugin}: {evs:#?}"
            );
        }
    }
}
