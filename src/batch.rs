//! The write batch: a group of puts, deletes and range deletes applied
//! atomically, and its encoding as the payload of one write-ahead-log
//! record.
//!
//! Owns: [`WriteBatch`] (the public type applications fill), the batch
//! payload layout documented in `docs/format.md` ("Write-ahead log", batch
//! payload), and [`decode_record`], its panic-free decoder.
//! Must never: accept a payload it did not fully understand (unknown kinds,
//! trailing bytes, sequence numbers past [`SeqNo::MAX`] are `Corruption`),
//! panic on untrusted bytes, or allocate from a count it has not bounded by
//! the bytes that remain.
//!
//! ```
//! use siftdb::WriteBatch;
//! use siftdb::internals::batch::{decode_record, OpKind, RawBatch};
//! use siftdb::internals::key::SeqNo;
//!
//! let mut batch = WriteBatch::new();
//! batch.put(b"apple", b"red");
//! batch.delete(b"pear");
//! let payload = batch.encode_record(SeqNo(7));
//! let decoded = decode_record(&payload)?;
//! assert_eq!(decoded.first_seq, SeqNo(7));
//! let ops: Vec<_> = decoded.ops_with_seq().map(|(seq, op)| (seq, op.kind, op.key)).collect();
//! assert_eq!(ops, [(SeqNo(7), OpKind::Put, &b"apple"[..]), (SeqNo(8), OpKind::Delete, &b"pear"[..])]);
//! # Ok::<(), siftdb::Error>(())
//! ```

use std::ops::RangeBounds;

use crate::codec::{put_varint, varint_len, ByteReader};
use crate::error::{Error, Result};
use crate::key::{SeqNo, MAX_KEY_LEN, MAX_VALUE_LEN};
use crate::range_tombstone::normalize_range;

/// The most bytes before the first operation in a batch payload: the first
/// sequence number (a varint of at most 56 bits: 8 bytes) and the operation
/// count (a varint of at most 32 bits: 5 bytes).
pub const MAX_BATCH_HEADER_LEN: usize = 13;
/// The largest batch payload [`WriteBatch::check_limits`] lets through: it
/// must fit the write-ahead log's u32 record length.
pub const MAX_BATCH_PAYLOAD: usize = u32::MAX as usize;

const WHAT: &str = "write batch";

/// The fewest bytes one encoded operation can take: a delete of an empty
/// key (its kind and a length).
const MIN_OP_LEN: usize = 2;

/// What one operation of a batch does; its byte in the payload (the low 7
/// bits of the kind byte; bit 7 is `KEYSPACE_FLAG`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum OpKind {
    /// Delete one key.
    Delete = 0,
    /// Set one key's value.
    Put = 1,
    /// Delete every key in `[key, value)` (an empty `value`: no upper
    /// bound).
    DeleteRange = 2,
    /// Add a merge operand (`value`) to one key's value (see
    /// `Options::merge_operator`).
    Merge = 3,
}

impl OpKind {
    /// Decodes a kind byte.
    pub fn from_u8(byte: u8) -> Option<OpKind> {
        match byte {
            0 => Some(OpKind::Delete),
            1 => Some(OpKind::Put),
            2 => Some(OpKind::DeleteRange),
            3 => Some(OpKind::Merge),
            _ => None,
        }
    }
}

/// Set in an operation's kind byte when a keyspace id (a varint of at most
/// 32 bits, never 0) follows it; without it the operation is the default
/// keyspace's, which so pays no byte for keyspaces.
pub const KEYSPACE_FLAG: u8 = 0x80;

/// One operation of a batch, borrowed from the batch's (or a log record's) bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOp<'a> {
    /// The keyspace's id (0: the default keyspace).
    pub keyspace: u32,
    /// Put, delete or range delete.
    pub kind: OpKind,
    /// The user key; a range delete's start (included).
    pub key: &'a [u8],
    /// The value; empty for a delete; a range delete's end (excluded),
    /// empty for a range without an upper bound (an empty end would be an
    /// empty range, which is never written).
    pub value: &'a [u8],
}

