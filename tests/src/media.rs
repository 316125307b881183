//! `MediaServer`: a local HTTP server the worker fetches media from, with the awkward cases a
//! real media host can produce: redirect chains, redirects to forbidden places, bodies at and
//! over the size limit (streamed, with and without `content-length`), errors, a server that
//! fails before it recovers, and a body that never ends.
//!
//! Paths:
//! - `/file/NAME`: a body added with [`MediaServer::add`];
//! - `/hops/N/NAME`: redirects N times, then serves `/file/NAME`;
//! - `/to?URL`: one redirect to URL (e.g. the metadata address or another scheme);
//! - `/zeros/N` and `/zeros-chunked/N`: N zero bytes, with or without `content-length`;
//! - `/status/CODE`: that status;
//! - `/flaky/K/NAME`: 503 for the first K requests, then `/file/NAME`;
//! - `/slow`: headers at once, then a byte every 200 ms forever;
//! - `/slow-first/NAME`: `/slow` for the first request, then `/file/NAME` (a worker killed
//!   mid-download, then a download that works).

use std::{
    collections::HashMap,
    convert::Infallible,
    sync::{Arc, Mutex},
    time::Duration,
};

use http_body_util::{BodyExt, Full, StreamBody};
use hyper::{
    body::{Bytes, Frame, Incoming},
    header,
    server::conn::http1,
    service::service_fn,
    Request, Response, StatusCode,
};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

#[derive(Default)]
struct Shared {
    files: HashMap<String, (Vec<u8>, String)>,
    requests: HashMap<String, usize>,
}

/// A running media server.
#[derive(Clone)]
pub struct MediaServer {
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
    shared: Arc<Mutex<Shared>>,
}

impl MediaServer {
    /// Starts one on a free loopback port.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let shared = Arc::new(Mutex::new(Shared::default()));
        tokio::spawn(serve(listener, shared.clone()));
        Self {
            base_url: format!("http://127.0.0.1:{port}"),
            shared,
        }
    }

    /// Serves `bytes` as `content_type` at `/file/NAME`; returns its URL.
    pub fn add(&self, name: &str, bytes: Vec<u8>, content_type: &str) -> String {
        self.shared
            .lock()
            .expect("lock")
            .files
            .insert(name.to_owned(), (bytes, content_type.to_owned()));
        self.url(&format!("/file/{name}"))
    }

    /// The URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// How many requests `path` has had.
    pub fn requests(&self, path: &str) -> usize {
        self.shared
            .lock()
            .expect("lock")
            .requests
            .get(path)
            .copied()
            .unwrap_or(0)
    }
}

async fn serve(listener: TcpListener, shared: Arc<Mutex<Shared>>) {
    while let Ok((stream, _)) = listener.accept().await {
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                std::future::ready(Ok::<_, Infallible>(respond(&req, &shared)))
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

fn status(code: StatusCode) -> Response<Body> {
    let mut response = Response::new(full(Bytes::new()));
    *response.status_mut() = code;
    response
}

fn redirect(location: &str) -> Response<Body> {
    let mut response = status(StatusCode::FOUND);
    if let Ok(value) = location.parse() {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

fn respond(req: &Request<Incoming>, shared: &Mutex<Shared>) -> Response<Body> {
    let path = req.uri().path().to_owned();
    let seen = {
        let mut shared = shared.lock().expect("lock");
        let count = shared.requests.entry(path.clone()).or_insert(0);
        *count += 1;
        *count
    };
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["file", name] => {
            let file = shared.lock().expect("lock").files.get(*name).cloned();
            match file {
                Some((bytes, content_type)) => {
                    let mut response = Response::new(full(bytes));
                    if let Ok(value) = content_type.parse() {
                        response.headers_mut().insert(header::CONTENT_TYPE, value);
                    }
                    response
                }
                None => status(StatusCode::NOT_FOUND),
            }
        }
        ["hops", n, name] => match n.parse::<u32>() {
            Ok(0) => redirect(&format!("/file/{name}")),
            Ok(n) => redirect(&format!("/hops/{}/{name}", n - 1)),
            Err(_) => status(StatusCode::BAD_REQUEST),
        },
        ["to"] => redirect(req.uri().query().unwrap_or_default()),
        ["zeros", n] => zeros(n, true),
        ["zeros-chunked", n] => zeros(n, false),
        ["status", code] => code
            .parse::<u16>()
            .ok()
            .and_then(|c| StatusCode::from_u16(c).ok())
            .map_or_else(|| status(StatusCode::BAD_REQUEST), status),
        ["flaky", k, name] => {
            if k.parse::<usize>().is_ok_and(|k| seen <= k) {
                status(StatusCode::SERVICE_UNAVAILABLE)
            } else {
                redirect(&format!("/file/{name}"))
            }
        }
        ["slow"] => slow(),
        ["slow-first", _] if seen == 1 => slow(),
        ["slow-first", name] => redirect(&format!("/file/{name}")),
        _ => status(StatusCode::NOT_FOUND),
    }
}

/// Headers at once, then a byte every 200 ms forever.
fn slow() -> Response<Body> {
    let stream = futures_util::stream::unfold((), |()| async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Some((
            Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"."))),
            (),
        ))
    });
    Response::new(BodyExt::boxed(StreamBody::new(stream)))
}

