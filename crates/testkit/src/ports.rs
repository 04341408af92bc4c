//! Loopback ports for brokers: found free, and told apart when another process took one first.

use std::fs;
use std::io;
use std::net::TcpListener;
use std::path::Path;

/// `N` distinct free loopback ports: the listeners are held together until every port is
/// known, so the kernel cannot hand the same port out twice.
pub(crate) fn free_ports<const N: usize>() -> io::Result<[u16; N]> {
    let listeners = (0..N).map(|_| TcpListener::bind("127.0.0.1:0")).collect::<io::Result<Vec<_>>>()?;
    let mut ports = [0; N];
    for (port, l) in ports.iter_mut().zip(&listeners) {
        *port = l.local_addr()?.port();
    }
    Ok(ports)
}

/// Whether the log of the broker in `dir` says a port of its was taken (`Address already in
/// use`): another process bound it between the search for free ports and the broker's bind.
pub(crate) fn port_taken(dir: &Path) -> bool {
    fs::read_to_string(dir.join("server.log")).is_ok_and(|log| log.contains("Address already in use"))
}

/// Waits for `brokers` to start (`wait`). When that fails because one of them lost a port
/// (`lost_a_port`: it exited, [`port_taken`]), starts them again on new ports (`relaunch`), twice
/// at most. Errors: `wait`'s last error, or `relaunch`'s.
pub(crate) fn wait_started<T>(
    brokers: &mut T,
    wait: impl Fn(&mut T) -> io::Result<()>,
    lost_a_port: impl Fn(&mut T) -> bool,
    relaunch: impl Fn(&mut T) -> io::Result<()>,
) -> io::Result<()> {
    let mut again = 0;
    loop {
        match wait(brokers) {
            Ok(()) => return Ok(()),
            Err(e) if again < 2 && lost_a_port(brokers) => eprintln!("{e}; starting it again on other ports"),
            Err(e) => return Err(e),
        }
        again += 1;
        relaunch(brokers)?;
    }
}