impl BatchOp<'_> {
    /// A range delete's end: `None` for no upper bound (and for other kinds).
    pub fn range_end(&self) -> Option<&[u8]> {
        (self.kind == OpKind::DeleteRange && !self.value.is_empty()).then_some(self.value)
    }
}

/// The keyspace an operation of a [`WriteBatch`] goes to, by id: what
/// [`WriteBatch::put_in`] and the other `_in` methods take. A `&Keyspace`
/// converts into it, so `batch.put_in(&users, key, value)` reads as it says.
///
/// Defined with the batch (below the database) so that the batch's encoding
/// needs nothing of the keyspaces but their ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyspaceId(u32);

impl KeyspaceId {
    /// The keyspace with id `id` (the default keyspace's is 0).
    pub(crate) fn new(id: u32) -> KeyspaceId {
        KeyspaceId(id)
    }

    /// The id as the log record writes it.
    pub(crate) fn get(self) -> u32 {
        self.0
    }
}

/// Puts, deletes and range deletes that the database applies atomically, in
/// insertion order, with consecutive sequence numbers.
///
/// The operations are stored already encoded, in one buffer, exactly as they
/// appear in the log record, so logging a batch is one copy.
///
/// ```
/// use siftdb::{Db, WriteBatch};
///
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path())?;
/// db.put(b"account/a", b"100")?;
/// // Move the balance: both writes land, or (after a crash) neither.
/// let mut batch = WriteBatch::new();
/// batch.put(b"account/a", b"0");
/// batch.put(b"account/b", b"100");
/// assert_eq!(batch.len(), 2);
/// db.write(batch)?;
/// assert_eq!(db.get(b"account/b")?.as_deref(), Some(&b"100"[..]));
/// # Ok::<(), siftdb::Error>(())
/// ```
///
/// `Send + Sync` (checked by `tests/api_traits.rs`): a plain value,
/// built on one thread and written from another.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    /// The encoded operations (the record payload after its header).
    ops: Vec<u8>,
    count: usize,
    largest_key: usize,
    largest_value: usize,
    /// Why a range added was refused (reversed, or a bound over the key
    /// limit): [`WriteBatch::check_limits`], and so `Db::write`, report it.
    invalid_range: Option<String>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds "set `key` to `value`" (in the default keyspace).
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.put_to(0, key.as_ref(), value.as_ref());
    }

    /// Adds "set `key` to `value`" in `keyspace`.
    pub fn put_in(
        &mut self,
        keyspace: impl Into<KeyspaceId>,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) {
        self.put_to(keyspace.into().get(), key.as_ref(), value.as_ref());
    }

    /// Adds "delete `key`" in `keyspace`.
    pub fn delete_in(&mut self, keyspace: impl Into<KeyspaceId>, key: impl AsRef<[u8]>) {
        self.delete_from(keyspace.into().get(), key.as_ref());
    }

    /// Adds "merge `operand` into `key`'s value" (in the default keyspace):
    /// the value becomes the keyspace's merge operator's result over the
    /// value before and the operands since (see
    /// [`crate::Options::merge_operator`]; a write of a batch with a merge
    /// into a keyspace without one is refused with `InvalidArgument`).
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) {
        self.merge_to(0, key.as_ref(), operand.as_ref());
    }

    /// [`WriteBatch::merge`] in `keyspace`.
    pub fn merge_in(
        &mut self,
        keyspace: impl Into<KeyspaceId>,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
    ) {
        self.merge_to(keyspace.into().get(), key.as_ref(), operand.as_ref());
    }

    /// Appends one operation: its kind byte (and keyspace id), `key` and,
    /// for a put or a range delete, `second` (the value, the range's end),
    /// each after its length.
    fn push_op(&mut self, kind: OpKind, keyspace: u32, key: &[u8], second: Option<&[u8]>) {
        let piece = |bytes: &[u8]| varint_len(bytes.len() as u64) + bytes.len();
        // One growth for the whole operation, not one per piece.
        self.ops.reserve(6 + piece(key) + second.map_or(0, piece));
        self.push_kind(kind, keyspace);
        for bytes in std::iter::once(key).chain(second) {
            put_varint(&mut self.ops, bytes.len() as u64);
            self.ops.extend_from_slice(bytes);
        }
        self.count += 1;
    }

    /// The kind byte of an operation of `kind` in keyspace `keyspace`, and
    /// the keyspace id after it.
    fn push_kind(&mut self, kind: OpKind, keyspace: u32) {
        if keyspace == 0 {
            self.ops.push(kind as u8);
        } else {
            self.ops.push(kind as u8 | KEYSPACE_FLAG);
            put_varint(&mut self.ops, u64::from(keyspace));
        }
    }

    /// Adds "delete `key`" (in the default keyspace).
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.delete_from(0, key.as_ref());
    }

    /// Adds "delete every key in `range`" (any [`RangeBounds`]: `a..b`,
    /// `a..=b`, `a..`, `..b`, `..`, or a pair of [`std::ops::Bound`]s). A
    /// range holding no key (`a..a`) adds nothing. A reversed range (`b..a`)
    /// or a bound longer than [`MAX_KEY_LEN`] adds nothing and makes the
    /// batch fail [`WriteBatch::check_limits`] (so `Db::write` refuses it
    /// with `InvalidArgument`).
    ///
    /// ```
    /// use siftdb::{Db, WriteBatch};
    ///
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path())?;
    /// db.put("log/0001", "a")?;
    /// db.put("log/0002", "b")?;
    /// let mut batch = WriteBatch::new();
    /// batch.delete_range("log/0000".."log/0002");
    /// batch.put("log/0003", "c");
    /// db.write(batch)?;
    /// assert_eq!(db.get("log/0001")?, None);
    /// assert_eq!(db.iter().count(), 2);
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn delete_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&mut self, range: R) {
        self.delete_range_to(0, &range);
    }

    /// [`WriteBatch::delete_range`] in keyspace `keyspace` (by id).
    fn delete_range_to<K: AsRef<[u8]>, R: RangeBounds<K>>(&mut self, keyspace: u32, range: &R) {
        match normalize_range(range) {
            Ok(Some((start, end))) => {
                self.push_range_delete(keyspace, &start, end.as_deref());
            }
            Ok(None) => {}
            Err(e) => {
                self.invalid_range.get_or_insert_with(|| e.detail());
            }
        }
    }

    /// Adds "delete every key in `range`" in `keyspace` (see
    /// [`WriteBatch::delete_range`]).
    pub fn delete_range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &mut self,
        keyspace: impl Into<KeyspaceId>,
        range: R,
    ) {
        self.delete_range_to(keyspace.into().get(), &range);
    }

    /// Appends every operation of `other`, after this batch's own (for group commit).
    pub fn append(&mut self, other: &WriteBatch) {
        self.ops.extend_from_slice(&other.ops);
        self.count += other.count;
        self.largest_key = self.largest_key.max(other.largest_key);
        self.largest_value = self.largest_value.max(other.largest_value);
        if self.invalid_range.is_none() {
            self.invalid_range.clone_from(&other.invalid_range);
        }
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Removes every operation, keeping the buffer for reuse.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.count = 0;
        self.largest_key = 0;
        self.largest_value = 0;
        self.invalid_range = None;
    }

    /// The size of the batch's log record payload, in bytes, at most (its
    /// header's varints are shorter at small sequence numbers).
    pub fn approximate_bytes(&self) -> usize {
        MAX_BATCH_HEADER_LEN + self.ops.len()
    }

    /// `InvalidArgument` unless every key is at most [`MAX_KEY_LEN`], every
    /// value at most [`MAX_VALUE_LEN`], every range added was valid, and the
    /// payload fits one log record.
    pub fn check_limits(&self) -> Result<()> {
        self.check_ranges()?;
        if self.largest_key > MAX_KEY_LEN {
            return Err(Error::invalid(format!(
                "key longer than the {MAX_KEY_LEN}-byte limit"
            )));
        }
        if self.largest_value > MAX_VALUE_LEN {
            return Err(Error::invalid(format!(
                "value longer than the {MAX_VALUE_LEN}-byte limit"
            )));
        }
        if self.approximate_bytes() > MAX_BATCH_PAYLOAD {
            return Err(Error::invalid(format!(
                "batch of {} bytes exceeds the {MAX_BATCH_PAYLOAD}-byte record limit",
                self.approximate_bytes()
            )));
        }
        Ok(())
    }

    /// `InvalidArgument` when a range added was refused (reversed, or a
    /// bound longer than [`MAX_KEY_LEN`]).
    pub fn check_ranges(&self) -> Result<()> {
        match &self.invalid_range {
            Some(reason) => Err(Error::invalid(reason.clone())),
            None => Ok(()),
        }
    }
}

