//! moonscan's man pages and shell completions, made from the command
//! line's own definitions ([`Args`]) with what clap cannot know: the
//! sections nmap users look for (EXAMPLES, EXIT STATUS, ENVIRONMENT,
//! FILES), a page per subcommand, and nmap's short spellings and the
//! plugins in the completions.

use super::{nmap_words, Args};

/// The completions of `shell` for moonscan: clap's, with nmap's short
/// spellings (`-s<Tab>`: -sS -sT -sU..., `-o<Tab>`, `-P<Tab>`) and, after
/// `--script`, the installed plugins' ids and the categories (bash, zsh
/// and fish; the other shells get clap's alone).
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    use clap::CommandFactory;
    use clap_complete::Shell;
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Args::command(), "moonscan", &mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let mut words: Vec<&str> = nmap_words::NMAP_FLAGS.iter().map(|(short, _)| *short).collect();
    words.dedup();
    let long = |short: &str| nmap_words::NMAP_FLAGS.iter().find(|(s, _)| *s == short).map_or("", |(_, l)| *l);
    // The ids of the plugins a scan would find, and the category words.
    let plugins = "moonscan plugins list 2>/dev/null | cut -d' ' -f1";
    let categories = moonscan::plugins::load::select::NMAP_CATEGORIES.join(" ");
    let text = match shell {
        Shell::Bash => {
            let top = "opts=\"-p -F ";
            let script = "                --script)\n                    COMPREPLY=($(compgen -f \"${cur}\"))";
            text.replacen(top, &format!("opts=\"{} -p -F ", words.join(" ")), 1).replacen(
                script,
                &format!(
                    "                --script)\n                    COMPREPLY=($(compgen -W \"$({plugins}) {categories} all\" -- \"${{cur}}\"))"
                ),
                1,
            )
        }
        Shell::Fish => {
            let mut t = text;
            for w in &words {
                t.push_str(&format!("complete -c moonscan -o {} -d '{}'\n", &w[1..], long(w)));
            }
            t.push_str(&format!(
                "complete -c moonscan -l script -x -a '({}) {categories} all'\n",
                plugins.replace("cut -d' ' -f1", "string split -f1 \\' \\'")
            ));
            t
        }
        Shell::Zsh => {
            let head = "    _arguments \"${_arguments_options[@]}\" : \\\n";
            let specs: String = words.iter().map(|w| format!("'{w}[{}]' \\\n", long(w))).collect();
            text.replacen(head, &format!("{head}{specs}"), 1)
        }
        _ => text,
    };
    text.into_bytes()
}

/// The subcommands with a page of their own (`moonscan-pack(1)`...).
pub const MAN_PAGES: [&str; 4] = ["pack", "db", "probes", "plugins"];

/// moonscan's man page, in roff, or with `page` one subcommand's
/// (`moonscan-pack(1)`); an unknown page is a usage error.
pub fn man(page: Option<&str>) -> std::result::Result<Vec<u8>, String> {
    use clap::CommandFactory;
    let top = Args::command();
    let mut out = Vec::new();
    let Some(page) = page else {
        let man = clap_mangen::Man::new(top.clone());
        // Rendering into memory cannot fail.
        let _ = man.render_title(&mut out);
        let _ = man.render_name_section(&mut out);
        out.extend_from_slice(MAN_SYNOPSIS.as_bytes());
        let _ = man.render_description_section(&mut out);
        let _ = man.render_options_section(&mut out);
        out.extend_from_slice(MAN_COMMANDS.as_bytes());
        out.extend_from_slice(MAN_TAIL.as_bytes());
        let _ = man.render_version_section(&mut out);
        return Ok(out);
    };
    let sub = top
        .get_subcommands()
        .find(|c| c.get_name() == page && MAN_PAGES.contains(&page))
        .ok_or_else(|| format!("man: no page {page:?} (pages: {})", MAN_PAGES.join(", ")))?;
    let name: &'static str = match page {
        "pack" => "moonscan-pack",
        "db" => "moonscan-db",
        "probes" => "moonscan-probes",
        _ => "moonscan-plugins",
    };
    let cmd = sub.clone().name(name).bin_name(format!("moonscan {page}")).version(env!("CARGO_PKG_VERSION"));
    let _ = clap_mangen::Man::new(cmd).title(name).render(&mut out);
    out.extend_from_slice(b".SH SEE ALSO\n\\fBmoonscan\\fR(1)\n");
    Ok(out)
}

