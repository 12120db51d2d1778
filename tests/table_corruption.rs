//! Damage in every part of a table: a damaged data block fails exactly the
//! gets that touch it (and the scans that reach it) with `Corruption` naming
//! the file, block and offset, while every other get stays correct; a
//! damaged filter falls back to "may match" and is counted; damage in the
//! footer, index or properties fails the open.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use bytes::Bytes;
use siftdb::internals::codec::crc32_of;
use siftdb::internals::key::{internal_key, user_key_of, SeqNo, ValueKind};
use siftdb::internals::table::format::block_checksum;
use siftdb::internals::table::{
    BlockKind, Codec, FilterStatus, ReadCounters, Severity, Table, TableOptions, TableValue,
};
use siftdb::Error;
use siftdb_testkit::tables::{bench_key, build_table};

const KEYS: u64 = 1500;

fn entries() -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..KEYS)
        .map(|i| {
            let key = internal_key(&bench_key(2 * i), SeqNo(i + 1), ValueKind::Put);
            (key, format!("value of key {i}").into_bytes())
        })
        .collect()
}

fn table_bytes(options: &TableOptions) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = build_table(dir.path(), "000007.sst", options, &entries());
    std::fs::read(path).unwrap()
}

fn open(bytes: Vec<u8>) -> (Table, std::sync::Arc<ReadCounters>) {
    let counters = ReadCounters::new();
    let table = Table::from_bytes("000007.sst", Bytes::from(bytes), counters.clone()).unwrap();
    (table, counters)
}

fn corruption_text(result: siftdb::Result<impl std::fmt::Debug>) -> String {
    match result {
        Err(e @ Error::Corruption { .. }) => e.to_string(),
        other => panic!("expected Corruption, got {other:?}"),
    }
}

#[test]
fn each_damaged_data_block_fails_only_the_gets_that_touch_it() {
    for bits in [10.0, 0.0] {
        let options = TableOptions {
            block_size: 512,
            bloom_bits_per_key: bits,
            ..TableOptions::default()
        };
        let clean = table_bytes(&options);
        let (clean_table, _) = open(clean.clone());
        let handles = clean_table.data_block_handles();
        assert!(handles.len() > 20, "{} blocks", handles.len());
        let entries = entries();
        let mut failed_present_gets = 0;
        for (block_no, handle) in handles.iter().enumerate() {
            let mut bytes = clean.clone();
            // Alternate between damaging an entry and the restart array.
            let at = if block_no % 2 == 0 {
                handle.offset + handle.len / 2
            } else {
                handle.offset + handle.len - 2
            };
            bytes[at as usize] ^= 0x20;
            let (table, _) = open(bytes);
            let block_name = format!("table 000007.sst data block at offset {}", handle.offset);
            let mut errors_here = 0;
            for (i, (key, value)) in entries.iter().enumerate() {
                match table.get_key(user_key_of(key)) {
                    Ok(got) => {
                        assert_eq!(got, Some(TableValue::Put(value.clone().into())), "key {i}")
                    }
                    Err(e) => {
                        let text = corruption_text(Err::<(), _>(e));
                        assert!(text.contains(&block_name), "{text}");
                        errors_here += 1;
                    }
                }
                // An absent key is absent or an error of the same block; never a value.
                if let Ok(got) = table.get_key(&bench_key(2 * i as u64 + 1)) {
                    assert_eq!(got, None);
                }
            }
            assert!(errors_here > 0, "block {block_no}: no get noticed");
            failed_present_gets += errors_here;

            // A scan stops at the block with the same error.
            let mut it = table.iter();
            let mut scan = it.seek_to_first();
            while scan.is_ok() && it.valid() {
                scan = it.next();
            }
            assert!(corruption_text(scan).contains(&block_name));
            assert!(!it.valid());

            let problems = table.verify();
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(
                (problems[0].block, problems[0].offset),
                (BlockKind::Data, handle.offset)
            );
            assert_eq!(problems[0].severity, Severity::Error);
        }
        // Every key lives in exactly one block, so across all damaged blocks
        // every present key failed exactly once.
        assert_eq!(failed_present_gets, KEYS as usize);
    }
}

