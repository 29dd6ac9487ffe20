//! The plugin stage of the pipeline.
//!
//! In: open ports with what service detection found, as they come. Out:
//! `finding`, `log` and `error` events. What always holds: `workers` VMs
//! run side by side, each holding every selected plugin and running one
//! plugin at a time, each on a thread and a runtime of its own (apart from
//! the runtime that drives discovery, detection and signals, and from each
//! other, so a plugin computing or busy in a long host call starves none
//! of them); a plugin that fails or trips a budget is
//! reported and the next one runs. After a stop (Ctrl-C), runs in flight
//! get [`GRACE`] to finish, then end as `budget` errors; ports not yet
//! looked at are counted in one error event.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Mutex};

use super::budget::{Budgets, OutputAllowance};
use super::host::{RunOutput, Vm};
use super::net::Guard;
use super::Plugin;
use crate::discovery::stop_signal;
use crate::findings::{ErrorKind, Event, FindingEvent, LogEvent, Service};
use crate::pipeline::Ctx;

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

/// How long plugin runs in flight may go on after the scan is stopped.
pub const GRACE: Duration = Duration::from_millis(500);

/// Runs the selected plugins on every port that arrives until `ports` closes.
pub async fn run_stage(cfg: Arc<PluginConfig>, guard: Guard, ports: mpsc::Receiver<Arc<Service>>, ctx: Ctx) {
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
    let ports = Arc::new(Mutex::new(ports));
    let mut workers = Vec::new();
    for n in 0..cfg.workers.max(1) {
        let (cfg, guard, ports, wctx) = (cfg.clone(), guard.clone(), ports.clone(), ctx.clone());
        let (cut, skipped, scan_output) = (cut.clone(), skipped.clone(), scan_output.clone());
        let (done, finished) = tokio::sync::oneshot::channel::<Result<(), String>>();
        // A thread and a runtime of its own for each VM: a plugin computing
        // holds only its own thread (the interrupt never yields), and the
        // host tasks of its run (TLS enumeration...) run beside it there.
        let thread = std::thread::Builder::new().name(format!("moonscan-plugins-{n}")).spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => return drop(done.send(Err(format!("cannot start a plugin thread: {e}")))),
            };
            rt.block_on(worker(cfg, guard, ports, wctx, cut, skipped, scan_output));
            let _ = done.send(Ok(()));
        });
        match thread {
            Ok(_) => workers.push(finished),
            Err(e) => {
                let message = format!("cannot start a plugin thread: {e}");
                ctx.emit(ctx.error(None, None, None, ErrorKind::Sandbox, message)).await;
            }
        }
    }
    for w in workers {
        if let Ok(Err(message)) = w.await {
            ctx.emit(ctx.error(None, None, None, ErrorKind::Sandbox, message)).await;
        }
    }
    cutter.abort();
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
    ports: Arc<Mutex<mpsc::Receiver<Arc<Service>>>>,
    ctx: Ctx,
    cut: crate::discovery::Stop,
    skipped: Arc<AtomicU64>,
    scan_output: OutputAllowance,
) {
    // Made at the first port this worker takes: a scan with few open
    // ports does not pay for VMs it never uses.
    let mut made: Option<Vm> = None;
    loop {
        let next = ports.lock().await.recv().await;
        let Some(info) = next else { break };
        let vm = match &mut made {
            Some(vm) => vm,
            None => match Vm::new(&cfg.plugins, &cfg.budgets, guard.clone(), &cfg.args, scan_output.clone()) {
                Ok(mut vm) => {
                    vm.cut_by(cut.clone());
                    vm.set_verbosity(cfg.verbosity);
                    made.insert(vm)
                }
                Err(e) => {
                    let message = format!("cannot start a plugin VM: {e}");
                    return ctx.emit(ctx.error(None, None, None, ErrorKind::Sandbox, message)).await;
                }
            },
        };
        if cut.is_set() {
            // Keep taking ports so the stage before never blocks.
            skipped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        for i in 0..vm.plugins().len() {
            if cut.is_set() {
                break;
            }
            let out = match vm.wants(i, &info).await {
                Ok(false) => continue,
                Ok(true) => vm.run(i, info.clone()).await,
                Err(error) => RunOutput { error: Some(error), ..RunOutput::default() },
            };
            for ev in to_events(&vm.plugins()[i], &info, out, &ctx) {
                ctx.emit(ev).await;
            }
        }
    }
}

/// The events of one plugin run.
pub fn to_events(p: &Plugin, info: &Service, out: RunOutput, ctx: &Ctx) -> Vec<Event> {
    let name = p.name();
    let plugin = name.as_str();
    let mut evs = Vec::new();
    for f in out.findings {
        evs.push(Event::Finding(Box::new(FindingEvent {
            scan_id: ctx.scan_id.clone(),
            ip: info.ip,
            port: info.port,
            proto: info.proto,
            plugin: plugin.to_string(),
            severity: f.severity,
            title: f.title,
            data: f.data,
            output: f.output,
            about: f.about,
            host: p.host_scope,
            t: ctx.t(),
        })));
    }
    for message in out.logs {
        let scan_id = ctx.scan_id.clone();
        evs.push(Event::Log(LogEvent { scan_id, ip: info.ip, port: info.port, plugin: plugin.to_string(), message }));
    }
    let error = |kind, message| ctx.error(Some(info.ip), Some(info.port), Some(plugin.to_string()), kind, message);
    for why in out.refused {
        evs.push(error(ErrorKind::Sandbox, why));
    }
    if let Some((kind, message)) = out.error {
        evs.push(error(kind, message));
    }
    evs
}
