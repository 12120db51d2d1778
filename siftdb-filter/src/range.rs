//! A range filter: "may any key of the set lie in `[a, b]`?" for short
//! ranges, so that a scan can skip a table that holds nothing in its range.
//!
//! Owns: the range filter's public surface — [`RangeFilterBuilder`] (keys
//! streamed in sorted order, as a table builder produces them),
//! [`RangeFilterView`] (a checksummed block queried in place, generic over
//! its byte container like [`crate::FilterView`]) and
//! [`RangeFilter`] (a view owning its bytes, built from keys in any order).
//! Must never: answer "no" for a range that holds a key of the set.
//!
//! ```
//! use siftdb_filter::range::{RangeFilterBuilder, RangeFilterView};
//! let mut builder = RangeFilterBuilder::new(16.0)?;
//! for j in (0..1000u64).map(|i| 2 * i) {
//!     builder.add(format!("k{j:015}").as_bytes())?; // sorted order
//! }
//! let view = RangeFilterView::parse(builder.finish()?)?;
//! assert!(view.may_contain_range(b"k000000000000010", b"k000000000000010"));
//! // range(key(11)..key(12)) holds no key:
//! assert!(!view.may_contain_half_open(b"k000000000000011", b"k000000000000012"));
//! # Ok::<(), siftdb_filter::Error>(())
//! ```
//!
//! # Design: Grafite over an order-preserving key map
//!
//! **Grafite** (Costa, Ferragina, Vinciguerra, SIGMOD 2024) works on
//! integers: with `m` keys and `B` bits per key it hashes every key `v` into
//! a reduced universe `u = m · 2^(B−2)` by `h(v) = (q(v >> λ) + v mod 2^λ)
//! mod u` — blocks of `2^λ` consecutive integers keep their internal
//! distances, each block lands at an independent random place (`q`) — and
//! stores the sorted hashes Elias-Fano coded (`m·(2 + log2(u/m))` bits).
//! A range `[a, b]` of `ℓ` integers inside one block becomes one range of
//! `ℓ` hashes (two pieces when it crosses a block boundary), answered by one
//! successor search; a key of the same block lies in it only if it truly
//! lies in `[a, b]`, a key of another block with probability `ℓ/u`, so the
//! false-positive rate is at most `ℓ·m/u = ℓ/2^(B−2)` for every `ℓ ≤ 2^λ`
//! (`λ = ⌊log2 u⌋ − 1`, so ranges up to a quarter of the universe). Query
//! cost is independent of `ℓ`.
//!
//! **Exact mode.** When the keys' mapped values span no more than `u`
//! values, they are stored themselves (minus the smallest): no hash, no
//! false positive beyond the key map's own resolution, and at most the
//! same space. Tables of consecutive keys — the benchmark's, and what
//! compaction produces from them — land here: 1,000,000 keys
//! `k{2i:015}` take 4.40 bits per key whatever bits were asked.
//!
//! **Keys are byte strings**, mapped to `u64` by an order-preserving map
//! (`range/keymap.rs`): strip the longest common prefix of the smallest and largest
//! key (every key shares it), then read the next bytes as mixed-radix digits
//! whose radix at each position is the number of byte values the keys use
//! there, plus "ended/below" and "above" symbols for strings that leave the
//! keys' alphabet. Monotone (`x ≤ y ⇒ f(x) ≤ f(y)`) over all strings,
//! so no false negative; injective on keys whose tails fit in the window;
//! on random 8-byte big-endian integers, the identity. Bound strings also learn
//! whether other keys can share their value, so an exclusive bound steps
//! past it: `range(key(j)..key(j+1))` asks exactly the values between.
//!
//! **ℓ for the benchmark's keys.** The 15 ASCII digits of `k{j:015}` take 11
//! or 12 symbols per position instead of 256, so one step of `j` is one
//! mapped value and a decimal carry adds one or two more per carried digit.
//! Between adjacent present keys `k{2i}` and `k{2i+2}` the open gap holds
//! ℓ = 1 mapped value for 80% of `i`, 2 for 18%, and 24, 288, 3,456, 41,472
//! for the 1.8%, 0.18%, 0.018%, 0.002% whose `2i+2` carries into more
//! digits (`tests/range_filter.rs`). `seekempty`'s `range(k{2i+1}..k{2i+2})`
//! is the same or shorter. In exact mode none of them is a false positive;
//! for sparse keys of this format (hashed mode) a range of `ℓ` consecutive
//! `j` spans about 1.5–2·ℓ mapped values, which the bound accounts for.
//! Plain big-endian bytes would have cost ℓ = 247 per carry and 63,000 per
//! double carry.
//!
//! # Measured (1,000,000 keys; `cargo bench -p siftdb-filter --bench range_filter`)
//!
//! False-positive rate over 200,000 empty ranges of ℓ consecutive integers
//! (keys as `u64` big-endian, and 15-digit `k{j:015}` with random `j`), and
//! in parentheses the mean proven bound `ℓ_mapped · m/u` of the same queries:
//!
//! | keys | B | bits/key used | ℓ = 1 | ℓ = 4 | ℓ = 16 | ℓ = 64 |
//! | --- | --: | --: | --: | --: | --: | --: |
//! | `u64` | 10 | 10.11 | 0.388% (0.390%) | 1.53% (1.56%) | 6.03% (6.24%) | 22.0% (25.0%) |
//! | `u64` | 16 | 16.13 | 0.0065% (0.0061%) | 0.026% (0.024%) | 0.097% (0.098%) | 0.379% (0.391%) |
//! | `k{j:015}` sparse | 10 | 10.11 | 0.379% (0.390%) | 2.22% (2.34%) | 9.15% (10.0%) | 33.1% (39.6%) |
//! | `k{j:015}` sparse | 16 | 16.13 | 0.0035% (0.0061%) | 0.040% (0.045%) | 0.189% (0.201%) | 0.81% (0.85%) |
//! | `k{2i:015}` (benchmark) | any | 4.40 | 0 (exact) | — | — | — |
//!
//! (Measured rates a hair above the bound at ℓ = 1 and 4 are sampling
//! noise: a few queries out of 200,000; `tests/range_filter.rs` holds every
//! rate to its bound within four standard deviations.)
//!
//! Time (criterion, thread CPU time, 2 shared cores under load): build 62
//! ns/key (benchmark keys, exact), 86 (`u64`), 106 (`k{j:015}` sparse; hashed
//! mode sorts the hashes); a query, keys mapped included, 150 ns for
//! `seekempty`'s `range(k{2i+1}..k{2i+2})` on the benchmark keys and 250 ns
//! for an empty ℓ = 16 range on 1,000,000 `u64` keys (one successor search;
//! its load of the packed low bits is a cache miss at this size).
//!
//! **Against a prefix-Bloom hierarchy** in the manner of Rosetta (Luo et
//! al., SIGMOD 2020; levels 0..=6 of Bloom filters over `x >> j`, dyadic
//! decomposition, doubting down to level 0), on the same `u64` keys at the
//! same bits per key, best of three memory splits (uniform, half or three
//! quarters at the bottom level):
//!
//! | B = 16 | ℓ = 1 | ℓ = 4 | ℓ = 16 | ℓ = 64 |
//! | --- | --: | --: | --: | --: |
//! | Grafite (this) | 0.0065% | 0.026% | 0.097% | 0.379% |
//! | Rosetta-style, best split | 0.41% | 1.32% | 3.71% | 9.28% |
//!
//! Grafite's rate is 25–100× lower at every ℓ (at B = 10: 0.39% vs 2.9%,
//! 6.0% vs 28%). Rosetta answers ℓ = 1 faster (one Bloom probe, 40 ns,
//! against one successor search, about 210–300 ns in that run), but its cost
//! grows with ℓ — dyadic pieces, each doubted down a level at a time: 124,
//! 334, 1,005 ns for ℓ = 4, 16, 64 with its best-rate split — while
//! Grafite's stays flat (240, 207, 242 ns). At ℓ = 16 in criterion, Grafite
//! 250 ns against the half-bottom split's 338 ns at 100× the rate. Grafite it
//! is.
//!
//! The Elias-Fano code is hand-written (`range/elias_fano.rs`) because no crate
//! queries in place over bytes it did not write itself and must distrust.

mod block;
mod build;
mod elias_fano;
mod keymap;

pub use block::{
    RangeFilterHeader, RangeFilterView, RangeMode, CHECKSUM_LEN, FORMAT_VERSION, HEADER_LEN, MAGIC,
};
pub use build::{
    RangeFilter, RangeFilterBuilder, DEFAULT_SAMPLE_LOG, MAX_BITS_PER_KEY, MIN_BITS_PER_KEY,
};
pub use keymap::MAX_POSITIONS;
