//! Classification end to end: jobs submitted through the api, decided by a worker, read back
//! through the api, with their webhook delivery rows.

mod media;
mod model;
mod text;

use moderation_shared::url_guard::UrlGuard;
use moderation_tests::{spawn_app_with, TestApp};

/// An api that, like the test fleet's worker, lets media and webhook URLs reach loopback.
async fn fleet_app() -> TestApp {
    spawn_app_with(|s| s.url_guard = UrlGuard::system(true)).await
}