/// The raw side of a batch, for the project's own tools and tests
/// (unstable, reached through `siftdb::internals::batch`): operations by
/// keyspace id, and the batch's log record payload. An application names
/// keyspaces by handle ([`WriteBatch::put_in`]) and never sees sequence
/// numbers, so none of this is on [`WriteBatch`] itself.
pub trait RawBatch {
    /// Adds "set `key` to `value`" in keyspace `keyspace` (by id).
    fn put_to(&mut self, keyspace: u32, key: &[u8], value: &[u8]);
    /// Adds "delete `key`" in keyspace `keyspace` (by id).
    fn delete_from(&mut self, keyspace: u32, key: &[u8]);
    /// Adds "merge `operand` into `key`" in keyspace `keyspace` (by id).
    fn merge_to(&mut self, keyspace: u32, key: &[u8], operand: &[u8]);
    /// Appends a range delete of `[start, end)` (`end: None`: unbounded)
    /// in keyspace `keyspace` (by id), already in half-open form and not
    /// empty.
    fn push_range_delete(&mut self, keyspace: u32, start: &[u8], end: Option<&[u8]>);
    /// The log record payload for this batch when its first operation gets
    /// sequence number `first_seq` (operation i gets `first_seq + i`).
    ///
    /// The caller checks [`WriteBatch::check_limits`] first; the encoding of a
    /// batch that fails it is not guaranteed to decode.
    fn encode_record(&self, first_seq: SeqNo) -> Vec<u8>;
    /// Like [`RawBatch::encode_record`], appending to `out`.
    fn encode_record_into(&self, first_seq: SeqNo, out: &mut Vec<u8>);
    /// The operations, in insertion order, with their keyspaces by id.
    fn iter(&self) -> impl Iterator<Item = BatchOp<'_>> + '_;
}

