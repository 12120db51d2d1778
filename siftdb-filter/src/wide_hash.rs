//! The filter hash of eight keys at once, for the batched paths.
//!
//! Owns: [`hash_keys`] — xxh3-64 with a seed ([`hash_key_seeded`]) of a
//! group of keys, those of 9 to 16 bytes (the length of many keys, and of
//! the benchmark's) eight at a time in AVX-512 lanes, for
//! `BloomFilter::insert_keys`.
//! Must never: give any key a different hash than [`hash_key_seeded`]
//! (a filter built from one and asked with the other would answer "absent"
//! for an inserted key) — the tests compare the two on every length from 0
//! to 40 and random seeds; take a key past the group.
//!
//! Why: a batched build of short keys spends most of its time in xxh3's
//! 9–16-byte path, about twenty scalar instructions per key around one
//! 64×128-bit multiply. Eight keys in the lanes of one register take about
//! thirty vector instructions together: the 64×64→128-bit multiply is four
//! 32-bit `vpmuludq`s and their carries, the byte swap one `vpshufb`, the
//! final multiply one `vpmullq`.
#![cfg_attr(
    target_arch = "x86_64",
    expect(
        unsafe_code,
        reason = "AVX-512 intrinsics in a #[target_feature] function, called after detection"
    )
)]

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use crate::line::hash_key_seeded;

/// Keys hashed per call of [`hash_keys`] (and so inserted per batch by
/// `BloomFilter::insert_keys`): 2 KiB of hashes, many times the insert's
/// look-ahead, small enough with the keys' parts (6 KiB) to stay in the L1
/// cache.
pub(crate) const GROUP: usize = 256;

/// Keys per vector: eight 64-bit lanes.
#[cfg_attr(
    not(target_arch = "x86_64"),
    expect(dead_code, reason = "the vector kernels are x86-64's")
)]
const LANES: usize = 8;

/// xxh3's default secret, bytes 24..56, as the little-endian words its
/// 9–16-byte path mixes into the input (`flip1` = words 0 ^ 1 plus the
/// seed, `flip2` = words 2 ^ 3 minus the seed).
#[cfg(target_arch = "x86_64")]
const SECRET_24_TO_56: [u64; 4] = [
    0x1f67_b3b7_a4a4_4072,
    0x78e5_c0cc_4ee6_79cb,
    0x2172_ffcc_7dd0_5a82,
    0x8e24_43f7_7446_08b8,
];

/// xxh3's multiplier in its final mix (`PRIME_MX1`).
#[cfg(target_arch = "x86_64")]
const PRIME_MX1: u64 = 0x1656_6791_9e37_79f9;

/// Takes up to [`GROUP`] keys from `keys` and writes the hash of each
/// with `seed` ([`hash_key_seeded`]) to `out`, in order; returns how many
/// it took (fewer only when `keys` ran out). With AVX-512 the keys of 9 to
/// 16 bytes are hashed eight at a time, the others one by one.
pub(crate) fn hash_keys<K: AsRef<[u8]>>(
    keys: &mut impl Iterator<Item = K>,
    seed: u64,
    out: &mut [u64; GROUP],
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        return hash_keys_wide(keys, seed, out);
    }
    let mut taken = 0;
    // `out` is asked first, so no key is taken past a full group.
    for (slot, key) in out.iter_mut().zip(keys) {
        *slot = hash_key_seeded(key.as_ref(), seed);
        taken += 1;
    }
    taken
}

