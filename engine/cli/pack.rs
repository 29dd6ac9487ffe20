//! `moonscan pack ...`: make, sign, verify, install, list and pin plugin packs.
//!
//! Exit status: 0 done, 1 refused or failed (one message on stderr naming
//! the problem and the file), 2 bad usage.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use moonscan::packs::{self, sign, Trust};
use moonscan::{Error, ErrorKind, Result};

/// Prints a line on stdout; a closed stdout (`| head`) is not an error.
macro_rules! say {
    ($($t:tt)*) => {{
        let _ = writeln!(moonscan::output::Screened(std::io::stdout().lock()), $($t)*);
    }};
}

/// The variable holding the password of an encrypted secret key.
const PASSWORD_VAR: &str = "MOONSCAN_KEY_PASSWORD";

#[derive(Debug, clap::Args)]
#[command(after_help = "Packs are installed in DATA/packs/ and checked against the keys in DATA/trusted/, where DATA \
                  is $MOONSCAN_HOME, else $XDG_DATA_HOME/moonscan, else ~/.local/share/moonscan.")]
pub struct PackArgs {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Make a new pack folder: pack.yaml, an example plugin, tests/ with a recorded banner, a README.
    New {
        dir: PathBuf,
        /// The pack's name (default: the folder's name).
        #[arg(long)]
        name: Option<String>,
    },
    /// Make a signing key pair: BASE.key (secret) and BASE.pub (public), in minisign's format.
    ///
    /// The secret key is encrypted with the password in $MOONSCAN_KEY_PASSWORD
    /// when that is set, and stored unencrypted (like `minisign -G -W`) when not.
    Keygen {
        /// Write BASE.key and BASE.pub.
        #[arg(short = 'o', value_name = "BASE", default_value = "moonscan-pack")]
        base: PathBuf,
        /// Overwrite existing key files.
        #[arg(long)]
        force: bool,
    },
    /// Sign a pack folder: checks it, then writes pack.sig over pack.yaml's exact bytes.
    Sign {
        dir: PathBuf,
        /// The minisign secret key (password from $MOONSCAN_KEY_PASSWORD if it is encrypted).
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// First write every listed file's sha256 into pack.yaml (else they must already match).
        #[arg(long)]
        update_hashes: bool,
    },
    /// Check a pack folder or .tar.gz against the trusted keys, without installing it.
    Verify {
        #[arg(value_name = "DIR|FILE")]
        path: PathBuf,
        /// Accept a pack that is unsigned or signed by an untrusted key (as untrusted).
        #[arg(long)]
        allow_unsigned: bool,
    },
    /// Verify a pack folder or .tar.gz, then install it (all or nothing).
    Install {
        #[arg(value_name = "DIR|FILE")]
        path: PathBuf,
        /// Accept a pack that is unsigned or signed by an untrusted key (as untrusted).
        #[arg(long)]
        allow_unsigned: bool,
        /// Allow installing a lower version than the one installed.
        #[arg(long)]
        allow_downgrade: bool,
        /// Replace the installed version with a pack of the same version whose content changed.
        #[arg(long)]
        force: bool,
    },
    /// The installed packs, each re-verified.
    List,
    /// Remove an installed pack.
    Remove { name: String },
    /// The keys packs may be signed with.
    Trust {
        #[command(subcommand)]
        cmd: TrustCmd,
    },
    /// Pin the installed packs in a lock file, or check them against one.
    Lock {
        /// The lock file to write.
        #[arg(short = 'o', value_name = "FILE", default_value = "moonscan.lock")]
        out: PathBuf,
        /// Check the installed packs against this lock file instead of writing one.
        #[arg(long, value_name = "LOCKFILE", conflicts_with = "out")]
        check: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum TrustCmd {
    /// Trust a public key: a minisign .pub file, or its base64 line.
    Add {
        #[arg(value_name = "KEYFILE|KEYSTRING")]
        key: String,
    },
    /// The trusted keys.
    List,
    /// Stop trusting a key: its .pub file, its base64 line, or its ID.
    Remove {
        #[arg(value_name = "KEY")]
        id: String,
    },
}

/// Runs `moonscan pack ...` (`argv` starts at "pack"); returns the exit status.
pub fn run(args: PackArgs) -> u8 {
    let places = super::places::from_env();
    let data = || packs::data_dir(&places);
    // The core library packs' plugins require from: the plugin folder's.
    let core = || moonscan::plugins::default_dir(&places);
    let result = match args.cmd {
        Cmd::New { dir, name } => new_pack(&dir, name),
        Cmd::Keygen { base, force } => keygen(&base, force),
        Cmd::Sign { dir, key, update_hashes } => sign_pack(&dir, &key, update_hashes, &core()),
        Cmd::Verify { path, allow_unsigned } => data().and_then(|d| verify(&d, &path, allow_unsigned, &core())),
        Cmd::Install { path, allow_unsigned, allow_downgrade, force } => {
            data().and_then(|d| install(&d, &path, allow_unsigned, allow_downgrade, force, &core()))
        }
        Cmd::List => data().and_then(|d| list(&d, &core())),
        Cmd::Remove { name } => data().and_then(|d| packs::remove(&d, &name)).map(|()| {
            say!("removed pack {name}");
            0
        }),
        Cmd::Trust { cmd } => data().and_then(|d| trust(&d, cmd)),
        Cmd::Lock { out, check } => data().and_then(|d| lock(&d, &out, check.as_deref(), &core())),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            tell!("moonscan pack: {e}");
            1
        }
    }
}

fn bad(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Config, msg)
}

