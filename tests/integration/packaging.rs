//! The packages, each built by its script under packaging/ from the binary under test, installed
//! on this machine and run (nothing is published): the npm packages (a Node launcher and the
//! per-platform package holding the binary, installed offline from their tarballs, run through
//! `npx`), the Debian package (`dpkg -i`, run, `dpkg -L`, `dpkg -r`), and the container image
//! where docker can build one.
//!
//! npm, cargo-deb and dpkg are peers `.ci/run` installs: without one, its test says "skipped: …"
//! and passes, unless TRANSCRIPTD_REQUIRE_PEERS is set. The image needs a docker daemon that
//! can pull its base images: without one the test says so, and fails only under
//! TRANSCRIPTD_REQUIRE_DOCKER.

use super::support::{data, peer_present, put, root, set_mtime};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_transcriptd");

fn ok(what: &str, out: &Output) {
    assert!(out.status.success(), "{what}: {}\n{}{}", out.status, String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn works(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd).args(args).stdin(Stdio::null()).output().is_ok_and(|o| o.status.success())
}

/// The version the binary under test prints.
fn version() -> String {
    let out = run(Command::new(BIN).arg("--version"));
    ok("--version", &out);
    text(&out.stdout)
}

/// A project directory whose one Claude Code session will not resume as it is (two results for
/// one call), under a scratch HOME: what `doctor` is run on.
struct Project {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    cwd: PathBuf,
}

fn project() -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let cwd = tmp.path().join("app");
    std::fs::create_dir_all(&cwd).unwrap();
    let cwd = std::fs::canonicalize(&cwd).unwrap();
    let encoded: String = cwd.to_str().unwrap().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    let session = home.join(".claude/projects").join(encoded).join("22222222-2222-4222-8222-222222222222.jsonl");
    put(&session, std::fs::read(data("check/claude-code/0005_duplicate_result.jsonl")).unwrap());
    // Three days old, so that each run's "3d ago" is the same.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    set_mtime(&session, now - 3 * 86_400);
    Project { _tmp: tmp, home, cwd }
}

/// `transcriptd doctor` in the project, run as `program args...` with `envs` added.
fn doctor(p: &Project, program: &Path, args: &[&str], envs: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args).arg("doctor").current_dir(&p.cwd).env("HOME", &p.home).env_remove("CLAUDE_CONFIG_DIR").env_remove("CODEX_HOME").env("NO_COLOR", "1");
    cmd.envs(envs.iter().copied());
    run(&mut cmd)
}

