//! The crate's dependency rule, checked by reading the source text.
//!
//! `src/lib.rs`'s module doc lists the top-level modules in numbered layers, floor to top. A
//! module may import from its own layer or any layer below, never from one above, and imports
//! within one layer must not form a cycle. So each layer can be read, tested and changed knowing
//! only what lies beneath it. The one exception is the store: it persists the record types that
//! features define, so it may name those types (only the ones `STORE_MAY_NAME` lists), never
//! their workflows. A path names a type, not the methods called on it: the store's one call on
//! such a type (the fence's own marker, after a commit) is written in `crate::store`'s docs.
//!
//! References are the `crate::` and `$crate::` paths in code (in `use` trees and inline), with
//! comments and literals ignored. `super::` paths are not followed: cross-module imports go
//! through `crate::`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::Path;

const STORE: &str = "store";

/// Feature module -> the record types the store may name from it (it stores them; it never runs
/// the feature's workflow). Anything else the store imports from above it is a violation.
const STORE_MAY_NAME: &[(&str, &[&str])] = &[
    ("ledger", &["ExecutionRecord", "LedgerState", "Fence", "Held"]),
    ("jobs", &["TurnEnd", "TurnHistory"]),
    ("money", &["Charge", "PaymentEvent", "Refund"]),
    ("actions", &["ActionPayload", "ActionStatus", "ConfirmedVia", "PendingAction"]),
];

/// One reference to another top-level module: the line it is on, the module, and the names
/// imported from it (the last path segment, or `*` for a glob).
#[derive(Debug, PartialEq, Eq)]
struct Reference {
    line: usize,
    target: String,
    leaves: Vec<String>,
}

#[derive(Debug, Default)]
struct Report {
    violations: Vec<String>,
    /// Distinct (file, feature module) pairs where the store names an allowlisted record type.
    store_upward: BTreeSet<(String, String)>,
}

/// Edges between top-level modules, each with the `file:line` locations that make it.
type Edges = BTreeMap<(String, String), Vec<String>>;

/// Parses the numbered layer list in lib.rs's module doc (lines like ``//! 1. `a`, `b`: what they are``).
fn parse_layers(lib_rs: &str) -> Result<Vec<Vec<String>>, String> {
    let mut layers = Vec::new();
    for doc in lib_rs.lines().filter_map(|line| line.trim_start().strip_prefix("//!")) {
        let doc = doc.trim_start();
        let digits = doc.bytes().take_while(u8::is_ascii_digit).count();
        let Some(rest) = doc[digits..].strip_prefix(". ").filter(|_| digits > 0) else { continue };
        let number: usize = doc[..digits].parse().map_err(|e| format!("layer number `{}`: {e}", &doc[..digits]))?;
        if number != layers.len() + 1 {
            return Err(format!("layer list item {number} is out of order: expected {}", layers.len() + 1));
        }
        let names = backticked_names(rest);
        if names.is_empty() {
            return Err(format!("layer {number} names no module; write it as {number}. `a`, `b`: what they are"));
        }
        layers.push(names);
    }
    Ok(layers)
}

/// The backticked identifiers on a layer line before the first `: ` outside backticks.
fn backticked_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut parts = text.split('`');
    // Split on backticks: even parts lie outside them, odd parts inside.
    while let Some(outside) = parts.next() {
        if outside.contains(": ") {
            break;
        }
        match parts.next() {
            Some(name) if !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') => {
                names.push(name.to_owned());
            }
            Some(_) => {}
            None => break,
        }
    }
    names
}

/// Modules declared at the top level of lib.rs (`mod x;` with any visibility).
fn declared_modules(lib_rs: &str) -> Vec<String> {
    let tokens = tokenize(&blank_comments_and_literals(lib_rs));
    let mut depth = 0usize;
    let mut declared = Vec::new();
    for i in 0..tokens.len() {
        match text(&tokens, i) {
            "{" => depth += 1,
            "}" => depth = depth.saturating_sub(1),
            "mod" if depth == 0 && is_ident(text(&tokens, i + 1)) && text(&tokens, i + 2) == ";" => {
                declared.push(tokens[i + 1].0.clone());
            }
            _ => {}
        }
    }
    declared
}