fn password() -> Option<String> {
    std::env::var(PASSWORD_VAR).ok().filter(|p| !p.is_empty())
}

fn status(v: &packs::VerifiedPack) -> String {
    match (&v.signer, v.trusted) {
        (Some(id), true) => match &v.signer_key {
            Some(k) => format!("signed by trusted key {id} (public key {k})"),
            None => format!("signed by trusted key {id}"),
        },
        (Some(id), false) => format!("UNTRUSTED: signed by key {id}, which is not in the trust store"),
        (None, _) => "UNSIGNED".into(),
    }
}

fn verify(data: &Path, path: &Path, allow_unsigned: bool, core: &Path) -> Result<u8> {
    let trust = Trust::load(data, allow_unsigned)?;
    let v = packs::verify(path, &trust, core)?;
    let m = &v.manifest;
    say!("pack {} {}: OK, {}", m.name, m.version, status(&v));
    say!("  manifest sha256 {}", v.manifest_sha256);
    let ids: Vec<&str> = v.plugins.iter().map(|p| p.meta.id.as_str()).collect();
    say!("  {} plugin(s): {}", ids.len(), if ids.is_empty() { "-".into() } else { ids.join(", ") });
    if !m.probes.is_empty() {
        say!("  {} probe file(s), {} probe(s)", m.probes.len(), v.probes.probes().len());
    }
    if !v.extras.is_empty() {
        say!("  not signed and not installed: {}", v.extras.join(", "));
    }
    Ok(0)
}

fn install(
    data: &Path,
    path: &Path,
    allow_unsigned: bool,
    allow_downgrade: bool,
    force: bool,
    core: &Path,
) -> Result<u8> {
    let trust = Trust::load(data, allow_unsigned)?;
    let v = packs::verify(path, &trust, core)?;
    let report = packs::install(data, &v, allow_downgrade, force)?;
    let m = &v.manifest;
    let replaced = report.replaced.map(|r| format!(", replacing {r}")).unwrap_or_default();
    say!("installed pack {} {} ({}) in {}{replaced}", m.name, m.version, status(&v), report.dir.display());
    if !v.trusted {
        tell!("moonscan pack: warning: pack {} is not signed by a trusted key", m.name);
    }
    Ok(0)
}

fn list(data: &Path, core: &Path) -> Result<u8> {
    let all = packs::scan_installed(data, core)?;
    let mut code = 0;
    let mut out = std::io::stdout().lock();
    for (name, r) in &all {
        match r {
            Ok(p) => {
                let st = match (&p.signer, p.trusted) {
                    (Some(id), true) => format!("trusted ({id} {})", p.signer_key.as_deref().unwrap_or("?")),
                    (Some(id), false) => format!("untrusted ({id})"),
                    (None, _) => "unsigned".into(),
                };
                let _ = writeln!(
                    out,
                    "{:<24} {:<12} {:<28} {} plugin(s), {} probe file(s)  {}",
                    p.name,
                    p.version,
                    st,
                    p.plugin_files.len(),
                    p.probe_files.len(),
                    p.dir.display()
                );
            }
            Err(e) => {
                let _ = writeln!(out, "{name:<24} {:<12} BROKEN", "-");
                tell!("moonscan pack: {e}");
                code = 1;
            }
        }
    }
    let _ = writeln!(out, "{} pack(s) in {}", all.len(), packs::packs_dir(data).display());
    Ok(code)
}

