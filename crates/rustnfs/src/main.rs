//! The `rustnfs` binary: parse options, install logging, run the server (or its probe).

use std::net::SocketAddr;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = rustnfs::cli::Args::parse();
    service::init_logging("info");
    let (listen, metrics) = (args.listen, args.metrics);
    match args.run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // One line, no backtrace: these are configuration and start-up errors.
            eprintln!("rustnfs: {}", describe(&e, listen, metrics));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The error as one line; a failed bind names its address and flag (the library's
/// `Io` error does not say which of the two listeners it came from, so the one that
/// still cannot be bound is named).
fn describe(e: &rustnfs::Error, listen: SocketAddr, metrics: Option<SocketAddr>) -> String {
    use std::io::ErrorKind as K;
    if let rustnfs::Error::Io(io) = e {
        let reason = match io.kind() {
            K::AddrInUse => Some("address already in use"),
            K::AddrNotAvailable => Some("address not available on this host"),
            K::PermissionDenied => Some("permission denied"),
            _ => None,
        };
        if let Some(reason) = reason {
            let taken = |a: SocketAddr| std::net::TcpListener::bind(a).is_err();
            if taken(listen) {
                return format!("--listen {listen}: {reason}");
            }
            if let Some(m) = metrics.filter(|&m| taken(m)) {
                return format!("--metrics {m}: {reason}");
            }
        }
    }
    rustnfs::with_causes(e)
}
