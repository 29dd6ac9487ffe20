//! Script results in nmap's layout: for the scripts moonscan runs under
//! nmap's ids, python-libnmap reads the same `elements` (and nmap's XPath
//! paths find the same values) in moonscan's -oX as in nmap's own -oX of
//! the same lab ports, and the same output text.

use std::process::Command;

use crate::util::{bin, in_lab, lab, repo, stderr, stdout};

/// The nmap script ids whose layout moonscan's core plugins follow.
const NMAP_IDS: &str = "ssl-cert,ssh-hostkey,http-title,http-server-header,http-headers,http-methods,\
                        redis-info,memcached-info,ftp-anon,smtp-commands,tls-alpn";

#[test]
fn script_results_read_as_nmaps_for_the_same_ports() {
    let _lab = lab();
    // ssl-cert on 443 (both hosts) and behind STARTTLS, ssh-hostkey, the
    // HTTP scripts on 80 and 443, tls-alpn, redis, memcached, FTP, SMTP.
    let targets = ["-p", "21,22,25,80,443,5432,6379,11211", "198.18.0.2", "198.18.0.3"];
    compare_with_nmap(&targets, NMAP_IDS, 25);
}

/// The plugins for the daemons of the lab's zoo, against nmap's scripts on
/// the same real daemons: POP3 and IMAP capabilities (Dovecot), epmd-info
/// (RabbitMQ's epmd), socks-auth-info (Dante), ajp-methods (Tomcat),
/// mqtt-subscribe (Mosquitto), ftp-syst (vsftpd), and ssl-date on the TLS
/// and STARTTLS ports among them.
#[test]
fn the_zoo_plugins_read_as_nmaps_scripts() {
    let _lab = lab();
    let ids =
        "pop3-capabilities,imap-capabilities,epmd-info,socks-auth-info,ajp-methods,mqtt-subscribe,ftp-syst,ssl-date";
    let targets = ["-p", "21,110,143,443,993,1080,1883,4369,8009", "198.18.0.3", "198.18.0.5"];
    compare_with_nmap(&targets, ids, 13);
}

/// rdp-ntlm-info on FreeRDP's shadow server with NLA (TLS after the X.224
/// negotiation, then CredSSP carrying NTLM) and on xrdp (no CredSSP: no
/// result, as in nmap), and smtp-commands on SMTP, SMTPS (TLS first) and
/// submission, beside nmap's scripts (the server's clock aside).
#[test]
fn rdp_ntlm_info_and_smtp_commands_on_smtps_read_as_nmaps_scripts() {
    let _lab = lab();
    let targets = ["-p", "25,465,587,3389", "198.18.0.3", "198.18.0.5"];
    compare_with_nmap(&targets, "rdp-ntlm-info,smtp-commands", 4);
}

/// The plugins on the core library's protocol modules (ssh2, ber and
/// ldap, mysql) against OpenSSH, slapd and MariaDB, beside nmap's scripts.
#[test]
fn the_library_plugins_read_as_nmaps_scripts() {
    let _lab = lab();
    let ids = "ssh2-enum-algos,ldap-rootdse,mysql-empty-password";
    compare_with_nmap(&["-p", "22,389,3306", "198.18.0.2", "198.18.0.5"], ids, 3);
}

/// The web plugins (lib/web.lua) on the lab's robots.txt and exposed .git
/// (scripts/lab-www.sh) behind nginx and Apache, and amqp-info (RabbitMQ)
/// and vnc-info (TigerVNC), beside nmap's scripts.
#[test]
fn the_web_amqp_and_vnc_plugins_read_as_nmaps_scripts() {
    let _lab = lab();
    let ids = "http-robots.txt,http-git,amqp-info,vnc-info";
    compare_with_nmap(&["-p", "80,5672,5901,8080", "198.18.0.2", "198.18.0.5"], ids, 8);
}

/// The UDP plugins (ctx:udp, lib/dns.lua, ntp.lua, snmp.lua on ber.lua)
/// against dnsmasq, BIND, chrony and Net-SNMP, beside nmap's scripts (the
/// servers' clocks aside).
#[test]
fn the_udp_plugins_read_as_nmaps_scripts() {
    let _lab = lab();
    let ids = "dns-nsid,ntp-info,snmp-sysdescr";
    compare_with_nmap(&["-sU", "-p", "53,123,161", "198.18.0.2", "198.18.0.5"], ids, 4);
}

/// rpcinfo (lib/rpc.lua, against rpcbind) and rfc868-time (xinetd's time
/// service), over TCP and UDP, beside nmap's scripts (the clock aside).
#[test]
fn the_rpc_and_time_plugins_read_as_nmaps_scripts() {
    let _lab = lab();
    let ids = "rpcinfo,rfc868-time";
    compare_with_nmap(&["-p", "37,111", "198.18.0.5"], ids, 2);
    compare_with_nmap(&["-sU", "-p", "37,111", "198.18.0.5"], ids, 2);
}

/// xmpp-info (lib/xmpp.lua) against prosody's client and server ports: a
/// table of list items and named keys, as nmap writes it (the list first,
/// without keys), the stream id aside.
#[test]
fn xmpp_info_reads_as_nmaps_script() {
    let _lab = lab();
    compare_with_nmap(&["-p", "5222,5269", "198.18.0.5"], "xmpp-info", 2);
}

