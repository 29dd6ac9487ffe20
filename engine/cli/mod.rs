//! The command line: nmap's flags, parsed in two steps.
//!
//! First [`parse`] turns argv into raw [`Args`] (clap), after rewriting
//! nmap's multi-letter single-dash flags (`-sT`, `-oJ`, `-iL`, `-Pn`) into
//! long ones clap understands. Then [`validate`] checks every value, resolves
//! hostnames once, and builds the [`Plan`]: a `ScanConfig` for the engine and
//! the outputs to open. The engine never sees clap types.

pub mod db;
pub mod flags;
mod manual;
mod nmap_words;
pub mod pack;
pub mod places;
pub mod plugins_cli;
pub mod probes;
pub mod resume;

pub use manual::{completions, man};

pub use nmap_words::unsupported;

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use moonscan::builder::{Built, DetectSettings, ResumePoint, ScriptSettings};
use moonscan::discovery::syn::LinkOptions;
use moonscan::findings::ScanType;
use moonscan::plugins::Budgets;
use moonscan::targets::Shard;
use moonscan::{Error, ErrorKind, Result};

#[derive(Debug, Parser)]
#[command(
    name = "moonscan",
    version,
    about = "A Lua-scriptable network scanner",
    override_usage = "moonscan [OPTIONS] TARGETS...\n       moonscan --resume FILE\n       moonscan <COMMAND>",
    args_conflicts_with_subcommands = true,
    // nmap takes an unambiguous prefix of a long option (--top-port 10).
    infer_long_args = true,
    after_help = "nmap-style flags are accepted: -sS (SYN scan, the default when raw sockets are allowed), \
                  -sT (connect scan), -sU (UDP), -sA/-sW/-sF/-sN/-sX/-sM, -sn (host discovery only), \
                  -sL (list targets), -p SPEC, -p-, -F, -T0..-T5, -oJ FILE (NDJSON, '-' for stdout), -iL FILE, \
                  -Pn (no host discovery), -PE -PP -PM -PS[ports] -PA[ports] -PU[ports] -PR, \
                  -n, -6, -e IFACE, -S ADDR, -v, --reason, --open."
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Finish an interrupted scan from its resume file (Ctrl-C writes moonscan.resume); takes no other arguments.
    #[arg(long = "resume", value_name = "FILE", exclusive = true)]
    pub resume: Option<PathBuf>,

    /// Targets: addresses, CIDR blocks, ranges (198.18.0.1-20) and hostnames.
    #[arg(value_name = "TARGETS")]
    pub targets: Vec<String>,

    /// Ports: 22,80,1000-2000, - (all), T:80,U:53, service names.
    #[arg(short = 'p', value_name = "SPEC", allow_hyphen_values = true)]
    pub ports: Option<String>,
    /// Scan the N most commonly open ports.
    #[arg(long = "top-ports", value_name = "N")]
    pub top_ports: Option<usize>,
    /// Fast mode: the 100 most commonly open ports.
    #[arg(short = 'F')]
    pub fast: bool,
    /// Ports never to scan, whatever -p, --top-ports or -F say (same syntax as -p).
    #[arg(long = "exclude-ports", value_name = "PORTS")]
    pub exclude_ports: Vec<String>,
    /// Scan ports in order (each address's ports ascending, addresses in
    /// order) instead of the keyed random order.
    #[arg(short = 'r')]
    pub sequential: bool,

    /// TCP connect scan (-sT): needs no privileges.
    #[arg(long = "connect")]
    pub connect: bool,
    /// SYN scan (-sS): raw packets, the default when raw sockets are allowed.
    #[arg(long = "syn")]
    pub syn: bool,
    /// ACK scan (-sA): raw ACK probes; a RST says `unfiltered`, silence or an
    /// ICMP unreachable `filtered` (maps firewall rules, not open ports).
    #[arg(long = "ack-scan")]
    pub ack_scan: bool,
    /// Window scan (-sW): as -sA, but a RST with a non-zero window says `open`
    /// and one with a zero window `closed` (true of some systems only).
    #[arg(long = "window-scan")]
    pub window_scan: bool,
    /// FIN scan (-sF): raw FIN probes; a RST says `closed`, silence
    /// `open|filtered` (RFC 793 systems; Windows answers RST on every port).
    #[arg(long = "fin-scan")]
    pub fin_scan: bool,
    /// NULL scan (-sN): probes with no TCP flag set; as -sF.
    #[arg(long = "null-scan")]
    pub null_scan: bool,
    /// Xmas scan (-sX): FIN, PSH and URG set; as -sF.
    #[arg(long = "xmas-scan")]
    pub xmas_scan: bool,
    /// Maimon scan (-sM): FIN and ACK set; as -sF.
    #[arg(long = "maimon-scan")]
    pub maimon_scan: bool,
    /// UDP scan (-sU).
    #[arg(long = "udp")]
    pub udp: bool,
    /// Service and version detection (-sV), with the plugins of the version category (as nmap's version scripts).
    #[arg(long = "service-version")]
    pub service_version: bool,
    /// Try probes up to this rarity, 0 (only the port's own) to 9 (all); default 7.
    #[arg(long = "version-intensity", value_name = "0-9", value_parser = clap::value_parser!(u8).range(0..=9))]
    pub version_intensity: Option<u8>,
    /// Same as --version-intensity 2.
    #[arg(long = "version-light")]
    pub version_light: bool,
    /// Same as --version-intensity 9.
    #[arg(long = "version-all")]
    pub version_all: bool,
    /// Give up service detection on a port after this long (e.g. 10s); default 20s (-T4 12s, -T5 6s).
    #[arg(long = "service-timeout", value_name = "TIME")]
    pub service_timeout: Option<String>,
    /// Ports in service detection at once (each holds one receive buffer); default 512.
    #[arg(long = "version-parallelism", value_name = "N")]
    pub version_parallelism: Option<usize>,
    /// Folder of probe YAML files (default: $MOONSCAN_PROBES, or the installed probes).
    #[arg(long = "probes", value_name = "DIR")]
    pub probes_dir: Option<PathBuf>,
    /// OS detection (-O): nmap's OS probes, matched against nmap-os-db.
    #[arg(short = 'O', long = "os-detection")]
    pub os_detection: bool,
    /// Show guesses when no fingerprint matches exactly (also --fuzzy).
    #[arg(long = "osscan-guess", alias = "fuzzy")]
    pub osscan_guess: bool,
    /// OS detection only of hosts with an open and a closed TCP port.
    #[arg(long = "osscan-limit")]
    pub osscan_limit: bool,
    /// Most OS detection tries of a host; default 5.
    #[arg(long = "max-os-tries", value_name = "N")]
    pub max_os_tries: Option<u32>,
    /// nmap-os-db to match against (default: the installed nmap's).
    #[arg(long = "os-db", value_name = "FILE")]
    pub os_db: Option<PathBuf>,
    /// Trace the path to each host up (--traceroute).
    #[arg(long = "traceroute")]
    pub traceroute: bool,
    /// -A: OS detection, version detection, default plugins and traceroute (-O -sV -sC --traceroute).
    #[arg(short = 'A')]
    pub aggressive: bool,
    /// Run the default plugins (-sC), as --script default.
    #[arg(long = "script-default")]
    pub script_default: bool,
    /// Plugins to run: ids, globs, categories, all, and/or/not, paths (e.g. "default or safe", "http-*,ssl-cert").
    #[arg(long = "script", alias = "plugins", value_name = "EXPR")]
    pub script: Option<String>,
    /// Plugin arguments: k=v,k2=v2 (ctx.args).
    #[arg(long = "script-args", value_name = "ARGS")]
    pub script_args: Option<String>,
    /// Plugin arguments from FILE (k=v per line or comma-separated).
    #[arg(long = "script-args-file", value_name = "FILE")]
    pub script_args_file: Option<PathBuf>,
    /// Stop a plugin run after this long (e.g. 10s, 500ms); default 10s.
    #[arg(long = "script-timeout", value_name = "TIME")]
    pub script_timeout: Option<String>,
    /// Interrupt steps (loop iterations and calls) one plugin run may take; default 50000000.
    #[arg(long = "script-max-steps", value_name = "N")]
    pub script_max_steps: Option<u64>,
    /// Lua memory of each plugin VM, in MiB; default 64.
    #[arg(long = "script-max-memory", value_name = "MIB")]
    pub script_max_memory: Option<usize>,
    /// Bytes one plugin run may read from the network; default 4194304.
    #[arg(long = "script-max-read", value_name = "BYTES")]
    pub script_max_read: Option<u64>,
    /// Bytes one plugin run may send (TCP and UDP; at most 262144 of them in datagrams); default 4194304.
    #[arg(long = "script-max-send", value_name = "BYTES")]
    pub script_max_send: Option<u64>,
    /// Sockets one plugin run may open; default 16.
    #[arg(long = "script-max-sockets", value_name = "N")]
    pub script_max_sockets: Option<u32>,
    /// Bytes of findings and results one plugin run may report; default 1048576.
    #[arg(long = "script-max-output", value_name = "BYTES")]
    pub script_max_output: Option<u64>,
    /// Bytes of findings and results all plugin runs of the scan may report; default 33554432.
    #[arg(long = "script-max-scan-output", value_name = "BYTES")]
    pub script_max_scan_output: Option<u64>,
    /// Plugin VMs running at once; default 16.
    #[arg(long = "script-parallelism", value_name = "N")]
    pub script_parallelism: Option<usize>,
    /// Folder of installed plugins (default: $MOONSCAN_PLUGINS, or the installed ones).
    #[arg(long = "plugin-dir", value_name = "DIR")]
    pub plugin_dir: Option<PathBuf>,
    /// Show what the plugins an expression selects do (nmap's --script-help), then exit.
    #[arg(long = "script-help", value_name = "EXPR")]
    pub script_help: Option<String>,
    /// Show plugins' log lines in the text output.
    #[arg(long = "script-trace")]
    pub script_trace: bool,
    /// Pin installed packs to this lock file (default: ./moonscan.lock if there is one).
    #[arg(long = "lock", value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// Treat every host as up: no host discovery before the port scan (-Pn).
    #[arg(long = "no-ping")]
    pub no_ping: bool,
    /// Host discovery probes, as nmap's -PE -PP -PM -PS[ports] -PA[ports] -PU[ports] -PR.
    #[arg(long = "ping", value_name = "KIND[PORTS]", hide = true)]
    pub ping: Vec<String>,
    /// Host discovery only, no port scan (-sn).
    #[arg(long = "ping-scan")]
    pub ping_scan: bool,
    /// List the targets, send nothing (-sL).
    #[arg(long = "list-scan")]
    pub list_scan: bool,
    /// Give up on a host whose ports have been scanned this long (e.g. 30s, 15m).
    #[arg(long = "host-timeout", value_name = "TIME")]
    pub host_timeout: Option<String>,

    /// Timing template, 0 (paranoid) to 5 (insane); default 3.
    #[arg(short = 'T', value_name = "0-5", value_parser = clap::value_parser!(u8).range(0..=5))]
    pub timing: Option<u8>,
    /// Send no more than this many probes per second.
    #[arg(long = "max-rate", value_name = "N", allow_negative_numbers = true)]
    pub max_rate: Option<f64>,
    /// Keep enough probes in flight to send at least this many per second
    /// even when nothing answers.
    #[arg(long = "min-rate", value_name = "N", allow_negative_numbers = true)]
    pub min_rate: Option<f64>,
    /// Extra tries for a probe that got no answer.
    #[arg(long = "max-retries", value_name = "N")]
    pub max_retries: Option<u32>,
    /// Most probes outstanding at once.
    #[arg(long = "max-parallelism", value_name = "N")]
    pub max_parallelism: Option<usize>,
    /// How long to wait for an answer (e.g. 500ms, 2s).
    #[arg(long = "max-rtt-timeout", value_name = "TIME")]
    pub max_rtt_timeout: Option<String>,
    /// How long to wait for an answer before any round trip is known (raw scans).
    #[arg(long = "initial-rtt-timeout", value_name = "TIME")]
    pub initial_rtt_timeout: Option<String>,
    /// Wait at least this long between two probes to the same host (e.g. 1s).
    #[arg(long = "scan-delay", value_name = "TIME")]
    pub scan_delay: Option<String>,

    /// NDJSON events to FILE ('-' for stdout) (-oJ).
    #[arg(long = "output-json", value_name = "FILE")]
    pub output_json: Option<PathBuf>,
    /// nmap normal output (-oN).
    #[arg(long = "output-normal", value_name = "FILE")]
    pub output_normal: Option<PathBuf>,
    /// nmap XML output (-oX).
    #[arg(long = "output-xml", value_name = "FILE")]
    pub output_xml: Option<PathBuf>,
    /// nmap grepable output (-oG).
    #[arg(long = "output-grepable", value_name = "FILE")]
    pub output_grepable: Option<PathBuf>,
    /// The XSL stylesheet -oX names (nmap's: a path or URL). Default: nmap's
    /// nmap.xsl when nmap is installed, so `xsltproc scan.xml` gives its report.
    #[arg(long = "stylesheet", value_name = "PATH|URL", conflicts_with_all = ["webxml", "no_stylesheet"])]
    pub stylesheet: Option<String>,
    /// -oX names nmap's stylesheet on nmap.org (portable XML).
    #[arg(long = "webxml", conflicts_with = "no_stylesheet")]
    pub webxml: bool,
    /// -oX names no stylesheet.
    #[arg(long = "no-stylesheet")]
    pub no_stylesheet: bool,
    /// Findings as SARIF 2.1.0 to FILE ('-' for stdout): one result per
    /// finding, one rule per selected plugin.
    #[arg(long = "sarif", value_name = "FILE")]
    pub sarif: Option<PathBuf>,
    /// The three nmap formats at once (-oA).
    #[arg(long = "output-all", value_name = "BASE")]
    pub output_all: Option<PathBuf>,

    /// Store the scan in a SQLite FILE or a PostgreSQL database (postgres://user@host/db; a password
    /// not in the URL comes from $PGPASSWORD or ~/.pgpass, as for psql; outputs never show it).
    #[arg(long = "db", value_name = "FILE|URL")]
    pub db: Option<String>,

    /// Read targets from FILE ('-' for stdin) (-iL).
    #[arg(long = "input-list", value_name = "FILE")]
    pub input_list: Option<PathBuf>,
    /// Never scan these targets (comma-separated).
    #[arg(long = "exclude", value_name = "LIST")]
    pub exclude: Vec<String>,
    /// Never scan the targets listed in FILE.
    #[arg(long = "excludefile", value_name = "FILE")]
    pub exclude_file: Vec<PathBuf>,
    /// No reverse DNS: hosts are reported by address (names given as
    /// targets are still resolved, as nmap's -n).
    #[arg(short = 'n')]
    pub no_dns: bool,
    /// Reverse DNS for every target, up or not (default: the hosts found up).
    #[arg(short = 'R', conflicts_with = "no_dns")]
    pub always_rdns: bool,
    /// Ask these DNS servers for reverse lookups (ADDR[:PORT],...).
    #[arg(long = "dns-servers", value_name = "LIST")]
    pub dns_servers: Option<String>,
    /// Reverse lookups through the system's resolver (getnameinfo), one at a time per thread.
    #[arg(long = "system-dns", conflicts_with = "dns_servers")]
    pub system_dns: bool,
    /// Scan every address of a name given as a target (default: its first).
    #[arg(long = "resolve-all")]
    pub resolve_all: bool,
    /// Send raw probes through this interface.
    #[arg(short = 'e', value_name = "IFACE")]
    pub iface: Option<String>,
    /// Source address of raw probes.
    #[arg(short = 'S', value_name = "ADDR")]
    pub source: Option<IpAddr>,
    /// Also report closed ports (-v), not only count them.
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Show why each port has its state (syn-ack, reset, conn-refused).
    #[arg(long = "reason")]
    pub reason: bool,
    /// Report open ports only, whatever -v says.
    #[arg(long = "open")]
    pub open_only: bool,
    /// IPv6: names resolve to their AAAA addresses; IPv4 targets are refused.
    #[arg(short = '6')]
    pub ipv6: bool,

    /// Scan only part K of N of the target space (1-based).
    #[arg(long = "shard", value_name = "K/N")]
    pub shard: Option<String>,
    /// Key of the scan order (default: random), to repeat an order.
    #[arg(long = "seed", value_name = "N")]
    pub seed: Option<u64>,
}

