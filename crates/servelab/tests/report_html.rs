//! report.html in a real browser: a committed real run's report.json is re-rendered by
//! `servelab report`, then headless Chromium (Debian's `chromium`, driven over the
//! DevTools protocol on a pipe) opens the page from disk and is asked what a reader would
//! see: no script error, no network request, every table and plot present, no two labels
//! of a plot on top of each other. Screenshots of the page, of its answer section and of
//! each SVG land in the run directory; every SVG must come out of the browser as a drawn
//! picture, not a blank one.
//!
//! Without Chromium the test says so and passes, except under CI (CI set), where the
//! browser is installed by .ci/run and its absence is a failure.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// The committed run (a `compare --containers lxd,docker` on this machine) whose
/// report.json and containers.json the page is rendered from.
const REAL_RUN: &str = "benches/results/2026-12-01-answer";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        let found = std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .map(|d| d.join(name))
            .find(|p| p.is_file());
        if found.is_some() {
            return found;
        }
    }
    None
}

/// A Chromium driven over `--remote-debugging-pipe`: commands go to its fd 3, answers and
/// events come NUL-separated from its fd 4.
struct Browser {
    child: Child,
    to_browser: std::fs::File,
    from_browser: Receiver<Value>,
    next_id: u64,
    session: Option<String>,
    /// Every event seen, in order (console messages, exceptions, network requests).
    events: Vec<Value>,
    _profile: tempfile::TempDir,
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

impl Browser {
    fn start(binary: &Path) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let (cmd_read, cmd_write) = pipe();
        let (resp_read, resp_write) = pipe();
        let (cr, rw) = (cmd_read.as_raw_fd(), resp_write.as_raw_fd());
        let mut command = Command::new(binary);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--hide-scrollbars",
                "--window-size=1400,1000",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        unsafe {
            command.pre_exec(move || {
                // Copies without close-on-exec, then onto the numbers Chromium expects.
                let a = libc::dup(cr);
                let b = libc::dup(rw);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("chromium starts");
        drop(cmd_read);
        drop(resp_write);
        let (tx, rx) = channel();
        let reader = std::fs::File::from(resp_read);
        std::thread::spawn(move || {
            let mut r = BufReader::new(reader);
            loop {
                let mut buf = Vec::new();
                match r.read_until(0, &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        buf.pop_if(|b| *b == 0);
                        if let Ok(v) = serde_json::from_slice::<Value>(&buf)
                            && tx.send(v).is_err()
                        {
                            return;
                        }
                    }
                }
            }
        });
        Browser {
            child,
            to_browser: std::fs::File::from(cmd_write),
            from_browser: rx,
            next_id: 1,
            session: None,
            events: Vec::new(),
            _profile: profile,
        }
    }

    /// Sends a command (to the attached page when there is one) and waits for its answer,
    /// keeping every event that arrives meanwhile.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to_browser.write_all(&bytes).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from_browser.recv_timeout(left) {
                Ok(v) if v["id"] == json!(id) => {
                    assert!(v.get("error").is_none(), "{method} failed: {v}");
                    return v["result"].clone();
                }
                Ok(v) => self.events.push(v),
                Err(RecvTimeoutError::Timeout) => panic!("{method}: no answer within 60 s"),
                Err(RecvTimeoutError::Disconnected) => panic!("{method}: chromium went away"),
            }
        }
    }

    /// Waits for an event named `method` (seen already or arriving within 60 s).
    fn wait_event(&mut self, method: &str, since: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.events[since..]
                .iter()
                .any(|e| e["method"] == json!(method))
            {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from_browser.recv_timeout(left) {
                Ok(v) => self.events.push(v),
                Err(_) => panic!("no {method} within 60 s"),
            }
        }
    }

    fn open_page(&mut self) {
        let target = self.call("Target.createTarget", json!({"url": "about:blank"}));
        let attached = self.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        self.session = Some(attached["sessionId"].as_str().unwrap().to_string());
        for domain in [
            "Page.enable",
            "Runtime.enable",
            "Log.enable",
            "Network.enable",
        ] {
            self.call(domain, json!({}));
        }
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": false}),
        );
    }

    fn navigate(&mut self, url: &str) {
        let since = self.events.len();
        self.call("Page.navigate", json!({"url": url}));
        self.wait_event("Page.loadEventFired", since);
    }

    fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    fn screenshot(&mut self, clip: Option<Value>) -> Vec<u8> {
        let mut params = json!({"format": "png", "captureBeyondViewport": true});
        if let Some(c) = clip {
            params["clip"] = c;
        }
        let r = self.call("Page.captureScreenshot", params);
        base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Share of pixels that are not (near) white, and how many distinct colours there are.
fn ink(png_bytes: &[u8]) -> (f64, usize) {
    let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels = buf[..info.buffer_size()].chunks(channels);
    let mut inked = 0usize;
    let mut total = 0usize;
    let mut colours: HashMap<[u8; 3], ()> = HashMap::new();
    for p in pixels {
        total += 1;
        let rgb = [p[0], p[1.min(channels - 1)], p[2.min(channels - 1)]];
        if rgb.iter().any(|c| *c < 235) {
            inked += 1;
        }
        if colours.len() < 1000 {
            colours.insert(rgb, ());
        }
    }
    (inked as f64 / total.max(1) as f64, colours.len())
}

/// Run in the page: what a reader sees. Labels are every `<text>` of a chart, compared
/// pairwise by their rendered boxes (1 px of slack for anti-aliasing).
const CHECKS: &str = r#"(function () {
  var overlaps = [];
  document.querySelectorAll('svg.chart').forEach(function (svg, n) {
    var boxes = Array.prototype.map.call(svg.querySelectorAll('text'), function (t) {
      var r = t.getBoundingClientRect();
      return {t: t.textContent, l: r.left, r: r.right, top: r.top, b: r.bottom};
    }).filter(function (b) { return b.r > b.l && b.b > b.top; });
    for (var i = 0; i < boxes.length; i++) {
      for (var j = i + 1; j < boxes.length; j++) {
        var a = boxes[i], b = boxes[j];
        var w = Math.min(a.r, b.r) - Math.max(a.l, b.l);
        var h = Math.min(a.b, b.b) - Math.max(a.top, b.top);
        if (w > 1 && h > 1) {
          overlaps.push((svg.querySelector('title') || {}).textContent + ': "' + a.t + '" / "' + b.t + '"');
        }
      }
    }
  });
  var answer = document.querySelector('section.answer');
  var rect = answer ? answer.getBoundingClientRect() : null;
  return {
    tables: document.querySelectorAll('table').length,
    charts: document.querySelectorAll('svg.chart').length,
    series: document.querySelectorAll('svg.chart g.series').length,
    legendItems: document.querySelectorAll('svg.chart g.legend-item').length,
    overlaps: overlaps,
    answer: rect ? {x: rect.left + window.scrollX, y: rect.top + window.scrollY, width: rect.width, height: rect.height} : null,
    firstSection: (document.querySelector('main section:not(.preamble) h2') || {}).textContent || ''
  };
})()"#;

