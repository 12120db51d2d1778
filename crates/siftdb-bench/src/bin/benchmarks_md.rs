//! `benchmarks-md`: writes `docs/benchmarks.md` from the stored result
//! files in `docs/results/`.
//!
//! ```text
//! cargo run -p siftdb-bench --bin benchmarks-md            # writes docs/benchmarks.md
//! cargo run -p siftdb-bench --bin benchmarks-md -- --check # fails if it is not up to date
//! ```
//!
//! Owns: its flags and where the files are. Rendering is
//! `siftdb_bench::benchmarks_doc`'s.
//! Must never: write anything but `docs/benchmarks.md`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use siftdb_bench::benchmarks_doc::{render, DOCUMENT, RESULTS_DIR};

/// docs/benchmarks.md from the result files in docs/results/.
#[derive(Parser, Debug)]
struct Args {
    /// Only compare: exit 1 when docs/benchmarks.md differs from what the
    /// result files give.
    #[arg(long)]
    check: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // The workspace root, two levels above this crate.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let document = root.join(DOCUMENT);
    let rendered = match render(&root.join(RESULTS_DIR)) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("benchmarks-md: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.check {
        let current = std::fs::read_to_string(&document).unwrap_or_default();
        if current == rendered {
            return ExitCode::SUCCESS;
        }
        eprintln!(
            "benchmarks-md: {DOCUMENT} is not what {RESULTS_DIR}/ gives: run it without --check"
        );
        return ExitCode::FAILURE;
    }
    match std::fs::write(&document, rendered) {
        Ok(()) => {
            println!("wrote {DOCUMENT}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("benchmarks-md: {}: {e}", document.display());
            ExitCode::FAILURE
        }
    }
}
