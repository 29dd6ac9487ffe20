//! Scans of the lab (scripts/lab.sh): two namespaces joined by a veth pair.
//! Packet captures on the target side prove what was and was not sent.

use std::process::Command;

use crate::util::{
    excluded_addresses_get_no_syn, lab, lab_ports, lab_scan, of_type, open_ports, stderr, Capture, TARGET,
};

#[test]
fn all_ports_of_the_target_finds_exactly_the_four_services() {
    let _lab = lab();
    let (out, evs) = lab_scan(&["-sT", "-n", "-p-", TARGET]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(open_ports(&evs), lab_ports(TARGET));
    let end = evs.last().unwrap();
    assert_eq!(end["probes_sent"], 65535);
    assert_eq!(end["closed"], 65531, "every other port is closed, not open or filtered");
    assert_eq!(of_type(&evs, "port").len(), 4, "closed ports are counted, not printed");
}

#[test]
fn ipv6_targets_scan_the_same_way() {
    let _lab = lab();
    let (out, evs) = lab_scan(&["-sT", "-n", "-p", "1-10000", "2001:2::2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(open_ports(&evs), lab_ports("2001:2::2"));
}

#[test]
fn open_ports_leave_no_time_wait_behind() {
    let _lab = lab();
    let time_wait = || {
        let ss = Command::new("ip").args(["netns", "exec", "msscan", "ss", "-tanH", "state", "time-wait"]).output();
        let text = String::from_utf8_lossy(&ss.unwrap().stdout).into_owned();
        text.lines().map(str::to_string).collect::<std::collections::BTreeSet<_>>()
    };
    let before = time_wait();
    let (_, evs) = lab_scan(&["-sT", "-n", "-p", "22,80,443,6379", TARGET]);
    assert_eq!(open_ports(&evs).len(), 4);
    let new: Vec<_> = time_wait().difference(&before).cloned().collect();
    assert!(new.is_empty(), "SO_LINGER 0 means no TIME_WAIT, found {new:?}");
}

/// An unroutable target is an error event and exit status 1; the other
/// target's results are all there.
#[test]
fn one_failing_target_does_not_end_the_scan() {
    let _lab = lab();
    // 198.18.1.0/24 is in the lab's range but has no route in the scanner namespace.
    // -Pn: every target is taken as up (with discovery, 198.18.1.5 is just down).
    let (out, evs) = lab_scan(&["-sT", "-n", "-Pn", "-p", "22,80,443,6379", TARGET, "198.18.1.5"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(open_ports(&evs), lab_ports(TARGET));
    let errors = of_type(&evs, "error");
    assert_eq!(errors.len(), 1, "one error event per failing host: {errors:?}");
    assert_eq!(errors[0]["ip"], "198.18.1.5");
    assert_eq!(errors[0]["kind"], "io");
    assert_eq!(evs.last().unwrap()["errors"], 4);
}

#[test]
fn excluded_addresses_never_receive_a_packet() {
    let _lab = lab();
    excluded_addresses_get_no_syn("-sT");
}

#[test]
fn max_rate_is_honoured_within_5_percent() {
    let _lab = lab();
    let cap = Capture::start("dst host 198.18.0.2 and dst portrange 20000-21199");
    let (out, evs) = lab_scan(&["-sT", "-n", "-p", "20000-21199", "--max-rate", "600", TARGET]);
    let syns = cap.stop();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(evs.last().unwrap()["probes_sent"], 1200);
    assert_eq!(syns.len(), 1200, "every probe was one SYN on the wire");
    let (first, last) = (syns[0].0, syns[syns.len() - 1].0);
    let rate = (syns.len() - 1) as f64 / (last - first);
    assert!((rate - 600.0).abs() <= 30.0, "measured {rate:.1} probes/s on the wire, asked 600");
    // No one-second window holds more than 5 % over the rate.
    let times: Vec<f64> = syns.iter().map(|s| s.0).collect();
    let mut j = 0;
    for i in 0..times.len() {
        while times[i] - times[j] >= 1.0 {
            j += 1;
        }
        assert!(i - j < 630, "{} SYNs within one second", i - j + 1);
    }
}

#[test]
fn sweep_of_a_slash_16_finds_every_host() {
    let _lab = lab();
    let (out, evs) = lab_scan(&["-sT", "-n", "-p", "80", "198.19.0.0/16"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let end = evs.last().unwrap();
    assert_eq!(end["open"], 65536, "{end}");
    assert_eq!(open_ports(&evs).len(), 65536);
}
