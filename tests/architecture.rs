//! The shape of the code, checked: the library's imports form no circle and
//! never run up the layers (db → version → table → filter → block, with the
//! small shared modules below them); the files of each member crate of
//! the workspace (the tools under `crates/`, the filter library in
//! `siftdb-filter/`) form no import circle; no `allow` attribute is left in
//! library or tool sources (exceptions are reasoned `#[expect]`s); no source
//! file of the library or of a member crate is over 1,000 lines; and every
//! file a document cites exists.
//!
//! Imports are read as text (`crate::…`, `super::…` paths outside test
//! modules, with the braces of a `use` expanded), the way a reader follows
//! them; `pub use` re-exports in a `mod.rs`, `lib.rs` or `main.rs`, one
//! line or many, are followed to the file that defines the name.
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

/// A source file's module path: `src/filter/bloom.rs` → `["filter", "bloom"]`,
/// `src/filter/mod.rs` → `["filter"]`, `src/lib.rs` → `[]` (and
/// `src/main.rs` → `[]` in a crate without a `lib.rs`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let binary_root = parts == ["main"] && !src.join("lib.rs").exists();
    if binary_root || parts.last().is_some_and(|p| p == "mod" || p == "lib") {
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

/// The paths of the use tree (or plain path) at the start of `text`:
/// `a::b::{c, d::{e, self}, f as g}` → `a::b::c`, `a::b::d::e`, `a::b::d`,
/// `a::b::f`; `a::b(x)` → `a::b`.
fn use_tree(text: &str) -> Vec<Vec<String>> {
    fn skip_space(chars: &[char], at: &mut usize) {
        while chars.get(*at).is_some_and(|c| c.is_whitespace()) {
            *at += 1;
        }
    }
    fn ident(chars: &[char], at: &mut usize) -> String {
        let mut word = String::new();
        while let Some(c) = chars
            .get(*at)
            .filter(|c| c.is_ascii_alphanumeric() || **c == '_')
        {
            word.push(*c);
            *at += 1;
        }
        word
    }
    fn tree(chars: &[char], at: &mut usize, mut segments: Vec<String>, out: &mut Vec<Vec<String>>) {
        loop {
            skip_space(chars, at);
            if chars.get(*at) == Some(&'{') {
                *at += 1;
                loop {
                    skip_space(chars, at);
                    match chars.get(*at) {
                        Some('}') => {
                            *at += 1;
                            return;
                        }
                        Some(',') => *at += 1,
                        None => return,
                        Some(_) => {
                            let before = *at;
                            tree(chars, at, segments.clone(), out);
                            if *at == before {
                                return;
                            }
                        }
                    }
                }
            }
            let word = ident(chars, at);
            if word.is_empty() {
                out.push(segments);
                return;
            }
            if word != "self" {
                segments.push(word);
            }
            if chars.get(*at) == Some(&':') && chars.get(*at + 1) == Some(&':') {
                *at += 2;
                continue;
            }
            // A rename (`x as y`) names the same item.
            skip_space(chars, at);
            let rest: String = chars.iter().skip(*at).take(3).collect();
            if rest == "as " {
                *at += 3;
                skip_space(chars, at);
                ident(chars, at);
            }
            out.push(segments);
            return;
        }
    }
    let chars: Vec<char> = text.chars().take(4000).collect();
    let mut out = Vec::new();
    tree(&chars, &mut 0, Vec::new(), &mut out);
    out
}

/// Module paths a file refers to: each `crate::a::b::c` or `super::x` path,
/// with the braces of a `use` expanded.
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
            for path in use_tree(rest) {
                let mut segments = base.clone();
                segments.extend(path);
                out.push(segments);
            }
        }
    }
    out
}