impl RawBatch for WriteBatch {
    fn iter(&self) -> impl Iterator<Item = BatchOp<'_>> + '_ {
        OpIter {
            reader: ByteReader::new(&self.ops, WHAT),
            left: self.count,
        }
    }

    fn put_to(&mut self, keyspace: u32, key: &[u8], value: &[u8]) {
        self.push_op(OpKind::Put, keyspace, key, Some(value));
        self.largest_key = self.largest_key.max(key.len());
        self.largest_value = self.largest_value.max(value.len());
    }

    fn delete_from(&mut self, keyspace: u32, key: &[u8]) {
        self.push_op(OpKind::Delete, keyspace, key, None);
        self.largest_key = self.largest_key.max(key.len());
    }

    fn merge_to(&mut self, keyspace: u32, key: &[u8], operand: &[u8]) {
        self.push_op(OpKind::Merge, keyspace, key, Some(operand));
        self.largest_key = self.largest_key.max(key.len());
        self.largest_value = self.largest_value.max(operand.len());
    }

    fn push_range_delete(&mut self, keyspace: u32, start: &[u8], end: Option<&[u8]>) {
        let end = end.unwrap_or_default();
        self.push_op(OpKind::DeleteRange, keyspace, start, Some(end));
        self.largest_key = self.largest_key.max(start.len()).max(end.len());
    }

