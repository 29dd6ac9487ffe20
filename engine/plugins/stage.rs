//! The plugin stage of the pipeline.
//!
//! In: open ports with what service detection found, as they come. Out:
//! `finding`, `script`, `log` and `error` events, and a second `service`
//! event for a port whose service a version plugin set (`ctx:set_service`),
//! which the plugins after it on that port see too. What always holds: `workers` VMs
//! run side by side, each holding every selected plugin and running one
//! plugin at a time, on threads of their own (a runtime apart from the one
//! that drives discovery, detection and signals, so a plugin busy in a long
//! host call cannot starve those; a plugin computing holds one thread, and
//! the other VMs go on on the others); a plugin that fails or trips a budget is
//! reported and the next one runs. After a stop (Ctrl-C), runs in flight
//! get [`GRACE`] to finish, then end as `budget` errors; ports not yet
//! looked at are counted in one error event.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::load::Plugin;
use super::sandbox::guard::Guard;
use super::sandbox::host::Vm;
use super::sandbox::run::{Budgets, OutputAllowance, RunError, RunOutput};
use crate::error::ErrorKind;
use crate::findings::{Event, FindingEvent, LogEvent, ScriptEvent, Service};
use crate::pipeline::{stop_signal, Ctx};

/// The plugins of a scan and how they run.
#[derive(Clone, Debug, Default)]
pub struct PluginConfig {
    pub plugins: Vec<Plugin>,
    pub budgets: Budgets,
    /// `--script-args`.
    pub args: BTreeMap<String, String>,
    /// VMs running at once.
    pub workers: usize,
    /// The scan's `-v` level (`ctx.verbosity`, one more for a plugin named).
    pub verbosity: u8,
}

impl PluginConfig {
    /// Whether any selected plugin may run on this port (see [`Plugin::may_run_on`]).
    fn may_run_on(&self, info: &Service) -> bool {
        self.plugins.iter().any(|p| p.may_run_on(info))
    }
}

/// How long plugin runs in flight may go on after the scan is stopped.
pub const GRACE: Duration = Duration::from_millis(500);

/// Runs the selected plugins on every port that arrives until `ports` closes.
pub async fn run_stage(cfg: Arc<PluginConfig>, guard: Guard, ports: mpsc::Receiver<Arc<Service>>, ctx: Ctx) {
    // Ports no plugin can run on are passed over here; the plugin threads
    // start at the first port one can (a -sV scan whose ports no version
    // plugin lists starts none).
    let mut ports = ports;
    let first = loop {
        match ports.recv().await {
            Some(p) if cfg.may_run_on(&p) => break p,
            Some(_) => {}
            None => return,
        }
    };
    // The cut: set GRACE after the stop.
    let (cut_handle, cut) = stop_signal();
    let mut stop = ctx.stop.clone();
    let cutter = tokio::spawn(async move {
        stop.wait().await;
        tokio::time::sleep(GRACE).await;
        cut_handle.stop();
        std::future::pending::<()>().await;
    });
    let skipped = Arc::new(AtomicU64::new(0));
    let scan_output = OutputAllowance::new(cfg.budgets.scan_output);
    // The plugin threads take ports from a channel fed from this (the
    // scan's) runtime: each port wakes a plugin worker from outside the
    // plugin runtime, so any idle thread takes it. (Woken from a plugin
    // thread, a task could wait in that thread's unstealable next-task
    // slot behind a plugin computing there: the interrupt never yields.)
    let (tx, queue) = async_channel::bounded::<Arc<Service>>(cfg.workers.max(1));
    let feeder_cfg = cfg.clone();
    let feeder = tokio::spawn(async move {
        if tx.send(first).await.is_err() {
            return;
        }
        while let Some(p) = ports.recv().await {
            if feeder_cfg.may_run_on(&p) && tx.send(p).await.is_err() {
                break;
            }
        }
    });
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(cfg.workers.max(1));
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("moonscan-plugins")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            feeder.abort();
            cutter.abort();
            let message = format!("cannot start the plugin threads: {e}");
            return ctx.emit(ctx.error(None, None, None, ErrorKind::Sandbox, message)).await;
        }
    };
    let mut workers = Vec::new();
    for _ in 0..cfg.workers.max(1) {
        let (cfg, guard, queue, wctx) = (cfg.clone(), guard.clone(), queue.clone(), ctx.clone());
        let (cut, skipped, scan_output) = (cut.clone(), skipped.clone(), scan_output.clone());
        workers.push(rt.spawn(worker(cfg, guard, queue, wctx, cut, skipped, scan_output)));
    }
    drop(queue);
    for w in workers {
        let _ = w.await;
    }
    feeder.abort();
    cutter.abort();
    rt.shutdown_background();
    let n = skipped.load(Ordering::Relaxed);
    if n > 0 {
        let message = format!("plugins did not run on {n} open ports: the scan was interrupted");
        ctx.emit(ctx.error(None, None, None, ErrorKind::Budget, message)).await;
    }
}