/// Replaces comments and the contents of string and char literals with spaces, keeping every
/// newline so line numbers still match: the `//` in `"http://..."` starts no comment, and a
/// `crate::x` inside a comment or literal is no import.
fn blank_comments_and_literals(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, span: &[char]| out.extend(span.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    let mut i = 0;
    while i < chars.len() {
        let end = match (chars[i], chars.get(i + 1).copied()) {
            ('/', Some('/')) => chars[i..].iter().position(|&c| c == '\n').map_or(chars.len(), |n| i + n),
            ('/', Some('*')) => block_comment_end(&chars, i),
            ('"', _) => quoted_end(&chars, i, '"'),
            ('\'', Some('\\')) => quoted_end(&chars, i, '\''),
            // A one-char literal such as '"'; anything else after a quote is a lifetime.
            ('\'', _) if chars.get(i + 2) == Some(&'\'') => i + 3,
            ('r', _) => raw_string_end(&chars, i).unwrap_or(i),
            _ => i,
        };
        if end > i {
            blank(&mut out, &chars[i..end.min(chars.len())]);
            i = end;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// End (exclusive) of a block comment starting at `start`; Rust block comments nest.
fn block_comment_end(chars: &[char], start: usize) -> usize {
    let (mut depth, mut i) = (0usize, start);
    while i + 1 < chars.len() {
        match (chars[i], chars[i + 1]) {
            ('/', '*') => (depth, i) = (depth + 1, i + 2),
            ('*', '/') if depth == 1 => return i + 2,
            ('*', '/') => (depth, i) = (depth - 1, i + 2),
            _ => i += 1,
        }
    }
    chars.len()
}

/// End (exclusive) of a literal opened by `quote` at `start`, honouring backslash escapes.
fn quoted_end(chars: &[char], start: usize, quote: char) -> usize {
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    chars.len()
}

/// End (exclusive) of a raw string (`r"..."`, `r#"..."#`, also after `b`/`c`) starting at `start`.
fn raw_string_end(chars: &[char], start: usize) -> Option<usize> {
    let ident = |i: Option<usize>| i.and_then(|i| chars.get(i)).is_some_and(|&c| is_ident_char(c));
    let before = start.checked_sub(1);
    let prefixed =
        before.is_some_and(|b| matches!(chars[b], 'b' | 'c')) && !ident(before.and_then(|b| b.checked_sub(1)));
    if ident(before) && !prefixed {
        return None; // the `r` ends an identifier such as `bar`
    }
    let hashes = chars[start + 1..].iter().take_while(|&&c| c == '#').count();
    let open = start + 1 + hashes;
    if chars.get(open) != Some(&'"') {
        return None;
    }
    let closes =
        |i: usize| chars[i] == '"' && chars[i + 1..].iter().take(hashes).filter(|&&c| c == '#').count() == hashes;
    Some((open + 1..chars.len()).find(|&i| closes(i)).map_or(chars.len(), |i| i + 1 + hashes))
}

/// A token's text (an identifier, `::` or one punctuation character) and its line.
type Token = (String, usize);

/// Splits blanked source into tokens.
fn tokenize(code: &str) -> Vec<Token> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let len = match chars[i] {
            c if c.is_alphanumeric() || c == '_' => chars[i..].iter().take_while(|c| is_ident_char(**c)).count(),
            ':' if chars.get(i + 1) == Some(&':') => 2,
            _ => 1,
        };
        if !chars[i].is_whitespace() {
            tokens.push((chars[i..i + len].iter().collect(), line));
        }
        line += usize::from(chars[i] == '\n');
        i += len;
    }
    tokens
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn is_ident(token: &str) -> bool {
    token.starts_with(is_ident_char)
}

/// The text of token `i`, or "" past the end.
fn text(tokens: &[Token], i: usize) -> &str {
    tokens.get(i).map_or("", |t| t.0.as_str())
}

/// Every `crate::`/`$crate::` reference in a file, in order of appearance.
fn references(src: &str) -> Vec<Reference> {
    let tokens = tokenize(&blank_comments_and_literals(src));
    let mut paths = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        // `use` after `#` or `.` is a raw identifier or a field, not the keyword.
        if text(&tokens, i) == "use" && !matches!(text(&tokens, i.wrapping_sub(1)), "#" | ".") {
            i = parse_use_tree(&tokens, i + 1, &[], &mut paths);
        } else if text(&tokens, i) == "crate" && text(&tokens, i + 1) == "::" {
            let mut path = vec![tokens[i].clone()];
            while text(&tokens, i + 1) == "::" && is_ident(text(&tokens, i + 2)) {
                path.push(tokens[i + 2].clone());
                i += 2;
            }
            paths.push(path);
            i += 1;
        } else {
            i += 1;
        }
    }
    let mut refs: Vec<Reference> = Vec::new();
    for path in paths {
        let [(root, _), (target, line), rest @ ..] = &path[..] else { continue };
        if root != "crate" || target == "self" {
            continue;
        }
        // The name is the type a path goes through (`Fence` in `ledger::Fence::Claim`), else its end.
        let through_type = rest.iter().find(|(s, _)| s.starts_with(char::is_uppercase) || s == "*");
        let leaf = through_type.or(path.last()).map_or_else(String::new, |(s, _)| s.clone());
        match refs.last_mut() {
            // One reference per (line, target), so `{B, C}` reports as one import of two names.
            Some(last) if last.line == *line && last.target == *target => last.leaves.push(leaf),
            _ => refs.push(Reference { line: *line, target: target.clone(), leaves: vec![leaf] }),
        }
    }
    refs
}

/// Parses the use tree at `i` under `prefix`, pushing the full path of each name it imports (a
/// glob ends in `*`); returns the index after the tree. Stops quietly at anything unexpected.
fn parse_use_tree(tokens: &[Token], mut i: usize, prefix: &[Token], out: &mut Vec<Vec<Token>>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match text(tokens, i) {
            "::" | "$" => i += 1,
            "{" => {
                i += 1;
                while i < tokens.len() && text(tokens, i) != "}" {
                    let next = parse_use_tree(tokens, i, &path, out);
                    // Skip the separating comma, or one token of anything unexpected.
                    i = if next == i || text(tokens, next) == "," { next + 1 } else { next };
                }
                return i + 1;
            }
            name if is_ident(name) || name == "*" => {
                // `x::{self}` imports `x` itself.
                if name != "self" || path.is_empty() {
                    path.push(tokens[i].clone());
                }
                i += 1;
                if text(tokens, i) != "::" {
                    out.push(path);
                    return if text(tokens, i) == "as" { i + 2 } else { i };
                }
            }
            _ => return i,
        }
    }
}

/// The top-level module a source file belongs to; `None` for lib.rs, main.rs and binaries.
fn owner_module(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("src/")?;
    if rest == "lib.rs" || rest == "main.rs" || rest.starts_with("bin/") {
        return None;
    }
    let first = rest.split('/').next()?;
    Some(first.strip_suffix(".rs").unwrap_or(first))
}

/// The violations of the rule; `files` are (path relative to the crate like `src/x/y.rs`, text).
fn check(layers: &[Vec<String>], declared: &[String], files: &[(String, String)]) -> Vec<String> {
    analyze(layers, declared, files).violations
}

fn analyze(layers: &[Vec<String>], declared: &[String], files: &[(String, String)]) -> Report {
    let mut report = Report::default();
    let violations = &mut report.violations;
    if layers.is_empty() {
        violations.push("src/lib.rs: no layer list in the module doc (lines like //! 1. `domain`: what it is)".into());
    }
    let mut layer_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, name) in layers.iter().enumerate().flat_map(|(i, l)| l.iter().map(move |n| (i + 1, n))) {
        if let Some(first) = layer_of.insert(name, index) {
            violations.push(format!("src/lib.rs: `{name}` is listed in layers {first} and {index}; list it once"));
        }
    }
    for name in declared.iter().filter(|d| !layer_of.contains_key(d.as_str())) {
        violations.push(format!("src/lib.rs: module `{name}` is declared but in no layer; add it to the layer list"));
    }
    for (name, layer) in layer_of.iter().filter(|(n, _)| !declared.iter().any(|d| d == *n)) {
        violations.push(format!("src/lib.rs: layer {layer} lists `{name}`, which lib.rs does not declare as a module"));
    }

    let mut edges = Edges::new();
    let mut unlayered_owners = BTreeSet::new();
    for (path, text) in files {
        let Some(owner) = owner_module(path) else { continue };
        let Some(&from) = layer_of.get(owner) else {
            // A declared module was reported above; an undeclared one once per module here.
            if !declared.iter().any(|d| d == owner) && unlayered_owners.insert(owner) {
                violations.push(format!("{path}: module `{owner}` is neither declared in lib.rs nor in a layer"));
            }
            continue;
        };
        for Reference { line, target, leaves } in references(text).into_iter().filter(|r| r.target != owner) {
            let here = format!("{path}:{line}");
            let Some(&to) = layer_of.get(target.as_str()) else {
                violations
                    .push(format!("{here}: {owner} names crate::{target}, which is not a module in the layer list"));
                continue;
            };
            if to > from {
                let allowed = STORE_MAY_NAME.iter().find(|(m, _)| *m == target).map_or(&[][..], |(_, names)| *names);
                let head = format!("{here}: {owner} (layer {from}) imports {target} (layer {to})");
                if owner != STORE {
                    violations.push(format!("{head}: {} — an import may only run down a layer", leaves.join(", ")));
                    continue;
                }
                let refused: Vec<&str> = leaves.iter().map(String::as_str).filter(|l| !allowed.contains(l)).collect();
                if refused.is_empty() {
                    report.store_upward.insert((path.clone(), target));
                    continue;
                }
                let may = if allowed.is_empty() { "nothing".to_owned() } else { allowed.join(", ") };
                violations.push(format!(
                    "{head}: {} — the store may name only the record types STORE_MAY_NAME lists for {target} \
                     ({may}), never its workflow",
                    refused.join(", ")
                ));
            }
            edges.entry((owner.to_owned(), target)).or_default().push(here);
        }
    }

    let same_layer: Edges = edges
        .iter()
        .filter(|((a, b), _)| layer_of[a.as_str()] == layer_of[b.as_str()])
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for cycle in cycles(&same_layer) {
        let layer = layer_of[cycle[0].as_str()];
        violations.push(format!(
            "same-layer cycle in layer {layer}: {} — modules in one layer may import each other only one way",
            describe(&cycle, &same_layer)
        ));
    }
    // Safety net: with the layer check passed, nothing but the store's allowed names points up,
    // so the rest of the graph must be acyclic; a cycle here means the check itself is wrong.
    if violations.is_empty() {
        for cycle in cycles(&edges) {
            violations.push(format!("import cycle: {} — the layer check missed this", describe(&cycle, &edges)));
        }
    }
    report
}

