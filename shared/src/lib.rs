//! nib's library: everything that is not a process entry point.
//!
//! # Layout
//!
//! - [`domain`]: pages, lines, task links, ids and dates, the structure parser, task
//!   reconciliation and search text handling. Pure: no I/O, no JSON-RPC, no HTTP.
//! - [`ports`]: the traits the core talks to (`Store`, `Keys`, `Assets`, `Clock`, `RateLimiter`,
//!   and `Ocr`, defined in the `nib-ocr` crate and named here).
//! - `ocr` (feature `ocr`): the `nib-ocr` crate (`shared/ocr`): page rasters, the layout of
//!   lines, tasks and checkboxes, and the local PP-OCR engine (feature `ocr-local`).
//! - [`embed`]: the static embedding model for search by meaning (built into the binary).
//! - [`crypto`]: AES-256-GCM field sealing and the per-user key vault (the only place plaintext
//!   data keys live).
//! - [`adapters`]: implementations of the ports (`embedded` redb store, local key file, local
//!   asset directory, and `aws`: DynamoDB, S3, KMS).
//! - [`config`]: the typed configuration of the AWS back end, read from the environment.
//! - [`account`]: the user index (`nib user list`) and account deletion by key destruction.
//! - [`notebook`]: the application services: import, pages, tasks, search, over the ports.
//! - [`tools`]: the tool catalog (one definition per tool) and one module per tool.
//! - [`mcp`]: the MCP server handler on top of `rmcp`: lifecycle, tools/list, tools/call.
//! - [`auth`]: tokens, scopes, signed session ids, passwords, and the OAuth authorization server.
//! - [`http`]: the one place that maps HTTP requests to the protocol and errors to statuses.
//! - [`functions`]: what each Lambda function builds at cold start and does per event (the
//!   crates in `functions/` only read their configuration and call it).
//!
//! ARCHITECTURE.md at the top of the repository has the code map and the invariants.

pub mod account;
pub mod adapters;
pub mod auth;
pub mod config;
pub mod crypto;
pub mod doctor;
pub mod domain;
pub mod embed;
pub mod functions;
pub mod http;
pub mod mcp;
pub mod notebook;
#[cfg(feature = "ocr")]
pub use nib_ocr as ocr;
pub mod ports;
pub mod services;
pub mod smoke;
pub mod telemetry;
pub mod tools;
pub mod uploads;
