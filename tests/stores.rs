//! Result stores without the lab: `db diff` of script results, `db`'s
//! usage errors, a store that cannot be opened. Scans of the lab written
//! into SQLite and the lab's PostgreSQL: tests/lab/stores.rs.

use crate::util::{events, of_type, stderr, stdout};

mod common;
use common::*;

/// Script results are stored apart from findings and come back as they
/// were; `db diff` compares a plugin's script results without the keys it
/// calls volatile, line by line, and its findings by title (a loopback
/// port, no lab).
#[test]
fn db_diff_compares_script_results_without_their_volatile_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("scans.db");
    let db = path_str(&db);
    let plugin = dir.path().join("changing.lua");
    std::fs::write(
        &plugin,
        "return { id = 'changing', description = 'd', categories = {'test'}, args = {'v', 'when'},\n\
         volatile = {'when'}, portrule = function() return true end,\n\
         run = function(ctx)\n\
           ctx:finding{ title = 'v is ' .. ctx.args.v }\n\
           return { v = ctx.args.v, when = ctx.args.when }, 'v: ' .. ctx.args.v .. '\\nwhen: ' .. ctx.args.when\n\
         end }",
    )
    .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let scan = |args: &str| {
        let o = crate::util::run(&[
            "-sT",
            "-n",
            "-p",
            &port,
            "127.0.0.1",
            "--script",
            path_str(&plugin),
            "--script-args",
            args,
            "--db",
            db,
            "-oJ",
            "-",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        events(&stdout(&o))
    };
    let (one, two, three) = (scan("v=1,when=a"), scan("v=1,when=b"), scan("v=2,when=c"));
    drop(listener);
    for evs in [&one, &two, &three] {
        assert_eq!((of_type(evs, "script").len(), of_type(evs, "finding").len()), (1, 1), "{evs:?}");
    }
    assert_eq!(of_type(&one, "script")[0]["volatile"], serde_json::json!(["when"]));
    let (one_id, two_id, three_id) = (scan_id(&one), scan_id(&two), scan_id(&three));

    // Stored apart and read back as they were.
    let out = db_cmd(&["--db", db, "export", &one_id, "-oJ", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let kinds = ["script", "finding"];
    assert_eq!(only(&events(&stdout(&out)), &kinds), only(&one, &kinds));

    // Only the volatile value changed: nothing to report.
    let out = db_cmd(&["--db", db, "diff", &one_id, &two_id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "0 opened, 0 closed, 0 services changed, 0 new findings, 0 findings gone, 0 script results changed"
        ),
        "{text}"
    );
    assert!(!text.contains(" script changing") && !text.contains("not compared"), "{text}");

    // v changed: the script result's lines, and the finding by its title.
    let out = db_cmd(&["--db", db, "diff", &two_id, &three_id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == format!("~ 127.0.0.1 {port}/tcp script changing"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(lines[at + 1..].starts_with(&["    - v: 1", "    - when: b", "    + v: 2", "    + when: c"]), "{text}");
    assert!(text.contains(&format!("+ 127.0.0.1 {port}/tcp finding changing [info]: v is 2")), "{text}");
    assert!(text.contains(&format!("- 127.0.0.1 {port}/tcp finding changing [info]: v is 1")), "{text}");
    assert!(
        text.contains(
            "0 opened, 0 closed, 0 services changed, 1 new findings, 1 findings gone, 1 script results changed"
        ),
        "{text}"
    );
}

#[test]
fn db_usage_errors_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.db");
    let out = db_cmd(&["--db", path_str(&missing), "list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no such database"), "{}", stderr(&out));
    assert!(!missing.exists(), "reading never creates a database");

    // A database with two scans whose ids share a prefix (written with the library).
    let db = dir.path().join("two.db");
    {
        let mut sink = moonscan::output::store::open(path_str(&db), &Default::default()).unwrap();
        for id in ["abc1", "abc2"] {
            let ev = moonscan::findings::Event::ScanStart(moonscan::findings::ScanStart {
                scan_id: id.into(),
                started: humantime::parse_rfc3339("2026-11-21T15:21:53.078Z").unwrap(),
                args: vec!["moonscan".into(), "-p".into(), "80".into()],
                scan_type: moonscan::findings::ScanType::Connect,
                seed: 1,
                probes_planned: 1,
                settings: Default::default(),
            });
            sink.record(&ev).unwrap();
        }
        sink.close().unwrap();
    }
    let out = db_cmd(&["--db", path_str(&db), "show", "abc"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("ambiguous"), "{}", stderr(&out));
    let out = db_cmd(&["--db", path_str(&db), "show", "zz"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no scan"), "{}", stderr(&out));
    let out = db_cmd(&["--db", path_str(&db), "export", "abc1"]);
    assert_eq!(out.status.code(), Some(2), "export needs -oJ or -oX");
    let out = db_cmd(&["--db", path_str(&db), "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("unfinished"), "{}", stdout(&out));
}

#[test]
fn a_db_that_cannot_be_opened_fails_the_scan_before_it_starts() {
    let out = crate::util::run(&["-sT", "-p", "9", "127.0.0.1", "--db", "/nonexistent-dir/scans.db"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("/nonexistent-dir/scans.db"), "{}", stderr(&out));
}
