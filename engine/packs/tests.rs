use std::fs;
use std::path::{Path, PathBuf};

use super::*;

/// The checkout's plugin folder: the core library packs' plugins require
/// from after their own (the files built into moonscan).
fn core_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins")
}

fn default_core() -> Result<Arc<plugins::Library>> {
    plugins::core_library(&core_dir())
}

fn verify(path: &Path, trust: &Trust) -> Result<VerifiedPack> {
    super::verify(path, trust, &core_dir())
}

fn sign_dir(dir: &Path, sk: &minisign::SecretKey, update_hashes: bool) -> Result<SignReport> {
    super::sign_dir(dir, sk, update_hashes, &core_dir())
}

fn installed(data_dir: &Path) -> Result<Vec<InstalledPack>> {
    super::installed(data_dir, &core_dir())
}

fn scan_installed(data_dir: &Path) -> Result<Vec<(String, Result<InstalledPack>)>> {
    super::scan_installed(data_dir, &core_dir())
}

const PLUGIN: &str = r#"return {
  id = "ID",
  description = "A test plugin.",
  categories = { "safe" },
  ports = { 22 },
  run = function(ctx) end,
}
"#;

fn keypair() -> (minisign::PublicKey, minisign::SecretKey) {
    let kp = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    (kp.pk, kp.sk)
}

fn trust_of(pk: &minisign::PublicKey) -> Trust {
    Trust { keys: vec![TrustedKey::new(pk.clone())], allow_unsigned: false }
}

fn manifest_text(name: &str, version: &str, files: &[(&str, &str)]) -> String {
    let mut s = format!(
        "name: {name}\nversion: {version}\nengine: \">=0.1\"\ndescription: Test pack.\nauthors: [Tester]\nlicense: MIT\nplugins:\n"
    );
    for (f, h) in files {
        s.push_str(&format!("  - file: {f}\n    sha256: {h}\n"));
    }
    s
}

/// A pack folder `dir` with one plugin, signed by `sk` when given.
fn make_pack(dir: &Path, name: &str, version: &str, sk: Option<&minisign::SecretKey>) {
    fs::create_dir_all(dir).unwrap();
    let src = PLUGIN.replace("ID", &format!("{name}-p"));
    fs::write(dir.join("p.lua"), &src).unwrap();
    let m = manifest_text(name, version, &[("p.lua", &sha256_hex(src.as_bytes()))]);
    fs::write(dir.join("pack.yaml"), &m).unwrap();
    if let Some(sk) = sk {
        sign_dir(dir, sk, false).unwrap();
    }
}

fn err_of<T: std::fmt::Debug>(r: Result<T>) -> String {
    r.expect_err("must be refused").to_string()
}

#[test]
fn a_signed_pack_verifies_and_names_its_signer() {
    let t = tempfile::tempdir().unwrap();
    let (pk, sk) = keypair();
    let dir = t.path().join("demo");
    make_pack(&dir, "demo", "1.0.0", Some(&sk));
    let v = verify(&dir, &trust_of(&pk)).unwrap();
    assert!(v.trusted);
    assert_eq!(v.signer.as_deref(), Some(sign::key_id(pk.keynum()).as_str()));
    assert_eq!(v.plugins[0].meta.id, "demo-p");
    assert_eq!(v.manifest_sha256, sha256_hex(&fs::read(dir.join("pack.yaml")).unwrap()));
    let sig = fs::read_to_string(dir.join("pack.sig")).unwrap();
    assert!(sig.contains("trusted comment: pack:demo version:1.0.0\n"), "{sig}");
}

#[test]
fn unsigned_and_untrusted_packs_need_allow_unsigned() {
    let t = tempfile::tempdir().unwrap();
    let (_, sk) = keypair();
    let (other, _) = keypair();
    let dir = t.path().join("demo");
    make_pack(&dir, "demo", "1.0.0", Some(&sk));
    let e = err_of(verify(&dir, &trust_of(&other)));
    assert!(e.contains("not in the trust store"), "{e}");
    let v = verify(&dir, &Trust { allow_unsigned: true, ..trust_of(&other) }).unwrap();
    assert!(!v.trusted);
    fs::remove_file(dir.join("pack.sig")).unwrap();
    let e = err_of(verify(&dir, &trust_of(&other)));
    assert!(e.contains("not signed"), "{e}");
    assert!(verify(&dir, &Trust { allow_unsigned: true, keys: vec![] }).is_ok());
}

