//! nib's library: everything that is not a process entry point.
//!
//! # Layout
//!
//! Three crates below this one hold the picture's fixed parts, re-exported under their old
//! paths: [`domain`] (`nib-domain`: pages, lines, task links, ids and dates, the structure
//! parser, task reconciliation, search text; pure), [`ports`] (`nib-ports`: every trait the core
//! talks to) and `adapters::embedded` (`nib-embedded`, feature `local`: the redb store, the only
//! crate that links redb). `ocr` (feature `ocr`) is the `nib-ocr` crate: page rasters, the
//! layout of lines, tasks and checkboxes, and the local PP-OCR engine (feature `ocr-local`).
//!
//! - [`embed`]: the static embedding model for search by meaning.
//! - [`crypto`]: AES-256-GCM field sealing and the per-user key vault (the only place plaintext
//!   data keys live).
//! - [`adapters`]: implementations of the ports (local key file, local asset directory, Notion,
//!   rate limits, remote OCR providers, and `aws`: DynamoDB, S3, KMS, Lambda, Textract).
//! - [`config`]: the typed configuration of the AWS back end, read from the environment.
//! - [`account`]: the user index (`nib user list`) and account deletion by key destruction.
//! - [`notebook`]: the application services: import, pages, tasks, search, over the ports.
//! - [`tools`]: the tool catalog (one definition per tool) and one module per tool.
//! - [`mcp`]: the MCP server on rmcp's model types: lifecycle, tools, resources, prompts.
//! - [`auth`]: tokens, scopes, signed session ids, passwords, and the OAuth authorization server.
//! - [`http`]: the one place that maps HTTP requests to the protocol and errors to statuses,
//!   and the web app.
//! - [`services`]: the wiring: settings, ports opened once, the services built over them.
//! - [`functions`]: what each Lambda function builds at cold start and does per event (the
//!   crates in `functions/` only read their configuration and call it).
//! - [`doctor`], [`smoke`], [`telemetry`], [`uploads`]: deployment checks, a live connector's
//!   check, logging, and the upload keys the web app and ingest agree on.
//!
//! ARCHITECTURE.md at the top of the repository has the code map and the invariants.

pub mod account;
pub mod adapters;
pub mod auth;
pub mod config;
pub mod crypto;
pub mod doctor;
pub use nib_domain as domain;
pub mod embed;
pub mod functions;
pub mod http;
pub mod mcp;
pub mod notebook;
#[cfg(feature = "ocr")]
pub use nib_ocr as ocr;
pub use nib_ports as ports;
pub mod services;
pub mod smoke;
pub mod telemetry;
pub mod tools;
pub mod uploads;
