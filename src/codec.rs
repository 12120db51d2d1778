//! Panic-free reading and writing of little-endian fixed-width fields and
//! LEB128 varints.
//!
//! Owns: the cursor every decoder in the crate reads through, the varint
//! encoding (seven bits per byte, low bits first, the top bit set on every
//! byte but the last), and the checksum helper every on-disk structure is
//! verified with.
//! Must never: panic, index out of bounds, or hand out a slice longer than
//! the input — a short input is a named `Corruption` ("wal record: 3 bytes short").

use crate::error::{truncated, Error, Result};

/// A forward-only cursor over untrusted bytes.
#[derive(Debug, Clone)]
pub struct ByteReader<'a> {
    rest: &'a [u8],
    what: &'static str,
}

impl<'a> ByteReader<'a> {
    /// A cursor over `bytes`; `what` names the structure in errors.
    pub fn new(bytes: &'a [u8], what: &'static str) -> Self {
        ByteReader { rest: bytes, what }
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// The unconsumed bytes, without consuming them.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// Consumes exactly `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.rest.len() {
            return Err(truncated(self.what, n - self.rest.len()));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    /// Consumes a fixed-size array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let Some((head, tail)) = self.rest.split_first_chunk::<N>() else {
            return Err(truncated(self.what, N - self.rest.len()));
        };
        self.rest = tail;
        Ok(*head)
    }

    /// Consumes one byte.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    /// Consumes a little-endian u16.
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// Consumes a little-endian u32.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// Consumes a little-endian u64.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Consumes a 4-byte magic and a format-version byte; `Corruption`
    /// unless they are `magic` and `version`.
    pub fn magic_and_version(&mut self, magic: &[u8; 4], version: u8) -> Result<()> {
        let found: [u8; 4] = self.array()?;
        if &found != magic {
            return Err(Error::corruption(
                self.what,
                format!("bad magic {found:02x?}"),
            ));
        }
        let found = self.u8()?;
        if found != version {
            return Err(Error::corruption(
                self.what,
                format!("unknown format version {found}"),
            ));
        }
        Ok(())
    }

    /// Consumes a u32 length prefix and that many bytes.
    pub fn len_prefixed(&mut self) -> Result<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    /// Consumes a LEB128 varint of at most `max` in its shortest form.
    /// `Corruption` when it runs past the input, exceeds `max`, or is
    /// longer than needed (a last byte of zero after the first): so every
    /// value has one encoding and re-encoding gives back the same bytes.
    pub fn varint(&mut self, max: u64) -> Result<u64> {
        let mut value = 0u64;
        for (index, shift) in (0..64).step_by(7).enumerate() {
            let byte = self.u8()?;
            let bits = u64::from(byte & 0x7f);
            // The tenth byte holds bit 63 only.
            if shift == 63 && bits > 1 {
                break;
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                if byte == 0 && index > 0 {
                    return Err(Error::corruption(
                        self.what,
                        "varint longer than its value needs",
                    ));
                }
                if value > max {
                    break;
                }
                return Ok(value);
            }
        }
        Err(Error::corruption(
            self.what,
            format!("varint above its limit of {max}"),
        ))
    }

    /// Consumes a varint length prefix of at most `max` and that many bytes.
    pub fn varint_prefixed(&mut self, max: u64) -> Result<&'a [u8]> {
        let len = usize::try_from(self.varint(max)?)
            .map_err(|_| Error::corruption(self.what, "length past the address space"))?;
        self.take(len)
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self) -> Result<()> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(Error::corruption(
                self.what,
                format!("{} unexpected trailing bytes", self.rest.len()),
            ))
        }
    }
}

/// Appends a u32 length prefix and the bytes. Callers pass keys and values,
/// whose lengths `Db::write` bounds far below 4 GiB.
#[expect(
    clippy::cast_possible_truncation,
    reason = "callers bound the length (MAX_KEY_LEN, MAX_VALUE_LEN)"
)]
pub fn put_len_prefixed(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Appends `value` as a LEB128 varint in its shortest form (1 to 10 bytes).
#[inline]
pub fn put_varint(out: &mut Vec<u8>, value: u64) {
    each_varint_byte(value, |byte| out.push(byte));
}

/// Hands `value`'s LEB128 bytes, shortest form, to `push` in order: one
/// encoder for every destination (a `Vec`, or a header built on the stack).
#[inline]
#[expect(
    clippy::cast_possible_truncation,
    reason = "each byte keeps the low seven bits on purpose; the rest follow in later bytes"
)]
pub fn each_varint_byte(mut value: u64, mut push: impl FnMut(u8)) {
    while value >= 0x80 {
        push((value as u8) | 0x80);
        value >>= 7;
    }
    push(value as u8);
}