#[test]
fn a_valid_block_at_the_wrong_offset_is_caught() {
    // No prefix sharing and fixed-size entries: neighbouring blocks of equal length.
    let options = TableOptions {
        block_size: 512,
        restart_interval: 1,
        ..TableOptions::default()
    };
    let clean = table_bytes(&options);
    let (table, _) = open(clean.clone());
    let handles = table.data_block_handles();
    let (first, second) = handles
        .windows(2)
        .map(|pair| (pair[0], pair[1]))
        .find(|(a, b)| a.len == b.len)
        .expect("two neighbouring blocks of equal length");
    // Copy the second block, trailer and all, over the first: without the
    // offset in the checksum this would pass and the first block's keys
    // would silently go missing.
    let span = (first.len + 5) as usize;
    let mut bytes = clean.clone();
    bytes.copy_within(
        second.offset as usize..second.offset as usize + span,
        first.offset as usize,
    );
    let (table, _) = open(bytes);
    let mut errors = 0;
    for (key, value) in entries() {
        match table.get_key(user_key_of(&key)) {
            Ok(got) => assert_eq!(got, Some(TableValue::Put(value.into()))),
            Err(e) => {
                let text = corruption_text(Err::<(), _>(e));
                let place = format!("data block at offset {}", first.offset);
                assert!(
                    text.contains(&place) && text.contains("checksum mismatch"),
                    "{text}"
                );
                errors += 1;
            }
        }
    }
    assert!(errors > 0);
}

#[test]
fn a_damaged_filter_fails_open_and_is_counted() {
    let clean = table_bytes(&TableOptions::default());
    let (table, _) = open(clean.clone());
    let filter = table.footer().filter.unwrap();
    assert_eq!(filter.offset % 64, 0);

    // A flipped bit in the lines, then one in the header.
    for at in [filter.offset + 64 + 7, filter.offset + 5] {
        let mut bytes = clean.clone();
        bytes[at as usize] ^= 0x01;
        check_filter_fallback(bytes, "checksum mismatch");
    }

    // A checksum-correct filter of an unknown layout (id 9 instead of 4):
    // both the filter's own crc and the block trailer are recomputed.
    let mut bytes = clean.clone();
    let (start, end) = (
        filter.offset as usize,
        (filter.offset + filter.len) as usize,
    );
    bytes[start + 5] = 9;
    let inner_crc = crc32_of(&[&bytes[start..end - 4]]);
    bytes[end - 4..end].copy_from_slice(&inner_crc.to_le_bytes());
    let trailer_crc = block_checksum(
        &bytes[start..end],
        BlockKind::Filter as u8,
        Codec::Raw as u8,
        filter.offset,
    );
    bytes[end + 2..end + 6].copy_from_slice(&trailer_crc.to_le_bytes());
    check_filter_fallback(bytes, "unknown layout");
}

fn check_filter_fallback(bytes: Vec<u8>, reason: &str) {
    let (table, counters) = open(bytes);
    match table.filter_status() {
        FilterStatus::Corrupt(why) => assert!(why.contains(reason), "{why}"),
        other => panic!("filter status {other:?}"),
    }
    assert_eq!(counters.snapshot().filter_fallbacks, 1);
    for (i, (key, value)) in entries().iter().enumerate() {
        let got = table.get_key(user_key_of(key)).unwrap();
        assert_eq!(got, Some(TableValue::Put(value.clone().into())));
        assert_eq!(table.get_key(&bench_key(2 * i as u64 + 1)).unwrap(), None);
    }
    let stats = counters.snapshot();
    assert_eq!(stats.filter_checks, 0);
    assert_eq!(
        stats.data_block_reads,
        2 * KEYS - 1,
        "every in-range get reads a block"
    );
    let problems = table.verify();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        (problems[0].block, problems[0].severity),
        (BlockKind::Filter, Severity::Warning)
    );
}

