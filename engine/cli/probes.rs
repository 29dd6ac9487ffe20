//! `moonscan probes list|import`: the probe database from the command line.

use std::path::PathBuf;

use clap::Subcommand;
use moonscan::service::import;
use moonscan::service::ProbeDb;

#[derive(Debug, clap::Args)]
pub struct ProbesArgs {
    /// Folder of probe files (default: $MOONSCAN_PROBES, or the build's probes/).
    #[arg(long = "dir", global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// List the loaded probes: name, protocol, rarity, ports, rule counts.
    List,
    /// Convert an nmap-service-probes file you have into moonscan YAML.
    Import {
        /// The nmap-service-probes file (e.g. /usr/share/nmap/nmap-service-probes).
        file: PathBuf,
        /// Write the YAML here instead of stdout.
        #[arg(short = 'o', value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

/// Runs `moonscan probes ...` (`argv` starts at "probes"); returns the exit status.
pub fn run(args: ProbesArgs) -> u8 {
    match args.cmd {
        Cmd::List => {
            let dir = args.dir.unwrap_or_else(|| moonscan::service::probes::default_dir(&super::places::from_env()));
            let db = match ProbeDb::load_dir(&dir) {
                Ok(db) => db,
                Err(e) => {
                    tell!("moonscan: {e}");
                    return 2;
                }
            };
            println!("{:<24} {:<5} {:>6} {:>8} {:>6}  ports", "probe", "proto", "rarity", "matches", "soft");
            for p in db.probes() {
                let ports = p.ports.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
                let tls = p.tls_ports.iter().map(|p| format!("{p}/tls")).collect::<Vec<_>>().join(",");
                let all = [ports, tls].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(",");
                let proto = match p.transport {
                    moonscan::service::probes::Transport::Tcp => "tcp",
                    moonscan::service::probes::Transport::Udp => "udp",
                };
                println!(
                    "{:<24} {:<5} {:>6} {:>8} {:>6}  {}",
                    p.name,
                    proto,
                    p.rarity,
                    p.matches.len(),
                    p.soft_matches.len(),
                    if all.is_empty() { "-".into() } else { all }
                );
            }
            // Rules compile when first used in a scan; here, all of them, to
            // say which ones never could.
            let mut broken = 0;
            for p in db.probes() {
                for (kind, rules) in [("match", &p.matches), ("soft match", &p.soft_matches)] {
                    for (i, r) in rules.iter().enumerate() {
                        if let Err(e) = r.compiles() {
                            broken += 1;
                            tell!("moonscan: probe {} {kind} {} ({}): {e}", p.name, i + 1, r.service());
                        }
                    }
                }
            }
            u8::from(broken > 0)
        }
        Cmd::Import { file, out } => {
            // nmap's own file is 2.5 MB.
            let text = match moonscan::files::read_capped(&file, 64 << 20, "probes import") {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(e) => {
                    tell!("moonscan: {e}");
                    return 2;
                }
            };
            let (spec, report) = import::convert(&text);
            let yaml = match serde_yaml::to_string(&spec) {
                Ok(y) => y,
                Err(e) => {
                    tell!("moonscan: cannot write YAML: {e}");
                    return 1;
                }
            };
            let header = format!("# converted by `moonscan probes import` from {}\n", file.display());
            let written = match &out {
                Some(path) => std::fs::write(path, header + &yaml).map_err(|e| format!("{}: {e}", path.display())),
                None => {
                    print!("{header}{yaml}");
                    Ok(())
                }
            };
            if let Err(e) = written {
                tell!("moonscan: {e}");
                return 1;
            }
            tell!(
                "moonscan: converted {} probes; kept {} of {} match rules ({} on the backtracking engine, with a step limit)",
                report.probes,
                report.rules_kept,
                report.rules_seen,
                report.rules_backtracking
            );
            for (reason, n) in &report.skipped {
                tell!("moonscan:   left out {n}: {reason}");
            }
            if report.approximated > 0 {
                tell!("moonscan:   {} templates used $SUBST/$I, simplified to $n", report.approximated);
            }
            for l in &report.unparsed {
                tell!("moonscan:   not understood: {l}");
            }
            0
        }
    }
}