#[test]
fn the_signature_covers_the_exact_bytes() {
    let t = tempfile::tempdir().unwrap();
    let (pk, sk) = keypair();
    let dir = t.path().join("demo");
    make_pack(&dir, "demo", "1.0.0", Some(&sk));
    let m = fs::read_to_string(dir.join("pack.yaml")).unwrap();
    fs::write(dir.join("pack.yaml"), m.replace('\n', "\r\n")).unwrap();
    let e = err_of(verify(&dir, &trust_of(&pk)));
    assert!(e.contains("does not match pack.yaml's bytes"), "{e}");
    // A trusted key's bad signature is refused even when unsigned packs are allowed.
    let e = err_of(verify(&dir, &Trust { allow_unsigned: true, ..trust_of(&pk) }));
    assert!(e.contains("does not match"), "{e}");
}

#[test]
fn one_signature_only() {
    let t = tempfile::tempdir().unwrap();
    let (pk, sk) = keypair();
    let dir = t.path().join("demo");
    make_pack(&dir, "demo", "1.0.0", Some(&sk));
    let sig = fs::read_to_string(dir.join("pack.sig")).unwrap();
    fs::write(dir.join("pack.sig"), format!("{sig}{sig}")).unwrap();
    let e = err_of(verify(&dir, &trust_of(&pk)));
    assert!(e.contains("holds 2 signatures"), "{e}");
    fs::write(dir.join("pack.sig"), format!("{sig}extra\n")).unwrap();
    let e = err_of(verify(&dir, &trust_of(&pk)));
    assert!(e.contains("5 lines"), "{e}");
    fs::write(dir.join("pack.sig"), sig.replace('\n', "\r\n")).unwrap();
    assert!(err_of(verify(&dir, &trust_of(&pk))).contains("carriage returns"));
}

#[test]
fn the_trusted_comment_must_name_the_manifest() {
    let t = tempfile::tempdir().unwrap();
    let (pk, sk) = keypair();
    let dir = t.path().join("demo");
    make_pack(&dir, "demo", "1.0.0", None);
    let bytes = fs::read(dir.join("pack.yaml")).unwrap();
    let sig = sign::sign_bytes(&sk, &bytes, "pack:demo version:9.9.9").unwrap();
    fs::write(dir.join("pack.sig"), sig).unwrap();
    let e = err_of(verify(&dir, &trust_of(&pk)));
    assert!(e.contains("trusted comment") && e.contains("pack:demo version:1.0.0"), "{e}");
}

#[test]
fn changed_missing_and_unlisted_files_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let (pk, sk) = keypair();
    let dir = t.path().join("demo");
    make_pack(&dir, "demo", "1.0.0", Some(&sk));
    let trust = trust_of(&pk);
    fs::write(dir.join("extra.lua"), "x").unwrap();
    let e = err_of(verify(&dir, &trust));
    assert!(e.contains("extra.lua: a file pack.yaml does not list"), "{e}");
    fs::remove_file(dir.join("extra.lua")).unwrap();
    fs::create_dir(dir.join("sub")).unwrap();
    assert!(err_of(verify(&dir, &trust)).contains("sub/: a folder"));
    fs::remove_dir(dir.join("sub")).unwrap();
    // README.md and tests/ are allowed in a pack being verified, not when installed.
    fs::create_dir(dir.join("tests")).unwrap();
    fs::write(dir.join("tests/banner.txt"), "SSH-2.0-x\r\n").unwrap();
    fs::write(dir.join("README.md"), "hi").unwrap();
    let v = verify(&dir, &trust).unwrap();
    assert_eq!(v.extras, ["README.md", "tests/banner.txt"]);
    assert!(err_of(verify_root(&dir, SigMode::Check(&trust), false, false, None, &default_core().unwrap()))
        .contains("README.md"));
    let mut src = fs::read(dir.join("p.lua")).unwrap();
    src[0] ^= 1;
    fs::write(dir.join("p.lua"), &src).unwrap();
    let e = err_of(verify(&dir, &trust));
    assert!(e.contains("p.lua: sha256 mismatch"), "{e}");
    fs::remove_file(dir.join("p.lua")).unwrap();
    assert!(err_of(verify(&dir, &trust)).contains("p.lua: listed in pack.yaml but missing"));
}

#[test]
fn links_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("demo");
    make_pack(&dir, "demo", "1.0.0", None);
    let trust = Trust { allow_unsigned: true, keys: vec![] };
    let real = t.path().join("outside.lua");
    fs::rename(dir.join("p.lua"), &real).unwrap();
    std::os::unix::fs::symlink(&real, dir.join("p.lua")).unwrap();
    let e = err_of(verify(&dir, &trust));
    assert!(e.contains("p.lua: a symbolic link"), "{e}");
    fs::remove_file(dir.join("p.lua")).unwrap();
    fs::rename(&real, dir.join("p.lua")).unwrap();
    std::os::unix::fs::symlink("/etc", dir.join("tests")).unwrap();
    let e = err_of(verify(&dir, &trust));
    assert!(e.contains("tests: a symbolic link"), "{e}");
}

