//! What the loopback tests of both harnesses share (tests/loopback.rs and
//! tests/lab/loopback.rs): listeners on 127.0.0.1 and their `-p` list.

use std::net::TcpListener;

/// `n` listeners on loopback, plus a port that was just freed (so closed).
pub(crate) fn listeners(n: usize) -> (Vec<TcpListener>, Vec<u16>, u16) {
    let ls: Vec<TcpListener> = (0..n).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    let ports = ls.iter().map(|l| l.local_addr().unwrap().port()).collect();
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    (ls, ports, closed)
}

/// Ports as a `-p` list.
pub(crate) fn spec(ports: &[u16]) -> String {
    ports.iter().map(u16::to_string).collect::<Vec<_>>().join(",")
}
