//! The core library's own tests: each tests/lua/MODULE_test.lua requires a
//! module of plugins/lib, runs it offline (`moonscan plugins test`) on
//! recorded and hostile bytes with Lua `assert`s, and reports "ok N" with
//! the number of checks that held. A failed check ends the run as a plugin
//! error (exit 1, with the assert's message).

use crate::util::{repo, run, stderr, stdout};

/// Runs one library test; returns how many checks it made.
fn checks(module: &str) -> usize {
    let file = repo().join("tests/lua").join(format!("{module}_test.lua"));
    let dir = repo().join("plugins");
    let o = run(&["plugins", "test", file.to_str().unwrap(), "--plugin-dir", dir.to_str().unwrap()]);
    let said = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{module}: {said}{}", stderr(&o));
    let n = said.split("ok ").nth(1).and_then(|r| r.split_whitespace().next()).and_then(|n| n.parse().ok());
    n.unwrap_or_else(|| panic!("{module}: no 'ok N' in {said}"))
}

#[test]
fn every_library_module_has_tests_that_pass() {
    let lib = std::fs::read_dir(repo().join("plugins/lib")).unwrap();
    let mut modules: Vec<String> = lib
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|f| f.strip_suffix(".lua").map(str::to_string))
        .collect();
    modules.sort();
    for m in &modules {
        let n = checks(m);
        assert!(n >= 10, "{m}: only {n} checks");
    }
}

#[test]
fn a_failed_check_fails_the_test_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad_test.lua");
    std::fs::write(
        &file,
        "local text = require 'text'\nreturn { id = 'bad-test', description = 'd', categories = { 'safe' }, ports = { 80 },\n\
         run = function() assert(text.trim('  a ') == 'b', 'trim is wrong') return 'ok 1' end }\n",
    )
    .unwrap();
    let plugins = repo().join("plugins");
    let o = run(&["plugins", "test", file.to_str().unwrap(), "--plugin-dir", plugins.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("trim is wrong"), "{}", stdout(&o));
}
