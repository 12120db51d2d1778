//! `Options::total_memtable_bytes`: every keyspace's memtables together,
//! active and waiting to be flushed, stay within the budget (plus one
//! write), however many keyspaces are written, and nothing written is lost.

use siftdb::{Db, Options, Stats};

const BUDGET: usize = 1 << 20;
const KEYSPACES: usize = 8;

fn memtables(stats: &Stats) -> usize {
    stats.memtable_bytes + stats.immutable_memtable_bytes
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("{i:08}").into_bytes();
    v.resize(1000, b'v');
    v
}

/// Eight keyspaces with 64 MiB memtables each, 8 MiB written across them
/// under a 1 MiB budget: after every write their memtables hold at most
/// the budget and one write (without the budget they would hold all 8
/// MiB: no memtable is ever full), the budget's flushes left tables, and
/// every key reads back, before and after a reopen.
#[test]
fn many_keyspaces_stay_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options::default().total_memtable_bytes(BUDGET);
    let names: Vec<String> = (0..KEYSPACES).map(|k| format!("ks{k}")).collect();
    let writes = 8 * 1024u32;
    let mut most = 0usize;
    {
        let db = Db::open_with(dir.path(), opts()).unwrap();
        let spaces: Vec<_> = names.iter().map(|n| db.keyspace(n).unwrap()).collect();
        for i in 0..writes {
            let ks = &spaces[i as usize % KEYSPACES];
            ks.put(format!("key{i:06}"), value(i)).unwrap();
            most = most.max(memtables(&db.stats()));
        }
        let stats = db.stats();
        assert!(
            most <= BUDGET + 16 * 1024,
            "memtables reached {most} bytes under a {BUDGET}-byte budget"
        );
        assert!(stats.flushes >= 4, "{} flushes", stats.flushes);
        assert!(stats.table_count >= 4, "{} tables", stats.table_count);
        for (k, ks) in spaces.iter().enumerate() {
            assert_eq!(ks.iter().count(), writes as usize / KEYSPACES, "ks{k}");
        }
        drop(spaces); // keyspace handles hold the database open
        db.close().unwrap();
    }
    let db = Db::open_with(dir.path(), opts()).unwrap();
    for i in (0..writes).step_by(7) {
        let ks = db.keyspace(&names[i as usize % KEYSPACES]).unwrap();
        assert_eq!(
            ks.get(format!("key{i:06}")).unwrap().as_deref(),
            Some(&value(i)[..]),
            "key{i:06}"
        );
    }
}

/// A budget below the smallest the option takes is refused at open.
#[test]
fn a_tiny_budget_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let refused = Db::open_with(dir.path(), Options::default().total_memtable_bytes(100));
    assert!(matches!(refused, Err(siftdb::Error::InvalidArgument(_))));
}
