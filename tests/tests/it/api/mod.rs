//! Tests of the api process.

mod auth;
mod errors;
mod health;
mod jobs;
mod submissions;
mod webhooks;