/// `a -> b -> a (a -> b at src/a.rs:3; b -> a at src/b.rs:7)`.
fn describe(cycle: &[String], edges: &Edges) -> String {
    let mut chain = cycle.join(" -> ");
    chain.push_str(&format!(" -> {}", cycle[0]));
    let steps: Vec<String> = cycle
        .iter()
        .zip(cycle.iter().cycle().skip(1))
        .map(|(a, b)| {
            let at = &edges[&(a.clone(), b.clone())];
            let more = if at.len() > 3 { format!(" and {} more", at.len() - 3) } else { String::new() };
            format!("{a} -> {b} at {}{more}", at[..at.len().min(3)].join(", "))
        })
        .collect();
    format!("{chain} ({})", steps.join("; "))
}

/// One shortest cycle per strongly connected component with more than one module.
fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        next.entry(a).or_default().push(b);
    }
    let search = |start| reached_from(&next, start);
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut found = Vec::new();
    for &start in next.keys() {
        let from_start = search(start);
        if seen.contains(start) || !from_start.contains_key(start) {
            continue;
        }
        // The component: every module `start` reaches that reaches `start` back.
        seen.extend(from_start.keys().filter(|m| search(m).contains_key(start)));
        let mut cycle = vec![start.to_owned()];
        let mut node = from_start[start];
        while node != start {
            cycle.push(node.to_owned());
            node = from_start[node];
        }
        cycle[1..].reverse();
        found.push(cycle);
    }
    found
}

