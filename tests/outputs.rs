//! nmap's XML as nmap's stylesheet renders it (xsltproc), on a loopback
//! scan. nmap's own clients reading the reports of lab scans:
//! tests/lab/outputs.rs.

use std::process::Command;

use crate::util::{bin, stderr, stdout};

/// -oX names nmap's stylesheet as nmap does (its installed nmap.xsl, the
/// same file nmap's own -oX names), so `xsltproc scan.xml` gives the HTML
/// report nmap users know; `--stylesheet`, `--webxml` and
/// `--no-stylesheet` as nmap's.
#[test]
fn xsltproc_renders_the_xml_with_nmaps_stylesheet() {
    let href = |xml: &str| -> Option<String> {
        let line = xml.lines().find(|l| l.starts_with("<?xml-stylesheet"))?;
        Some(line.split('"').nth(1)?.to_string())
    };
    let file_of = |href: &str| std::fs::canonicalize(href.trim_start_matches("file://")).unwrap();
    let nmap = Command::new("nmap").args(["-n", "-sL", "127.0.0.1", "-oX", "-"]).output().expect("nmap runs");
    let theirs = href(&stdout(&nmap)).expect("nmap names its stylesheet");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("scan.xml");
    let scan = |extra: &[&str]| {
        let o = Command::new(bin())
            .args(["-sT", "-Pn", "-n", "-p", &port, "127.0.0.1", "-oX"])
            .arg(&xml)
            .args(extra)
            .output()
            .unwrap();
        (o.status.code(), std::fs::read_to_string(&xml).unwrap_or_default(), stderr(&o))
    };
    let (code, doc, err) = scan(&[]);
    assert_eq!(code, Some(0), "{err}");
    let ours = href(&doc).expect("-oX names a stylesheet when nmap is installed");
    assert_eq!(file_of(&ours), file_of(&theirs), "ours {ours}, nmap's {theirs}");
    let html = Command::new("xsltproc").arg(&xml).output().expect("xsltproc runs (scripts/test.sh installs it)");
    let page = stdout(&html);
    assert!(html.status.success(), "{}", stderr(&html));
    assert!(page.contains("<html") && page.contains(&port) && page.contains("open"), "{page}");

    assert_eq!(href(&scan(&["--no-stylesheet"]).1), None);
    assert_eq!(href(&scan(&["--webxml"]).1).as_deref(), Some("https://svn.nmap.org/nmap/docs/nmap.xsl"));
    assert_eq!(href(&scan(&["--stylesheet", "mine.xsl"]).1).as_deref(), Some("mine.xsl"));
    let (code, _, err) = scan(&["--stylesheet", "mine.xsl", "--no-stylesheet"]);
    assert_eq!(code, Some(2), "{err}");
    drop(listener);
}