/// moonscan's other commands. A target with one of these names is scanned
/// when any option comes first (`moonscan -p 80 db`) or after `--`.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Make, sign, verify, install and pin plugin packs.
    Pack(pack::PackArgs),
    /// Show, compare and export scans stored with --db.
    Db(db::DbArgs),
    /// Show or import service probes.
    Probes(probes::ProbesArgs),
    /// List, show and test plugins.
    Plugins(plugins_cli::PluginsArgs),
    /// Print shell completions for moonscan to stdout (scripts/install.sh installs them).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print moonscan's man page (roff) to stdout, or a subcommand's (moonscan-pack(1)...) (scripts/install.sh installs them).
    Man {
        /// pack, db, probes or plugins: that command's page.
        page: Option<String>,
    },
}

/// Parses argv (including the program name).
pub fn parse(argv: &[String]) -> std::result::Result<Args, clap::Error> {
    Args::try_parse_from(nmap_words::rewrite(argv))
}

/// Where a format goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Dest {
    Stdout,
    File(PathBuf),
}

/// nmap's output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Normal,
    Xml,
    Grepable,
}

impl Dest {
    fn from(p: PathBuf) -> Dest {
        if p.as_os_str() == "-" {
            Dest::Stdout
        } else {
            Dest::File(p)
        }
    }
}

