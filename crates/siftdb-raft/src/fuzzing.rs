//! Fuzz-target logic for every decoder of bytes a node reads back from
//! its disk or from a peer's snapshot stream, kept in the crate so the
//! stable-Rust replay test (`tests/fuzz_replay_raft.rs`) runs the corpora
//! through the very code the `cargo fuzz` targets in `fuzz/` call.
//!
//! Owns: `raft_decode` (the stored values: log entries, vote, log ids,
//! membership, client sessions, the live-state pointer, and the snapshot
//! header behind a valid checksum, and the key layouts) and
//! `snapshot_stream` (the checking stream decoder, fed raw bytes, valid
//! streams and valid streams with one bit flipped, in any split).
//! Must never: panic unless a decoder broke a promise — it panicked, it
//! accepted a value that does not encode and decode again to itself, a
//! valid stream did not decode whole to its own files, or a stream with a
//! bit flipped was called whole.
#![expect(
    clippy::panic,
    reason = "a fuzz target reports a broken invariant by panicking, which libFuzzer and the replay test catch"
)]

use openraft::{BasicNode, Entry, LogId, StoredMembership, Vote};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::apply::SessionRecord;
use crate::codec::{self, decode, encode};
use crate::pointer::Pointer;
use crate::snapshot_file::{framed_header, Event, Header, Meta, StreamDecoder, TableEntry};
use crate::types::{NodeId, TypeConfig};

/// The first byte chooses what the rest is decoded as.
pub fn raft_decode(data: &[u8]) {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    match choice % 9 {
        0 => round_trip::<Entry<TypeConfig>>(rest),
        1 => round_trip::<Vote<NodeId>>(rest),
        2 => round_trip::<LogId<NodeId>>(rest),
        3 => round_trip::<Option<LogId<NodeId>>>(rest),
        4 => round_trip::<StoredMembership<NodeId, BasicNode>>(rest),
        5 => round_trip::<SessionRecord>(rest),
        6 => round_trip::<Pointer>(rest),
        7 => header(rest),
        _ => keys(rest),
    }
}

/// A value that decodes encodes to bytes that decode to a value encoding
/// to the same bytes (postcard may accept more than one spelling of a
/// value, so the first bytes need not come back).
fn round_trip<T: Serialize + DeserializeOwned>(bytes: &[u8]) {
    let Ok(value) = decode::<T>(bytes, "fuzz") else {
        return;
    };
    let Ok(first) = encode(&value, "fuzz") else {
        panic!("a decoded value does not encode");
    };
    let Ok(again) = decode::<T>(&first, "fuzz") else {
        panic!("an encoded value does not decode");
    };
    match encode(&again, "fuzz") {
        Ok(second) if second == first => {}
        _ => panic!("a value changed across encode and decode"),
    }
}

/// `body` as a snapshot header's body behind a valid checksum and length,
/// and as the whole header as given.
fn header(body: &[u8]) {
    let _ = Header::parse(body);
    let Ok(len) = u32::try_from(body.len()) else {
        return;
    };
    let Ok(parsed) = Header::parse(&framed_header(body, len)) else {
        return;
    };
    let Ok(rebuilt) = Header::new(parsed.meta.clone(), parsed.tables.clone()) else {
        panic!("a parsed header does not encode");
    };
    match Header::parse(&rebuilt.bytes) {
        Ok(again) if again.meta == parsed.meta && again.tables == parsed.tables => {}
        _ => panic!("a parsed header changed across encode and parse"),
    }
}

/// The key layouts: an index from a log key, a generation from a
/// keyspace name, a user key from a data key; each inverts its encoder.
fn keys(bytes: &[u8]) {
    if let Some(index) = codec::log_index(bytes) {
        if codec::log_key(index) != bytes {
            panic!("a log key does not come back from its index");
        }
    }
    if let Some(generation) = std::str::from_utf8(bytes)
        .ok()
        .and_then(codec::state_generation)
    {
        if codec::state_generation(&codec::state_keyspace(generation)) != Some(generation) {
            panic!("a state keyspace name does not name its generation");
        }
    }
    if let Some(user) = codec::user_key(bytes) {
        if codec::data_key(user) != bytes {
            panic!("a data key does not come back from its user key");
        }
    }
}

