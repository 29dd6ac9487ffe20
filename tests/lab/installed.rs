//! One file is the whole scanner: an installed copy of the binary, run
//! from `/` in a mount namespace where the checkout it was built from is
//! out of sight (a tmpfs over it), still detects services and runs the
//! default plugins from the probes and plugins built into it.

use std::path::Path;

use crate::util::*;

/// Runs `program` with `args` from `/`, in a private mount namespace where
/// a tmpfs hides the checkout (checked gone before it runs), with `home` as
/// HOME and no folder given through the environment.
fn run_hidden(program: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    let checkout = repo();
    assert!(checkout.join("plugins/pack.yaml").exists());
    let script =
        r#"mount -t tmpfs none "$1" && test ! -e "$1/plugins" && test ! -e "$1/probes" && cd / && shift && exec "$@""#;
    let out = in_lab("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(&checkout)
        .arg(program)
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_CACHE_HOME")
        .env_remove("MOONSCAN_PLUGINS")
        .env_remove("MOONSCAN_PROBES")
        .output()
        .unwrap();
    assert!(checkout.join("plugins/pack.yaml").exists(), "the checkout is still there outside the namespace");
    out
}

/// A -sV -sC scan of the lab's ssh, web and redis ports: each named, and
/// each one's default plugin run.
fn scans_and_names(out: &std::process::Output) {
    assert!(out.status.success(), "{}\n{}", stderr(out), stdout(out));
    let evs = events(&stdout(out));
    let services: Vec<(u64, &str)> = of_type(&evs, "service")
        .iter()
        .map(|s| (s["port"].as_u64().unwrap(), s["service"].as_str().unwrap()))
        .collect();
    for want in [(22, "ssh"), (80, "http"), (6379, "redis")] {
        assert!(services.contains(&want), "{want:?} not in {services:?}\n{}", stderr(out));
    }
    let scripts: Vec<&str> = of_type(&evs, "script").iter().map(|s| s["plugin"].as_str().unwrap()).collect();
    for want in ["ssh-hostkey", "http-title", "redis-info"] {
        assert!(scripts.contains(&want), "{want} not in {scripts:?}\n{}", stderr(out));
    }
}

const SCAN: [&str; 10] = ["-n", "-Pn", "-sV", "-sC", "-p", "22,80,6379", TARGET, "-oJ", "-", "--reason"];

#[test]
fn an_installed_copy_scans_with_its_checkout_out_of_sight() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("moonscan");
    std::fs::copy(bin(), &copy).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    scans_and_names(&run_hidden(&copy, &home, &SCAN));
    // The built-in files were written under the copy's own HOME, not read from the checkout.
    let cache = home.join(".cache/moonscan");
    let written: Vec<String> =
        std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(
        written.iter().any(|n| n.starts_with("plugins-")) && written.iter().any(|n| n.starts_with("probes-")),
        "{written:?}"
    );
}

/// The Debian package (scripts/deb.sh, cargo-deb; scripts/test.sh installs
/// cargo-deb) holds the scanner, its man pages and completions, and its
/// control file says what it needs; unpacked, its binary scans from `/`
/// with the checkout out of sight.
#[test]
fn the_debian_package_holds_a_working_scanner() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let made = std::process::Command::new(repo().join("scripts/deb.sh"))
        .args(["--profile", "dev", "--output"])
        .arg(dir.path())
        .output()
        .expect("scripts/deb.sh runs");
    assert!(made.status.success(), "{}{}", stdout(&made), stderr(&made));
    let deb = dir.path().join(format!("moonscan_{}-1_amd64.deb", env!("CARGO_PKG_VERSION")));
    assert!(deb.exists(), "{}", stdout(&made));
    let field = |name: &str| {
        let out = std::process::Command::new("dpkg-deb").arg("-f").arg(&deb).arg(name).output().unwrap();
        stdout(&out).trim().to_string()
    };
    assert_eq!(field("Package"), "moonscan");
    assert!(field("Depends").contains("libc6"), "{}", field("Depends"));
    assert_eq!(field("Recommends"), "nmap");
    let root = dir.path().join("root");
    let x = std::process::Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root).status().unwrap();
    assert!(x.success());
    for f in [
        "usr/bin/moonscan",
        "usr/share/man/man1/moonscan.1.gz",
        "usr/share/man/man1/moonscan-pack.1.gz",
        "usr/share/bash-completion/completions/moonscan",
        "usr/share/zsh/vendor-completions/_moonscan",
        "usr/share/fish/vendor_completions.d/moonscan.fish",
        "usr/share/doc/moonscan/copyright",
    ] {
        assert!(root.join(f).exists(), "{f} is not in the package");
    }
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    scans_and_names(&run_hidden(&root.join("usr/bin/moonscan"), &home, &SCAN));
}
