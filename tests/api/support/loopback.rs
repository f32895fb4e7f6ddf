//! A loopback HTTP server for the provider fakes: it can close a connection unanswered as soon as
//! a chosen request arrives. Shared by the API tests and the chaos campaign (`src/bin/chaos`).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::HeaderValue;
use axum::http::header::CONNECTION;
use axum::response::Response;
use balcao::domain::Cents;
use balcao::pix::{PixKey, PixKeyType, StaticCharge, Txid};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// How long a fake sits on an answer it will never give in time.
pub const HANG: Duration = Duration::from_secs(120);
/// Far more than any request head we send.
const MAX_HEAD: usize = 64 * 1024;

/// A loopback HTTP server whose listener can close a connection, unanswered, as soon as a
/// chosen request arrives. Every answer says `Connection: close`, so each request comes on a
/// new connection and passes through the listener. Dropping it closes the listener (the chaos
/// campaign starts one per run).
pub struct Loopback {
    pub url: String,
    resets: Arc<Mutex<Vec<String>>>,
    server: tokio::task::AbortHandle,
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Loopback {
    pub async fn start(app: axum::Router) -> Self {
        let inner = TcpListener::bind("127.0.0.1:0").await.expect("bind the fake");
        let url = format!("http://{}", inner.local_addr().expect("fake address"));
        let resets = Arc::new(Mutex::new(Vec::new()));
        let listener = ResettingListener { inner, resets: resets.clone() };
        let app = app.layer(axum::middleware::map_response(close_after));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        })
        .abort_handle();
        Self { url, resets, server }
    }

    /// The next request whose request line starts with `prefix` (`POST /v1/payments`) has its
    /// connection closed before anything acts on it.
    pub fn reset_next(&self, prefix: &str) {
        self.resets.lock().expect("lock").push(prefix.to_owned());
    }
}

async fn close_after(mut response: Response) -> Response {
    response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

struct ResettingListener {
    inner: TcpListener,
    resets: Arc<Mutex<Vec<String>>>,
}

impl axum::serve::Listener for ResettingListener {
    type Io = Replay;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Replay, SocketAddr) {
        loop {
            let Ok((mut stream, addr)) = self.inner.accept().await else { continue };
            let head = read_head(&mut stream).await;
            let line = String::from_utf8_lossy(head.split(|b| *b == b'\n').next().unwrap_or_default()).into_owned();
            let reset = {
                let mut resets = self.resets.lock().expect("lock");
                match resets.iter().position(|prefix| line.starts_with(prefix.as_str())) {
                    Some(i) => {
                        resets.remove(i);
                        true
                    }
                    None => false,
                }
            };
            if reset {
                // RST rather than FIN: the client sees "connection reset by peer".
                let _ = stream.set_zero_linger();
                drop(stream);
                continue;
            }
            return (Replay { head, read: 0, stream }, addr);
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// Reads until the end of the request head (or what arrives before the peer stops).
async fn read_head(stream: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
    head
}

/// A connection whose first bytes were already read by the listener: they are read again
/// first, then the socket.
struct Replay {
    head: Vec<u8>,
    read: usize,
    stream: TcpStream,
}

impl AsyncRead for Replay {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.read < this.head.len() {
            let n = buf.remaining().min(this.head.len() - this.read);
            buf.put_slice(&this.head[this.read..this.read + n]);
            this.read += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Replay {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A valid BR Code for a fake's charge number `n`: the caller decodes what a gateway returns.
pub fn brcode(prefix: &str, n: u64, amount: Cents) -> String {
    StaticCharge {
        key: PixKey::parse(PixKeyType::Email, "caixa@barbearia.com.br").expect("key"),
        merchant_name: "Barbearia do Zé".into(),
        merchant_city: "São Paulo".into(),
        amount: Some(amount),
        txid: Some(Txid::parse(&format!("{prefix}{n}")).expect("txid")),
        description: None,
    }
    .encode()
    .expect("a valid code")
}

/// The state of a fake's mutex, shared by its handlers.
pub fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().expect("fake state lock")
}
