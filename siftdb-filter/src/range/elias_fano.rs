//! Elias-Fano coding of a sorted set of distinct integers below a universe
//! `u`, queried in place over the bytes of a range filter block.
//!
//! Owns: the encoding of the three sections (upper bits, select samples, low
//! bits), the checks that make any accepted section safe to query, and the
//! one query the filter needs: "is some value in `[x, y]`?".
//! Must never: panic, index out of bounds, loop without bound, or allocate
//! on the query path. A query that meets bytes it cannot read answers "yes"
//! (fail open: a filter may err only towards "maybe").
//!
//! With `m` values, `l = ⌊log2(u/m)⌋` low bits of each value are stored
//! packed; the high part `v >> l` of value `i` sets bit `(v >> l) + i` of the
//! upper bit vector, which has `m + ((u−1) >> l) + 1` bits (one zero ends each
//! high bucket). The successor of `x` starts right after the `(x >> l)`-th
//! zero; every `2^s`-th zero's position is sampled (u32) so that zero is
//! found by a short scan. Space: `m·(l + 2) + 32·zeros/2^s` bits, about
//! `m·(log2(u/m) + 2)` plus 1/8 bit per key at `s = 8`.
//!
//! Written from the textbook definition (Elias 1974, Fano 1971; as used by
//! Grafite, SIGMOD 2024). Crates were checked first: `sucds` and `vers-vecs`
//! own their words in `Vec`s (a table's block would be copied and rebuilt on
//! open), and `sux`'s zero-copy loading trusts the bytes' structure, which a
//! decoder of checksummed-but-forged input may not.

/// The widest low part the packed reader supports (a field plus its bit
/// offset inside a byte must fit one little-endian `u64` read).
pub(crate) const MAX_LOW_BITS: u32 = 56;
/// The largest universe (keeps every sum in the query path inside `u64`).
pub(crate) const MAX_UNIVERSE: u64 = 1 << 62;
/// Sample spacing bounds, as log2 of the zeros between two samples.
pub(crate) const SAMPLE_LOG_RANGE: std::ops::RangeInclusive<u32> = 6..=12;
/// Trailing bytes after the packed low bits, so the last field's 8-byte read
/// stays inside the section.
const LOW_PADDING: u64 = 7;

/// The sizes of an Elias-Fano sequence, derived from `m`, `u` and the sample
/// spacing alone (so a block need not store them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Values (≥ 1).
    pub m: u64,
    /// Universe: every value is below it (`m ≤ u ≤ MAX_UNIVERSE`).
    pub u: u64,
    /// Low bits per value.
    pub low_bits: u32,
    /// log2 of the zeros between two samples.
    pub sample_log: u32,
    /// Bits of the upper vector (`m` ones and `zeros` zeros).
    pub upper_bits: u64,
    /// Zeros of the upper vector: one per high bucket.
    pub zeros: u64,
    /// Bytes of the upper vector (whole little-endian u64 words).
    pub upper_len: usize,
    /// Bytes of the samples (one u32 per `2^sample_log` zeros).
    pub samples_len: usize,
    /// Bytes of the packed low bits, padding included (0 when `l = 0`).
    pub low_len: usize,
}

impl Shape {
    /// The shape for `m` values below `u`, or a reason it cannot exist.
    pub(crate) fn new(m: u64, u: u64, sample_log: u32) -> Result<Shape, String> {
        if m == 0 || m > u || u > MAX_UNIVERSE {
            return Err(format!(
                "{m} values below {u}: need 1 ≤ values ≤ universe ≤ 2^62"
            ));
        }
        if !SAMPLE_LOG_RANGE.contains(&sample_log) {
            return Err(format!("sample spacing 2^{sample_log} not in 2^6..=2^12"));
        }
        let low_bits = (u / m).ilog2();
        if low_bits > MAX_LOW_BITS {
            return Err(format!(
                "{low_bits} low bits (universe {u} over {m} values) exceed {MAX_LOW_BITS}"
            ));
        }
        let zeros = ((u - 1) >> low_bits) + 1;
        let upper_bits = m + zeros;
        if upper_bits > u64::from(u32::MAX) {
            return Err(format!(
                "{upper_bits} upper bits exceed the 32-bit sample positions"
            ));
        }
        // upper_bits < 2^32 bounds every length below 2^38 bytes.
        let bytes = |n: u64| {
            usize::try_from(n).map_err(|_| format!("a section of {n} bytes cannot be addressed"))
        };
        let low_len = if low_bits == 0 {
            0
        } else {
            (m * u64::from(low_bits)).div_ceil(8) + LOW_PADDING
        };
        Ok(Shape {
            m,
            u,
            low_bits,
            sample_log,
            upper_bits,
            zeros,
            upper_len: bytes(upper_bits.div_ceil(64) * 8)?,
            samples_len: bytes(zeros.div_ceil(1 << sample_log) * 4)?,
            low_len: bytes(low_len)?,
        })
    }