/// `n` zero bytes streamed in 1 MiB chunks, with `content-length` when `declare`.
fn zeros(n: &str, declare: bool) -> Response<Body> {
    let Ok(total) = n.parse::<u64>() else {
        return status(StatusCode::BAD_REQUEST);
    };
    const CHUNK: u64 = 1024 * 1024;
    let chunk = Bytes::from(vec![0u8; CHUNK as usize]);
    let stream = futures_util::stream::unfold(total, move |left| {
        let chunk = chunk.clone();
        async move {
            (left > 0).then(|| {
                let size = left.min(CHUNK);
                (
                    Ok::<_, Infallible>(Frame::data(chunk.slice(..size as usize))),
                    left - size,
                )
            })
        }
    });
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    if declare {
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, header::HeaderValue::from(total));
    }
    response
}

/// A mono 8-bit PCM WAV file at `rate` Hz holding `samples` samples of silence.
pub fn wav(rate: u32, samples: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(44 + samples as usize);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + samples).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&rate.to_le_bytes()); // bytes per second
    out.extend_from_slice(&1u16.to_le_bytes()); // block align
    out.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    out.extend_from_slice(b"data");
    out.extend_from_slice(&samples.to_le_bytes());
    out.resize(44 + samples as usize, 128);
    out
}

/// An MP3 of `frames` MPEG-2.5 Layer III frames at 8 kbit/s and 8 kHz (72 bytes and 72 ms
/// each, zeros after the header: enough to demux, never decoded), followed by `junk` bytes
/// that each look like a frame header with a free bit rate, which the demuxer skips one by
/// one. Without a Xing header the declared length is estimated from the first frame's bit
/// rate over the whole file, junk included: a second per 1000 bytes.
pub fn mp3_with_junk(frames: usize, junk: usize) -> Vec<u8> {
    let mut frame = [0u8; 72];
    frame[..4].copy_from_slice(&[0xFF, 0xE3, 0x18, 0xC4]);
    let mut out = frame.repeat(frames);
    out.extend([0xFF, 0xE3, 0x00, 0xC4].iter().cycle().take(junk));
    out
}

/// A PNG picture (64×64): a gradient with a bright square at (`x`, `y`).
pub fn png(x: u32, y: u32) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    picture(x, y)
        .write_to(&mut out, image::ImageFormat::Png)
        .expect("encode");
    out.into_inner()
}

/// The same picture as [`png`], as a JPEG of quality 70 (other bytes, a close PDQ hash).
pub fn jpeg(x: u32, y: u32) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 70)
        .encode_image(&picture(x, y))
        .expect("encode");
    out
}

fn picture(x: u32, y: u32) -> image::DynamicImage {
    image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(64, 64, |i, j| {
        if (x..x + 20).contains(&i) && (y..y + 20).contains(&j) {
            image::Rgb([250, 250, 250])
        } else {
            image::Rgb([(i * 3) as u8, (j * 3) as u8, 60])
        }
    }))
}
