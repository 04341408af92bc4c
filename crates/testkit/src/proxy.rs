//! A TCP proxy in front of a broker that a test can cut (a black hole: connections stay open but
//! nothing passes, as when a network link fails) and heal (the stale connections are closed and
//! new ones pass again), or slow down (each chunk held for a delay each way, as a far region),
//! or go down right after the broker took a given request (as a broker killed while it answers).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// A request that takes the link down once it has passed ([`TcpProxy::fail_after`]).
#[derive(Clone, Copy)]
struct Trap {
    api_key: i16,
    outage: Duration,
}

/// A running proxy from `127.0.0.1:port` to an upstream address. Its threads live as long as the
/// process; it forwards until cut.
pub struct TcpProxy {
    /// Port it listens on (loopback).
    pub port: u16,
    state: Arc<State>,
}

struct State {
    upstream: String,
    cut: AtomicBool,
    /// How long each chunk is held before it is passed on (ms; each way).
    delay_ms: AtomicU64,
    /// Both ends of every connection accepted since the last heal.
    connections: Mutex<Vec<TcpStream>>,
    /// Armed by [`TcpProxy::fail_after`], taken when it springs.
    trap: Mutex<Option<Trap>>,
    /// A trap sprang: while set, nothing passes and new connections are closed at once.
    down: AtomicBool,
    /// A trap sprang since the proxy started.
    sprung: AtomicBool,
}

