//! The data lifecycle (contract 15): retention floors on every read, content erasure (on
//! request and by age), the lifecycle runs (`modctl lifecycle`, and by itself under a lease),
//! and the upgrade that partitions the tables.

mod erasure;
mod plans;
mod retention;
mod runs;
mod upgrade;

use std::process::Command;

use moderation_tests::TestApp;
use serde_json::Value;

/// Runs the real `modctl lifecycle ...` against the app's database with `env` added:
/// (success, stdout as JSON or null, stderr).
fn lifecycle(app: &TestApp, args: &[&str], env: &[(&str, &str)]) -> (bool, Value, String) {
    let output = Command::new(moderation_tests::binary("modctl"))
        .arg("lifecycle")
        .args(args)
        .env("DATABASE_URL", app.db.settings.url.expose())
        .envs(env.iter().copied())
        .output()
        .expect("run modctl");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (output.status.success(), json, stderr)
}

/// The names in a JSON array of strings.
fn names(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}
