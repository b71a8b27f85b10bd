//! A real HTTP collector for the `http` sink's tests: `peers/http_receiver.py`, a process that
//! can be killed with SIGKILL and started again on the same port, storing every batch it takes.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

/// A loopback port nothing listens on (for a collector that starts later).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The collector process and what it stored.
pub struct Receiver {
    child: Option<Child>,
    /// Its port.
    pub port: u16,
    dir: PathBuf,
    args: Vec<String>,
}

impl Receiver {
    /// Starts a collector on `port` (0: any) storing in `dir`, with more `args`
    /// (`--fail-first N`, `--status 201`).
    pub fn start(dir: &Path, port: u16, args: &[&str]) -> Receiver {
        std::fs::create_dir_all(dir).unwrap();
        let mut r = Receiver { child: None, port, dir: dir.to_path_buf(), args: args.iter().map(|s| (*s).to_owned()).collect() };
        r.restart();
        r
    }

    /// Where it stores batches.
    pub fn out(&self) -> PathBuf {
        self.dir.join("batches.jsonl")
    }

    /// Starts the process again (after [`Receiver::kill9`]), on the same port, without the
    /// arguments that make it fail.
    pub fn restart(&mut self) {
        let port_file = self.dir.join("port");
        let _ = std::fs::remove_file(&port_file);
        let script = super::root().join("tests/integration/peers/http_receiver.py");
        let child = Command::new("python3")
            .arg(script)
            .args(["--port", &self.port.to_string(), "--port-file", port_file.to_str().unwrap(), "--out", self.out().to_str().unwrap()])
            .args(&self.args)
            .spawn()
            .expect("python3 runs the receiver");
        self.child = Some(child);
        assert!(super::harness::wait(Duration::from_secs(20), || port_file.exists()), "the receiver did not start listening");
        self.port = std::fs::read_to_string(&port_file).unwrap().trim().parse().unwrap();
        self.args.retain(|a| !a.starts_with("--fail"));
    }

    /// SIGKILL, and waits for it to be gone.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The batches stored: (id, body).
    pub fn batches(&self) -> Vec<(String, String)> {
        let Ok(text) = std::fs::read_to_string(self.out()) else { return Vec::new() };
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| (v["id"].as_str().unwrap_or_default().to_owned(), v["body"].as_str().unwrap_or_default().to_owned()))
            .collect()
    }

    /// The records of every stored batch, in order.
    pub fn records(&self) -> Vec<Value> {
        self.batches()
            .iter()
            .flat_map(|(_, b)| b.lines().map(|l| serde_json::from_str::<Value>(l).expect("a batch holds whole JSON lines")).collect::<Vec<_>>())
            .collect()
    }

    /// Batches that came again after they were stored (their answer was lost).
    pub fn resent(&self) -> usize {
        std::fs::read_to_string(self.dir.join("batches.jsonl.resent")).map_or(0, |t| t.lines().count())
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.kill9();
    }
}