impl TcpProxy {
    /// Listens on `listener` and forwards each connection to `upstream` (`host:port`).
    pub fn start(listener: TcpListener, upstream: &str) -> io::Result<Self> {
        let port = listener.local_addr()?.port();
        let state = Arc::new(State {
            upstream: upstream.to_string(),
            cut: AtomicBool::new(false),
            delay_ms: AtomicU64::new(0),
            connections: Mutex::default(),
            trap: Mutex::default(),
            down: AtomicBool::new(false),
            sprung: AtomicBool::new(false),
        });
        let accepting = state.clone();
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let _ = accepting.relay(client);
            }
        });
        Ok(Self { port, state })
    }

    /// From now on nothing passes either way, on open or new connections, until [`Self::heal`].
    pub fn cut(&self) {
        self.state.cut.store(true, Ordering::SeqCst);
    }

    /// From now on each chunk waits `delay` before it is passed on, either way: a round trip
    /// takes at least twice `delay` (a crude far link: chunks wait in turn, so it also caps
    /// each connection's throughput).
    pub fn set_delay(&self, delay: Duration) {
        self.state.delay_ms.store(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// Once the next request with `api_key` (Kafka's API key: 26 for EndTxn) has passed to the
    /// broker whole, the link goes down for `outage`, as when the broker dies right after taking
    /// it: its answer is lost, every connection is closed, and new ones are closed as they come
    /// (the client sees its connection reset, as by a dead broker). Then connections pass again.
    pub fn fail_after(&self, api_key: i16, outage: Duration) {
        *self.state.trap.lock().unwrap() = Some(Trap { api_key, outage });
    }

    /// Whether a trap of [`Self::fail_after`] has sprung.
    pub fn failed(&self) -> bool {
        self.state.sprung.load(Ordering::SeqCst)
    }

    /// Closes every connection that saw the cut (their byte streams lost data) and lets new
    /// connections through again.
    pub fn heal(&self) {
        self.state.close_all();
        self.state.cut.store(false, Ordering::SeqCst);
    }
}

impl State {
    fn relay(self: &Arc<Self>, client: TcpStream) -> io::Result<()> {
        if self.down.load(Ordering::SeqCst) {
            return client.shutdown(Shutdown::Both);
        }
        let server = TcpStream::connect(&self.upstream)?;
        client.set_nodelay(true)?;
        server.set_nodelay(true)?;
        {
            let mut connections = self.connections.lock().unwrap();
            connections.push(client.try_clone()?);
            connections.push(server.try_clone()?);
        }
        let requests = (client.try_clone()?, server.try_clone()?, Some(Frames::default()));
        for (from, to, frames) in [requests, (server, client, None)] {
            let state = self.clone();
            thread::spawn(move || state.pump(from, to, frames));
        }
        Ok(())
    }

    /// Copies `from` to `to` until either closes, dropping what arrives while cut or down.
    /// `frames`: the client's side, whose requests may spring the trap.
    fn pump(self: &Arc<Self>, mut from: TcpStream, mut to: TcpStream, mut frames: Option<Frames>) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let sprung = frames.as_mut().and_then(|f| self.spring(&f.completed(&buf[..n])));
            if sprung.is_none() && (self.cut.load(Ordering::SeqCst) || self.down.load(Ordering::SeqCst)) {
                continue;
            }
            thread::sleep(Duration::from_millis(self.delay_ms.load(Ordering::SeqCst)));
            let written = to.write_all(&buf[..n]);
            if let Some(outage) = sprung {
                self.go_down(outage);
            }
            if written.is_err() {
                break;
            }
        }
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    }

    /// The armed trap's outage when one of `api_keys` (requests just completed) is its; the link
    /// is then down already, so the broker's answer cannot pass.
    fn spring(&self, api_keys: &[i16]) -> Option<Duration> {
        let mut trap = self.trap.lock().unwrap();
        let sprung = trap.filter(|t| api_keys.contains(&t.api_key))?;
        *trap = None;
        self.down.store(true, Ordering::SeqCst);
        self.sprung.store(true, Ordering::SeqCst);
        Some(sprung.outage)
    }

    /// Closes every connection, and lets new ones pass again after `outage`.
    fn go_down(self: &Arc<Self>, outage: Duration) {
        self.close_all();
        let state = self.clone();
        thread::spawn(move || {
            thread::sleep(outage);
            state.close_all();
            state.down.store(false, Ordering::SeqCst);
        });
    }

    fn close_all(&self) {
        for c in self.connections.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

/// Where a client's byte stream is in its request frames: each is a 4-byte size, then the
/// request, which starts with its 2-byte API key.
#[derive(Default)]
struct Frames {
    /// The first bytes of the frame being read, until its API key is known.
    head: Vec<u8>,
    /// Its API key, once known.
    api_key: i16,
    /// Its bytes still to come after the API key.
    left: usize,
}

impl Frames {
    /// The API keys of the requests whose last byte is in `chunk`.
    fn completed(&mut self, mut chunk: &[u8]) -> Vec<i16> {
        let mut done = Vec::new();
        while !chunk.is_empty() {
            if self.head.len() < 6 {
                let take = (6 - self.head.len()).min(chunk.len());
                self.head.extend_from_slice(&chunk[..take]);
                chunk = &chunk[take..];
                if self.head.len() < 6 {
                    break;
                }
                let size = i32::from_be_bytes([self.head[0], self.head[1], self.head[2], self.head[3]]);
                self.api_key = i16::from_be_bytes([self.head[4], self.head[5]]);
                self.left = usize::try_from(size).unwrap_or(0).saturating_sub(2);
            }
            let take = self.left.min(chunk.len());
            self.left -= take;
            chunk = &chunk[take..];
            if self.left == 0 {
                done.push(self.api_key);
                self.head.clear();
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::Frames;

    /// A frame of `size` bytes after its size field, with API key `api_key`.
    fn frame(api_key: i16, size: usize) -> Vec<u8> {
        let mut f = i32::try_from(size).unwrap().to_be_bytes().to_vec();
        f.extend(api_key.to_be_bytes());
        f.resize(4 + size, 7);
        f
    }

    #[test]
    fn requests_are_seen_when_their_last_byte_passes() {
        let mut stream = frame(0, 100);
        stream.extend(frame(26, 20));
        stream.extend(frame(3, 2));
        let mut frames = Frames::default();
        assert_eq!(frames.completed(&stream[..3]), Vec::<i16>::new());
        assert_eq!(frames.completed(&stream[3..103]), Vec::<i16>::new());
        assert_eq!(frames.completed(&stream[103..110]), vec![0]);
        assert_eq!(frames.completed(&stream[110..]), vec![26, 3]);
    }
}
