//! The plugin stage of the pipeline.
//!
//! In: open ports with what service detection found, as they come. Out:
//! `finding`, `log` and `error` events. What always holds: `workers` VMs
//! run side by side, each holding every selected plugin and running one
//! plugin at a time; a plugin that fails or trips a budget is reported and
//! the next one runs; ports already found are still looked at after a stop
//! (an interrupted scan's resume file no longer holds them).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, Mutex};

use super::host::{Budgets, PortInfo, RunOutput, Vm};
use super::net::Guard;
use super::Plugin;
use crate::discovery::Stats;
use crate::findings::{ErrorEvent, ErrorKind, Event, FindingEvent, LogEvent};

/// The plugins of a scan and how they run.
#[derive(Clone, Debug, Default)]
pub struct PluginConfig {
    pub plugins: Vec<Plugin>,
    pub budgets: Budgets,
    /// `--script-args`.
    pub args: BTreeMap<String, String>,
    /// VMs running at once.
    pub workers: usize,
}

/// Runs the selected plugins on every port that arrives until `ports` closes.
pub async fn run_stage(
    cfg: Arc<PluginConfig>,
    guard: Guard,
    ports: mpsc::Receiver<PortInfo>,
    events: mpsc::Sender<Event>,
    t0: Instant,
    stats: Arc<Stats>,
) {
    let ports = Arc::new(Mutex::new(ports));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..cfg.workers.max(1) {
        let (cfg, guard, ports, events, stats) =
            (cfg.clone(), guard.clone(), ports.clone(), events.clone(), stats.clone());
        workers.spawn(async move {
            let vm = match Vm::new(&cfg.plugins, &cfg.budgets, guard, &cfg.args) {
                Ok(vm) => vm,
                Err(e) => {
                    Stats::bump(&stats.errors);
                    let message = format!("cannot start a plugin VM: {e}");
                    let ev = ErrorEvent { ip: None, port: None, plugin: None, kind: ErrorKind::Sandbox, message };
                    let _ = events.send(Event::Error(ev)).await;
                    return;
                }
            };
            loop {
                let next = ports.lock().await.recv().await;
                let Some(info) = next else { break };
                let info = Arc::new(info);
                for i in 0..vm.plugins().len() {
                    if !vm.wants(i, &info).await {
                        continue;
                    }
                    let out = vm.run(i, info.clone()).await;
                    for ev in to_events(&vm.plugins()[i].name(), &info, out, t0) {
                        match &ev {
                            Event::Error(_) => Stats::bump(&stats.errors),
                            Event::Finding(_) => Stats::bump(&stats.findings),
                            _ => {}
                        }
                        let _ = events.send(ev).await;
                    }
                }
            }
        });
    }
    while workers.join_next().await.is_some() {}
}

/// The events of one plugin run.
pub fn to_events(plugin: &str, info: &PortInfo, out: RunOutput, t0: Instant) -> Vec<Event> {
    let mut evs = Vec::new();
    for f in out.findings {
        evs.push(Event::Finding(Box::new(FindingEvent {
            ip: info.ip,
            port: info.port,
            proto: "tcp",
            plugin: plugin.to_string(),
            severity: f.severity,
            title: f.title,
            data: f.data,
            t: t0.elapsed().as_secs_f64(),
        })));
    }
    for message in out.logs {
        evs.push(Event::Log(LogEvent { ip: info.ip, port: info.port, plugin: plugin.to_string(), message }));
    }
    let error = |kind, message| {
        Event::Error(ErrorEvent {
            ip: Some(info.ip),
            port: Some(info.port),
            plugin: Some(plugin.to_string()),
            kind,
            message,
        })
    };
    for why in out.refused {
        evs.push(error(ErrorKind::Sandbox, why));
    }
    if let Some((kind, message)) = out.error {
        evs.push(error(kind, message));
    }
    evs
}