#[test]
fn manifest_fields_are_checked() {
    let ok = manifest_text("demo", "1.0.0", &[("p.lua", &"a".repeat(64))]);
    assert!(manifest::parse(ok.as_bytes(), "pack.yaml", true).is_ok());
    for (text, needle) in [
        (ok.replace("name: demo", "name: Demo"), "name \"Demo\""),
        (ok.replace("name: demo", "name: -demo"), "name \"-demo\""),
        (ok.replace("version: 1.0.0", "version: 1.0"), "not a semantic version"),
        (ok.replace(">=0.1", ">=9"), "needs engine >=9"),
        (ok.replace(">=0.1", "soon"), "not a semver requirement"),
        (format!("{ok}homepage: x\n"), "unknown field `homepage`"),
        (ok.replace("p.lua", "../p.lua"), "contains '..'"),
        (ok.replace("p.lua", "a/../../p.lua"), "contains '..'"),
        (ok.replace("p.lua", "/etc/p.lua"), "is absolute"),
        (ok.replace("p.lua", ".hidden.lua"), "hidden"),
        (ok.replace("p.lua", "p.txt"), "must end in .lua"),
        (ok.replace("p.lua", "pack.yaml"), "cannot be listed"),
        (ok.replace(&"a".repeat(64), &"A".repeat(64)), "64 lowercase hex"),
        (format!("{ok}  - file: p.lua\n    sha256: {}\n", "a".repeat(64)), "listed twice"),
        (ok.replace("authors: [Tester]", "authors: []"), "authors lists nobody"),
    ] {
        let e = err_of(manifest::parse(text.as_bytes(), "pack.yaml", true));
        assert!(e.contains(needle), "{needle}: {e}");
    }
}

#[test]
fn billion_laughs_and_deep_nesting_are_refused_not_expanded() {
    let laughs = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n\
                  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n\
                  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n\
                  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n\
                  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";
    let e = err_of(manifest::parse(laughs.as_bytes(), "pack.yaml", true));
    assert!(e.contains("line 1: YAML anchors and aliases"), "{e}");
    let flow = format!("name: {}{}\n", "[".repeat(10_000), "]".repeat(10_000));
    let e = err_of(manifest::parse(flow.as_bytes(), "pack.yaml", true));
    assert!(e.contains("nested deeper than the limit"), "{e}");
    let dashes = format!("plugins:\n{}x\n", "- ".repeat(10_000));
    let e = err_of(manifest::parse(dashes.as_bytes(), "pack.yaml", true));
    assert!(e.contains("nested deeper than the limit"), "{e}");
    let mut block = String::new();
    for i in 0..200 {
        block.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
    }
    let e = err_of(manifest::parse(block.as_bytes(), "pack.yaml", true));
    assert!(e.contains("nested deeper than the limit"), "{e}");
    let big = format!("description: {}\n", "x".repeat(70_000));
    assert!(err_of(manifest::parse(big.as_bytes(), "pack.yaml", true)).contains("65536-byte limit"));
    assert!(err_of(manifest::parse(b"name: !!str x\n", "pack.yaml", true)).contains("tags"));
}

#[test]
fn ordinary_yaml_is_not_mistaken_for_aliases() {
    let text = "# comment with & and *\nname: demo\nversion: 1.0.0\nengine: '>=0.1'\n\
                description: |\n  A pack that doesn't * bite & so on.\n  *really*\n\
                authors: [\"A & B\", 'it''s me', C*D]\nlicense: MIT # or *not*\n\
                plugins: [ {file: p.lua, sha256: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"} ]\n";
    let m = manifest::parse(text.as_bytes(), "pack.yaml", true).unwrap();
    assert_eq!(m.authors, ["A & B", "it's me", "C*D"]);
    assert!(m.description.contains("*really*"));
}

#[test]
fn the_core_pack_in_the_repository_verifies_unsigned() {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/plugins"));
    let unsigned = Trust { allow_unsigned: true, keys: vec![] };
    let v = verify_root(dir, SigMode::Check(&unsigned), true, true, None, &default_core().unwrap()).unwrap();
    assert_eq!(v.manifest.name, CORE);
    assert!(!v.trusted && v.signer.is_none());
    assert_eq!(v.plugins.len(), v.manifest.plugins.len());
    // The name is reserved: as a pack to verify, plugins/ itself is refused.
    let e = err_of(verify(dir, &unsigned));
    assert!(e.contains("\"core\" is reserved") && e.contains("plugins that ship with moonscan"), "{e}");
}

