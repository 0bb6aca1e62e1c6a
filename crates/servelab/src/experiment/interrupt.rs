//! The one lifecycle of a measuring command (compare, its container part, bench): the
//! signal handlers are the `service` crate's, installed once; the first SIGINT or
//! SIGTERM stops every supervised child at once (so the step running fails fast) and
//! raises a flag every step checks ([`check`], through the progress display), and the
//! command returns [`Interrupted`] up its stack — every destructor runs on the way: the
//! containers and the LXD instance are removed, links and namespaces go, temporary
//! directories are deleted. Nothing exits the process from the signal thread.

use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

/// The run was interrupted (SIGINT or SIGTERM); what it started has been stopped.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("interrupted (SIGINT or SIGTERM): every server this run started was stopped")]
pub struct Interrupted;

/// Installs the handlers (once per process). From then on the first signal stops the
/// children and interrupts the run at its next step; a later one only says it is still
/// stopping.
pub fn install() {
    INSTALL.call_once(|| {
        let installed = service::shutdown::on_signal_thread(|n| {
            if n == 1 {
                INTERRUPTED.store(true, Ordering::SeqCst);
                super::terminal::note(
                    "servelab: interrupted — stopping the servers this run started, then \
                     removing what it made (containers, links, temporary files)",
                );
                lab::process::terminate_all();
            } else {
                super::terminal::note(
                    "servelab: still stopping; Ctrl-\\ (SIGQUIT) quits at once, leaving \
                     containers and temporary files behind",
                );
            }
        });
        if let Err(e) = installed {
            super::terminal::note(format!(
                "servelab: cannot install the SIGINT/SIGTERM handlers ({e}); Ctrl-C will \
                 leave the servers of this run running"
            ));
        }
    });
}

/// `Err(Interrupted)` once a signal has come.
pub fn check() -> Result<(), Interrupted> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        Err(Interrupted)
    } else {
        Ok(())
    }
}

/// Whether `e` (or one of its causes) is an interruption: the command's exit status is
/// then 130, as a shell reports a Ctrl-C.
pub fn is_interruption(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<Interrupted>())
}
