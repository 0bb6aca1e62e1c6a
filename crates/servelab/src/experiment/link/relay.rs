//! The userspace relay: accepts on a listener of its own and carries every connection to
//! the upstream server, each direction on threads of its own — spliced through a pipe
//! when unshaped ([`super::pipe`]), through the shaper otherwise ([`super::shaper`]).

use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::pipe;
use super::shaper::{self, LinkClock};
use super::spec::LinkSpec;

/// A running relay; stops accepting when dropped (open connections end with their peers).
pub struct Relay {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

/// Starts a relay on `listen` forwarding every connection to `upstream` through `spec`.
pub fn start(listen: SocketAddr, upstream: SocketAddr, spec: LinkSpec) -> std::io::Result<Relay> {
    serve(TcpListener::bind(listen)?, upstream, spec)
}

/// Relays every connection `listener` accepts to `upstream` through `spec`.
pub(super) fn serve(
    listener: TcpListener,
    upstream: SocketAddr,
    spec: LinkSpec,
) -> std::io::Result<Relay> {
    let addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let up_clock = Arc::new(LinkClock::default());
    let down_clock = Arc::new(LinkClock::default());
    let flag = stop.clone();
    std::thread::Builder::new()
        .name("link-accept".into())
        .spawn(move || {
            for client in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue; // dropping `client` tells it the far side is unreachable
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (up, down) = (up_clock.clone(), down_clock.clone());
                let (c2, s2) = match (client.try_clone(), server.try_clone()) {
                    (Ok(c), Ok(s)) => (c, s),
                    _ => continue,
                };
                direction(client, server, spec, up);
                direction(s2, c2, spec, down);
            }
        })?;
    Ok(Relay { addr, stop })
}

/// Starts carrying one direction, `from` → `to`, on threads of its own.
fn direction(from: TcpStream, to: TcpStream, spec: LinkSpec, clock: Arc<LinkClock>) {
    let _ = std::thread::Builder::new()
        .name("link-pump".into())
        .spawn(move || {
            if spec.is_unshaped() {
                let _ = pipe::pump(&from, &to);
            } else {
                shaper::pump(from.try_clone().ok(), &to, spec, clock);
            }
            let _ = to.shutdown(Shutdown::Write);
            let _ = from.shutdown(Shutdown::Read);
        });
}
