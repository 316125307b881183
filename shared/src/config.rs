//! Configuration from environment variables (12-factor).
//!
//! Each concern has a small `from_env()`; binaries combine them into their own settings.
//! Everything is parsed and validated at start-up, and an error names the variable at fault.

use std::{
    fmt,
    ops::{Bound, RangeBounds},
    str::FromStr,
    time::Duration,
};

/// A variable that is present but unusable.
#[derive(Debug, thiserror::Error)]
#[error("invalid environment variable {name}: {reason}")]
pub struct ConfigError {
    /// The variable's name.
    pub name: &'static str,
    /// What is wrong with its value.
    pub reason: String,
}

impl ConfigError {
    /// An error about `name`.
    pub fn new(name: &'static str, reason: impl Into<String>) -> Self {
        Self {
            name,
            reason: reason.into(),
        }
    }
}

/// A value that must not appear in logs: its `Debug` output is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    /// Wraps a secret value.
    pub fn new(value: T) -> Self {
        Self(value)
    }

    /// The secret value itself; call it only where the value is used.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// Reads `name`, or `None` when it is unset or empty.
pub fn env_raw(name: &'static str) -> Result<Option<String>, ConfigError> {
    match std::env::var(name) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(ConfigError::new(name, "not valid UTF-8")),
    }
}

/// Parses `name` when it is set.
pub fn env_opt<T>(name: &'static str) -> Result<Option<T>, ConfigError>
where
    T: FromStr,
    T::Err: fmt::Display,
{
    env_raw(name)?
        .map(|v| {
            v.trim()
                .parse::<T>()
                .map_err(|e| ConfigError::new(name, format!("{e} (got {v:?})")))
        })
        .transpose()
}

/// Where a worker's or the dispatcher's `/metrics` listens: `APP_HOST` (default `0.0.0.0`, as
/// the api) and `METRICS_PORT` (default `default_port`; 0 picks a free one).
pub fn metrics_addr(default_port: u16) -> Result<std::net::SocketAddr, ConfigError> {
    let host = env_or("APP_HOST", std::net::IpAddr::from([0, 0, 0, 0]))?;
    Ok(std::net::SocketAddr::new(
        host,
        env_or("METRICS_PORT", default_port)?,
    ))
}

/// Parses `name`, or returns `default` when it is unset.
pub fn env_or<T>(name: &'static str, default: T) -> Result<T, ConfigError>
where
    T: FromStr,
    T::Err: fmt::Display,
{
    Ok(env_opt(name)?.unwrap_or(default))
}

/// Parses a boolean flag (`true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`).
pub fn env_bool(name: &'static str, default: bool) -> Result<bool, ConfigError> {
    match env_raw(name)?.map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(default),
        Some(v) => match v.as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err(ConfigError::new(
                name,
                format!("expected true or false, got {v:?}"),
            )),
        },
    }
}

