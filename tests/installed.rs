//! One file is the whole scanner: an installed copy of the binary, run
//! from `/` in a mount namespace where the checkout it was built from is
//! out of sight (a tmpfs over it), still detects services and runs the
//! default plugins from the probes and plugins built into it.

use std::path::Path;

use crate::util::*;

#[test]
fn an_installed_copy_scans_with_its_checkout_out_of_sight() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("moonscan");
    std::fs::copy(bin(), &copy).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let checkout = repo();
    assert!(checkout.join("plugins/pack.yaml").exists());
    // A private mount namespace: the tmpfs hides the checkout from this
    // command only; it checks the checkout is gone before it runs the copy.
    let script =
        r#"mount -t tmpfs none "$1" && test ! -e "$1/plugins" && test ! -e "$1/probes" && cd / && shift && exec "$@""#;
    let out = in_lab("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(&checkout)
        .arg(&copy)
        .args(["-n", "-Pn", "-sV", "-sC", "-p", "22,80,6379", TARGET, "-oJ", "-"])
        .env("HOME", &home)
        .env_remove("XDG_CACHE_HOME")
        .env_remove("MOONSCAN_PLUGINS")
        .env_remove("MOONSCAN_PROBES")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", stderr(&out), stdout(&out));
    let evs = events(&stdout(&out));
    let services: Vec<(u64, &str)> = of_type(&evs, "service")
        .iter()
        .map(|s| (s["port"].as_u64().unwrap(), s["service"].as_str().unwrap()))
        .collect();
    for want in [(22, "ssh"), (80, "http"), (6379, "redis")] {
        assert!(services.contains(&want), "{want:?} not in {services:?}\n{}", stderr(&out));
    }
    let scripts: Vec<&str> = of_type(&evs, "script").iter().map(|s| s["plugin"].as_str().unwrap()).collect();
    for want in ["ssh-hostkey", "http-title", "redis-info"] {
        assert!(scripts.contains(&want), "{want} not in {scripts:?}\n{}", stderr(&out));
    }
    // The built-in files were written under the copy's own HOME, not read from the checkout.
    let cache = home.join(".cache/moonscan");
    let written: Vec<String> =
        std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(
        written.iter().any(|n| n.starts_with("plugins-")) && written.iter().any(|n| n.starts_with("probes-")),
        "{written:?}"
    );
    assert!(
        Path::new(&checkout).join("plugins/pack.yaml").exists(),
        "the checkout is still there outside the namespace"
    );
}