#[test]
fn the_name_core_is_reserved() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("home");
    let (pk, sk) = keypair();
    let trust = trust_of(&pk);
    let dir = t.path().join("core");
    // Unsigned, and with a stale hash that --update-hashes would rewrite.
    make_pack(&dir, "core", "1.0.0", None);
    let yaml = fs::read_to_string(dir.join("pack.yaml")).unwrap();
    let h = sha256_hex(&fs::read(dir.join("p.lua")).unwrap());
    let stale = yaml.replace(&h, &"0".repeat(64));
    fs::write(dir.join("pack.yaml"), &stale).unwrap();
    let reserved = |e: String| assert!(e.contains("\"core\" is reserved") && e.contains("another name"), "{e}");
    // sign, with or without --update-hashes: refused, pack.yaml untouched, no pack.sig.
    reserved(err_of(sign_dir(&dir, &sk, true)));
    reserved(err_of(sign_dir(&dir, &sk, false)));
    assert_eq!(fs::read_to_string(dir.join("pack.yaml")).unwrap(), stale);
    assert!(!dir.join("pack.sig").exists());
    // verify: refused even when signed by a trusted key with the right comment.
    fs::write(dir.join("pack.yaml"), &yaml).unwrap();
    fs::write(dir.join("pack.sig"), sign::sign_bytes(&sk, yaml.as_bytes(), "pack:core version:1.0.0").unwrap())
        .unwrap();
    reserved(err_of(verify(&dir, &trust)));
    reserved(err_of(verify(&dir, &Trust { allow_unsigned: true, keys: vec![] })));
    // install: refused for a VerifiedPack that says core, whatever made it.
    let other = t.path().join("other");
    make_pack(&other, "other", "1.0.0", Some(&sk));
    let mut v = verify(&other, &trust).unwrap();
    v.manifest.name = CORE.into();
    reserved(err_of(install(&data, &v, false, false)));
    assert!(!packs_dir(&data).join("core").exists());
    // A folder DATA/packs/core (copied there by hand) is an error naming it,
    // and can still be removed.
    fs::create_dir_all(packs_dir(&data)).unwrap();
    fs::remove_file(dir.join("pack.sig")).unwrap();
    copy_dir(&dir, &packs_dir(&data).join("core"));
    let all = scan_installed(&data).unwrap();
    assert_eq!(all.len(), 1);
    reserved(err_of(all.into_iter().next().unwrap().1));
    remove(&data, "core").unwrap();
    assert!(installed(&data).unwrap().is_empty());
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn tar_gz(path: &Path, entries: &[(&str, tar::EntryType, &[u8], &str)]) {
    let f = fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(f, flate2::Compression::default());
    let mut b = tar::Builder::new(gz);
    for (name, kind, data, link) in entries {
        let mut h = tar::Header::new_gnu();
        // Written by hand: the tar crate refuses to set a path with '..'.
        let raw = &mut h.as_old_mut().name;
        raw[..name.len()].copy_from_slice(name.as_bytes());
        h.set_entry_type(*kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        if !link.is_empty() {
            h.set_link_name(link).unwrap();
        }
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap();
}

fn pack_entries(dir: &Path) -> Vec<(String, Vec<u8>)> {
    ["pack.yaml", "pack.sig", "p.lua"]
        .iter()
        .filter(|f| dir.join(f).exists())
        .map(|f| (format!("demo/{f}"), fs::read(dir.join(f)).unwrap()))
        .collect()
}

#[test]
fn tarballs_extract_under_caps() {
    use tar::EntryType as T;
    let t = tempfile::tempdir().unwrap();
    let (pk, sk) = keypair();
    let dir = t.path().join("demo");
    make_pack(&dir, "demo", "1.0.0", Some(&sk));
    let files = pack_entries(&dir);
    let mut ok: Vec<(&str, T, &[u8], &str)> =
        files.iter().map(|(n, d)| (n.as_str(), T::Regular, d.as_slice(), "")).collect();
    ok.insert(0, ("demo/", T::Directory, b"", ""));
    let tgz = t.path().join("ok.tar.gz");
    tar_gz(&tgz, &ok);
    let v = verify(&tgz, &trust_of(&pk)).unwrap();
    assert!(v.trusted);
    for (extra, needle) in [
        (("demo/../evil.lua", T::Regular, &b"x"[..], ""), "the path contains '..'"),
        (("/etc/evil.lua", T::Regular, &b"x"[..], ""), "absolute"),
        (("demo/l.lua", T::Symlink, &b""[..], "/etc/passwd"), "a symbolic link"),
        (("demo/h.lua", T::Link, &b""[..], "demo/p.lua"), "a hard link"),
        (("demo/dev", T::Char, &b""[..], ""), "a device file"),
        (("demo/fifo", T::Fifo, &b""[..], ""), "a FIFO"),
        (("demo/p.lua", T::Regular, &b"again"[..], ""), "appears twice"),
    ] {
        let mut entries = ok.clone();
        entries.push(extra);
        let bad = t.path().join("bad.tar.gz");
        tar_gz(&bad, &entries);
        let e = err_of(verify(&bad, &trust_of(&pk)));
        assert!(e.contains(needle) && e.contains("bad.tar.gz"), "{needle}: {e}");
    }
    // A bomb: 17 MiB of zeros compresses to a few KiB.
    let zeros = vec![0u8; 17 << 20];
    let mut entries = ok.clone();
    entries.push(("demo/tests/zeros", T::Regular, &zeros, ""));
    let bomb = t.path().join("bomb.tar.gz");
    tar_gz(&bomb, &entries);
    assert!(fs::metadata(&bomb).unwrap().len() < 100_000);
    let e = err_of(verify(&bomb, &trust_of(&pk)));
    assert!(e.contains("size cap"), "{e}");
    // Too many files.
    let names: Vec<String> = (0..1001).map(|i| format!("demo/tests/{i}")).collect();
    let mut entries = ok.clone();
    entries.extend(names.iter().map(|n| (n.as_str(), T::Regular, &b""[..], "")));
    let many = t.path().join("many.tar.gz");
    tar_gz(&many, &entries);
    let e = err_of(verify(&many, &trust_of(&pk)));
    assert!(e.contains("file count cap"), "{e}");
    fs::write(t.path().join("plain.tar.gz"), b"not gzip").unwrap();
    assert!(err_of(verify(&t.path().join("plain.tar.gz"), &trust_of(&pk))).contains("no gzip header"));
}

#[test]
fn install_upgrade_downgrade_remove() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("home");
    let (pk, sk) = keypair();
    let trust = trust_of(&pk);
    let v1 = t.path().join("v1");
    let v2 = t.path().join("v2");
    make_pack(&v1, "demo", "1.0.0", Some(&sk));
    make_pack(&v2, "demo", "1.2.0", Some(&sk));
    fs::write(v2.join("README.md"), "not installed").unwrap();
    install(&data, &verify(&v1, &trust).unwrap(), false, false).unwrap();
    let r = install(&data, &verify(&v2, &trust).unwrap(), false, false).unwrap();
    assert_eq!(r.replaced.as_deref(), Some("1.0.0"));
    assert!(!r.dir.join("README.md").exists());
    let e = err_of(install(&data, &verify(&v1, &trust).unwrap(), false, false));
    assert!(e.contains("refusing to downgrade") && e.contains("`install(allow_downgrade)`"), "{e}");
    // Installed packs are re-verified against the trust store.
    fs::create_dir_all(trust_dir(&data)).unwrap();
    trust_add(&data, &TrustedKey::new(pk.clone()).to_file_text()).unwrap();
    let all = installed(&data).unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!((all[0].version.as_str(), all[0].trusted), ("1.2.0", true));
    assert_eq!(all[0].plugin_files, [data.join("packs/demo/p.lua")]);
    assert_eq!(all[0].plugins.len(), 1);
    assert_eq!(all[0].plugins[0].meta.id, "demo-p");
    assert_eq!(all[0].plugins[0].path, data.join("packs/demo/p.lua"));
    assert!(all[0].plugins[0].pack.is_none() && all[0].plugins[0].trusted);
    assert!(all[0].probes.is_empty());
    install(&data, &verify(&v1, &trust).unwrap(), true, false).unwrap();
    assert_eq!(installed(&data).unwrap()[0].version, "1.0.0");
    let leftovers: Vec<_> = fs::read_dir(packs_dir(&data)).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers, ["demo"]);
    // A tampered installed pack is an error naming it.
    fs::write(data.join("packs/demo/p.lua"), "return {}").unwrap();
    let e = err_of(installed(&data));
    assert!(e.contains("installed pack demo") && e.contains("sha256 mismatch"), "{e}");
    remove(&data, "demo").unwrap();
    assert!(installed(&data).unwrap().is_empty());
    assert!(err_of(remove(&data, "demo")).contains("no pack named demo"));
}