/// The re-exports of a module root's code: (exported name, module path the
/// statement names relative to `module`, the item's name there), read from
/// `pub use` statements of one line or many (as the crate's readers see
/// them; a `pub(crate) use` is not followed). Glob re-exports (`*`) are
/// left out.
fn reexports_of(module: &[String], code: &str) -> Vec<(String, Vec<String>, String)> {
    let mut out = Vec::new();
    let mut statement = String::new();
    for line in code.lines() {
        let trimmed = line.trim();
        if statement.is_empty() {
            match trimmed.strip_prefix("pub use ") {
                Some(rest) => statement.push_str(rest),
                None => continue,
            }
        } else {
            statement.push(' ');
            statement.push_str(trimmed);
        }
        let Some(body) = statement.strip_suffix(';') else {
            continue;
        };
        let body = body.to_string();
        statement.clear();
        let (base, body) = if let Some(rest) = body.strip_prefix("crate::") {
            (Vec::new(), rest.to_string())
        } else {
            let rest = body.strip_prefix("self::").unwrap_or(&body);
            (module.to_vec(), rest.to_string())
        };
        // Each leaf of the tree, with its exported name (a rename's).
        for leaf in use_tree_with_names(&body) {
            let (path, exported) = leaf;
            let Some((item, parent)) = path.split_last() else {
                continue;
            };
            let mut child = base.clone();
            child.extend(parent.iter().cloned());
            out.push((
                exported.unwrap_or_else(|| item.clone()),
                child,
                item.clone(),
            ));
        }
    }
    out
}

/// The leaves of a use tree with the name each is exported as when renamed
/// (`a::{b as c}` → (`a::b`, Some(`c`))); globs are left out.
fn use_tree_with_names(body: &str) -> Vec<(Vec<String>, Option<String>)> {
    let paths = use_tree(body);
    // Renames, read apart: `x as y` pairs in the text, by the item's name.
    let words: Vec<&str> = body
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut renames = BTreeMap::new();
    for window in words.windows(3) {
        if window[1] == "as" {
            renames.insert(window[0].to_string(), window[2].to_string());
        }
    }
    if body.contains('*') {
        return Vec::new();
    }
    paths
        .into_iter()
        .map(|p| {
            let renamed = p.last().and_then(|last| renames.get(last).cloned());
            (p, renamed)
        })
        .collect()
}

/// Whether `code` names module `child` by a relative path (`child::…` not
/// after `::` or inside another name): a module root using its own file.
fn names_relative(code: &str, child: &str) -> bool {
    let needle = format!("{child}::");
    let bytes = code.as_bytes();
    code.match_indices(&needle).any(|(at, _)| {
        at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || matches!(bytes[at - 1], b'_' | b':'))
    })
}

/// One crate's source files and the re-exports of its module roots.
struct Library {
    /// Module path → file.
    files: BTreeMap<Vec<String>, PathBuf>,
    /// (module of a root file, re-exported name) → (the module the `use`
    /// names, the item's name there).
    reexports: BTreeMap<(Vec<String>, String), (Vec<String>, String)>,
    /// Whether a folder root's relative paths to its own files are edges
    /// (see `edges`).
    root_edges: bool,
}

impl Library {
    /// The library at the workspace root.
    fn read() -> Library {
        Library {
            root_edges: true,
            ..Library::read_crate(&root().join("src"))
        }
    }

    /// The crate whose sources are under `src`.
    fn read_crate(src: &Path) -> Library {
        let mut files = BTreeMap::new();
        let mut reexports = BTreeMap::new();
        for file in rust_files(src) {
            let module = module_of(src, &file);
            let text = std::fs::read_to_string(&file).unwrap();
            let name = file.file_name().unwrap().to_string_lossy();
            if name == "mod.rs" || name == "lib.rs" || name == "main.rs" {
                for (exported, child, item) in reexports_of(&module, &code_of(&text)) {
                    reexports.insert((module.clone(), exported), (child, item));
                }
            }
            files.insert(module, file);
        }
        Library {
            files,
            reexports,
            // Not yet for the crates under crates/: siftdb-testkit's
            // stress/ files import `stress_options` from stress/mod.rs.
            root_edges: false,
        }
    }

