//! Placeholder; the filter benchmark is written in the filter issue.
fn main() {}
