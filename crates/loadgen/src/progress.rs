//! The progress bar on stderr: appears only after the first second of a run, and only
//! when stderr is a terminal, so pipes and CI logs stay clean.

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::plan::Schedule;
use crate::worker::Dispenser;

pub(crate) struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    pub fn start(dispenser: Arc<Dispenser>, schedule: Schedule) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        if !std::io::stderr().is_terminal() {
            return Progress { stop, thread: None };
        }
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(1) {
                if flag.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let (bar, by_time) = match (dispenser.count(), schedule.expected_duration()) {
                (Some(n), _) => (ProgressBar::new(n), false),
                (None, Some(d)) => (ProgressBar::new(d.as_millis() as u64), true),
                (None, None) => (ProgressBar::no_length(), false),
            };
            let template = if by_time {
                "{elapsed_precise} [{bar:40}] {percent}% {msg}"
            } else {
                "{elapsed_precise} [{bar:40}] {pos}/{len} {msg}"
            };
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            while !flag.load(Ordering::Relaxed) {
                let done = dispenser.done.load(Ordering::Relaxed);
                if by_time {
                    bar.set_position(t0.elapsed().as_millis() as u64);
                    bar.set_message(format!("{done} ops"));
                } else {
                    bar.set_position(done);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            bar.finish_and_clear();
        });
        Progress {
            stop,
            thread: Some(thread),
        }
    }

    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
