//! A real OpenAI-compatible model server for the end-to-end tier: llama-cpp-python serving
//! SmolLM2-135M-Instruct. `scripts/test` installs it and names it in `MODEL_SERVER_PYTHON` (the
//! virtual environment's python) and `MODEL_FILE` (the GGUF file); tests of this tier are
//! `#[ignore]`d in ordinary runs and fail loudly when those are missing.
//!
//! The server's output goes to a file; when a test of the tier fails, the server's exit status
//! (if it died) and the tail of that output are printed, so the failure says why (a job that
//! only ended `CLASSIFIER_UNAVAILABLE` once hid a server crashing on every completion).

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use crate::{
    eventually,
    receiver::tempfile_path::{self, TempPath},
    unused_port,
};

/// How many of the server's last output lines a failing test prints.
const LOG_TAIL_LINES: usize = 40;

/// A running `python -m llama_cpp.server`.
pub struct LlamaServer {
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
    port: u16,
    child: Option<Child>,
    /// Where its standard output and error go.
    log: TempPath,
}

impl LlamaServer {
    /// Starts the server on a free loopback port and waits until it answers.
    pub async fn start() -> Self {
        let mut server = Self {
            base_url: String::new(),
            port: unused_port(),
            child: None,
            log: tempfile_path::write_bytes(b"", "log"),
        };
        server.base_url = format!("http://127.0.0.1:{}", server.port);
        server.restart().await;
        server
    }

    /// Starts it again on the same port (after [`Self::stop`]) and waits until it answers.
    pub async fn restart(&mut self) {
        let python = std::env::var("MODEL_SERVER_PYTHON")
            .expect("MODEL_SERVER_PYTHON names the model server's python (scripts/test sets it)");
        let model = std::env::var("MODEL_FILE")
            .expect("MODEL_FILE names the GGUF model (scripts/test sets it)");
        let child = Command::new(python)
            .args([
                "-m",
                "llama_cpp.server",
                "--model",
                &model,
                "--host",
                "127.0.0.1",
            ])
            .args(["--port", &self.port.to_string(), "--n_ctx", "2048"])
            .stdout(Stdio::from(self.log_file()))
            .stderr(Stdio::from(self.log_file()))
            .spawn()
            .expect("start the model server");
        self.child = Some(child);
        let client = reqwest::Client::new();
        let models = format!("{}/v1/models", self.base_url);
        eventually(
            Duration::from_secs(120),
            "the model server to answer",
            || async {
                let response = client.get(&models).send().await.ok()?;
                response.status().is_success().then_some(())
            },
        )
        .await;
    }

    /// The log file, opened for appending (each start adds to it).
    fn log_file(&self) -> std::fs::File {
        std::fs::OpenOptions::new()
            .append(true)
            .open(self.log.path())
            .expect("open the model server's log")
    }

    /// Prints how the server ended (if it did) and the tail of its output to standard error.
    fn report(&mut self) {
        if let Some(status) = self
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
        {
            eprintln!("The model server exited: {status}");
        }
        let log = std::fs::read_to_string(self.log.path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
        eprintln!(
            "The model server's last {} output lines:\n{}",
            tail.len(),
            tail.join("\n")
        );
    }

    /// Stops it (SIGKILL).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.report();
        }
        self.stop();
    }
}
