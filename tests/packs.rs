//! `moonscan pack`: plugin packs made, signed, verified and installed by the
//! real binary, with MOONSCAN_HOME in a temporary folder. Every hostile pack
//! must be refused with a message naming the problem, and leave nothing in
//! the data folder.
//! What needs the lab or root is in tests/lab/packs.rs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use moonscan::packs::sign;
use moonscan::text::sha256_hex;

use crate::util::{bin, stderr, stdout};

mod common;
use common::*;

/// What only the tests without the lab do with a pack's folders (the rest
/// of `Env` is in tests/packs/common.rs).
impl Env {
    fn s(&self, rel: &str) -> String {
        self.path(rel).to_string_lossy().into_owned()
    }

    /// Everything in DATA/packs (hidden staging folders included).
    fn installed(&self) -> Vec<String> {
        let mut v: Vec<String> = match fs::read_dir(self.home.path().join("packs")) {
            Ok(rd) => rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect(),
            Err(_) => Vec::new(),
        };
        v.sort();
        v
    }

    /// Installing `target` is refused with the needles, and nothing is installed.
    fn install_refused(&self, target: &str, needles: &[&str]) -> String {
        let before = self.installed();
        let e = self.refused(&["pack", "install", target], needles);
        assert_eq!(self.installed(), before, "a refused install left something in the data folder");
        e
    }

    /// pack.yaml replaced by `bytes` and signed (by the library, so even
    /// manifests `pack sign` would refuse get a valid signature).
    fn sign_raw(&self, dir: &str, bytes: &[u8], comment: &str) {
        let sk = sign::load_secret_key(&self.path("key.key"), None).unwrap();
        fs::write(self.path(dir).join("pack.yaml"), bytes).unwrap();
        fs::write(self.path(dir).join("pack.sig"), sign::sign_bytes(&sk, bytes, comment).unwrap()).unwrap();
    }
}