    /// The file a path names: its longest prefix that is a module, with a
    /// re-exported item followed (through every re-export on the way) to
    /// the module that defines it.
    fn resolve(&self, path: &[String]) -> Option<Vec<String>> {
        self.resolve_within(path, 8)
    }

    fn resolve_within(&self, path: &[String], hops: u32) -> Option<Vec<String>> {
        for len in (0..=path.len()).rev() {
            let prefix = path[..len].to_vec();
            if self.files.contains_key(&prefix) {
                if let Some(item) = path.get(len) {
                    if let Some((child, name)) = self.reexports.get(&(prefix.clone(), item.clone()))
                    {
                        let mut followed = child.clone();
                        followed.push(name.clone());
                        followed.extend(path[len + 1..].iter().cloned());
                        if hops > 0 && followed != path {
                            if let Some(found) = self.resolve_within(&followed, hops - 1) {
                                return Some(found);
                            }
                        }
                    }
                }
                return Some(prefix);
            }
        }
        None
    }

    /// The module a path names as written: its longest prefix that is a
    /// module, re-exports not followed.
    fn module_named(&self, path: &[String]) -> Vec<String> {
        (0..=path.len())
            .rev()
            .map(|len| path[..len].to_vec())
            .find(|prefix| self.files.contains_key(prefix))
            .unwrap_or_default()
    }

    /// File-level import edges, self-edges left out. A folder's root
    /// (`mod.rs`) that names one of its files by a relative path
    /// (`use child::X`, `pub use child::X`, `child::f()`) imports it: a file
    /// of the folder that imports the root then closes a circle through it.
    fn edges(&self) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (module, file) in &self.files {
            let code = code_of(&std::fs::read_to_string(file).unwrap());
            let targets = edges.entry(module.clone()).or_default();
            let is_folder_root = self.root_edges && file.file_name().is_some_and(|n| n == "mod.rs");
            for child in self.files.keys().filter(|_| is_folder_root) {
                let is_child = child.len() == module.len() + 1 && child.starts_with(module);
                if is_child && names_relative(&code, child.last().unwrap()) {
                    targets.insert(child.clone());
                }
            }
            for path in referenced_paths(module, &code) {
                // A name taken through the root of the file's own folder
                // (`crate::db::Db` in db/read.rs) is an import of that root,
                // whatever file the root re-exports it from.
                let named = self.module_named(&path);
                let through_own_root = self.root_edges
                    && named.len() < module.len()
                    && module.starts_with(&named)
                    && self.files[&named]
                        .file_name()
                        .is_some_and(|n| n == "mod.rs");
                let target = if through_own_root {
                    Some(named)
                } else {
                    self.resolve(&path)
                };
                if let Some(target) = target {
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
    let Some(top) = module.first() else {
        return Some(9); // lib.rs: the crate root re-exports everything
    };
    LAYERS
        .iter()
        .find(|(_, names)| names.contains(&top.as_str()))
        .map(|(layer, _)| *layer)
}

/// The library's top-level modules by layer, deepest first. Every name
/// here is a module of `src/` (a test below refuses one that is not).
const LAYERS: &[(u32, &[&str])] = &[
    (
        0,
        &["error", "filename", "counter", "histogram", "prefetch"],
    ),
    (1, &["codec", "key", "fs", "prefix", "events"]),
    // The filters are a crate of their own (siftdb-filter), below
    // all of src/: `crate::filter` resolves to no file here.
    (2, &["range_tombstone", "shared"]),
    (
        3,
        &[
            "options",
            "write_options",
            "storage_options",
            "compression",
            "batch",
            "memtable",
            "manifest",
            "keyspace_settings",
            "blob",
        ],
    ),
    (4, &["wal", "table", "identify"]),
    (5, &["db", "inspect", "repair"]),
    (
        6,
        &["async_db", "async_iter", "async_transaction", "backup"],
    ),
];

/// Imports that breach the layers, still in the code on this branch while
/// another branch removes them: (importing module, imported module), left
/// out of the graph before it is checked (with the circles they close).
/// Temporary: the coordinator empties this list when the branches meet (the
/// test fails on an entry it no longer sees, so a stale one cannot stay).
const KNOWN_BREACHES: &[(&str, &str)] = &[];

fn name(module: &[String]) -> String {
    if module.is_empty() {
        "lib".to_string()
    } else {
        module.join("::")
    }
}

/// The import circles of a graph (a depth-first search for back edges),
/// each as `a → b → … → a` with modules written by `name`.
fn circles(
    edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    name: fn(&[String]) -> String,
) -> Vec<String> {
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
        name: fn(&[String]) -> String,
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
                None => visit(next, edges, marks, stack, circles, name),
            }
        }
        stack.pop();
        marks.insert(node.clone(), Mark::Done);
    }
    let mut marks = BTreeMap::new();
    let mut circles = Vec::new();
    for node in edges.keys() {
        if !marks.contains_key(node) {
            visit(node, edges, &mut marks, &mut Vec::new(), &mut circles, name);
        }
    }
    circles
}

