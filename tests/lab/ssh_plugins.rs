//! The SSH plugins: ssh-hostkey (Lua, stops after the server's
//! KEX_ECDH_REPLY) and ssh-auth-methods (the host's russh client), against
//! the lab's sshd and a second sshd on loopback that allows passwords and
//! offers only ecdh-sha2-nistp256 (it uses the lab's host keys).
//! What needs no lab is in tests/ssh_plugins.rs.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::util::{events, lab, lab_scan, of_type, run, stderr, stdout, wait_until, TARGET};

const LAB_STATE: &str = "/run/moonscan-lab";

/// One host key as ssh-keygen describes its .pub file.
#[derive(Debug)]
struct Expected {
    /// "ssh-ed25519 AAAA...": the first two fields of the .pub file.
    key: String,
    bits: u64,
    /// RSA, ECDSA, ED25519.
    kind: String,
    /// Colon hex, without ssh-keygen's "MD5:".
    md5: String,
}

fn keygen(args: &[&str], file: &Path) -> String {
    let out = Command::new("ssh-keygen").args(args).arg("-f").arg(file).output().expect("ssh-keygen runs");
    assert!(out.status.success(), "ssh-keygen {args:?} {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// "3072 SHA256:abc moonscan-lab (RSA)" → (3072, "SHA256:abc", "RSA").
fn fingerprint_line(line: &str) -> (u64, String, String) {
    let mut w = line.split_whitespace();
    let bits = w.next().unwrap().parse().unwrap_or_else(|_| panic!("bits in {line:?}"));
    let fp = w.next().unwrap().to_string();
    let kind = line.rsplit_once('(').and_then(|(_, k)| k.strip_suffix(')')).unwrap().to_string();
    (bits, fp, kind)
}

fn expected(pub_file: &Path) -> Expected {
    let text = std::fs::read_to_string(pub_file).unwrap();
    let key = text.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
    let (bits, _, kind) = fingerprint_line(&keygen(&["-l"], pub_file));
    let (md5_bits, md5, md5_kind) = fingerprint_line(&keygen(&["-l", "-E", "md5"], pub_file));
    assert_eq!((md5_bits, &md5_kind), (bits, &kind));
    let md5 = md5.strip_prefix("MD5:").unwrap_or_else(|| panic!("{md5:?}")).to_string();
    Expected { key, bits, kind, md5 }
}

fn lab_pub_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(LAB_STATE)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("ssh_host_") && name.ends_with("_key.pub")
        })
        .collect();
    files.sort();
    files
}

/// The findings (`ctx:finding`) of one plugin.
fn from<'a>(evs: &'a [Value], plugin: &str) -> Vec<&'a Value> {
    of_type(evs, "finding").into_iter().filter(|f| f["plugin"] == plugin).collect()
}

/// The script results (what `run` returned) of one plugin.
fn results<'a>(evs: &'a [Value], plugin: &str) -> Vec<&'a Value> {
    of_type(evs, "script").into_iter().filter(|r| r["plugin"] == plugin).collect()
}

/// Checks the one ssh-hostkey result against the keys of these .pub files:
/// nmap's table (type, bits as text, MD5 in plain hex, the blob in base64)
/// and nmap's text, one "bits md5 (KIND)" line a key.
fn check_host_keys(evs: &[Value], pub_files: &[PathBuf]) {
    let found = results(evs, "ssh-hostkey");
    assert_eq!(found.len(), 1, "one ssh-hostkey result: {evs:#?}");
    assert!(from(evs, "ssh-hostkey").is_empty(), "a result, no finding: {evs:#?}");
    let f = found[0];
    assert!(f.get("severity").is_none() && f.get("title").is_none(), "{f}");
    let keys = f["data"].as_array().unwrap_or_else(|| panic!("data: {f}"));
    assert_eq!(keys.len(), pub_files.len(), "one entry per host key: {keys:#?}");
    let text = f["output"].as_str().unwrap_or_default();
    assert_eq!(text.lines().count(), pub_files.len() + 1, "{text:?}");
    for file in pub_files {
        let want = expected(file);
        let (kind, blob) = want.key.split_once(' ').unwrap();
        let got = keys
            .iter()
            .find(|k| k["key"] == blob)
            .unwrap_or_else(|| panic!("no entry for {} ({want:?}) in {keys:#?}", file.display()));
        let md5 = want.md5.replace(':', "");
        assert_eq!(got["type"], kind, "{}", file.display());
        assert_eq!(got["bits"], want.bits.to_string().as_str(), "{}", file.display());
        assert_eq!(got["fingerprint"], md5.as_str(), "{}", file.display());
        assert!(text.contains(&format!("\n  {} {md5} ({})", want.bits, want.kind)), "{text:?}");
    }
}

