//! The responses operations share: the contract's error body, and a 429 with its
//! `retry-after` header.

use utoipa::openapi::{
    header::HeaderBuilder,
    schema::{ObjectBuilder, Type},
    ContentBuilder, Ref, Response, ResponseBuilder,
};

/// An error response with the contract's body.
pub fn error(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build()
}

/// A 429 with its `retry-after` header.
pub fn limited(description: &str) -> Response {
    let mut response = error(description);
    response.headers.insert(
        "retry-after".to_owned(),
        HeaderBuilder::new()
            .schema(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(1)),
            )
            .description(Some("Whole seconds until a retry can pass."))
            .build(),
    );
    response
}