/// [`hash_keys`] with AVX-512: each short key's first and last eight bytes
/// and its length are set aside as it is taken (a longer or shorter key is
/// hashed there and then), then the group is hashed eight lanes at a time
/// and each lane that holds a short key stored over its slot. The parts
/// are read back long after they were written, so the vector loads do not
/// wait on the scalar stores.
#[cfg(target_arch = "x86_64")]
fn hash_keys_wide<K: AsRef<[u8]>>(
    keys: &mut impl Iterator<Item = K>,
    seed: u64,
    out: &mut [u64; GROUP],
) -> usize {
    let mut parts = ShortKeys {
        first: [0; GROUP],
        last: [0; GROUP],
        lens: [0; GROUP],
        short: [0; GROUP],
    };
    let mut taken = 0;
    for (i, key) in (0..GROUP).zip(keys) {
        let key = key.as_ref();
        match (key.first_chunk::<8>(), key.last_chunk::<8>()) {
            (Some(head), Some(tail)) if key.len() > 8 && key.len() <= 16 => {
                if let (Some(first), Some(last), Some(len), Some(short)) = (
                    parts.first.get_mut(i),
                    parts.last.get_mut(i),
                    parts.lens.get_mut(i),
                    parts.short.get_mut(i),
                ) {
                    *first = u64::from_le_bytes(*head);
                    *last = u64::from_le_bytes(*tail);
                    *len = key.len() as u64;
                    // A byte per slot, not a bit: setting bits of one byte
                    // would chain each key's store on the last one's.
                    *short = 1;
                }
            }
            _ => {
                if let Some(slot) = out.get_mut(i) {
                    *slot = hash_key_seeded(key, seed);
                }
            }
        }
        taken += 1;
    }
    // SAFETY: `hash_keys` calls this only when `has_avx512` found every
    // feature the function enables.
    unsafe { xxh3_9_to_16_avx512(&parts, seed, out) };
    taken
}

/// A group's keys of 9 to 16 bytes, by slot: first and last eight bytes
/// (little-endian), length, and which slots hold one (1, else 0).
#[cfg(target_arch = "x86_64")]
struct ShortKeys {
    first: [u64; GROUP],
    last: [u64; GROUP],
    lens: [u64; GROUP],
    short: [u8; GROUP],
}

/// Whether this CPU runs [`xxh3_9_to_16_avx512`] (detected once, then a
/// relaxed load).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx512() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: not yet asked, 1: no, 2: yes.
    static FOUND: AtomicU8 = AtomicU8::new(0);
    match FOUND.load(Ordering::Relaxed) {
        2 => true,
        1 => false,
        _ => {
            use std::arch::is_x86_feature_detected as has;
            // Miri cannot run the wide path's `asm!`: the scalar loop there.
            let yes = !cfg!(miri)
                && has!("avx512f")
                && has!("avx512vl")
                && has!("avx512bw")
                && has!("avx512dq");
            FOUND.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
    }
}

