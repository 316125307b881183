//! Building and running the HTTP server.

use std::net::TcpListener;

use actix_web::{dev::Server, middleware::from_fn, web, App, HttpServer};
use moderation_shared::{
    config::DatabaseSettings, db, queue::JobQueue, redis_conn::RedisConn, telemetry,
};

use crate::{
    auth::{self, Authenticator},
    error,
    intake::Intake,
    limits::{exports::ExportSlots, in_flight::InFlight, Limiter},
    middleware, openapi, routes,
    settings::ApiSettings,
    state::AppState,
};

/// The largest JSON body any endpoint accepts.
const JSON_LIMIT: usize = 256 * 1024;

/// A built, not yet running, api server.
pub struct Application {
    port: u16,
    server: Server,
}

impl Application {
    /// Binds `settings.host:settings.port` and builds the server.
    pub fn build(settings: ApiSettings) -> anyhow::Result<Self> {
        let listener = TcpListener::bind((settings.host.as_str(), settings.port))?;
        Self::build_with_listener(settings, listener)
    }

    /// Builds the server on an already bound listener.
    pub fn build_with_listener(
        settings: ApiSettings,
        listener: TcpListener,
    ) -> anyhow::Result<Self> {
        let pool = db::pool(&settings.database)?;
        let export_pool = db::pool(&DatabaseSettings {
            pool_size: settings.exports.concurrency,
            ..settings.database.clone()
        })?;
        let redis = RedisConn::new(&settings.redis)?;
        if settings.url_guard.allows_private() {
            tracing::warn!("APP_ALLOW_PRIVATE_URLS is on: URLs may reach private addresses (development and tests only)");
        }
        let queue = JobQueue::new(redis.clone());
        let state = web::Data::new(AppState {
            auth: Authenticator::new(pool.clone(), settings.auth_cache_ttl),
            intake: Intake::start(pool.clone(), queue.clone()),
            pool,
            queue,
            limiter: Limiter::new(redis.clone(), settings.limits.clone()),
            in_flight: InFlight::new(settings.limits.auth_concurrency),
            trusted_proxies: settings.trusted_proxies.clone(),
            export_slots: ExportSlots::new(
                settings.exports.concurrency,
                settings.exports.per_account,
            ),
            export_pool,
            export_settings: settings.exports.clone(),
            redis,
            url_guard: settings.url_guard.clone(),
            encryption_key: settings.encryption_key.clone(),
            metrics: telemetry::install_metrics(),
            registry_key: settings.registry_key.clone(),
            request_deadline: settings.request_deadline,
            retention: settings.retention,
            health: settings.health.clone(),
        });
        metrics::gauge!(telemetry::PROCESS_UP, "process" => "api").set(1.0);
        telemetry::zero_api_counters();
        telemetry::zero_endpoint_counters();
        let port = listener.local_addr()?.port();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(state.clone())
                .configure(configure)
                // Actix runs the last-wrapped middleware first: a request meets these from the
                // bottom up. `observe` is outermost so it ids, logs and times every answer,
                // refusals and panics included; `json_errors` gives the contract's body to the
                // framework's non-JSON errors from everything inside it; `catch_panic` turns a
                // panic below it into a 500 before it unwinds through the others; `deadline`
                // answers 503 for anything below it (authentication included, which reads
                // Postgres and Redis) that has not answered in time; `authenticate` is
                // innermost, next to the handlers it guards, and reads the route `observe`
                // matched.
                .wrap(from_fn(auth::authenticate))
                .wrap(from_fn(middleware::deadline))
                .wrap(from_fn(middleware::catch_panic))
                .wrap(from_fn(middleware::json_errors))
                .wrap(from_fn(middleware::observe))
        })
        .workers(settings.http_workers)
        .listen(listener)?
        .run();
        Ok(Self { port, server })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Serves until the server is stopped (SIGINT/SIGTERM stop it gracefully).
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
    }
}

/// Registers the extractor error handlers, so their failures use the contract's body.
pub fn configure_extractors(cfg: &mut web::ServiceConfig) {
    cfg.app_data(
        web::JsonConfig::default()
            .limit(JSON_LIMIT)
            .error_handler(error::json_error),
    )
    .app_data(web::QueryConfig::default().error_handler(error::query_error))
    .app_data(web::PathConfig::default().error_handler(error::path_error));
}

/// Registers every route. Each route here has a row in [`auth::ENDPOINTS`].
pub fn configure(cfg: &mut web::ServiceConfig) {
    configure_extractors(cfg);
    cfg.service(routes::resource("/health").route(web::get().to(routes::health::health)))
        .service(routes::resource("/metrics").route(web::get().to(routes::health::metrics)))
        .service(
            web::scope(auth::API_PREFIX)
                .service(
                    routes::resource("/openapi.json").route(web::get().to(openapi::openapi_json)),
                )
                .configure(routes::me::configure)
                .configure(routes::submissions::configure)
                .configure(routes::jobs::configure)
                .configure(routes::webhooks::configure)
                .configure(routes::endpoint::configure)
                .configure(routes::deliveries::configure)
                .configure(routes::export::configure)
                .configure(routes::usage::configure)
                .configure(routes::registry::configure)
                .configure(routes::policies::configure)
                .configure(routes::policy::configure)
                .configure(routes::audit::configure)
                .configure(routes::review::configure)
                .configure(routes::appeals::configure),
        )
        .configure(routes::webhooks::configure_root)
        .default_service(web::to(routes::not_found));
}
