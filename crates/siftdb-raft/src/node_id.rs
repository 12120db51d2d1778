//! A node's id in the cluster, below every module that names a node: the
//! storage codec and snapshot files as well as the replicated types.
//!
//! Owns: [`NodeId`].
//! Must never: import another module of this crate.

/// A node's id in the cluster.
pub type NodeId = u64;
