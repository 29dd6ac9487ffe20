//! `--script` expressions: which plugins to run.
//!
//! In: nmap's `--script` syntax, a comma-separated list whose items are plugin
//! ids, categories, globs (`http-*`, `ssh-?ostkey`, `core:*`), `all`, boolean
//! expressions over those (`default or safe`, `(safe and not intrusive)`), or
//! paths (items ending in `.lua` or containing `/`). Out: a [`Selection`] that
//! gives the paths to load and tells whether a plugin (id and categories) is
//! selected. Parsing never touches the filesystem, and never recurses deeper
//! than the nesting limit or panics, whatever the input.

use std::fmt::Display;
use std::path::PathBuf;

use crate::error::{Error, ErrorKind, Result};

/// The longest expression accepted, in bytes.
const MAX_LEN: usize = 4096;
/// The deepest nesting of parentheses and `not`s accepted.
const MAX_DEPTH: usize = 64;
/// The most terms (`all` included) accepted across the whole expression.
const MAX_TERMS: usize = 1024;

/// A parsed `--script` expression.
#[derive(Clone, Debug)]
pub struct Selection {
    paths: Vec<PathBuf>,
    /// The terms other than `all`, as written; [`Node::Term`] indexes this.
    terms: Vec<String>,
    /// One tree per non-path item: a plugin is selected when any of them holds.
    items: Vec<Node>,
}

#[derive(Clone, Debug)]
enum Node {
    All,
    Term(usize),
    Not(Box<Node>),
    And(Vec<Node>),
    Or(Vec<Node>),
}

impl Selection {
    /// Parses an expression.
    pub fn parse(expr: &str) -> Result<Selection> {
        if expr.len() > MAX_LEN {
            let msg = format!("`scripts`: the expression is {} bytes long; at most {MAX_LEN} are allowed", expr.len());
            return Err(Error::new(ErrorKind::Config, msg));
        }
        if expr.trim().is_empty() {
            return Err(Error::new(ErrorKind::Config, "`scripts`: empty expression"));
        }
        let mut sel = Selection { paths: Vec::new(), terms: Vec::new(), items: Vec::new() };
        let mut count = 0;
        for (start, item) in split_items(expr) {
            let trimmed = item.trim();
            if trimmed.is_empty() {
                return Err(fail(expr, start, "empty item"));
            }
            let lua = trimmed.len().checked_sub(4).and_then(|i| trimmed.get(i..));
            if lua.is_some_and(|end| end.eq_ignore_ascii_case(".lua")) || trimmed.contains('/') {
                sel.paths.push(PathBuf::from(trimmed));
                continue;
            }
            let toks = tokenize(expr, start, item)?;
            let mut p = Parser { expr, toks, pos: 0, depth: 0, terms: &mut sel.terms, count: &mut count };
            let node = p.or_expr()?;
            if let Some(&tok) = p.toks.get(p.pos) {
                return Err(p.unexpected(tok));
            }
            sel.items.push(node);
        }
        Ok(sel)
    }

    /// Paths named by the expression (files or folders of plugins), in order.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Whether the plugin with this id and these categories is selected by the non-path items.
    pub fn selects(&self, id: &str, categories: &[String]) -> bool {
        self.selects_names(&[id], categories)
    }

    /// As [`Selection::selects`] for a plugin known by several names (its
    /// id and its pack-qualified id, `pack:id`).
    pub fn selects_names(&self, names: &[&str], categories: &[String]) -> bool {
        self.items.iter().any(|node| self.holds(node, names, categories))
    }

    /// Whether some term is exactly one of `names` (no wildcard, no
    /// category): how a plugin that must be chosen by name is chosen.
    pub fn names_exactly(&self, names: &[&str]) -> bool {
        self.terms.iter().any(|t| names.iter().any(|n| t.eq_ignore_ascii_case(n)))
    }

    /// The terms that are nmap's category names (`vuln`, `safe`...) and ask
    /// for plugins (not under a `not`), in order, once each.
    pub fn categories(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for item in &self.items {
            self.wanted_terms(item, false, &mut out);
        }
        out
    }