    fn encode_record(&self, first_seq: SeqNo) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.approximate_bytes());
        self.encode_record_into(first_seq, &mut out);
        out
    }

    fn encode_record_into(&self, first_seq: SeqNo, out: &mut Vec<u8>) {
        encode_group_into(first_seq, std::iter::once(self), out);
    }
}

/// Appends to `out` the log record payload of `batches` applied as one
/// batch, in order, the first operation getting `first_seq`: what group
/// commit logs, without merging the batches first. Their payloads together
/// (one header) must pass [`WriteBatch::check_limits`]'s size limit for the
/// record to decode.
pub fn encode_group_into<'a>(
    first_seq: SeqNo,
    batches: impl Iterator<Item = &'a WriteBatch> + Clone,
    out: &mut Vec<u8>,
) {
    let count: usize = batches.clone().map(|b| b.count).sum();
    put_varint(out, first_seq.0);
    put_varint(out, count as u64);
    for batch in batches {
        out.extend_from_slice(&batch.ops);
    }
}

impl<'a> FromIterator<BatchOp<'a>> for WriteBatch {
    fn from_iter<I: IntoIterator<Item = BatchOp<'a>>>(ops: I) -> WriteBatch {
        let mut batch = WriteBatch::new();
        for op in ops {
            match op.kind {
                OpKind::Put => batch.put_to(op.keyspace, op.key, op.value),
                OpKind::Merge => batch.merge_to(op.keyspace, op.key, op.value),
                OpKind::Delete => batch.delete_from(op.keyspace, op.key),
                OpKind::DeleteRange => {
                    batch.push_range_delete(op.keyspace, op.key, op.range_end());
                }
            }
        }
        batch
    }
}

struct OpIter<'a> {
    reader: ByteReader<'a>,
    left: usize,
}

impl<'a> Iterator for OpIter<'a> {
    type Item = BatchOp<'a>;

    fn next(&mut self) -> Option<BatchOp<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The buffer was written by `put`/`delete`, so this cannot fail; were
        // it ever to, iteration stops rather than inventing an operation.
        // No limits here: the batch's own checks report an over-long key
        // or value (`check_limits`, `Db::write`), which must see it.
        read_op(&mut self.reader, Lengths::Unlimited).ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

/// Whether [`read_op`] bounds a varint length before taking its bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lengths {
    /// Untrusted bytes: a key over [`MAX_KEY_LEN`] or a value over
    /// [`MAX_VALUE_LEN`] is refused before anything is taken.
    Limited,
    /// The batch's own buffer: an over-long key or value is read, so that
    /// the batch's checks (`check_limits`, `Db::write`) see and report it.
    Unlimited,
}