/// A validated invocation.
#[derive(Debug)]
pub struct Plan {
    /// The validated scan (the library's own checks and policy).
    pub scan: Built,
    pub json: Option<Dest>,
    /// nmap's formats: -oN, -oX, -oG, and -oA's three.
    pub outputs: Vec<(Format, Dest)>,
    /// `--sarif FILE`.
    pub sarif: Option<Dest>,
    /// `--db FILE|postgres://...`.
    pub db: Option<String>,
    /// Text for people on stdout (off when a machine format took stdout).
    pub text_on_stdout: bool,
    /// Show reasons in the text output.
    pub reasons: bool,
    /// The stylesheet -oX names (`<?xml-stylesheet?>`), if any.
    pub stylesheet: Option<String>,
    /// Show plugin log lines in the text output.
    pub logs: bool,
    /// The resume file a resumed scan came from (its outputs are appended to).
    pub resume_file: Option<PathBuf>,
}

fn usage(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Config, msg)
}

/// Checks every value and builds the plan. `nofile` is the process's
/// open-file limit; `raw_ok` says whether raw sockets may be opened;
/// `resume` is the resume file a scan finishes, with its path. Errors and
/// notes are in the command's words ([`flags`]).
pub fn validate(
    args: Args,
    argv: &[String],
    nofile: u64,
    raw_ok: bool,
    resume: Option<(ResumePoint, PathBuf)>,
) -> Result<Plan> {
    let mut plan = plan(args, argv, nofile, raw_ok, resume).map_err(|e| e.reword(|m| flags::word(m).into_owned()))?;
    for note in &mut plan.scan.notes {
        *note = flags::word(note).into_owned();
    }
    Ok(plan)
}

