//! HTTP handlers, one module per resource.

pub mod health;
pub mod me;
pub mod registry;
