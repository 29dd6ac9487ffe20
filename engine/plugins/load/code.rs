//! Checked Lua text and its bytecode, compiled by the host at most once:
//! what a plugin file and a library module hold.
//!
//! In: text that passed its checks (a plugin file's, a module's). Out: its
//! Luau bytecode, or why it does not compile. What always holds: the
//! bytecode is compiled here, from that text, never read from a file; a
//! text no VM needs is never compiled.

/// A plugin's (or a module's) checked text, compiled by the host at most
/// once: for a plugin, when its metadata is not cached, or when a VM first
/// runs it. A plugin that is never selected is never compiled.
pub(crate) struct Code {
    text: Box<[u8]>,
    bytecode: std::sync::OnceLock<std::result::Result<Box<[u8]>, String>>,
}

impl Code {
    pub(crate) fn new(text: &[u8]) -> Code {
        Code { text: text.into(), bytecode: std::sync::OnceLock::new() }
    }

    /// The bytecode, compiled on first use; a syntax error says what it is.
    pub(crate) fn bytecode(&self) -> std::result::Result<&[u8], &str> {
        let compiled = self
            .bytecode
            .get_or_init(|| mlua::Compiler::new().compile(&self.text).map(Into::into).map_err(|e| syntax(&e)));
        compiled.as_deref().map_err(String::as_str)
    }
}

impl std::fmt::Debug for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Code").field("bytes", &self.text.len()).finish()
    }
}

fn syntax(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => format!("syntax error: {message}"),
        other => format!("does not compile: {other}"),
    }
}
