//! Optimistic transactions: a transaction reads the database as of its
//! start, sees its own writes, and commits them as one atomic batch — or
//! fails with `Error::Conflict`, having written nothing, and the application
//! retries it.
//!
//! Isolation: `db.transaction()` gives snapshot isolation. The commit checks
//! the keys the transaction wrote and the keys it read with
//! `get_for_update` (first committer wins), so lost updates cannot happen;
//! write skew can (two transactions that each read what the other writes
//! may both commit). `db.transaction_with(TransactionOptions::serializable())`
//! also checks every key and range it read: committed transactions are then
//! serializable in commit order (see docs/design.md, "Isolation levels").
//!
//! Run with: `cargo run --example transactions`

use siftdb::{Db, Error, TransactionOptions};

fn balance(value: Option<bytes::Bytes>) -> i64 {
    value
        .and_then(|v| std::str::from_utf8(&v).ok()?.parse().ok())
        .unwrap_or(0)
}

/// Adds `delta` to the counter `key`, retrying on conflict; returns the retries.
fn add(db: &Db, key: &str, delta: i64) -> siftdb::Result<u32> {
    let mut retries = 0;
    loop {
        let mut txn = db.transaction();
        let value = balance(txn.get_for_update(key)?);
        txn.put(key, (value + delta).to_string())?;
        match txn.commit() {
            Err(Error::Conflict) => retries += 1, // another commit won: run it again
            other => return other.map(|()| retries),
        }
    }
}

fn main() -> siftdb::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path())?;
    db.put("acct:a", "100")?;
    db.put("acct:b", "0")?;

    // Reads and writes: a transfer. Other readers see none of it until commit.
    let mut txn = db.transaction();
    let a = balance(txn.get_for_update("acct:a")?);
    let b = balance(txn.get_for_update("acct:b")?);
    txn.put("acct:a", (a - 30).to_string())?;
    txn.put("acct:b", (b + 30).to_string())?;
    println!("inside: a = {}", balance(txn.get("acct:a")?)); // its own write
    println!("outside, before commit: a = {}", balance(db.get("acct:a")?));
    txn.commit()?;
    println!(
        "after commit: a = {}, b = {}",
        balance(db.get("acct:a")?),
        balance(db.get("acct:b")?)
    );

    // Two concurrent transactions update the same key: the first to commit
    // wins; the second gets `Conflict` and nothing of it is written.
    let mut first = db.transaction();
    let mut second = db.transaction();
    let seen_by_first = balance(first.get_for_update("acct:b")?);
    let seen_by_second = balance(second.get_for_update("acct:b")?);
    first.put("acct:b", (seen_by_first + 1).to_string())?;
    second.put("acct:b", (seen_by_second + 5).to_string())?;
    first.commit()?;
    match second.commit() {
        Err(Error::Conflict) => println!("second commit: conflict, retry it"),
        other => println!("unexpected: {other:?}"),
    }
    println!(
        "b = {} (only the first commit's +1)",
        balance(db.get("acct:b")?)
    );
    assert_eq!(balance(db.get("acct:b")?), 31);

    // The retry loop of `add`, from two threads at once: every increment lands.
    let retries = std::thread::scope(|scope| {
        let worker = || (0..200).try_fold(0, |sum, _| add(&db, "hits", 1).map(|r| sum + r));
        let other = scope.spawn(worker);
        let mine = worker()?;
        let theirs = other
            .join()
            .unwrap_or(Err(Error::Panicked("worker".into())))?;
        Ok::<_, Error>(mine + theirs)
    })?;
    println!(
        "hits = {} after 400 increments, {retries} retries",
        balance(db.get("hits")?)
    );
    assert_eq!(balance(db.get("hits")?), 400);

    // A read changed under a transaction: it read acct:a with a plain `get`
    // and wrote another key while acct:a was written. Snapshot isolation
    // does not check plain reads (hence write skew): it commits. A
    // serializable transaction checks them: `Conflict`.
    for (name, options) in [
        ("snapshot", TransactionOptions::new()),
        ("serializable", TransactionOptions::serializable()),
    ] {
        let mut reader = db.transaction_with(options);
        let a = balance(reader.get("acct:a")?);
        reader.put("audit", format!("a was {a}"))?;
        db.put("acct:a", (a - 1).to_string())?; // a concurrent write of what it read
        let outcome = reader.commit();
        println!("{name}: commit after its read changed: {outcome:?}");
        assert_eq!(
            matches!(outcome, Err(Error::Conflict)),
            name == "serializable"
        );
    }

    let stats = db.stats();
    println!(
        "commits {}, conflicts {}",
        stats.transaction_commits, stats.transaction_conflicts
    );
    db.close()
}