/// Bytes [`put_varint`] writes for `value`.
pub fn varint_len(value: u64) -> usize {
    (64 - value.leading_zeros() as usize).max(1).div_ceil(7)
}

/// CRC-32 (IEEE) of several pieces, as if concatenated.
pub fn crc32_of(pieces: &[&[u8]]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    for piece in pieces {
        hasher.update(piece);
    }
    hasher.finalize()
}

/// Splits `bytes` into (body, stored crc32 of the last 4 bytes) and checks
/// the crc against the body. The crc covers every byte before it.
pub fn split_checked<'a>(bytes: &'a [u8], what: &'static str) -> Result<&'a [u8]> {
    let Some((body, crc_bytes)) = bytes.split_last_chunk::<4>() else {
        return Err(truncated(what, 4 - bytes.len()));
    };
    let stored = u32::from_le_bytes(*crc_bytes);
    let actual = crc32_of(&[body]);
    if stored != actual {
        return Err(Error::corruption(
            what,
            format!("checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"),
        ));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_in_their_shortest_form_and_refuse_the_rest() {
        let mut values = vec![0u64, u64::MAX, (1 << 56) - 1];
        for bits in 1..64 {
            values.extend([(1u64 << bits) - 1, 1u64 << bits]);
        }
        for value in values {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(out.len(), varint_len(value), "{value:#x}");
            let mut reader = ByteReader::new(&out, "test");
            assert_eq!(reader.varint(u64::MAX).unwrap(), value);
            reader.finish().unwrap();
            for len in 0..out.len() {
                assert!(ByteReader::new(&out[..len], "test")
                    .varint(u64::MAX)
                    .is_err());
            }
            if value > 0 {
                assert!(ByteReader::new(&out, "test").varint(value - 1).is_err());
            }
        }
        // Longer than needed, past 64 bits, or an eleventh byte.
        for bad in [
            &[0x80, 0x00][..],
            &[0xff, 0x80, 0x00],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            &[
                0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
            ],
        ] {
            let err = ByteReader::new(bad, "test").varint(u64::MAX);
            assert!(matches!(err, Err(Error::Corruption { .. })), "{bad:02x?}");
        }
        let mut r = ByteReader::new(&[3, b'a', b'b', b'c', 9], "test");
        assert_eq!(r.varint_prefixed(3).unwrap(), b"abc");
        assert!(r.varint_prefixed(8).is_err());
    }

    #[test]
    fn reader_names_truncation() {
        let mut r = ByteReader::new(&[1, 2, 3], "table footer");
        let err = r.u64().unwrap_err().to_string();
        assert!(err.contains("table footer: 5 bytes short"), "{err}");
    }

    #[test]
    fn reader_reads_little_endian_fields() {
        let mut bytes = vec![7u8];
        bytes.extend_from_slice(&0x0102u16.to_le_bytes());
        bytes.extend_from_slice(&0xdead_beefu32.to_le_bytes());
        put_len_prefixed(&mut bytes, b"abc");
        let mut r = ByteReader::new(&bytes, "t");
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.u16().unwrap(), 0x0102);
        assert_eq!(r.u32().unwrap(), 0xdead_beef);
        assert_eq!(r.len_prefixed().unwrap(), b"abc");
        r.finish().unwrap();
    }

    #[test]
    fn checksum_catches_every_flip() {
        let mut block = b"hello world".to_vec();
        let crc = crc32_of(&[&block]);
        block.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(split_checked(&block, "b").unwrap(), b"hello world");
        for i in 0..block.len() {
            let mut bad = block.clone();
            bad[i] ^= 0x10;
            assert!(split_checked(&bad, "b").unwrap_err().is_corruption());
        }
        assert!(split_checked(&[1, 2], "b").is_err());
    }
}
