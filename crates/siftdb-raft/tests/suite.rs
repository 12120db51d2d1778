//! openraft's own storage test suite (`openraft::testing::Suite`, every
//! test of it) against the siftdb log store and state machine, each test on
//! a fresh node directory.

use openraft::testing::{StoreBuilder, Suite};
use openraft::{ErrorSubject, ErrorVerb, StorageError};
use siftdb_raft::{LogStore, NodeId, StateMachine, TypeConfig};
use tempfile::TempDir;

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError<NodeId>> {
        let dir = tempfile::tempdir()
            .map_err(|e| siftdb_raft::codec::Error::io(std::path::Path::new("tempdir"), e))
            .map_err(|e| e.storage(ErrorSubject::Store, ErrorVerb::Write))?;
        let (log, sm, _timings) = siftdb_raft::open_storage(dir.path())
            .map_err(|e| e.storage(ErrorSubject::Store, ErrorVerb::Read))?;
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(Builder).unwrap();
}