#[test]
fn ssh_hostkey_reports_every_lab_key_as_ssh_keygen_does() {
    let _lab = lab();
    let pubs = lab_pub_files();
    assert_eq!(pubs.len(), 3, "the lab has ed25519, ecdsa and rsa host keys: {pubs:?}");
    let (out, evs) = lab_scan(&["-sV", "-n", "-p", "22", "--script", "ssh-hostkey", TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(of_type(&evs, "error").is_empty(), "{evs:#?}");
    check_host_keys(&evs, &pubs);
    // nmap's order: RSA, ECDSA, ED25519.
    let kinds: Vec<&str> = results(&evs, "ssh-hostkey")[0]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["ssh-rsa", "ecdsa-sha2-nistp256", "ssh-ed25519"]);
}

#[test]
fn ssh_auth_methods_of_the_lab_is_publickey_only() {
    let _lab = lab();
    for (args, user) in [(None, "root"), (Some("ssh.user=nobody"), "nobody")] {
        let mut argv = vec!["-sV", "-n", "-p", "22", "--script", "ssh-auth-methods", TARGET];
        if let Some(a) = args {
            argv.extend(["--script-args", a]);
        }
        let (out, evs) = lab_scan(&argv);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(of_type(&evs, "error").is_empty(), "{evs:#?}");
        let said = from(&evs, "ssh-auth-methods");
        assert!(said.is_empty(), "no password finding: {said:#?}");
        let found = results(&evs, "ssh-auth-methods");
        assert_eq!(found.len(), 1, "the result: {evs:#?}");
        // nmap's ssh-auth-methods layout, whoever the user (-sC runs as root).
        assert_eq!(found[0]["plugin"], "ssh-auth-methods", "{user}");
        assert_eq!(found[0]["data"], serde_json::json!({"Supported authentication methods": ["publickey"]}));
        assert_eq!(found[0]["output"], "\n  Supported authentication methods: \n    publickey");
    }
}

/// An sshd on 127.0.0.1 that allows passwords and speaks only
/// ecdh-sha2-nistp256 with the lab's ECDSA and RSA keys; killed on drop.
struct LoopbackSshd {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl LoopbackSshd {
    fn start() -> LoopbackSshd {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {LAB_STATE}/ssh_host_ecdsa_key\n\
                 HostKey {LAB_STATE}/ssh_host_rsa_key\nPidFile none\nUsePAM no\nPasswordAuthentication yes\n\
                 KbdInteractiveAuthentication no\nKexAlgorithms ecdh-sha2-nistp256\nMaxStartups 100\n"
            ),
        )
        .unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sshd runs (scripts/lab.sh installs it)");
        let sshd = LoopbackSshd { child, port, _dir: dir };
        let listening = wait_until(Duration::from_secs(10), || TcpStream::connect(("127.0.0.1", port)).ok());
        assert!(listening.is_some(), "sshd did not start listening on {port}");
        sshd
    }
}

impl Drop for LoopbackSshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_server_that_allows_passwords_gets_a_low_finding_and_its_ecdh_keys_are_read() {
    let _lab = lab(); // root, and the lab's host keys
    let sshd = LoopbackSshd::start();
    let port = sshd.port.to_string();
    let out =
        run(&["-sT", "-sV", "-n", "-p", &port, "--script", "ssh-hostkey,ssh-auth-methods", "127.0.0.1", "-oJ", "-"]);
    drop(sshd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&stdout(&out));
    assert!(of_type(&evs, "error").is_empty(), "{evs:#?}");
    let lab_key = |t: &str| PathBuf::from(format!("{LAB_STATE}/ssh_host_{t}_key.pub"));
    check_host_keys(&evs, &[lab_key("ecdsa"), lab_key("rsa")]);
    let result = results(&evs, "ssh-auth-methods");
    assert_eq!(result.len(), 1, "{evs:#?}");
    let methods = result[0];
    assert_eq!(methods["data"]["Supported authentication methods"], serde_json::json!(["publickey", "password"]));
    let found = from(&evs, "ssh-auth-methods");
    let low: Vec<_> = found.iter().filter(|f| f["title"] == "Password authentication allowed").collect();
    assert_eq!((low.len(), found.len()), (1, 1), "{found:#?}");
    assert_eq!(low[0]["severity"], "low");
    assert_eq!(low[0]["data"]["user"], "root");
}

