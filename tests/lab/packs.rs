//! A pack's plugin in a lab scan: an untrusted plugin cannot pass for a
//! category; and, as root, a data folder another user owns is refused (root
//! gives the folder away). The rest of `moonscan pack` needs neither:
//! tests/packs.rs.

use std::fs;

use crate::util::{stderr, stdout};

#[path = "../packs/common.rs"]
mod common;
use common::*;

// Regression: an untrusted pack's plugin called `default` ran under -sC,
// because the bare id matched the term.
#[test]
fn an_untrusted_plugin_cannot_pass_for_a_category() {
    let env = setup();
    env.ok(&["pack", "keygen", "-o", "stranger"]);
    set_plugin(&env, &plugin_src("default", "'default', 'safe'", ""));
    env.refused(&["pack", "sign", "demo", "--key", "stranger.key", "--update-hashes"], &["category or keyword"]);
    set_plugin(&env, &plugin_src("web-probe", "'default', 'safe'", ""));
    env.ok(&["pack", "sign", "demo", "--key", "stranger.key", "--update-hashes"]);
    let out = env.ok(&["pack", "install", "demo", "--allow-unsigned"]);
    assert!(out.contains("UNTRUSTED"), "{out}");
    let listed = env.ok(&["plugins", "list", "default"]);
    assert!(!listed.contains("web-probe"), "{listed}");
    // By its bare id: an error that names the full name to use.
    let o = env.run(&["--script", "web-probe", "-p", "9", "127.0.0.1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("untrusted pack demo") && stderr(&o).contains("demo:web-probe"), "{}", stderr(&o));
    // Under -sC on a port it would run on, it does not run; named in full, it does.
    let _lab = crate::util::lab();
    let home = env.home.path().to_str().unwrap().to_string();
    let scan = |script: &str| {
        let out = crate::util::in_lab("env")
            .args([&format!("MOONSCAN_HOME={home}"), crate::util::bin(), "-n", "-p", "80", "--script", script])
            .args(["-oJ", "-", crate::util::TARGET])
            .output()
            .unwrap();
        crate::util::events(&stdout(&out))
    };
    let evs = scan("default");
    assert!(evs.iter().any(|e| e["plugin"] == "http-title"), "the core default plugins ran");
    assert!(!evs.iter().any(|e| e["plugin"] == "demo:web-probe"), "{evs:?}");
    let evs = scan("demo:web-probe");
    assert!(evs.iter().any(|e| e["plugin"] == "demo:web-probe" && e["title"] == "untrusted plugin ran"), "{evs:?}");
}

/// A data folder (or a folder in it) that another user owns, or that its
/// group or others may write, is refused by `pack` and by scans alike.
#[test]
fn a_data_folder_another_user_could_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let home = env.home.path();
    fs::create_dir_all(home.join("trusted")).unwrap();
    let refused = |needle: &str| {
        for args in [&["pack", "list"][..], &["--script-help", "banner"][..]] {
            let o = env.run(args);
            let err = stderr(&o);
            assert_ne!(o.status.code(), Some(0), "{args:?} ran with the data folder {needle}");
            assert!(err.contains(needle) && err.contains("only you can write"), "{args:?}: {err}");
        }
    };
    fs::set_permissions(home.join("trusted"), fs::Permissions::from_mode(0o777)).unwrap();
    refused("can be written by its group or others (mode 777)");
    fs::set_permissions(home.join("trusted"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(home, fs::Permissions::from_mode(0o775)).unwrap();
    refused("can be written by its group or others (mode 775)");
    fs::set_permissions(home, fs::Permissions::from_mode(0o755)).unwrap();
    // scripts/test.sh runs the tests as root, which may give a folder away.
    std::os::unix::fs::chown(home, Some(65534), None).expect("chown (the tests run as root)");
    refused("belongs to user 65534");
    std::os::unix::fs::chown(home, Some(0), None).unwrap();
    assert_eq!(env.run(&["pack", "list"]).status.code(), Some(0));
}
