//! The web dashboard: sessions, CSRF and headers over plain HTTP (`session`, `keys`, `jobs`,
//! `users`), and the pages driven in a real browser (`browser`).

mod audit;
mod browser;
mod export;
mod jobs;
mod keys;
mod overview;
mod policy;
mod policy_versions;
mod registry;
mod session;
mod users;
mod webhooks;