/// smb-protocols, smb2-security-mode and smb2-time (lib/smb.lua, `scope =
/// "host"`) against Samba: both tools show them as host scripts, and the
/// text and the structured output read the same, the server's clock aside.
#[test]
fn the_smb_plugins_read_as_nmaps_host_scripts() {
    let _lab = lab();
    let ids = "smb-protocols,smb2-security-mode,smb2-time";
    let dir = tempfile::tempdir().unwrap();
    let (theirs, mine) = (dir.path().join("nmap.xml"), dir.path().join("moonscan.xml"));
    let args = ["-n", "-Pn", "-sV", "--script", ids, "-p", "445", "198.18.0.5", "-oX"];
    let nmap = in_lab("nmap").args(args).arg(&theirs).output().expect("nmap runs in the lab");
    assert!(nmap.status.success(), "nmap: {}", stderr(&nmap));
    let ms = in_lab(bin()).args(args).arg(&mine).output().expect("moonscan runs in the lab");
    assert_eq!(ms.status.code(), Some(0), "{}{}", stdout(&ms), stderr(&ms));
    let compare = Command::new("/usr/bin/python3")
        .arg(repo().join("tests/nmap_hostscripts.py"))
        .args([&theirs, &mine])
        .args([ids, "--mask", "date,start_date"])
        .output()
        .expect("python3 runs");
    let said = stdout(&compare);
    assert!(compare.status.success(), "{said}{}", stderr(&compare));
    assert_eq!(said.matches("text match, structure match").count(), 3, "{said}");
}

/// Runs `nmap -sV --script IDS` and moonscan the same way on `targets`,
/// then tests/nmap_layouts.py on both -oX files: at least `min` results
/// of nmap's compared, and none different.
fn compare_with_nmap(targets: &[&str], ids: &str, min: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (theirs, mine) = (dir.path().join("nmap.xml"), dir.path().join("moonscan.xml"));
    let nmap = in_lab("nmap")
        .args(["-n", "-Pn", "-sV", "--script", ids])
        .args(targets)
        .arg("-oX")
        .arg(&theirs)
        .output()
        .expect("nmap runs in the lab (scripts/test.sh installs it)");
    assert!(nmap.status.success(), "nmap: {}", stderr(&nmap));
    let ms = in_lab(bin()).args(["-n", "-Pn", "-sV", "--script", ids]).args(targets).arg("-oX").arg(&mine).output();
    let ms = ms.expect("moonscan runs in the lab");
    assert_eq!(ms.status.code(), Some(0), "{}{}", stdout(&ms), stderr(&ms));
    let compare = Command::new("/usr/bin/python3")
        .arg(repo().join("tests/nmap_layouts.py"))
        .args([&theirs, &mine])
        .arg(ids)
        .output()
        .expect("python3 runs (scripts/test.sh installs python3-libnmap)");
    let said = stdout(&compare);
    assert!(compare.status.success(), "{said}{}", stderr(&compare));
    let n: usize = said.trim().rsplit(' ').nth(2).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(n >= min, "at least {min} script results of {ids} on {targets:?} expected, {n} compared:\n{said}");
}

/// IVRE (PyPI), which stores nmap scans for analysis, imports a lab
/// `-sV -sC -oX` scan with every open port and every script result, and
/// its handlers read the results both scanners report as they read nmap's.
#[test]
fn ivre_imports_a_default_script_scan_as_it_imports_nmaps() {
    let _lab = lab();
    let python = repo().join("target/pyvenv/bin/python");
    assert!(repo().join("target/pyvenv/bin/ivre").exists(), "IVRE is missing: scripts/test.sh installs it");
    let dir = tempfile::tempdir().unwrap();
    let (theirs, mine) = (dir.path().join("nmap.xml"), dir.path().join("moonscan.xml"));
    let targets = ["-n", "-Pn", "-sV", "-sC", "-p", "21,22,25,80,443,5432,6379,11211", "198.18.0.2", "198.18.0.3"];
    let nmap = in_lab("nmap").args(targets).arg("-oX").arg(&theirs).output();
    let nmap = nmap.expect("nmap runs in the lab (scripts/test.sh installs it)");
    assert!(nmap.status.success(), "nmap: {}", stderr(&nmap));
    let ms = in_lab(bin()).args(targets).arg("-oX").arg(&mine).output().expect("moonscan runs in the lab");
    assert_eq!(ms.status.code(), Some(0), "{}{}", stdout(&ms), stderr(&ms));
    let import = Command::new(python).arg(repo().join("tests/ivre_import.py")).args([&theirs, &mine]).output();
    let import = import.expect("the virtualenv's python runs");
    let said = stdout(&import);
    assert!(import.status.success(), "{said}{}", stderr(&import));
    // "IVRE imported N moonscan results; M shared with nmap read the same":
    // ssl-cert (443 and behind STARTTLS), ssh-hostkey, the HTTP scripts,
    // ftp-anon, smtp-commands...
    let numbers: Vec<usize> = said.split(' ').filter_map(|w| w.parse().ok()).collect();
    assert!(numbers.len() == 2 && numbers[0] >= 30 && numbers[1] >= 15, "{said}");
}