fn plan(
    args: Args,
    argv: &[String],
    nofile: u64,
    raw_ok: bool,
    resume: Option<(ResumePoint, PathBuf)>,
) -> Result<Plan> {
    let mut args = args;
    if args.aggressive {
        (args.os_detection, args.service_version, args.script_default, args.traceroute) = (true, true, true, true);
    }
    let kind = check_flags(&args)?;

    let mut b = scope(&args, argv, nofile, raw_ok, kind)?;
    b = pace_and_discovery(b, &args)?;
    b = stages(b, &args)?;
    let resume_file = match resume {
        Some((point, path)) => {
            b = b.resume(point);
            Some(path)
        }
        None => None,
    };
    let scan = b.build()?;

    let json = args.output_json.clone().map(Dest::from);
    let outputs = nmap_outputs(&args)?;
    let sarif = args.sarif.clone().map(Dest::from);
    let on_stdout = outputs.iter().filter(|(_, d)| *d == Dest::Stdout).count()
        + usize::from(json == Some(Dest::Stdout))
        + usize::from(sarif == Some(Dest::Stdout));
    if on_stdout > 1 {
        return Err(usage("only one output can go to stdout ('-')"));
    }
    let text_on_stdout = on_stdout == 0;
    if let Some(db) = &args.db {
        if db.is_empty() {
            return Err(usage("--db needs a file name or a postgres:// URL"));
        }
    }
    Ok(Plan {
        scan,
        json,
        outputs,
        sarif,
        db: args.db.clone(),
        text_on_stdout,
        reasons: args.reason,
        stylesheet: moonscan::output::xml_stylesheet(
            args.stylesheet.as_deref(),
            args.webxml,
            args.no_stylesheet,
            std::path::Path::exists,
        ),
        logs: args.script_trace,
        resume_file,
    })
}