    fn low_mask(&self) -> u64 {
        (1u64 << self.low_bits) - 1
    }
}

/// Appends the three sections (upper, samples, low) of `values` — strictly
/// increasing, all below `shape.u`, exactly `shape.m` of them.
pub(crate) fn encode(values: &[u64], shape: &Shape, out: &mut Vec<u8>) {
    let l = shape.low_bits;
    let mut upper = vec![0u64; shape.upper_len / 8];
    let mut low = vec![0u8; shape.low_len];
    for (i, &v) in (0u64..).zip(values) {
        let bit = (v >> l) + i;
        if let Some(word) = upper.get_mut((bit / 64) as usize) {
            *word |= 1 << (bit % 64);
        }
        if l > 0 {
            let at = i * u64::from(l);
            let start = (at / 8) as usize;
            if let Some(field) = low.get_mut(start..).and_then(<[u8]>::first_chunk_mut::<8>) {
                let word = u64::from_le_bytes(*field) | ((v & shape.low_mask()) << (at % 8));
                *field = word.to_le_bytes();
            }
        }
    }
    for word in &upper {
        out.extend_from_slice(&word.to_le_bytes());
    }
    let words = |i: u64| usize::try_from(i).ok().and_then(|i| upper.get(i)).copied();
    for_each_sample(words, shape, |_, position| {
        // Below upper_bits ≤ u32::MAX (Shape::new).
        let position = u32::try_from(position).unwrap_or(u32::MAX);
        out.extend_from_slice(&position.to_le_bytes());
        true
    });
    out.extend_from_slice(&low);
}

/// Calls `visit(j, position)` with the position of zero number `j · 2^s`,
/// for every such zero, in order, while `visit` returns true. Returns false
/// when a word could not be read or `visit` stopped early.
fn for_each_sample(
    word: impl Fn(u64) -> Option<u64>,
    shape: &Shape,
    mut visit: impl FnMut(u64, u64) -> bool,
) -> bool {
    let step = 1u64 << shape.sample_log;
    let mut next = 0u64; // the zero number to sample next
    let mut seen = 0u64; // zeros before the current word
    for w in 0..shape.upper_bits.div_ceil(64) {
        let Some(bits) = word(w) else {
            return false;
        };
        let valid = shape.upper_bits - w * 64;
        let mask = if valid >= 64 {
            u64::MAX
        } else {
            (1 << valid) - 1
        };
        let zeros = !bits & mask;
        let count = u64::from(zeros.count_ones());
        while next < shape.zeros && next < seen + count {
            let rank = next - seen;
            if !visit(
                next >> shape.sample_log,
                w * 64 + select_in_word(zeros, rank),
            ) {
                return false;
            }
            next += step;
        }
        seen += count;
    }
    true
}

/// `SELECT_IN_BYTE[b * 8 + r]`: position of the set bit of rank `r` in the
/// byte `b` (8 when there is none).
#[expect(
    clippy::indexing_slicing,
    reason = "evaluated at compile time: an index out of bounds fails the build"
)]
const SELECT_IN_BYTE: [u8; 2048] = {
    let mut table = [8u8; 2048];
    let mut byte = 0usize;
    while byte < 256 {
        let (mut bit, mut rank) = (0u8, 0usize);
        while bit < 8 {
            if (byte >> bit) & 1 == 1 {
                table[byte * 8 + rank] = bit;
                rank += 1;
            }
            bit += 1;
        }
        byte += 1;
    }
    table
};

const ONES_STEP_8: u64 = 0x0101_0101_0101_0101;
const MSBS_STEP_8: u64 = 0x8080_8080_8080_8080;

