//! The thread-safety of the public handles, checked at compile time: each
//! type is asserted `Send`, `Sync`, or deliberately not, as its doc comment
//! states. A change that makes a handle lose `Send` or `Sync` (a `Cell`,
//! an `Rc`, a raw pointer inside) stops this file compiling, before an
//! application finds out.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

/// Compiles only when `T` is `Send + Sync`.
const fn send_sync<T: Send + Sync>() {}

/// Compiles only when `T` is `Send`.
const fn send<T: Send>() {}

/// `<T as AmbiguousIfSync<_>>::CHECK` names one item when `T` is not
/// `Sync` and two (an ambiguity, a compile error) when it is: a static
/// "not `Sync`" assertion.
trait AmbiguousIfSync<A> {
    const CHECK: () = ();
}
impl<T: ?Sized> AmbiguousIfSync<()> for T {}
impl<T: ?Sized + Sync> AmbiguousIfSync<u8> for T {}

const _: () = {
    send_sync::<siftdb::Db>();
    send_sync::<siftdb::Keyspace>();
    send_sync::<siftdb::Snapshot>();
    send_sync::<siftdb::Transaction>();
    // Scans are `Send` (move one to another thread) but deliberately not
    // `Sync`: every read of a scan takes `&mut self`, so a shared
    // `&DbIterator` could do nothing, and `Sync` would ask it of every
    // table and memtable cursor inside.
    send::<siftdb::DbIterator>();
    send::<siftdb::TransactionIter>();
    let () = <siftdb::DbIterator as AmbiguousIfSync<_>>::CHECK;
    let () = <siftdb::TransactionIter as AmbiguousIfSync<_>>::CHECK;
    send_sync::<siftdb::WriteBatch>();
    send_sync::<siftdb::Secondary>();
    send_sync::<siftdb::TableWriter>();
    send_sync::<siftdb::backup::BackupEngine>();
    send_sync::<siftdb::Error>();
};

#[cfg(feature = "tokio")]
const _: () = {
    send_sync::<siftdb::AsyncDb>();
    send_sync::<siftdb::AsyncKeyspace>();
    // Like `DbIterator`: `Send`, not `Sync` (its reads take `&mut self`).
    send::<siftdb::AsyncIter>();
    let () = <siftdb::AsyncIter as AmbiguousIfSync<_>>::CHECK;
    send_sync::<siftdb::AsyncTransaction>();
};

/// The assertions above run at compile time; this test is what makes
/// `cargo test --test api_traits` build them.
#[test]
fn public_handles_are_thread_safe() {}
