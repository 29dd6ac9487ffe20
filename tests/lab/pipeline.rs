//! The pipeline's stages are joined by bounded channels: when service
//! detection is far slower than discovery, discovery waits for it instead of
//! queueing open ports without limit.

use std::process::Stdio;
use std::time::Duration;

use crate::util::{bin, events, in_lab, lab, of_type, wait_until};

/// Peak RSS (VmHWM) of a running process, in kB.
fn peak_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap_or("VmHWM: 0 kB");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

#[test]
fn slow_detection_holds_discovery_back_and_memory_stays_flat() {
    let _lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("scan.ndjson");
    // 65,536 open ports, four detected at a time (each takes a NULL-probe
    // wait and a GET): discovery could find them all in a third of a second.
    let mut child = in_lab(bin())
        .args(["-n", "-Pn", "-sS", "-sV", "--version-parallelism", "4", "-p", "80", "198.19.0.0/16"])
        .args(["-oJ", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // `ip netns exec` execs moonscan itself, so the pid is moonscan's.
    let pid = child.id();
    // Held back: the queue between the stages is full (1,024 open ports
    // reported ahead of detection). On a loaded machine discovery takes
    // longer to get there, and what it allocates until then is its own.
    let reported = || std::fs::read_to_string(&out).map_or(0, |t| t.matches(r#""type":"port""#).count());
    let _ = wait_until(Duration::from_secs(20), || (reported() >= 1024).then_some(()));
    let mut rss = Vec::new();
    for _ in 0..8 {
        rss.push(peak_rss_kb(pid));
        std::thread::sleep(Duration::from_millis(500));
    }
    let _ = child.kill();
    let _ = child.wait();
    let evs = events(&std::fs::read_to_string(&out).unwrap());
    let open = of_type(&evs, "port").len();
    let detected = of_type(&evs, "service").len();
    assert!(detected > 0, "detection ran");
    // Open ports reported = detected + those queued between the stages (1024)
    // + one per worker and sender thread waiting to hand one over.
    assert!(open <= detected + 1024 + 64, "{open} open ports found while {detected} were detected");
    assert!(open < 65_536 / 2, "discovery ran ahead of detection: {open} open ports");
    // Memory is flat while the scan is held back: the last peak is the first's.
    let (first, last) = (rss[0], rss[rss.len() - 1]);
    assert!(last < first + 4 * 1024, "peak RSS grew from {first} kB to {last} kB: {rss:?}");
}

/// examples/embed.rs, built by `cargo build --all-targets` (scripts/test.sh).
#[test]
fn the_embedding_example_streams_findings_from_the_lab() {
    let _lab = lab();
    let exe = std::env::current_exe().unwrap();
    let example = exe.parent().and_then(|d| d.parent()).unwrap().join("examples/embed");
    assert!(example.is_file(), "{} is missing: build it with cargo build --all-targets", example.display());
    let out = in_lab(&example).arg(crate::util::TARGET).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let mut lines: Vec<&str> = text.lines().collect();
    let summary = lines.pop().unwrap_or_default();
    // http-title's results are script results, not findings.
    assert_eq!(summary.split(" in ").next(), Some("2 open, 0 findings, 2 script results"), "{text}");
    // Each port's service comes before its script result; the ports may interleave.
    let at = |l: &str| lines.iter().position(|x| *x == l).unwrap_or_else(|| panic!("no {l:?} in {text}"));
    for port in [80, 443] {
        assert!(
            at(&format!("198.18.0.2:{port} http nginx")) < at(&format!("198.18.0.2:{port} http-title: moonscan lab"))
        );
    }
    assert_eq!(lines.len(), 4, "{text}");
}