    fn wanted_terms<'a>(&'a self, node: &Node, negated: bool, out: &mut Vec<&'a str>) {
        match node {
            Node::All => {}
            Node::Term(i) => {
                let term = self.terms[*i].as_str();
                let nmaps = NMAP_CATEGORIES.iter().any(|c| c.eq_ignore_ascii_case(term));
                if nmaps && !negated && !out.iter().any(|o| o.eq_ignore_ascii_case(term)) {
                    out.push(term);
                }
            }
            Node::Not(inner) => self.wanted_terms(inner, !negated, out),
            Node::And(list) | Node::Or(list) => list.iter().for_each(|n| self.wanted_terms(n, negated, out)),
        }
    }

    /// The terms (non-path, non-`all`) that match no plugin id or category of `plugins`
    /// (each given as (id, categories)), for an nmap-like error:
    /// "'foo' did not match a category, plugin id or path".
    pub fn unmatched<'a>(&'a self, plugins: &[(&str, &[String])]) -> Vec<&'a str> {
        let mut out: Vec<&str> = Vec::new();
        for term in &self.terms {
            let hit = plugins.iter().any(|(id, cats)| matches(term, id, cats));
            if !hit && !out.iter().any(|o| o.eq_ignore_ascii_case(term)) {
                out.push(term);
            }
        }
        out
    }

    fn holds(&self, node: &Node, names: &[&str], cats: &[String]) -> bool {
        match node {
            Node::All => true,
            Node::Term(i) => names.iter().any(|id| matches(&self.terms[*i], id, cats)),
            Node::Not(inner) => !self.holds(inner, names, cats),
            Node::And(list) => list.iter().all(|n| self.holds(n, names, cats)),
            Node::Or(list) => list.iter().any(|n| self.holds(n, names, cats)),
        }
    }
}

/// nmap's script categories.
pub const NMAP_CATEGORIES: [&str; 14] = [
    "auth",
    "broadcast",
    "brute",
    "default",
    "discovery",
    "dos",
    "exploit",
    "external",
    "fuzzer",
    "intrusive",
    "malware",
    "safe",
    "version",
    "vuln",
];

/// How many scripts each category has in the user's nmap (its
/// scripts/script.db in one of nmap's folders `nmap_dirs`, `Entry {
/// filename = "x.nse", categories = { "a", "b", } }` lines), or none when
/// nmap is not installed.
pub fn nmap_category_counts(nmap_dirs: &[std::path::PathBuf]) -> Option<std::collections::HashMap<String, usize>> {
    crate::files::nmap_data(nmap_dirs, "scripts/script.db", 4 << 20).map(|text| category_counts(&text))
}

/// Counts of script.db's categories.
pub fn category_counts(script_db: &str) -> std::collections::HashMap<String, usize> {
    let mut counts = std::collections::HashMap::new();
    for line in script_db.lines() {
        let Some((_, cats)) = line.split_once("categories") else { continue };
        for (i, part) in cats.split('"').enumerate() {
            if i % 2 == 1 && !part.is_empty() {
                *counts.entry(part.to_ascii_lowercase()).or_insert(0) += 1;
            }
        }
    }
    counts
}

/// One line when a category the expression names has fewer plugins here
/// than nmap's (from `nmap_counts`) has scripts: what nmap users may
/// expect `--script vuln` to run and moonscan does not have.
pub fn category_note(
    sel: &Selection,
    available: &[(&str, &[String])],
    nmap_counts: Option<&std::collections::HashMap<String, usize>>,
) -> Option<String> {
    let counts = nmap_counts?;
    let short: Vec<String> = sel
        .categories()
        .into_iter()
        // -sC's `default` would be said on every scan.
        .filter(|cat| !cat.eq_ignore_ascii_case("default"))
        .filter_map(|cat| {
            let ours = available.iter().filter(|(_, cats)| cats.iter().any(|c| c.eq_ignore_ascii_case(cat))).count();
            let theirs = counts.get(&cat.to_ascii_lowercase()).copied().unwrap_or(0);
            (ours < theirs).then(|| format!("{cat} {ours} (nmap {theirs})"))
        })
        .collect();
    (!short.is_empty()).then(|| {
        format!(
            "`scripts`: fewer plugins than nmap has scripts in {}; `moonscan plugins list` shows them",
            short.join(", ")
        )
    })
}

