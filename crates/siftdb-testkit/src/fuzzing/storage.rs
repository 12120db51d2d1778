//! Fuzz targets for the durable-state decoders: the write-ahead log (with
//! the batches inside it) and the manifest.
//!
//! Owns: the invariants the fuzzers check; `fuzz/fuzz_targets/*.rs` and
//! `tests/fuzz_replay_storage.rs` only call these functions.
//! Must never: panic except when an invariant is violated.
//!
//! Each target runs every input twice: once as raw bytes handed to the
//! decoder, and once as a recipe that builds a valid file and damages it the
//! way a crash or a flipped byte would, so the fuzzer reaches the code behind
//! the checksums, which raw bytes almost never pass.
#![expect(
    clippy::expect_used,
    reason = "a fuzz target reports a broken invariant by panicking, which libFuzzer and the replay tests catch"
)]
#![expect(
    clippy::cast_possible_truncation,
    reason = "offsets into the fuzz input, which is in memory"
)]

use siftdb::internals::batch::{decode_record, RawBatch, WriteBatch};
use siftdb::internals::key::{internal_key, SeqNo, ValueKind};
use siftdb::internals::manifest::{
    self, KeyspaceRecord, KeyspaceSettings, ManifestState, TableRecord, MAX_LEVELS,
};
use siftdb::internals::wal::{
    encode_close_record, encode_file_header, encode_record_into, record_header_len, replay,
    replay_batches, FILE_HEADER_LEN,
};
use siftdb::Error;
use siftdb::{Compression, FilterPolicy};

/// Reads recipe bytes; zero once the input runs out, so every input is a recipe.
struct Recipe<'a> {
    rest: &'a [u8],
}