#[test]
fn npm_packages_install_offline_and_run_through_npx() {
    if !peer_present("npm (apt install npm)", works("npm", &["--version"])) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dist = tmp.path().join("dist");
    let out = run(Command::new(root().join("packaging/npm/build.sh")).arg(BIN).arg(&dist));
    ok("packaging/npm/build.sh", &out);
    let v = version();
    let v = v.trim().strip_prefix("transcriptd ").unwrap();
    let main = dist.join(format!("transcriptd-{v}.tgz"));
    let native = dist.join(format!("transcriptd-linux-x64-{v}.tgz"));
    assert!(main.is_file() && native.is_file(), "{}", text(&out.stdout));
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    eprintln!("npm tarballs: transcriptd {} bytes, transcriptd-linux-x64 {} bytes", size(&main), size(&native));

    // Installed into a scratch project, offline: the optional dependency is the local tarball.
    let prefix = tmp.path().join("prefix");
    std::fs::create_dir_all(&prefix).unwrap();
    let npm = |args: &[&str], files: &[&Path]| {
        let mut cmd = Command::new("npm");
        cmd.args(["install", "--offline", "--no-audit", "--no-fund", "--loglevel=error"])
            .args(args)
            .args(files)
            .env("npm_config_cache", tmp.path().join("cache"))
            .env("npm_config_update_notifier", "false");
        run(&mut cmd)
    };
    ok("npm install", &npm(&["--prefix", prefix.to_str().unwrap()], &[&native, &main]));
    let installed: serde_json::Value = serde_json::from_slice(&std::fs::read(prefix.join("node_modules/transcriptd-linux-x64/package.json")).unwrap()).unwrap();
    assert_eq!((&installed["os"], &installed["cpu"]), (&serde_json::json!(["linux"]), &serde_json::json!(["x64"])));
    let launcher: serde_json::Value = serde_json::from_slice(&std::fs::read(prefix.join("node_modules/transcriptd/package.json")).unwrap()).unwrap();
    assert_eq!(launcher["optionalDependencies"]["transcriptd-linux-x64"], v);
    let npx = |args: &[&str]| {
        run(Command::new("npx")
            .args(["--offline", "--no-install", "transcriptd"])
            .args(args)
            .current_dir(&prefix)
            .env("npm_config_cache", tmp.path().join("cache")))
    };
    let out = npx(&["--version"]);
    ok("npx transcriptd --version", &out);
    assert_eq!(text(&out.stdout), version());
    // Exit codes pass through: 1 for findings, 2 for a path that cannot be read.
    let broken = data("check/claude-code/0005_duplicate_result.jsonl");
    let direct = run(Command::new(BIN).arg("check").arg(&broken));
    let through = npx(&["check", broken.to_str().unwrap()]);
    assert_eq!((through.status.code(), text(&through.stdout)), (direct.status.code(), text(&direct.stdout)));
    assert_eq!(through.status.code(), Some(1));
    assert_eq!(npx(&["check", "/nonexistent/x.jsonl"]).status.code(), Some(2));

    // Installed globally (into a scratch prefix), `npx transcriptd doctor` in a project
    // directory says what the binary says there, with its exit code.
    let global = tmp.path().join("global");
    ok("npm install -g", &npm(&["-g", "--prefix", global.to_str().unwrap()], &[&native, &main]));
    let p = project();
    let want = doctor(&p, Path::new(BIN), &[], &[]);
    assert!(text(&want.stdout).contains("22222222-2222-4222-8222-222222222222"), "{}", text(&want.stdout));
    // npx finds a command among the global packages of npm's prefix (here the scratch one).
    let cache = tmp.path().join("cache");
    let npm_env = [("npm_config_prefix", global.as_path()), ("npm_config_cache", cache.as_path()), ("npm_config_update_notifier", Path::new("false"))];
    let got = doctor(&p, Path::new("npx"), &["--offline", "--no-install", "transcriptd"], &npm_env);
    assert_eq!((got.status.code(), text(&got.stdout), text(&got.stderr)), (want.status.code(), text(&want.stdout), text(&want.stderr)));
    let got = doctor(&p, &global.join("bin/transcriptd"), &[], &[]);
    assert_eq!((got.status.code(), text(&got.stdout)), (want.status.code(), text(&want.stdout)));

    // SIGTERM to the launcher reaches the binary (here reading stdin), and the launcher dies
    // of it as the binary did.
    let mut child =
        Command::new(global.join("bin/transcriptd")).args(["check", "-"]).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    // Once the launcher has started the binary (Node's start takes its time on a loaded
    // machine): its child is listed in /proc.
    let children = format!("/proc/{0}/task/{0}/children", child.id());
    let started = std::time::Instant::now();
    while std::fs::read_to_string(&children).unwrap_or_default().trim().is_empty() && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    // Its stdin stays open until it has died (`wait` would close it first: the binary would
    // read the end of its input and exit 0 before the signal the launcher passes on).
    let stdin = child.stdin.take();
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().unwrap();
    drop(stdin);
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status}");

    // Without the platform package, the launcher says what is missing and exits 2.
    let bare = tmp.path().join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    ok("npm install --omit=optional", &npm(&["--omit=optional", "--prefix", bare.to_str().unwrap()], &[&main]));
    let out = run(Command::new(bare.join("node_modules/.bin/transcriptd")).arg("--version"));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("transcriptd: no native binary for linux-x64: the package transcriptd-linux-x64 is not installed."),
        "{}",
        text(&out.stderr)
    );
    // TRANSCRIPTD_BINARY names the binary to run instead.
    let out = run(Command::new(bare.join("node_modules/.bin/transcriptd")).arg("--version").env("TRANSCRIPTD_BINARY", BIN));
    ok("TRANSCRIPTD_BINARY=... transcriptd --version", &out);
    assert_eq!(text(&out.stdout), version());
}

/// Removes the package when the test ends, however it ends.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["--purge", "transcriptd"]).stdin(Stdio::null()).output();
    }
}

