//! An emulated long link (this machine's kernel has no `netem`): a TCP relay in front of a far
//! broker that delivers every byte a fixed delay after it read it, in each direction, and holds at
//! most a TCP window's worth in flight per direction of a connection. One connection then carries
//! at most window / round trip, as over a real long link with that window.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
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
pub struct DelayedLink;

impl DelayedLink {
    /// Relays every connection accepted on `listener` to `upstream` (`host:port`) with
    /// [`ONE_WAY`] delay and a [`WINDOW`] in flight each way.
    pub fn start(listener: TcpListener, upstream: &str) -> io::Result<Self> {
        let upstream = upstream.to_string();
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if let Err(e) = relay(client, &upstream) {
                    eprintln!("delayed link: {e}");
                }
            }
        });
        Ok(Self)
    }
}

fn relay(client: TcpStream, upstream: &str) -> io::Result<()> {
    let server = TcpStream::connect(upstream)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    for (from, to) in [(client.try_clone()?, server.try_clone()?), (server, client)] {
        thread::spawn(move || delay(from, to));
    }
    Ok(())
}

/// Bytes read but not yet delivered, with a wait for room.
#[derive(Default)]
struct InFlight {
    bytes: Mutex<usize>,
    room: Condvar,
}

/// Copies `from` to `to`, each chunk [`ONE_WAY`] after it was read, while at most [`WINDOW`]
/// bytes are on the way: a reader that finds the window full stops reading, so the sender's
/// socket fills and it waits, as for a real window.
fn delay(mut from: TcpStream, mut to: TcpStream) {
    let in_flight = Arc::new(InFlight::default());
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let delivered = in_flight.clone();
    let (reader_side, writer_side) = (from.try_clone(), to.try_clone());
    let writer = thread::spawn(move || {
        for (due, chunk) in rx {
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                thread::sleep(wait);
            }
            if to.write_all(&chunk).is_err() {
                break;
            }
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
        if tx.send((Instant::now() + ONE_WAY, buf[..n].to_vec())).is_err() {
            break;
        }
    }
    drop(tx);
    let _ = writer.join();
    if let Ok(s) = writer_side {
        let _ = s.shutdown(Shutdown::Both);
    }
}
