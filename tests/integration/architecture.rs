//! ARCHITECTURE.md's "Every source file" table names each file under `src/` (the library) and
//! `cli/src/` (the binary, named `cli/...`), and only files that exist.

use std::collections::BTreeSet;
use std::path::Path;

fn rust_files(dir: &Path, root: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap();
            out.insert(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn architecture_names_every_source_file() {
    let repo = crate::repo();
    let src = repo.join("src");
    let mut files = BTreeSet::new();
    rust_files(&src, &src, &mut files);
    let cli = repo.join("cli/src");
    let mut cli_files = BTreeSet::new();
    rust_files(&cli, &cli, &mut cli_files);
    files.extend(cli_files.into_iter().map(|f| format!("cli/{f}")));
    let doc = std::fs::read_to_string(repo.join("ARCHITECTURE.md")).unwrap();
    let section = doc
        .split("\n## Every source file\n")
        .nth(1)
        .expect("ARCHITECTURE.md has a section \"Every source file\"");
    let section = section.split("\n## ").next().unwrap();
    let named: BTreeSet<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(path, _)| path.to_owned()))
        .collect();
    let missing: Vec<_> = files.difference(&named).collect();
    let stale: Vec<_> = named.difference(&files).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "ARCHITECTURE.md's file table lacks {missing:?} and names files that are gone: {stale:?}"
    );
}

/// The top-level modules a source text names through `crate::` (comments, strings and the
/// unit-test module left out).
fn crate_imports(text: &str) -> BTreeSet<String> {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
    let mut code = String::new();
    for line in text.lines() {
        // Strings first (a URL holds "//"), then comments.
        let mut kept = String::new();
        let mut in_string = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match (in_string, c) {
                (true, '\\') => {
                    chars.next();
                }
                (_, '"') => in_string = !in_string,
                (false, '/') if chars.peek() == Some(&'/') => break,
                (false, c) => kept.push(c),
                (true, _) => {}
            }
        }
        code.push_str(&kept);
        code.push('\n');
    }
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
            .collect()
    };
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Every name that starts a path at the group's own depth (groups nest).
            let mut depth = 0;
            let mut start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '}' if depth == 0 => break,
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if c.is_whitespace() => {}
                    _ if start && depth == 0 => {
                        out.insert(ident(&group[j..]));
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty());
    out
}

/// ARCHITECTURE.md's dependency block: every top-level module imports only the modules listed
/// after its arrow (and `error`), and each of those is listed above it, so no module imports one
/// that imports it back.
#[test]
fn architecture_dependency_rules_hold() {
    let repo = crate::repo();
    let doc = std::fs::read_to_string(repo.join("ARCHITECTURE.md")).unwrap();
    let block = doc
        .split("Dependency direction between top-level modules:")
        .nth(1)
        .and_then(|s| s.split("```text\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("ARCHITECTURE.md has the dependency block");
    let mut allowed: Vec<(String, BTreeSet<String>)> = Vec::new();
    for line in block.lines() {
        let (module, deps) = line.split_once("->").expect("module -> deps");
        let deps: BTreeSet<String> = deps
            .split(',')
            .map(|d| d.trim().to_owned())
            .filter(|d| !d.is_empty() && d != "(nothing)")
            .collect();
        for d in &deps {
            assert!(
                allowed.iter().any(|(m, _)| m == d),
                "ARCHITECTURE.md: {} imports {d}, which is not listed above it",
                module.trim()
            );
        }
        allowed.push((module.trim().to_owned(), deps));
    }
    let src = repo.join("src");
    let mut files = BTreeSet::new();
    rust_files(&src, &src, &mut files);
    let mut problems = Vec::new();
    for file in &files {
        let top = file.split('/').next().unwrap().trim_end_matches(".rs");
        if top == "lib" || top == "error" {
            continue;
        }
        let Some((_, deps)) = allowed.iter().find(|(m, _)| m == top) else {
            problems.push(format!(
                "{file}: module {top} is not in the dependency block"
            ));
            continue;
        };
        let text = std::fs::read_to_string(src.join(file)).unwrap();
        for import in crate_imports(&text) {
            let own = import == top || import == "error" || import == "Error" || import == "Result";
            if !own && !deps.contains(&import) {
                problems.push(format!("src/{file} imports {import}, not listed for {top}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
