//! A real browser for the tests: headless Chromium (Debian's `chromium` package, installed by
//! `.ci/run`) driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: commands
//! go in on the child's fd 3, answers and events come out on its fd 4, each message a JSON
//! object ended by a NUL byte). No network, no port, no extra dependency.
//!
//! A watchdog kills the browser if a test waits on it for longer than [`DEADLINE`], so a hung
//! browser fails the test instead of hanging it.

use serde_json::{json, Value};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The browser every test uses.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// How long one browser may live.
const DEADLINE: Duration = Duration::from_secs(180);

/// A headless Chromium with one page attached.
pub struct Chromium {
    child: Child,
    to: File,
    from: BufReader<File>,
    next_id: u64,
    session: String,
    /// Events received so far (console messages, log entries, dialogs, ...).
    pub events: Vec<Value>,
    stop_watchdog: Option<mpsc::Sender<()>>,
    profile: tempfile::TempDir,
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0, "pipe2");
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

impl Chromium {
    /// Starts the browser (with the flags this closed network needs: no background
    /// connections, a fresh profile) and attaches to its page.
    pub fn start() -> Self {
        assert!(Path::new(CHROMIUM).exists(), "{CHROMIUM} is missing: `apt-get install chromium` (.ci/run installs it)");
        let profile = tempfile::tempdir().unwrap();
        let (cmd_read, cmd_write) = pipe();
        let (res_read, res_write) = pipe();
        let (cr, rw) = (std::os::fd::AsRawFd::as_raw_fd(&cmd_read), std::os::fd::AsRawFd::as_raw_fd(&res_write));
        let log = File::create(profile.path().join("chromium.log")).unwrap();
        let mut cmd = Command::new(CHROMIUM);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--mute-audio",
            "--window-size=1100,900",
            "--remote-debugging-pipe",
        ])
        .arg(format!("--user-data-dir={}", profile.path().join("profile").display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
        unsafe {
            cmd.pre_exec(move || {
                // Out of the way first, so that neither lands on the other's target.
                let a = libc::fcntl(cr, libc::F_DUPFD, 10);
                let b = libc::fcntl(rw, libc::F_DUPFD, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(a);
                libc::close(b);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start chromium");
        drop((cmd_read, res_write));
        let (stop, stopped) = mpsc::channel::<()>();
        let pid = child.id() as libc::pid_t;
        std::thread::spawn(move || {
            if stopped.recv_timeout(DEADLINE) == Err(mpsc::RecvTimeoutError::Timeout) {
                eprintln!("chromium did not finish within {DEADLINE:?}: killed");
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        });
        let mut c = Chromium {
            child,
            to: File::from(cmd_write),
            from: BufReader::new(File::from(res_read)),
            next_id: 0,
            session: String::new(),
            events: Vec::new(),
            stop_watchdog: Some(stop),
            profile,
        };
        let target = loop {
            let targets = c.browser("Target.getTargets", json!({}));
            if let Some(t) = targets["targetInfos"].as_array().unwrap().iter().find(|t| t["type"] == "page") {
                break t["targetId"].as_str().unwrap().to_owned();
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let attached = c.browser("Target.attachToTarget", json!({ "targetId": target, "flatten": true }));
        c.session = attached["sessionId"].as_str().unwrap().to_owned();
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
            c.call(domain, json!({}));
        }
        c
    }

    fn read_message(&mut self) -> Value {
        let mut buf = Vec::new();
        let n = self.from.read_until(0, &mut buf).unwrap();
        if n == 0 || buf.last() != Some(&0) {
            let log = std::fs::read_to_string(self.profile.path().join("chromium.log")).unwrap_or_default();
            panic!("chromium closed its pipe; its log:\n{log}");
        }
        buf.pop();
        serde_json::from_slice(&buf).unwrap()
    }

    fn send(&mut self, method: &str, params: Value, session: Option<String>) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = s.into();
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        loop {
            let m = self.read_message();
            if m["id"] == id {
                if let Some(e) = m.get("error") {
                    panic!("{method} failed: {e}");
                }
                return m["result"].clone();
            }
            if m.get("method").is_some() {
                self.events.push(m);
            }
        }
    }

    /// A command to the browser itself.
    pub fn browser(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, None)
    }

    /// A command to the page.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let s = self.session.clone();
        self.send(method, params, Some(s))
    }

    /// Waits for the page event `method`.
    pub fn wait_for(&mut self, method: &str) -> Value {
        if let Some(i) = self.events.iter().position(|e| e["method"] == method) {
            return self.events.remove(i);
        }
        loop {
            let m = self.read_message();
            if m["method"] == method {
                return m;
            }
            if m.get("method").is_some() {
                self.events.push(m);
            }
        }
    }

    /// Opens `url` and waits for its load event.
    pub fn navigate(&mut self, url: &str) {
        self.events.retain(|e| e["method"] != "Page.loadEventFired");
        let r = self.call("Page.navigate", json!({ "url": url }));
        assert!(r.get("errorText").is_none(), "navigation to {url} failed: {r}");
        self.wait_for("Page.loadEventFired");
    }

    /// The value of a JavaScript expression in the page (JSON-serialisable values only).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call("Runtime.evaluate", json!({ "expression": expression, "returnByValue": true }));
        assert!(r.get("exceptionDetails").is_none(), "{expression} threw: {r}");
        r["result"]["value"].clone()
    }

    /// Console errors, uncaught exceptions, error log entries (a refused load, a blocked
    /// resource, a CSP violation) and dialogs the page opened, as text.
    pub fn problems(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| {
                let p = &e["params"];
                match e["method"].as_str()? {
                    "Runtime.consoleAPICalled" if matches!(p["type"].as_str(), Some("error" | "assert" | "warning")) => {
                        Some(format!("console {}: {}", p["type"], p["args"]))
                    }
                    "Runtime.exceptionThrown" => Some(format!("exception: {}", p["exceptionDetails"])),
                    "Log.entryAdded" if matches!(p["entry"]["level"].as_str(), Some("error" | "warning")) => {
                        Some(format!("log {}: {}", p["entry"]["level"], p["entry"]["text"]))
                    }
                    "Page.javascriptDialogOpening" => Some(format!("dialog: {}", p["message"])),
                    _ => None,
                }
            })
            .collect()
    }

    /// A PNG of the whole page, written to `path`.
    pub fn screenshot(&mut self, path: &Path) {
        use base64::Engine;
        let m = self.call("Page.getLayoutMetrics", json!({}));
        let size = &m["cssContentSize"];
        let clip = json!({ "x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1 });
        let shot = self.call("Page.captureScreenshot", json!({ "format": "png", "captureBeyondViewport": true, "clip": clip }));
        let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        // Ask it to close; kill it if the pipe is already gone or it does not.
        let mut msg = serde_json::to_vec(&json!({ "id": u64::MAX / 2, "method": "Browser.close", "params": {} })).unwrap();
        msg.push(0);
        let _ = self.to.write_all(&msg);
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if let Some(s) = self.stop_watchdog.take() {
            let _ = s.send(());
        }
    }
}