#[test]
fn damage_to_footer_index_or_properties_fails_the_open() {
    let clean = table_bytes(&TableOptions::default());
    let (table, _) = open(clean.clone());
    let footer = *table.footer();
    let footer_at = clean.len() - 64;
    let damaged = [
        (footer_at + 3, "footer block"),
        (footer_at + 50, "footer block"),
        (clean.len() - 1, "footer block"),
        (footer.index.offset as usize + 3, "index block at offset"),
        (
            footer.index.offset as usize + footer.index.len as usize,
            "index block at offset",
        ),
        (
            footer.properties.offset as usize + 9,
            "properties block at offset",
        ),
        (
            footer.properties.offset as usize + footer.properties.len as usize + 2,
            "properties block",
        ),
    ];
    for (at, place) in damaged {
        let mut bytes = clean.clone();
        bytes[at] ^= 0x40;
        let err = Table::from_bytes("000007.sst", bytes.into(), ReadCounters::new()).unwrap_err();
        let text = corruption_text(Err::<(), _>(err));
        assert!(
            text.contains("000007.sst") && text.contains(place),
            "byte {at}: {text}"
        );
    }
    for len in [0, 10, 63, 64, clean.len() - 1] {
        let err = Table::from_bytes(
            "000007.sst",
            Bytes::copy_from_slice(&clean[..len]),
            ReadCounters::new(),
        );
        assert!(err.unwrap_err().is_corruption(), "truncated to {len}");
    }
}

#[test]
fn a_footer_handle_to_the_wrong_kind_of_block_is_caught() {
    let clean = table_bytes(&TableOptions::default());
    let (table, _) = open(clean.clone());
    let mut footer = *table.footer();
    // A correctly checksummed footer whose index handle names the properties block.
    footer.index = footer.properties;
    let mut bytes = clean.clone();
    let n = bytes.len();
    bytes[n - 64..].copy_from_slice(&footer.encode());
    let err = Table::from_bytes("000007.sst", bytes.into(), ReadCounters::new()).unwrap_err();
    let text = corruption_text(Err::<(), _>(err));
    assert!(
        text.contains("found type byte 4, expected 2 (index block)"),
        "{text}"
    );

    // A handle past the footer.
    let mut footer = *table.footer();
    footer.properties.len += 64;
    let mut bytes = clean;
    bytes[n - 64..].copy_from_slice(&footer.encode());
    let err = Table::from_bytes("000007.sst", bytes.into(), ReadCounters::new()).unwrap_err();
    assert!(err.to_string().contains("runs past the footer"), "{err}");
}

/// A block whose entry header stores `shared` = 0 in two bytes (0x80 0x00)
/// instead of one: the writer never does, and the reader refuses it as the
/// codec refuses every varint longer than its value needs, in a scan, a
/// seek and the structure check alike.
#[test]
fn a_block_varint_longer_than_its_value_needs_is_corruption() {
    use siftdb::internals::table::block::Block;
    let block = |header: &[u8]| {
        let mut bytes = header.to_vec();
        // User key "k", packed tag 1 (sequence 0, put), value "v".
        bytes.extend_from_slice(&[b'k', 0x01, b'v']);
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes());
        Block::parse(Bytes::from(bytes)).unwrap()
    };
    // The shortest form reads back.
    let good = block(&[0x00, 0x01, 0x01]);
    let mut it = good.iter();
    it.seek_to_first().unwrap();
    assert!(it.valid());
    assert_eq!(user_key_of(it.key()), b"k");
    assert_eq!(good.check_structure().unwrap(), 1);

    let over = block(&[0x80, 0x00, 0x01, 0x01]);
    let mut it = over.iter();
    let err = it.seek_to_first().unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    assert!(!it.valid());
    let err = it.seek(b"k").unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    let err = over.check_structure().unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
}
