//! Adapters: implementations of the ports.

pub mod embedded;
pub mod local_assets;
pub mod local_keys;
