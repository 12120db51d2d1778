//! The skiplist's tests of inserts and reads from several threads at once,
//! sized so Miri can run them: Miri checks that what a reader reaches
//! through an acquire load was written before the release compare-and-swap
//! that published it (a data race or a read of unwritten memory there is
//! undefined behaviour it reports), and its weak-memory emulation lets
//! loads see older values than a real CPU would.
//!
//! Owns: tests only. Must never: take minutes under Miri (a few writers,
//! a few dozen entries each there).

use super::*;
use crate::key::compare_internal_keys;

/// `(writers, entries per writer)`: small under Miri, more elsewhere.
const fn sizes() -> (u64, u64) {
    if cfg!(miri) {
        (3, 24)
    } else {
        (4, 3000)
    }
}

/// Writer `w`'s `i`th entry: every fourth is the same (user key, tag) for
/// every writer (one insert wins, the others are duplicates), the rest
/// interleave with the other writers' (so their CASes meet). The value
/// repeats the user key, so a reader can tell a whole node from a torn one.
fn entry_of(w: u64, i: u64) -> (Vec<u8>, u64, Vec<u8>) {
    let (key, tag) = if i.is_multiple_of(4) {
        (format!("k{i:05}-shared"), 1 << 8 | 1)
    } else {
        (format!("k{i:05}-{w}"), (w + 1) << 8 | 1)
    };
    let value = key.repeat(1 + (i % 3) as usize);
    (key.into_bytes(), tag, value.into_bytes())
}

/// Walks level 0: every entry whole (its value repeats its key) and after
/// the one before it; returns how many there are.
fn walk_checked(list: &SkipList) -> usize {
    let mut before: Option<&[u8]> = None;
    let mut count = 0;
    for entry in std::iter::successors(list.first(), Entry::next) {
        let (user_key, _, value) = entry.parts();
        assert!(!user_key.is_empty());
        assert!(
            value.len() % user_key.len() == 0
                && value.chunks(user_key.len()).all(|c| c == user_key),
            "{user_key:?} holds {value:?}"
        );
        let key = entry.internal_key();
        if let Some(before) = before {
            assert_eq!(compare_internal_keys(before, key), Ordering::Less);
        }
        before = Some(key);
        count += 1;
    }
    count
}

#[test]
fn threads_insert_and_read_at_once() {
    let (writers, per_writer) = sizes();
    let list = Arc::new(SkipList::new());
    let inserted = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for w in 0..writers {
            let (list, inserted, finished) = (&list, &inserted, &finished);
            s.spawn(move || {
                for i in 0..per_writer {
                    let (key, tag, value) = entry_of(w, i);
                    match list.insert(&key, tag, &value) {
                        Ok(()) => {
                            inserted.fetch_add(1, AtomicOrdering::Relaxed);
                        }
                        Err(InsertError::Duplicate) => assert!(i.is_multiple_of(4), "{key:?}"),
                        Err(e) => panic!("{e:?}"),
                    }
                }
                finished.fetch_add(1, AtomicOrdering::Release);
            });
        }
        let (list, finished) = (&list, &finished);
        s.spawn(move || {
            let mut cursor = Cursor::new(Arc::clone(list));
            let mut round = 0u64;
            loop {
                let done =
                    finished.load(AtomicOrdering::Acquire) == usize::try_from(writers).unwrap();
                walk_checked(list);
                // A seek, a step back and a step forward between entries
                // other threads are inserting.
                let (key, _, _) = entry_of(round % writers, round % per_writer);
                cursor.seek(&Probe {
                    user_key: &key,
                    tag: u64::MAX,
                });
                if let Some(at) = cursor.entry().map(|e| e.internal_key().to_vec()) {
                    let user_key = at.get(..at.len() - TAG_LEN).unwrap();
                    assert_ne!(compare_bytes(user_key, &key), Ordering::Less);
                    // Before the entry the cursor was at; not necessarily
                    // before `key`, which a writer may have inserted since.
                    cursor.prev();
                    if let Some(entry) = cursor.entry() {
                        let before = entry.internal_key();
                        assert_eq!(compare_internal_keys(before, &at), Ordering::Less);
                        // One step on: at most that entry (one inserted
                        // since may lie between).
                        cursor.next();
                        let next = cursor.entry().map(|e| e.internal_key().to_vec());
                        assert!(next.is_some_and(|n| compare_internal_keys(&n, &at).is_le()));
                    }
                }
                cursor.seek_to_last();
                round += 1;
                if done {
                    break;
                }
                std::thread::yield_now();
            }
        });
    });
    let shared = per_writer.div_ceil(4);
    let expected = writers * (per_writer - shared) + shared;
    assert_eq!(inserted.into_inner() as u64, expected);
    assert_eq!(list.len() as u64, expected);
    assert_eq!(walk_checked(&list) as u64, expected);
    for i in (0..per_writer).step_by(4) {
        let (key, tag, _) = entry_of(0, i);
        let found = list.lower_bound(&Probe {
            user_key: &key,
            tag,
        });
        assert_eq!(found.map(|e| e.parts().0), Some(&key[..]));
    }
}
