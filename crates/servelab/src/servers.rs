//! `servelab httpd` and `servelab rustnfs`: the servers as subcommands of one binary, so
//! `compare` can start them as child processes and one static binary carries everything.

use service::init_logging;

pub fn run_httpd(args: httpd::cli::Args) -> anyhow::Result<()> {
    init_logging("httpd=info");
    args.run()?;
    Ok(())
}

pub fn run_rustnfs(args: rustnfs::cli::Args) -> anyhow::Result<()> {
    // The engine behind rustnfs's guard logs every internal connection at info.
    init_logging("info");
    args.run()?;
    Ok(())
}