/// The checks of flags that apply together or exclude each other; the
/// scan type chosen among -sS, -sT, -sA, -sW, -sF, -sN, -sX and -sM.
fn check_flags(args: &Args) -> Result<Option<ScanType>> {
    if !args.os_detection
        && (args.osscan_guess || args.osscan_limit || args.max_os_tries.is_some() || args.os_db.is_some())
    {
        return Err(usage("--osscan-*, --max-os-tries and --os-db apply with -O only"));
    }
    let kinds = [
        (args.syn, ScanType::Syn),
        (args.connect, ScanType::Connect),
        (args.ack_scan, ScanType::Ack),
        (args.window_scan, ScanType::Window),
        (args.fin_scan, ScanType::Fin),
        (args.null_scan, ScanType::Null),
        (args.xmas_scan, ScanType::Xmas),
        (args.maimon_scan, ScanType::Maimon),
    ];
    let mut chosen_kinds = kinds.iter().filter(|k| k.0).map(|k| k.1);
    let kind = chosen_kinds.next();
    if chosen_kinds.next().is_some() {
        return Err(usage("choose one of -sS, -sT, -sA, -sW, -sF, -sN, -sX and -sM"));
    }
    let version_flags = [args.version_intensity.is_some(), args.version_light, args.version_all];
    if version_flags.iter().filter(|&&b| b).count() > 1 {
        return Err(usage("choose one of --version-intensity, --version-light and --version-all"));
    }
    if !args.service_version
        && (version_flags.contains(&true)
            || args.service_timeout.is_some()
            || args.version_parallelism.is_some()
            || args.probes_dir.is_some())
    {
        return Err(usage("--version-*, --service-timeout and --probes apply with -sV only"));
    }
    let chosen = [args.ports.is_some(), args.top_ports.is_some(), args.fast].iter().filter(|&&b| b).count();
    if chosen > 1 {
        return Err(Error::new(ErrorKind::PortSpec, "choose one of -p, --top-ports and -F"));
    }
    Ok(kind)
}

/// The builder with what the scan covers: targets, names, ports, scan
/// type, and the machine's limits.
fn scope(
    args: &Args,
    argv: &[String],
    nofile: u64,
    raw_ok: bool,
    kind: Option<ScanType>,
) -> Result<moonscan::ScanBuilder> {
    let mut b = moonscan::Scan::builder()
        .places(places::from_env())
        .targets(args.targets.iter().cloned())
        .exclude(args.exclude.iter().flat_map(|l| l.split(',')).map(str::to_string))
        .reverse_dns(moonscan::rdns::Settings {
            when: match (args.no_dns, args.always_rdns || args.list_scan) {
                (true, _) => moonscan::rdns::When::Never,
                (false, true) => moonscan::rdns::When::Always,
                (false, false) => moonscan::rdns::When::Up,
            },
            via: match (&args.dns_servers, args.system_dns) {
                (Some(list), _) => moonscan::rdns::Via::Servers(moonscan::rdns::parse_servers(list)?),
                (None, true) => moonscan::rdns::Via::System,
                (None, false) => moonscan::rdns::Via::Resolver,
            },
        })
        .resolve_all(args.resolve_all)
        .ipv6(args.ipv6)
        .report_closed(args.verbose > 0 && !args.open_only)
        .verbosity(args.verbose)
        .link(LinkOptions { iface: args.iface.clone(), src: args.source })
        .command_line(argv.to_vec())
        .open_file_limit(nofile)
        .raw_sockets(raw_ok)
        .timing_template(args.timing.unwrap_or(3));
    if let Some(path) = &args.input_list {
        b = b.target_file(path);
    }
    for spec in &args.exclude_ports {
        b = b.exclude_ports(spec);
    }
    b = b.sequential(args.sequential);
    for path in &args.exclude_file {
        b = b.exclude_file(path);
    }
    b = match (&args.ports, args.top_ports, args.fast) {
        (Some(spec), _, _) => b.ports(spec),
        (_, Some(n), _) => b.top_ports(n),
        (_, _, true) => b.top_ports(100),
        _ => b,
    };
    // -sS is the default anyway (and falls back to -sT without raw sockets);
    // -sU alone scans UDP only, with a TCP scan type both.
    match kind {
        Some(ScanType::Syn) if args.udp => b = b.scan_type(ScanType::Syn),
        Some(kind) if kind != ScanType::Syn => b = b.scan_type(kind),
        _ => {}
    }
    b = b.udp(args.udp);
    Ok(b)
}

/// `b` with the scan's pace and retries, host discovery, and how the
/// scan is split and seeded.
fn pace_and_discovery(mut b: moonscan::ScanBuilder, args: &Args) -> Result<moonscan::ScanBuilder> {
    if let Some(rate) = args.max_rate {
        b = b.max_rate(rate);
    }
    if let Some(rate) = args.min_rate {
        b = b.min_rate(rate);
    }
    if let Some(r) = args.max_retries {
        b = b.max_retries(r);
    }
    if let Some(w) = args.max_parallelism {
        b = b.max_parallelism(w);
    }
    if let Some(t) = &args.scan_delay {
        b = b.scan_delay(parse_time(t)?);
    }
    if let Some(t) = &args.host_timeout {
        b = b.host_timeout(parse_time(t)?);
    }
    b = b.skip_discovery(args.no_ping).ping_only(args.ping_scan).list_only(args.list_scan);
    for p in &args.ping {
        b = b.ping_probe(p);
    }
    if let Some(t) = &args.max_rtt_timeout {
        b = b.max_rtt_timeout(parse_time(t)?);
    }
    if let Some(t) = &args.initial_rtt_timeout {
        b = b.initial_rtt_timeout(parse_time(t)?);
    }
    if let Some(s) = &args.shard {
        b = b.shard(Shard::parse(s)?);
    }
    if let Some(seed) = args.seed {
        b = b.seed(seed);
    }
    if let Some(lock) = &args.lock {
        b = b.lock(lock);
    }
    Ok(b)
}

