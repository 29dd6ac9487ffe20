//! `moonscan plugins list|show|test`: plugin tooling for users and authors.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Subcommand;
use moonscan::findings::{Event, Service, TlsInfo};
use moonscan::output::{Ndjson, Sink, Text};
use moonscan::places::Places;
use moonscan::plugins::sandbox::guard::Guard;
use moonscan::plugins::{self, Budgets, OutputAllowance, Plugin, Vm};

#[derive(Debug, clap::Args)]
pub struct PluginsArgs {
    /// Folder of installed plugins (default: $MOONSCAN_PLUGINS, or the build's plugins/).
    #[arg(long = "plugin-dir", global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// The plugins an expression selects (all of them without one), with their categories.
    List {
        /// A --script expression, e.g. "default", "http-*", "safe and not intrusive".
        expr: Option<String>,
    },
    /// One plugin: description, categories, where it runs, its file.
    Show { id: String },
    /// Run a plugin file offline against recorded input (--banner, --tls-chain, --replay), or record a live run (--record).
    Test {
        /// The plugin file.
        file: PathBuf,
        #[command(flatten)]
        opts: TestOpts,
    },
}

/// What `plugins test` runs, and how.
#[derive(Debug, clap::Args)]
struct TestOpts {
    /// Port number the plugin is told it runs on.
    #[arg(long, default_value_t = 80)]
    port: u16,
    /// Detected service name (e.g. http, ssh).
    #[arg(long)]
    service: Option<String>,
    /// Banner text; \r \n \t \0 \\ \xHH escapes are decoded.
    #[arg(long, conflicts_with = "banner_file")]
    banner: Option<String>,
    /// Banner bytes from a file.
    #[arg(long = "banner-file", value_name = "FILE")]
    banner_file: Option<PathBuf>,
    /// Certificate chain (PEM, leaf first) the plugin sees as ctx.tls.
    #[arg(long = "tls-chain", value_name = "PEM")]
    tls_chain: Option<PathBuf>,
    /// Plugin arguments: k=v,k2=v2.
    #[arg(long = "script-args", value_name = "ARGS")]
    script_args: Option<String>,
    /// NDJSON events instead of text.
    #[arg(long)]
    json: bool,
    /// Run against the live --target and keep every socket exchange
    /// (ctx:connect, ctx.http, ctx:udp) in DIR/recording.json.
    #[arg(long, value_name = "DIR", requires = "target", conflicts_with = "replay")]
    record: Option<PathBuf>,
    /// Run offline against DIR/recording.json (made by --record): the
    /// port, service and banner recorded, and each socket's bytes.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with_all = ["banner", "banner_file", "tls_chain", "service", "port", "udp", "target"]
    )]
    replay: Option<PathBuf>,
    /// The address --record talks to (an address, not a name); only its
    /// --port is reachable (with --udp, its UDP --port).
    #[arg(long, value_name = "ADDR")]
    target: Option<std::net::IpAddr>,
    /// The port is a UDP one (ctx.protocol "udp"; ctx:udp reaches it).
    #[arg(long)]
    udp: bool,
}

/// Runs `moonscan plugins ...` (`argv` starts at "plugins"); returns the exit status.
pub fn run(args: PluginsArgs) -> u8 {
    let places = super::places::from_env();
    let dir = args.dir.unwrap_or_else(|| plugins::default_dir(&places));
    let result = match args.cmd {
        Cmd::List { expr } => list(&dir, expr.as_deref(), &places),
        Cmd::Show { id } => show(&dir, &id, &places),
        Cmd::Test { file, opts } => test(&dir, &file, opts),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            tell!("moonscan plugins: {e}");
            2
        }
    }
}

fn installed(dir: &Path, places: &Places) -> moonscan::Result<Vec<Plugin>> {
    moonscan::builder::available_plugins(dir, moonscan::packs::installed_checked(None, dir, places)?, places)
}

fn list(dir: &Path, expr: Option<&str>, places: &Places) -> moonscan::Result<u8> {
    let all = installed(dir, places)?;
    let chosen = match expr {
        Some(e) => plugins::select(&all, e)?,
        None => all,
    };
    let mut out = moonscan::output::Screened(std::io::stdout().lock());
    for p in &chosen {
        let trust = if p.trusted { "" } else { " (untrusted: runs only when named)" };
        let _ = writeln!(
            out,
            "{:<28} {:<32} {}{trust}",
            p.name(),
            p.meta.categories.join(","),
            moonscan::output::screen(&p.meta.description)
        );
    }
    let _ = writeln!(out, "{} plugin(s)", chosen.len());
    Ok(0)
}

