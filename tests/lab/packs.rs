//! A pack's plugin in a lab scan: an untrusted plugin cannot pass for a
//! category. The rest of `moonscan pack` needs no lab: tests/packs.rs.

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
