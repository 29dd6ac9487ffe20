//! What the pack tests of both harnesses share (tests/packs.rs and
//! tests/lab/packs.rs): a data folder and a working folder per test, with
//! a signed example pack, and a plugin written into it.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use crate::util::{bin, stderr, stdout};

/// A data folder and a working folder.
pub(crate) struct Env {
    pub(crate) home: tempfile::TempDir,
    pub(crate) work: tempfile::TempDir,
}

impl Env {
    pub(crate) fn new() -> Env {
        Env { home: tempfile::tempdir().unwrap(), work: tempfile::tempdir().unwrap() }
    }

    pub(crate) fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(args)
            .env("MOONSCAN_HOME", self.home.path())
            .env_remove("MOONSCAN_KEY_PASSWORD")
            .current_dir(self.work.path())
            .stdin(Stdio::null());
        c
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("moonscan runs")
    }

    /// Runs a command that must succeed; returns its stdout.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(o.status.success(), "moonscan {args:?} failed:\n{}{}", stdout(&o), stderr(&o));
        stdout(&o)
    }

    /// Runs a command that must be refused (status 1) with a message holding
    /// every needle; returns the message.
    pub(crate) fn refused(&self, args: &[&str], needles: &[&str]) -> String {
        let o = self.run(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "moonscan {args:?} must be refused:\n{}{err}", stdout(&o));
        for n in needles {
            assert!(err.contains(n), "moonscan {args:?}: expected {n:?} in:\n{err}");
        }
        err
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.work.path().join(rel)
    }
}

/// A key pair (key.key, key.pub) that is trusted, and a signed pack `demo`.
pub(crate) fn setup() -> Env {
    let env = Env::new();
    env.ok(&["pack", "keygen", "-o", "key"]);
    env.ok(&["pack", "trust", "add", "key.pub"]);
    env.ok(&["pack", "new", "demo"]);
    env.ok(&["pack", "sign", "demo", "--key", "key.key"]);
    env
}

/// The demo pack's plugin replaced by `src`.
pub(crate) fn set_plugin(env: &Env, src: &str) {
    fs::write(env.path("demo/ssh-software.lua"), src).unwrap();
}

pub(crate) fn plugin_src(id: &str, cats: &str, top: &str) -> String {
    format!(
        "{top}\nreturn {{ id = '{id}', description = 'd', categories = {{ {cats} }}, ports = {{ 80 }},\n\
         run = function(ctx) ctx:finding{{ title = 'untrusted plugin ran' }} end }}\n"
    )
}
