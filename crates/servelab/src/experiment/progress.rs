//! The one progress display of compare, bench and the container sweeps: the steps of a
//! run are planned before the first one starts, each with the time it is expected to
//! take, so the display shows the true total from the start ("step 12 of 40") and the
//! time left (the expected time of the steps to come, scaled by how the steps done so far
//! compared with their expectation). On a terminal it is a bar (indicatif) with lines
//! printed above it; otherwise one line per step. Every step checks for an interruption
//! ([`super::interrupt`]), so a Ctrl-C takes effect at the next step.

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::interrupt::{self, Interrupted};
use super::terminal;

/// A run's progress: planned steps and how far it got.
pub struct Progress {
    command: &'static str,
    steps: usize,
    done: usize,
    /// Expected seconds of every planned step, and of those finished.
    planned_s: f64,
    done_s: f64,
    /// Expected seconds of the step running, if one is.
    current: Option<f64>,
    /// When the first step began (set-up before it is not a step).
    started: Option<Instant>,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// An empty plan; `command` prefixes the lines (`servelab compare`).
    pub fn new(command: &'static str) -> Progress {
        Progress {
            command,
            steps: 0,
            done: 0,
            planned_s: 0.0,
            done_s: 0.0,
            current: None,
            started: None,
            bar: None,
        }
    }

    /// Adds `steps` steps of about `each` to the plan.
    pub fn plan(&mut self, steps: usize, each: Duration) {
        self.steps += steps;
        self.planned_s += steps as f64 * each.as_secs_f64();
        self.draw_total();
    }

    /// Takes `steps` planned steps of about `each` out of the plan (optional steps that
    /// turned out not to be needed).
    pub fn unplan(&mut self, steps: usize, each: Duration) {
        self.steps = self.steps.saturating_sub(steps).max(self.done);
        self.planned_s = (self.planned_s - steps as f64 * each.as_secs_f64()).max(self.done_s);
        self.draw_total();
    }

    /// Starts the next step (finishing the one before), `what` saying what it measures;
    /// `expected` is its planned time. `Err` when the run was interrupted.
    pub fn step(&mut self, expected: Duration, what: impl AsRef<str>) -> Result<(), Interrupted> {
        interrupt::check()?;
        self.started.get_or_insert_with(Instant::now);
        if self.bar.is_none() && std::io::stderr().is_terminal() {
            self.show_bar();
        }
        self.finish_step();
        self.current = Some(expected.as_secs_f64());
        let line = format!(
            "step {} of {}{}: {}",
            self.done + 1,
            self.steps.max(self.done + 1),
            self.time_left()
                .map(|t| format!(", {t}"))
                .unwrap_or_default(),
            what.as_ref()
        );
        match &self.bar {
            Some(bar) => {
                bar.set_position((self.done_s * 1000.0) as u64);
                bar.set_message(line);
            }
            None => eprintln!("{}: {line}", self.command),
        }
        Ok(())
    }

    /// Finishes the last step and takes the bar off the screen.
    pub fn finish(&mut self) {
        self.finish_step();
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        terminal::show(None);
    }

    fn finish_step(&mut self) {
        if let Some(s) = self.current.take() {
            self.done += 1;
            self.done_s += s;
        }
    }

    /// "about 3 min left": the expected time still to come, scaled by how long the steps
    /// done so far took against their expectation; none before the first is done.
    fn time_left(&self) -> Option<String> {
        let started = self.started?;
        if self.done_s <= 0.0 {
            return None;
        }
        let pace = started.elapsed().as_secs_f64() / self.done_s;
        let left = (self.planned_s - self.done_s).max(0.0) * pace;
        Some(format!(
            "about {} left",
            human(Duration::from_secs_f64(left))
        ))
    }

    fn show_bar(&mut self) {
        let bar = ProgressBar::new((self.planned_s * 1000.0).max(1.0) as u64);
        if let Ok(style) =
            ProgressStyle::with_template("{prefix} {elapsed:>4} [{bar:30}] {wide_msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(self.command);
        bar.enable_steady_tick(Duration::from_millis(500));
        terminal::show(Some(bar.clone()));
        self.bar = Some(bar);
    }

    fn draw_total(&self) {
        if let Some(bar) = &self.bar {
            bar.set_length((self.planned_s * 1000.0).max(1.0) as u64);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
            terminal::show(None);
        }
    }
}

/// `45 s`, `3 min`, `1 h 10 min`.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=89 => format!("{s} s"),
        90..=3599 => format!("{} min", (s + 30) / 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600 + 30) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_is_known_from_the_start_and_shrinks_when_steps_are_not_needed() {
        let mut p = Progress::new("test");
        p.plan(3, Duration::from_secs(2));
        p.plan(2, Duration::from_secs(1));
        assert_eq!((p.steps, p.planned_s), (5, 8.0));
        p.step(Duration::from_secs(2), "one").unwrap();
        assert_eq!(p.done, 0);
        p.step(Duration::from_secs(2), "two").unwrap();
        assert_eq!((p.done, p.done_s), (1, 2.0));
        assert!(p.time_left().unwrap().starts_with("about "));
        p.unplan(2, Duration::from_secs(1));
        assert_eq!((p.steps, p.planned_s), (3, 6.0));
        p.finish();
    }

    #[test]
    fn time_reads_as_a_person_would_say_it() {
        assert_eq!(human(Duration::from_secs(42)), "42 s");
        assert_eq!(human(Duration::from_secs(200)), "3 min");
        assert_eq!(human(Duration::from_secs(4200)), "1 h 10 min");
    }
}
