use siftdb::workload::{key, value, shuffle};
fn main() {
    let n: u64 = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(200_000);
    let dir = tempfile::tempdir().unwrap();
    let db = siftdb::Db::open(dir.path()).unwrap();
    for j in shuffle(n, 42) { db.put(key(2 * j), value(2 * j)).unwrap(); }
    db.flush().unwrap(); db.wait_for_background().unwrap();
    eprintln!("{:?}", db.stats());
    let order = shuffle(n, 7);
    let t = std::time::Instant::now();
    for round in 0..5 { for &j in &order { let k = key(2 * j + (round % 2)); let v = db.get(k).unwrap(); assert_eq!(v.is_some(), round % 2 == 0); } }
    eprintln!("{:.0} ns/get", t.elapsed().as_nanos() as f64 / (5 * n) as f64);
}