#[test]
fn lock_files_pin_name_version_and_manifest() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("home");
    let (pk, sk) = keypair();
    let trust = trust_of(&pk);
    for (n, v) in [("one", "1.0.0"), ("two", "2.0.0")] {
        let d = t.path().join(n);
        make_pack(&d, n, v, Some(&sk));
        install(&data, &verify(&d, &trust).unwrap(), false, false).unwrap();
    }
    let lock = t.path().join("moonscan.lock");
    let packs = installed(&data).unwrap();
    write_lock(&lock, &packs).unwrap();
    check_lock(&lock, &packs).unwrap();
    let l = read_lock(&lock).unwrap();
    assert_eq!(l.packs.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["one", "two"]);
    // Same version, different manifest.
    let d = t.path().join("one");
    fs::write(d.join("pack.yaml"), fs::read_to_string(d.join("pack.yaml")).unwrap().replace("Test pack.", "Changed."))
        .unwrap();
    sign_dir(&d, &sk, false).unwrap();
    // The same version with other content is refused without `force`.
    let e = err_of(install(&data, &verify(&d, &trust).unwrap(), false, false));
    assert!(e.contains("pack one 1.0.0 is installed with other content") && e.contains("`install(force)`"), "{e}");
    install(&data, &verify(&d, &trust).unwrap(), false, true).unwrap();
    let e = err_of(check_lock(&lock, &installed(&data).unwrap()));
    assert!(e.contains("pack one 1.0.0: pack.yaml's sha256"), "{e}");
    remove(&data, "two").unwrap();
    let e = err_of(check_lock(&lock, &installed(&data).unwrap()));
    assert!(e.contains("pack two 2.0.0 is pinned but not installed"), "{e}");
    let e = err_of(check_lock(&lock, &[]));
    assert!(e.contains("pack one"), "{e}");
}

