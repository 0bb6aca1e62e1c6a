//! The `rustnfs` binary: parse options, install logging, run the server (or its probe).

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = rustnfs::cli::Args::parse();
    service::init_logging("info");
    match args.run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // One line, no backtrace: these are configuration and start-up errors.
            eprintln!("rustnfs: {}", service::Chain(&e));
            std::process::ExitCode::FAILURE
        }
    }
}