/// One operation.
fn read_op<'a>(reader: &mut ByteReader<'a>, lengths: Lengths) -> Result<BatchOp<'a>> {
    let kind_byte = reader.u8()?;
    let kind = OpKind::from_u8(kind_byte & !KEYSPACE_FLAG)
        .ok_or_else(|| Error::corruption(WHAT, format!("unknown operation kind {kind_byte}")))?;
    let keyspace = if kind_byte & KEYSPACE_FLAG == 0 {
        0
    } else {
        // Never 0 after the flag: one encoding per operation.
        match u32::try_from(reader.varint(u64::from(u32::MAX))?) {
            Ok(id) if id != 0 => id,
            _ => {
                return Err(Error::corruption(
                    WHAT,
                    "keyspace flag with keyspace id 0".to_string(),
                ))
            }
        }
    };
    let mut field = |max: usize| match lengths {
        Lengths::Limited => reader.varint_prefixed(max as u64),
        Lengths::Unlimited => reader.varint_prefixed(u64::MAX),
    };
    let key = field(MAX_KEY_LEN)?;
    let value = match kind {
        OpKind::Put | OpKind::Merge => field(MAX_VALUE_LEN)?,
        OpKind::Delete => &[],
        OpKind::DeleteRange => {
            let end = field(MAX_KEY_LEN)?;
            if !end.is_empty() && end <= key {
                return Err(Error::corruption(
                    WHAT,
                    "a range delete whose end does not sort after its start",
                ));
            }
            end
        }
    };
    Ok(BatchOp {
        keyspace,
        kind,
        key,
        value,
    })
}

/// A batch decoded from a log record payload; the operations borrow the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedBatch<'a> {
    /// The sequence number of the first operation.
    pub first_seq: SeqNo,
    /// The operations in order; operation i has sequence `first_seq + i`.
    pub ops: Vec<BatchOp<'a>>,
}

impl<'a> DecodedBatch<'a> {
    /// The sequence number of the last operation (`None` for an empty batch).
    pub fn last_seq(&self) -> Option<SeqNo> {
        let count = self.ops.len() as u64;
        count.checked_sub(1).map(|n| SeqNo(self.first_seq.0 + n))
    }

    /// Each operation with its sequence number.
    pub fn ops_with_seq(&self) -> impl Iterator<Item = (SeqNo, BatchOp<'a>)> + '_ {
        (self.first_seq.0..)
            .zip(self.ops.iter())
            .map(|(seq, op)| (SeqNo(seq), *op))
    }

    /// The operations as an owned [`WriteBatch`] (re-encoding it with
    /// `first_seq` reproduces the payload byte for byte).
    pub fn to_write_batch(&self) -> WriteBatch {
        self.ops.iter().copied().collect()
    }
}

/// Decodes a batch payload written by [`RawBatch::encode_record`].
///
/// `Corruption` when the payload is short, has trailing bytes, an unknown
/// operation kind, a key longer than [`MAX_KEY_LEN`], a value longer than
/// [`MAX_VALUE_LEN`], sequence numbers that would pass [`SeqNo::MAX`], or a
/// number not in its shortest form.
pub fn decode_record(bytes: &[u8]) -> Result<DecodedBatch<'_>> {
    let mut reader = ByteReader::new(bytes, WHAT);
    let first_seq = SeqNo(reader.varint(u64::MAX)?);
    let count = u32::try_from(reader.varint(u64::from(u32::MAX))?).unwrap_or(u32::MAX);
    let last = first_seq.0.checked_add(u64::from(count).saturating_sub(1));
    if first_seq > SeqNo::MAX || last.is_none_or(|last| last > SeqNo::MAX.0) {
        return Err(Error::corruption(
            WHAT,
            format!("sequence numbers {first_seq:?} + {count} pass the 56-bit limit"),
        ));
    }
    let possible = reader.remaining() / MIN_OP_LEN;
    if count as usize > possible {
        return Err(Error::corruption(
            WHAT,
            format!(
                "{count} operations cannot fit in the {} bytes that remain",
                reader.remaining()
            ),
        ));
    }
    let mut ops = Vec::with_capacity(count as usize);
    for index in 0..count {
        let op = read_op(&mut reader, Lengths::Limited)
            .map_err(|e| Error::corruption(WHAT, format!("operation {index}: {}", e.detail())))?;
        if op.key.len() > MAX_KEY_LEN || op.value.len() > MAX_VALUE_LEN {
            return Err(Error::corruption(
                WHAT,
                format!(
                    "operation {index}: key of {} or value of {} bytes exceeds the limits",
                    op.key.len(),
                    op.value.len()
                ),
            ));
        }
        ops.push(op);
    }
    reader.finish()?;
    Ok(DecodedBatch { first_seq, ops })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> WriteBatch {
        let mut b = WriteBatch::new();
        b.put(b"k1", b"v1");
        b.delete(b"k2");
        b.put(b"", b"");
        b.put(vec![0xffu8; 300], vec![7u8; 1000]);
        b
    }

