//! The `siftdb` command line.

fn main() {
    println!("siftdb {}", env!("CARGO_PKG_VERSION"));
}
