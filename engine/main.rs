//! The `moonscan` command: parses flags, runs one scan, renders its events.
//!
//! Exit status: 0 when the scan ran without errors, 1 when it ran but some
//! targets failed (or it was interrupted, or an output could not be
//! written), 2 for bad usage. Results go to stdout; the progress line and
//! messages go to stderr.

/// Says a line on stderr as `moonscan::tell!` does, in the command's
/// words (the library's messages name settings: [`cli::flags`]).
macro_rules! tell {
    ($($t:tt)*) => {{
        let line = format!($($t)*);
        moonscan::tell!("{}", $crate::cli::flags::word(&line));
    }};
}

mod cli;

use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use moonscan::output::{self, Ndjson, Sink, Text};
use moonscan::pipeline::Stats;
use moonscan::ScanHandle;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    let parsed = |argv: &[String]| {
        // An nmap option moonscan does not support: one line, not clap's five.
        if let Some(line) = cli::unsupported(argv) {
            tell!("{line}");
            return Err(ExitCode::from(2));
        }
        cli::parse(argv).map_err(|e| {
            // clap quotes what was typed (or read from a resume file): screened.
            let text = e.render().to_string();
            let _ = if e.use_stderr() {
                write!(output::Screened(io::stderr().lock()), "{text}")
            } else {
                write!(output::Screened(io::stdout().lock()), "{text}")
            };
            ExitCode::from(if e.use_stderr() { 2 } else { 0 })
        })
    };
    let mut args = match parsed(&argv) {
        Ok(a) => a,
        Err(code) => return code,
    };
    match args.command.take() {
        Some(cli::Command::Probes(a)) => return ExitCode::from(cli::probes::run(a)),
        Some(cli::Command::Db(a)) => return ExitCode::from(cli::db::run(a)),
        Some(cli::Command::Pack(a)) => return ExitCode::from(cli::pack::run(a)),
        Some(cli::Command::Plugins(a)) => return ExitCode::from(cli::plugins_cli::run(a)),
        Some(cli::Command::Completions { shell }) => return print_all(&cli::completions(shell)),
        Some(cli::Command::Man { page }) => match cli::man(page.as_deref()) {
            Ok(text) => return print_all(&text),
            Err(why) => {
                tell!("moonscan: {why}");
                return ExitCode::from(2);
            }
        },
        None => {}
    }
    if let Some(expr) = &args.script_help {
        return ExitCode::from(cli::plugins_cli::script_help(expr, args.plugin_dir.clone()));
    }
    // `--resume FILE`: the interrupted scan's own command line, then its progress.
    let resumed = match &args.resume {
        None => None,
        Some(path) => match cli::resume::load(path) {
            Ok(f) => Some((f, path.clone())),
            Err(e) => {
                tell!("moonscan: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let argv = match &resumed {
        Some((f, _)) => f.args.clone(),
        None => argv,
    };
    if resumed.is_some() {
        args = match parsed(&argv) {
            Ok(a) if a.command.is_none() && a.resume.is_none() => a,
            Ok(_) => {
                tell!("moonscan: --resume: the file's command line is not a scan");
                return ExitCode::from(2);
            }
            Err(code) => return code,
        };
    }
    let nofile = moonscan::raw::raise_nofile_limit().unwrap_or(1024);
    let raw_ok = moonscan::raw::packet::raw_available();
    let resume = resumed.map(|(f, path)| {
        let point = moonscan::builder::ResumePoint {
            seed: f.seed,
            space_len: f.space_len,
            segments: f.segments,
            hosts: f.hosts,
        };
        (point, path)
    });
    let plan = match cli::validate(args, &argv, nofile, raw_ok, resume) {
        Ok(p) => p,
        Err(e) => {
            tell!("moonscan: {e}");
            return ExitCode::from(if e.is_usage() { 2 } else { 1 });
        }
    };
    match run(plan, argv) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            tell!("moonscan: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// SARIF's rules: the selected plugins.
fn plan_rules(plugins: &Option<std::sync::Arc<moonscan::plugins::stage::PluginConfig>>) -> Vec<output::SarifRule> {
    let Some(cfg) = plugins else { return Vec::new() };
    cfg.plugins
        .iter()
        .map(|p| output::SarifRule {
            // The name findings carry: `pack:id` for an installed pack's.
            id: p.name(),
            description: p.meta.description.clone(),
            categories: p.meta.categories.clone(),
            pack: p.pack.clone(),
            about: p.meta.about.clone(),
        })
        .collect()
}

/// Writes `bytes` to stdout; a reader that went away early (`| head`) is fine.
fn print_all(bytes: &[u8]) -> ExitCode {
    match io::stdout().lock().write_all(bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            tell!("moonscan: {e}");
            ExitCode::from(1)
        }
    }
}

/// Runs the planned scan; `argv` is its command line as typed, which only
/// the resume file keeps (the outputs record it redacted).
fn run(plan: cli::Plan, argv: Vec<String>) -> anyhow::Result<u8> {
    for note in &plan.scan.notes {
        tell!("moonscan: {note}");
    }
    let resuming = plan.resume_file.is_some();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    // Ctrl-C is ours from here on: one that comes while the outputs open
    // waits for the scan to start and stops it, never kills the process
    // with a half-made resume or report.
    let sigint = rt.block_on(async { tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()) })?;
    let verbose = plan.scan.config().verbosity > 0;
    let (order, space_len, seed) = (plan.scan.progress(), plan.scan.space_len(), plan.scan.seed());
    let resumable = plan.scan.config().resumable();
    let scan_plugins = plan.scan.config().plugins.clone();
    let redo = plan.scan.config().resume_hosts.clone();
    // A resumed scan's whole report replaces the first part's -oX when done.
    let mut replace: Vec<(std::path::PathBuf, std::path::PathBuf)> = Vec::new();
    let mut scan = rt.block_on(async { ScanHandle::start(plan.scan) });
    let progress = progress_bar(&scan.shared_stats());

    // nmap's folders (MAC vendors) and PostgreSQL's passwords, from the environment.
    let places = cli::places::from_env();
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    if plan.text_on_stdout {
        sinks.push(text_sink(&progress, plan.reasons, plan.logs, verbose, places.nmap.clone()));
    }
    match &plan.json {
        Some(cli::Dest::Stdout) => sinks.push(Box::new(Ndjson::new(StdoutAround(progress.clone())))),
        Some(cli::Dest::File(path)) => {
            let f = open_output(path, resuming).map_err(|e| anyhow::anyhow!("-oJ {}: {e}", path.display()))?;
            sinks.push(Box::new(Ndjson::new(f)));
        }
        None => {}
    }
    for (format, dest) in &plan.outputs {
        let flag = match format {
            cli::Format::Normal => "-oN",
            cli::Format::Xml => "-oX",
            cli::Format::Grepable => "-oG",
        };
        let mut prior = None;
        let writer: Box<dyn Write + Send> = match dest {
            cli::Dest::Stdout => Box::new(StdoutAround(progress.clone())),
            // An XML file is one document: a resumed scan writes the whole
            // scan's beside the first part, and puts it in its place at the
            // end; when the first part is not whole (a killed scan), its own.
            cli::Dest::File(path) if resuming && *format == cli::Format::Xml => {
                let (f, read) = resumed_xml(path, flag, &redo, &mut replace)?;
                prior = read;
                f
            }
            cli::Dest::File(path) => {
                Box::new(open_output(path, resuming).map_err(|e| anyhow::anyhow!("{flag} {}: {e}", path.display()))?)
            }
        };
        sinks.push(match format {
            cli::Format::Normal => {
                Box::new(output::Normal::new(writer).with_reasons(plan.reasons).with_nmap_dirs(places.nmap.clone()))
            }
            cli::Format::Xml => {
                let xml = output::Xml::new(writer)
                    .with_stylesheet(plan.stylesheet.clone())
                    .with_nmap_dirs(places.nmap.clone());
                Box::new(match prior.take() {
                    Some(p) => xml.with_prior(p),
                    None => xml,
                })
            }
            cli::Format::Grepable => Box::new(output::Grepable::new(writer).with_nmap_dirs(places.nmap.clone())),
        });
    }
    if let Some(dest) = &plan.sarif {
        sinks.push(sarif_sink(dest, &scan_plugins, &progress)?);
    }
    if let Some(db) = &plan.db {
        sinks.push(
            output::store::open(db, &places.pg)
                .map_err(|e| anyhow::anyhow!("--db {}: {e}", output::store::display_name(db)))?,
        );
    }

    // The sinks read the scan's own event stream on a thread of their own,
    // the engine's messages in the command's words.
    let sinks = sinks.into_iter().map(|s| Box::new(cli::flags::Worded(s)) as Box<dyn Sink>).collect();
    let events = scan.take_events();
    let writer = std::thread::spawn(move || output::drain(events, sinks));

    let end = wait_for_end(&rt, scan, sigint);
    let end = match end {
        Ok(end) => end,
        Err(e) => {
            let _ = writer.join();
            if let Some(pb) = &progress {
                pb.finish_and_clear();
            }
            tell!("moonscan: {e}");
            return Ok(if e.is_usage() { 2 } else { 1 });
        }
    };
    rt.shutdown_timeout(Duration::from_millis(100));
    let written = writer.join().map_err(|_| anyhow::anyhow!("output thread panicked"))?;
    if let Some(pb) = &progress {
        pb.finish_and_clear();
    }
    if let Err(e) = written {
        // A closed stdout pipe (`| head`) is the reader's choice, not a failure.
        if e.kind() != io::ErrorKind::BrokenPipe {
            tell!("moonscan: writing results: {e}");
            return Ok(1);
        }
    }
    replace_xml(&replace);
    save_or_remove_resume(&end, resumable, &order, (space_len, seed), argv, plan.resume_file.as_deref());
    Ok(if end.errors > 0 || end.interrupted { 1 } else { 0 })
}

/// Text for people on stdout (around the progress bar).
fn text_sink(
    progress: &Option<ProgressBar>,
    reasons: bool,
    logs: bool,
    verbose: bool,
    nmap_dirs: Vec<std::path::PathBuf>,
) -> Box<dyn Sink> {
    let text =
        Text::new(StdoutAround(progress.clone())).with_reasons(reasons).with_logs(logs).with_nmap_dirs(nmap_dirs);
    // A person at a terminal gets nmap's screen: each host's report at the end.
    let text = if io::stdout().is_terminal() { text.as_report(verbose) } else { text };
    Box::new(text)
}

/// The SARIF report (`--sarif`), with a rule for each plugin the scan runs.
fn sarif_sink(
    dest: &cli::Dest,
    scan_plugins: &Option<Arc<moonscan::plugins::stage::PluginConfig>>,
    progress: &Option<ProgressBar>,
) -> anyhow::Result<Box<dyn Sink>> {
    let rules = plan_rules(scan_plugins);
    let writer: Box<dyn Write + Send> = match dest {
        cli::Dest::Stdout => Box::new(StdoutAround(progress.clone())),
        cli::Dest::File(path) => {
            Box::new(File::create(path).map_err(|e| anyhow::anyhow!("--sarif {}: {e}", path.display()))?)
        }
    };
    Ok(Box::new(output::Sarif::new(writer, rules)))
}

/// The -oX file of a resumed scan: the whole scan's report is written
/// beside the first part's (`path`), to take its place at the end (noted
/// in `replace`) when the first part reads back whole (its hosts, less
/// those in `redo`, are then kept); else beside it for good.
fn resumed_xml(
    path: &std::path::Path,
    flag: &str,
    redo: &[std::net::IpAddr],
    replace: &mut Vec<(std::path::PathBuf, std::path::PathBuf)>,
) -> anyhow::Result<(Box<dyn Write + Send>, Option<output::xml_prior::Prior>)> {
    let (resumed, f) =
        cli::resume::create_beside(path).map_err(|e| anyhow::anyhow!("{flag} {}: {e}", path.display()))?;
    let prior = read_prior(path, redo);
    match &prior {
        Some(_) => replace.push((resumed, path.to_path_buf())),
        None => tell!(
            "moonscan: note: {} is not a whole moonscan report (cut off by a kill, unreadable or edited), \
             so the resumed scan's XML goes beside it, to {}; -oJ and --db, when given, hold both parts",
            path.display(),
            resumed.display()
        ),
    }
    Ok((Box::new(f), prior))
}

/// Waits for the scan's end; a first Ctrl-C stops it (the probes out
/// are waited for), a second quits at once.
fn wait_for_end(
    rt: &tokio::runtime::Runtime,
    scan: ScanHandle,
    mut sigint: tokio::signal::unix::Signal,
) -> moonscan::error::Result<moonscan::findings::ScanEnd> {
    let stopper = scan.stopper();
    rt.block_on(async {
        tokio::spawn(async move {
            if sigint.recv().await.is_some() {
                stopper.stop();
                tell!("\nmoonscan: interrupted; waiting for outstanding probes (Ctrl-C again to quit now)");
                if sigint.recv().await.is_some() {
                    std::process::exit(130);
                }
            }
        });
        scan.finish().await
    })
}

/// A resumed scan's whole -oX report takes the place of its first part.
fn replace_xml(replace: &[(std::path::PathBuf, std::path::PathBuf)]) {
    for (whole, first) in replace {
        // On disk before it takes the first part's place.
        let synced = File::open(whole).and_then(|f| f.sync_all());
        if let Err(e) = synced.and_then(|()| std::fs::rename(whole, first)) {
            tell!(
                "moonscan: the whole scan's XML is in {} ({} is its first part): {e}",
                whole.display(),
                first.display()
            );
        }
    }
}

/// The resume file: an interrupted scan that can be resumed writes one
/// (`resume_file`, the one it was resumed from, or the default), a
/// finished resumed scan removes its own.
fn save_or_remove_resume(
    end: &moonscan::findings::ScanEnd,
    resumable: bool,
    order: &moonscan::targets::Progress,
    (space_len, seed): (u64, u64),
    argv: Vec<String>,
    resume_file: Option<&std::path::Path>,
) {
    if end.interrupted && !resumable {
        // Only one order of (address, port) pairs records where it got to:
        // not TCP and UDP together, nor hosts scanned as discovery finds them.
        tell!(
            "moonscan: only a scan of one protocol (and no --host-timeout) can be resumed; \
             what this one found is in its outputs"
        );
    } else if end.interrupted {
        let (left, hosts) = (order.remaining(space_len), order.hosts_to_redo());
        if !left.is_empty() || !hosts.is_empty() {
            let file = cli::resume::ResumeFile {
                moonscan_resume: cli::resume::VERSION,
                args: argv,
                seed,
                space_len,
                segments: left,
                hosts,
            };
            // A resumed scan interrupted again updates its own resume file.
            let path = resume_file
                .map(std::path::Path::to_path_buf)
                .unwrap_or_else(|| std::path::PathBuf::from(cli::resume::DEFAULT));
            let path = path.as_path();
            match cli::resume::save(path, &file) {
                Ok(()) => tell!("moonscan: to finish this scan: moonscan --resume {}", path.display()),
                Err(e) => tell!("moonscan: could not write the resume file {}: {e}", path.display()),
            }
        }
    }
    if let (false, Some(path)) = (end.interrupted, resume_file) {
        // Finished: the resume file has done its job.
        let _ = std::fs::remove_file(path);
    }
}

/// Largest first part of an -oX report a resumed scan reads back.
const MAX_PRIOR_XML: u64 = 1 << 30;

/// The hosts of a resumed scan's first -oX part, less those it scans again;
/// `None` when it is not a whole moonscan report.
fn read_prior(path: &std::path::Path, redo: &[std::net::IpAddr]) -> Option<output::xml_prior::Prior> {
    let text = moonscan::files::read_text_capped(path, MAX_PRIOR_XML, "-oX").ok()?;
    output::xml_prior::Prior::read(&text, redo)
}

/// An output file: created, or appended to when a scan is resumed.
fn open_output(path: &std::path::Path, append: bool) -> io::Result<File> {
    if append {
        std::fs::OpenOptions::new().append(true).create(true).open(path)
    } else {
        File::create(path)
    }
}

/// A progress line on stderr when stderr is a terminal, fed from the scan's counters.
fn progress_bar(stats: &Arc<Stats>) -> Option<ProgressBar> {
    if !io::stderr().is_terminal() {
        return None;
    }
    let pb = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr_with_hz(5));
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} {wide_bar} {pos}/{len} probes  {per_sec}  {msg}  ETA {eta}")
            .expect("static template"),
    );
    let (pb2, stats) = (pb.clone(), stats.clone());
    std::thread::spawn(move || {
        while !pb2.is_finished() {
            pb2.set_length(stats.planned.load(Ordering::Relaxed));
            pb2.set_position(Stats::get(&stats.sent));
            pb2.set_message(pace_text(&stats));
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    Some(pb)
}

/// The progress line's message: open ports, and a raw scan's pace (rate,
/// estimated loss, round trip) once it has one.
fn pace_text(stats: &Stats) -> String {
    let open = format!("{} open", Stats::get(&stats.open));
    let rate = Stats::get(&stats.rate);
    if rate == 0 {
        return open;
    }
    let rtt = Stats::get(&stats.rtt_us);
    let rtt = if rtt > 0 { format!("  rtt {:.1} ms", rtt as f64 / 1e3) } else { String::new() };
    let loss = Stats::get(&stats.loss_ppm) as f64 / 1e4;
    format!("{open}  pace {rate}/s  loss {loss:.1} %{rtt}")
}

/// Stdout that hides the progress line while it writes, so the two never mix.
struct StdoutAround(Option<ProgressBar>);

impl Write for StdoutAround {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &self.0 {
            Some(pb) => pb.suspend(|| io::stdout().write(buf)),
            None => io::stdout().write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stdout().flush()
    }
}
