//! An emulated long link (this machine's kernel has no `netem`): a TCP relay in front of a far
//! broker that delivers every byte a fixed delay after it read it, in each direction, and holds at
//! most a TCP window's worth in flight per direction of a connection. One connection then carries
//! at most window / round trip, as over a real long link with that window. Optionally, all its
//! connections share a bandwidth limit per direction, as a link between two regions does; and it
//! counts the bytes it carries, the egress a region pair is billed for.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// 40 ms each way: an 80 ms round trip, as between two distant regions.
pub const ONE_WAY: Duration = Duration::from_millis(40);

/// Bytes in flight per direction of a connection: 6 MiB, Linux's default largest receive buffer
/// (`net.ipv4.tcp_rmem`), so what a connection could reach on such a link without tuning.
pub const WINDOW: usize = 6 << 20;

/// The most one connection carries: window / round trip, in MB/s.
pub fn connection_limit_mb_per_s() -> f64 {
    WINDOW as f64 / (2.0 * ONE_WAY.as_secs_f64()) / 1e6
}

/// A running relay; its threads live as long as the process.
#[derive(Clone, Default)]
pub struct DelayedLink {
    shared: Arc<Shared>,
}

/// What the link's connections share.
#[derive(Default)]
struct Shared {
    /// Bytes delivered, both directions together.
    carried: AtomicU64,
    /// The bandwidth limit per direction (bytes/s; none: only the window bounds a connection).
    cap: Mutex<Option<f64>>,
    /// Per direction (to the broker, from it): when the bottleneck is free for the next chunk.
    free_at: [Mutex<Option<Instant>>; 2],
}

impl DelayedLink {
    /// Relays every connection accepted on `listener` to `upstream` (`host:port`) with
    /// [`ONE_WAY`] delay and a [`WINDOW`] in flight each way.
    pub fn start(listener: TcpListener, upstream: &str) -> io::Result<Self> {
        let (link, upstream) = (Self::default(), upstream.to_string());
        let relayed = link.clone();
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if let Err(e) = relayed.relay(client, &upstream) {
                    eprintln!("delayed link: {e}");
                }
            }
        });
        Ok(link)
    }

    /// Bytes the link delivered so far, both directions together.
    pub fn carried(&self) -> u64 {
        self.shared.carried.load(Ordering::Relaxed)
    }

    /// Limits each direction of the link, all its connections together, to `bytes_per_s` (none:
    /// no limit but each connection's window).
    pub fn set_cap(&self, bytes_per_s: Option<f64>) {
        *self.shared.cap.lock().unwrap() = bytes_per_s;
    }

    fn relay(&self, client: TcpStream, upstream: &str) -> io::Result<()> {
        let server = TcpStream::connect(upstream)?;
        client.set_nodelay(true)?;
        server.set_nodelay(true)?;
        for (direction, (from, to)) in
            [(client.try_clone()?, server.try_clone()?), (server, client)].into_iter().enumerate()
        {
            let shared = self.shared.clone();
            thread::spawn(move || delay(from, to, shared, direction));
        }
        Ok(())
    }
}

impl Shared {
    /// When a chunk of `n` bytes read now has crossed the link: it waits for the bottleneck of
    /// its direction to be free, passes at the cap, then travels [`ONE_WAY`].
    fn due(&self, direction: usize, n: usize) -> Instant {
        let now = Instant::now();
        let Some(cap) = *self.cap.lock().unwrap() else { return now + ONE_WAY };
        let mut free_at = self.free_at[direction].lock().unwrap();
        let passed = free_at.map_or(now, |at| at.max(now)) + Duration::from_secs_f64(n as f64 / cap);
        *free_at = Some(passed);
        passed + ONE_WAY
    }
}

/// Bytes read but not yet delivered, with a wait for room.
#[derive(Default)]
struct InFlight {
    bytes: Mutex<usize>,
    room: Condvar,
}

/// Copies `from` to `to`, each chunk [`ONE_WAY`] after it was read (and after its turn at the
/// link's cap), while at most [`WINDOW`] bytes are on the way: a reader that finds the window
/// full stops reading, so the sender's socket fills and it waits, as for a real window.
fn delay(mut from: TcpStream, mut to: TcpStream, shared: Arc<Shared>, direction: usize) {
    let in_flight = Arc::new(InFlight::default());
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let (delivered, delivered_total) = (in_flight.clone(), shared.clone());
    let (reader_side, writer_side) = (from.try_clone(), to.try_clone());
    let writer = thread::spawn(move || {
        for (due, chunk) in rx {
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                thread::sleep(wait);
            }
            if to.write_all(&chunk).is_err() {
                break;
            }
            delivered_total.carried.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            *delivered.bytes.lock().unwrap() -= chunk.len();
            delivered.room.notify_one();
        }
        if let Ok(s) = reader_side {
            let _ = s.shutdown(Shutdown::Both);
        }
    });
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        {
            let mut bytes = in_flight.bytes.lock().unwrap();
            while *bytes > 0 && *bytes + n > WINDOW {
                bytes = in_flight.room.wait(bytes).unwrap();
            }
            *bytes += n;
        }
        // On the link from now, once the window had room.
        if tx.send((shared.due(direction, n), buf[..n].to_vec())).is_err() {
            break;
        }
    }
    drop(tx);
    let _ = writer.join();
    if let Ok(s) = writer_side {
        let _ = s.shutdown(Shutdown::Both);
    }
}
