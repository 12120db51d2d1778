//! The numbered keys the filter tests measure with.
//!
//! Owns: [`numbered_key`].
//! Must never: allocate (the quality tests format tens of millions of keys).

/// `format!("k{:015}", j)` as a 16-byte array (j below 10¹⁵): the filter
/// tests' key `j`, present keys even, absent keys odd.
pub fn numbered_key(j: u64) -> [u8; 16] {
    let mut out = [b'0'; 16];
    out[0] = b'k';
    let mut rest = j;
    for digit in out.iter_mut().skip(1).rev() {
        *digit += u8::try_from(rest % 10).unwrap_or(0);
        rest /= 10;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_keys_are_the_formatted_ones() {
        for j in [0u64, 7, 42, 123_456_789, 999_999_999_999_999] {
            assert_eq!(&numbered_key(j)[..], format!("k{j:015}").as_bytes());
        }
    }
}
