//! Every example runs to completion: each `examples/*.rs` (a new one is
//! covered without a change here) is run as its own process, in an empty
//! temporary directory, with no arguments and a time limit, and fails the
//! test on a non-zero exit, a panic message, or a missing binary.
//!
//! The binaries are the ones cargo builds next to the test executable
//! (`target/<profile>/examples/`): a plain `cargo test` builds every example
//! first, but a run that names its tests (`cargo test --test examples_run`)
//! builds none (and `--examples` builds them as test harnesses, elsewhere):
//! build them with `cargo build --examples --profile test` first, with the
//! same features. An example with
//! `required-features` in Cargo.toml is built only with those features, so
//! its binary may be absent: it is skipped, and the skip is printed.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// How long one example may run (in the test profile the slowest, the
/// 1M-URL `url_sieve` and the 200k-key `async_gets`, take a few seconds).
const TIME_LIMIT: Duration = Duration::from_secs(60);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The names of `examples/*.rs`, sorted.
fn example_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The examples Cargo.toml gives `required-features`: the names of its
/// `[[example]]` tables that have that key.
fn examples_with_required_features(manifest: &str) -> Vec<String> {
    let mut found = Vec::new();
    for table in manifest.split("\n[").skip(1) {
        let Some(body) = table.strip_prefix("[example]]") else {
            continue;
        };
        let value_of = |key: &str| {
            body.lines()
                .filter_map(|line| line.split_once('='))
                .find(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim().trim_matches('"').to_string())
        };
        if let (Some(name), Some(_)) = (value_of("name"), value_of("required-features")) {
            found.push(name);
        }
    }
    found
}

/// Where cargo put the example binaries of this build: the test executable
/// is `target/<profile>/deps/examples_run-HASH`.
fn examples_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    deps.parent().unwrap().join("examples")
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path).and_then(|m| m.modified()).unwrap()
}

/// Runs `binary` in an empty directory; `Err` says what went wrong, with its output.
fn run(binary: &Path) -> Result<Duration, String> {
    let cwd = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut child = Command::new(binary)
        .current_dir(cwd.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start: {e}"))?;
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = pipe.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            // The pipes may still be held by a process it started: not waited for.
            return Err(format!("still running after {TIME_LIMIT:?}: killed"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    let output = format!("--- stdout:\n{stdout}--- stderr:\n{stderr}");
    if !status.success() {
        return Err(format!("exited with {status}\n{output}"));
    }
    if stderr.contains("panicked at") {
        return Err(format!("a thread panicked (exit status 0)\n{output}"));
    }
    Ok(elapsed)
}

#[test]
fn every_example_runs_to_completion() {
    let names = example_names();
    assert!(
        names.iter().any(|n| n == "basic"),
        "no examples found: {names:?}"
    );
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let optional = examples_with_required_features(&manifest);
    let dir = examples_dir();
    let mut failures = Vec::new();
    for name in &names {
        let binary = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
        let source = root().join("examples").join(format!("{name}.rs"));
        if !binary.exists() {
            if optional.contains(name) {
                println!("{name}: skipped, not built (its required-features are off)");
            } else {
                failures.push(format!(
                    "{name}: no binary at {}: a `cargo test` that names its tests builds no \
                     examples; run `cargo build --examples --profile test` (same features) first",
                    binary.display()
                ));
            }
            continue;
        }
        if modified(&binary) < modified(&source) {
            failures.push(format!(
                "{name}: {} is older than {}: rebuild it (`cargo build --examples --profile test`)",
                binary.display(),
                source.display()
            ));
            continue;
        }
        match run(&binary) {
            Ok(took) => println!("{name}: ok in {took:.1?}"),
            Err(why) => failures.push(format!("{name}: {why}")),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

#[test]
fn the_manifest_reader_finds_required_features() {
    let manifest = "[package]\nname = \"x\"\n\n[[example]]\nname = \"plain\"\n\n\
                    [[example]]\nname = \"needs\"\nrequired-features = [\"tokio\"]\n\n[[bench]]\nname = \"b\"\n";
    assert_eq!(examples_with_required_features(manifest), ["needs"]);
    let real = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(examples_with_required_features(&real).contains(&"async_gets".to_string()));
}
