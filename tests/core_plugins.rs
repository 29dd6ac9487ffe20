//! The core plugins (plugins/*.lua) on loopback servers, for answers the
//! lab does not give, and on recorded bytes (`moonscan plugins test`,
//! offline) for services the lab does not run. Against the lab's real
//! services: tests/lab/core_plugins.rs.

use crate::util::{events, of_type, repo, run, stderr, stdout};

mod common;
use common::*;

fn banner_file(name: &str) -> String {
    repo().join("tests/data/banners").join(name).to_string_lossy().into_owned()
}

#[test]
fn mysql_info_decodes_recorded_greetings() {
    let (code, evs) =
        offline("mysql-info", "3306", &["--service", "mysql", "--banner-file", &banner_file("mysql-8.bin")]);
    assert_eq!(code, Some(0), "{evs:#?}");
    assert!(of_type(&evs, "error").is_empty(), "the banner is enough: no connection: {evs:#?}");
    assert!(of_type(&evs, "finding").is_empty(), "{evs:#?}");
    let f = of_type(&evs, "script");
    assert_eq!(f.len(), 1, "{evs:#?}");
    // nmap's mysql-info table (the lower 16 capability bits, nmap's names).
    assert_eq!(f[0]["plugin"], "mysql-info");
    let d = &f[0]["data"];
    assert_eq!(
        (d["Protocol"].as_u64(), d["Version"].as_str(), d["Thread ID"].as_u64()),
        (Some(10), Some("8.0.36"), Some(13))
    );
    assert_eq!(d["Auth Plugin Name"], "caching_sha2_password");
    assert_eq!(d["Capabilities flags"], 65535);
    let caps = strings(&d["Some Capabilities"]);
    for c in
        ["LongPassword", "Speaks41ProtocolNew", "SwitchToSSLAfterHandshake", "Support41Auth", "SupportsAuthPlugins"]
    {
        assert!(caps.contains(&c), "{c} missing from {caps:?}");
    }
    assert_eq!(d["Status"], "Autocommit");
    assert!(d["Salt"].as_str().is_some_and(|s| s.len() >= 20), "{d}");
    let text = f[0]["output"].as_str().unwrap();
    assert!(
        text.starts_with("\n  Protocol: 10\n  Version: 8.0.36\n  Thread ID: 13\n  Capabilities flags: 65535\n"),
        "{text:?}"
    );
    assert!(text.contains("\n  Some Capabilities: ") && text.contains("\n  Status: Autocommit\n"), "{text:?}");

    let (code, evs) =
        offline("mysql-info", "3306", &["--service", "mysql", "--banner-file", &banner_file("mysql-mariadb.bin")]);
    assert_eq!(code, Some(0), "{evs:#?}");
    assert!(of_type(&evs, "finding").is_empty(), "{evs:#?}");
    let f = of_type(&evs, "script");
    assert_eq!(f.len(), 1, "{evs:#?}");
    assert_eq!(f[0]["plugin"], "mysql-info");
    let d = &f[0]["data"];
    assert_eq!(d["Version"], "5.5.5-10.11.6-MariaDB-0+deb12u1");
    assert_eq!(d["Auth Plugin Name"], "mysql_native_password");
    assert_eq!(d["Capabilities flags"], 63486);
    let caps = strings(&d["Some Capabilities"]);
    assert!(!caps.contains(&"LongPassword") && !caps.contains(&"SwitchToSSLAfterHandshake"), "{caps:?}");
    assert!(caps.contains(&"Speaks41ProtocolNew") && caps.contains(&"SupportsAuthPlugins"), "{caps:?}");

    // Not a greeting (an FTP banner): no result; it would connect, and offline it cannot.
    let (code, evs) =
        offline("mysql-info", "3306", &["--service", "mysql", "--banner-file", &banner_file("ftp-vsftpd.bin")]);
    assert_eq!(code, Some(1), "{evs:#?}");
    assert!(of_type(&evs, "finding").is_empty(), "{evs:#?}");
    assert!(of_type(&evs, "script").is_empty(), "{evs:#?}");
}

/// nmap's common `--script-args`: `http.useragent` is every HTTP request's
/// User-Agent (a server that echoes it as its title shows it), keys nmap
/// users pass for what moonscan does not do are refused with the reason,
/// and an unknown key is said, not silently kept.
#[test]
fn nmaps_script_args_are_honoured_or_refused_with_a_reason() {
    let port = loopback_server(
        |req| req.windows(4).any(|w| w == b"\r\n\r\n"),
        |req| {
            let text = String::from_utf8_lossy(req);
            let agent = text.lines().find_map(|l| l.strip_prefix("User-Agent: ")).unwrap_or("(none)").to_string();
            let body = format!("<title>{agent}</title>");
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).into_bytes()
        },
    );
    let p = port.to_string();
    let title = |extra: &[&str]| {
        let mut args = vec!["-sT", "-sV", "-n", "-p", &p, "--script", "http-title", "127.0.0.1", "-oJ", "-"];
        args.extend(extra);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let evs = events(&stdout(&out));
        (script(&evs, "http-title", "127.0.0.1", port)["output"].as_str().unwrap().to_string(), stderr(&out))
    };
    assert_eq!(title(&[]).0, "moonscan");
    // nmap's quoting: a browser's User-Agent holds a comma.
    let (got, said) = title(&["--script-args", "http.useragent=\"Mozilla/5.0 (KHTML, like Gecko) Agent/7\",x=1"]);
    assert_eq!(got, "Mozilla/5.0 (KHTML, like Gecko) Agent/7");
    assert!(said.contains("no selected plugin reads x\n") && !said.contains("http.useragent"), "{said}");

    // Refused: exit 2 and one line that says why, before any probe.
    for (arg, why) in [
        ("mysqluser=root", "--script-args mysqluser: no moonscan plugin logs in to MySQL"),
        ("http.max-cache-size=1000000", "--script-args http.max-cache-size: ctx.http keeps no cache"),
        ("brute.firstonly=true", "--script-args brute.firstonly: moonscan has no brute-force plugins"),
        ("http.useragent=a\rb", "--script-args http.useragent: a header value holds no line break"),
    ] {
        let out = run(&["-sT", "-n", "-p", &p, "--script", "http-title", "127.0.0.1", "--script-args", arg]);
        assert_eq!(out.status.code(), Some(2), "{arg}: {}{}", stdout(&out), stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(why) && err.trim().lines().count() == 1, "{arg}: {err}");
        assert!(stdout(&out).is_empty(), "{arg}: nothing scanned: {}", stdout(&out));
    }
    // Unknown: said once, and the scan goes on.
    let (got, said) = title(&["--script-args", "htp.useragent=x"]);
    assert_eq!(got, "moonscan");
    assert!(said.contains("--script-args: no selected plugin reads htp.useragent"), "{said}");
}
