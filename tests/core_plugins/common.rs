//! What the core plugins' tests of both harnesses share (tests/core_plugins.rs
//! and tests/lab/core_plugins.rs): a plugin's file, its findings and script
//! results in a scan's events, a loopback server, `plugins test` offline.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use serde_json::Value;

use crate::util::{events, of_type, repo, run, stdout};

pub(crate) fn plugin_file(id: &str) -> String {
    repo().join("plugins").join(format!("{id}.lua")).to_string_lossy().into_owned()
}

/// Findings (`ctx:finding`) of `plugin` on `ip:port`.
pub(crate) fn findings<'a>(evs: &'a [Value], plugin: &str, ip: &str, port: u16) -> Vec<&'a Value> {
    of_type(evs, "finding")
        .into_iter()
        .filter(|f| f["plugin"] == plugin && f["ip"] == ip && f["port"] == port)
        .collect()
}

/// Script results (what `run` returned) of `plugin` on `ip:port`.
pub(crate) fn scripts<'a>(evs: &'a [Value], plugin: &str, ip: &str, port: u16) -> Vec<&'a Value> {
    of_type(evs, "script").into_iter().filter(|r| r["plugin"] == plugin && r["ip"] == ip && r["port"] == port).collect()
}

/// The one script result of `plugin` on `ip:port`: a script event, never a
/// finding (no severity, no title).
pub(crate) fn script<'a>(evs: &'a [Value], plugin: &str, ip: &str, port: u16) -> &'a Value {
    let all = scripts(evs, plugin, ip, port);
    assert_eq!(all.len(), 1, "want one {plugin} script result on {ip}:{port}, have {all:#?}");
    assert!(all[0].get("severity").is_none() && all[0].get("title").is_none(), "{}", all[0]);
    let said = findings(evs, plugin, ip, port);
    assert!(!said.iter().any(|f| f["title"] == plugin || f.get("output").is_some()), "{said:#?}");
    all[0]
}

pub(crate) fn strings(v: &Value) -> Vec<&str> {
    v.as_array().unwrap_or_else(|| panic!("not a list: {v}")).iter().map(|s| s.as_str().unwrap()).collect()
}

/// `moonscan plugins test` of a core plugin; returns (exit status, events).
pub(crate) fn offline(id: &str, port: &str, extra: &[&str]) -> (Option<i32>, Vec<Value>) {
    let file = plugin_file(id);
    let mut args = vec!["plugins", "test", file.as_str(), "--port", port, "--json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    (out.status.code(), events(&stdout(&out)))
}

/// A loopback server answering each connection with `answer(request bytes)`
/// once the request is complete (as `complete` says); runs until the test
/// process ends.
pub(crate) fn loopback_server(complete: fn(&[u8]) -> bool, answer: fn(&[u8]) -> Vec<u8>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || serve(&mut conn, complete, answer));
        }
    });
    port
}

pub(crate) fn serve(conn: &mut TcpStream, complete: fn(&[u8]) -> bool, answer: fn(&[u8]) -> Vec<u8>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut req = Vec::new();
    let mut buf = [0u8; 4096];
    while !complete(&req) && req.len() < 65536 {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let _ = conn.write_all(&answer(&req));
}
