//! Settings refused at start: a fleet binary started on a test app's database and Redis with
//! some variables set must exit unsuccessfully, and its stderr says why.

use std::{
    io::Read,
    process::{Command, Stdio},
    time::Duration,
};

use base64::Engine;

use crate::{eventually, TestApp};

/// A child process killed when dropped (a test that fails leaves nothing running).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl TestApp {
    /// Starts `binary` with `args` on this app's database and Redis namespace, with `env` set
    /// over the defaults, and returns its stderr once it exits: it must exit, unsuccessfully,
    /// within 20 seconds (a process that starts is killed and fails the test).
    pub async fn refused_start(&self, binary: &str, args: &[&str], env: &[(&str, &str)]) -> String {
        let registry_key = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        let mut child = Killed(
            Command::new(crate::binary(binary))
                .args(args)
                .env("DATABASE_URL", self.db.settings.url.expose())
                .env("REDIS_URL", self.redis.url.expose())
                .env("APP_REDIS_NAMESPACE", &self.redis.namespace)
                .env("METRICS_PORT", "0")
                .env("PORT", "0")
                .env("DASHBOARD_PORT", "0")
                .env("RUST_LOG", "warn")
                .env("APP_ENCRYPTION_KEY", self.encryption_key.to_base64())
                .env("APP_REGISTRY_KEY", registry_key)
                .envs(env.iter().copied())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("the fleet's binaries are built"),
        );
        let status = eventually(Duration::from_secs(20), "the process to exit", || {
            let exited = child.0.try_wait().expect("wait for the process");
            async move { exited }
        })
        .await;
        assert!(!status.success(), "{binary} started with {env:?}");
        let mut stderr = String::new();
        child
            .0
            .stderr
            .take()
            .expect("stderr is piped")
            .read_to_string(&mut stderr)
            .expect("stderr is text");
        stderr
    }
}
