//! The core's structure, checked against `docs/architecture.md`:
//!
//! - every module's `crate::` and `super::` paths (outside its `#[cfg(test)]` modules) point down or
//!   sideways in the layer order that the section "Layers of the core" lists, bottom first;
//! - every `asm!`, `global_asm!` and `unsafe` lies under `src/arch/`, and the `unsafe` inventory in
//!   that document is the one this test derives from the sources;
//! - no `cfg` names a target (`target_arch`, `target_abi`, `microlens_arch`) outside `src/arch/` and
//!   `build.rs`.
//!
//! Each failure names the file and line.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The core crate's directory.
fn core_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `docs/architecture.md`.
fn architecture() -> String {
    let path = core_dir().join("../docs/architecture.md");
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of the section of `doc` under the heading `## {title}`, up to the next `## `.
fn section<'d>(doc: &'d str, title: &str) -> Vec<&'d str> {
    let heading = format!("## {title}");
    let mut lines = doc.lines().skip_while(|l| l.trim() != heading);
    assert!(
        lines.next().is_some(),
        "docs/architecture.md has no `{heading}`"
    );
    lines.take_while(|l| !l.starts_with("## ")).collect()
}

/// The layer order: per numbered item of "Layers of the core", the backticked module paths before
/// its first colon (`1. `a`, `b::c`: what they are`).
fn layers(doc: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in section(doc, "Layers of the core") {
        let Some((number, rest)) = line.split_once(". ") else {
            continue;
        };
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // Up to the first colon outside backticks (module paths hold `::`).
        let mut ticks = 0;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                ticks += usize::from(c == '`');
                c == ':' && ticks % 2 == 0
            })
            .map_or(rest.len(), |(k, _)| k);
        let names = &rest[..end];
        let modules: Vec<String> = names
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        assert!(!modules.is_empty(), "layer without modules: {line}");
        out.push(modules);
    }
    assert!(out.len() >= 3, "docs/architecture.md lists no layer order");
    out
}