fn trust(data: &Path, cmd: TrustCmd) -> Result<u8> {
    match cmd {
        TrustCmd::Add { key } => {
            let p = Path::new(&key);
            let text = if p.is_file() {
                let b = sign::read_capped(p, sign::MAX_KEY).map_err(|e| bad(format!("{key}: {e}")))?;
                String::from_utf8(b).map_err(|_| bad(format!("{key}: not a minisign public key (not text)")))?
            } else {
                key.clone()
            };
            let k = packs::trust_add(data, &text).map_err(|e| bad(format!("{key}: {e}")))?;
            say!("trusted key {} ({})", k.id, k.file.display());
            Ok(0)
        }
        TrustCmd::List => {
            let keys = sign::load_trust_store(&packs::trust_dir(data))?;
            for k in &keys {
                say!("{}  {}", k.id, k.key.to_base64());
            }
            say!("{} trusted key(s) in {}", keys.len(), packs::trust_dir(data).display());
            Ok(0)
        }
        TrustCmd::Remove { id } => {
            let p = Path::new(&id);
            let text = if p.is_file() {
                let b = sign::read_capped(p, sign::MAX_KEY).map_err(|e| bad(format!("{id}: {e}")))?;
                String::from_utf8(b).map_err(|_| bad(format!("{id}: not a minisign public key (not text)")))?
            } else {
                id.clone()
            };
            packs::trust_remove(data, &text)?;
            say!("key {} is no longer trusted", id);
            Ok(0)
        }
    }
}

fn lock(data: &Path, out: &Path, check: Option<&Path>, core: &Path) -> Result<u8> {
    let installed = packs::installed(data, core)?;
    match check {
        Some(lockfile) => {
            packs::check_lock(lockfile, &installed)?;
            say!("{}: the {} installed pack(s) match", lockfile.display(), installed.len());
        }
        None => {
            packs::write_lock(out, &installed)?;
            say!("{}: pinned {} pack(s)", out.display(), installed.len());
        }
    }
    Ok(0)
}

fn keygen(base: &Path, force: bool) -> Result<u8> {
    let with_ext = |ext: &str| {
        let mut s = base.as_os_str().to_owned();
        s.push(ext);
        PathBuf::from(s)
    };
    let (sk_path, pk_path) = (with_ext(".key"), with_ext(".pub"));
    if !force {
        for p in [&sk_path, &pk_path] {
            if p.exists() {
                return Err(bad(format!("{} exists; pass --force to overwrite it", p.display())));
            }
        }
    }
    let keys = sign::generate(password())?;
    write_file(&sk_path, keys.secret.as_bytes(), 0o600)?;
    write_file(&pk_path, keys.public.as_bytes(), 0o644)?;
    say!("key {} made:", keys.id);
    say!(
        "  secret {} ({})",
        sk_path.display(),
        if keys.encrypted { format!("encrypted with ${PASSWORD_VAR}") } else { "unencrypted: keep it private".into() }
    );
    say!("  public {}", pk_path.display());
    say!("trust it with: moonscan pack trust add {}", pk_path.display());
    Ok(0)
}

fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |e: std::io::Error| Error::new(ErrorKind::Io, format!("{}: {e}", path.display()));
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(path).map_err(io)?;
    f.write_all(bytes).map_err(io)
}

fn sign_pack(dir: &Path, key: &Path, update_hashes: bool, core: &Path) -> Result<u8> {
    let sk = sign::load_secret_key(key, password())?;
    let r = packs::sign_dir(dir, &sk, update_hashes, core)?;
    for f in &r.updated {
        say!("updated the sha256 of {f}");
    }
    if r.rewritten {
        say!("note: pack.yaml was rewritten in canonical form to hold the hashes (its comments are gone)");
    }
    say!(
        "signed pack {} {} with key {} ({}); trusted comment: {}",
        r.name,
        r.version,
        r.key_id,
        dir.join("pack.sig").display(),
        r.trusted_comment
    );
    Ok(0)
}

