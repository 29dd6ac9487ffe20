//! Scans of listeners on 127.0.0.1 that need root though not the lab: a
//! mount namespace (`unshare -m`) gives moonscan a resolv.conf that names
//! no server. The rest of the loopback tests: tests/loopback.rs.

use std::process::{Command, Stdio};

use crate::util::{bin, events, of_type, run, stderr, stdout};

#[path = "../loopback/common.rs"]
mod common;
use common::*;

/// Loopback is named by the hosts file alone (no DNS server is asked of
/// 127.0.0.0/8), as nmap's report names it; and a machine whose
/// resolv.conf names no server scans on, its hosts named by the hosts
/// file, with one `error` event that says so and counts no error.
#[test]
fn loopback_is_named_by_the_hosts_file_and_no_dns_server_is_no_failure() {
    let (_ls, ports, _) = listeners(1);
    let out = run(&["-sT", "-p", &spec(&ports), "-oN", "-", "127.0.0.1"]);
    assert!(stdout(&out).contains("\nNmap scan report for localhost (127.0.0.1)\n"), "{}", stdout(&out));
    let empty = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(empty.path(), "# no nameserver\n").unwrap();
    let script = format!(
        "mount --bind {} /etc/resolv.conf && exec {} -sT -p {} -oJ - 127.0.0.1",
        empty.path().display(),
        bin(),
        spec(&ports)
    );
    let out = Command::new("unshare").args(["-m", "sh", "-c", &script]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&stdout(&out));
    assert_eq!(of_type(&evs, "rdns")[0]["name"], "localhost", "{evs:#?}");
    let said: Vec<&str> = of_type(&evs, "error").iter().filter_map(|e| e["message"].as_str()).collect();
    assert!(said.len() == 1 && said[0].contains("no DNS server to ask"), "{said:?}");
    assert_eq!(of_type(&evs, "scan_end")[0]["errors"], 0);
}