/// `b` with the stages after the port scan: service detection, OS
/// detection, traceroute and plugins.
fn stages(mut b: moonscan::ScanBuilder, args: &Args) -> Result<moonscan::ScanBuilder> {
    if args.service_version {
        b = b.detection(DetectSettings {
            intensity: match (args.version_intensity, args.version_light, args.version_all) {
                (Some(n), _, _) => Some(n),
                (_, true, _) => Some(2),
                (_, _, true) => Some(9),
                _ => None,
            },
            port_timeout: args.service_timeout.as_deref().map(parse_time).transpose()?,
            parallelism: args.version_parallelism,
            probes_dir: args.probes_dir.clone(),
        });
    }
    if args.os_detection {
        b = b.os_detection(moonscan::builder::OsSettings {
            guess: args.osscan_guess,
            limit: args.osscan_limit,
            max_tries: args.max_os_tries,
            db: args.os_db.clone(),
        });
    }
    b = b.traceroute(args.traceroute);
    if let Some(settings) = script_settings(args)? {
        b = b.script_settings(settings);
    }
    Ok(b)
}

/// nmap's formats the scan writes: -oN, -oX, -oG, and -oA's three.
fn nmap_outputs(args: &Args) -> Result<Vec<(Format, Dest)>> {
    let mut outputs: Vec<(Format, Dest)> = Vec::new();
    for (format, path) in [
        (Format::Normal, &args.output_normal),
        (Format::Xml, &args.output_xml),
        (Format::Grepable, &args.output_grepable),
    ] {
        if let Some(p) = path {
            outputs.push((format, Dest::from(p.clone())));
        }
    }
    if let Some(base) = &args.output_all {
        if base.as_os_str() == "-" {
            return Err(usage("-oA needs a base name for its three files, not '-'"));
        }
        let with = |ext: &str| {
            let mut p = base.clone().into_os_string();
            p.push(ext);
            Dest::File(PathBuf::from(p))
        };
        outputs.push((Format::Normal, with(".nmap")));
        outputs.push((Format::Xml, with(".xml")));
        outputs.push((Format::Grepable, with(".gnmap")));
    }
    Ok(outputs)
}

/// The plugins `--script`/`-sC` select (and `-sV`'s version plugins), with
/// their budgets and arguments.
fn script_settings(args: &Args) -> Result<Option<ScriptSettings>> {
    let expr = match (&args.script, args.script_default) {
        (None, false) => {
            let plugin_flags = [
                args.script_args.is_some(),
                args.script_args_file.is_some(),
                args.script_timeout.is_some(),
                args.script_max_steps.is_some(),
                args.script_max_memory.is_some(),
                args.script_max_read.is_some(),
                args.script_max_send.is_some(),
                args.script_max_sockets.is_some(),
                args.script_max_output.is_some(),
                args.script_max_scan_output.is_some(),
                args.script_parallelism.is_some(),
                args.plugin_dir.is_some(),
                args.script_trace,
            ];
            if !plugin_flags.contains(&true) {
                return Ok(None);
            }
            // -sV runs the version plugins (the builder adds them), with these settings.
            if !args.service_version {
                return Err(usage("--script-* and --plugin-dir apply with --script, -sC or -sV only"));
            }
            "version".to_string()
        }
        (Some(e), false) => e.clone(),
        (None, true) => "default".to_string(),
        (Some(e), true) => format!("default,{e}"),
    };
    let mut budgets = Budgets::default();
    if let Some(t) = &args.script_timeout {
        budgets.wall = parse_time(t)?;
    }
    if let Some(n) = args.script_max_steps {
        budgets.steps = n.max(1);
    }
    if let Some(mib) = args.script_max_memory {
        if !(1..=4096).contains(&mib) {
            return Err(usage("--script-max-memory must be 1-4096 MiB"));
        }
        budgets.memory = mib << 20;
    }
    if let Some(n) = args.script_max_read {
        budgets.read_bytes = n;
    }
    if let Some(n) = args.script_max_send {
        budgets.send_bytes = n;
    }
    if let Some(n) = args.script_max_sockets {
        budgets.sockets = n;
    }
    if let Some(n) = args.script_max_output {
        budgets.output = n;
    }
    if let Some(n) = args.script_max_scan_output {
        budgets.scan_output = n;
    }
    let mut script_args = std::collections::BTreeMap::new();
    let mut add_args = |text: &str, from: &str| -> Result<()> {
        let items = moonscan::plugins::load::script_args::parse(text).map_err(|e| usage(format!("{from}: {e}")))?;
        script_args.extend(items);
        Ok(())
    };
    if let Some(path) = &args.script_args_file {
        let text = moonscan::files::read_text_capped(path, 1 << 20, "--script-args-file")?;
        add_args(&text, "--script-args-file")?;
    }
    if let Some(a) = &args.script_args {
        add_args(a, "--script-args")?;
    }
    Ok(Some(ScriptSettings {
        expr,
        args: script_args,
        budgets,
        parallelism: args.script_parallelism,
        plugin_dir: args.plugin_dir.clone(),
    }))
}

