//! Tells the binary which versions of the peer crates Cargo.lock pinned, so
//! reports name the exact fjall and rust-rocksdb they measured.

use std::fs;

/// The version Cargo.lock records for package `name`, if any.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let wanted = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == wanted {
            let version = lines.next()?.trim();
            return version
                .strip_prefix("version = \"")
                .and_then(|v| v.strip_suffix('"'))
                .map(str::to_string);
        }
    }
    None
}

fn main() {
    println!("cargo:rerun-if-changed=../../Cargo.lock");
    let lock = fs::read_to_string("../../Cargo.lock").unwrap_or_default();
    for (crate_name, var) in [
        ("fjall", "PEERS_FJALL_VERSION"),
        ("rocksdb", "PEERS_RUST_ROCKSDB_VERSION"),
        ("librocksdb-sys", "PEERS_LIBROCKSDB_SYS_VERSION"),
    ] {
        let version = locked_version(&lock, crate_name).unwrap_or_else(|| "unknown".to_string());
        println!("cargo:rustc-env={var}={version}");
    }
}
