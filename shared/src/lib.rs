//! The library the api, worker, dispatcher and modctl share.
//!
//! It owns configuration parsing, the Postgres pool and one module per table, the Redis
//! connection, domain newtypes (ids, scopes), API key handling, media hashing for the hash
//! banks and telemetry. It must not depend on an HTTP framework or own a process lifecycle:
//! binaries combine its pieces into their own settings and run loops.

pub mod batch;
pub mod client_ip;
pub mod clock;
pub mod config;
pub mod crypto;
pub mod db;
pub mod domain;
pub mod endpoint_health;
pub mod export;
pub mod keys;
pub mod lifecycle;
pub mod limits;
pub mod media_hash;
pub mod outcome;
pub mod passwords;
pub mod policy;
pub mod policy_input;
pub mod provisioning;
pub mod queue;
pub mod redis_conn;
pub mod registry;
pub mod review;
pub mod runtime;
pub mod signing;
pub mod telemetry;
pub mod url_guard;
pub mod usage;
pub mod webhook_body;