#[test]
fn update_hashes_keeps_the_authors_layout() {
    let t = tempfile::tempdir().unwrap();
    let (pk, sk) = keypair();
    let dir = t.path().join("demo");
    make_pack(&dir, "demo", "1.0.0", None);
    let m = fs::read_to_string(dir.join("pack.yaml")).unwrap();
    let h = sha256_hex(&fs::read(dir.join("p.lua")).unwrap());
    fs::write(dir.join("pack.yaml"), format!("# my notes\n{}", m.replace(&h, "''"))).unwrap();
    assert!(err_of(sign_dir(&dir, &sk, false)).contains("64 lowercase hex"));
    let r = sign_dir(&dir, &sk, true).unwrap();
    assert_eq!(r.updated, ["p.lua"]);
    assert!(!r.rewritten);
    let now = fs::read_to_string(dir.join("pack.yaml")).unwrap();
    assert!(now.starts_with("# my notes\n") && now.contains(&h), "{now}");
    assert!(verify(&dir, &trust_of(&pk)).unwrap().trusted);
    // Flow style is rewritten canonically.
    let src = PLUGIN.replace("ID", "demo-q");
    fs::write(dir.join("q.lua"), &src).unwrap();
    let flow = now.replace("plugins:\n", "plugins: [{file: q.lua}]\nprobes: []\nx:\n");
    let flow = flow.split("x:\n").next().unwrap().to_string();
    fs::write(dir.join("pack.yaml"), flow).unwrap();
    fs::remove_file(dir.join("p.lua")).unwrap();
    let r = sign_dir(&dir, &sk, true).unwrap();
    assert!(r.rewritten);
    assert!(verify(&dir, &trust_of(&pk)).is_ok());
    // A library module's hash is filled as a plugin's (it stayed empty
    // when pack.yaml was rewritten, and the pack could not be signed).
    fs::create_dir_all(dir.join("lib")).unwrap();
    fs::write(dir.join("lib/m.lua"), "return { answer = 42 }\n").unwrap();
    fs::write(dir.join("pack.yaml"), flow_with_lib(&fs::read_to_string(dir.join("pack.yaml")).unwrap())).unwrap();
    let r = sign_dir(&dir, &sk, true).unwrap();
    assert!(r.rewritten && r.updated.contains(&"lib/m.lua".to_string()), "{r:?}");
    let now = fs::read_to_string(dir.join("pack.yaml")).unwrap();
    assert!(now.contains(&sha256_hex(b"return { answer = 42 }\n")), "{now}");
    assert!(verify(&dir, &trust_of(&pk)).is_ok());
}

/// pack.yaml in flow style with `lib: [{file: lib/m.lua}]` and no hashes.
fn flow_with_lib(canonical: &str) -> String {
    let head: String = canonical.lines().take_while(|l| !l.starts_with("plugins")).map(|l| format!("{l}\n")).collect();
    format!("{head}plugins: [{{file: q.lua}}]\nlib: [{{file: lib/m.lua}}]\nprobes: []\n")
}