/// The first byte chooses the split the stream is fed in (1 to 64 bytes)
/// and what the rest is: 0, a raw stream; 1, the files of a valid stream
/// (split at 0xFF bytes); 2 and 3, a position (4 bytes, little endian) and
/// the files of a valid stream that has one bit flipped there.
pub fn snapshot_stream(data: &[u8]) {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let split = usize::from(control >> 2) + 1;
    match control & 3 {
        0 => {
            // A stream called whole is exactly what a sender writes for the
            // header and files it decoded to: nothing skipped or added.
            let (files, header) = decode_stream_header(rest, split);
            if let Some(header) = header {
                let mut rebuilt = header.bytes;
                for f in &files {
                    for frame in f.chunks(crate::snapshot_file::FRAME) {
                        rebuilt.extend_from_slice(frame);
                        rebuilt.extend_from_slice(&crc32fast::hash(frame).to_le_bytes());
                    }
                }
                if rebuilt != rest {
                    panic!("a stream called whole is not the stream of what it decoded to");
                }
            }
        }
        1 => {
            let files = files_of(rest);
            let stream = stream_of(&files);
            let (got, whole) = decode_stream(&stream, split);
            if !whole || got != files {
                panic!("a valid stream did not decode whole to its files");
            }
        }
        _ => {
            let Some((position, body)) = rest.split_first_chunk::<4>() else {
                return;
            };
            let files = files_of(body);
            let mut stream = stream_of(&files);
            let position = u32::from_le_bytes(*position) as usize;
            let Some(len) = std::num::NonZeroUsize::new(stream.len()) else {
                return;
            };
            let at = position % len;
            let Some(byte) = stream.get_mut(at) else {
                return;
            };
            *byte ^= 1 << (position >> 29);
            let (_, whole) = decode_stream(&stream, split);
            // A flipped length field (bytes 12..16) moves where the header's
            // checksum is read from into bytes the input chooses, so a
            // fuzzer can forge it; everywhere else a one-bit change is
            // within what a CRC-32 always detects.
            if whole && !(12..16).contains(&at) {
                panic!("a stream with a bit flipped at byte {at} decoded whole");
            }
        }
    }
}

/// Up to four non-empty files: `bytes` split at 0xFF.
fn files_of(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes
        .split(|&b| b == 0xFF)
        .filter(|f| !f.is_empty())
        .take(4)
        .map(<[u8]>::to_vec)
        .collect()
}

/// The stream a sender writes for `files`: the header, then each file in
/// frames with their checksums (every file here is smaller than a frame).
fn stream_of(files: &[Vec<u8>]) -> Vec<u8> {
    let tables = files
        .iter()
        .map(|f| TableEntry {
            level: 0,
            file_size: f.len() as u64,
            entries: 1,
            smallest: b"a".to_vec(),
            largest: b"b".to_vec(),
            min_seq: 1,
            max_seq: 1,
            crc32: crc32fast::hash(f),
        })
        .collect();
    let Ok(header) = Header::new(Meta::default(), tables) else {
        panic!("a small header does not encode");
    };
    let mut out = header.bytes;
    for f in files {
        out.extend_from_slice(f);
        out.extend_from_slice(&crc32fast::hash(f).to_le_bytes());
    }
    out
}

/// `bytes` fed in pieces of `split`: the files' checked bytes and whether
/// the stream was whole.
fn decode_stream(bytes: &[u8], split: usize) -> (Vec<Vec<u8>>, bool) {
    let (files, header) = decode_stream_header(bytes, split);
    (files, header.is_some())
}

/// `bytes` fed in pieces of `split`: the files' checked bytes and, when the
/// stream was whole, its header.
fn decode_stream_header(bytes: &[u8], split: usize) -> (Vec<Vec<u8>>, Option<Header>) {
    let mut decoder = StreamDecoder::new();
    let mut files: Vec<Vec<u8>> = Vec::new();
    for piece in bytes.chunks(split.max(1)) {
        let fed = decoder.feed(piece, &mut |event| {
            if let Event::Data { file, bytes } = event {
                if files.len() <= file {
                    files.resize(file + 1, Vec::new());
                }
                if let Some(f) = files.get_mut(file) {
                    f.extend_from_slice(bytes);
                }
            }
            Ok(())
        });
        if fed.is_err() {
            return (files, None);
        }
    }
    let header = match decoder.header() {
        Some((header, true)) => Some(header.clone()),
        _ => None,
    };
    (files, header)
}