    #[test]
    fn iter_yields_ops_in_insertion_order() {
        let b = sample();
        assert_eq!(b.len(), 4);
        let ops: Vec<_> = b.iter().collect();
        assert_eq!(
            ops[0],
            BatchOp {
                keyspace: 0,
                kind: OpKind::Put,
                key: b"k1",
                value: b"v1"
            }
        );
        assert_eq!(
            ops[1],
            BatchOp {
                keyspace: 0,
                kind: OpKind::Delete,
                key: b"k2",
                value: b""
            }
        );
        assert_eq!(ops[2].key, b"");
        assert_eq!(ops[3].value.len(), 1000);
        assert_eq!(ops.len(), 4);
    }

    #[test]
    fn encode_decode_round_trips_byte_for_byte() {
        let b = sample();
        let payload = b.encode_record(SeqNo(100));
        assert_eq!(
            payload.len(),
            b.approximate_bytes() - MAX_BATCH_HEADER_LEN + 2
        );
        let d = decode_record(&payload).unwrap();
        assert_eq!(d.first_seq, SeqNo(100));
        assert_eq!(d.last_seq(), Some(SeqNo(103)));
        assert_eq!(d.ops, b.iter().collect::<Vec<_>>());
        assert_eq!(d.to_write_batch(), b);
        assert_eq!(d.to_write_batch().encode_record(SeqNo(100)), payload);
        let seqs: Vec<_> = d.ops_with_seq().map(|(s, _)| s.0).collect();
        assert_eq!(seqs, [100, 101, 102, 103]);
    }

    #[test]
    fn payload_layout_is_as_documented() {
        let mut b = WriteBatch::new();
        b.put(b"ab", b"c");
        b.delete(b"d");
        let p = b.encode_record(SeqNo(0x0102));
        let expected = [0x82, 0x02, 2, 1, 2, b'a', b'b', 1, b'c', 0, 1, b'd'];
        assert_eq!(p, expected);
    }

    #[test]
    fn clear_and_append() {
        let mut a = sample();
        let mut b = WriteBatch::new();
        b.delete(b"x");
        a.append(&b);
        assert_eq!(a.len(), 5);
        assert_eq!(a.iter().last().unwrap().key, b"x");
        a.clear();
        assert!(a.is_empty());
        assert_eq!(a.iter().count(), 0);
        assert_eq!(a.approximate_bytes(), MAX_BATCH_HEADER_LEN);
        assert_eq!(a, WriteBatch::new());
    }

    #[test]
    fn a_group_encodes_as_its_batches_appended() {
        let mut b = WriteBatch::new();
        b.delete(b"x");
        let empty = WriteBatch::new();
        let mut merged = sample();
        merged.append(&b);
        let mut out = vec![0xee];
        encode_group_into(SeqNo(9), [sample(), empty, b].iter(), &mut out);
        assert_eq!(out[0], 0xee);
        assert_eq!(&out[1..], merged.encode_record(SeqNo(9)));
    }

    #[test]
    fn limits_are_checked() {
        sample().check_limits().unwrap();
        let mut b = WriteBatch::new();
        b.put(vec![0u8; MAX_KEY_LEN + 1], b"");
        assert!(matches!(b.check_limits(), Err(Error::InvalidArgument(_))));
        let mut b = WriteBatch::new();
        b.delete(vec![0u8; MAX_KEY_LEN]);
        b.check_limits().unwrap();
    }

