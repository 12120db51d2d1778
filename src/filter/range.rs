//! A range filter: "may any key of the set lie in [a, b]?" for short ranges.
//!
//! Owns: the range filter's public surface — [`RangeFilterBuilder`],
//! [`RangeFilterView`] (the block queried in place), [`RangeFilter`].
//! Must never: answer "no" for a range that holds a key of the set.
//!
//! (Design notes and measurements: filled in below.)

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
