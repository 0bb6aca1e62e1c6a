//! `servelab`: parse the command line and hand each subcommand to its module.

mod bench;
mod chart;
mod cli;
mod compare;
mod compare_cmd;
mod containers;
mod diff;
mod distance;
mod doc;
mod experiment;
mod html;
mod ladder;
mod load;
mod page;
mod report_cmd;
mod servers;
mod stats;
mod table;
mod tcp_server;

use clap::Parser as _;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Load(args) => load::run(args),
        cli::Command::TcpServer(args) => tcp_server::run(args),
        cli::Command::Compare(args) => compare_cmd::run(args),
        cli::Command::Report(args) => report_cmd::run(args),
        cli::Command::Httpd(args) => servers::run_httpd(args),
        cli::Command::Rustnfs(args) => servers::run_rustnfs(args),
        cli::Command::Bench(args) => bench::run(args),
        cli::Command::Diff(args) => return diff_exit(diff::run(args)),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if experiment::interrupt::is_interruption(&e) => {
            eprintln!("servelab: {}", experiment::interrupt::Interrupted);
            // As a shell reports a Ctrl-C.
            std::process::ExitCode::from(130)
        }
        Err(e) => {
            // The error and its causes, outermost first: `a: b: c`.
            eprintln!("servelab: {}", experiment::load::error_text(&e));
            // `servelab load` distinguishes wrong data (3), runaway loads (4) and a target
            // that was not ready when the load began (5).
            e.downcast_ref::<load::Exit>()
                .map_or(std::process::ExitCode::FAILURE, |x| x.code.into())
        }
    }
}

/// `servelab diff`'s exit: 0, 3 for a regression beyond `--fail-on-regression`, 1 for
/// anything else; the error and its causes printed as for every subcommand.
fn diff_exit(result: Result<(), diff::DiffError>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let code = e.exit_code();
            eprintln!("servelab: {}", experiment::load::error_text(&e.into()));
            std::process::ExitCode::from(code)
        }
    }
}