/// The attribute `name` of the first element holding `marker`, XML escapes
/// decoded (nmap's -oX writes `&#xa;`, `&#45;` and the five entities).
fn xml_attr(xml: &str, marker: &str, name: &str) -> String {
    let at = xml.find(marker).unwrap_or_else(|| panic!("no {marker} in {xml}"));
    let start = xml[at..].find(&format!("{name}=\"")).unwrap() + at + name.len() + 2;
    let raw = &xml[start..start + xml[start..].find('"').unwrap()];
    let mut out = String::new();
    let mut rest = raw;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let semi = rest[amp..].find(';').unwrap() + amp;
        let entity = &rest[amp + 1..semi];
        out.push(match entity {
            "lt" => '<',
            "gt" => '>',
            "amp" => '&',
            "quot" => '"',
            "apos" => '\'',
            e => {
                let code = e.strip_prefix("#x").map(|h| u32::from_str_radix(h, 16)).unwrap_or_else(|| e[1..].parse());
                char::from_u32(code.unwrap()).unwrap()
            }
        });
        rest = &rest[semi + 1..];
    }
    out + rest
}

/// `--script-args ssh_hostkey=all`: each key's MD5, SHA256, Bubble Babble,
/// random art and full key, as nmap prints them for the same server (nmap
/// 7.93 shows the lab's ECDSA and ED25519 keys; every key nmap shows must
/// read the same in moonscan's text), and as ssh-keygen computes them for
/// all three keys. Without the argument: the MD5 lines alone.
#[test]
fn ssh_hostkey_prints_every_form_nmap_prints() {
    let _lab = lab();
    let args = ["-n", "-Pn", "-p", "22", "--script", "ssh-hostkey", "--script-args", "ssh_hostkey=all", TARGET];
    let (out, evs) = lab_scan(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("no selected plugin reads"), "{}", stderr(&out));
    let ours = results(&evs, "ssh-hostkey")[0]["output"].as_str().unwrap().to_string();
    let nmap = crate::util::in_lab("nmap").args(args).args(["-oX", "-"]).output().expect("nmap runs in the lab");
    assert!(nmap.status.success(), "{}", stderr(&nmap));
    let theirs = xml_attr(&stdout(&nmap), "<script id=\"ssh-hostkey\"", "output");
    let blocks: Vec<&str> = theirs.split("\n  ").filter(|b| !b.is_empty()).collect();
    assert!(blocks.len() >= 2 && blocks.iter().all(|b| b.contains("SHA256:") && b.contains("+--[")), "{theirs}");
    for b in &blocks {
        assert!(ours.contains(&format!("\n  {b}")), "nmap's block\n{b}\nnot in ours:\n{ours}");
    }
    for file in lab_pub_files() {
        let want = expected(&file);
        let sha256 = fingerprint_line(&keygen(&["-l", "-E", "sha256"], &file)).1;
        let bubble = fingerprint_line(&keygen(&["-B"], &file)).1;
        for line in [
            format!("{} {} ({})", want.bits, want.md5.replace(':', ""), want.kind),
            format!("{} {sha256} ({})", want.bits, want.kind),
            format!("{} {bubble} ({})", want.bits, want.kind),
            want.key.clone(),
        ] {
            assert!(ours.contains(&line), "{} {line:?} not in\n{ours}", file.display());
        }
        // ssh-keygen -lv draws the same board for the MD5.
        let board: Vec<String> =
            keygen(&["-lv", "-E", "md5"], &file).lines().filter(|l| l.starts_with('|')).map(str::to_string).collect();
        assert_eq!(board.len(), 9, "{board:?}");
        assert!(ours.contains(&board.join("\n")), "{}: {board:#?} not in\n{ours}", file.display());
    }
    // The default: one MD5 line a key, nothing else.
    let (out, evs) = lab_scan(&["-n", "-Pn", "-p", "22", "--script", "ssh-hostkey", TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plain = results(&evs, "ssh-hostkey")[0]["output"].as_str().unwrap().to_string();
    assert!(!plain.contains("SHA256:") && !plain.contains("+--[") && plain.lines().count() == 4, "{plain:?}");
    // A form it does not know (a typo) or none: the default, not blank lines.
    for arg in ["ssh_hostkey=fulll", "ssh_hostkey="] {
        let (out, evs) = lab_scan(&["-n", "-Pn", "-p", "22", "--script", "ssh-hostkey", "--script-args", arg, TARGET]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(results(&evs, "ssh-hostkey")[0]["output"].as_str(), Some(plain.as_str()), "{arg}");
    }
}