/// `--script-help EXPR`: each plugin the expression selects, as nmap's
/// --script-help shows a script (its id, categories, where it runs, its
/// file and its description), from `dir` (`--plugin-dir`) or the default
/// folder; exit status 2 when it selects none.
pub fn script_help(expr: &str, dir: Option<PathBuf>) -> u8 {
    let places = super::places::from_env();
    let dir = dir.unwrap_or_else(|| plugins::default_dir(&places));
    let chosen = match installed(&dir, &places).and_then(|all| plugins::select(&all, expr)) {
        Ok(c) => c,
        Err(e) => {
            tell!("moonscan: --script-help: {e}");
            return 2;
        }
    };
    if chosen.is_empty() {
        tell!("moonscan: --script-help: {expr:?} selects no plugin");
        return 2;
    }
    let mut out = moonscan::output::Screened(std::io::stdout().lock());
    for p in &chosen {
        let ports: Vec<String> = p.meta.ports.iter().map(u16::to_string).collect();
        let mut runs = Vec::new();
        if !ports.is_empty() {
            runs.push(format!("ports {}", ports.join(", ")));
        }
        if !p.meta.services.is_empty() {
            runs.push(format!("services {}", p.meta.services.join(", ")));
        }
        if p.meta.portrule {
            runs.push("where its portrule says".into());
        }
        let _ = writeln!(out, "\n{}", p.name());
        let _ = writeln!(out, "Categories: {}", p.meta.categories.join(" "));
        let _ = writeln!(out, "Runs on: {}", runs.join("; "));
        let _ = writeln!(out, "{}", p.path.display());
        let _ = writeln!(out, "  {}", moonscan::output::screen(&p.meta.description));
    }
    0
}

fn show(dir: &Path, id: &str, places: &Places) -> moonscan::Result<u8> {
    let all = installed(dir, places)?;
    let Some(p) = all.iter().find(|p| p.meta.id == id || p.name() == id) else {
        tell!("moonscan plugins: no plugin with id {id} in {}", dir.display());
        return Ok(1);
    };
    let mut out = moonscan::output::Screened(std::io::stdout().lock());
    let _ = writeln!(out, "id:          {}", p.name());
    let _ = writeln!(out, "pack:        {}", p.pack.as_deref().unwrap_or("-"));
    let _ = writeln!(out, "description: {}", moonscan::output::screen(&p.meta.description));
    let _ = writeln!(out, "categories:  {}", p.meta.categories.join(", "));
    let ports: Vec<String> = p.meta.ports.iter().map(u16::to_string).collect();
    let _ = writeln!(out, "ports:       {}", if ports.is_empty() { "-".into() } else { ports.join(", ") });
    let _ = writeln!(
        out,
        "services:    {}",
        if p.meta.services.is_empty() { "-".into() } else { p.meta.services.join(", ") }
    );
    let _ = writeln!(out, "portrule:    {}", if p.meta.portrule { "yes" } else { "no" });
    let _ = writeln!(out, "file:        {}", p.path.display());
    Ok(0)
}

fn test(dir: &Path, file: &Path, o: TestOpts) -> moonscan::Result<u8> {
    let TestOpts { port, service, banner, banner_file, tls_chain, script_args, json, record, replay, target, udp } = o;
    // The core library is the one of the plugin folder asked for.
    let libs = plugins::libraries_for(file, dir)?;
    let mut plugin = plugins::load_file(file, &libs)?;
    // Named on the command line: one level of verbosity, as in a scan.
    plugin.named = true;
    let bad = |m: String| moonscan::Error::new(moonscan::ErrorKind::Config, m);
    let banner = match (banner, banner_file) {
        (Some(text), _) => moonscan::service::probes::unescape(&text).map_err(|e| bad(format!("--banner: {e}")))?,
        (_, Some(path)) => moonscan::files::read_capped(&path, 1 << 20, "--banner-file")?,
        _ => Vec::new(),
    };
    let tls = match tls_chain {
        Some(path) => Some(chain_from_pem(&path)?),
        None => None,
    };
    let mut args = BTreeMap::new();
    if let Some(text) = &script_args {
        let items = plugins::load::script_args::parse(text).map_err(|e| super::usage(format!("--script-args: {e}")))?;
        args.extend(items);
    }
    let recording = replay.as_deref().map(plugins::sandbox::tape::load).transpose()?;
    // Offline, a documentation address (RFC 5737): nothing is ever sent.
    let ip = recording.as_ref().map(|r| r.ip).or(target).unwrap_or(std::net::IpAddr::from([192, 0, 2, 1]));
    let port = recording.as_ref().map_or(port, |r| r.port);
    let udp = recording.as_ref().map_or(udp, |r| r.protocol == "udp");
    let proto = if udp { moonscan::findings::Proto::Udp } else { moonscan::findings::Proto::Tcp };
    let ctx = moonscan::pipeline::Ctx::detached("plugins-test");
    let mut info = Service::bare(ctx.scan_id.clone(), ip, port, proto);
    if let Some(s) = recording.as_ref().map_or(service, |r| r.service.clone()) {
        info.id.service = s;
    }
    let tls = recording.as_ref().map_or(tls, |r| r.tls.clone());
    info.tunnel = tls.is_some().then_some(moonscan::findings::Tunnel::Ssl);
    info.banner = recording.as_ref().map_or(banner, |r| r.banner.clone());
    info.tls = tls.map(Box::new);
    // Recording: the target's one port, nothing else (and never a name).
    let guard = recording_guard(record.as_deref(), target, port, udp)?;
    let tape = match (&record, &recording) {
        (Some(_), _) => Some(Arc::new(plugins::sandbox::tape::Tape::record())),
        (_, Some(r)) => Some(Arc::new(plugins::sandbox::tape::Tape::replay(r))),
        _ => None,
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| bad(e.to_string()))?;
    let (events, failed) = rt.block_on(async {
        let budgets = Budgets::default();
        let vm = Vm::new(std::slice::from_ref(&plugin), &budgets, guard, &args, OutputAllowance::new(budgets.scan_output))
            .map_err(|e| bad(format!("cannot make a VM: {e}")))?;
        if let Some(t) = &tape {
            vm.set_tape(t.clone());
        }
        if !vm.wants(0, &info).await.unwrap_or(false) {
            tell!("moonscan plugins: note: {} would not run on this port (its ports/services/portrule); running it anyway", plugin.meta.id);
        }
        let out = vm.run(0, Arc::new(info.clone())).await;
        let failed = out.error.is_some() || !out.refused.is_empty();
        Ok::<_, moonscan::Error>((plugins::stage::to_events(&plugin, &info, out, &ctx), failed))
    })?;
    let mut sink: Box<dyn Sink> = if json {
        Box::new(Ndjson::new(std::io::stdout()))
    } else {
        Box::new(Text::new(std::io::stdout()).with_logs(true))
    };
    for ev in &events {
        let _ = sink.record(ev);
    }
    let _ = sink.flush();
    if let (Some(dir), Some(t)) = (&record, &tape) {
        save_recording(dir, &plugin.meta.id, &info, t)?;
    }
    if !json && !events.iter().any(|e| matches!(e, Event::Finding(_) | Event::Script(_) | Event::Error(_))) {
        let _ = writeln!(
            moonscan::output::Screened(std::io::stdout().lock()),
            "{}: no result and no findings",
            plugin.meta.id
        );
    }
    Ok(u8::from(failed))
}

