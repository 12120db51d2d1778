//! Replays mutations of valid snapshot streams through the stream decoder
//! (`snapshot_file::StreamDecoder`), fed in random splits: it never panics,
//! never calls a damaged stream whole, and decodes every unmutated seed
//! whole with the files it was built from.
#![allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code: a failed assumption is a failed test"
)]

use siftdb_raft::snapshot_file::{Event, Header, Meta, StreamDecoder, TableEntry, FRAME_BYTES};

fn seed(files: &[Vec<u8>]) -> Vec<u8> {
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
            crc32: crc32fast_hash(f),
        })
        .collect();
    let header = Header::new(Meta::default(), tables).unwrap();
    let mut out = header.bytes.clone();
    for f in files {
        for frame in f.chunks(FRAME_BYTES as usize) {
            out.extend_from_slice(frame);
            out.extend_from_slice(&crc32fast_hash(frame).to_le_bytes());
        }
    }
    out
}

/// CRC-32 (IEEE), bit by bit: independent of the code under test.
fn crc32fast_hash(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Decodes `bytes` fed in pieces of `split`; the files and whether whole.
fn decode(bytes: &[u8], split: usize) -> (Vec<Vec<u8>>, bool) {
    let mut d = StreamDecoder::new();
    let mut files: Vec<Vec<u8>> = Vec::new();
    for piece in bytes.chunks(split.max(1)) {
        let fed = d.feed(piece, &mut |e| {
            if let Event::Data { file, bytes } = e {
                if files.len() <= file {
                    files.resize(file + 1, Vec::new());
                }
                files[file].extend_from_slice(bytes);
            }
            Ok(())
        });
        if fed.is_err() {
            return (files, false);
        }
    }
    (files, d.header().is_some_and(|(_, whole)| whole))
}

#[test]
fn mutated_snapshot_streams_are_refused_without_panic() {
    let seeds: Vec<Vec<Vec<u8>>> = vec![
        vec![],
        vec![b"one small table".to_vec()],
        vec![vec![5u8; 3000], b"x".to_vec(), (0..=255).collect()],
    ];
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for files in &seeds {
        let bytes = seed(files);
        let (got, whole) = decode(&bytes, 97);
        assert!(whole);
        assert_eq!(&got, files);
    }
    for _ in 0..100_000 {
        let files = &seeds[(next() % seeds.len() as u64) as usize];
        let mut bytes = seed(files);
        let mutations = 1 + next() % 3;
        for _ in 0..mutations {
            match next() % 4 {
                0 if !bytes.is_empty() => {
                    let at = (next() % bytes.len() as u64) as usize;
                    bytes[at] ^= 1 << (next() % 8);
                }
                1 if !bytes.is_empty() => {
                    let at = (next() % bytes.len() as u64) as usize;
                    bytes.truncate(at);
                }
                2 => {
                    let at = (next() % (bytes.len() as u64 + 1)) as usize;
                    bytes.insert(at, next() as u8);
                }
                _ if bytes.len() > 16 => {
                    // A huge length where the header's length is.
                    bytes[12..16].copy_from_slice(&(next() as u32).to_le_bytes());
                }
                _ => {}
            }
        }
        let split = 1 + (next() % 200) as usize;
        let (got, whole) = decode(&bytes, split);
        if whole {
            // Only a mutation that changed nothing decodes whole.
            assert_eq!(bytes, seed(files));
            assert_eq!(&got, files);
        }
    }
}