#[test]
fn library_imports_form_no_circle_and_never_run_up() {
    let library = Library::read();
    assert!(
        library.files.len() > 40,
        "read {} files",
        library.files.len()
    );
    let mut edges = library.edges();
    let mut problems = Vec::new();
    for (from, to) in KNOWN_BREACHES {
        let module = |m: &str| m.split("::").map(str::to_string).collect::<Vec<_>>();
        let removed = edges
            .get_mut(&module(from))
            .is_some_and(|targets| targets.remove(&module(to)));
        if !removed {
            problems.push(format!(
                "{from} no longer imports {to}: remove it from KNOWN_BREACHES"
            ));
        }
    }

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

    let circles = circles(&edges, name);
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
    // A folder's root imports the files it names by relative paths
    // (`pub use handle::Db` in db/mod.rs), so a file of db/ that imported
    // db/mod.rs would close a circle.
    assert!(has(&["db"], &["db", "handle"]));
    assert!(names_relative("pub use handle::Db;", "handle"));
    assert!(!names_relative(
        "use crate::x::handle::Db; let a = my_handle::f();",
        "handle"
    ));
    assert!(has(&["table", "open"], &["error"]));
    // `crate::table::LookupKey` is re-exported by table/mod.rs from lookup.rs.
    assert_eq!(
        library.resolve(&["table".to_string(), "LookupKey".to_string()]),
        Some(vec!["table".to_string(), "lookup".to_string()])
    );
    assert!(layer(&["nonexistent".to_string()]).is_none());
    // A name the crate root re-exports in a `pub use` of many lines is
    // followed through `db/mod.rs` to the file that defines it.
    assert_eq!(
        library.resolve(&["Keyspace".to_string()]),
        Some(vec!["db".to_string(), "keyspace".to_string()])
    );
    let module = vec!["a".to_string(), "b".to_string()];
    let paths = referenced_paths(
        &module,
        "use crate::{x, y::{z, self}, w as v};\nfn f(k: &crate::K) {}\nuse super::s::T;",
    );
    let strings: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(strings, ["x", "y::z", "y", "w", "K", "a::s::T"]);
    let reexports = reexports_of(
        &[],
        "pub use a::{\n    B, c::D as E,\n    F,\n};\npub use g::H;\npub use crate::i::*;",
    );
    let seen: Vec<String> = reexports
        .iter()
        .map(|(name, child, item)| format!("{name}={}::{item}", child.join("::")))
        .collect();
    assert_eq!(seen, ["B=a::B", "E=a::c::D", "F=a::F", "H=g::H"]);
}

