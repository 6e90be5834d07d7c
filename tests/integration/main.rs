//! Workspace-level integration tests: the server over real HTTP on port 0, and the `nib` binary.
//!
//! One test binary (fast to link); modules by subject. It is the package `nib-tests`
//! (`tests/Cargo.toml`), so the binaries it runs are other packages': `cargo build --workspace
//! --bins` first (`make test` does), and [`helpers::nib_exe`] finds `nib` beside this binary.

mod helpers;

mod access;
mod account;
mod app;
mod app_data;
mod architecture;
mod aws;
mod browser;
mod bundle;
mod cli;
mod confirm;
mod corrections;
mod golden;
mod lambda;
mod notebook;
mod notes;
mod notion;
mod oauth;
mod ocr;
mod ocr_remote;
mod operate;
mod pages;
mod protocol;
mod ratelimit;
mod resources;
mod search;
mod storage;
mod task_detail;
mod trash;
mod watch;