/// Parses `name`, or returns `default` when it is unset; zero fails naming the variable (for
/// counts such as pool sizes and concurrency bounds, where zero would refuse everything).
pub fn env_positive<T>(name: &'static str, default: T) -> Result<T, ConfigError>
where
    T: FromStr + Default + PartialEq,
    T::Err: fmt::Display,
{
    let value = env_or(name, default)?;
    if value == T::default() {
        return Err(ConfigError::new(name, "must be at least 1"));
    }
    Ok(value)
}

/// Reads `name` as a whole number of milliseconds within `allowed`, or `default` when it is
/// unset. A value outside `allowed` fails naming the variable: nothing is clamped.
pub fn env_millis(
    name: &'static str,
    default: Duration,
    allowed: impl RangeBounds<u64>,
) -> Result<Duration, ConfigError> {
    parse_millis(name, env_raw(name)?.as_deref(), default, &allowed)
}

/// [`env_millis`] on the raw value `raw` of `name`.
fn parse_millis(
    name: &'static str,
    raw: Option<&str>,
    default: Duration,
    allowed: &impl RangeBounds<u64>,
) -> Result<Duration, ConfigError> {
    let Some(raw) = raw else {
        return Ok(default);
    };
    let value: u64 = raw
        .trim()
        .parse()
        .map_err(|_| ConfigError::new(name, format!("expected milliseconds, got {raw:?}")))?;
    if !allowed.contains(&value) {
        let low = match allowed.start_bound() {
            Bound::Included(&n) => n,
            Bound::Excluded(&n) => n.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let limits = match allowed.end_bound() {
            Bound::Included(&n) => format!("between {low} and {n}"),
            Bound::Excluded(&n) => format!("between {low} and {}", n.saturating_sub(1)),
            Bound::Unbounded => format!("at least {low}"),
        };
        return Err(ConfigError::new(
            name,
            format!("must be {limits} milliseconds, got {value}"),
        ));
    }
    Ok(Duration::from_millis(value))
}

/// Reads the PEM file named by `APP_EXTRA_CA_FILE` (roots trusted besides the system's, for
/// webhook and media TLS), or `None` when it is unset.
pub fn extra_ca_pem_from_env() -> Result<Option<Vec<u8>>, ConfigError> {
    env_raw("APP_EXTRA_CA_FILE")?
        .map(|path| {
            std::fs::read(&path).map_err(|e| {
                ConfigError::new("APP_EXTRA_CA_FILE", format!("cannot read {path}: {e}"))
            })
        })
        .transpose()
}

/// How long opening one connection to one host may take.
pub const PG_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a Postgres connection may go unanswered (sent bytes unacknowledged, or keepalive
/// probes after [`PG_KEEPALIVE_IDLE`] of silence) before the kernel ends it, so a connection to
/// a host that vanished without closing it (a failed machine, a cut route) breaks and is
/// replaced rather than waited on for the quarter of an hour TCP would retransmit.
pub const PG_TCP_USER_TIMEOUT: Duration = Duration::from_secs(20);
/// Silence on a Postgres connection before keepalive probes start (libpq's default is two
/// hours).
pub const PG_KEEPALIVE_IDLE: Duration = Duration::from_secs(10);

/// The connection settings of `url`, read from the variable `variable` (named in the error):
/// a libpq-style URL or key/value string, given a connect timeout and the application name
/// `moderation` unless it names its own, and (unless it sets them) [`PG_TCP_USER_TIMEOUT`]
/// and keepalives from [`PG_KEEPALIVE_IDLE`] on. A URL listing several hosts must say
/// `target_session_attrs=read-write`, so that only the primary is ever used: each new
/// connection tries the hosts in order and keeps the first that takes writes.
pub fn postgres_config(
    url: &str,
    variable: &'static str,
) -> Result<tokio_postgres::Config, ConfigError> {
    let mut pg: tokio_postgres::Config = url
        .parse()
        .map_err(|e: tokio_postgres::Error| ConfigError::new(variable, e.to_string()))?;
    let hosts = pg.get_hosts().len().max(pg.get_hostaddrs().len());
    if hosts > 1
        && pg.get_target_session_attrs() != tokio_postgres::config::TargetSessionAttrs::ReadWrite
    {
        return Err(ConfigError::new(
            variable,
            format!(
                "lists {hosts} hosts: add target_session_attrs=read-write, so that only the \
                 primary is used"
            ),
        ));
    }
    pg.connect_timeout(PG_CONNECT_TIMEOUT);
    if pg.get_tcp_user_timeout().is_none() {
        pg.tcp_user_timeout(PG_TCP_USER_TIMEOUT);
    }
    if pg.get_keepalives_idle() == tokio_postgres::Config::new().get_keepalives_idle() {
        pg.keepalives_idle(PG_KEEPALIVE_IDLE);
    }
    if pg.get_keepalives_interval().is_none() {
        pg.keepalives_interval(Duration::from_secs(5));
    }
    if pg.get_application_name().is_none() {
        pg.application_name("moderation");
    }
    Ok(pg)
}

/// Where Postgres is and how many connections a process may hold.
#[derive(Debug, Clone)]
pub struct DatabaseSettings {
    /// `DATABASE_URL`, a libpq-style URL or key/value string.
    pub url: Secret<String>,
    /// `APP_DB_POOL_SIZE`: the most connections this process opens (default 16).
    pub pool_size: usize,
    /// How long a caller waits for a pooled connection before failing (5 s).
    pub acquire_timeout: Duration,
}

impl DatabaseSettings {
    /// Settings for `url` with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: Secret::new(url.into()),
            pool_size: 16,
            acquire_timeout: Duration::from_secs(5),
        }
    }

    /// Reads `DATABASE_URL` and `APP_DB_POOL_SIZE`.
    pub fn from_env() -> Result<Self, ConfigError> {
        let url = env_raw("DATABASE_URL")?
            .unwrap_or_else(|| "postgres://localhost/moderation".to_owned());
        postgres_config(&url, "DATABASE_URL")?;
        let pool_size = env_positive("APP_DB_POOL_SIZE", 16usize)?;
        Ok(Self {
            pool_size,
            ..Self::new(url)
        })
    }
}

/// How the deployment's Redis is laid out (`REDIS_MODE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisMode {
    /// One server (`REDIS_URL` names it); the default.
    Standalone,
    /// A Redis or Valkey cluster: `REDIS_URL` is a comma-separated list of seed node URLs.
    Cluster,
    /// A master found through Sentinel: `REDIS_URL` is a comma-separated list of sentinels.
    Sentinel {
        /// `REDIS_SENTINEL_MASTER`: the name the sentinels know the master by.
        master: String,
    },
}

