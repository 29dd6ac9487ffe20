//! What -sV does beyond its probes, on listeners on 127.0.0.1 (no lab
//! needed): version plugins that set a port's service (`ctx:set_service`),
//! which every output then shows (-oN, -oX, -oG, NDJSON, the store and
//! `db show`/`db diff`), while a plugin of another category cannot; and
//! the RPC grinder, which names a port that answers ONC RPC by its program.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::util::{events, of_type, run, stderr, stdout};

/// A version plugin that renames every port, and a discovery plugin that tries to.
const RENAMER: &str = r#"return {
  id = "frob-version", description = "Names the test service.", categories = { "version", "safe" },
  portrule = function() return true end,
  run = function(ctx)
    assert(ctx:set_service{ name = "frob", product = "Frob d", version = "1.2", info = "test",
      cpe = { "cpe:/a:frob:frob:1.2" } })
    return "named " .. tostring(ctx.service)
  end }
"#;
const SNEAKY: &str = r#"return {
  id = "sneaky", description = "Tries to rename.", categories = { "safe", "discovery" },
  portrule = function() return true end,
  run = function(ctx)
    ctx:set_service{ name = "evil" }
    return "renamed"
  end }
"#;

/// A listener that greets every connection as an OpenSSH server would.
fn ssh_like() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let _ = conn.write_all(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n");
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = conn.read(&mut [0u8; 256]);
            });
        }
    });
    port
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn a_version_plugin_renames_the_port_in_every_output_and_others_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    std::fs::write(plugins.join("frob-version.lua"), RENAMER).unwrap();
    std::fs::write(plugins.join("sneaky.lua"), SNEAKY).unwrap();
    let port = ssh_like();
    let p = port.to_string();
    let f = |name: &str| dir.path().join(name);
    let db = f("scans.db");
    let (x, n, g, j) = (f("x.xml"), f("n.txt"), f("g.txt"), f("j.ndjson"));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let o = run(&[
        "-sT",
        "-sV",
        "-n",
        "-Pn",
        "-p",
        &p,
        "--script",
        "frob-version,sneaky",
        "--plugin-dir",
        &s(&plugins),
        "-oX",
        &s(&x),
        "-oN",
        &s(&n),
        "-oG",
        &s(&g),
        "-oJ",
        &s(&j),
        "--db",
        &s(&db),
        "127.0.0.1",
    ]);
    // The sneaky plugin's error is the scan's only error (exit 1).
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));

    // NDJSON: detection's service event, then the plugin's, which supersedes it.
    let evs = events(&read(&j));
    let services = of_type(&evs, "service");
    let [first, last] = &services[..] else { panic!("two service events expected: {services:#?}") };
    assert_eq!((first["service"].as_str(), first["product"].as_str()), (Some("ssh"), Some("OpenSSH")), "{first}");
    let want = [("service", "frob"), ("product", "Frob d"), ("version", "1.2"), ("info", "test")];
    for (k, v) in want {
        assert_eq!(last[k], v, "{last}");
    }
    assert_eq!((last["method"].as_str(), last["probe"].as_str()), (Some("probed"), Some("frob-version")), "{last}");
    assert_eq!(last["cpe"], serde_json::json!(["cpe:/a:frob:frob:1.2"]));
    let scripts = of_type(&evs, "script");
    let named = scripts.iter().find(|r| r["plugin"] == "frob-version").expect("its result");
    assert_eq!(named["output"], "named ssh", "the plugin saw the detected service");
    assert!(!scripts.iter().any(|r| r["plugin"] == "sneaky"), "{scripts:#?}");
    let errors = of_type(&evs, "error");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!((errors[0]["plugin"].as_str(), errors[0]["kind"].as_str()), (Some("sneaky"), Some("plugin")));
    assert!(errors[0]["message"].as_str().unwrap().contains("only a plugin of the version category"));
    assert!(!read(&j).contains("evil"));

    // nmap's three formats.
    let xml = read(&x);
    let want = r#"<service name="frob" product="Frob d" version="1.2" extrainfo="test" method="probed" conf="10"><cpe>cpe:/a:frob:frob:1.2</cpe></service>"#;
    assert!(xml.contains(want), "{xml}");
    assert!(!xml.contains("OpenSSH"), "{xml}");
    let normal = read(&n);
    assert!(normal.contains(&format!("\n{port}/tcp open  frob    Frob d 1.2 (test)\n")), "{normal}");
    let grep = read(&g);
    assert!(grep.contains(&format!("Ports: {port}/open/tcp//frob//Frob d 1.2 (test)/")), "{grep}");

    // The store: db show and db export keep the last service event.
    let id = evs[0]["scan_id"].as_str().unwrap().to_string();
    let db = s(&db);
    let show = run(&["db", "--db", &db, "show", &id]);
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    let text = stdout(&show);
    assert!(text.contains(&format!("{port}/tcp   open      frob           Frob d 1.2 (test)")), "{text}");
    let exported = f("export.xml");
    let o = run(&["db", "--db", &db, "export", &id, "-oX", &s(&exported)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(read(&exported).contains(want), "{}", read(&exported));

    // db diff: the same port without the plugin is detection's ssh again.
    let o = run(&["-sT", "-sV", "-n", "-Pn", "-p", &p, "--db", &db, "-oJ", "-", "127.0.0.1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let plain = events(&stdout(&o));
    let id2 = plain[0]["scan_id"].as_str().unwrap().to_string();
    let o = run(&["db", "--db", &db, "diff", &id, &id2]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let diff = stdout(&o);
    assert!(diff.contains("1 services changed"), "{diff}");
    assert!(diff.contains("frob Frob d 1.2 (test)"), "{diff}");
}

/// A minimal ONC RPC server over TCP (record marking) whose one program is
/// `program`, versions `low`-`high`; it answers a portmapper DUMP with
/// PROG_UNAVAIL unless it is the portmapper, and any other program too.
fn rpc_server(program: u32, low: u32, high: u32) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || serve_rpc(&mut conn, program, low, high));
        }
    });
    port
}