/// Every `.rs` file under `dir`, sorted.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The module path of a file under `src/` (`src/quant/int8.rs` is `["quant", "int8"]`, a `mod.rs`
/// its folder's, `lib.rs` the root `[]`).
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// `text` with its comments and the contents of its string and character literals blanked out
/// (newlines kept, so line numbers stay).
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        match b[i] {
            '/' if b.get(i + 1) == Some(&'/') => {
                while i < b.len() && b[i] != '\n' {
                    out.push(' ');
                    i += 1;
                }
            }
            '/' if b.get(i + 1) == Some(&'*') => {
                while i < b.len() && !(b[i] == '*' && b.get(i + 1) == Some(&'/')) {
                    out.push(blank(b[i]));
                    i += 1;
                }
                out.push_str("  ");
                i += 2;
            }
            'r' if b.get(i + 1) == Some(&'"') || b.get(i + 1) == Some(&'#') => {
                // A raw string r"..." or r#"..."#.
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&'"') {
                    out.push(b[i]);
                    i += 1;
                    continue;
                }
                out.push('"');
                j += 1;
                loop {
                    match b.get(j) {
                        None => break,
                        Some('"') if (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) => {
                            j += 1 + hashes;
                            break;
                        }
                        Some(&c) => out.push(blank(c)),
                    }
                    j += 1;
                }
                out.push('"');
                i = j;
            }
            '"' => {
                out.push('"');
                i += 1;
                while i < b.len() && b[i] != '"' {
                    if b[i] == '\\' {
                        out.push(' ');
                        i += 1;
                    }
                    if let Some(&c) = b.get(i) {
                        out.push(blank(c));
                    }
                    i += 1;
                }
                out.push('"');
                i += 1;
            }
            '\'' => {
                // A character literal ('x', '\n', '\''), else a lifetime.
                let end = match (b.get(i + 1), b.get(i + 2)) {
                    (Some('\\'), _) => (i + 2..b.len().min(i + 12)).find(|&k| b[k] == '\''),
                    (Some(_), Some('\'')) => Some(i + 2),
                    _ => None,
                };
                match end {
                    Some(end) => {
                        out.push_str("' '");
                        out.extend((i + 3..=end).map(|_| ' '));
                        i = end + 1;
                    }
                    None => {
                        out.push('\'');
                        i += 1;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// `code` with every `#[cfg(test)]` module's body blanked out (newlines kept).
fn without_test_modules(code: &str) -> String {
    let mut out = code.to_owned();
    let mut from = 0;
    while let Some(at) = out[from..].find("#[cfg(test)]").map(|k| k + from) {
        from = at + 1;
        let rest = &out[at + "#[cfg(test)]".len()..];
        let trimmed = rest.trim_start();
        let is_mod = trimmed.starts_with("mod ") || trimmed.starts_with("pub(crate) mod ");
        let Some(open) = rest.find('{').filter(|_| is_mod) else {
            continue;
        };
        if rest[..open].contains(';') {
            continue; // `#[cfg(test)] mod testing;`: a file of its own, checked as a test file.
        }
        let start = at + "#[cfg(test)]".len() + open;
        let mut depth = 0usize;
        let mut end = start;
        for (k, c) in out[start..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                end = start + k;
                break;
            }
        }
        let blanked: String = out[start..=end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(start..=end, &blanked);
    }
    out
}

/// Whether `c` may continue an identifier.
fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a path expression starting at byte `at` of `code` names (after its `crate::` or
/// `super::` prefix), braces expanded: `a::{b, c::d}` is `[a::b, a::c::d]`.
fn paths_at(code: &str, at: usize) -> Vec<Vec<String>> {
    fn parse(s: &[char], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        loop {
            while s.get(*i).is_some_and(|c| c.is_whitespace()) {
                *i += 1;
            }
            if s.get(*i) == Some(&'{') {
                *i += 1;
                loop {
                    parse(s, i, &path, out);
                    while s.get(*i).is_some_and(|c| c.is_whitespace()) {
                        *i += 1;
                    }
                    match s.get(*i) {
                        Some(',') => *i += 1,
                        Some('}') => {
                            *i += 1;
                            return;
                        }
                        _ => return,
                    }
                    while s.get(*i).is_some_and(|c| c.is_whitespace()) {
                        *i += 1;
                    }
                    if s.get(*i) == Some(&'}') {
                        *i += 1;
                        return;
                    }
                }
            }
            let start = *i;
            while s.get(*i).is_some_and(|&c| ident_char(c) || c == '*') {
                *i += 1;
            }
            let ident: String = s[start..*i].iter().collect();
            if ident.is_empty() {
                break;
            }
            if ident != "self" && ident != "*" {
                path.push(ident);
            }
            if s.get(*i) == Some(&':') && s.get(*i + 1) == Some(&':') {
                *i += 2;
            } else {
                break;
            }
        }
        out.push(path);
    }
    let s: Vec<char> = code[at..].chars().take(4000).collect();
    let mut out = Vec::new();
    parse(&s, &mut 0, &[], &mut out);
    out
}

/// One path a module names: where, and the module path it resolves to.
struct Reference {
    line: usize,
    text: String,
    path: Vec<String>,
}

/// The `crate::` and `super::` paths of `code` (a file of module `module`), resolved to paths from
/// the crate root.
fn references(code: &str, module: &[String]) -> Vec<Reference> {
    let mut out = Vec::new();
    for prefix in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(prefix).map(|k| k + from) {
            from = at + prefix.len();
            if code[..at]
                .chars()
                .next_back()
                .is_some_and(|c| ident_char(c) || c == ':')
            {
                continue; // `$crate::`, `super::super::` (handled from its first `super::`)
            }
            let line = code[..at].matches('\n').count() + 1;
            let mut base: Vec<String> = match prefix {
                "crate::" => Vec::new(),
                // `super` of a file's module: its parent; `mod.rs` files are their folder's module.
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            let mut start = from;
            while code[start..].starts_with("super::") {
                base.pop();
                start += "super::".len();
            }
            for tail in paths_at(code, start) {
                let mut path = base.clone();
                path.extend(tail);
                let text = code[at..]
                    .split([';', '\n', '('])
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_owned();
                out.push(Reference { line, text, path });
            }
        }
    }
    out
}

/// The layer of `path`: that of the longest module path of the order it starts with.
fn layer_of(order: &[Vec<String>], path: &[String]) -> Option<(usize, String)> {
    let mut best: Option<(usize, usize, String)> = None;
    for (layer, modules) in order.iter().enumerate() {
        for m in modules {
            let parts: Vec<&str> = m.split("::").collect();
            let matches = parts.len() <= path.len() && parts.iter().zip(path).all(|(a, b)| a == b);
            if matches && best.as_ref().is_none_or(|(len, _, _)| parts.len() > *len) {
                best = Some((parts.len(), layer, m.clone()));
            }
        }
    }
    best.map(|(_, layer, m)| (layer, m))
}

/// A file under `src/`, its module, code (comments, literals and test modules blanked) and name.
struct Source {
    name: String,
    module: Vec<String>,
    code: String,
}

fn core_sources() -> Vec<Source> {
    let src = core_dir().join("src");
    sources(&src)
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(&src).expect("under src").to_path_buf();
            let text = fs::read_to_string(&path).expect("a source file");
            Source {
                name: format!("core/src/{}", relative.display()),
                module: module_of(&relative),
                code: without_test_modules(&code_only(&text)),
            }
        })
        .collect()
}

#[test]
fn imports_point_down_the_documented_layers() {
    let order = layers(&architecture());
    let mut problems = Vec::new();
    for s in core_sources() {
        if s.module.is_empty() {
            continue; // lib.rs: the crate root, above every layer (its `pub use`s are the API)
        }
        let Some((own, own_name)) = layer_of(&order, &s.module) else {
            problems.push(format!(
                "{}: module `{}` is in no layer of docs/architecture.md",
                s.name,
                s.module.join("::")
            ));
            continue;
        };
        let mut seen = std::collections::BTreeSet::new();
        for r in references(&s.code, &s.module) {
            match layer_of(&order, &r.path) {
                Some((layer, name)) if layer > own && seen.insert((r.line, layer)) => problems
                    .push(format!(
                        "{}:{}: `{}` imports layer {} (`{name}`) from layer {} (`{own_name}`)",
                        s.name,
                        r.line,
                        r.text,
                        layer + 1,
                        own + 1
                    )),
                None if !r.path.is_empty() && r.path[0] != "std" => problems.push(format!(
                    "{}:{}: `{}` names a module in no layer",
                    s.name, r.line, r.text
                )),
                _ => {}
            }
        }
    }
    assert!(
        problems.is_empty(),
        "upward imports:\n{}",
        problems.join("\n")
    );
}

/// Lines of `code` (line number, text) that contain any of `needles` as code.
fn hits(code: &str, original: &str, needles: &[&str]) -> Vec<(usize, String)> {
    code.lines()
        .zip(original.lines())
        .enumerate()
        .filter(|(_, (c, _))| needles.iter().any(|n| c.contains(n)))
        .map(|(i, (_, o))| (i + 1, o.trim().to_owned()))
        .collect()
}

#[test]
fn unsafe_and_target_cfgs_live_under_arch_and_the_inventory_is_current() {
    let src = core_dir().join("src");
    let mut problems = Vec::new();
    let mut inventory: BTreeMap<String, usize> = BTreeMap::new();
    for path in sources(&src) {
        let relative = path.strip_prefix(&src).expect("under src");
        let name = format!("core/src/{}", relative.display());
        let original = fs::read_to_string(&path).expect("a source file");
        let code = code_only(&original);
        let in_arch = relative.starts_with("arch");
        let unsafe_lines = hits(&code, &original, &["unsafe ", "unsafe{", "asm!"]);
        if in_arch {
            let blocks = code.matches("unsafe {").count() + code.matches("unsafe{").count();
            if blocks > 0 || code.contains("asm!") {
                inventory.insert(name.clone(), blocks);
            }
        } else {
            for (line, text) in unsafe_lines {
                problems.push(format!("{name}:{line}: `{text}` outside core/src/arch/"));
            }
            let cfgs = hits(
                &code,
                &original,
                &["target_arch", "target_abi", "microlens_arch"],
            );
            for (line, text) in cfgs {
                problems.push(format!(
                    "{name}:{line}: a target cfg outside core/src/arch/: `{text}`"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The inventory the document lists: `| `file` | blocks |` rows of its section.
    let doc = architecture();
    let listed: BTreeMap<String, usize> = section(&doc, "The unsafe inventory")
        .into_iter()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let file = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((file.to_owned(), cells.get(2)?.parse().ok()?))
        })
        .collect();
    let derived: String = inventory
        .iter()
        .map(|(f, n)| format!("| `{f}` | {n} |\n"))
        .collect();
    println!("{derived}");
    assert_eq!(
        listed, inventory,
        "docs/architecture.md's unsafe inventory is not the sources'; it should read:\n{derived}"
    );
}
