//! A real OpenAI-compatible model server for the end-to-end tier: llama-cpp-python serving
//! SmolLM2-135M-Instruct. `scripts/test` installs it and names it in `MODEL_SERVER_PYTHON` (the
//! virtual environment's python) and `MODEL_FILE` (the GGUF file); tests of this tier are
//! `#[ignore]`d in ordinary runs and fail loudly when those are missing.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use crate::{eventually, unused_port};

/// A running `python -m llama_cpp.server`.
pub struct LlamaServer {
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
    port: u16,
    child: Option<Child>,
}

impl LlamaServer {
    /// Starts the server on a free loopback port and waits until it answers.
    pub async fn start() -> Self {
        let mut server = Self {
            base_url: String::new(),
            port: unused_port(),
            child: None,
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
            .stdout(Stdio::null())
            .stderr(Stdio::null())
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
        self.stop();
    }
}
