//! Tells the binary which versions of the peer crates Cargo.lock pinned, so
//! reports name the exact fjall and rust-rocksdb they measured, and the
//! RocksDB version librocksdb-sys bundles (its version's build metadata,
//! `0.19.0+11.8.1` bundles RocksDB 11.8.1). Fails the build when that
//! RocksDB is older than 10: every published "vs RocksDB" figure is
//! measured against RocksDB 10 or later.

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

/// The oldest RocksDB major version the comparison may measure.
const OLDEST_ROCKSDB_MAJOR: u32 = 10;

fn main() -> Result<(), String> {
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
    let sys = locked_version(&lock, "librocksdb-sys")
        .ok_or("Cargo.lock names no librocksdb-sys: the RocksDB version is unknown")?;
    let bundled = sys
        .split_once('+')
        .map(|(_, rocksdb)| rocksdb.to_string())
        .ok_or_else(|| format!("librocksdb-sys {sys} names no bundled RocksDB version"))?;
    let major: u32 = bundled
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| format!("cannot read a major version from RocksDB {bundled}"))?;
    if major < OLDEST_ROCKSDB_MAJOR {
        return Err(format!(
            "librocksdb-sys {sys} bundles RocksDB {bundled}; the comparison needs RocksDB {OLDEST_ROCKSDB_MAJOR} or later"
        ));
    }
    println!("cargo:rustc-env=PEERS_ROCKSDB_VERSION={bundled}");
    Ok(())
}
