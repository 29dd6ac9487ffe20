//! `moonscan plugins test --record` refusals (no address, another port)
//! and `--replay` of hostile recordings, refused in bounded memory.
//! Recording the lab's daemons and replaying them: tests/lab/recordings.rs.

use crate::util::{bin, repo, run, stderr};

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