#[test]
fn keys_parse_in_minisign_formats() {
    let files = sign::generate(None).unwrap();
    let t = tempfile::tempdir().unwrap();
    let skp: PathBuf = t.path().join("k.key");
    fs::write(&skp, &files.secret).unwrap();
    let sk = sign::load_secret_key(&skp, None).unwrap();
    assert_eq!(sign::secret_key_id(&sk), files.id);
    let pk = sign::parse_public_key(&files.public).unwrap();
    assert_eq!(sign::key_id(pk.keynum()), files.id);
    let line = files.public.lines().nth(1).unwrap();
    assert_eq!(sign::key_id(sign::parse_public_key(line).unwrap().keynum()), files.id);
    assert!(sign::parse_public_key("hello").is_err());
    assert!(sign::load_secret_key(&t.path().join("missing"), None).is_err());
    let data = t.path().join("home");
    let k = trust_add(&data, line).unwrap();
    assert_eq!(k.id, files.id);
    assert_eq!(Trust::load(&data, false).unwrap().keys.len(), 1);
    trust_remove(&data, &files.id.to_lowercase()).unwrap();
    assert!(Trust::load(&data, false).unwrap().keys.is_empty());
    assert!(err_of(trust_remove(&data, &files.id)).contains("not in the trust store"));
    // By the public key itself: only that key is removed.
    trust_add(&data, line).unwrap();
    let other = minisign::KeyPair::generate_unencrypted_keypair().unwrap().pk.to_base64();
    assert!(err_of(trust_remove(&data, &other)).contains("not in the trust store"));
    assert_eq!(Trust::load(&data, false).unwrap().keys.len(), 1);
    trust_remove(&data, &files.public).unwrap();
    assert!(Trust::load(&data, false).unwrap().keys.is_empty());
    assert!(err_of(trust_remove(&data, "not a key")).contains("neither a public key nor a key ID"));
}

#[test]
fn probe_files_are_loaded_from_the_hashed_bytes() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("demo");
    make_pack(&dir, "demo", "1.0.0", None);
    let probes = fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/probes/redis.yaml")).unwrap();
    fs::create_dir(dir.join("probes")).unwrap();
    fs::write(dir.join("probes/redis.yaml"), &probes).unwrap();
    let mut m = fs::read_to_string(dir.join("pack.yaml")).unwrap();
    m.push_str(&format!("probes:\n  - file: probes/redis.yaml\n    sha256: {}\n", sha256_hex(&probes)));
    fs::write(dir.join("pack.yaml"), &m).unwrap();
    let (pk, sk) = keypair();
    sign_dir(&dir, &sk, false).unwrap();
    let v = verify(&dir, &trust_of(&pk)).unwrap();
    assert!(!v.probes.probes().is_empty());
    let data = t.path().join("home");
    install(&data, &v, false, false).unwrap();
    trust_add(&data, &TrustedKey::new(pk).to_file_text()).unwrap();
    let p = &installed(&data).unwrap()[0];
    assert_eq!(p.probe_files, [data.join("packs/demo/probes/redis.yaml")]);
    assert_eq!(p.probes, [(data.join("packs/demo/probes/redis.yaml"), String::from_utf8(probes.clone()).unwrap())]);
    let mut db = ProbeDb::default();
    db.add_str(&p.probes[0].1, &p.probes[0].0).unwrap();
    assert_eq!(db.probes().len(), v.probes.probes().len());
    // A broken probe file is refused at step 5, naming it.
    fs::write(dir.join("probes/redis.yaml"), "probes: 7\n").unwrap();
    sign_dir(&dir, &sk, true).expect_err("a broken probe file is not signed");
    let m2 = m.replace(&sha256_hex(&probes), &sha256_hex(b"probes: 7\n"));
    fs::write(dir.join("pack.yaml"), m2).unwrap();
    let e = err_of(verify(&dir, &Trust { allow_unsigned: true, keys: vec![] }));
    assert!(e.contains("probes/redis.yaml"), "{e}");
}

