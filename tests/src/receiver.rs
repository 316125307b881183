//! `TestReceiver`: a local HTTPS webhook sink with its own test CA. It records every request
//! (headers, body, arrival time) and answers with the statuses it is told.

use std::{
    collections::VecDeque,
    convert::Infallible,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use http_body_util::{BodyExt, Full, StreamBody};
use hyper::{
    body::{Bytes, Frame, Incoming},
    header::HeaderMap,
    server::conn::http1,
    service::service_fn,
    Request, Response,
};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use tokio::net::TcpListener;
use tokio_rustls::{
    rustls::{
        self,
        pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer},
    },
    TlsAcceptor,
};

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body.
    pub body: Vec<u8>,
    /// When it arrived.
    pub at: Instant,
    /// Where it came from.
    pub peer: std::net::SocketAddr,
}

/// How the receiver answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// This status, at once.
    Status(u16),
    /// 200 with headers at once, then a body trickled one byte every 200 ms forever.
    Trickle,
    /// This status, after this long.
    Delayed(u16, Duration),
}

#[derive(Default)]
struct Shared {
    received: Vec<Received>,
    script: VecDeque<Reply>,
    fallback: Option<Reply>,
    /// Requests are counted, not kept (a long bench would hold them all).
    counting_only: bool,
    count: usize,
    webhook_ids: std::collections::HashSet<String>,
}

/// A running HTTPS receiver.
pub struct TestReceiver {
    /// `https://127.0.0.1:PORT` (or the address of the host it is on).
    pub base_url: String,
    /// The test CA's certificate (PEM), for `APP_EXTRA_CA_FILE`.
    pub ca_pem: String,
    /// The address it listens on.
    pub addr: std::net::SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestReceiver {
    /// Starts a receiver answering 200 to everything.
    pub async fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        Self::start_on(listener)
    }

    /// [`Self::start`] on `host` (the tests' process serves it, in the host's namespace).
    pub fn start_in(host: &crate::netns::Host) -> Self {
        Self::start_on(host.listen(0))
    }

    /// Serves on `listener`, with a certificate for its address and `localhost`.
    fn start_on(listener: std::net::TcpListener) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let addr = listener.local_addr().expect("addr");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "moderation test CA");
        let ca =
            CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("key")).expect("ca");
        let leaf_key = KeyPair::generate().expect("key");
        let leaf = CertificateParams::new(vec![addr.ip().to_string(), "localhost".to_owned()])
            .expect("params")
            .signed_by(&leaf_key, &ca)
            .expect("leaf");
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone(), CertificateDer::from(ca.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
            )
            .expect("tls config");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        listener.set_nonblocking(true).expect("non-blocking");
        let listener = TcpListener::from_std(listener).expect("a tokio listener");
        let shared = Arc::new(Mutex::new(Shared {
            fallback: Some(Reply::Status(200)),
            ..Shared::default()
        }));
        let task = tokio::spawn(serve(listener, acceptor, shared.clone()));
        Self {
            base_url: format!("https://{addr}"),
            addr,
            ca_pem: ca.pem(),
            shared,
            task,
        }
    }

    /// The URL of `path` on this receiver.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// Answers the next requests with `replies` in order, then with `then` for the rest.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>, then: Reply) {
        let mut shared = self.shared.lock().expect("lock");
        shared.script = replies.into_iter().collect();
        shared.fallback = Some(then);
    }

    /// From now on, requests are only counted (see [`Self::counts`]), not kept.
    pub fn count_only(&self) {
        self.shared.lock().expect("lock").counting_only = true;
    }

    /// Requests received so far, and how many distinct `webhook-id`s they carried.
    pub fn counts(&self) -> (usize, usize) {
        let shared = self.shared.lock().expect("lock");
        (shared.count, shared.webhook_ids.len())
    }

    /// Everything received so far.
    pub fn received(&self) -> Vec<Received> {
        self.shared.lock().expect("lock").received.clone()
    }

    /// Writes the CA to a temporary file and returns its path.
    pub fn ca_file(&self) -> tempfile_path::TempPath {
        tempfile_path::write(&self.ca_pem)
    }
}

async fn serve(listener: TcpListener, acceptor: TlsAcceptor, shared: Arc<Mutex<Shared>>) {
    while let Ok((stream, peer)) = listener.accept().await {
        let acceptor = acceptor.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let service =
                service_fn(move |req: Request<Incoming>| handle(req, peer, shared.clone()));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

async fn handle(
    req: Request<Incoming>,
    peer: std::net::SocketAddr,
    shared: Arc<Mutex<Shared>>,
) -> Result<Response<Body>, Infallible> {
    let at = Instant::now();
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    let reply = {
        let mut shared = shared.lock().expect("lock");
        shared.count += 1;
        if let Some(id) = parts
            .headers
            .get("webhook-id")
            .and_then(|v| v.to_str().ok())
        {
            shared.webhook_ids.insert(id.to_owned());
        }
        if !shared.counting_only {
            shared.received.push(Received {
                headers: parts.headers,
                body,
                at,
                peer,
            });
        }
        let fallback = shared.fallback.unwrap_or(Reply::Status(200));
        shared.script.pop_front().unwrap_or(fallback)
    };
    Ok(match reply {
        Reply::Status(status) => {
            let mut response = Response::new(Full::new(Bytes::from_static(b"ok")).boxed());
            *response.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
            response
        }
        Reply::Trickle => {
            let stream = futures_util::stream::unfold((), |()| async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Some((
                    Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"."))),
                    (),
                ))
            });
            Response::new(BodyExt::boxed(StreamBody::new(stream)))
        }
        Reply::Delayed(status, after) => {
            tokio::time::sleep(after).await;
            let mut response = Response::new(Full::new(Bytes::from_static(b"ok")).boxed());
            *response.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
            response
        }
    })
}

/// A file removed when dropped.
pub mod tempfile_path {
    use std::path::{Path, PathBuf};

    /// The path of a temporary file, deleted on drop.
    #[derive(Debug)]
    pub struct TempPath(PathBuf);

    impl TempPath {
        /// The path.
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// Writes `contents` to a new temporary `.pem` file.
    pub fn write(contents: &str) -> TempPath {
        write_bytes(contents.as_bytes(), "pem")
    }

    /// Writes `bytes` to a new temporary file named with `extension`.
    pub fn write_bytes(bytes: &[u8], extension: &str) -> TempPath {
        let path = std::env::temp_dir().join(format!(
            "moderation-test-{}.{extension}",
            uuid::Uuid::new_v4()
        ));
        std::fs::write(&path, bytes).expect("write temp file");
        TempPath(path)
    }
}
