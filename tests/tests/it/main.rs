//! The one integration test binary: drives the fleet against real Postgres and Redis.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions fail loudly too"
)]

mod api;
mod chaos;
mod classification;
mod dashboard;
mod dispatcher;
mod fetch;
mod lifecycle;
mod metrics;
mod modctl;
mod model_server;
mod models;
mod openai;
mod policies;
mod queue;
mod redis_modes;
mod registry;
mod rescue;
mod review;
mod structure;
mod url_guard;