/// `vpmuludq`: the 64-bit products of each lane's low 32 bits. In `asm!`
/// because LLVM recognises the four partial products of a 64×64-bit
/// multiply's high half and computes it with eight scalar `mul`s instead.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn mul_low_halves(a: __m512i, b: __m512i) -> __m512i {
    let product: __m512i;
    // SAFETY: one register-only instruction of a feature this function
    // enables; no memory, stack or flags.
    unsafe {
        std::arch::asm!(
            "vpmuludq {product}, {a}, {b}",
            product = lateout(zmm_reg) product,
            a = in(zmm_reg) a,
            b = in(zmm_reg) b,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    product
}

/// xxh3-64's path for 9 to 16 bytes over every slot of `parts`, eight
/// lanes at a time; each lane whose slot holds a short key is stored to
/// its slot of `out`, the others are left as they are.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq")]
fn xxh3_9_to_16_avx512(parts: &ShortKeys, seed: u64, out: &mut [u64; GROUP]) {
    let [s0, s1, s2, s3] = SECRET_24_TO_56;
    let word = |v: u64| _mm512_set1_epi64(v as i64);
    let flip1 = word((s0 ^ s1).wrapping_add(seed));
    let flip2 = word((s2 ^ s3).wrapping_sub(seed));
    // The byte swap of each 64-bit lane: in every 128-bit lane, bytes 7..0
    // then 15..8.
    let reverse = _mm512_set_epi8(
        8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, //
        8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, //
        8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, //
        8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7,
    );
    let low32 = word(0xffff_ffff);
    let prime = word(PRIME_MX1);
    let lanes = parts
        .first
        .as_chunks::<LANES>()
        .0
        .iter()
        .zip(parts.last.as_chunks::<LANES>().0)
        .zip(parts.lens.as_chunks::<LANES>().0)
        .zip(parts.short.as_chunks::<LANES>().0)
        .zip(out.as_chunks_mut::<LANES>().0);
    for ((((first, last), lens), short), slots) in lanes {
        // One bit per lane whose slot holds a short key: the test's mask of
        // the eight flag bytes (the low eight of its sixteen bits).
        let [short, _] = _mm_test_epi8_mask(
            _mm_set_epi64x(0, i64::from_le_bytes(*short)),
            _mm_set1_epi8(1),
        )
        .to_le_bytes();
        if short == 0 {
            continue;
        }
        // SAFETY: each is 64 bytes of u64s; the loads need no alignment.
        let (first, last, lens) = unsafe {
            (
                _mm512_loadu_si512(first.as_ptr().cast()),
                _mm512_loadu_si512(last.as_ptr().cast()),
                _mm512_loadu_si512(lens.as_ptr().cast()),
            )
        };
        let lo = _mm512_xor_si512(first, flip1);
        let hi = _mm512_xor_si512(last, flip2);
        let swapped = _mm512_shuffle_epi8(lo, reverse);
        // lo · hi as 128 bits from four 32×32→64 products: the middle sum
        // cannot overflow, (2³²−1)² + 2·(2³²−1) = 2⁶⁴ − 1.
        let (lo_high, hi_high) = (_mm512_srli_epi64::<32>(lo), _mm512_srli_epi64::<32>(hi));
        let ll = mul_low_halves(lo, hi);
        let lh = mul_low_halves(lo, hi_high);
        let hl = mul_low_halves(lo_high, hi);
        let hh = mul_low_halves(lo_high, hi_high);
        let middle = _mm512_add_epi64(
            _mm512_add_epi64(hl, _mm512_srli_epi64::<32>(ll)),
            _mm512_and_si512(lh, low32),
        );
        let high = _mm512_add_epi64(
            _mm512_add_epi64(hh, _mm512_srli_epi64::<32>(lh)),
            _mm512_srli_epi64::<32>(middle),
        );
        let low = _mm512_or_si512(_mm512_slli_epi64::<32>(middle), _mm512_and_si512(ll, low32));
        let acc = _mm512_add_epi64(
            _mm512_add_epi64(lens, swapped),
            _mm512_add_epi64(hi, _mm512_xor_si512(low, high)),
        );
        // avalanche: xorshift 37, multiply, xorshift 32.
        let h = _mm512_xor_si512(acc, _mm512_srli_epi64::<37>(acc));
        let h = _mm512_mullo_epi64(h, prime);
        let h = _mm512_xor_si512(h, _mm512_srli_epi64::<32>(h));
        // SAFETY: `slots` is 64 writable bytes; only the short keys' lanes
        // are written, and the store needs no alignment.
        unsafe { _mm512_mask_storeu_epi64(slots.as_mut_ptr().cast(), short, h) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Keys of every length from 0 to 40 (mostly 9 to 16, the wide path's),
    /// random bytes and seeds (seed 0 among them), groups cut short at
    /// every remainder of eight: each hash equals the scalar xxh3's, and
    /// no key past the group is taken.
    #[test]
    fn equals_the_scalar_hash_key_by_key() {
        let mut state = 11u64;
        for round in 0..300u64 {
            let step = usize::from(u8::try_from(round % 251).unwrap());
            let count = match round % 5 {
                0 => GROUP + 1 + step % 9,
                1 => (step * 7) % GROUP,
                _ => GROUP * 2,
            };
            let keys: Vec<Vec<u8>> = (0..count)
                .map(|_| {
                    let r = splitmix(&mut state);
                    let len = usize::from(
                        u8::try_from(if r.is_multiple_of(4) {
                            (r >> 8) % 41
                        } else {
                            9 + (r >> 8) % 8
                        })
                        .unwrap(),
                    );
                    (0..len)
                        .map(|_| splitmix(&mut state).to_le_bytes()[0])
                        .collect()
                })
                .collect();
            let seed = if round % 3 == 0 {
                0
            } else {
                splitmix(&mut state)
            };
            let mut iter = keys.iter();
            let mut out = [0u64; GROUP];
            let mut done = 0;
            loop {
                let taken = hash_keys(&mut iter, seed, &mut out);
                assert_eq!(taken, (count - done).min(GROUP));
                for (key, hash) in keys[done..done + taken].iter().zip(&out) {
                    assert_eq!(*hash, hash_key_seeded(key, seed), "{key:?} seed {seed}");
                }
                done += taken;
                if taken < GROUP {
                    break;
                }
            }
            assert_eq!(done, count);
        }
    }

    /// The test above reaches the wide path on this machine when it has
    /// AVX-512 (or it only tests the scalar loop).
    #[test]
    fn the_wide_path_is_taken_where_the_cpu_has_it() {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let all = has!("avx512f") && has!("avx512vl") && has!("avx512bw") && has!("avx512dq");
            assert_eq!(has_avx512(), all && !cfg!(miri));
        }
    }
}