#[test]
fn debian_package_installs_runs_and_removes() {
    let cargo_deb = works("cargo", &["deb", "--version"]);
    if !peer_present("cargo-deb (.ci/run installs the version it pins)", cargo_deb) || !peer_present("dpkg", works("dpkg", &["--version"])) {
        return;
    }
    if unsafe { libc::geteuid() } != 0 {
        assert!(std::env::var_os("TRANSCRIPTD_REQUIRE_PEERS").is_none(), "dpkg -i needs root and TRANSCRIPTD_REQUIRE_PEERS is set");
        eprintln!("skipped: dpkg -i needs root");
        return;
    }
    let status = run(Command::new("dpkg-query").args(["-W", "-f", "${Status}", "transcriptd"]));
    assert!(
        !text(&status.stdout).contains("installed"),
        "a transcriptd package is already installed ({}): this test installs and removes its own",
        text(&status.stdout)
    );
    let tmp = tempfile::tempdir().unwrap();
    let out = run(Command::new(root().join("packaging/deb/build.sh")).arg(BIN).arg(tmp.path()));
    ok("packaging/deb/build.sh", &out);
    let debs: Vec<PathBuf> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "deb")).collect();
    assert_eq!(debs.len(), 1, "{debs:?}");
    let deb = &debs[0];
    eprintln!("{}: {} bytes", deb.display(), std::fs::metadata(deb).unwrap().len());
    let field = |f: &str| text(&run(Command::new("dpkg-deb").args(["-f"]).arg(deb).arg(f)).stdout).trim().to_owned();
    assert_eq!(field("Package"), "transcriptd");
    assert_eq!(format!("transcriptd {}", field("Version").split('-').next().unwrap()), version().trim());
    assert!(field("Depends").contains("libc6"), "{}", field("Depends"));

    // Debian's own checker finds nothing to say (warnings included).
    if peer_present("lintian (apt install lintian)", works("lintian", &["--version"])) {
        let out = run(Command::new("lintian").args(["--fail-on", "warning", "--tag-display-limit", "0"]).arg(deb));
        let tags: Vec<String> = text(&out.stdout).lines().filter(|l| l.contains(": ")).map(str::to_owned).collect();
        assert!(out.status.success() && tags.is_empty(), "lintian: {}\n{}", out.status, tags.join("\n"));
    }

    let _installed = Installed;
    ok("dpkg -i", &run(Command::new("dpkg").arg("-i").arg(deb)));
    let out = run(Command::new("/usr/bin/transcriptd").arg("--version"));
    ok("/usr/bin/transcriptd --version", &out);
    assert_eq!(text(&out.stdout), version());
    let broken = data("check/claude-code/0005_duplicate_result.jsonl");
    let direct = run(Command::new(BIN).arg("check").arg(&broken));
    let installed = run(Command::new("/usr/bin/transcriptd").arg("check").arg(&broken));
    assert_eq!((installed.status.code(), text(&installed.stdout)), (direct.status.code(), text(&direct.stdout)));
    let p = project();
    let want = doctor(&p, Path::new(BIN), &[], &[]);
    let got = doctor(&p, Path::new("/usr/bin/transcriptd"), &[], &[]);
    assert_eq!((got.status.code(), text(&got.stdout)), (want.status.code(), text(&want.stdout)));

    // What it installed: the unit (running the package's binary), its user and configuration,
    // a manual page per verb, the completions.
    let listed = text(&run(Command::new("dpkg").args(["-L", "transcriptd"])).stdout);
    let files: Vec<&str> = listed.lines().collect();
    let pages = run(Command::new(BIN).args(["man", "--dir"]).arg(tmp.path().join("man")));
    ok("man --dir", &pages);
    let mut expected = vec![
        "/usr/bin/transcriptd".to_owned(),
        "/usr/lib/systemd/system/transcriptd.service".to_owned(),
        "/usr/lib/sysusers.d/transcriptd.conf".to_owned(),
        "/etc/transcriptd/transcriptd.toml".to_owned(),
        "/usr/share/bash-completion/completions/transcriptd".to_owned(),
        "/usr/share/zsh/vendor-completions/_transcriptd".to_owned(),
        "/usr/share/fish/vendor_completions.d/transcriptd.fish".to_owned(),
    ];
    let mut pages: Vec<String> = std::fs::read_dir(tmp.path().join("man")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    pages.sort();
    assert!(pages.len() > 15 && pages.contains(&"transcriptd-doctor.1".to_owned()), "{pages:?}");
    expected.extend(pages.iter().map(|p| format!("/usr/share/man/man1/{p}.gz")));
    for f in &expected {
        assert!(files.contains(&f.as_str()), "dpkg -L does not list {f}:\n{listed}");
        assert!(Path::new(f).is_file(), "{f} is not installed");
    }
    let unit = std::fs::read_to_string("/usr/lib/systemd/system/transcriptd.service").unwrap();
    assert!(unit.contains("\nExecStart=/usr/bin/transcriptd run --config /etc/transcriptd/transcriptd.toml"), "{unit}");
    assert!(!unit.lines().any(|l| l.starts_with("Exec") && l.contains("/usr/local")), "{unit}");
    assert_eq!(std::fs::read("/etc/transcriptd/transcriptd.toml").unwrap(), std::fs::read(root().join("deploy/systemd/transcriptd.toml")).unwrap());
    ok(
        "validate-config of the installed configuration",
        &run(Command::new("/usr/bin/transcriptd").args(["validate-config", "/etc/transcriptd/transcriptd.toml"])),
    );
    if works("systemd-sysusers", &["--version"]) {
        ok("getent passwd transcriptd (made by the postinst)", &run(Command::new("getent").args(["passwd", "transcriptd"])));
    }
    if works("systemd-analyze", &["--version"]) {
        ok("systemd-analyze verify", &run(Command::new("systemd-analyze").args(["verify", "/usr/lib/systemd/system/transcriptd.service"])));
    }
    if works("man", &["--version"]) {
        let page = run(Command::new("man").args(["-P", "cat", "transcriptd-doctor"]).env("MANWIDTH", "100"));
        ok("man transcriptd-doctor", &page);
        assert!(text(&page.stdout).contains("transcriptd-doctor"), "{}", text(&page.stdout));
    }
    let complete = run(Command::new("bash").args(["-c", "source /usr/share/bash-completion/completions/transcriptd && complete -p transcriptd"]));
    ok("the bash completion loads", &complete);
    assert!(text(&complete.stdout).starts_with("complete "), "{}", text(&complete.stdout));

    // Removed: the files go, the configuration (a conffile) stays until purged.
    ok("dpkg -r", &run(Command::new("dpkg").args(["-r", "transcriptd"])));
    for f in expected.iter().filter(|f| !f.starts_with("/etc/")) {
        assert!(!Path::new(f).exists(), "{f} is left after dpkg -r");
    }
    assert!(Path::new("/etc/transcriptd/transcriptd.toml").is_file(), "dpkg -r keeps the configuration");
    ok("dpkg --purge", &run(Command::new("dpkg").args(["--purge", "transcriptd"])));
    assert!(!Path::new("/etc/transcriptd/transcriptd.toml").exists());
}

