//! Adapters: implementations of the ports.

pub mod aws;
pub mod embedded;
pub mod local_assets;
pub mod local_keys;
pub mod notion;
/// A stand-in for Notion's API (tests only).
#[cfg(any(test, feature = "testing"))]
pub mod notion_standin;
pub mod rate_limit;
