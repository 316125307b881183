//! Cross-cutting middleware, one file each: request ids, logging and request metrics
//! ([`observe()`]), the contract's error body for the framework's own errors ([`json_errors()`]),
//! turning panics into a generic 500 ([`catch_panic()`]), and the request deadline
//! ([`deadline()`]). The order they wrap the app in is
//! set, and explained, in `startup`.

mod catch_panic;
mod deadline;
mod json_errors;
mod observe;

pub use catch_panic::catch_panic;
pub use deadline::deadline;
pub use json_errors::json_errors;
pub use observe::{observe, REQUEST_ID};
