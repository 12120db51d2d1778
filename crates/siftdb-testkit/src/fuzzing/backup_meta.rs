//! Fuzz target for the backup metadata file (`meta/ID` of a backup
//! directory).
//!
//! Owns: `backup_meta_decode` — arbitrary bytes through `decode_meta`, as
//! given and with a valid checksum line appended (a fuzzer cannot forge a
//! CRC-32, so this reaches the parser behind the check).
//! Must never: panic unless the decoder broke a promise — it panicked, it
//! accepted a file name that leaves the backup directory, or what it
//! accepted does not decode again to itself once encoded.
#![expect(
    clippy::panic,
    reason = "a fuzz target reports a broken invariant by panicking, which libFuzzer and the replay tests catch"
)]

use siftdb::internals::backup_meta::{decode_meta, encode_meta, safe_name};
use siftdb::internals::codec::crc32_of;

/// Arbitrary bytes as backup metadata, then as its body with a checksum.
pub fn backup_meta_decode(data: &[u8]) {
    check(data);
    let mut signed = data.to_vec();
    if !signed.ends_with(b"\n") {
        signed.push(b'\n');
    }
    let crc = crc32_of(&[&signed]);
    signed.extend_from_slice(format!("crc32 {crc:08x}\n").as_bytes());
    check(&signed);
}

/// The backup number the bytes claim on their second line (1 without one),
/// so an input can be accepted.
fn claimed_id(data: &[u8]) -> u64 {
    std::str::from_utf8(data)
        .ok()
        .and_then(|text| text.lines().nth(1))
        .and_then(|line| line.strip_prefix("id "))
        .and_then(|id| id.parse().ok())
        .unwrap_or(1)
}

fn check(data: &[u8]) {
    let id = claimed_id(data);
    let Ok(info) = decode_meta(data, id) else {
        return;
    };
    for file in &info.files {
        if !safe_name(&file.stored) || !safe_name(&file.name) {
            panic!("accepted a name that leaves the directory: {file:?}");
        }
    }
    let again = encode_meta(&info);
    if decode_meta(&again, id).as_ref() != Ok(&info) {
        panic!("accepted metadata does not survive its own encoding: {info:?}");
    }
}