#[test]
fn report_html_reads_in_a_real_browser() {
    let Some(binary) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is missing under CI: .ci/run installs it"
        );
        eprintln!("SKIP report_html_reads_in_a_real_browser: no chromium on PATH");
        return;
    };
    let run = tempfile::tempdir().unwrap();
    for file in ["report.json", "containers.json", "containers.md"] {
        std::fs::copy(repo_root().join(REAL_RUN).join(file), run.path().join(file)).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_servelab"))
        .arg("report")
        .arg(run.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = run.path().join("report.html");
    let md = std::fs::read_to_string(run.path().join("report.md")).unwrap()
        + &std::fs::read_to_string(run.path().join("containers.md")).unwrap();
    let svgs: Vec<PathBuf> = std::fs::read_dir(run.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "svg"))
        .collect();
    assert!(!svgs.is_empty());

    let mut b = Browser::start(&binary);
    b.open_page();
    let page_url = format!("file://{}", html.display());
    b.navigate(&page_url);
    let seen = b.eval(CHECKS);

    // A Markdown table has one delimiter row: `|---|---:|` or `| --- | ---: |`.
    let tables_in_md = md
        .lines()
        .filter(|l| {
            let l = l.trim();
            l.starts_with('|') && l.contains("---") && l.chars().all(|c| "|-: ".contains(c))
        })
        .count();
    assert_eq!(seen["tables"], json!(tables_in_md), "{seen}");
    assert_eq!(seen["charts"], json!(svgs.len()), "{seen}");
    assert_eq!(seen["series"], seen["legendItems"], "{seen}");
    assert_eq!(
        seen["overlaps"],
        json!([]),
        "labels on top of each other: {seen}"
    );
    // The answer opens the page, and the containers' answer and plot are on it.
    assert_eq!(seen["firstSection"], json!("The answer"), "{seen}");
    assert!(seen["answer"].is_object(), "{seen}");
    for plot in [
        "containers-answer.svg",
        "service-demand-large.svg",
        "equal-load-large.svg",
    ] {
        assert!(svgs.iter().any(|p| p.ends_with(plot)), "{plot} missing");
    }

    // Toggling a series from its legend hides it.
    let hidden = b.eval(
        "(function(){var i=document.querySelector('g.legend-item'); if(!i) return 'none'; \
         i.dispatchEvent(new MouseEvent('click',{bubbles:true})); \
         var g=i.closest('svg').querySelector('g.series[data-series=\"'+i.getAttribute('data-series')+'\"]'); \
         return getComputedStyle(g).display;})()",
    );
    assert!(
        hidden == json!("none"),
        "legend click should hide its series: {hidden}"
    );

    let page_png = b.screenshot(None);
    std::fs::write(run.path().join("report-screenshot.png"), &page_png).unwrap();
    if let Some(a) = seen["answer"].as_object() {
        let clip = json!({"x": a["x"], "y": a["y"], "width": a["width"], "height": a["height"], "scale": 1});
        let png = b.screenshot(Some(clip));
        std::fs::write(run.path().join("answer-screenshot.png"), png).unwrap();
    }

    for svg in &svgs {
        b.navigate(&format!("file://{}", svg.display()));
        let png = b.screenshot(None);
        let (share, colours) = ink(&png);
        let name = svg.file_name().unwrap().to_string_lossy().to_string();
        std::fs::write(run.path().join(format!("{name}.png")), &png).unwrap();
        assert!(
            share > 0.01 && colours >= 3,
            "{name} looks blank: {share} inked, {colours} colours"
        );
    }

    // What the browser saw: no script error, no console error, no request but our files.
    let mut problems = Vec::new();
    for e in &b.events {
        match e["method"].as_str().unwrap_or("") {
            "Runtime.exceptionThrown" => problems.push(format!("exception: {}", e["params"])),
            "Runtime.consoleAPICalled" if e["params"]["type"] == json!("error") => {
                problems.push(format!("console error: {}", e["params"]))
            }
            "Log.entryAdded" if e["params"]["entry"]["level"] == json!("error") => {
                problems.push(format!("log error: {}", e["params"]["entry"]))
            }
            "Network.requestWillBeSent" => {
                let url = e["params"]["request"]["url"].as_str().unwrap_or("");
                let ours = url == page_url
                    || svgs
                        .iter()
                        .any(|s| url == format!("file://{}", s.display()));
                if !ours {
                    problems.push(format!("request: {url}"));
                }
            }
            _ => {}
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");

    // Kept for a person to look at when asked (SERVELAB_KEEP_SCREENSHOTS=DIR).
    if let Some(keep) = std::env::var_os("SERVELAB_KEEP_SCREENSHOTS") {
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).unwrap();
        for e in std::fs::read_dir(run.path()).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, keep.join(p.file_name().unwrap())).unwrap();
        }
    }
}