fn new_pack(dir: &Path, name: Option<String>) -> Result<u8> {
    let name = match name {
        Some(n) => n,
        None => dir
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .ok_or_else(|| bad(format!("{}: cannot take a pack name from it; pass --name", dir.display())))?,
    };
    if !packs::manifest::valid_name(&name) {
        return Err(bad(format!(
            "{name:?} is not a valid pack name (1-64 of a-z, 0-9 and -, starting with a letter or digit); pass --name"
        )));
    }
    if name == packs::CORE {
        return Err(bad(format!(
            "the pack name {name:?} is reserved for the plugins that ship with moonscan; pass --name"
        )));
    }
    if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(bad(format!("{}: exists and is not an empty folder", dir.display())));
    }
    let io = |p: &Path, e: std::io::Error| Error::new(ErrorKind::Io, format!("{}: {e}", p.display()));
    std::fs::create_dir_all(dir.join("tests")).map_err(|e| io(dir, e))?;
    let id = if name.len() + 13 <= 64 { format!("{name}-ssh-software") } else { "ssh-software".into() };
    let plugin = PLUGIN.replace("{ID}", &id);
    let manifest = MANIFEST.replace("{NAME}", &name).replace("{HASH}", &moonscan::text::sha256_hex(plugin.as_bytes()));
    let readme = README.replace("{NAME}", &name).replace("{ID}", &id);
    for (rel, text) in [
        ("pack.yaml", manifest.as_str()),
        ("ssh-software.lua", plugin.as_str()),
        ("tests/ssh-banner.txt", "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n"),
        ("README.md", readme.as_str()),
    ] {
        let p = dir.join(rel);
        std::fs::write(&p, text).map_err(|e| io(&p, e))?;
    }
    say!("made pack {name} in {}", dir.display());
    say!("next: read {}", dir.join("README.md").display());
    Ok(0)
}

const MANIFEST: &str = r#"# A moonscan plugin pack (`moonscan pack new`). Every file the pack ships is
# listed here with its sha256; `moonscan pack sign DIR --key KEY --update-hashes`
# writes the hashes and signs this file's exact bytes into pack.sig.
name: {NAME}
version: 0.1.0
engine: ">=0.1"
description: An example pack made by moonscan pack new.
authors: [Your Name]
license: MIT
plugins:
  - file: ssh-software.lua
    sha256: {HASH}
"#;

const PLUGIN: &str = r#"-- {ID}: the software an SSH server names in its banner.
--
-- An example plugin made by `moonscan pack new`. Try it offline on the
-- banner recorded in tests/:
--
--   moonscan plugins test ssh-software.lua --port 22 --service ssh --banner-file tests/ssh-banner.txt

return {
  id = "{ID}",
  description = "Shows the software an SSH server names in its banner.",
  categories = { "discovery", "safe" },
  ports = { 22 },
  services = { "ssh" },
  run = function(ctx)
    local banner = ctx.banner or ""
    local proto, software = string.match(banner, "^SSH%-([%d%.]+)%-([^%s]+)")
    if not software then
      return nil, "no SSH banner"
    end
    -- Something with a severity would be ctx:finding{ severity = ..., title = ... }.
    return { protocol = proto, software = software }
  end,
}
"#;

const README: &str = r#"# Pack {NAME}

A moonscan plugin pack. `pack.yaml` lists every file the pack ships with its
sha256, and `pack.sig` (made by `moonscan pack sign`) signs pack.yaml's exact
bytes. This README and the `tests/` folder are for the pack's authors: they
are not signed and `moonscan pack install` does not install them; any other
file not listed in pack.yaml makes the pack fail to verify.

## Test the plugin offline

`tests/ssh-banner.txt` is a recorded SSH banner. Run the plugin on it, with
no network:

    moonscan plugins test ssh-software.lua --port 22 --service ssh --banner-file tests/ssh-banner.txt

It should print its result, `software: OpenSSH_9.2p1` (and `protocol: 2.0`).
Record more banners in tests/ (e.g. `printf '' | nc HOST 22 > tests/x.txt`)
and run the plugin on each after every change.

## Sign, verify, install

    moonscan pack keygen -o ~/mykey               # ~/mykey.key (secret), ~/mykey.pub: keep them out of the pack
    moonscan pack sign . --key ~/mykey.key --update-hashes
    moonscan pack trust add ~/mykey.pub           # on every machine that installs it
    moonscan pack verify .
    moonscan pack install .

Or ship it as a .tar.gz of this folder: `tar czf {NAME}.tar.gz {NAME}/`.
Each change to a listed file needs `--update-hashes` and a new signature;
raise `version` for every release (installing a lower version needs
`--allow-downgrade`).
"#;
