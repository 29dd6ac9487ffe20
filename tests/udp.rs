//! UDP scans (-sU) where raw frames cannot go (loopback): UDP sockets,
//! with the same states. UDP scans of the lab: tests/lab/udp.rs.

use std::collections::BTreeMap;

use crate::util::{of_type, stderr};

/// Where raw frames cannot go (loopback) -sU says so
/// on one line and uses UDP sockets, with the same states.
#[test]
fn udp_socket_fallback_on_the_scanners_own_address() {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        sock.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 512];
        // Answers the first datagram (the scan's) and then detection's, if any.
        for _ in 0..2 {
            let Ok((_, from)) = sock.recv_from(&mut buf) else { break };
            let _ = sock.send_to(b"hello", from);
        }
    });
    let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = crate::util::run(&["-sU", "-v", "--reason", "-p", &format!("{port},{closed}"), "127.0.0.1", "-oJ", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("-sU uses UDP sockets"), "{}", stderr(&out));
    let evs = crate::util::events(&crate::util::stdout(&out));
    let states: BTreeMap<u64, (String, String)> = of_type(&evs, "port")
        .iter()
        .map(|p| (p["port"].as_u64().unwrap(), (p["state"].to_string(), p["reason"].to_string())))
        .collect();
    assert_eq!(states[&u64::from(port)], ("\"open\"".into(), "\"udp-response\"".into()));
    assert_eq!(states[&u64::from(closed)], ("\"closed\"".into(), "\"port-unreach\"".into()));
    let _ = server.join();
}
