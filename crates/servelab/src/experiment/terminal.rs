//! The one place a measuring command writes to the user's terminal besides its report:
//! lines printed above the progress bar when one is on screen, plain stderr lines
//! otherwise — so a note from anywhere (a link that fell back to the relay, a failed
//! run, an interruption) never tears the bar.

use indicatif::ProgressBar;
use parking_lot::Mutex;

/// The bar on screen, if any.
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Prints a line for the user: above the bar when one is shown, on stderr otherwise.
pub fn note(line: impl AsRef<str>) {
    match BAR.lock().as_ref() {
        Some(bar) => bar.println(line.as_ref()),
        None => eprintln!("{}", line.as_ref()),
    }
}

/// The bar now on screen (`None`: none any more).
pub fn show(bar: Option<ProgressBar>) {
    *BAR.lock() = bar;
}