/// A usage error naming the problem and its 1-based character position in `expr`.
fn fail(expr: &str, at: usize, what: impl Display) -> Error {
    let pos = expr[..at].chars().count() + 1;
    Error::new(ErrorKind::Config, format!("`scripts`: {what} in '{expr}' at position {pos}"))
}

/// The items of `expr` with their byte offsets, split at commas outside parentheses.
fn split_items(expr: &str) -> Vec<(usize, &str)> {
    let (mut out, mut start, mut depth) = (Vec::new(), 0, 0usize);
    for (i, b) in expr.bytes().enumerate() {
        match b {
            b'(' => depth += 1,
            b')' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                out.push((start, &expr[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push((start, &expr[start..]));
    out
}

fn matches(term: &str, id: &str, cats: &[String]) -> bool {
    glob(term, id) || cats.iter().any(|c| glob(term, c))
}

/// Whether `name` matches `pattern`, ignoring ASCII case: `*` is any run, `?` any
/// one character (ids and categories are ASCII). Linear backtracking, no recursion.
fn glob(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut i, mut j, mut star) = (0, 0, None);
    while j < n.len() {
        if i < p.len() && (p[i] == b'?' || p[i].eq_ignore_ascii_case(&n[j])) {
            (i, j) = (i + 1, j + 1);
        } else if i < p.len() && p[i] == b'*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            star = Some((si, sj + 1));
            (i, j) = (si + 1, sj + 1);
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == b'*')
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Open,
    Close,
    Comma,
    And,
    Or,
    Not,
    Word,
}

#[derive(Clone, Copy, Debug)]
struct Tok<'e> {
    kind: Kind,
    /// Byte offset in the whole expression.
    at: usize,
    text: &'e str,
}

fn tokenize<'e>(expr: &'e str, base: usize, item: &'e str) -> Result<Vec<Tok<'e>>> {
    let word = |c: char| c.is_ascii_alphanumeric() || "_.:-*?".contains(c);
    let mut toks = Vec::new();
    let mut chars = item.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let kind = match c {
            _ if c.is_whitespace() => continue,
            '(' => Kind::Open,
            ')' => Kind::Close,
            ',' => Kind::Comma,
            _ if word(c) => {
                let mut end = i + c.len_utf8();
                while let Some(&(j, d)) = chars.peek().filter(|&&(_, d)| word(d)) {
                    end = j + d.len_utf8();
                    chars.next();
                }
                let text = &item[i..end];
                let kind = [("and", Kind::And), ("or", Kind::Or), ("not", Kind::Not)]
                    .into_iter()
                    .find(|(k, _)| text.eq_ignore_ascii_case(k))
                    .map_or(Kind::Word, |(_, kind)| kind);
                toks.push(Tok { kind, at: base + i, text });
                continue;
            }
            _ => return Err(fail(expr, base + i, format!("unexpected character '{c}'"))),
        };
        toks.push(Tok { kind, at: base + i, text: &item[i..i + 1] });
    }
    Ok(toks)
}

/// Recursive descent over one item: or < and < not < parentheses and terms.
struct Parser<'e, 's> {
    expr: &'e str,
    toks: Vec<Tok<'e>>,
    pos: usize,
    depth: usize,
    terms: &'s mut Vec<String>,
    count: &'s mut usize,
}

impl<'e> Parser<'e, '_> {
    fn eat(&mut self, kind: Kind) -> Option<Tok<'e>> {
        let tok = self.toks.get(self.pos).copied().filter(|t| t.kind == kind)?;
        self.pos += 1;
        Some(tok)
    }

    fn or_expr(&mut self) -> Result<Node> {
        self.chain(Kind::Or, Self::and_expr, Node::Or)
    }

    fn and_expr(&mut self) -> Result<Node> {
        self.chain(Kind::And, Self::not_expr, Node::And)
    }

    /// `next (op next)*`, as one flat node.
    fn chain(&mut self, op: Kind, next: fn(&mut Self) -> Result<Node>, wrap: fn(Vec<Node>) -> Node) -> Result<Node> {
        let mut list = vec![next(self)?];
        while self.eat(op).is_some() {
            list.push(next(self)?);
        }
        Ok(if list.len() == 1 { list.remove(0) } else { wrap(list) })
    }

    fn not_expr(&mut self) -> Result<Node> {
        match self.eat(Kind::Not) {
            Some(not) => Ok(Node::Not(Box::new(self.nested(not, Self::not_expr)?))),
            None => self.primary(),
        }
    }

    /// Runs `f` one level deeper, refusing to go past [`MAX_DEPTH`].
    fn nested(&mut self, tok: Tok, f: fn(&mut Self) -> Result<Node>) -> Result<Node> {
        if self.depth >= MAX_DEPTH {
            return Err(fail(self.expr, tok.at, format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        self.depth += 1;
        let node = f(self);
        self.depth -= 1;
        node
    }

    fn primary(&mut self) -> Result<Node> {
        if let Some(word) = self.eat(Kind::Word) {
            *self.count += 1;
            if *self.count > MAX_TERMS {
                return Err(fail(self.expr, word.at, format!("more than {MAX_TERMS} terms")));
            }
            if word.text.eq_ignore_ascii_case("all") {
                return Ok(Node::All);
            }
            self.terms.push(word.text.to_string());
            return Ok(Node::Term(self.terms.len() - 1));
        }
        if let Some(open) = self.eat(Kind::Open) {
            let inner = self.nested(open, Self::or_expr)?;
            return match self.eat(Kind::Close) {
                Some(_) => Ok(inner),
                None => Err(match self.toks.get(self.pos) {
                    Some(&tok) => self.unexpected(tok),
                    None => fail(self.expr, open.at, "unbalanced parenthesis"),
                }),
            };
        }
        Err(self.missing())
    }

    /// The error for a place where a term or '(' was needed and none is.
    fn missing(&self) -> Error {
        let prev = self.pos.checked_sub(1).and_then(|i| self.toks.get(i)).copied();
        let cur = self.toks.get(self.pos).copied();
        let both = |t: Tok| fail(self.expr, t.at, format!("'{}' needs a term on both sides", t.text.to_lowercase()));
        match (prev, cur) {
            (Some(p), _) if matches!(p.kind, Kind::And | Kind::Or) => both(p),
            (Some(p), _) if p.kind == Kind::Not => fail(self.expr, p.at, "'not' needs a term after it"),
            (_, Some(c)) if matches!(c.kind, Kind::And | Kind::Or) => both(c),
            (Some(p), Some(c)) if p.kind == Kind::Open && c.kind == Kind::Close => {
                fail(self.expr, p.at, "empty parentheses")
            }
            (Some(p), None) => fail(self.expr, p.at, "unbalanced parenthesis"),
            (_, Some(c)) => self.unexpected(c),
            (None, None) => fail(self.expr, 0, "expected a term"),
        }
    }

    /// The error for a token left over where an operator, ')' or the end was expected.
    fn unexpected(&self, tok: Tok) -> Error {
        match tok.kind {
            Kind::Comma => fail(self.expr, tok.at, "',' inside parentheses (use 'or' there)"),
            Kind::Close => fail(self.expr, tok.at, "unbalanced parenthesis"),
            _ => fail(self.expr, tok.at, format!("missing 'and' or 'or' before '{}'", tok.text)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLUGINS: &[(&str, &[&str])] = &[
        ("http-title", &["default", "discovery", "safe"]),
        ("http-enum", &["discovery", "intrusive", "vuln"]),
        ("ssh-hostkey", &["default", "discovery", "safe"]),
        ("ssh-brute", &["brute", "intrusive"]),
        ("ssl-cert", &["default", "discovery", "safe"]),
        ("core:banner", &["discovery", "safe"]),
        ("mypack:smb-vuln", &["vuln", "intrusive"]),
    ];

    fn cats(list: &[&str]) -> Vec<String> {
        list.iter().map(|c| c.to_string()).collect()
    }

    /// The ids of [`PLUGINS`] that `expr` selects, in table order.
    fn chosen(expr: &str) -> Vec<&'static str> {
        let sel = Selection::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        PLUGINS.iter().filter(|(id, c)| sel.selects(id, &cats(c))).map(|(id, _)| *id).collect()
    }

    fn err(expr: &str) -> String {
        let e = Selection::parse(expr).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config);
        e.to_string()
    }

    #[test]
    fn ids_and_categories() {
        assert_eq!(chosen("http-title"), ["http-title"]);
        assert_eq!(chosen("core:banner"), ["core:banner"]);
        assert_eq!(chosen("intrusive"), ["http-enum", "ssh-brute", "mypack:smb-vuln"]);
        assert_eq!(chosen("vuln"), ["http-enum", "mypack:smb-vuln"]);
        assert!(chosen("nosuch").is_empty());
    }

    #[test]
    fn all_selects_everything() {
        assert_eq!(chosen("all").len(), PLUGINS.len());
        assert_eq!(chosen(" ALL ").len(), PLUGINS.len());
        assert_eq!(chosen("all and not intrusive"), ["http-title", "ssh-hostkey", "ssl-cert", "core:banner"]);
        assert!(Selection::parse("all").unwrap().unmatched(&[]).is_empty());
    }

    #[test]
    fn globs() {
        assert_eq!(chosen("http-*"), ["http-title", "http-enum"]);
        assert_eq!(chosen("*-title"), ["http-title"]);
        assert_eq!(chosen("ssh-?ostkey"), ["ssh-hostkey"]);
        assert_eq!(chosen("core:*"), ["core:banner"]);
        assert_eq!(chosen("mypack:*"), ["mypack:smb-vuln"]);
        assert_eq!(chosen("*").len(), PLUGINS.len());
        assert_eq!(chosen("bru*"), ["ssh-brute"], "globs match categories too");
        assert!(chosen("ssh-?").is_empty());
        assert!(glob("a*b*c", "aXXbYc") && glob("**", "") && glob("", "") && glob("a?c", "abc"));
        assert!(!glob("a?", "a") && !glob("*a", "b") && !glob("abc", "ab") && !glob("", "a"));
        assert!(glob(&"*a".repeat(50), &"a".repeat(200)), "no exponential blow-up");
    }

    #[test]
    fn precedence_is_or_and_not() {
        // ((not safe) and discovery) or brute; other groupings give other answers.
        assert_eq!(chosen("not safe and discovery or brute"), ["http-enum", "ssh-brute"]);
        assert_eq!(chosen("not (safe and (discovery or brute))"), ["http-enum", "ssh-brute", "mypack:smb-vuln"]);
        assert_eq!(chosen("brute or safe and vuln"), ["ssh-brute"]);
        assert!(chosen("(brute or safe) and vuln").is_empty());
        assert_eq!(chosen("not not brute"), ["ssh-brute"]);
    }

    #[test]
    fn parentheses() {
        assert_eq!(chosen("not (safe or brute)"), ["http-enum", "mypack:smb-vuln"]);
        assert_eq!(chosen("((((ssl-cert))))"), ["ssl-cert"]);
        assert_eq!(chosen("(ssh-* )and(brute)"), ["ssh-brute"]);
    }

    #[test]
    fn nmap_examples() {
        assert_eq!(chosen("default or safe"), ["http-title", "ssh-hostkey", "ssl-cert", "core:banner"]);
        assert_eq!(chosen("safe and not intrusive"), ["http-title", "ssh-hostkey", "ssl-cert", "core:banner"]);
        assert_eq!(chosen("http-*,ssl-cert"), ["http-title", "http-enum", "ssl-cert"]);
        assert_eq!(
            chosen("(default or brute),http-enum"),
            ["http-title", "http-enum", "ssh-hostkey", "ssh-brute", "ssl-cert"]
        );
        assert_eq!(chosen(" vuln , (brute and ssh-*) "), ["http-enum", "ssh-brute", "mypack:smb-vuln"]);
    }

    #[test]
    fn commas_inside_parentheses_do_not_split() {
        let e = err("(safe,brute)");
        assert!(e.contains("',' inside parentheses") && e.ends_with("at position 6"), "{e}");
        assert!(err("(a or (b,c)),d").contains("',' inside parentheses"));
    }

    #[test]
    fn path_items() {
        let sel = Selection::parse("./x.lua, dir/ ,/abs/p.lua,http-title,Y.LUA").unwrap();
        let want: Vec<PathBuf> = ["./x.lua", "dir/", "/abs/p.lua", "Y.LUA"].iter().map(PathBuf::from).collect();
        assert_eq!(sel.paths(), want);
        assert!(sel.selects("http-title", &[]) && !sel.selects("x", &[]));
        let only = Selection::parse("mine/").unwrap();
        assert!(!only.selects("http-title", &cats(&["safe"])), "paths alone select by loading, not by id");
        assert!(Selection::parse("safe").unwrap().paths().is_empty());
    }

    #[test]
    fn keywords_and_names_ignore_case() {
        assert_eq!(chosen("SAFE AND NOT Intrusive"), chosen("safe and not intrusive"));
        assert_eq!(chosen("Brute oR VULN"), ["http-enum", "ssh-brute", "mypack:smb-vuln"]);
        assert_eq!(chosen("HTTP-Title"), ["http-title"]);
        assert_eq!(chosen("Http-*"), ["http-title", "http-enum"]);
        assert_eq!(chosen("nOt ALL"), Vec::<&str>::new());
    }

    #[test]
    fn errors_name_problem_and_position() {
        assert_eq!(err(""), "`scripts`: empty expression");
        assert_eq!(err("  "), "`scripts`: empty expression");
        assert_eq!(err("a,,b"), "`scripts`: empty item in 'a,,b' at position 3");
        assert!(err("a,").ends_with("at position 3") && err(", a").starts_with("`scripts`: empty item"));
        assert_eq!(err("http-* and (safe"), "`scripts`: unbalanced parenthesis in 'http-* and (safe' at position 12");
        assert_eq!(err("safe)"), "`scripts`: unbalanced parenthesis in 'safe)' at position 5");
        assert!(err("(safe))").ends_with("position 7") && err(")").contains("unbalanced"));
        assert!(err("((safe)").contains("unbalanced parenthesis") && err("(").contains("unbalanced"));
        assert_eq!(err("and safe"), "`scripts`: 'and' needs a term on both sides in 'and safe' at position 1");
        assert!(err("safe AND").contains("'and' needs a term on both sides"));
        assert!(err("safe or").contains("'or' needs a term on both sides"));
        assert!(err("safe and or brute").ends_with("position 6"));
        assert!(err("(or safe)").contains("'or' needs a term on both sides"));
        assert!(err("(safe and)").contains("'and' needs"));
        assert_eq!(err("not"), "`scripts`: 'not' needs a term after it in 'not' at position 1");
        assert!(err("safe and not").contains("'not' needs a term after it"));
        assert!(err("()").contains("empty parentheses") && err("a and ( )").contains("empty parentheses"));
        assert_eq!(err("safe brute"), "`scripts`: missing 'and' or 'or' before 'brute' in 'safe brute' at position 6");
        assert!(err("(safe) (brute)").contains("missing 'and' or 'or' before '('"));
        assert!(err("(safe brute)").contains("before 'brute'") && err("safe not brute").contains("before 'not'"));
        assert_eq!(err("safe & brute"), "`scripts`: unexpected character '&' in 'safe & brute' at position 6");
        assert!(err("http-title;x").contains("unexpected character ';'"));
        assert!(err("é, x!").ends_with("at position 1") && err("ab, cé").ends_with("at position 6"));
        assert!(err("'safe'").contains("unexpected character '''"));
        assert!(err("ééx").contains("unexpected character 'é'"), "no panic slicing non-ASCII");
    }

    #[test]
    fn limits_give_errors_not_panics() {
        let deep = format!("{}a{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(err(&deep).contains("at most 4096"));
        assert!(err(&"a or ".repeat(20_000)).contains("bytes long"));
        let within = format!("{}a{}", "(".repeat(2000), ")".repeat(2000));
        assert!(err(&within).contains("nesting deeper than 64"));
        assert!(err(&"(".repeat(4000)).contains("nesting deeper than 64"));
        assert_eq!(chosen(&format!("{}brute{}", "(".repeat(64), ")".repeat(64))), ["ssh-brute"]);
        assert!(err(&format!("{}a{}", "(".repeat(65), ")".repeat(65))).ends_with("at position 65"));
        assert!(Selection::parse(&format!("{}a", "not ".repeat(64))).is_ok());
        assert!(err(&format!("{}a", "not ".repeat(65))).contains("nesting deeper"));
        assert!(err(&vec!["a"; 2000].join(",")).contains("more than 1024 terms"));
        assert!(err(&format!("{},all", vec!["a"; 1024].join(","))).contains("more than 1024 terms"), "'all' counts");
        assert!(Selection::parse(&vec!["a"; 1024].join(",")).is_ok());
    }

    #[test]
    fn unmatched_terms() {
        let sel = Selection::parse("http-*,nosuch,safe and not bogus*,all,./x.lua,NoSuch,(vuln or zz?)").unwrap();
        let owned: Vec<(&str, Vec<String>)> = PLUGINS.iter().map(|(id, c)| (*id, cats(c))).collect();
        let plugins: Vec<(&str, &[String])> = owned.iter().map(|(id, c)| (*id, c.as_slice())).collect();
        assert_eq!(sel.unmatched(&plugins), ["nosuch", "bogus*", "zz?"]);
        assert_eq!(sel.unmatched(&[]), ["http-*", "nosuch", "safe", "bogus*", "vuln", "zz?"]);
        assert!(Selection::parse("intrusive,ssh-?ostkey").unwrap().unmatched(&plugins).is_empty());
    }
}

#[cfg(test)]
mod category_tests {
    use super::*;

    #[test]
    fn a_category_with_fewer_plugins_than_nmaps_is_said_in_one_line() {
        let db = "Entry { filename = \"a.nse\", categories = { \"vuln\", \"safe\", } }\n\
                  Entry { filename = \"b.nse\", categories = { \"vuln\", } }\n\
                  Entry { filename = \"c.nse\", categories = { \"default\", } }\n";
        let counts = category_counts(db);
        assert_eq!((counts["vuln"], counts["safe"], counts["default"]), (2, 1, 1));
        let (vuln, default) = (vec!["vuln".to_string()], vec!["default".to_string(), "safe".to_string()]);
        let available: Vec<(&str, &[String])> = vec![("http-git", &vuln), ("http-title", &default)];
        let note = |expr: &str| category_note(&Selection::parse(expr).unwrap(), &available, Some(&counts));
        assert_eq!(
            note("vuln and not http-title").as_deref(),
            Some(
                "`scripts`: fewer plugins than nmap has scripts in vuln 1 (nmap 2); `moonscan plugins list` shows them"
            )
        );
        // As many as nmap's, an id, a glob, `default` (every -sC), a
        // category asked not to run: nothing to say.
        assert_eq!(note("default or http-*"), None);
        assert_eq!(note("safe and not vuln"), None);
        assert_eq!(note("default and not (vuln)"), None);
        assert_eq!(note("safe"), None);
        // Without nmap's script.db there is nothing to compare with.
        assert_eq!(category_note(&Selection::parse("vuln").unwrap(), &available, None), None);
    }
}
