//! The thin HTTP API of the moderation service (actix-web).
//!
//! It validates, authenticates, persists to Postgres, enqueues and answers reads. It never
//! classifies content and never sends webhooks: those belong to the worker and the dispatcher.

pub mod auth;
pub use moderation_shared::client_ip;
pub mod error;
pub mod intake;
pub mod limits;
pub mod middleware;
pub mod multipart;
pub mod openapi;
pub mod routes;
pub mod settings;
pub mod startup;
pub mod state;

pub use settings::ApiSettings;
pub use startup::Application;