/// Position of the set bit of rank `rank` (0-based) in `w`; 64 if none.
///
/// Branch-free broadword selection (Vigna, "Broadword implementation of
/// rank/select queries", 2008): byte-wise popcounts summed by one multiply
/// give the running count at every byte; comparing all eight against
/// `rank` at once finds the byte, and a table finds the bit inside it. (The
/// default x86-64 target has no POPCNT, and loops over bits mispredict.)
#[inline]
fn select_in_word(w: u64, rank: u64) -> u64 {
    let mut s = w - ((w >> 1) & 0x5555_5555_5555_5555);
    s = (s & 0x3333_3333_3333_3333) + ((s >> 2) & 0x3333_3333_3333_3333);
    s = (s + (s >> 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    // Byte i: the ones in bytes 0..=i (at most 64: no carry between bytes).
    let running = s.wrapping_mul(ONES_STEP_8);
    let rank = rank.min(64);
    // Byte i's top bit: running count at byte i ≤ rank.
    let at_most = (((rank * ONES_STEP_8) | MSBS_STEP_8) - running) & MSBS_STEP_8;
    let byte = (at_most >> 7).wrapping_mul(ONES_STEP_8) >> 56;
    let shift = byte * 8;
    if shift >= 64 {
        return 64;
    }
    let before = ((running << 8) >> shift) & 0xff;
    let index = ((w >> shift) & 0xff) * 8 + (rank - before);
    let bit = SELECT_IN_BYTE
        .get(usize::try_from(index).unwrap_or(usize::MAX))
        .copied()
        .unwrap_or(8);
    (shift + u64::from(bit)).min(64)
}

/// The three sections of one sequence, borrowed from a block.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EliasFano<'a> {
    pub shape: Shape,
    pub upper: &'a [u8],
    pub samples: &'a [u8],
    pub low: &'a [u8],
}

impl<'a> EliasFano<'a> {
    /// Checks sections taken from a block whose checksum matched: lengths,
    /// the count of ones, clear padding, and every sample. After this, every
    /// query walks a consistent structure. Returns the reason on failure.
    pub(crate) fn check(&self) -> Result<(), String> {
        let s = &self.shape;
        if self.upper.len() != s.upper_len
            || self.samples.len() != s.samples_len
            || self.low.len() != s.low_len
        {
            return Err("section lengths do not match the geometry".into());
        }
        let mut ones = 0u64;
        for w in 0..s.upper_bits.div_ceil(64) {
            let bits = self.word(w).ok_or("unreadable upper word")?;
            let valid = s.upper_bits - w * 64;
            if valid < 64 && bits >> valid != 0 {
                return Err("bits set past the end of the upper vector".into());
            }
            ones += u64::from(bits.count_ones());
        }
        if ones != s.m {
            return Err(format!(
                "upper vector holds {ones} values, header says {}",
                s.m
            ));
        }
        let mut bad_sample = None;
        let complete = for_each_sample(
            |w| self.word(w),
            s,
            |j, position| {
                if self.sample(j) != Some(position) {
                    bad_sample = Some(j);
                    return false;
                }
                true
            },
        );
        if let Some(j) = bad_sample {
            return Err(format!("select sample {j} is wrong"));
        }
        if !complete {
            return Err("unreadable upper vector".into());
        }
        if s.low_bits > 0 {
            let used = s.m * u64::from(s.low_bits);
            let first_free = usize::try_from(used / 8).unwrap_or(usize::MAX);
            let tail = self.low.get(first_free..).unwrap_or_default();
            let partial = used % 8;
            let mut bytes = tail.iter();
            if partial != 0 {
                if let Some(&b) = bytes.next() {
                    if b >> partial != 0 {
                        return Err("low-bit padding is not zero".into());
                    }
                }
            }
            if bytes.any(|&b| b != 0) {
                return Err("low-bit padding is not zero".into());
            }
        }
        Ok(())
    }

    #[inline]
    fn word(&self, i: u64) -> Option<u64> {
        let at = usize::try_from(i).ok()?.checked_mul(8)?;
        let bytes = self.upper.get(at..at.checked_add(8)?)?;
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }

    #[inline]
    fn sample(&self, j: u64) -> Option<u64> {
        let at = usize::try_from(j).ok()?.checked_mul(4)?;
        let bytes = self.samples.get(at..at.checked_add(4)?)?;
        Some(u64::from(u32::from_le_bytes(bytes.try_into().ok()?)))
    }

    #[inline]
    fn low(&self, i: u64) -> Option<u64> {
        let l = self.shape.low_bits;
        if l == 0 {
            return Some(0);
        }
        let at = i.checked_mul(u64::from(l))?;
        let start = usize::try_from(at / 8).ok()?;
        let bytes = self.low.get(start..start.checked_add(8)?)?;
        let word = u64::from_le_bytes(bytes.try_into().ok()?);
        Some((word >> (at % 8)) & self.shape.low_mask())
    }

    /// Position of zero number `k` (0-based) in the upper vector.
    #[inline]
    fn select_zero(&self, k: u64) -> Option<u64> {
        let j = k >> self.shape.sample_log;
        let from = self.sample(j)?;
        let mut rank = k - (j << self.shape.sample_log);
        let mut w = from / 64;
        let mut zeros = !self.word(w)? & (u64::MAX << (from % 64));
        loop {
            let here = u64::from(zeros.count_ones());
            if rank < here {
                return Some(w * 64 + select_in_word(zeros, rank));
            }
            rank -= here;
            w += 1;
            zeros = !self.word(w)?;
        }
    }

    /// Position of the first one at or after `from`, if any.
    #[inline]
    fn next_one(&self, from: u64) -> Option<u64> {
        let mut w = from / 64;
        let mut bits = self.word(w)? & (u64::MAX << (from % 64));
        loop {
            if bits != 0 {
                return Some(w * 64 + u64::from(bits.trailing_zeros()));
            }
            w += 1;
            bits = self.word(w)?;
        }
    }

    /// False when no value lies in `[x, y]`; true when one may (or when the
    /// bytes could not be read).
    #[inline]
    pub(crate) fn any_in(&self, x: u64, y: u64) -> bool {
        self.try_any_in(x, y).unwrap_or(true)
    }

    fn try_any_in(&self, x: u64, y: u64) -> Option<bool> {
        let s = &self.shape;
        if x > y || x >= s.u {
            return Some(false);
        }
        let l = s.low_bits;
        let high = x >> l;
        // The bucket of `high` starts after zero number high − 1.
        let mut pos = match high.checked_sub(1) {
            None => 0,
            Some(k) => self.select_zero(k)? + 1,
        };
        let mut index = pos.checked_sub(high)?; // ones before `pos`
        let x_low = x & s.low_mask();
        // Values of bucket `high`, in order, until the zero that ends it.
        loop {
            let w = self.word(pos / 64)? >> (pos % 64);
            let room = 64 - pos % 64;
            let run = u64::from((!w).trailing_zeros()).min(room);
            for i in index..index + run {
                let low = self.low(i)?;
                if low >= x_low {
                    return Some((high << l | low) <= y);
                }
            }
            index += run;
            pos += run;
            if run < room {
                break;
            }
        }
        // `pos` is the zero ending bucket `high`; every later value exceeds x.
        if (high + 1) << l > y {
            return Some(false);
        }
        let Some(one) = self.next_one(pos) else {
            return Some(false);
        };
        let bucket = high + (one - pos);
        Some((bucket << l | self.low(index)?) <= y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64 (the test kit's generator, which this crate, below
    /// siftdb, cannot depend on).
    struct SplitMix64(u64);

    impl SplitMix64 {
        fn new(seed: u64) -> Self {
            SplitMix64(seed)
        }

        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// A draw from `0..n` (multiply-shift).
        #[expect(
            clippy::cast_possible_truncation,
            reason = "the draw is below n, a usize"
        )]
        fn index(&mut self, n: usize) -> usize {
            ((u128::from(self.next()) * n as u128) >> 64) as usize
        }
    }

    fn build(values: &[u64], u: u64, sample_log: u32) -> (Shape, Vec<u8>) {
        let shape = Shape::new(values.len() as u64, u, sample_log).unwrap();
        let mut out = Vec::new();
        encode(values, &shape, &mut out);
        (shape, out)
    }

    fn view<'a>(shape: Shape, bytes: &'a [u8]) -> EliasFano<'a> {
        let (upper, rest) = bytes.split_at(shape.upper_len);
        let (samples, low) = rest.split_at(shape.samples_len);
        EliasFano {
            shape,
            upper,
            samples,
            low,
        }
    }

    #[test]
    fn select_in_word_finds_every_rank() {
        let mut rng = SplitMix64::new(5);
        let words = (0..3000).map(|i| match i % 3 {
            0 => rng.next(),
            1 => rng.next() & rng.next() & rng.next(),
            _ => rng.next() | rng.next(),
        });
        for w in words.chain([0, u64::MAX, 1, 1 << 63]) {
            let ones: Vec<u64> = (0..64).filter(|b| w >> b & 1 == 1).collect();
            for (rank, &at) in ones.iter().enumerate() {
                assert_eq!(select_in_word(w, rank as u64), at, "{w:#x} rank {rank}");
            }
            for rank in ones.len() as u64..70 {
                assert_eq!(select_in_word(w, rank), 64, "{w:#x} rank {rank}");
            }
        }
    }

    #[test]
    fn any_in_matches_a_scan() {
        let mut rng = SplitMix64::new(7);
        for round in 0..300 {
            let m = 1 + rng.index(400) as u64;
            let u = m + rng.next() % (if round % 3 == 0 { 4 * m } else { 1 << 20 });
            let mut values: Vec<u64> = (0..m).map(|_| rng.next() % u).collect();
            values.sort();
            values.dedup();
            let sample_log = [6, 7, 8][rng.index(3)];
            let (shape, bytes) = build(&values, u, sample_log);
            let ef = view(shape, &bytes);
            ef.check().unwrap();
            for _ in 0..200 {
                let x = rng.next() % (u + 2);
                let y = x.saturating_add(rng.next() % (1 + u / m * 3));
                let want = values.iter().any(|&v| v >= x && v <= y);
                assert_eq!(ef.any_in(x, y), want, "u {u} m {m} [{x}, {y}]");
                let v = values[rng.index(values.len())];
                assert!(ef.any_in(v, v));
            }
        }
    }

    #[test]
    fn dense_and_extreme_universes() {
        // Every value of the universe; then the two ends only.
        let all: Vec<u64> = (0..1000).collect();
        let (shape, bytes) = build(&all, 1000, 6);
        let ef = view(shape, &bytes);
        assert_eq!(shape.low_bits, 0);
        assert!((0..1000).all(|v| ef.any_in(v, v)));
        assert!(!ef.any_in(1000, 5000));
        // 64 values spread over the largest universe: 56 low bits.
        let mut spread: Vec<u64> = (0..63).map(|i| i << 56).collect();
        spread.push(MAX_UNIVERSE - 1);
        let (shape, bytes) = build(&spread, MAX_UNIVERSE, 8);
        assert_eq!(shape.low_bits, MAX_LOW_BITS);
        let ef = view(shape, &bytes);
        ef.check().unwrap();
        assert!(ef.any_in(0, 0) && ef.any_in(MAX_UNIVERSE - 1, u64::MAX));
        assert!(!ef.any_in(1, (1 << 56) - 1));
        assert!(!ef.any_in((62 << 56) + 1, MAX_UNIVERSE - 2));
    }

    #[test]
    fn impossible_shapes_are_refused() {
        assert!(Shape::new(0, 10, 8).is_err());
        assert!(Shape::new(11, 10, 8).is_err());
        assert!(Shape::new(1, MAX_UNIVERSE + 1, 8).is_err());
        assert!(Shape::new(1, 1 << 60, 8).is_err()); // 60 low bits
        assert!(Shape::new(1, 10, 5).is_err());
        assert!(Shape::new(1, 10, 13).is_err());
    }

    #[test]
    fn check_refuses_inconsistent_sections() {
        let values: Vec<u64> = (0..500).map(|i| i * 37 + 5).collect();
        let (shape, bytes) = build(&values, 20_000, 6);
        view(shape, &bytes).check().unwrap();
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 1 << (at % 8);
            let ef = view(shape, &bad);
            // A flipped upper bit changes the count of ones; a flipped
            // sample bit names a wrong position; a flipped low bit is legal
            // (another value set) unless it lands in the padding.
            let upper = at < shape.upper_len;
            let sample = !upper && at < shape.upper_len + shape.samples_len;
            if upper || sample {
                assert!(ef.check().is_err(), "byte {at}");
            }
            // Whatever the bytes, queries terminate without panicking.
            for x in [0, 5, 1000, 19_999, 30_000] {
                ef.any_in(x, x + 100);
            }
        }
    }
}
