//! Tests of the api process.

mod auth;
mod endpoint;
mod errors;
mod export;
mod failover;
mod health;
mod idempotency;
mod jobs;
mod limits;
mod openapi;
mod outage;
mod submissions;
mod usage;
mod webhooks;