/// Where Redis is and the key namespace this deployment uses in it.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// `REDIS_URL`: one URL, or in cluster and sentinel modes a comma-separated list.
    pub url: Secret<String>,
    /// `APP_REDIS_NAMESPACE`: prefix of every key (default `moderation`). Tests give each test
    /// its own, so tests never see each other's keys.
    pub namespace: String,
    /// `REDIS_MODE` (and `REDIS_SENTINEL_MASTER`).
    pub mode: RedisMode,
}

impl RedisSettings {
    /// Settings for a standalone server at `url` in `namespace`.
    pub fn new(url: impl Into<String>, namespace: impl Into<String>) -> Self {
        Self {
            url: Secret::new(url.into()),
            namespace: namespace.into(),
            mode: RedisMode::Standalone,
        }
    }

    /// These settings in `mode`.
    pub fn with_mode(self, mode: RedisMode) -> Self {
        Self { mode, ..self }
    }

    /// The URLs of `REDIS_URL`: the one URL in standalone mode, else each of the list.
    pub fn urls(&self) -> Vec<&str> {
        match self.mode {
            RedisMode::Standalone => vec![self.url.expose().as_str()],
            RedisMode::Cluster | RedisMode::Sentinel { .. } => self
                .url
                .expose()
                .split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .collect(),
        }
    }

