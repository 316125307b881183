//! Tests of the api process.

mod auth;
mod errors;
mod export;
mod health;
mod limits;
mod usage;
