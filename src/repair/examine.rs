//! Examining a table before repair decides its fate: whether it reads
//! whole, what of it is lost (block by block), which zones of older
//! entries a loss may have shadowed, and what its properties record of its
//! keyspace's settings.
//!
//! Owns: `Repair::examine`, `Repair::zones`, [`Zone`], [`Examined`],
//! [`Candidate`], `recorded_settings`.
//! Must never: write, move or remove a file (it only reads and reports),
//! or call an entry kept that a lost part may have shadowed.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::key::{parse_internal_key, SeqNo};
use crate::manifest::{KeyspaceSettings, TableRecord, DEFAULT_KEYSPACE_ID};
use crate::options::Options;
use crate::prefix::PrefixExtractor;
use crate::range_tombstone::FragmentedTombstones;
use crate::table::{
    Salvaged, SalvagedTombstones, Table, TableKeyspace, TableProperties, TableSalvager,
};

use super::report::LostRange;
use super::{user, Repair};

/// A key range whose entries older than `max_seq` may have been shadowed by
/// something lost.
#[derive(Clone)]
pub(super) struct Zone {
    /// The keyspace of the damaged table: the loss shadows only its keys.
    pub(super) keyspace: u32,
    pub(super) lo: Option<Vec<u8>>,
    pub(super) hi: Option<Vec<u8>>,
    pub(super) max_seq: SeqNo,
    /// The damaged table, when its filter was read intact: a key its
    /// filter rules out was in none of its blocks (a filter has no false
    /// negatives), so the loss shadowed nothing of that key.
    pub(super) table: Option<Table>,
}

impl Zone {
    pub(super) fn shadows(&self, user_key: &[u8], seq: SeqNo) -> bool {
        seq < self.max_seq
            && self.lo.as_deref().is_none_or(|lo| lo <= user_key)
            && self.hi.as_deref().is_none_or(|hi| user_key <= hi)
            && self
                .table
                .as_ref()
                .is_none_or(|t| t.may_contain_key(user_key))
    }
}

/// True when some zone shadows `internal_key`.
pub(super) fn shadowed(zones: &[Zone], keyspace: u32, internal_key: &[u8]) -> bool {
    match parse_internal_key(internal_key) {
        Ok(parsed) => zones
            .iter()
            .any(|z| z.keyspace == keyspace && z.shadows(parsed.user_key, parsed.seq)),
        Err(_) => true,
    }
}

/// A table to consider.
pub(super) struct Candidate {
    pub(super) name: String,
    pub(super) record: Option<TableRecord>,
}

/// A table after its check.
pub(super) struct Examined {
    pub(super) candidate: Candidate,
    /// Why it cannot be kept as it is (empty: sound).
    pub(super) problems: Vec<String>,
    pub(super) lost: Vec<LostRange>,
    /// Sequence range and user-key range of its readable data (from its
    /// properties, the manifest, or what was read).
    pub(super) min_seq: SeqNo,
    pub(super) user_range: Option<(Vec<u8>, Vec<u8>)>,
    /// Largest sequence number it holds, when known.
    pub(super) max_seq: Option<SeqNo>,
    /// The table, when its footer, index and filter are intact.
    pub(super) filtered: Option<Table>,
    /// Its keyspace: the manifest's word, else its properties' (the
    /// default keyspace when neither says).
    pub(super) keyspace: TableKeyspace,
    /// What its properties record of its keyspace's settings (when they
    /// could be read).
    pub(super) recorded: Option<KeyspaceSettings>,
    /// Its range tombstones, read from the table or found past its damage
    /// (when they cannot be told, its whole range is a lost range).
    pub(super) range_tombstones: Option<FragmentedTombstones>,
}

/// What a keyspace's settings were, as far as its newest readable table
/// records them (the manifest that stored them is lost): see
/// [`recorded_settings`].
pub(super) fn settings_from_tables(examined: &[Examined]) -> BTreeMap<u32, KeyspaceSettings> {
    let mut newest: BTreeMap<u32, (SeqNo, &KeyspaceSettings)> = BTreeMap::new();
    for e in examined {
        let (Some(recorded), Some(seq)) = (&e.recorded, e.max_seq) else {
            continue;
        };
        let entry = newest.entry(e.keyspace.id).or_insert((seq, recorded));
        if seq > entry.0 {
            *entry = (seq, recorded);
        }
    }
    newest
        .into_iter()
        .map(|(id, (_, recorded))| (id, recorded.clone()))
        .collect()
}

