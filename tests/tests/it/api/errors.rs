use actix_web::{middleware::from_fn, test, web, App, HttpResponse};
use moderation_api::{middleware, startup};
use moderation_tests::{assert_error, spawn_app};
use serde_json::Value;

#[tokio::test]
async fn an_unknown_route_is_a_json_404() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;

    assert_error(
        app.client.get(app.url("/nope")).send().await.unwrap(),
        404,
        "NOT_FOUND",
    )
    .await;
    assert_error(app.get("/api/v1/nope", &key).await, 404, "NOT_FOUND").await;
}

#[tokio::test]
async fn unknown_routes_under_the_api_prefix_need_a_key_first() {
    let app = spawn_app().await;

    let response = app
        .client
        .get(app.url("/api/v1/nope"))
        .send()
        .await
        .unwrap();

    assert_error(response, 401, "UNAUTHORIZED").await;
}

#[tokio::test]
async fn a_wrong_method_is_a_json_405() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;

    let public = app.client.post(app.url("/health")).send().await.unwrap();
    let private = app
        .client
        .delete(app.url("/api/v1/me"))
        .bearer_auth(&key.key)
        .send()
        .await
        .unwrap();

    assert_error(public, 405, "METHOD_NOT_ALLOWED").await;
    assert_error(private, 405, "METHOD_NOT_ALLOWED").await;
}

/// The api's extractor configuration and error middleware around test-only routes, so every
/// failure path of the framework is exercised with the real pieces.
macro_rules! test_app {
    () => {
        test::init_service(
            App::new()
                .configure(startup::configure_extractors)
                .route(
                    "/echo",
                    web::post().to(|body: web::Json<Value>| async move {
                        HttpResponse::Ok().json(body.into_inner())
                    }),
                )
                .route(
                    "/items/{id}",
                    web::get().to(|id: web::Path<uuid::Uuid>| async move {
                        HttpResponse::Ok().body(id.to_string())
                    }),
                )
                .route(
                    "/search",
                    web::get().to(
                        |q: web::Query<std::collections::HashMap<String, u32>>| async move {
                            HttpResponse::Ok().body(q.len().to_string())
                        },
                    ),
                )
                .route("/boom", web::get().to(boom))
                .wrap(from_fn(middleware::catch_panic))
                .wrap(from_fn(middleware::json_errors)),
        )
        .await
    };
}

async fn boom() -> HttpResponse {
    panic!("secret internal detail")
}

async fn error_body<B: actix_web::body::MessageBody>(
    res: actix_web::dev::ServiceResponse<B>,
) -> (u16, Value) {
    let status = res.status().as_u16();
    let body: Value = test::read_body_json(res).await;
    assert_eq!(body["statusCode"], status);
    (status, body)
}

#[actix_web::test]
async fn malformed_json_is_a_400_with_the_contract_body() {
    let app = test_app!();
    let req = test::TestRequest::post()
        .uri("/echo")
        .insert_header(("content-type", "application/json"))
        .set_payload("{not json")
        .to_request();

    let (status, body) = error_body(test::call_service(&app, req).await).await;

    assert_eq!(status, 400);
    assert_eq!(body["error"], "INVALID_REQUEST");
}

#[actix_web::test]
async fn a_json_body_with_another_content_type_is_415() {
    let app = test_app!();
    let req = test::TestRequest::post()
        .uri("/echo")
        .insert_header(("content-type", "text/plain"))
        .set_payload("{}")
        .to_request();

    let (status, body) = error_body(test::call_service(&app, req).await).await;

    assert_eq!(status, 415);
    assert_eq!(body["error"], "UNSUPPORTED_MEDIA_TYPE");
}

#[actix_web::test]
async fn an_oversized_json_body_is_413() {
    let app = test_app!();
    let big = format!("\"{}\"", "a".repeat(256 * 1024 + 1));
    let req = test::TestRequest::post()
        .uri("/echo")
        .insert_header(("content-type", "application/json"))
        .set_payload(big)
        .to_request();

    let (status, body) = error_body(test::call_service(&app, req).await).await;

    assert_eq!(status, 413);
    assert_eq!(body["error"], "PAYLOAD_TOO_LARGE");
}

#[actix_web::test]
async fn bad_path_and_query_parameters_are_400() {
    let app = test_app!();

    let path = test::call_service(
        &app,
        test::TestRequest::get()
            .uri("/items/not-a-uuid")
            .to_request(),
    )
    .await;
    let query = test::call_service(
        &app,
        test::TestRequest::get().uri("/search?n=minus").to_request(),
    )
    .await;

    let (status, body) = error_body(path).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("INVALID_REQUEST"))
    );
    let (status, body) = error_body(query).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("INVALID_REQUEST"))
    );
}

#[actix_web::test]
async fn a_panicking_handler_is_a_generic_500() {
    let app = test_app!();

    // The server renders an error that leaves the middleware as its response.
    let res = match test::try_call_service(&app, test::TestRequest::get().uri("/boom").to_request())
        .await
    {
        Ok(res) => res.into_parts().1.map_into_boxed_body(),
        Err(err) => err.error_response(),
    };

    let status = res.status().as_u16();
    let body: Value =
        serde_json::from_slice(&actix_web::body::to_bytes(res.into_body()).await.unwrap()).unwrap();
    assert_eq!(status, 500);
    assert_eq!(body["error"], "INTERNAL_ERROR");
    assert!(!body.to_string().contains("secret"), "{body}");
}