/// Breadth-first from `start`: each module reached, with the module it was first reached from.
fn reached_from<'a>(next: &BTreeMap<&'a str, Vec<&'a str>>, start: &'a str) -> BTreeMap<&'a str, &'a str> {
    let mut parent = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &to in next.get(node).into_iter().flatten() {
            if !parent.contains_key(to) {
                parent.insert(to, node);
                queue.push_back(to);
            }
        }
    }
    parent
}

/// Every `.rs` file under `dir`, as (path starting with `relative`, text).
fn rust_files(dir: &Path, relative: &str, out: &mut Vec<(String, String)>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())).path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        if path.is_dir() {
            rust_files(&path, &format!("{relative}/{name}"), out);
        } else if name.ends_with(".rs") {
            let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            out.push((format!("{relative}/{name}"), text));
        }
    }
}

#[test]
fn the_layers_in_lib_rs_hold() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib_rs = fs::read_to_string(src.join("lib.rs")).expect("reading src/lib.rs");
    let layers = parse_layers(&lib_rs).unwrap_or_else(|e| panic!("src/lib.rs layer list: {e}"));
    let mut files = Vec::new();
    rust_files(&src, "src", &mut files);
    files.sort();
    let report = analyze(&layers, &declared_modules(&lib_rs), &files);
    eprintln!("layers: {} allowed upward store imports (file, module)", report.store_upward.len());
    assert!(
        report.violations.is_empty(),
        "The dependency rule is broken. src/lib.rs's module doc lists the layers, floor to top; a module may \
         import from its own layer or below (without cycles inside a layer), and the store may name only \
         the record types in STORE_MAY_NAME (tests/api/layers.rs).\n{}",
        report.violations.join("\n")
    );
}