/// nmap's time values: seconds by default, or with ms/s/m/h.
fn parse_time(s: &str) -> Result<Duration> {
    let bad = || usage(format!("invalid time '{s}': use e.g. 500ms, 2s, 1m"));
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| bad())?;
    if !(v.is_finite() && v > 0.0) || v * mult > 86_400.0 {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(v * mult))
}

#[cfg(test)]
mod tests {
    use super::*;
    use moonscan::discovery::Timing;

    fn argv(s: &str) -> Vec<String> {
        std::iter::once("moonscan").chain(s.split_whitespace()).map(str::to_string).collect()
    }

    fn plan(s: &str) -> Result<Plan> {
        let a = argv(s);
        validate(parse(&a).expect("clap accepts it"), &a, 1 << 20, true, None)
    }

    #[test]
    fn nmap_style_flags_are_understood() {
        let p = plan("-sT -p- -T4 -n -Pn -oJ - 198.18.0.2").unwrap();
        assert_eq!(p.scan.config().space.ports().len(), 65535);
        assert_eq!(p.json, Some(Dest::Stdout));
        assert!(!p.text_on_stdout);
        assert_eq!(p.scan.config().timing, Timing { window: 4096, ..Timing::template(4).unwrap() });
    }

    #[test]
    fn reverse_dns_follows_nmaps_flags() {
        use moonscan::rdns::{Settings, Via, When};
        let rdns = |args: &str| plan(args).unwrap().scan.config().rdns.clone();
        assert_eq!(rdns("127.0.0.1"), Settings { when: When::Up, via: Via::Resolver });
        assert_eq!(rdns("-n 127.0.0.1").when, When::Never);
        assert_eq!(rdns("-R 127.0.0.1").when, When::Always);
        assert_eq!(rdns("-sL 127.0.0.1").when, When::Always, "a list scan names every target");
        assert_eq!(rdns("-sL -n 127.0.0.1").when, When::Never);
        assert_eq!(rdns("--system-dns 127.0.0.1").via, Via::System);
        let servers = vec!["198.18.0.2:53".parse().unwrap(), "127.0.0.1:5353".parse().unwrap()];
        assert_eq!(rdns("--dns-servers 198.18.0.2,127.0.0.1:5353 127.0.0.1").via, Via::Servers(servers));
        // -n no longer refuses a name: it only leaves reverse DNS out, as nmap's.
        let p = plan("-n localhost").unwrap();
        assert_eq!(p.scan.config().hostnames[0].name, "localhost");
        assert!(parse(&argv("-R -n 127.0.0.1")).is_err(), "-R and -n contradict");
    }

    #[test]
    fn defaults_are_top_1000_and_t3() {
        let p = plan("127.0.0.1").unwrap();
        assert_eq!(p.scan.config().space.ports().len(), 1000);
        assert!(p.text_on_stdout);
        assert_eq!(plan("-F 127.0.0.1").unwrap().scan.config().space.ports().len(), 100);
    }

    #[test]
    fn window_respects_the_open_file_limit() {
        let a = argv("-T5 127.0.0.1");
        let p = validate(parse(&a).unwrap(), &a, 200, true, None).unwrap();
        assert_eq!(p.scan.config().timing.window, 136);
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for (args, needle) in [
            ("-p 70000 127.0.0.1", "out of range"),
            ("-p 5-1 127.0.0.1", "reversed"),
            ("300.1.1.1", "octet 300"),
            ("198.18.0.0/33", "prefix length 33"),
            ("", "no targets"),
            ("--dns-servers ns.example 127.0.0.1", "--dns-servers: 'ns.example' is not an IP address"),
            ("--dns-servers , 127.0.0.1", "--dns-servers names no server"),
            ("-p 80 -F 127.0.0.1", "choose one"),
            ("--max-rate 0 127.0.0.1", "--max-rate"),
            ("--shard 3/2 127.0.0.1", "invalid shard"),
            ("--exclude 127.0.0.1 127.0.0.1", "every target is excluded"),
            ("-6 127.0.0.1", "IPv4 target"),
            ("--max-rtt-timeout soon 127.0.0.1", "invalid time"),
            ("-sS -sT 127.0.0.1", "choose one"),
            ("-sT -e lo 127.0.0.1", "raw (SYN) scans only"),
            ("--min-rate 500 --max-rate 100 127.0.0.1", "above --max-rate"),
            ("--initial-rtt-timeout 2s --max-rtt-timeout 1s 127.0.0.1", "above --max-rtt-timeout"),
            ("--initial-rtt-timeout 0ms 127.0.0.1", "invalid time"),
            ("-p 22,80 --exclude-ports 1-100 127.0.0.1", "leaves no port"),
            ("--scan-delay soon 127.0.0.1", "invalid time"),
            ("--scan-delay 2h 127.0.0.1", "at most 1h"),
            ("--exclude-ports 99999 127.0.0.1", "out of range"),
            ("-sA -sF 198.18.0.2", "choose one of -sS"),
            ("-sF -p 80 127.0.0.1", "cannot reach this machine's own addresses"),
        ] {
            let e = plan(args).expect_err(args);
            assert!(e.is_usage(), "{args}: {e}");
            assert!(e.to_string().contains(needle), "{args}: {e}");
        }
    }