/// Every module the layer lists name exists in `src/`: a name left behind
/// by a module that moved or never came would hide that the list is stale.
#[test]
fn every_module_the_layers_name_exists() {
    let library = Library::read();
    let missing: Vec<&str> = LAYERS
        .iter()
        .flat_map(|(_, names)| names.iter().copied())
        .filter(|n| !library.files.contains_key(&vec![n.to_string()]))
        .collect();
    assert!(
        missing.is_empty(),
        "`LAYERS` names modules that src/ does not have: {missing:?}"
    );
}

/// The folders of the workspace's member crates other than the library at
/// the root (the tool crates under `crates/`, the filter library in
/// `siftdb-filter/`), as the root `Cargo.toml`'s `members` lists them.
fn member_crates() -> Vec<PathBuf> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let members = manifest
        .lines()
        .find(|line| line.starts_with("members"))
        .expect("the root Cargo.toml lists its members on one line");
    let dirs: Vec<PathBuf> = members
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|member| *member != ".")
        .map(|member| root().join(member))
        .collect();
    for dir in &dirs {
        assert!(dir.join("Cargo.toml").is_file(), "{}", dir.display());
    }
    dirs
}

/// The files of each member crate import one another without a circle (a
/// file that needs a name from a file that needs one of its own wants a
/// module below both).
#[test]
fn no_member_crate_has_an_import_circle() {
    let mut problems = Vec::new();
    let mut crates = 0;
    let mut files = 0;
    for dir in member_crates() {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        crates += 1;
        let library = Library::read_crate(&src);
        files += library.files.len();
        let crate_dir = dir.strip_prefix(root()).unwrap().display().to_string();
        for circle in circles(&library.edges(), name) {
            problems.push(format!("{crate_dir}: import circle: {circle}"));
        }
    }
    assert!(
        crates >= 5 && files > 60,
        "read {crates} crates, {files} files"
    );
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// The longest a source file may be: past it, a file holds more than one
/// concern (put the new one in a file of its own).
const MAX_LINES: usize = 1000;

/// Every Rust file of the library (`src/`) and of the member crates (their
/// sources, tests and benches) is at most `MAX_LINES` long.
#[test]
fn no_source_file_is_over_1000_lines() {
    let mut dirs = vec![root().join("src")];
    dirs.extend(member_crates());
    let mut long = Vec::new();
    let mut files = 0;
    for dir in dirs {
        for file in rust_files(&dir) {
            if file.components().any(|c| c.as_os_str() == "target") {
                continue;
            }
            files += 1;
            let lines = std::fs::read_to_string(&file).unwrap().lines().count();
            if lines > MAX_LINES {
                long.push(format!(
                    "{}: {lines} lines",
                    file.strip_prefix(root()).unwrap().display()
                ));
            }
        }
    }
    assert!(files > 200, "read {files} files");
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split them by concern):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_allow_attribute_is_left_in_library_or_tool_sources() {
    let mut dirs = vec![root().join("src")];
    for dir in member_crates() {
        let src = dir.join("src");
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
/// `siftdb-filter/…`, `tests/…`, `docs/…`, `fuzz/…`, `benches/…`,
/// `examples/…`.
fn cited_paths(text: &str) -> Vec<String> {
    const ROOTS: [&str; 8] = [
        "src/",
        "crates/",
        "siftdb-filter/",
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
    for dir in ["docs", "crates", "siftdb-filter"] {
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
        "use Secondary",
        "use CatchUp",
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
        "use BlobFileReport",
        "use LogAction",
        "use LogReport",
        "use LostRange",
        "use LostRecord",
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
        "use Cache",
        "use RateLimiter",
        "use WriteBufferManager",
        "use filter",
        "use Histograms",
        "use HistogramStats",
        "use Histogram",
        "use HistogramSummary",
        "use MetricsPublisher",
        "mod histogram",
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