/// What the plugin may reach: offline, or when recording, the target's
/// one port and nothing else (and never a name).
fn recording_guard(
    record: Option<&Path>,
    target: Option<std::net::IpAddr>,
    port: u16,
    udp: bool,
) -> moonscan::Result<Guard> {
    Ok(match (record, target) {
        (Some(_), Some(t)) => {
            let key = moonscan::targets::addrs::key(t);
            let one = moonscan::targets::AddrSet::from_ranges(vec![(key, key)]);
            let space = moonscan::targets::TargetSpace::new(&one, &Default::default(), vec![port])?;
            if udp {
                Guard::scan(None, Some(space))
            } else {
                Guard::scan(Some(space), None)
            }
        }
        _ => Guard::offline(),
    })
}

/// Saves what `tape` recorded of the plugin's run on `info`'s port in `dir`.
fn save_recording(
    dir: &Path,
    plugin_id: &str,
    info: &Service,
    t: &plugins::sandbox::tape::Tape,
) -> moonscan::Result<()> {
    let r = plugins::sandbox::tape::Recording {
        version: 1,
        plugin: plugin_id.to_string(),
        ip: info.ip,
        port: info.port,
        protocol: info.proto.as_str().to_string(),
        service: Some(info.id.service.clone()).filter(|s| !s.is_empty()),
        banner: info.banner.clone(),
        tls: info.tls.as_deref().cloned(),
        sockets: t.recorded(),
    };
    plugins::sandbox::tape::save(dir, &r)?;
    tell!("moonscan plugins: recorded {} socket(s) in {}", r.sockets.len(), dir.join("recording.json").display());
    Ok(())
}

/// Reads a PEM chain (leaf first) and summarises every certificate.
fn chain_from_pem(path: &Path) -> moonscan::Result<TlsInfo> {
    use base64::Engine;
    let bad =
        |m: String| moonscan::Error::new(moonscan::ErrorKind::Config, format!("--tls-chain {}: {m}", path.display()));
    let text = moonscan::files::read_text_capped(path, 16 << 20, "--tls-chain")?;
    let (mut der, mut sent) = (Vec::new(), 0);
    let mut body: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line == "-----BEGIN CERTIFICATE-----" {
            body = Some(String::new());
        } else if line == "-----END CERTIFICATE-----" {
            let b = body.take().ok_or_else(|| bad("END without BEGIN".into()))?;
            let cert =
                base64::engine::general_purpose::STANDARD.decode(b).map_err(|e| bad(format!("bad base64: {e}")))?;
            if der.len() < moonscan::wire::cert::MAX_CHAIN {
                der.push(cert);
            }
            sent += 1;
        } else if let Some(b) = body.as_mut() {
            b.push_str(line);
        }
    }
    if der.is_empty() {
        return Err(bad("no certificate in it".into()));
    }
    Ok(TlsInfo::default().with_chain(der, sent))
}