impl<'a> Recipe<'a> {
    fn byte(&mut self) -> u8 {
        match self.rest.split_first() {
            Some((&b, rest)) => {
                self.rest = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    fn bytes(&mut self, max: usize) -> &'a [u8] {
        let n = (self.byte() as usize % (max + 1)).min(self.rest.len());
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        head
    }
}

/// Target `wal_replay`: arbitrary bytes as a log file, then as a recipe.
pub fn wal_replay(data: &[u8]) {
    wal_raw(data);
    wal_recipe(data);
}

fn wal_raw(data: &[u8]) {
    let log = match replay(data, "fuzz.wal") {
        Ok(log) => log,
        Err(e) => {
            // A sound header of another format version is refused as such.
            assert!(
                e.is_corruption() || matches!(e, Error::UnsupportedVersion { .. }),
                "replay failed with a non-corruption error: {e}"
            );
            assert!(replay_batches(data, "fuzz.wal").is_err());
            return;
        }
    };
    // Records are contiguous from the header, inside the input, and the torn
    // tail (if any) starts where the last record ends.
    let mut pos = FILE_HEADER_LEN as u64;
    for record in &log.records {
        assert_eq!(record.offset, pos, "records are not contiguous");
        let header_len = record_header_len(record.payload.len());
        let start = record.offset as usize + header_len;
        assert_eq!(
            data.get(start..start + record.payload.len()),
            Some(record.payload)
        );
        pos += (header_len + record.payload.len()) as u64;
    }
    match (&log.log_number, &log.torn_tail) {
        (None, torn) => {
            assert!(log.records.is_empty());
            assert_eq!(torn.as_ref().map(|t| t.offset), Some(0));
        }
        (Some(_), Some(torn)) => {
            assert_eq!(torn.offset, pos);
            assert!(!log.closed_cleanly);
        }
        // A clean end, or the close record the records promise.
        (Some(_), None) if log.closed_cleanly => {
            assert_eq!(
                data.get(pos as usize..),
                Some(&encode_close_record(log.records.len() as u64, pos)[..])
            );
        }
        (Some(_), None) => assert_eq!(pos, data.len() as u64),
    }
    let payloads: Vec<&[u8]> = log.records.iter().map(|r| r.payload).collect();

    // The valid part alone replays to the same records, with no torn tail.
    if log.log_number.is_some() {
        let valid = data.get(..pos as usize).unwrap_or_default();
        let again = replay(valid, "fuzz.wal").expect("the valid prefix must replay");
        assert!(again.torn_tail.is_none());
        assert_eq!(again.records, log.records);
    }

    // The records re-encoded in a fresh log replay to the same records.
    let number = log.log_number.unwrap_or(0);
    let fresh = build_log(number, &payloads);
    let again = replay(&fresh, "fresh.wal").expect("a freshly written log must replay");
    assert_eq!(again.log_number, Some(number));
    assert!(again.torn_tail.is_none());
    assert_eq!(
        again.records.iter().map(|r| r.payload).collect::<Vec<_>>(),
        payloads
    );

    // Every payload that decodes as a batch re-encodes to the same bytes.
    for payload in &payloads {
        if let Ok(batch) = decode_record(payload) {
            assert_eq!(
                &batch.to_write_batch().encode_record(batch.first_seq),
                payload,
                "batch encoding is not canonical"
            );
        }
    }
    if let Ok(batches) = replay_batches(data, "fuzz.wal") {
        assert_eq!(batches.batches.len(), log.records.len());
        assert_eq!(batches.torn_tail, log.torn_tail);
    }
}

fn build_log(number: u64, payloads: &[&[u8]]) -> Vec<u8> {
    let mut out = encode_file_header(number).to_vec();
    for payload in payloads {
        encode_record_into(&mut out, payload).expect("small payloads always encode");
    }
    out
}

/// Builds a log of batches from the recipe, damages it one way, and checks
/// that replay returns a prefix of the records and never a changed one.
fn wal_recipe(data: &[u8]) {
    let mut recipe = Recipe { rest: data };
    let log_number = u64::from(recipe.u16());
    // One byte says how many records, and whether the log was closed.
    let shape = recipe.byte();
    let record_count = shape % 6;
    let closed = (shape / 6).is_multiple_of(2);
    let mut seq = u64::from(recipe.byte());
    let mut batches = Vec::new();
    for _ in 0..record_count {
        let mut batch = WriteBatch::new();
        for _ in 0..recipe.byte() % 4 {
            let key = recipe.bytes(12);
            if recipe.byte().is_multiple_of(3) {
                batch.delete(key);
            } else {
                let value = recipe.bytes(40);
                batch.put(key, value);
            }
        }
        let payload = batch.encode_record(SeqNo(seq));
        seq += batch.len() as u64 + u64::from(recipe.byte() % 3);
        batches.push((batch, payload));
    }
    let payloads: Vec<&[u8]> = batches.iter().map(|(_, p)| p.as_slice()).collect();
    let mut log = build_log(log_number, &payloads);
    let mut starts = vec![FILE_HEADER_LEN];
    for p in &payloads {
        starts.push(starts.last().copied().unwrap_or(0) + record_header_len(p.len()) + p.len());
    }
    // Where the records end (and the close record, if any, starts).
    let records_end = log.len();
    if closed {
        log.extend_from_slice(&encode_close_record(
            payloads.len() as u64,
            records_end as u64,
        ));
    }

    // Undamaged: everything comes back, batches included.
    let all = replay_batches(&log, "recipe.wal").expect("an undamaged log must replay");
    assert!(all.torn_tail.is_none());
    assert_eq!(all.closed_cleanly, closed);
    assert_eq!(all.batches.len(), batches.len());
    for ((_, decoded), (batch, _)) in all.batches.iter().zip(&batches) {
        assert_eq!(decoded.ops, batch.iter().collect::<Vec<_>>());
    }

    let position = recipe.u16() as usize % (log.len() + 1);
    match recipe.byte() % 4 {
        // A crash: a prefix survives, maybe followed by zeros.
        0 | 1 => {
            let mut damaged = log.get(..position).unwrap_or_default().to_vec();
            let zeros = if recipe.byte().is_multiple_of(2) {
                0
            } else {
                recipe.byte() as usize
            };
            // A close record is synced as the last write: nothing, not even
            // zeros, follows the whole of it.
            let zeros = if closed && position == log.len() {
                0
            } else {
                zeros
            };
            damaged.resize(damaged.len() + zeros, 0);
            let r = replay(&damaged, "recipe.wal").expect("a crash-torn log must replay");
            // Zeros written over zeros change nothing, so "complete" means
            // byte-identical to the original, not merely "before the cut".
            let same = |range: std::ops::Range<usize>| {
                damaged
                    .get(range.clone())
                    .is_some_and(|d| Some(d) == log.get(range))
            };
            if !same(0..FILE_HEADER_LEN) {
                assert_eq!(r.log_number, None);
                assert!(r.records.is_empty());
                assert_eq!(r.torn_tail.map(|t| t.offset), Some(0));
                return;
            }
            let intact = starts
                .windows(2)
                .take_while(|w| matches!(w, [a, b] if same(*a..*b)))
                .count();
            assert_eq!(
                r.records.iter().map(|r| r.payload).collect::<Vec<_>>(),
                payloads.get(..intact).unwrap_or_default(),
                "a torn log must give exactly its intact records"
            );
            let clean = if closed && damaged.len() > records_end {
                // Cut in the close record (or not at all): every record is
                // kept, and only the whole close record is a clean end.
                damaged == log
            } else {
                starts.get(intact) == Some(&damaged.len())
            };
            assert_eq!(r.torn_tail.is_none(), clean, "{:?}", r.torn_tail);
            assert_eq!(r.closed_cleanly, closed && damaged == log);
        }
        // A flipped byte.
        _ => {
            let Some(index) = position.checked_sub(1) else {
                return;
            };
            let mask = recipe.byte().max(1);
            let mut damaged = log.clone();
            if let Some(b) = damaged.get_mut(index) {
                *b ^= mask;
            }
            let last_start = starts
                .len()
                .checked_sub(2)
                .and_then(|i| starts.get(i))
                .copied();
            match replay(&damaged, "recipe.wal") {
                Err(e) => assert!(e.is_corruption()),
                Ok(r) if closed => {
                    // After a clean close only a close record turned into
                    // what a crash while closing leaves passes, as torn,
                    // with every record kept.
                    let torn = r
                        .torn_tail
                        .expect("a flipped byte must never pass unnoticed");
                    assert!(
                        index >= records_end,
                        "damage in a closed log passed as torn"
                    );
                    assert_eq!(torn.offset as usize, records_end);
                    assert_eq!(r.records.len(), payloads.len());
                }
                Ok(r) => {
                    let torn = r
                        .torn_tail
                        .expect("a flipped byte must never pass unnoticed");
                    let kept: Vec<_> = r.records.iter().map(|r| r.payload).collect();
                    assert_eq!(kept, payloads.get(..kept.len()).unwrap_or_default());
                    // Only damage in the last record (or a header-only
                    // log's header) may be called a torn tail.
                    match last_start {
                        Some(last) => {
                            assert!(
                                index >= last,
                                "damage before the last record passed as torn"
                            );
                            assert_eq!(torn.offset as usize, last);
                        }
                        None => assert!(r.records.is_empty() && index < FILE_HEADER_LEN),
                    }
                }
            }
        }
    }
}

/// Target `manifest_decode`: arbitrary bytes as a manifest, then as a recipe.
pub fn manifest_decode(data: &[u8]) {
    match manifest::decode(data, "fuzz") {
        Ok(state) => {
            let encoded = manifest::encode(&state);
            assert_eq!(encoded, data, "manifest encoding is not canonical");
            assert_eq!(manifest::decode(&encoded, "fuzz").ok(), Some(state));
        }
        // A sound manifest of another format version is refused as such.
        Err(e) => assert!(
            e.is_corruption() || matches!(e, Error::UnsupportedVersion { .. }),
            "decode failed with a non-corruption error: {e}"
        ),
    }
    manifest_recipe(data);
}

/// Stored keyspace settings from the recipe: each one set or not by a bit
/// of one byte, with values valid for `Options::validate`.
fn settings_recipe(recipe: &mut Recipe<'_>) -> KeyspaceSettings {
    let set = recipe.byte();
    let on = |bit: u8| set & (1 << bit) != 0;
    let mut settings = KeyspaceSettings::default();
    if on(0) {
        let bits = f64::from(recipe.byte() % 40);
        let policy = if on(7) {
            FilterPolicy::level_aware(bits)
        } else {
            FilterPolicy::bits_per_key(bits)
        };
        settings.filter_policy = Some(
            policy
                .optimize_for_hits(recipe.byte() % 2 == 1)
                .static_filters_from_level(u32::from(recipe.byte() % 7)),
        );
    }
    if on(1) {
        settings.block_size = Some(256 + u32::from(recipe.u16()));
    }
    if on(2) {
        settings.compression = Some(if recipe.byte().is_multiple_of(2) {
            Compression::None
        } else {
            Compression::Lz4
        });
    }
    if on(3) {
        settings.prefix_len = Some(u32::from(recipe.byte()));
    }
    if on(4) {
        settings.whole_key_filtering = Some(recipe.byte().is_multiple_of(2));
    }
    if on(5) {
        settings.range_filter_bits_per_key = Some(if recipe.byte().is_multiple_of(2) {
            0.0
        } else {
            16.0
        });
    }
    if on(6) {
        settings.memtable_bytes = Some(4096 + u64::from(recipe.u16()));
    }
    settings
}

fn manifest_recipe(data: &[u8]) {
    let mut recipe = Recipe { rest: data };
    let next_file_number = u64::from(recipe.u16()) + 1;
    let last_sequence = u64::from(recipe.u16());
    let log_number = u64::from(recipe.u16()) % next_file_number;
    // Keyspaces: the default one, and up to two more with ids and log
    // numbers from the recipe.
    let mut keyspaces = vec![KeyspaceRecord {
        id: 0,
        name: "default".to_string(),
        log_number,
        settings: KeyspaceSettings::default(),
    }];
    for name in ["a", "b.c-d_1"]
        .into_iter()
        .take(usize::from(recipe.byte() % 3))
    {
        let id = u32::from(recipe.byte()) + 1;
        if keyspaces.iter().any(|k| k.id == id) {
            continue;
        }
        let log = log_number + u64::from(recipe.u16()) % (next_file_number - log_number);
        let settings = settings_recipe(&mut recipe);
        keyspaces.push(KeyspaceRecord {
            id,
            name: name.to_string(),
            log_number: log,
            settings,
        });
    }
    let next_keyspace_id = keyspaces.iter().map(|k| k.id).max().unwrap_or(0) + 1;
    let mut tables = Vec::new();
    for _ in 0..recipe.byte() % 5 {
        let file_number = u64::from(recipe.u16()) % next_file_number;
        if tables
            .iter()
            .any(|t: &TableRecord| t.file_number == file_number)
        {
            continue;
        }
        let mut low = recipe.bytes(10).to_vec();
        let mut high = recipe.bytes(10).to_vec();
        if low > high {
            std::mem::swap(&mut low, &mut high);
        }
        let max_seq = u64::from(recipe.u16()) % (last_sequence + 1);
        let min_seq = u64::from(recipe.u16()) % (max_seq + 1);
        let keyspace = keyspaces
            .get(usize::from(recipe.byte()) % keyspaces.len())
            .map_or(0, |k| k.id);
        tables.push(TableRecord {
            keyspace,
            level: u32::from(recipe.byte()) % MAX_LEVELS,
            file_number,
            file_size: u64::from(recipe.u16()),
            entries: u64::from(recipe.byte()),
            smallest: internal_key(&low, SeqNo(max_seq), ValueKind::Put),
            largest: internal_key(&high, SeqNo(min_seq), ValueKind::Delete),
            min_seq: SeqNo(min_seq),
            max_seq: SeqNo(max_seq),
        });
    }
    let state = ManifestState {
        next_file_number,
        last_sequence: SeqNo(last_sequence),
        log_number,
        closed_log: None,
        next_keyspace_id,
        keyspaces,
        tables,
        blob_files: Vec::new(),
    };
    assert_eq!(state.check(), Ok(()), "the recipe builds valid states only");
    let bytes = manifest::encode(&state);
    assert_eq!(manifest::decode(&bytes, "recipe").ok(), Some(state));

    let position = recipe.u16() as usize % bytes.len().max(1);
    let mut damaged = bytes.clone();
    if recipe.byte().is_multiple_of(2) {
        damaged.truncate(position);
    } else if let Some(b) = damaged.get_mut(position) {
        *b ^= recipe.byte().max(1);
    }
    let err =
        manifest::decode(&damaged, "recipe").expect_err("a damaged manifest must never decode");
    assert!(err.is_corruption());
}
