//! HTTP handlers, one module per resource.

pub mod export;
pub mod health;
pub mod jobs;
pub mod me;
pub mod policies;
pub mod registry;
pub mod submissions;
pub mod usage;
pub mod webhooks;