/// What installed() returns is what was hashed: files changed after the
/// check do not reach the scan through it.
#[test]
fn installed_packs_carry_the_verified_plugins_and_probes() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("home");
    let (pk, sk) = keypair();
    let dir = t.path().join("demo");
    make_pack(&dir, "demo", "1.0.0", None);
    let probes = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/probes/redis.yaml")).unwrap();
    fs::write(dir.join("redis.yaml"), &probes).unwrap();
    let mut m = fs::read_to_string(dir.join("pack.yaml")).unwrap();
    m.push_str(&format!("probes:\n  - file: redis.yaml\n    sha256: {}\n", sha256_hex(probes.as_bytes())));
    fs::write(dir.join("pack.yaml"), &m).unwrap();
    sign_dir(&dir, &sk, false).unwrap();
    install(&data, &verify(&dir, &trust_of(&pk)).unwrap(), false, false).unwrap();
    trust_add(&data, &TrustedKey::new(pk).to_file_text()).unwrap();
    let p = installed(&data).unwrap().remove(0);
    // The files change once the check is done.
    fs::write(data.join("packs/demo/p.lua"), PLUGIN.replace("ID", "swapped")).unwrap();
    fs::write(data.join("packs/demo/redis.yaml"), "probes: 7\n").unwrap();
    let ids: Vec<&str> = p.plugins.iter().map(|q| q.meta.id.as_str()).collect();
    assert_eq!(ids, ["demo-p"]);
    let q = p.plugins[0].clone();
    assert_eq!((q.pack.as_deref(), q.trusted), (None, true), "load_source's defaults");
    let q = q.in_pack(&p.name, p.trusted);
    assert_eq!((q.name(), q.trusted), ("demo:demo-p".to_string(), true));
    assert_eq!(p.probes, [(data.join("packs/demo/redis.yaml"), probes)]);
    let mut db = ProbeDb::default();
    db.add_str(&p.probes[0].1, &p.probes[0].0).unwrap();
    assert!(!db.probes().is_empty());
    // Loaded again, the change is caught.
    assert!(err_of(installed(&data)).contains("sha256 mismatch"));
}

/// A public key that claims `like`'s key ID but holds `other`'s key.
fn same_id_other_key(like: &minisign::PublicKey, other: &minisign::PublicKey) -> minisign::PublicKey {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let (a, b) = (b64.decode(like.to_base64()).unwrap(), b64.decode(other.to_base64()).unwrap());
    // "Ed", the 8-byte key number (the ID), the 32-byte Ed25519 key.
    let forged = [&a[..10], &b[10..]].concat();
    sign::parse_public_key(&b64.encode(forged)).unwrap()
}

// Regression: `pack trust add` of a key carrying a trusted key's ID replaced
// that key, and its packs then installed as "trusted (the first key's ID)".
#[test]
fn a_key_claiming_a_trusted_keys_id_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let ((vendor, vendor_sk), (attacker, _)) = (keypair(), keypair());
    let forged = same_id_other_key(&vendor, &attacker);
    assert_eq!(TrustedKey::new(forged.clone()).id, TrustedKey::new(vendor.clone()).id);
    trust_add(data, &TrustedKey::new(vendor.clone()).to_file_text()).unwrap();
    // Adding the same key again is harmless.
    trust_add(data, &TrustedKey::new(vendor.clone()).to_file_text()).unwrap();
    let e = err_of(trust_add(data, &TrustedKey::new(forged.clone()).to_file_text()));
    assert!(e.contains("already trusted with another public key"), "{e}");
    let store = sign::load_trust_store(&trust_dir(data)).unwrap();
    assert_eq!(store.len(), 1);
    assert_eq!(store[0].key.to_base64(), vendor.to_base64(), "the vendor's key is still the one trusted");
    // Verification is by the key: with both keys in a trust store, the
    // vendor's pack is checked by the vendor's key and says which key that was.
    let dir = data.join("vendor-pack");
    make_pack(&dir, "vendor", "1.0.0", Some(&vendor_sk));
    let trust = Trust { keys: vec![TrustedKey::new(forged), TrustedKey::new(vendor.clone())], allow_unsigned: false };
    let v = verify(&dir, &trust).unwrap();
    assert!(v.trusted);
    assert_eq!(v.signer_key.as_deref(), Some(vendor.to_base64().as_str()));
}

#[test]
fn refusals_say_their_kind() {
    let tmp = tempfile::tempdir().unwrap();
    let (pk, sk) = keypair();
    let dir = tmp.path().join("kinds");
    make_pack(&dir, "kinds", "1.0.0", Some(&sk));
    let trust = trust_of(&pk);
    assert!(verify(&dir, &trust).is_ok());
    fs::write(dir.join("p.lua"), "return {}").unwrap();
    assert_eq!(verify(&dir, &trust).unwrap_err().kind(), ErrorKind::Integrity, "a changed file");
    make_pack(&dir, "kinds", "1.0.0", Some(&sk));
    fs::write(dir.join("extra.lua"), "x").unwrap();
    assert_eq!(verify(&dir, &trust).unwrap_err().kind(), ErrorKind::Integrity, "an unlisted file");
    fs::remove_file(dir.join("extra.lua")).unwrap();
    let (other, _) = keypair();
    assert_eq!(verify(&dir, &trust_of(&other)).unwrap_err().kind(), ErrorKind::Signature, "an untrusted signer");
    fs::remove_file(dir.join("pack.sig")).unwrap();
    assert_eq!(verify(&dir, &trust).unwrap_err().kind(), ErrorKind::Signature, "no signature");
}