    #[test]
    fn every_truncation_and_trailing_byte_is_refused() {
        let payload = sample().encode_record(SeqNo(1));
        for len in 0..payload.len() {
            let short = decode_record(&payload[..len]);
            assert!(short.unwrap_err().is_corruption());
        }
        let mut longer = payload.clone();
        longer.push(0);
        assert!(decode_record(&longer).unwrap_err().is_corruption());
    }

    #[test]
    fn unknown_kind_huge_count_and_seq_overflow_are_refused() {
        let mut p = sample().encode_record(SeqNo(1));
        p[2] = 9;
        assert!(decode_record(&p).unwrap_err().is_corruption());

        let mut p = sample().encode_record(SeqNo(1));
        p.splice(1..2, [0xff, 0xff, 0xff, 0xff, 0x0f]);
        let err = decode_record(&p).unwrap_err().to_string();
        assert!(err.contains("cannot fit"), "{err}");
        // A count past 32 bits, and a length past the key limit, are refused
        // before anything is taken or allocated.
        let mut p = sample().encode_record(SeqNo(1));
        p.splice(1..2, [0xff, 0xff, 0xff, 0xff, 0x1f]);
        assert!(decode_record(&p).unwrap_err().is_corruption());
        let mut p = vec![1, 1, 0];
        put_varint(&mut p, MAX_KEY_LEN as u64 + 1);
        let err = decode_record(&p).unwrap_err().to_string();
        assert!(err.contains("limit"), "{err}");

        let mut b = WriteBatch::new();
        b.delete(b"a");
        b.delete(b"b");
        assert!(decode_record(&b.encode_record(SeqNo(SeqNo::MAX.0 - 1))).is_ok());
        assert!(decode_record(&b.encode_record(SeqNo::MAX)).is_err());
        assert!(decode_record(&b.encode_record(SeqNo(u64::MAX))).is_err());
    }

    #[test]
    fn empty_batch_decodes_to_no_ops() {
        let p = WriteBatch::new().encode_record(SeqNo(5));
        let d = decode_record(&p).unwrap();
        assert!(d.ops.is_empty());
        assert_eq!(d.last_seq(), None);
    }

    #[test]
    fn range_deletes_encode_start_then_end_and_empty_ranges_add_nothing() {
        let mut b = WriteBatch::new();
        b.delete_range(&b"ab"[..]..&b"c"[..]);
        b.delete_range(&b"x"[..]..);
        b.delete_range(&b"k"[..]..=&b"k"[..]);
        b.delete_range(&b"q"[..]..&b"q"[..]);
        assert_eq!(b.len(), 3);
        let p = b.encode_record(SeqNo(1));
        let expected = [
            1, 3, 2, 2, b'a', b'b', 1, b'c', 2, 1, b'x', 0, 2, 1, b'k', 2, b'k', 0,
        ];
        assert_eq!(p, expected);
        let d = decode_record(&p).unwrap();
        assert_eq!(d.ops[1].range_end(), None);
        assert_eq!(d.ops[2].range_end(), Some(&b"k\0"[..]));
        assert_eq!(d.to_write_batch(), b);
        b.check_limits().unwrap();
        // A reversed range makes the batch invalid; an end that does not
        // sort after the start is refused by the decoder.
        let mut reversed = WriteBatch::new();
        reversed.delete_range(&b"b"[..]..&b"a"[..]);
        assert!(reversed.is_empty());
        assert!(matches!(
            reversed.check_limits(),
            Err(Error::InvalidArgument(_))
        ));
        for bad in [[1, 1, 2, 1, b'b', 1, b'a'], [1, 1, 2, 1, b'b', 1, b'b']] {
            assert!(decode_record(&bad).unwrap_err().is_corruption());
        }
        // The keyspace flag (0x80) with keyspace id 0 is refused: one
        // encoding per operation.
        assert!(decode_record(&[1, 1, 0x81, 0, 1, b'a', 0])
            .unwrap_err()
            .is_corruption());
    }
}
