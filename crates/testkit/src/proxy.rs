//! A TCP proxy in front of a broker that a test can cut (a black hole: connections stay open but
//! nothing passes, as when a network link fails) and heal (the stale connections are closed and
//! new ones pass again), or slow down (each chunk held for a delay each way, as a far region).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

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

    /// Closes every connection that saw the cut (their byte streams lost data) and lets new
    /// connections through again.
    pub fn heal(&self) {
        let mut connections = self.state.connections.lock().unwrap();
        for c in connections.drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
        self.state.cut.store(false, Ordering::SeqCst);
    }
}

impl State {
    fn relay(self: &Arc<Self>, client: TcpStream) -> io::Result<()> {
        let server = TcpStream::connect(&self.upstream)?;
        client.set_nodelay(true)?;
        server.set_nodelay(true)?;
        {
            let mut connections = self.connections.lock().unwrap();
            connections.push(client.try_clone()?);
            connections.push(server.try_clone()?);
        }
        for (from, to) in [(client.try_clone()?, server.try_clone()?), (server, client)] {
            let state = self.clone();
            thread::spawn(move || state.pump(from, to));
        }
        Ok(())
    }

    /// Copies `from` to `to` until either closes, dropping what arrives while cut.
    fn pump(&self, mut from: TcpStream, mut to: TcpStream) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) if !self.cut.load(Ordering::SeqCst) => {
                    thread::sleep(Duration::from_millis(self.delay_ms.load(Ordering::SeqCst)));
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
            }
        }
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    }
}
