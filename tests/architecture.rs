//! The shape of the code, checked: the library's imports form no circle and
//! never run up the layers (db → version → table → filter → block, with the
//! small shared modules below them); no `allow` attribute is left in library
//! or tool sources (exceptions are reasoned `#[expect]`s); and every file a
//! document cites exists.
//!
//! Imports are read as text (`crate::…`, `super::…` paths outside test
//! modules), the way a reader follows them; `pub use` re-exports in a
//! `mod.rs` or `lib.rs` are followed to the file that defines the name.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file below `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
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

/// A library file's module path: `src/table/reader.rs` → `["table", "reader"]`,
/// `src/table/mod.rs` → `["table"]`, `src/lib.rs` → `[]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The code of a file without its test module (by convention the last item,
/// after `#[cfg(test)]`) and without comments.
fn code_of(text: &str) -> String {
    let body = text.split("\n#[cfg(test)]").next().unwrap_or_default();
    body.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Module paths a file refers to: each `crate::a::b::c` or `super::x` path,
/// with braces of a `use` expanded one level.
fn referenced_paths(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start).map(|i| i + from) {
            from = at + start.len();
            let boundary = at == 0
                || !(bytes[at - 1].is_ascii_alphanumeric()
                    || bytes[at - 1] == b'_'
                    || bytes[at - 1] == b':');
            if !boundary {
                continue;
            }
            let mut base: Vec<String> = if start == "crate::" {
                Vec::new()
            } else {
                module[..module.len().saturating_sub(1)].to_vec()
            };
            let mut rest = &code[from..];
            // Further `super::` hops.
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            let path: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let mut segments = base.clone();
            segments.extend(
                path.split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            );
            let after = &rest[path.len()..];
            if path.ends_with("::") && after.starts_with('{') {
                let inner: String = after[1..].chars().take_while(|c| *c != '}').collect();
                for item in inner.split(',') {
                    let item = item.trim().split("::").next().unwrap_or("").trim();
                    if !item.is_empty() && item != "self" {
                        let mut s = segments.clone();
                        s.push(item.to_string());
                        out.push(s);
                    }
                }
                out.push(segments);
            } else {
                out.push(segments);
            }
        }
    }
    out
}

struct Library {
    src: PathBuf,
    /// Module path → file.
    files: BTreeMap<Vec<String>, PathBuf>,
    /// (module of a mod.rs/lib.rs, re-exported name) → child module path.
    reexports: BTreeMap<(Vec<String>, String), Vec<String>>,
}

impl Library {
    fn read() -> Library {
        let src = root().join("src");
        let mut files = BTreeMap::new();
        let mut reexports = BTreeMap::new();
        for file in rust_files(&src) {
            let module = module_of(&src, &file);
            let text = std::fs::read_to_string(&file).unwrap();
            let name = file.file_name().unwrap().to_string_lossy();
            if name == "mod.rs" || name == "lib.rs" {
                for line in code_of(&text).lines() {
                    let Some(rest) = line.trim().strip_prefix("pub use ") else {
                        continue;
                    };
                    let rest = rest.trim_end_matches(';');
                    let (child, items) = match rest.split_once("::{") {
                        Some((child, items)) => (child, items.trim_end_matches('}').to_string()),
                        None => match rest.rsplit_once("::") {
                            Some((child, item)) => (child, item.to_string()),
                            None => continue,
                        },
                    };
                    let child_path: Vec<String> = if let Some(c) = child.strip_prefix("crate::") {
                        c.split("::").map(str::to_string).collect()
                    } else {
                        let mut p = module.clone();
                        p.extend(child.split("::").map(str::to_string));
                        p
                    };
                    for item in items.split(',') {
                        let item = item.trim();
                        let item = item.split(" as ").last().unwrap_or(item).trim();
                        if !item.is_empty() {
                            reexports
                                .insert((module.clone(), item.to_string()), child_path.clone());
                        }
                    }
                }
            }
            files.insert(module, file);
        }
        Library {
            src,
            files,
            reexports,
        }
    }

