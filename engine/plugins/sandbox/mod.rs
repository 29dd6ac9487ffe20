//! The sandbox: the Luau VM plugins run in and the host API they run
//! against.
//!
//! In: checked plugins ([`crate::plugins::load`]), budgets, the scan's
//! [`guard::Guard`], and one open port at a time. Out: a run's findings,
//! log lines, or why it was stopped ([`crate::plugins::RunOutput`]). What always
//! holds: the VM is Luau in sandbox mode, holding only what [`host`] gives
//! it (`ctx` from `api`, the `re` and `hash` modules of `builtins`,
//! `require` of the plugin's libraries); every socket a run opens passes
//! the guard ([`guard`]) and is charged to the run's budgets (`run`); a
//! run can be recorded and replayed offline ([`tape`]).

mod api;
mod builtins;
mod failure;
pub mod guard;
pub mod host;
pub(crate) mod run;
mod socket;
pub mod ssh;
pub mod tape;
mod tls_enum;
mod udp;
pub mod value;

#[cfg(test)]
mod failure_tests;
#[cfg(test)]
mod module_tests;
#[cfg(test)]
mod tests;