fn serve_rpc(conn: &mut TcpStream, program: u32, low: u32, high: u32) {
    loop {
        let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
        let mut mark = [0u8; 4];
        if conn.read_exact(&mut mark).is_err() {
            return;
        }
        // Other probes' bytes are not a call: a record they leave
        // unfinished ends the connection soon.
        let _ = conn.set_read_timeout(Some(Duration::from_millis(300)));
        let len = (u32::from_be_bytes(mark) & 0x7fff_ffff) as usize;
        if len > 4096 {
            return;
        }
        let mut call = vec![0u8; len];
        if conn.read_exact(&mut call).is_err() || len < 24 {
            return;
        }
        let w = |i: usize| u32::from_be_bytes(call[i * 4..i * 4 + 4].try_into().unwrap());
        let (xid, prog, vers, proc_) = (w(0), w(3), w(4), w(5));
        if w(1) != 0 || w(2) != 2 {
            return; // not a CALL of RPC version 2
        }
        // REPLY, MSG_ACCEPTED, AUTH_NONE verifier, then accept_stat.
        let mut words = vec![xid, 1, 0, 0, 0];
        if prog != program {
            words.push(1); // PROG_UNAVAIL
        } else if vers < low || vers > high {
            words.extend([2, low, high]); // PROG_MISMATCH
        } else if program == 100_000 && proc_ == 4 {
            words.extend([0, 1, 100_000, 2, 6, 111, 0]); // SUCCESS, a one-entry list
        } else {
            words.push(0);
        }
        let mut reply = (0x8000_0000 | (words.len() as u32 * 4)).to_be_bytes().to_vec();
        words.iter().for_each(|w| reply.extend_from_slice(&w.to_be_bytes()));
        if conn.write_all(&reply).is_err() {
            return;
        }
    }
}

fn service_of(evs: &[Value], port: u16) -> Value {
    let all = of_type(evs, "service");
    let s = all.iter().rev().find(|s| s["port"] == port).unwrap_or_else(|| panic!("no service for {port}: {evs:#?}"));
    (*s).clone()
}

#[test]
fn the_rpc_grinder_names_any_port_that_answers_onc_rpc_by_its_program() {
    let rpcbind = rpc_server(100_000, 2, 4);
    let mountd = rpc_server(100_005, 1, 3);
    let nothing_known = rpc_server(0x2000_0001, 1, 1);
    let ports = format!("{rpcbind},{mountd},{nothing_known}");
    let o = run(&["-sT", "-sV", "-n", "-Pn", "-p", &ports, "-oJ", "-", "127.0.0.1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let evs = events(&stdout(&o));
    let said = |port| {
        let s = service_of(&evs, port);
        let f = |k: &str| s[k].as_str().unwrap_or("").to_string();
        (f("service"), f("version"), f("info"), f("method"), f("probe"))
    };
    let named = |n: &str, v: &str, i: &str| (n.into(), v.into(), i.into(), "probed".into(), "RPCGrind".into());
    assert_eq!(said(rpcbind), named("rpcbind", "2-4", "RPC #100000"));
    assert_eq!(said(mountd), named("mountd", "1-3", "RPC #100005"));
    // A program in no table: it answers RPC, which is all that is known.
    assert_eq!(said(nothing_known), ("rpc".into(), "".into(), "".into(), "soft".into(), "RPCNull".into()));
    assert!(of_type(&evs, "error").is_empty(), "{evs:#?}");
}