/// The SYNOPSIS of moonscan(1): its forms, not every option.
const MAN_SYNOPSIS: &str = r".SH SYNOPSIS
\fBmoonscan\fR [\fIOPTIONS\fR] \fITARGETS\fR...
.br
\fBmoonscan \-\-resume\fR \fIFILE\fR
.br
\fBmoonscan\fR \fBpack\fR|\fBdb\fR|\fBprobes\fR|\fBplugins\fR \fICOMMAND\fR [\fIARGS\fR]
.br
\fBmoonscan \-\-script\-help\fR \fIEXPR\fR
.PP
nmap's spellings of options are taken too: \fB\-sS\fR, \fB\-sT\fR, \fB\-sU\fR, \fB\-sV\fR, \fB\-sC\fR, \fB\-sn\fR, \fB\-Pn\fR, \fB\-oN\fR, \fB\-oX\fR, \fB\-oG\fR, \fB\-oA\fR, \fB\-iL\fR, \fB\-T4\fR...
";

/// The subcommands, each with its own page.
const MAN_COMMANDS: &str = r".SH COMMANDS
.TP
\fBmoonscan\-pack\fR(1)
Make, sign, verify, install and pin plugin packs.
.TP
\fBmoonscan\-db\fR(1)
Show, compare and export scans stored with \fB\-\-db\fR.
.TP
\fBmoonscan\-probes\fR(1)
Show or import service probes (nmap\(aqs nmap\-service\-probes).
.TP
\fBmoonscan\-plugins\fR(1)
List, show and test plugins.
";

/// EXAMPLES, EXIT STATUS, ENVIRONMENT and FILES of moonscan(1).
const MAN_TAIL: &str = r".SH EXAMPLES
.TP
\fBmoonscan \-sV \-sC \-p\- 192.0.2.10\fR
Every TCP port of one host, with service detection and the default plugins.
.TP
\fBmoonscan \-n \-Pn \-p 80,443 \-\-max\-rate 10000 \-oJ scan.ndjson 198.51.100.0/24\fR
Two ports of a /24 without host discovery or DNS, at most 10,000 probes a second, events as NDJSON.
.TP
\fBmoonscan \-sU \-\-top\-ports 100 \-oA lab 192.0.2.10\fR
The 100 most common UDP ports; nmap\(aqs normal, XML and grepable reports.
.TP
\fBmoonscan \-sV \-\-script \(dqssl\-* and safe\(dq \-\-db scans.db 192.0.2.0/28\fR
TLS plugins that are safe, results stored in SQLite (\fBmoonscan db diff\fR compares two scans).
.TP
\fBmoonscan \-\-resume moonscan.resume\fR
Finish a scan stopped with Ctrl\-C (with host discovery too); its \fB\-oX\fR file becomes one report of the whole scan.
.SH EXIT STATUS
.TP
0
The scan ran without errors.
.TP
1
It ran, but some targets failed (each failure is an \fBerror\fR event), or it was interrupted.
.TP
2
Bad usage: one line on standard error says what is wrong.
.SH ENVIRONMENT
.TP
\fBMOONSCAN_PLUGINS\fR
The folder of the core plugins (default: the ones built into moonscan).
.TP
\fBMOONSCAN_PROBES\fR
The folder of the probe files (default: the ones built into moonscan).
.TP
\fBMOONSCAN_HOME\fR
moonscan\(aqs own folder: installed packs, trusted keys, plugin metadata (default \fI$XDG_DATA_HOME/moonscan\fR, else \fI~/.local/share/moonscan\fR).
.TP
\fBXDG_CACHE_HOME\fR
Where the built\-in probes and plugins are written out (default \fI~/.cache\fR).
.TP
\fBNMAPDIR\fR
Where nmap\(aqs data files are read from (nmap\-mac\-prefixes, scripts/script.db), before \fI/usr/share/nmap\fR.
.TP
\fBPGPASSWORD\fR, \fBPGPASSFILE\fR
The password of a \fB\-\-db postgres://\fR store.
.SH FILES
.TP
\fImoonscan.resume\fR
Written by Ctrl\-C in the current folder: what is left of the scan.
.TP
\fI~/.cache/moonscan/\fR
The built\-in probes and plugins, written out once per build.
.TP
\fI/usr/share/nmap/\fR
nmap\(aqs data, read when installed: nmap\-mac\-prefixes (MAC vendors), nmap.xsl (\fB\-oX\fR stylesheet), scripts/script.db (category counts), nmap\-service\-probes (\fBmoonscan probes import\fR).
.SH SEE ALSO
\fBmoonscan\-pack\fR(1), \fBmoonscan\-db\fR(1), \fBmoonscan\-probes\fR(1), \fBmoonscan\-plugins\fR(1), \fBnmap\fR(1)
";
