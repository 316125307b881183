//! The one integration test binary: drives the fleet against real Postgres and Redis.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions fail loudly too"
)]

mod api;
mod dispatcher;
mod metrics;
mod modctl;
mod openai;
mod queue;
mod registry;
mod url_guard;
