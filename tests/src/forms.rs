//! Building and sending multipart submissions.

use reqwest::multipart::{Form, Part};

use crate::{TestApp, TestKey};

impl TestApp {
    /// `POST /api/v1/moderate/{kind}` with `form`.
    pub async fn submit(&self, kind: &str, key: &TestKey, form: Form) -> reqwest::Response {
        self.client
            .post(self.url(&format!("/api/v1/moderate/{kind}")))
            .bearer_auth(&key.key)
            .multipart(form)
            .send()
            .await
            .expect("request")
    }

    /// Submits a prompt and returns the new job's id (asserting 202).
    pub async fn submit_prompt(&self, key: &TestKey, text: &str) -> uuid::Uuid {
        let response = self
            .submit("prompt", key, Form::new().text("text", text.to_owned()))
            .await;
        assert_eq!(response.status(), 202);
        let body: serde_json::Value = response.json().await.expect("json");
        body["job_id"]
            .as_str()
            .expect("job_id")
            .parse()
            .expect("uuid")
    }
}

/// A form with one text field.
pub fn text_form(name: &str, value: impl Into<String>) -> Form {
    Form::new().text(name.to_owned(), value.into())
}

/// A file part named `filename` holding `bytes`.
pub fn file_part(bytes: impl Into<Vec<u8>>, filename: &str) -> Part {
    Part::bytes(bytes.into()).file_name(filename.to_owned())
}
