//! The `httpd` binary: parse flags, install logging, run the server ([`httpd::cli`]).

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = httpd::cli::Args::parse();
    httpd::cli::init_logging("httpd=info");
    match args.run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // One line, no backtrace: these are configuration and start-up errors.
            eprintln!("httpd: {}", httpd::Chain(&e));
            std::process::ExitCode::FAILURE
        }
    }
}