    /// Reads `REDIS_MODE`, `REDIS_URL`, `REDIS_SENTINEL_MASTER` and `APP_REDIS_NAMESPACE`.
    pub fn from_env() -> Result<Self, ConfigError> {
        let mode = match env_raw("REDIS_MODE")?.as_deref().map(str::trim) {
            None | Some("standalone") => RedisMode::Standalone,
            Some("cluster") => RedisMode::Cluster,
            Some("sentinel") => RedisMode::Sentinel {
                master: env_raw("REDIS_SENTINEL_MASTER")?.ok_or_else(|| {
                    ConfigError::new(
                        "REDIS_SENTINEL_MASTER",
                        "required with REDIS_MODE=sentinel: the name the sentinels know the master by",
                    )
                })?,
            },
            Some(other) => {
                return Err(ConfigError::new(
                    "REDIS_MODE",
                    format!("{other:?} is not one of standalone, cluster, sentinel"),
                ))
            }
        };
        let url = env_raw("REDIS_URL")?.unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
        let namespace = env_raw("APP_REDIS_NAMESPACE")?.unwrap_or_else(|| "moderation".to_owned());
        if !namespace
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(ConfigError::new(
                "APP_REDIS_NAMESPACE",
                "use only letters, digits, '-', '_' and '.'",
            ));
        }
        let settings = Self::new(url, namespace).with_mode(mode);
        settings.check_urls()?;
        Ok(settings)
    }

    /// Checks every URL of `REDIS_URL`; in cluster mode none may name a database (a cluster
    /// has only database 0).
    pub fn check_urls(&self) -> Result<(), ConfigError> {
        let urls = self.urls();
        if urls.is_empty() {
            return Err(ConfigError::new("REDIS_URL", "no URL given"));
        }
        for url in urls {
            redis::Client::open(url).map_err(|e| ConfigError::new("REDIS_URL", e.to_string()))?;
            if self.mode == RedisMode::Cluster && names_a_database(url) {
                return Err(ConfigError::new(
                    "REDIS_URL",
                    format!(
                        "{} names a database index; a cluster has only database 0, so leave \
                         the path (and any db parameter) out of each seed URL",
                        redacted(url)
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Whether a Redis URL names a database index (a path such as `/2`, or a `db` parameter).
fn names_a_database(url: &str) -> bool {
    let Some(parsed) = redis::parse_redis_url(url) else {
        return false;
    };
    let by_path = matches!(parsed.scheme(), "redis" | "rediss" | "valkey" | "valkeys")
        && !parsed.path().trim_matches('/').is_empty();
    by_path || parsed.query_pairs().any(|(k, _)| k == "db")
}

/// `url` without its password, for a message.
fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_of_several_hosts_must_ask_for_the_one_taking_writes() {
        let two = "postgres://u@a:5432,b:5433/db";

        let refused = postgres_config(two, "APP_X_URL").unwrap_err();
        let taken = postgres_config(
            &format!("{two}?target_session_attrs=read-write"),
            "APP_X_URL",
        )
        .unwrap();
        let one = postgres_config("postgres://u@a:5432/db", "APP_X_URL").unwrap();

        assert_eq!(refused.name, "APP_X_URL");
        assert!(
            refused.reason.contains("target_session_attrs=read-write"),
            "{refused}"
        );
        assert_eq!(taken.get_hosts().len(), 2);
        assert_eq!(taken.get_ports(), [5432, 5433]);
        assert_eq!(taken.get_application_name(), Some("moderation"));
        assert_eq!(one.get_connect_timeout(), Some(&PG_CONNECT_TIMEOUT));
        assert_eq!(one.get_tcp_user_timeout(), Some(&PG_TCP_USER_TIMEOUT));
        assert_eq!(one.get_keepalives_idle(), PG_KEEPALIVE_IDLE);
    }

    #[test]
    fn a_url_keeps_the_keepalive_and_timeout_it_names() {
        let url = "postgres://u@a/db?keepalives_idle=60&tcp_user_timeout=7";

        let pg = postgres_config(url, "APP_X_URL").unwrap();

        assert_eq!(pg.get_keepalives_idle(), Duration::from_secs(60));
        assert_eq!(pg.get_tcp_user_timeout(), Some(&Duration::from_secs(7)));
    }

    #[test]
    fn an_unreadable_postgres_url_fails_naming_the_variable() {
        let err = postgres_config("postgres://u@a:notaport/db", "APP_X_URL").unwrap_err();

        assert_eq!(err.name, "APP_X_URL");
    }

    #[test]
    fn a_cluster_seed_naming_a_database_is_refused_naming_redis_url() {
        let cluster = |url: &str| RedisSettings::new(url, "ns").with_mode(RedisMode::Cluster);
        for bad in [
            "redis://127.0.0.1:7000/0",
            "redis://127.0.0.1:7000,redis://127.0.0.1:7001/3",
            "redis://:hunter2@127.0.0.1:7000/1",
        ] {
            let err = cluster(bad).check_urls().unwrap_err();
            assert_eq!(err.name, "REDIS_URL", "{bad}");
            assert!(!err.reason.contains("hunter2"), "{}", err.reason);
        }
        for good in [
            "redis://127.0.0.1:7000",
            "redis://127.0.0.1:7000/, redis://127.0.0.1:7001",
        ] {
            cluster(good).check_urls().unwrap();
        }
        assert_eq!(
            cluster("redis://a:1, redis://b:2,").urls(),
            ["redis://a:1", "redis://b:2"]
        );
        // Standalone keeps its database index.
        RedisSettings::new("redis://127.0.0.1:6379/2", "ns")
            .check_urls()
            .unwrap();
    }

    #[test]
    fn secret_debug_is_redacted() {
        let s = Secret::new("postgres://user:hunter2@db/x".to_owned());
        assert!(!format!("{s:?}").contains("hunter2"));
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn millis_are_the_default_when_unset() {
        assert_eq!(
            parse_millis("APP_X_MS", None, SECOND, &(1..)).unwrap(),
            SECOND
        );
    }

    #[test]
    fn millis_at_the_lower_limit_pass_and_one_below_fails_naming_the_variable() {
        assert_eq!(
            parse_millis("APP_X_MS", Some("10"), SECOND, &(10..)).unwrap(),
            Duration::from_millis(10)
        );
        let err = parse_millis("APP_X_MS", Some("9"), SECOND, &(10..)).unwrap_err();
        assert_eq!(err.name, "APP_X_MS");
        assert_eq!(err.reason, "must be at least 10 milliseconds, got 9");
    }

    #[test]
    fn millis_at_the_upper_limit_pass_and_one_over_fails_naming_the_variable() {
        assert_eq!(
            parse_millis("APP_X_MS", Some("4000"), SECOND, &(0..=4000)).unwrap(),
            Duration::from_millis(4000)
        );
        assert_eq!(
            parse_millis("APP_X_MS", Some("0"), SECOND, &(0..=4000)).unwrap(),
            Duration::ZERO
        );
        let err = parse_millis("APP_X_MS", Some("4001"), SECOND, &(0..=4000)).unwrap_err();
        assert_eq!(err.name, "APP_X_MS");
        assert_eq!(
            err.reason,
            "must be between 0 and 4000 milliseconds, got 4001"
        );
    }

    #[test]
    fn zero_fails_where_it_is_not_allowed() {
        let err = parse_millis("APP_X_MS", Some("0"), SECOND, &(1..)).unwrap_err();
        assert_eq!(err.name, "APP_X_MS");
        assert!(err.to_string().contains("APP_X_MS"), "{err}");
    }

    #[test]
    fn millis_that_are_not_a_whole_number_fail_naming_the_variable() {
        for bad in ["soon", "-1", "1.5"] {
            let err = parse_millis("APP_X_MS", Some(bad), SECOND, &(0..)).unwrap_err();
            assert_eq!(err.name, "APP_X_MS", "{bad}");
        }
    }
}
