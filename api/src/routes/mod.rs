//! HTTP handlers, one module per resource.

pub mod export;
pub mod health;
pub mod me;
pub mod usage;
