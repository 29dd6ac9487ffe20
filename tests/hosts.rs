//! Host discovery's options checked before anything is sent: bad -P
//! options and combinations are refused. Discovery itself, in the lab:
//! tests/lab/hosts.rs.

use crate::util::{bin, stderr};

/// Bad -P options and combinations are refused with a clear message.
#[test]
fn bad_discovery_options_are_refused() {
    for (args, want) in [
        (&["-PX", "198.18.2.3"][..], "unknown host discovery option -PX"),
        (&["-PE22", "198.18.2.3"], "-PE takes no ports"),
        (&["-PS99999", "198.18.2.3"], "-PS99999"),
        (&["-sn", "-p", "22", "198.18.2.3"], "-sn scans no ports"),
        (&["-sL", "-sV", "198.18.2.3"], "-sL scans no ports"),
        (&["-sn", "-Pn", "198.18.2.3"], "-sn -Pn would send nothing"),
        (&["-Pn", "-PE", "198.18.2.3"], "-Pn and -P discovery probes"),
    ] {
        let out = std::process::Command::new(bin()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
}