    /// The file a path names: its longest prefix that is a module, with a
    /// re-exported item followed to the module that defines it.
    fn resolve(&self, path: &[String]) -> Option<Vec<String>> {
        for len in (0..=path.len()).rev() {
            let prefix = path[..len].to_vec();
            if self.files.contains_key(&prefix) {
                if let Some(item) = path.get(len) {
                    if let Some(child) = self.reexports.get(&(prefix.clone(), item.clone())) {
                        if self.files.contains_key(child) {
                            return Some(child.clone());
                        }
                    }
                }
                return Some(prefix);
            }
        }
        None
    }

    /// File-level import edges, self-edges left out.
    fn edges(&self) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (module, file) in &self.files {
            let code = code_of(&std::fs::read_to_string(file).unwrap());
            let targets = edges.entry(module.clone()).or_default();
            for path in referenced_paths(module, &code) {
                if let Some(target) = self.resolve(&path) {
                    if &target != module && !target.is_empty() {
                        targets.insert(target);
                    }
                }
            }
        }
        edges
    }
}

/// The layer of a library module, deepest first: a module may import its
/// own layer (without a circle) and the layers below, never one above.
fn layer(module: &[String]) -> Option<u32> {
    let top = module.first().map(String::as_str).unwrap_or("");
    Some(match top {
        "" => 9, // lib.rs: the crate root re-exports everything
        "error" | "filename" | "counter" | "prefetch" => 0,
        "codec" | "key" | "fs" | "prefix" | "events" => 1,
        // The filters are a crate of their own (crates/siftdb-filter),
        // below all of src/: `crate::filter` resolves to no file here.
        "range_tombstone" => 2,
        "options" | "batch" | "memtable" | "manifest" | "keyspace_settings" | "cache" => 3,
        "wal" | "table" | "identify" => 4,
        "db" | "inspect" | "repair" => 5,
        "async_db" | "async_iter" | "async_transaction" | "backup" => 6,
        _ => return None,
    })
}

fn name(module: &[String]) -> String {
    if module.is_empty() {
        "lib".to_string()
    } else {
        module.join("::")
    }
}

#[test]
fn library_imports_form_no_circle_and_never_run_up() {
    let library = Library::read();
    assert!(
        library.files.len() > 40,
        "read {} files",
        library.files.len()
    );
    let edges = library.edges();
    let mut problems = Vec::new();

    for (from, targets) in &edges {
        let Some(from_layer) = layer(from) else {
            problems.push(format!(
                "{} has no layer: place it in `layer()` of tests/architecture.rs",
                name(from)
            ));
            continue;
        };
        for to in targets {
            if let Some(to_layer) = layer(to) {
                if to_layer > from_layer {
                    problems.push(format!(
                        "{} imports {}, a layer above it",
                        name(from),
                        name(to)
                    ));
                }
            }
        }
    }

    // Circles: a depth-first search for a back edge.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        marks: &mut BTreeMap<Vec<String>, Mark>,
        stack: &mut Vec<Vec<String>>,
        circles: &mut Vec<String>,
    ) {
        marks.insert(node.clone(), Mark::Open);
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            match marks.get(next) {
                Some(Mark::Open) => {
                    let at = stack.iter().position(|m| m == next).unwrap();
                    let names: Vec<String> = stack[at..].iter().map(|m| name(m)).collect();
                    circles.push(format!("{} → {}", names.join(" → "), name(next)));
                }
                Some(Mark::Done) => {}
                None => visit(next, edges, marks, stack, circles),
            }
        }
        stack.pop();
        marks.insert(node.clone(), Mark::Done);
    }
    let mut marks = BTreeMap::new();
    let mut circles = Vec::new();
    for node in edges.keys() {
        if !marks.contains_key(node) {
            visit(node, &edges, &mut marks, &mut Vec::new(), &mut circles);
        }
    }
    problems.extend(circles.into_iter().map(|c| format!("import circle: {c}")));
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_import_reader_sees_known_edges() {
    // A check that can fail: edges known to exist are found, so an empty
    // graph cannot pass the test above by accident.
    let library = Library::read();
    let edges = library.edges();
    let has = |from: &[&str], to: &[&str]| {
        let from: Vec<String> = from.iter().map(|s| s.to_string()).collect();
        let to: Vec<String> = to.iter().map(|s| s.to_string()).collect();
        edges.get(&from).is_some_and(|t| t.contains(&to))
    };
    assert!(has(&["db", "read"], &["db", "version"]));
    assert!(has(&["table", "open"], &["error"]));
    // `crate::table::LookupKey` is re-exported by table/mod.rs from lookup.rs.
    assert_eq!(
        library.resolve(&["table".to_string(), "LookupKey".to_string()]),
        Some(vec!["table".to_string(), "lookup".to_string()])
    );
    assert!(layer(&["nonexistent".to_string()]).is_none());
    let _ = &library.src;
}