    #[test]
    fn excluded_ports_are_never_in_the_space() {
        let p = plan("-p 20-30,80 --exclude-ports 21-23 --exclude-ports T:80 -n 127.0.0.1").unwrap();
        assert_eq!(p.scan.config().space.ports(), &[20, 24, 25, 26, 27, 28, 29, 30]);
        // With --top-ports too.
        let p = plan("--top-ports 10 --exclude-ports 80,443 -n 127.0.0.1").unwrap();
        let ports = p.scan.config().space.ports();
        assert_eq!(ports.len(), 8);
        assert!(!ports.contains(&80) && !ports.contains(&443));
    }

    #[test]
    fn dash_r_walks_ports_in_order() {
        let p = plan("-r -p 443,22,80 -n 127.0.0.1-2").unwrap();
        let c = p.scan.config();
        let walked: Vec<(String, u16)> =
            c.space.order(c.seed, c.shard, 0).map(|(ip, port)| (ip.to_string(), port)).collect();
        let want: Vec<(String, u16)> =
            ["127.0.0.1", "127.0.0.2"].iter().flat_map(|ip| [22, 80, 443].map(|port| (ip.to_string(), port))).collect();
        assert_eq!(walked, want);
        // Without -r the order is keyed, not the index order (for this seed).
        let p = plan("--seed 7 -p 1-50 -n 127.0.0.1").unwrap();
        let c = p.scan.config();
        let walked: Vec<u16> = c.space.order(c.seed, c.shard, 0).map(|(_, port)| port).collect();
        assert_ne!(walked, (1..=50).collect::<Vec<u16>>());
    }

    #[test]
    fn the_other_tcp_scans_are_chosen_by_nmaps_flags() {
        for (flag, kind) in [
            ("-sA", ScanType::Ack),
            ("-sW", ScanType::Window),
            ("-sF", ScanType::Fin),
            ("-sN", ScanType::Null),
            ("-sX", ScanType::Xmas),
            ("-sM", ScanType::Maimon),
        ] {
            let p = plan(&format!("{flag} -p 80 198.18.0.2")).unwrap();
            assert_eq!(p.scan.config().scan_type, kind, "{flag}");
        }
        // Without raw sockets they cannot run (no connect fallback).
        let a = argv("-sN -p 80 198.18.0.2");
        let e = validate(parse(&a).unwrap(), &a, 1 << 20, false, None).expect_err("no raw sockets");
        assert!(e.to_string().contains("needs root or CAP_NET_RAW"), "{e}");
    }

    #[test]
    fn scan_type_follows_privileges() {
        let a = argv("-p 80 198.18.0.2");
        let p = validate(parse(&a).unwrap(), &a, 1 << 20, true, None).unwrap();
        assert_eq!(p.scan.config().scan_type, ScanType::Syn);
        assert!(p.scan.notes.is_empty());
        let a = argv("-p 80 127.0.0.1");
        let p = validate(parse(&a).unwrap(), &a, 1 << 20, true, None).unwrap();
        assert_eq!(p.scan.config().scan_type, ScanType::Connect, "loopback is probed with connect()");
        assert!(p.scan.notes[0].contains("own addresses"), "{:?}", p.scan.notes);
        let a = argv("-sS -p 80 127.0.0.1");
        let p = validate(parse(&a).unwrap(), &a, 1 << 20, false, None).unwrap();
        assert_eq!(p.scan.config().scan_type, ScanType::Connect);
        assert!(p.scan.notes[0].contains("connect scan"), "{:?}", p.scan.notes);
    }

    #[test]
    fn min_rate_widens_the_window_to_keep_its_promise() {
        let p = plan("--min-rate 100000 --max-parallelism 10 --max-rtt-timeout 1s --max-retries 1 127.0.0.1").unwrap();
        assert_eq!(p.scan.config().timing.raw_window, 200_000, "100k/s for 1 s, two sends each");
        assert!(plan("--min-rate 0 127.0.0.1").is_err());
    }

    /// nmap's meanings: --min-rate a floor, -T3..-T5 adaptive from a start
    /// rate, -T0..-T2 a fixed pace, --initial-rtt-timeout the first wait.
    #[test]
    fn timing_options_keep_nmaps_meaning() {
        let t = plan("--min-rate 300 --max-rate 900 --initial-rtt-timeout 250ms 127.0.0.1")
            .unwrap()
            .scan
            .config()
            .timing
            .clone();
        assert_eq!((t.min_rate, t.max_rate), (Some(300.0), Some(900.0)));
        assert_eq!(t.initial_rtt_timeout, Some(Duration::from_millis(250)));
        assert!(t.initial_rate.is_some(), "-T3 adapts");
        let t2 = plan("-T2 127.0.0.1").unwrap().scan.config().timing.clone();
        assert_eq!(t2.initial_rate, None, "-T2 keeps its fixed pace");
    }

    #[test]
    fn times_take_units() {
        assert_eq!(parse_time("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_time("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_time("1m").unwrap(), Duration::from_secs(60));
        assert!(parse_time("-1s").is_err());
    }
}