/// The checker itself, on synthetic trees: it must fail where the rule is broken.
mod synthetic {
    use super::*;

    const LAYERS: &[&[&str]] = &[&["domain"], &["store"], &["llm", "pix"], &["actions", "ledger"], &["app", "http"]];

    fn run(files: &[(&str, &str)]) -> Report {
        let layers: Vec<Vec<String>> = LAYERS.iter().map(|l| l.iter().map(|n| n.to_string()).collect()).collect();
        let declared: Vec<String> = layers.concat();
        let files: Vec<(String, String)> = files.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect();
        analyze(&layers, &declared, &files)
    }

    fn only_violation(files: &[(&str, &str)]) -> String {
        let violations = run(files).violations;
        assert_eq!(violations.len(), 1, "{violations:#?}");
        violations[0].clone()
    }

    #[test]
    fn an_upward_use_fails() {
        let v = only_violation(&[("src/domain/money.rs", "use std::fmt;\nuse crate::app::App;\n")]);
        assert_eq!(
            v,
            "src/domain/money.rs:2: domain (layer 1) imports app (layer 5): App — an import may only run down a layer"
        );
    }

    #[test]
    fn an_upward_inline_path_fails() {
        let v = only_violation(&[("src/pix/gateway.rs", "fn f() {\n    let _ = crate::http::routes::x();\n}\n")]);
        assert!(v.starts_with("src/pix/gateway.rs:2: pix (layer 3) imports http (layer 5): x —"), "{v}");
    }

    #[test]
    fn a_same_layer_cycle_fails_and_one_way_passes() {
        let one_way =
            [("src/llm/mod.rs", "use crate::pix::Brcode;\n"), ("src/pix/mod.rs", "use crate::domain::Tenant;\n")];
        assert!(run(&one_way).violations.is_empty());
        let v = only_violation(&[
            ("src/llm/mod.rs", "use crate::pix::Brcode;\n"),
            ("src/pix/qr.rs", "\n\ncrate::llm::ask();\n"),
        ]);
        assert!(v.starts_with("same-layer cycle in layer 3: llm -> pix -> llm"), "{v}");
        assert!(v.contains("llm -> pix at src/llm/mod.rs:1") && v.contains("pix -> llm at src/pix/qr.rs:3"), "{v}");
    }

