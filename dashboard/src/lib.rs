//! The server-rendered web dashboard of the moderation service (actix-web and askama).
//!
//! People sign in with an email and password (`modctl user create`) and act for their account:
//! keys, jobs, submissions, webhooks and settings. Everything is read and written through
//! `moderation_shared`, never by calling the api over HTTP. Pages are plain HTML forms with no
//! script; the stylesheet is embedded in the binary. Sessions live in Redis ([`sessions`], [`session`]),
//! every form carries a CSRF token ([`form`]), and every answer carries the security headers
//! ([`headers`]).

pub mod chart;
pub mod cursor;
pub mod error;
pub mod form;
pub mod headers;
pub mod nav;
pub mod pages;
pub mod policy_form;
pub mod policy_view;
pub mod routes;
pub mod session;
pub mod sessions;
pub mod settings;
pub mod startup;
pub mod state;

pub use settings::DashboardSettings;
pub use startup::Application;
