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