    #[test]
    fn the_store_may_not_name_feature_logic() {
        let v = only_violation(&[("src/store/actions.rs", "use crate::actions::{PendingAction, propose::propose};\n")]);
        assert!(v.starts_with("src/store/actions.rs:1: store (layer 2) imports actions (layer 4): propose —"), "{v}");
        let v = only_violation(&[("src/store/mod.rs", "use crate::app::App;\n")]);
        assert!(v.contains("app (layer 5): App") && v.contains("(nothing)"), "{v}");
        let v = only_violation(&[("src/store/ledger.rs", "\nfn f() { crate::ledger::fence::claim(); }\n")]);
        assert!(v.starts_with("src/store/ledger.rs:2: store (layer 2) imports ledger (layer 4): claim —"), "{v}");
    }

    #[test]
    fn the_store_may_name_allowlisted_records() {
        let store = "use crate::actions::{ActionStatus, PendingAction};\nmacro_rules! m {\n    () => {\n        \
                     $crate::ledger::Held { generation: 1 }\n    };\n}\nfn f(x: crate::actions::ConfirmedVia) {}\n\
                     fn g(f: Fence) { if let crate::ledger::Fence::Claim(c) = f {} }\n";
        let report = run(&[("src/store/actions.rs", store), ("src/store/ledger.rs", "use crate::ledger::Fence;")]);
        assert!(report.violations.is_empty(), "{:#?}", report.violations);
        assert_eq!(report.store_upward.len(), 3);
    }

    #[test]
    fn comments_and_literals_are_ignored() {
        let text = r####"// use crate::app::App;
/* crate::app::x /* nested */ crate::app::y */
/// crate::app::Doc
const URL: &str = "http://x/crate::app::z";
const SQL: &str = r#"SELECT "crate::app" -- //"#;
const Q: char = '"'; fn f<'a>(s: &'a str) { let _ = crate::domain::x(); } // "http://"
const B: &[u8] = br##"crate::app::w"##;
"####;
        assert!(run(&[("src/pix/mod.rs", text)]).violations.is_empty());
        let refs = references(text);
        assert_eq!(refs, vec![Reference { line: 6, target: "domain".into(), leaves: vec!["x".into()] }]);
    }

    #[test]
    fn grouped_multi_line_use_trees_parse() {
        let text = "pub(crate) use crate::{\n    a::{B, C},\n    d::E as F,\n};\n\
                    use crate::{store::{self, jobs::*}, x::y::Z, self as me};\npub use $crate::g::H;\n\
                    let f = crate::ledger::Fence::Claim(c);\n";
        let leaves = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let reference = |line, target: &str, names| Reference { line, target: target.into(), leaves: leaves(names) };
        assert_eq!(
            references(text),
            vec![
                reference(2, "a", &["B", "C"]),
                reference(3, "d", &["E"]),
                reference(5, "store", &["store", "*"]),
                reference(5, "x", &["Z"]),
                reference(6, "g", &["H"]),
                reference(7, "ledger", &["Fence"]),
            ]
        );
    }

    #[test]
    fn the_layer_list_parses_and_must_match_the_modules() {
        let lib_rs = "//! Intro, with a `thing`: and more.\n//!\n//! 1. `domain`: values\n//!    that wrap, `x`: here\n\
                      //! 2. `llm`, `pix` (`Brcode`): clients `y`\n//! - not a layer\n\npub mod domain;\nmod llm;\n\
                      pub(crate) mod pix;\nmod tests {\n    mod inner;\n}\n";
        let layers = parse_layers(lib_rs).unwrap();
        assert_eq!(layers, vec![vec!["domain".to_owned()], vec!["llm".to_owned(), "pix".to_owned()]]);
        assert_eq!(declared_modules(lib_rs), ["domain", "llm", "pix"]);
        assert!(parse_layers("//! 1. `a`: x\n//! 3. `b`: y\n").unwrap_err().contains("out of order"));
        let layers = vec![vec!["domain".to_owned(), "gone".to_owned()]];
        let declared = vec!["domain".to_owned(), "new".to_owned()];
        let violations = check(&layers, &declared, &[("src/new.rs".into(), String::new())]);
        assert_eq!(violations.len(), 2, "{violations:#?}");
        assert!(violations[0].contains("`new` is declared but in no layer"), "{violations:#?}");
        assert!(violations[1].contains("lists `gone`, which lib.rs does not declare"), "{violations:#?}");
    }
}
