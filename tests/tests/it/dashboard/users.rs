//! `modctl user`: creating users with a password read from standard input, and disabling
//! them, which ends their sessions.

use std::{
    io::Write,
    process::{Command, Stdio},
};

use moderation_tests::{spawn_app, TestApp};
use serde_json::Value;

/// Runs the real `modctl` with `stdin` on its standard input.
fn modctl_with_input(app: &TestApp, args: &[&str], stdin: &str) -> (bool, Value, String) {
    let mut child = Command::new(moderation_tests::binary("modctl"))
        .args(args)
        .env("DATABASE_URL", app.db.settings.url.expose())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run modctl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        output.status.success(),
        json,
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

#[tokio::test]
async fn modctl_creates_a_user_who_signs_in_until_disabled() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let account = app.create_account().await.to_string();
    let password = "a long enough password";

    let (ok, created, err) = modctl_with_input(
        &app,
        &[
            "user",
            "create",
            "--org",
            &account,
            "--email",
            "Ops@Example.com",
        ],
        &format!("{password}\n"),
    );
    assert!(ok, "{err}");
    let user_id = created["user_id"].as_str().unwrap().to_owned();
    let client = app.db.pool.get().await.unwrap();
    let stored: String = client
        .query_one("SELECT password_hash FROM dashboard_users", &[])
        .await
        .unwrap()
        .get(0);
    assert!(stored.starts_with("$argon2id$"), "{stored}");
    assert!(!stored.contains(password));

    let visitor = dashboard.visitor();
    let res = visitor.sign_in("ops@example.com", password).await;
    assert_eq!(res.status(), 303, "the address matches in any case");
    assert_eq!(visitor.get("/").await.status(), 200);

    let (ok, _, err) = modctl_with_input(&app, &["user", "disable", &user_id], "");
    assert!(ok, "{err}");
    assert_eq!(visitor.get("/").await.status(), 303, "the session ended");
    let again = dashboard
        .visitor()
        .sign_in("ops@example.com", password)
        .await;
    assert_eq!(again.status(), 401);
}

#[tokio::test]
async fn modctl_refuses_a_short_password_a_taken_address_and_an_unknown_account() {
    let app = spawn_app().await;
    let account = app.create_account().await.to_string();
    let args = [
        "user",
        "create",
        "--org",
        &account,
        "--email",
        "a@example.com",
    ];

    let (short, _, short_err) = modctl_with_input(&app, &args, "short\n");
    let (first, _, _) = modctl_with_input(&app, &args, "long enough password\n");
    let (taken, _, taken_err) = modctl_with_input(&app, &args, "long enough password\n");
    let (unknown, _, unknown_err) = modctl_with_input(
        &app,
        &[
            "user",
            "create",
            "--org",
            &uuid::Uuid::new_v4().to_string(),
            "--email",
            "b@example.com",
        ],
        "long enough password\n",
    );

    assert!(!short && short_err.contains("12"), "{short_err}");
    assert!(first);
    assert!(
        !taken && taken_err.contains("exists already"),
        "{taken_err}"
    );
    assert!(
        !unknown && unknown_err.contains("not found"),
        "{unknown_err}"
    );
}
