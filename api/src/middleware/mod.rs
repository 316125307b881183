//! Cross-cutting middleware, one file each: request ids, logging and request metrics
//! ([`observe()`]), the contract's error body for the framework's own errors ([`json_errors()`]),
//! and turning panics into a generic 500 ([`catch_panic()`]). The order they wrap the app in is
//! set, and explained, in `startup`.

mod catch_panic;
mod json_errors;
mod observe;

pub use catch_panic::catch_panic;
pub use json_errors::json_errors;
pub use observe::{observe, REQUEST_ID};