/// What a table's properties record of the settings it was built with,
/// where it differs from what the database's options `opts` give (a value
/// equal to theirs is taken as inherited, and stays so): a fixed prefix
/// extractor (a custom one is given again at the next open, so none is
/// stored and the keyspace takes the database's until then) with
/// whole-key filtering beside it, and range filter bits. The rest (block
/// size, compression, filter policy, memtable bytes) is not recorded: a
/// rebuilt keyspace takes the database's options for them until
/// `keyspace_with` gives them again.
pub(super) fn recorded_settings(properties: &TableProperties, opts: &Options) -> KeyspaceSettings {
    let mut settings = KeyspaceSettings::default();
    if let Some(prefix) = &properties.prefix_filter {
        if let Some(fixed) = PrefixExtractor::builtin(&prefix.extractor) {
            if opts.prefix_extractor.as_ref() != Some(&fixed) {
                settings.prefix_len = fixed.fixed_len().and_then(|len| u32::try_from(len).ok());
            }
            if opts.whole_key_filtering != prefix.whole_keys {
                settings.whole_key_filtering = Some(prefix.whole_keys);
            }
        }
    }
    if let Some(range) = &properties.range_filter {
        // Range bits no open would accept (a table written by a bug or by
        // hand) are dropped on their own; the extractor still counts.
        let alone = KeyspaceSettings {
            range_filter_bits_per_key: Some(range.bits_per_key),
            ..KeyspaceSettings::default()
        };
        if opts.range_filter_bits_per_key != range.bits_per_key && alone.check().is_ok() {
            settings.range_filter_bits_per_key = Some(range.bits_per_key);
        }
    }
    // The keyspace must open after its repair: a whole that an open would
    // refuse is not stored.
    if settings.check().is_err() {
        return KeyspaceSettings::default();
    }
    settings
}

