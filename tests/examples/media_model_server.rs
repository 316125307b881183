//! A local media host and OpenAI-compatible model server in one, for `scripts/bench`'s
//! `media_memory` scenario: `GET /media/ANY` serves one image of exactly the worker's size limit
//! (a small PNG followed by filler up to 100 MiB, with `content-length`), and
//! `POST /v1/chat/completions` reads the request body through without keeping it and, after
//! [`THINKING`] (as a model would take; it keeps every job of a batch in flight at once),
//! answers a fixed passing verdict. Prints its base URL, runs until stdin closes, then prints how many
//! chat requests it answered and the largest body it read.

use std::{
    convert::Infallible,
    io::Cursor,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use http_body_util::{BodyExt, Full};
use hyper::{
    body::{Bytes, Incoming},
    header,
    server::conn::http1,
    service::service_fn,
    Request, Response, StatusCode,
};
use hyper_util::rt::TokioIo;
use image::{DynamicImage, ImageFormat, RgbImage};
use moderation_worker::fetch::MAX_MEDIA_BYTES;
use tokio::{io::AsyncReadExt, net::TcpListener};

/// What the model answers: every visual category false.
const VERDICT: &str = r#"{"reason":"","ai_adult_general":false,"underage":false,"nsfw":false}"#;

/// How long the model takes over each answer.
const THINKING: Duration = Duration::from_secs(3);

#[derive(Default)]
struct Counts {
    chats: AtomicU64,
    largest_body: AtomicU64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let image = Bytes::from(padded_png(usize::try_from(MAX_MEDIA_BYTES)?)?);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("http://{}", listener.local_addr()?);
    let counts = Arc::new(Counts::default());
    let server = tokio::spawn(serve(listener, image, counts.clone()));
    let mut sink = Vec::new();
    tokio::io::stdin().read_to_end(&mut sink).await?;
    server.abort();
    eprintln!(
        "chat requests {}, largest body {} bytes",
        counts.chats.load(Ordering::Relaxed),
        counts.largest_body.load(Ordering::Relaxed)
    );
    Ok(())
}

/// A 256x256 PNG followed by filler (which decoders stop before) up to `size` bytes. The
/// filler varies so no page of it is like another.
fn padded_png(size: usize) -> anyhow::Result<Vec<u8>> {
    let picture = RgbImage::from_fn(256, 256, |x, y| {
        image::Rgb([x as u8, y as u8, (x ^ y) as u8])
    });
    let mut bytes = Vec::with_capacity(size);
    DynamicImage::ImageRgb8(picture).write_to(&mut Cursor::new(&mut bytes), ImageFormat::Png)?;
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    while bytes.len() < size {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let take = (size - bytes.len()).min(8);
        bytes.extend_from_slice(&state.to_le_bytes()[..take]);
    }
    Ok(bytes)
}

async fn serve(listener: TcpListener, image: Bytes, counts: Arc<Counts>) {
    while let Ok((stream, _)) = listener.accept().await {
        let (image, counts) = (image.clone(), counts.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request| answer(request, image.clone(), counts.clone()));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer(
    request: Request<Incoming>,
    image: Bytes,
    counts: Arc<Counts>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path().to_owned();
    if path.starts_with("/media/") {
        return Ok(Response::builder()
            .header(header::CONTENT_TYPE, "image/png")
            .body(Full::new(image))
            .unwrap_or_default());
    }
    if path != "/v1/chat/completions" {
        let mut response = Response::new(Full::default());
        *response.status_mut() = StatusCode::NOT_FOUND;
        return Ok(response);
    }
    let mut body = request.into_body();
    let mut read: u64 = 0;
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            read += data.len() as u64;
        }
    }
    tokio::time::sleep(THINKING).await;
    counts.chats.fetch_add(1, Ordering::Relaxed);
    counts.largest_body.fetch_max(read, Ordering::Relaxed);
    let completion = serde_json::json!({
        "id": "bench",
        "object": "chat.completion",
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": VERDICT },
            "finish_reason": "stop",
        }],
    });
    Ok(Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(completion.to_string())))
        .unwrap_or_default())
}
