//! `GET /api/v1/openapi.json`: the OpenAPI 3.1 document, generated from the code.

use moderation_api::auth::{Access, ENDPOINTS};
use moderation_tests::{get_plain, receiver::tempfile_path, spawn_app};
use serde_json::Value;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

async fn served_document(port: u16) -> (u16, String, Value) {
    let (status, content_type, body) = get_plain(port, "/api/v1/openapi.json").await;
    (
        status,
        content_type,
        serde_json::from_str(&body).expect("a JSON document"),
    )
}

#[tokio::test]
async fn the_document_is_served_without_a_key_and_describes_every_served_route_with_its_scope() {
    let app = spawn_app().await;

    let (status, content_type, doc) = served_document(app.port).await;

    assert_eq!(status, 200);
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "1.0.0");
    let mut documented = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS.into_iter().filter(|m| item.get(*m).is_some()) {
            documented.push((method.to_uppercase(), path.clone()));
        }
    }
    let mut served: Vec<_> = ENDPOINTS
        .iter()
        .map(|e| (e.method.to_string(), e.path.to_owned()))
        .collect();
    documented.sort();
    served.sort();
    assert_eq!(
        documented, served,
        "documented operations against served routes"
    );

    for endpoint in ENDPOINTS {
        let operation =
            &doc["paths"][endpoint.path][endpoint.method.as_str().to_lowercase().as_str()];
        let security = &operation["security"];
        match endpoint.access {
            Access::Public => assert_eq!(security, &serde_json::json!([]), "{}", endpoint.path),
            Access::AnyKey => assert_eq!(security, &serde_json::json!([{"api_key": []}])),
            Access::Scope(_) | Access::EitherScope(..) => {
                let expected = match endpoint.access {
                    Access::EitherScope(first, second) => serde_json::json!([
                        {"api_key": [first.as_str()]},
                        {"api_key": [second.as_str()]}
                    ]),
                    Access::Scope(scope) => serde_json::json!([{"api_key": [scope.as_str()]}]),
                    _ => unreachable!(),
                };
                assert_eq!(security, &expected);
                for status in ["401", "403", "429"] {
                    assert_eq!(
                        operation["responses"][status]["content"]["application/json"]["schema"]
                            ["$ref"],
                        "#/components/schemas/ErrorBody",
                        "{} {} documents {status}",
                        endpoint.method,
                        endpoint.path
                    );
                }
            }
        }
    }
}

/// Runs openapi-spec-validator (its path in `OPENAPI_SPEC_VALIDATOR`, which scripts/test sets)
/// on the served document.
#[tokio::test]
async fn the_served_document_passes_an_openapi_3_1_validator() {
    let validator = std::env::var("OPENAPI_SPEC_VALIDATOR").expect(
        "OPENAPI_SPEC_VALIDATOR names openapi-spec-validator (scripts/test installs it; or set it \
         yourself)",
    );
    let app = spawn_app().await;
    let (_, _, doc) = served_document(app.port).await;
    let file = tempfile_path::write_bytes(doc.to_string().as_bytes(), "json");

    let out = std::process::Command::new(validator)
        .arg(file.path())
        .output()
        .expect("run openapi-spec-validator");

    assert!(
        out.status.success(),
        "the document does not validate: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