#[test]
fn no_allow_attribute_is_left_in_library_or_tool_sources() {
    let mut dirs = vec![root().join("src")];
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            dirs.push(src);
        }
    }
    let mut found = Vec::new();
    let mut files = 0;
    for dir in dirs {
        for file in rust_files(&dir) {
            files += 1;
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                if code.contains("#[allow(") || code.contains("#![allow(") {
                    found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(files > 60, "read {files} files");
    assert!(
        found.is_empty(),
        "use #[expect(lint, reason = \"…\")] instead:\n{}",
        found.join("\n")
    );
}

/// Repository paths cited in backticks or links: `src/…`, `crates/…`,
/// `tests/…`, `docs/…`, `fuzz/…`, `benches/…`, `examples/…`.
fn cited_paths(text: &str) -> Vec<String> {
    const ROOTS: [&str; 7] = [
        "src/",
        "crates/",
        "tests/",
        "docs/",
        "fuzz/",
        "benches/",
        "examples/",
    ];
    let mut out = Vec::new();
    for piece in text.split(['`', '(', ')', ' ', '\n', '[', ']', '"']) {
        let piece = piece.trim_end_matches([',', '.', ':', ';']);
        if ROOTS.iter().any(|r| piece.starts_with(r))
            && !piece.contains(['*', '<', '{', '…', '$'])
            && piece.len() > 5
        {
            out.push(piece.to_string());
        }
    }
    out
}

#[test]
fn every_file_a_document_cites_exists() {
    let mut documents = vec![root().join("README.md"), root().join("fuzz/README.md")];
    for dir in ["docs", "crates"] {
        let mut stack = vec![root().join(dir)];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() && !path.ends_with("target") {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "md") {
                    documents.push(path);
                }
            }
        }
    }
    // Module docs cite files too.
    documents.extend(rust_files(&root().join("src")));
    let mut missing = Vec::new();
    let mut cited = 0;
    for doc in &documents {
        let text = std::fs::read_to_string(doc).unwrap();
        let text = if doc.extension().is_some_and(|e| e == "rs") {
            text.lines()
                .filter(|l| l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            text
        };
        for path in cited_paths(&text) {
            cited += 1;
            let here = doc.parent().unwrap().join(&path);
            let clean = path.split('#').next().unwrap_or(&path);
            if !root().join(clean).exists() && !here.exists() {
                missing.push(format!(
                    "{} cites {path}",
                    doc.strip_prefix(root()).unwrap().display()
                ));
            }
        }
    }
    assert!(cited > 20, "found only {cited} citations");
    assert!(missing.is_empty(), "\n{}", missing.join("\n"));
}

/// The names the crate root makes public (`pub use`, `pub mod`, `pub fn`,
/// `pub struct`, …), read from `src/lib.rs` as text, with the braces of a
/// `pub use` expanded; `#[cfg(…)]`-gated ones included.
fn root_public_names(lib: &str) -> BTreeSet<String> {
    let code = code_of(lib);
    let mut names = BTreeSet::new();
    let mut depth = 0usize;
    let mut statement = String::new();
    for line in code.lines() {
        let trimmed = line.trim();
        if depth == 0 || !statement.is_empty() {
            if statement.is_empty() && trimmed.starts_with("pub use ") {
                statement.push_str(trimmed);
            } else if !statement.is_empty() {
                statement.push(' ');
                statement.push_str(trimmed);
            } else if let Some(rest) = trimmed.strip_prefix("pub ") {
                let mut words = rest.split_whitespace();
                let kind = words.next().unwrap_or_default();
                if let Some(name) = words.next() {
                    let name: String = name
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    names.insert(format!("{kind} {name}"));
                }
            }
            if !statement.is_empty() && statement.ends_with(';') {
                let body = statement
                    .trim_start_matches("pub use ")
                    .trim_end_matches(';')
                    .to_string();
                let (_, list) = body.split_once('{').unwrap_or(("", body.as_str()));
                for item in list.trim_end_matches('}').split(',') {
                    let item = item.trim();
                    if item.is_empty() {
                        continue;
                    }
                    let last = item.rsplit("::").next().unwrap_or(item);
                    let last = last.rsplit(" as ").next().unwrap_or(last).trim();
                    names.insert(format!("use {last}"));
                }
                statement.clear();
            }
        }
        if statement.is_empty() {
            depth += line.matches('{').count();
            depth = depth.saturating_sub(line.matches('}').count());
        }
    }
    names
}

/// The crate's public API is the embedding application's: the items the
/// issue that narrowed it lists, `filter` (the siftdb-filter crate), and the
/// hidden, unstable `internals` for the project's own tools. Anything else
/// on the main docs page is a promise nobody meant to make.
#[test]
fn the_crate_root_exports_only_the_applications_api() {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    let names = root_public_names(&lib);
    let allowed: BTreeSet<String> = [
        "use AsyncDb",
        "use AsyncKeyspace",
        "use AsyncIter",
        "use AsyncTransaction",
        "use WriteBatch",
        "use Db",
        "use CheckpointInfo",
        "use IngestOptions",
        "use TableWriter",
        "use DbIterator",
        "use FilterBuildStats",
        "use RecoveryReport",
        "use Snapshot",
        "use Stats",
        "use Keyspace",
        "use KeyspaceOptions",
        "use KeyspaceStats",
        "use Transaction",
        "use TransactionIter",
        "use TransactionOptions",
        "use VerifyStats",
        "use CompareAndSwap",
        "use Error",
        "use Result",
        "use FilterPolicy",
        "use Compression",
        "use Options",
        "use CompactionDecision",
        "use CompactionFilter",
        "use MergeOperator",
        "use WriteOptions",
        "use EventListener",
        "use FlushEvent",
        "use CompactionEvent",
        "use CompactionReason",
        "use TableMetadata",
        "use BackgroundErrorEvent",
        "use BackgroundWork",
        "use WriteStallEvent",
        "use StallCause",
        "use PrefixExtractor",
        "use repair",
        "use LogAction",
        "use LogReport",
        "use LostRange",
        "use ManifestFinding",
        "use ManifestRecovery",
        "use RepairOptions",
        "use RepairReport",
        "use TableAction",
        "use TableReport",
        "use LevelFilterStats",
        "use MAX_KEY_LEN",
        "use MAX_VALUE_LEN",
        "use MemtableRangeStats",
        "use filter",
        "mod backup",
        "mod internals",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let extra: Vec<_> = names.difference(&allowed).collect();
    assert!(
        extra.is_empty(),
        "public at the crate root but not in the application's API: {extra:?}"
    );
    assert!(
        names.contains("mod internals") && names.contains("use Db"),
        "reader broken: {names:?}"
    );
    let hidden = lib
        .split("pub mod internals")
        .next()
        .is_some_and(|before| before.trim_end().ends_with("#[doc(hidden)]"));
    assert!(
        hidden,
        "`internals` must be #[doc(hidden)]: it carries no stability promise"
    );
}

/// The reader of the crate root's public names sees what a root declares.
#[test]
fn the_public_name_reader_sees_every_kind_of_export() {
    let lib = "//! doc\nmod private;\npub mod open;\npub use a::{B, c::D as E,\n    F};\npub use g::H;\npub fn f() {}\npub(crate) fn hidden() {}\npub mod inner {\n    pub use crate::x::*;\n}\n";
    let names = root_public_names(lib);
    let expected: BTreeSet<String> = [
        "mod open",
        "use B",
        "use E",
        "use F",
        "use H",
        "fn f",
        "mod inner",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(names, expected);
}
