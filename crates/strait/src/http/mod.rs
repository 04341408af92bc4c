//! The operator endpoint of `strait run` (`--metrics-addr` or `[metrics] listen`): `/metrics`
//! (Prometheus text format), `/health` (200 while the process runs), `/ready` (200 when every
//! flow runs and its target answers, else 503 listing what is not) and `/`, a status page for
//! people without a Grafana at hand (plain HTML whose script reads `/metrics` every 3 s).
//! [`server`] bounds the connections clients can hold.

pub mod server;

use std::net::SocketAddr;

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::metrics::metrics;

async fn scrape() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], metrics().encode())
}

async fn ready() -> impl IntoResponse {
    let down = metrics().flows_down();
    if down.is_empty() {
        (StatusCode::OK, "ready\n".to_string())
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, format!("not running: {}\n", down.join(", ")))
    }
}

/// Binds `addr` and serves until `cancel`, within [`server`]'s bounds (request head timeout,
/// connection cap). Errors: the address cannot be bound (in use, not local), which stops
/// `strait run` at start.
pub async fn serve(addr: SocketAddr, cancel: CancellationToken) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let app = Router::new()
        .route("/", get(|| async { axum::response::Html(include_str!("status.html")) }))
        .route("/metrics", get(scrape))
        .route("/health", get(|| async { "ok\n" }))
        .route("/ready", get(ready));
    tracing::info!(%addr, "serving /metrics, /health, /ready and a status page at /");
    Ok(tokio::spawn(server::serve(listener, app, cancel)))
}