#[test]
fn container_image_builds_and_runs() {
    let info = Command::new("docker").args(["info", "--format", "{{.ServerVersion}}"]).stdin(Stdio::null()).output();
    let daemon = info.as_ref().is_ok_and(|o| o.status.success());
    if !daemon {
        let why = match &info {
            Ok(o) => text(&o.stderr).lines().find(|l| !l.trim().is_empty()).unwrap_or("docker info failed").trim().to_owned(),
            Err(e) => format!("no docker client: {e}"),
        };
        assert!(std::env::var_os("TRANSCRIPTD_REQUIRE_DOCKER").is_none(), "docker cannot build here ({why}) and TRANSCRIPTD_REQUIRE_DOCKER is set");
        eprintln!("skipped: docker cannot build the image here ({why})");
        return;
    }
    let tag = format!("transcriptd-test:{}", std::process::id());
    let build = run(Command::new("docker").args(["build", "-f", "deploy/docker/Dockerfile", "-t", &tag, "."]).current_dir(root()));
    ok("docker build", &build);
    let image = |args: &[&str]| {
        let fixtures = data("check/claude-code");
        let mount = format!("{}:/transcripts:ro", fixtures.display());
        run(Command::new("docker").args(["run", "--rm", "--network", "none", "-v", &mount, &tag]).args(args))
    };
    let out = image(&["--version"]);
    ok("docker run --version", &out);
    assert_eq!(text(&out.stdout), version());
    let direct = run(Command::new(BIN).args(["check", "--no-summary", "0005_duplicate_result.jsonl"]).current_dir(data("check/claude-code")));
    let inside = image(&["check", "--no-summary", "/transcripts/0005_duplicate_result.jsonl"]);
    assert_eq!(inside.status.code(), direct.status.code());
    assert_eq!(text(&inside.stdout).replace("/transcripts/", ""), text(&direct.stdout));
    let _ = run(Command::new("docker").args(["rmi", "-f", &tag]));
}

/// cargo-deb is pinned once: the version .ci/run installs is the one the build script and
/// docs/install.md name.
#[test]
fn cargo_deb_is_pinned_to_one_version() {
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    let pin = ci.lines().find_map(|l| l.split_once("cargo install --locked --quiet cargo-deb@").map(|(_, v)| v)).expect(".ci/run installs cargo-deb");
    let pin = format!("{}{}", "cargo-deb@", pin.trim());
    // The check that skips the install names the same version.
    assert!(
        ci.contains(&format!("grep -qx 'cargo-deb {}'", pin.trim_start_matches("cargo-deb@"))),
        ".ci/run checks another cargo-deb version than it installs"
    );
    for f in ["packaging/deb/build.sh", "docs/install.md", "docs/development.md"] {
        let text = std::fs::read_to_string(root().join(f)).unwrap();
        let named: Vec<&str> = text
            .match_indices("cargo-deb@")
            .map(|(i, _)| text[i..].split(|c: char| !(c.is_ascii_alphanumeric() || "-@.".contains(c))).next().unwrap())
            .collect();
        assert!(!named.is_empty() && named.iter().all(|n| n.trim_end_matches('.') == pin), "{f} names {named:?}, .ci/run installs {pin}");
    }
}
