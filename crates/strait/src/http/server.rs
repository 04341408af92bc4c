//! The operator endpoint's connection handling: hyper's HTTP/1 server with bounds on what a
//! client can hold, since the endpoint may be reachable by more than the Prometheus that scrapes
//! it (axum's own `serve` has no timeouts and no connection cap: silent connections stayed open
//! for ever).
//!
//! - A request's head must arrive within [`REQUEST_HEAD_TIMEOUT`] (hyper's `header_read_timeout`).
//!   Its timer runs whenever the server waits for a request, so it closes a connection that never
//!   sends one, one that sends its head too slowly, and a kept-alive connection idle that long
//!   after its last response.
//! - Every connection is asked to close after [`MAX_CONNECTION_AGE`] (at once when idle, after its
//!   response otherwise) and dropped [`CLOSE_GRACE`] later, so a client that stops reading a
//!   response cannot hold its connection either.
//! - At most [`MAX_CONNECTIONS`] are served at once. Beyond that, connections wait unaccepted in
//!   the listener's backlog (the kernel's queue) until one closes: a scraper queued behind silent
//!   connections is answered once they time out, instead of being refused.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Longest wait for a request's head (request line and headers), on a new connection or a
/// kept-alive one after its previous response. Prometheus and browsers send the head in one
/// packet at once; the status page reads `/metrics` every 3 s, within it, so its connection is
/// kept. 5 s also bounds how long a scraper queued behind [`MAX_CONNECTIONS`] silent connections
/// waits, below Prometheus' default `scrape_timeout` of 10 s.
pub const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections served at once; more wait in the listener's backlog. An operator endpoint has a
/// few clients (one or two Prometheus, health probes, a browser or two); 64 leaves room for
/// probes that open a connection each.
pub const MAX_CONNECTIONS: usize = 64;

/// Age after which a connection is asked to close (keep-alive clients open a new one).
pub const MAX_CONNECTION_AGE: Duration = Duration::from_secs(60);

/// How long a connection asked to close (its age, or the process stopping) may take to finish
/// its response before it is dropped.
pub const CLOSE_GRACE: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `cancel`, within the bounds above; then stops accepting,
/// asks every connection to close and returns once they did (at most [`CLOSE_GRACE`] later).
/// Errors accepting a connection (out of file descriptors...) are logged and retried after a
/// short pause, as axum's `serve` does.
pub async fn serve(listener: TcpListener, app: Router, cancel: CancellationToken) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => break,
            accepted = async {
                // Not accepting while full leaves the next connections in the backlog.
                let slot = slots.clone().acquire_owned().await;
                (slot, listener.accept().await)
            } => accepted,
        };
        let (stream, peer) = match accepted {
            (Ok(slot), Ok((stream, peer))) => ((stream, slot), peer),
            (Err(_), _) => break, // the semaphore is never closed
            (_, Err(e)) => {
                tracing::warn!(error = %e, "metrics endpoint: accepting a connection failed; retrying in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        connections.spawn(connection(stream, peer, app.clone(), cancel.clone()));
    }
    connections.close();
    connections.wait().await;
}

/// Serves one connection; `slot` is released when it closes.
async fn connection(
    (stream, _slot): (tokio::net::TcpStream, tokio::sync::OwnedSemaphorePermit),
    peer: SocketAddr,
    app: Router,
    cancel: CancellationToken,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(REQUEST_HEAD_TIMEOUT);
    let conn = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    let mut conn = std::pin::pin!(conn);
    let served = tokio::select! {
        served = conn.as_mut() => Some(served),
        _ = tokio::time::sleep(MAX_CONNECTION_AGE) => None,
        _ = cancel.cancelled() => None,
    };
    let served = match served {
        Some(served) => served,
        None => {
            conn.as_mut().graceful_shutdown();
            match tokio::time::timeout(CLOSE_GRACE, conn).await {
                Ok(served) => served,
                Err(_) => return tracing::debug!(%peer, "metrics endpoint: response not read in time; dropped"),
            }
        }
    };
    // A timed-out head or a client gone mid-request: the client's business, not an error here.
    if let Err(e) = served {
        tracing::debug!(%peer, error = %e, "metrics endpoint: connection closed");
    }
}
