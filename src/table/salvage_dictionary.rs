//! The zstd dictionary of a table whose footer or properties block is
//! damaged: found by walking its blocks from the start (each one's trailer
//! checksum covers its offset, so only a real block verifies where it is
//! looked for) to the dictionary block (type 8) after the data blocks.
//!
//! Owns: that walk, for `TableSalvager` when the properties cannot name
//! the dictionary.
//! Must never: decode a data block (the walk only verifies checksums), or
//! hand out a dictionary whose block did not verify and parse.

use crate::table::block_scan::{align_up, find_block};
use crate::table::format::{BlockKind, FILTER_ALIGN, PAGE, TRAILER_LEN};
use crate::table::zstd_codec::ZstdDictionary;

/// Every block kind a table holds before its footer.
const KINDS: [BlockKind; 7] = [
    BlockKind::Data,
    BlockKind::Filter,
    BlockKind::RangeFilter,
    BlockKind::RangeTombstones,
    BlockKind::CompressionDictionary,
    BlockKind::Index,
    BlockKind::Properties,
];

/// The table's dictionary: the first block of type 8 in the chain of
/// blocks that verify from offset 0 (skipping the zero padding before a
/// page- or filter-aligned block). `None` when the chain breaks before
/// one (a damaged block: the blocks after it are not looked for) or ends
/// at the index without one.
pub(crate) fn dictionary_by_walk(bytes: &[u8]) -> Option<ZstdDictionary> {
    let mut at = 0u64;
    loop {
        let (begin, end) = next_block(bytes, at)?;
        match bytes.get(end).copied().and_then(BlockKind::from_u8) {
            Some(BlockKind::CompressionDictionary) => {
                return ZstdDictionary::parse(bytes.get(begin..end)?).ok();
            }
            Some(BlockKind::Index | BlockKind::Properties) | None => return None,
            Some(_) => at = u64::try_from(end.checked_add(TRAILER_LEN)?).ok()?,
        }
    }
}

/// The block starting at `at`, or after the zeros up to the next filter
/// or page boundary: its start and the offset of its trailer.
fn next_block(bytes: &[u8], at: u64) -> Option<(usize, usize)> {
    let zeros_to = |boundary: u64| {
        let (from, to) = (usize::try_from(at).ok()?, usize::try_from(boundary).ok()?);
        bytes
            .get(from..to)
            .filter(|gap| !gap.is_empty() && gap.iter().all(|&b| b == 0))
            .map(|_| boundary)
    };
    // A boundary after zeros first (the zeros are usually padding), then
    // `at` itself; each try stops at the first trailer that verifies.
    let candidates = [
        zeros_to(align_up(at, PAGE)),
        zeros_to(align_up(at, FILTER_ALIGN)),
        Some(at),
    ];
    candidates.into_iter().flatten().find_map(|begin| {
        let begin_at = usize::try_from(begin).ok()?;
        let end = find_block(bytes, begin_at, &KINDS, |_, _| true)?;
        Some((begin_at, end))
    })
}

#[cfg(test)]
mod tests {
    use crate::fs::OsFileSystem;
    use crate::key::{internal_key, SeqNo, ValueKind};
    use crate::options::Compression;
    use crate::table::context::ReadContext;
    use crate::table::reader::Table;
    use crate::table::salvage::{Salvaged, TableSalvager};
    use crate::table::{TableBuilder, TableOptions};

    /// A table whose data blocks are zstd-coded with its dictionary, its
    /// footer damaged: the salvage finds the dictionary by the walk and
    /// reads every key; with the dictionary block damaged too, the blocks
    /// coded with it are reported lost, never misread.
    #[test]
    fn a_damaged_footer_keeps_the_dictionary_coded_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.sst");
        let options = TableOptions {
            block_size: 256,
            compression: Compression::Zstd { level: 3 },
            zstd_dictionary_bytes: 1024,
            ..TableOptions::default()
        };
        let mut b = TableBuilder::create(&OsFileSystem, &path, &options).unwrap();
        let mut keys = Vec::new();
        for i in 0..2000u32 {
            let key = internal_key(format!("key{i:05}").as_bytes(), SeqNo(1), ValueKind::Put);
            let value = format!(
                "field1=value {} field2={}",
                i % 17,
                "word ".repeat(i as usize % 9)
            );
            b.add(&key, value.as_bytes()).unwrap();
            keys.push(key);
        }
        b.finish().unwrap();
        let table = Table::open_path(&path).unwrap();
        let dictionary = table.properties().compression_dictionary.unwrap();
        drop(table);

        let salvage_all = |path: &std::path::Path| {
            let mut s = TableSalvager::open(&ReadContext::standalone(), path).unwrap();
            let (mut got, mut lost) = (Vec::new(), 0usize);
            while let Some(step) = s.next_block() {
                match step {
                    Salvaged::Block(b) => {
                        got.extend(b.entries.into_iter().map(|(k, _)| k.to_vec()))
                    }
                    Salvaged::Lost(_) => lost += 1,
                }
            }
            (got, lost, s.open_error().is_some())
        };
        let mut bytes = std::fs::read(&path).unwrap();
        let len = bytes.len();
        bytes[len - 10] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let (got, lost, open_failed) = salvage_all(&path);
        assert!(open_failed);
        assert_eq!(lost, 0);
        assert_eq!(got, keys);

        // The dictionary block damaged as well: its blocks are lost.
        bytes[usize::try_from(dictionary.offset).unwrap() + 5] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let (got, lost, _) = salvage_all(&path);
        assert!(lost > 0 && got.len() < keys.len());
        assert!(got.iter().all(|k| keys.contains(k)));
    }
}