/// A .tar.gz of `entries` (path, type, data, link target), headers written
/// by hand so that hostile paths can be made.
fn tar_gz(path: &Path, entries: &[(String, tar::EntryType, Vec<u8>, &str)]) {
    let f = fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(f, flate2::Compression::default());
    let mut b = tar::Builder::new(gz);
    for (name, kind, data, link) in entries {
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_entry_type(*kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        if !link.is_empty() {
            h.set_link_name(link).unwrap();
        }
        h.set_cksum();
        b.append(&h, data.as_slice()).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap();
}

/// The signed files of pack folder `dir` as tar entries under `demo/`.
fn entries_of(dir: &Path) -> Vec<(String, tar::EntryType, Vec<u8>, &'static str)> {
    let mut v = vec![("demo/".to_string(), tar::EntryType::Directory, Vec::new(), "")];
    for f in ["pack.yaml", "pack.sig", "ssh-software.lua"] {
        v.push((format!("demo/{f}"), tar::EntryType::Regular, fs::read(dir.join(f)).unwrap(), ""));
    }
    v
}

#[test]
fn a_signed_pack_verifies_installs_lists_and_is_removed() {
    let env = setup();
    let out = env.ok(&["pack", "verify", "demo"]);
    assert!(out.contains("pack demo 0.1.0: OK, signed by trusted key"), "{out}");
    // The scaffold's example plugin runs on its recorded banner.
    let o = env
        .cmd(&[
            "plugins",
            "test",
            "ssh-software.lua",
            "--port",
            "22",
            "--service",
            "ssh",
            "--banner-file",
            "tests/ssh-banner.txt",
        ])
        .current_dir(env.path("demo"))
        .output()
        .unwrap();
    assert!(o.status.success() && stdout(&o).contains("OpenSSH_9.2p1"), "{}{}", stdout(&o), stderr(&o));
    let out = env.ok(&["pack", "install", "demo"]);
    assert!(out.contains("installed pack demo 0.1.0 (signed by trusted key"), "{out}");
    let dir = env.home.path().join("packs/demo");
    let mut files: Vec<String> =
        fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    assert_eq!(files, ["pack.sig", "pack.yaml", "ssh-software.lua"], "README.md and tests/ are not installed");
    let list = env.ok(&["pack", "list"]);
    assert!(list.contains("demo") && list.contains("0.1.0") && list.contains("trusted ("), "{list}");
    // The signer is shown by its public key, not only by the ID it claims.
    let public = fs::read_to_string(env.path("key.pub")).unwrap();
    assert!(list.contains(public.lines().nth(1).unwrap().trim()), "{list}");
    env.ok(&["pack", "remove", "demo"]);
    assert!(env.installed().is_empty());
    env.refused(&["pack", "remove", "demo"], &["no pack named demo"]);
}

#[test]
fn a_signed_tarball_installs() {
    let env = setup();
    let tgz = env.path("demo.tar.gz");
    tar_gz(&tgz, &entries_of(&env.path("demo")));
    env.ok(&["pack", "verify", "demo.tar.gz"]);
    env.ok(&["pack", "install", "demo.tar.gz"]);
    assert_eq!(env.installed(), ["demo"]);
}

#[test]
fn a_plugin_changed_after_signing_is_refused() {
    let env = setup();
    let f = env.path("demo/ssh-software.lua");
    let mut b = fs::read(&f).unwrap();
    let i = b.len() - 3;
    b[i] ^= 0x20;
    fs::write(&f, b).unwrap();
    env.install_refused("demo", &["ssh-software.lua: sha256 mismatch"]);
}

#[test]
fn a_second_signature_appended_is_refused() {
    let env = setup();
    env.ok(&["pack", "keygen", "-o", "other"]);
    let sig = fs::read_to_string(env.path("demo/pack.sig")).unwrap();
    env.ok(&["pack", "trust", "add", "other.pub"]);
    // A second valid signature, by another trusted key, appended.
    env.ok(&["pack", "sign", "demo", "--key", "other.key"]);
    let second = fs::read_to_string(env.path("demo/pack.sig")).unwrap();
    fs::write(env.path("demo/pack.sig"), format!("{sig}{second}")).unwrap();
    env.install_refused("demo", &["pack.sig", "holds 2 signatures"]);
}

#[test]
fn a_crlf_rewritten_manifest_fails_the_signature() {
    let env = setup();
    let m = fs::read_to_string(env.path("demo/pack.yaml")).unwrap();
    fs::write(env.path("demo/pack.yaml"), m.replace('\n', "\r\n")).unwrap();
    env.install_refused("demo", &["pack.sig", "does not match pack.yaml's bytes"]);
}

#[test]
fn a_file_the_manifest_does_not_list_is_refused() {
    let env = setup();
    fs::write(env.path("demo/evil.lua"), "return {}").unwrap();
    env.install_refused("demo", &["evil.lua: a file pack.yaml does not list"]);
}

#[test]
fn a_wrong_hash_in_the_manifest_is_refused() {
    let env = setup();
    let m = fs::read_to_string(env.path("demo/pack.yaml")).unwrap();
    let real = sha256_hex(&fs::read(env.path("demo/ssh-software.lua")).unwrap());
    let wrong = m.replace(&real, &"0".repeat(64));
    env.sign_raw("demo", wrong.as_bytes(), "pack:demo version:0.1.0");
    env.install_refused("demo", &["ssh-software.lua: sha256 mismatch", &"0".repeat(64)]);
    // `pack sign` refuses it too, unless asked to update the hashes.
    env.refused(&["pack", "sign", "demo", "--key", "key.key"], &["sha256 mismatch"]);
    env.ok(&["pack", "sign", "demo", "--key", "key.key", "--update-hashes"]);
    env.ok(&["pack", "install", "demo"]);
}

#[test]
fn dotdot_in_a_manifest_path_is_refused() {
    let env = setup();
    fs::write(env.path("secret.lua"), "return {}").unwrap();
    let m = fs::read_to_string(env.path("demo/pack.yaml")).unwrap();
    let h = sha256_hex(b"return {}");
    let bad = format!("{m}  - file: ../secret.lua\n    sha256: {h}\n");
    env.sign_raw("demo", bad.as_bytes(), "pack:demo version:0.1.0");
    env.install_refused("demo", &["../secret.lua", "contains '..'"]);
}

#[test]
fn dotdot_in_a_tar_entry_is_refused() {
    let env = setup();
    let mut entries = entries_of(&env.path("demo"));
    entries.push(("demo/../../escaped.lua".into(), tar::EntryType::Regular, b"x".to_vec(), ""));
    tar_gz(&env.path("bad.tar.gz"), &entries);
    env.install_refused("bad.tar.gz", &["bad.tar.gz", "demo/../../escaped.lua", "the path contains '..'"]);
    assert!(!env.work.path().parent().unwrap().join("escaped.lua").exists());
}

#[test]
fn a_symlink_pointing_outside_is_refused() {
    let env = setup();
    // A listed file that is a link to a file outside the pack with the same bytes.
    let f = env.path("demo/ssh-software.lua");
    fs::rename(&f, env.path("outside.lua")).unwrap();
    std::os::unix::fs::symlink(env.path("outside.lua"), &f).unwrap();
    env.install_refused("demo", &["ssh-software.lua: a symbolic link"]);
    fs::remove_file(&f).unwrap();
    fs::rename(env.path("outside.lua"), &f).unwrap();
    // An unlisted link (to a folder outside) anywhere in the pack.
    std::os::unix::fs::symlink("/etc", env.path("demo/tests/etc")).unwrap();
    env.install_refused("demo", &["tests/etc: a symbolic link"]);
    fs::remove_file(env.path("demo/tests/etc")).unwrap();
    // And in a tarball.
    let mut entries = entries_of(&env.path("demo"));
    entries.push(("demo/passwd.lua".into(), tar::EntryType::Symlink, Vec::new(), "/etc/passwd"));
    tar_gz(&env.path("link.tar.gz"), &entries);
    env.install_refused("link.tar.gz", &["demo/passwd.lua", "a symbolic link"]);
    let mut entries = entries_of(&env.path("demo"));
    entries.push(("demo/hard.lua".into(), tar::EntryType::Link, Vec::new(), "/etc/passwd"));
    tar_gz(&env.path("hard.tar.gz"), &entries);
    env.install_refused("hard.tar.gz", &["demo/hard.lua", "a hard link"]);
}

#[test]
fn a_tar_bomb_and_too_many_files_are_refused() {
    let env = setup();
    let mut entries = entries_of(&env.path("demo"));
    entries.push(("demo/tests/zeros".into(), tar::EntryType::Regular, vec![0u8; 20 << 20], ""));
    tar_gz(&env.path("bomb.tar.gz"), &entries);
    assert!(fs::metadata(env.path("bomb.tar.gz")).unwrap().len() < 200_000, "the bomb is small compressed");
    env.install_refused("bomb.tar.gz", &["bomb.tar.gz", "demo/tests/zeros", "size cap"]);
    let mut entries = entries_of(&env.path("demo"));
    for i in 0..1200 {
        entries.push((format!("demo/tests/{i}"), tar::EntryType::Regular, Vec::new(), ""));
    }
    tar_gz(&env.path("many.tar.gz"), &entries);
    env.install_refused("many.tar.gz", &["many.tar.gz", "more than 1000 entries (file count cap)"]);
    // The same caps hold for a folder.
    for i in 0..1000 {
        fs::write(env.path(&format!("demo/tests/{i}")), "").unwrap();
    }
    env.install_refused("demo", &["file count cap"]);
}

#[test]
fn billion_laughs_and_deep_nesting_in_pack_yaml_are_refused() {
    let env = setup();
    let mut laughs = String::from(
        "name: demo\nlol0: &l0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for i in 1..10 {
        let prev = format!("*l{}", i - 1);
        laughs.push_str(&format!("lol{i}: &l{i} [{}]\n", [prev.as_str(); 10].join(",")));
    }
    env.sign_raw("demo", laughs.as_bytes(), "pack:demo version:0.1.0");
    env.install_refused("demo", &["pack.yaml", "line 2", "anchors and aliases"]);
    let deep = format!("name: demo\nplugins: {}{}\n", "[".repeat(10_000), "]".repeat(10_000));
    env.sign_raw("demo", deep.as_bytes(), "pack:demo version:0.1.0");
    env.install_refused("demo", &["pack.yaml", "nested deeper than the limit"]);
    let dashes = format!("name: demo\nplugins:\n{}x\n", "- ".repeat(10_000));
    env.sign_raw("demo", dashes.as_bytes(), "pack:demo version:0.1.0");
    env.install_refused("demo", &["pack.yaml", "nested deeper than the limit"]);
    // Unsigned, it is refused before the signature is even looked at.
    fs::remove_file(env.path("demo/pack.sig")).unwrap();
    env.refused(&["pack", "verify", "demo", "--allow-unsigned"], &["nested deeper than the limit"]);
}

#[test]
fn a_downgrade_needs_the_flag() {
    let env = setup();
    let m = fs::read_to_string(env.path("demo/pack.yaml")).unwrap();
    fs::write(env.path("demo/pack.yaml"), m.replace("version: 0.1.0", "version: 0.2.0")).unwrap();
    env.ok(&["pack", "sign", "demo", "--key", "key.key"]);
    env.ok(&["pack", "install", "demo"]);
    fs::write(env.path("demo/pack.yaml"), &m).unwrap();
    env.ok(&["pack", "sign", "demo", "--key", "key.key"]);
    env.refused(&["pack", "install", "demo"], &["0.1.0 is older than the installed 0.2.0", "--allow-downgrade"]);
    assert!(fs::read_to_string(env.home.path().join("packs/demo/pack.yaml")).unwrap().contains("version: 0.2.0"));
    assert_eq!(env.installed(), ["demo"]);
    let out = env.ok(&["pack", "install", "demo", "--allow-downgrade"]);
    assert!(out.contains("replacing 0.2.0"), "{out}");
    assert!(fs::read_to_string(env.home.path().join("packs/demo/pack.yaml")).unwrap().contains("version: 0.1.0"));
    assert_eq!(env.installed(), ["demo"]);
}

#[test]
fn an_untrusted_key_is_refused() {
    let env = setup();
    env.ok(&["pack", "keygen", "-o", "stranger"]);
    env.ok(&["pack", "sign", "demo", "--key", "stranger.key"]);
    let id = fs::read_to_string(env.path("stranger.pub"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_string();
    env.install_refused("demo", &["pack.sig", &format!("signed by key {id}, which is not in the trust store")]);
    let out = env.ok(&["pack", "install", "demo", "--allow-unsigned"]);
    assert!(out.contains("UNTRUSTED"), "{out}");
    let list = env.ok(&["pack", "list"]);
    assert!(list.contains(&format!("untrusted ({id})")), "{list}");
    // Removing a trusted key makes packs it signed untrusted.
    let keys = env.ok(&["pack", "trust", "list"]);
    assert!(keys.contains("1 trusted key(s)"), "{keys}");
    let own = keys.split_whitespace().next().unwrap().to_string();
    env.ok(&["pack", "trust", "remove", &own]);
    env.ok(&["pack", "sign", "demo", "--key", "key.key"]);
    env.refused(&["pack", "verify", "demo"], &["not in the trust store"]);
}

#[test]
fn a_lockfile_mismatch_is_refused() {
    let env = setup();
    env.ok(&["pack", "install", "demo"]);
    env.ok(&["pack", "lock"]);
    let lock = fs::read_to_string(env.path("moonscan.lock")).unwrap();
    assert!(lock.contains("name: demo") && lock.contains("version: 0.1.0"), "{lock}");
    env.ok(&["pack", "lock", "--check", "moonscan.lock"]);
    // Same version, different bytes.
    let m = fs::read_to_string(env.path("demo/pack.yaml")).unwrap();
    fs::write(env.path("demo/pack.yaml"), m.replace("An example pack", "A changed pack")).unwrap();
    env.ok(&["pack", "sign", "demo", "--key", "key.key"]);
    // The installed version again with other content: said, and only with --force.
    env.install_refused("demo", &["pack demo 0.1.0 is installed with other content", "--force"]);
    env.ok(&["pack", "install", "demo", "--force"]);
    env.refused(&["pack", "lock", "--check", "moonscan.lock"], &["pack demo 0.1.0: pack.yaml's sha256"]);
    // A pinned pack that is gone.
    env.ok(&["pack", "remove", "demo"]);
    env.refused(&["pack", "lock", "--check", "moonscan.lock"], &["pack demo 0.1.0 is pinned but not installed"]);
}

/// Serves `listener` as an SSH server that sends its banner and says no
/// more: each connection (up to 20) stays open until the scanner closes it
/// (or 10 s pass), on a thread of its own.
fn ssh_banner_server(listener: std::net::TcpListener) {
    std::thread::spawn(move || {
        for s in listener.incoming().take(20).flatten() {
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut s = s;
                let _ = s.write_all(b"SSH-2.0-OpenSSH_9.9 lab\r\n");
                let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                // Whatever the scanner sends is read and ignored, to its end.
                let mut buf = [0u8; 1024];
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
}

/// A lock only matters for what a scan selects: a stray moonscan.lock
/// whose pack is not installed (every -sV scan failed on it), or an
/// installed pack that differs from its pin, leaves the scans that select
/// nothing of it working, with a note; a scan that names the left-out
/// pack is refused with why.
#[test]
fn a_lock_only_matters_for_what_a_scan_selects() {
    let env = setup();
    env.ok(&["pack", "install", "demo"]);
    env.ok(&["pack", "lock"]);
    env.ok(&["pack", "remove", "demo"]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    ssh_banner_server(listener);
    let scan = ["-sT", "-sV", "-n", "-p", &port, "127.0.0.1", "-oJ", "-"];
    let o = env.run(&scan);
    assert!(o.status.success(), "a pin of a pack not installed stops no scan: {}", stderr(&o));
    assert!(stderr(&o).contains("pack demo 0.1.0 is pinned but not installed"), "{}", stderr(&o));
    assert!(stdout(&o).contains("\"service\":\"ssh\""), "{}", stdout(&o));

    // Installed again, changed without a new version: left out, and the
    // scan that does not select it goes on.
    let m = fs::read_to_string(env.path("demo/pack.yaml")).unwrap();
    fs::write(env.path("demo/pack.yaml"), m.replace("An example pack", "A changed pack")).unwrap();
    env.ok(&["pack", "sign", "demo", "--key", "key.key"]);
    env.ok(&["pack", "install", "demo"]);
    let o = env.run(&scan);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("pack demo is left out") && stderr(&o).contains("sha256"), "{}", stderr(&o));
    let o = env.run(&[&scan[..], &["--script", "demo:demo-ssh-software"]].concat());
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("names pack demo, left out") && err.contains("moonscan.lock"), "{err}");
    assert!(!stdout(&o).contains("\"type\":\"port\""), "nothing ran: {}", stdout(&o));

    // A packs folder that cannot be read (root reads every folder: a file
    // stands for it) is a note, not the end of every -sV scan.
    fs::remove_dir_all(env.home.path().join("packs")).unwrap();
    fs::write(env.home.path().join("packs"), "not a folder").unwrap();
    let o = env.run(&scan);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("installed packs are not used"), "{}", stderr(&o));
}

/// `core` is the pack name of the plugins that ship with moonscan: no pack
/// may take it.
#[test]
fn the_name_core_is_reserved() {
    let env = setup();
    let m = fs::read_to_string(env.path("demo/pack.yaml")).unwrap();
    let core = m.replace("name: demo\n", "name: core\n");
    assert_ne!(core, m);
    fs::write(env.path("demo/pack.yaml"), &core).unwrap();
    let reserved = ["\"core\" is reserved", "plugins that ship with moonscan", "another name"];
    env.refused(&["pack", "sign", "demo", "--key", "key.key"], &reserved);
    env.refused(&["pack", "sign", "demo", "--key", "key.key", "--update-hashes"], &reserved);
    assert_eq!(fs::read_to_string(env.path("demo/pack.yaml")).unwrap(), core, "pack.yaml is left as it was");
    // Signed anyway, with the trusted comment it needs: still refused.
    env.sign_raw("demo", core.as_bytes(), "pack:core version:0.1.0");
    env.refused(&["pack", "verify", "demo"], &reserved);
    env.refused(&["pack", "verify", "demo", "--allow-unsigned"], &reserved);
    env.install_refused("demo", &reserved);
    env.install_refused("demo", &reserved);
    assert!(env.installed().is_empty());
}

#[test]
fn a_tampered_installed_pack_is_reported() {
    let env = setup();
    env.ok(&["pack", "install", "demo"]);
    fs::write(env.home.path().join("packs/demo/ssh-software.lua"), "return {}").unwrap();
    let o = env.run(&["pack", "list"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("BROKEN"), "{}", stdout(&o));
    assert!(stderr(&o).contains("installed pack demo") && stderr(&o).contains("sha256 mismatch"), "{}", stderr(&o));
    env.refused(&["pack", "lock"], &["installed pack demo"]);
}

#[test]
fn an_encrypted_key_needs_its_password() {
    let env = Env::new();
    env.ok(&["pack", "new", "demo"]);
    let out = String::from_utf8(
        env.cmd(&["pack", "keygen", "-o", "enc"]).env("MOONSCAN_KEY_PASSWORD", "s3cret").output().unwrap().stdout,
    )
    .unwrap();
    assert!(out.contains("encrypted with $MOONSCAN_KEY_PASSWORD"), "{out}");
    env.refused(&["pack", "sign", "demo", "--key", "enc.key"], &["encrypted", "MOONSCAN_KEY_PASSWORD"]);
    let o =
        env.cmd(&["pack", "sign", "demo", "--key", "enc.key"]).env("MOONSCAN_KEY_PASSWORD", "wrong").output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot decrypt"), "{}", stderr(&o));
    let o =
        env.cmd(&["pack", "sign", "demo", "--key", "enc.key"]).env("MOONSCAN_KEY_PASSWORD", "s3cret").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    env.ok(&["pack", "trust", "add", "enc.pub"]);
    env.ok(&["pack", "verify", "demo"]);
}

#[test]
fn usage_errors_exit_2() {
    let env = Env::new();
    assert_eq!(env.run(&["pack"]).status.code(), Some(2));
    assert_eq!(env.run(&["pack", "frobnicate"]).status.code(), Some(2));
    assert_eq!(env.run(&["pack", "sign", "demo"]).status.code(), Some(2), "--key is required");
    assert_eq!(env.run(&["pack", "--help"]).status.code(), Some(0));
}

fn minisign() -> Command {
    let found = Command::new("minisign").arg("-v").output().is_ok();
    assert!(found, "the minisign tool is missing: apt-get install minisign (scripts/test.sh installs it)");
    Command::new("minisign")
}

#[test]
fn minisign_verifies_a_signature_moonscan_made() {
    let env = setup();
    let o = minisign()
        .args(["-V", "-m", &env.s("demo/pack.yaml"), "-x", &env.s("demo/pack.sig"), "-p", &env.s("key.pub")])
        .output()
        .unwrap();
    assert!(o.status.success(), "minisign -V: {}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("Trusted comment: pack:demo version:0.1.0"), "{}", stdout(&o));
    // And refuses a changed manifest, as moonscan does.
    fs::write(
        env.path("demo/pack.yaml"),
        fs::read_to_string(env.path("demo/pack.yaml")).unwrap().replace('\n', "\r\n"),
    )
    .unwrap();
    let o = minisign()
        .args(["-V", "-m", &env.s("demo/pack.yaml"), "-x", &env.s("demo/pack.sig"), "-p", &env.s("key.pub")])
        .output()
        .unwrap();
    assert!(!o.status.success());
}

#[test]
fn moonscan_verifies_a_signature_minisign_made() {
    let env = Env::new();
    env.ok(&["pack", "new", "demo"]);
    let o = minisign().args(["-G", "-W", "-p", &env.s("ms.pub"), "-s", &env.s("ms.key")]).output().unwrap();
    assert!(o.status.success(), "minisign -G: {}", stderr(&o));
    let sign = |comment: &str| {
        let o = minisign()
            .args([
                "-S",
                "-s",
                &env.s("ms.key"),
                "-m",
                &env.s("demo/pack.yaml"),
                "-x",
                &env.s("demo/pack.sig"),
                "-t",
                comment,
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "minisign -S: {}", stderr(&o));
    };
    sign("pack:demo version:0.1.0");
    env.refused(&["pack", "verify", "demo"], &["not in the trust store"]);
    // Trusted by its base64 line (the KEYSTRING form).
    let line = fs::read_to_string(env.path("ms.pub")).unwrap().lines().nth(1).unwrap().to_string();
    env.ok(&["pack", "trust", "add", &line]);
    let out = env.ok(&["pack", "verify", "demo"]);
    assert!(out.contains("OK, signed by trusted key"), "{out}");
    // minisign can sign with a key moonscan made, too.
    env.ok(&["pack", "keygen", "-o", "mk"]);
    env.ok(&["pack", "trust", "add", "mk.pub"]);
    let o = minisign()
        .args([
            "-S",
            "-s",
            &env.s("mk.key"),
            "-m",
            &env.s("demo/pack.yaml"),
            "-x",
            &env.s("demo/pack.sig"),
            "-t",
            "pack:demo version:0.1.0",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "minisign -S with moonscan's key: {}", stderr(&o));
    env.ok(&["pack", "verify", "demo"]);
    // A trusted comment that does not name the manifest is refused.
    sign("timestamp:1");
    env.refused(&["pack", "install", "demo"], &["trusted comment is \"timestamp:1\"", "pack:demo version:0.1.0"]);
    assert!(env.installed().is_empty());
}

// Regression: every scan ran the top-level code of every installed plugin,
// selected or not (a slow one delayed every later scan).
#[test]
fn installed_plugins_a_scan_does_not_select_do_not_run() {
    let env = setup();
    // Top-level code that takes 0.15 s of CPU each time the file is run
    // (in few steps: each copies 20 kB, so no build is fast enough to run
    // into the load's step budget first).
    let slow = "local t0 = os.clock() while os.clock() - t0 < 0.15 do local _ = string.rep('x', 20000) end";
    set_plugin(&env, &plugin_src("slow-load", "'safe'", slow));
    env.ok(&["pack", "sign", "demo", "--key", "key.key", "--update-hashes"]);
    let started = std::time::Instant::now();
    env.ok(&["pack", "install", "demo"]);
    assert!(started.elapsed().as_secs_f64() >= 0.15, "installing checks the plugin by running it once");
    let scan = || {
        let started = std::time::Instant::now();
        let o = env.run(&["-sT", "-n", "-p", "9", "--script", "banner", "127.0.0.1"]);
        assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(&o));
        started.elapsed().as_secs_f64()
    };
    // The first scan in a fresh home also caches the core plugins'
    // metadata (each core plugin run once, about 0.1 s in a debug build):
    // the pack's plugin was cached at install, so none of it is slow-load.
    scan();
    for _ in 0..2 {
        let took = scan();
        assert!(took < 0.15, "a scan that does not select slow-load took {took} s");
    }
    // Without the metadata cache (an engine upgrade) one scan runs it once more.
    std::fs::remove_dir_all(env.home.path().join("cache")).unwrap();
    let took = scan();
    assert!((0.15..1.0).contains(&took), "{took} s");
    assert!(scan() < 0.15);
    let listed = env.ok(&["plugins", "list"]);
    assert!(listed.contains("slow-load"), "{listed}");
}

/// Top-level code past the check's 250 ms is refused when the pack is
/// signed (and installed: the same check), so no scan can be made to wait on it.
#[test]
fn a_plugin_whose_top_level_code_runs_long_is_refused() {
    let env = setup();
    let slow = "local t0 = os.clock() while os.clock() - t0 < 1.2 do end";
    set_plugin(&env, &plugin_src("slow-load", "'safe'", slow));
    let started = std::time::Instant::now();
    let o = env.run(&["pack", "sign", "demo", "--key", "key.key", "--update-hashes"]);
    assert!(started.elapsed().as_secs_f64() < 1.0);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("ssh-software.lua: loading it ran"), "{err}");
}

/// A pack's `lib/` module, pinned in pack.yaml (`lib:`), signed with the
/// pack: its plugin requires it (and the module requires the core
/// library's `text`), runs offline and in a scan once installed; a module
/// changed after installing, or a require of a module no library has, is
/// refused naming the file.
#[test]
fn a_pack_with_a_library_module_installs_signed_and_its_plugin_requires_it() {
    let env = setup();
    fs::create_dir(env.path("demo/lib")).unwrap();
    let module = "local text = require 'text'\nlocal M = {}\n\
                  function M.software(b)\n  local p, s = string.match(b, '^SSH%-([%d%.]+)%-([^\\r\\n]+)')\n  \
                  return p, s and text.trim(s)\nend\nreturn M\n";
    fs::write(env.path("demo/lib/sshbanner.lua"), module).unwrap();
    set_plugin(
        &env,
        "local sshbanner = require 'sshbanner'\n\
         return { id = 'demo-ssh-software', description = 'd', categories = { 'discovery', 'safe' },\n\
         ports = { 22 }, services = { 'ssh' },\n\
         run = function(ctx)\n  local proto, software = sshbanner.software(ctx.banner or '')\n  \
         if not software then return nil, 'no SSH banner' end\n  \
         ctx:finding{ title = 'SSH software', data = { protocol = proto, software = software } }\nend }\n",
    );
    let manifest = fs::read_to_string(env.path("demo/pack.yaml")).unwrap();
    fs::write(env.path("demo/pack.yaml"), format!("{manifest}lib:\n  - file: lib/sshbanner.lua\n    sha256: \"\"\n"))
        .unwrap();
    env.ok(&["pack", "sign", "demo", "--key", "key.key", "--update-hashes"]);
    let out = env.ok(&["pack", "verify", "demo"]);
    assert!(out.contains("OK, signed by trusted key"), "{out}");
    let o = env
        .cmd(&["plugins", "test", "ssh-software.lua", "--port", "22", "--service", "ssh", "--banner-file"])
        .arg("tests/ssh-banner.txt")
        .current_dir(env.path("demo"))
        .output()
        .unwrap();
    assert!(
        o.status.success() && stdout(&o).contains("OpenSSH_9.2p1 Debian-2+deb12u3"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    env.ok(&["pack", "install", "demo"]);
    assert!(env.home.path().join("packs/demo/lib/sshbanner.lua").is_file());

    // A scan runs it on a loopback server that sends an SSH banner.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    ssh_banner_server(listener);
    let port = port.to_string();
    let out = env.ok(&["-sT", "-sV", "-n", "-p", &port, "127.0.0.1", "--script", "demo:demo-ssh-software", "-oJ", "-"]);
    let found: Vec<_> = crate::util::events(&out).into_iter().filter(|e| e["type"] == "finding").collect();
    assert_eq!(found.len(), 1, "{out}");
    assert_eq!(found[0]["data"]["software"], "OpenSSH_9.9 lab");

    // Changed after installing: the installed pack no longer verifies.
    fs::write(env.home.path().join("packs/demo/lib/sshbanner.lua"), format!("{module}\n-- changed\n")).unwrap();
    let o = env.run(&["-sT", "-n", "-p", &port, "127.0.0.1", "--script", "demo:demo-ssh-software"]);
    assert!(!o.status.success() && stderr(&o).contains("lib/sshbanner.lua"), "{}", stderr(&o));

    // A module no library holds: refused when signing, naming the file.
    fs::write(env.path("demo/lib/sshbanner.lua"), "local x = require 'nowhere'\nreturn {}\n").unwrap();
    env.refused(
        &["pack", "sign", "demo", "--key", "key.key", "--update-hashes"],
        &["lib/sshbanner.lua: require \"nowhere\": no module lib/nowhere.lua"],
    );
}

/// Second review, case 4: with HOME, MOONSCAN_HOME and XDG_DATA_HOME unset,
/// the data folder is the user's home's (from the password database),
/// never ./.moonscan of a folder another user prepared.
#[test]
fn without_home_the_data_folder_is_never_the_current_folder() {
    let env = Env::new();
    fs::create_dir_all(env.path(".moonscan/packs/planted")).unwrap();
    fs::create_dir_all(env.path(".moonscan/trusted")).unwrap();
    fs::write(env.path(".moonscan/trusted/planted.pub"), "untrusted comment: planted\nRWQ=\n").unwrap();
    let o = env
        .cmd(&["pack", "list"])
        .env_remove("MOONSCAN_HOME")
        .env_remove("HOME")
        .env_remove("XDG_DATA_HOME")
        .output()
        .unwrap();
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(!text.contains("planted"), "./.moonscan was read:\n{text}");
    assert_eq!(o.status.code(), Some(0), "{text}");
}

/// A metadata cache entry edited to make an intrusive plugin `default,
/// safe`: `-sC` does not run it (its own table says otherwise), and says so.
#[test]
fn an_edited_metadata_cache_entry_cannot_make_a_plugin_default() {
    let env = Env::new();
    let dir = env.path("plugins");
    fs::create_dir(&dir).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    fs::write(
        dir.join("login-attempt.lua"),
        format!(
            "return {{ id = 'login-attempt', description = 'Tries logins.', categories = {{ 'intrusive', 'brute' }},\n\
             ports = {{ {port} }}, run = function(ctx) return 'tried a login' end }}\n"
        ),
    )
    .unwrap();
    let dir = dir.to_str().unwrap();
    // Its metadata is cached at its first load.
    env.ok(&["--script-help", "login-attempt", "--plugin-dir", dir]);
    let cache = env.home.path().join("cache/plugin-meta");
    let entries: Vec<PathBuf> = fs::read_dir(&cache).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let text = fs::read_to_string(&entries[0]).unwrap();
    let edited = text.replace(r#"["intrusive","brute"]"#, r#"["default","safe"]"#);
    assert_ne!(edited, text, "{text}");
    fs::write(&entries[0], edited).unwrap();

    let out = env.run(&["-sT", "-Pn", "-n", "-p", &port, "127.0.0.1", "-sC", "--plugin-dir", dir, "-oJ", "-"]);
    drop(listener);
    let evs = crate::util::events(&stdout(&out));
    let ran: Vec<_> = evs.iter().filter(|e| e["plugin"] == "login-attempt" && e["type"] != "error").collect();
    assert!(ran.is_empty(), "the plugin ran: {ran:?}");
    let errors: Vec<_> = evs.iter().filter(|e| e["plugin"] == "login-attempt" && e["type"] == "error").collect();
    assert_eq!(errors.len(), 1, "{}", stdout(&out));
    assert!(errors[0]["message"].as_str().unwrap().contains("does not declare what the plugin was selected by"));
}

/// Folders moonscan makes in its data folder are 0755 whatever the umask:
/// under a umask of 002 a later run must not refuse the folder it made.
#[test]
fn data_folders_made_under_a_lax_umask_are_not_group_writable() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let home = env.home.path().join("data");
    let o = Command::new("sh")
        .args(["-c", "umask 002 && exec \"$0\" --script-help banner"])
        .arg(bin())
        .env("MOONSCAN_HOME", &home)
        .current_dir(env.work.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    for d in ["", "cache", "cache/plugin-meta"] {
        let mode = fs::metadata(home.join(d)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755, "{d}");
    }
    let again = env.cmd(&["--script-help", "banner"]).env("MOONSCAN_HOME", &home).output().unwrap();
    assert!(again.status.success(), "{}", stderr(&again));
}
