//! Building and running the HTTP server.

use std::net::TcpListener;

use actix_web::{dev::Server, middleware::from_fn, web, App, HttpServer};
use moderation_shared::{
    db, limits::Limiter, passwords, queue::JobQueue, redis_conn::RedisConn, telemetry,
};

use crate::{
    headers,
    preferences::Preferences,
    routes,
    sessions::SessionStore,
    settings::DashboardSettings,
    state::{AppState, ExportPermits},
};

/// A built, not yet running, dashboard server.
pub struct Application {
    port: u16,
    server: Server,
}

impl Application {
    /// Binds `settings.host:settings.port` and builds the server.
    pub fn build(settings: DashboardSettings) -> anyhow::Result<Self> {
        let listener = TcpListener::bind((settings.host.as_str(), settings.port))?;
        Self::build_with_listener(settings, listener)
    }

    /// Builds the server on an already bound listener.
    pub fn build_with_listener(
        settings: DashboardSettings,
        listener: TcpListener,
    ) -> anyhow::Result<Self> {
        let pool = db::pool(&settings.database)?;
        let redis = RedisConn::new(&settings.redis)?;
        if settings.insecure_cookies {
            tracing::warn!("APP_DASHBOARD_INSECURE_COOKIES is on: session cookies go over plain HTTP (development only)");
        }
        let state = web::Data::new(AppState {
            pool,
            sessions: SessionStore::new(redis.clone()),
            preferences: Preferences::new(redis.clone()),
            limiter: Limiter::new(redis.clone(), settings.limits.clone()),
            trusted_proxies: settings.trusted_proxies.clone(),
            queue: JobQueue::new(redis.clone()),
            url_guard: settings.url_guard.clone(),
            encryption_key: settings.encryption_key.clone(),
            registry_key: settings.registry_key.clone(),
            redis,
            decoy_hash: passwords::decoy()?,
            metrics: telemetry::install_metrics(),
            exports: ExportPermits::default(),
            insecure_cookies: settings.insecure_cookies,
            retention: settings.retention,
            health: settings.health.clone(),
        });
        metrics::gauge!(telemetry::PROCESS_UP, "process" => "dashboard").set(1.0);
        telemetry::zero_review_counters();
        telemetry::zero_endpoint_counters();
        let port = listener.local_addr()?.port();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(state.clone())
                .configure(routes::configure)
                .wrap(from_fn(headers::security_headers))
        })
        .workers(2)
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