/// The seed corpus of `raft_decode`: one valid value of each kind, behind
/// its choice byte, a snapshot header body, and keys of each layout.
pub fn raft_decode_seeds() -> Vec<Vec<u8>> {
    let put = crate::types::Request {
        session: Some(crate::types::Session { client: 7, seq: 3 }),
        command: crate::types::Command::Batch(vec![
            crate::types::Op::Put {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
            },
            crate::types::Op::Delete { key: b"x".to_vec() },
            crate::types::Op::DeleteRange {
                start: b"a".to_vec(),
                end: Some(b"c".to_vec()),
            },
        ]),
    };
    let range = crate::types::Request::unsessioned(crate::types::Command::DeleteRange {
        start: b"p".to_vec(),
        end: None,
    });
    let log_id = LogId::new(openraft::CommittedLeaderId::new(3, 1), 42);
    let entry = Entry::<TypeConfig> {
        log_id,
        payload: openraft::EntryPayload::Normal(crate::types::Proposal {
            time_ms: 1_700_000_000_000,
            requests: vec![put, range],
        }),
    };
    let nodes: std::collections::BTreeMap<NodeId, BasicNode> = (1..=3)
        .map(|id| (id, BasicNode::new(format!("127.0.0.1:{}", 7000 + id))))
        .collect();
    let membership = StoredMembership::new(
        Some(log_id),
        openraft::Membership::new(vec![nodes.keys().copied().collect()], nodes),
    );
    let session = SessionRecord {
        seq: 3,
        last_used_ms: 1_700_000_000_000,
        response: crate::types::Response::Applied { ops: 2 },
    };
    let pointer = Pointer {
        generation: 2,
        snapshot: 5,
    };
    let header_body =
        encode(&(Meta::default(), Vec::<TableEntry>::new()), "seed").unwrap_or_default();
    let values = [
        encode(&entry, "seed"),
        encode(&Vote::<NodeId>::new(3, 1), "seed"),
        encode(&log_id, "seed"),
        encode(&Some(log_id), "seed"),
        encode(&membership, "seed"),
        encode(&session, "seed"),
        encode(&pointer, "seed"),
        Ok(header_body),
    ];
    let mut seeds: Vec<Vec<u8>> = values
        .into_iter()
        .zip(0u8..)
        .map(|(value, choice)| {
            let mut seed = vec![choice];
            seed.extend(value.unwrap_or_default());
            seed
        })
        .collect();
    for key in [
        codec::log_key(42).to_vec(),
        codec::state_keyspace(3).into_bytes(),
        codec::data_key(b"user"),
    ] {
        let mut seed = vec![8];
        seed.extend(key);
        seeds.push(seed);
    }
    seeds
}

/// The seed corpus of `snapshot_stream`: a raw valid stream, the files of
/// a valid one, and the same with a bit to flip in a frame.
pub fn snapshot_stream_seeds() -> Vec<Vec<u8>> {
    let files = b"one small table\xFFa second\xFF\x00\x01\x02".to_vec();
    let mut raw = vec![7 << 2];
    raw.extend(stream_of(&files_of(&files)));
    let mut valid = vec![(3 << 2) | 1];
    valid.extend_from_slice(&files);
    let mut flipped = vec![(1 << 2) | 2];
    flipped.extend_from_slice(&(0x2000_0000u32 | 90).to_le_bytes());
    flipped.extend_from_slice(&files);
    vec![raw, valid, flipped]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_seed_decodes_as_its_choice_says() {
        let seeds = raft_decode_seeds();
        let decodes = |seed: &Vec<u8>| -> bool {
            let Some((&choice, rest)) = seed.split_first() else {
                return false;
            };
            match choice {
                0 => decode::<Entry<TypeConfig>>(rest, "t").is_ok(),
                1 => decode::<Vote<NodeId>>(rest, "t").is_ok(),
                2 => decode::<LogId<NodeId>>(rest, "t").is_ok(),
                3 => decode::<Option<LogId<NodeId>>>(rest, "t").is_ok(),
                4 => decode::<StoredMembership<NodeId, BasicNode>>(rest, "t").is_ok(),
                5 => decode::<SessionRecord>(rest, "t").is_ok(),
                6 => decode::<Pointer>(rest, "t").is_ok(),
                7 => u32::try_from(rest.len())
                    .is_ok_and(|len| Header::parse(&framed_header(rest, len)).is_ok()),
                _ => true,
            }
        };
        assert_eq!(seeds.len(), 11);
        assert!(seeds.iter().all(decodes));
    }

    #[test]
    fn a_flipped_bit_is_caught_and_the_check_can_fail() {
        let files = files_of(b"abc\xFFdefg");
        let mut stream = stream_of(&files);
        assert_eq!(decode_stream(&stream, 5), (files.clone(), true));
        for at in 0..stream.len() {
            if (12..16).contains(&at) {
                continue;
            }
            stream[at] ^= 0x10;
            assert!(!decode_stream(&stream, 3).1, "flip at {at} passed");
            stream[at] ^= 0x10;
        }
    }
}