/// One VM's loop: takes the next open port, runs the selected plugins on
/// it, reports what they found; until the ports run out.
async fn worker(
    cfg: Arc<PluginConfig>,
    guard: Guard,
    ports: async_channel::Receiver<Arc<Service>>,
    ctx: Ctx,
    cut: crate::pipeline::Stop,
    skipped: Arc<AtomicU64>,
    scan_output: OutputAllowance,
) {
    // Made at the first port this worker takes: a scan with few open
    // ports does not pay for VMs it never uses.
    let mut made: Option<Vm> = None;
    loop {
        let Ok(info) = ports.recv().await else { break };
        // Taking a port can wake another worker on this thread (the channel
        // passes a notification on), into tokio's next-task slot, which no
        // other thread may steal: a plugin that computes here would hold it
        // there for its whole run. A yield lets it go first.
        tokio::task::yield_now().await;
        if cut.is_set() {
            // Keep taking ports so the stage before never blocks.
            skipped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let vm = match &mut made {
            Some(vm) => vm,
            None => match Vm::new(&cfg.plugins, &cfg.budgets, guard.clone(), &cfg.args, scan_output.clone()) {
                Ok(mut vm) => {
                    vm.cut_by(cut.clone());
                    vm.set_verbosity(cfg.verbosity);
                    made.insert(vm)
                }
                Err(e) => {
                    // The error says why; the ports this worker would have
                    // taken go to the other workers.
                    let message = format!("cannot start a plugin VM: {e}");
                    return ctx.emit(ctx.error(None, None, None, ErrorKind::Sandbox, message)).await;
                }
            },
        };
        let info = with_rdns(info, &ctx).await;
        let (mut info, mut decided) = with_tls_tried(vm, info, &cut).await;
        for i in 0..vm.plugins().len() {
            if cut.is_set() {
                break;
            }
            let wants = match decided.get_mut(i).and_then(Option::take) {
                Some(verdict) => verdict,
                None => vm.wants(i, &info).await,
            };
            let out = match wants {
                Ok(false) => continue,
                Ok(true) => vm.run(i, info.clone()).await,
                Err(error) => RunOutput { error: Some(error), ..RunOutput::default() },
            };
            for ev in to_events(&vm.plugins()[i], &info, out, &ctx) {
                if let Event::Service(s) = &ev {
                    info = Arc::new((**s).clone());
                }
                ctx.emit(ev).await;
            }
        }
    }
}

/// A port of a target given by address, with its address's reverse DNS
/// name (waiting for the lookup while it runs, as nmap's plugins always
/// have it): what its plugins' HTTP requests name in `Host:`.
async fn with_rdns(info: Arc<Service>, ctx: &Ctx) -> Arc<Service> {
    let Some(rdns) = ctx.rdns.as_ref().filter(|_| info.targetname.is_none()) else { return info };
    match rdns.name_of(info.ip).await {
        Some(name) => {
            let mut named = (*info).clone();
            named.rdns = Some(name);
            Arc::new(named)
        }
        None => info,
    }
}

/// Longest the shared TLS try of one port may take.
const TLS_TRY: std::time::Duration = std::time::Duration::from_secs(5);

/// nmap's `shortport.ssl`: on a TCP port whose service nothing confirmed
/// (no -sV, or only the port table's guess) and whose TLS is not known, a
/// plugin that would run were the port TLS (its portrule says so for the
/// same port with TLS) gets one TLS handshake tried first, shared by every
/// plugin of the port: if the port speaks TLS (any version, SSLv3 up: the
/// own ClientHello reads what rustls cannot), the plugins see its session
/// and chain as if detection had found them.
/// Returns the port as the plugins see it and, when the portrules were
/// asked on the way, their verdicts for it (none for a plugin to ask
/// again): a portrule is asked at most twice a port (as it is, and as if
/// TLS), and the try gives up at once when the scan is cut short.
async fn with_tls_tried(
    vm: &Vm,
    info: Arc<Service>,
    cut: &crate::pipeline::Stop,
) -> (Arc<Service>, Vec<Option<Verdict>>) {
    use crate::findings::ServiceMethod;
    if info.proto != crate::findings::Proto::Tcp || info.method != ServiceMethod::Table || info.tls.is_some() {
        return (info, Vec::new());
    }
    let mut as_tls = (*info).clone();
    as_tls.tls = Some(Box::default());
    // Each plugin's verdict as the port is, and as it would be were it TLS.
    let mut decided = Vec::with_capacity(vm.plugins().len());
    let mut if_tls = Vec::with_capacity(vm.plugins().len());
    for i in 0..vm.plugins().len() {
        let verdict = vm.wants(i, &info).await;
        let tls_verdict = match verdict {
            Ok(false) => Some(vm.wants(i, &as_tls).await),
            _ => None,
        };
        decided.push(Some(verdict));
        if_tls.push(tls_verdict);
    }
    if !if_tls.iter().any(|v| matches!(v, Some(Ok(true)))) {
        return (info, decided);
    }
    let until = tokio::time::Instant::now() + TLS_TRY;
    let addr = std::net::SocketAddr::new(info.ip, info.port);
    let mut stop = cut.clone();
    let tried = tokio::select! {
        tls = crate::wire::conn::try_tls(addr, info.targetname.as_deref(), until) => tls,
        () = stop.wait() => None,
    };
    match tried {
        Some(tls) => {
            as_tls.tls = Some(Box::new(tls));
            // The port table shows only that the port is TLS: the verdicts
            // asked as if it were are its verdicts now.
            for (d, t) in decided.iter_mut().zip(if_tls) {
                if let Some(t) = t {
                    *d = Some(t);
                }
            }
            (Arc::new(as_tls), decided)
        }
        None => (info, decided),
    }
}

/// Whether a plugin runs on a port, or why its portrule failed.
type Verdict = std::result::Result<bool, RunError>;

/// The events of one plugin run: first, when a version plugin set the
/// port's service, the port's `service` event again with what it set
/// (method `probed`, probe the plugin's id; every output keeps a port's
/// last `service` event), then its results, findings, logs and errors.
pub fn to_events(p: &Plugin, info: &Service, out: RunOutput, ctx: &Ctx) -> Vec<Event> {
    let name = p.name();
    let plugin = name.as_str();
    let mut evs = Vec::new();
    if let Some(id) = out.service.filter(|_| p.meta.categories.iter().any(|c| c == "version")) {
        let mut s = info.clone();
        s.id = id;
        s.method = crate::findings::ServiceMethod::Probed;
        s.probe = Some(p.meta.id.clone());
        // Named now: no fingerprint of an unrecognised service.
        s.replies.clear();
        s.t = ctx.t();
        evs.push(Event::Service(Box::new(s)));
    }
    for f in out.findings {
        let (scan_id, ip, port, proto, host, t) =
            (ctx.scan_id.clone(), info.ip, info.port, info.proto, p.meta.host_scope, ctx.t());
        evs.push(match f.output {
            Some(output) => Event::Script(Box::new(ScriptEvent {
                scan_id,
                ip,
                port,
                proto,
                plugin: plugin.to_string(),
                output,
                data: f.data,
                volatile: p.meta.volatile.clone(),
                host,
                targetname: info.targetname.clone(),
                t,
            })),
            None => Event::Finding(Box::new(FindingEvent {
                scan_id,
                ip,
                port,
                proto,
                plugin: plugin.to_string(),
                severity: f.severity,
                title: f.title,
                data: f.data,
                about: f.about,
                host,
                targetname: info.targetname.clone(),
                t,
            })),
        });
    }
    for message in out.logs {
        let scan_id = ctx.scan_id.clone();
        evs.push(Event::Log(LogEvent { scan_id, ip: info.ip, port: info.port, plugin: plugin.to_string(), message }));
    }
    let error = |kind, message| ctx.error(Some(info.ip), Some(info.port), Some(plugin.to_string()), kind, message);
    for why in out.refused {
        evs.push(error(ErrorKind::Sandbox, why));
    }
    if let Some(RunError { kind, message }) = out.error {
        evs.push(error(kind, message));
    }
    evs
}