impl Repair<'_> {
    /// Checks a table: sound, or what of it is lost.
    pub(super) fn examine(&mut self, candidate: Candidate) -> Result<Examined> {
        let record = candidate.record.clone();
        let record_range = record
            .as_ref()
            .map(|r| (user(&r.smallest), user(&r.largest)));
        let mut examined = Examined {
            problems: Vec::new(),
            lost: Vec::new(),
            min_seq: record.as_ref().map_or(SeqNo(0), |r| r.min_seq),
            user_range: record_range.clone(),
            max_seq: record.as_ref().map(|r| r.max_seq),
            filtered: None,
            recorded: None,
            keyspace: TableKeyspace {
                id: record.as_ref().map_or(DEFAULT_KEYSPACE_ID, |r| r.keyspace),
                name: String::new(),
            },
            range_tombstones: None,
            candidate,
        };
        let name = examined.candidate.name.clone();
        let path = self.path(&name);
        if !self.fs.exists(&path) {
            let reason = "named by the manifest but missing".to_string();
            examined.problems.push(reason.clone());
            examined.lost.push(LostRange {
                file: name,
                offset: None,
                first_key: record_range.as_ref().map(|r| r.0.clone()),
                last_key: record_range.map(|r| r.1),
                max_sequence: examined.max_seq.map(|s| s.0),
                reason,
            });
            return Ok(examined);
        }
        let mut salvager = TableSalvager::open(&self.context, &path)?;
        // The bounds of what cannot be read, when the block itself does not say.
        let (mut lo, mut hi) = (
            record_range.as_ref().map(|r| r.0.clone()),
            record_range.as_ref().map(|r| r.1.clone()),
        );
        match salvager.table() {
            Some(table) => {
                let p = table.properties();
                self.add_blob_refs(&name, &p.blob_files);
                examined.recorded = Some(recorded_settings(p, self.opts));
                if record.is_none() {
                    if let Some(keyspace) = &p.keyspace {
                        examined.keyspace = keyspace.clone();
                    }
                }
                examined.min_seq = p.min_seq;
                examined.max_seq = Some(examined.max_seq.map_or(p.max_seq, |m| m.max(p.max_seq)));
                lo = lo.or_else(|| Some(user(&p.smallest)));
                hi = hi.or_else(|| Some(user(&p.largest)));
                if examined.user_range.is_none() {
                    examined.user_range = Some((user(&p.smallest), user(&p.largest)));
                }
                if let Some(r) = &record {
                    if r.file_size != table.file_size() {
                        examined.problems.push(format!(
                            "{} bytes, the manifest says {}",
                            table.file_size(),
                            r.file_size
                        ));
                    }
                }
                examined.problems.extend(
                    table
                        .verify()
                        .into_iter()
                        .map(|p| format!("{} block at offset {}: {}", p.block, p.offset, p.detail)),
                );
                examined.range_tombstones = table.range_tombstones().map(|l| (**l).clone());
                if examined.problems.is_empty() {
                    return Ok(examined);
                }
                if table.filter_view().is_some() {
                    examined.filtered = Some(table.clone());
                }
            }
            None => examined.problems.push(format!(
                "cannot be opened: {}",
                salvager.open_error().unwrap_or("unknown")
            )),
        }
        // Damaged: walk it to learn what is lost and the range of what is not.
        let mut read_range: Option<(Vec<u8>, Vec<u8>)> = None;
        while let Some(step) = salvager.next_block() {
            match step {
                Salvaged::Block(block) => {
                    self.add_blob_pointers(&name, &block.entries);
                    if let (Some((first, _)), Some((last, _))) =
                        (block.entries.first(), block.entries.last())
                    {
                        let (first, last) = (user(first), user(last));
                        read_range = Some(match read_range.take() {
                            Some((a, _)) => (a, last),
                            None => (first, last),
                        });
                    }
                }
                Salvaged::Lost(lost) => examined.lost.push(LostRange {
                    file: name.clone(),
                    offset: Some(lost.offset),
                    first_key: lost.after.as_deref().map(user).or_else(|| lo.clone()),
                    last_key: lost.through.as_deref().map(user).or_else(|| hi.clone()),
                    max_sequence: examined.max_seq.map(|s| s.0),
                    reason: lost.reason,
                }),
            }
        }
        if examined.user_range.is_none() {
            examined.user_range = read_range;
        }
        match salvager.range_tombstones() {
            SalvagedTombstones::None => {}
            SalvagedTombstones::Found(list) => examined.range_tombstones = Some(list),
            // A range tombstone lost may have deleted older keys anywhere
            // in the table's range: they are treated as a lost range's.
            SalvagedTombstones::Unknown(why) => examined.lost.push(LostRange {
                file: name,
                offset: None,
                first_key: lo,
                last_key: hi,
                max_sequence: examined.max_seq.map(|s| s.0),
                reason: format!("its range tombstones cannot be read: {why}"),
            }),
        }
        Ok(examined)
    }

    /// The zones of every lost range whose sequence numbers are known; the
    /// others are reported as uncertain.
    pub(super) fn zones(&mut self, examined: &[Examined]) -> Vec<Zone> {
        let mut zones = Vec::new();
        let lost = examined.iter().flat_map(|e| {
            e.lost
                .iter()
                .map(move |range| (range, &e.filtered, e.keyspace.id))
        });
        for (range, filtered, keyspace) in lost {
            match range.max_sequence {
                Some(max) => zones.push(Zone {
                    keyspace,
                    lo: range.first_key.clone(),
                    hi: range.last_key.clone(),
                    max_seq: SeqNo(max),
                    table: filtered.clone(),
                }),
                None => self.report.uncertain.push(format!(
                    "{}: data lost at {} whose keys and sequence numbers are unknown (no \
                     manifest names the table and its properties are unreadable): a key it \
                     deleted or overwrote may show an older value",
                    range.file,
                    range
                        .offset
                        .map_or("an unknown offset".into(), |o| format!("offset {o}"))
                )),
            }
        }
        zones
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::properties::{PrefixFilterInfo, RangeFilterInfo};

    /// fixed extractor with its whole-key choice and range filter bits;
    /// nothing for a custom extractor, nothing the database's options give
    /// already, and nothing at all when a value would not pass an open's
    /// checks.
    #[test]
    fn recorded_settings_keep_what_an_open_accepts() {
        let defaults = Options::default();
        let built_for = |extractor: &str, range_bits: f64, opts: &Options| {
            let mut properties = TableProperties::placeholder();
            properties.prefix_filter = Some(PrefixFilterInfo {
                extractor: extractor.to_owned(),
                whole_keys: false,
                prefixes: 1,
            });
            properties.range_filter = Some(RangeFilterInfo {
                handle: crate::table::BlockHandle { offset: 0, len: 0 },
                bits_per_key: range_bits,
            });
            recorded_settings(&properties, opts)
        };
        let built = |extractor: &str, range_bits: f64| built_for(extractor, range_bits, &defaults);
        let fixed = built("siftdb.fixed:6", 16.0);
        assert_eq!(fixed.prefix_len, Some(6));
        assert_eq!(fixed.whole_key_filtering, Some(false));
        assert_eq!(fixed.range_filter_bits_per_key, Some(16.0));
        let custom = built("my-extractor", 12.0);
        assert_eq!(custom.prefix_len, None);
        assert_eq!(custom.whole_key_filtering, None);
        assert_eq!(custom.range_filter_bits_per_key, Some(12.0));
        // Range bits an open refuses are dropped, and only they.
        for bad in [f64::NAN, 1000.0, -1.0] {
            let kept = built("siftdb.fixed:6", bad);
            assert_eq!(kept.range_filter_bits_per_key, None, "{bad}");
            assert_eq!(kept.prefix_len, Some(6), "{bad}");
            assert_eq!(kept.whole_key_filtering, Some(false), "{bad}");
            assert!(kept.check().is_ok(), "{bad}");
        }
        assert_eq!(
            recorded_settings(&TableProperties::placeholder(), &defaults),
            KeyspaceSettings::default()
        );
        // The database's own extractor, whole-key choice and range bits
        // stay inherited.
        let database = Options::default()
            .prefix_extractor(PrefixExtractor::fixed(6).unwrap())
            .whole_key_filtering(false)
            .range_filter_bits_per_key(16.0);
        assert_eq!(
            built_for("siftdb.fixed:6", 16.0, &database),
            KeyspaceSettings::default()
        );
        let other = built_for("siftdb.fixed:3", 12.0, &database);
        assert_eq!(other.prefix_len, Some(3));
        assert_eq!(other.whole_key_filtering, None);
        assert_eq!(other.range_filter_bits_per_key, Some(12.0));
    }
}
