//! The packages, as an operator installs them: the `.deb` that `cargo deb -p
//! stratum-api` builds (target/debian/) installed with `dpkg -i`, the
//! packaged unit's `ExecStart` run as the packaged user, and the package
//! removed and purged; the `.rpm` that `cargo generate-rpm -p api` builds
//! after `api/package/split-debug` (target/generate-rpm/) read with `rpm
//! -qlp`; the shipped unit rated by
//! `systemd-analyze security` and checked by `systemd-analyze verify`.
//!
//! `.ci/run` builds both packages before the tests and sets
//! `STRATUM_REQUIRE_PACKAGES=1`; elsewhere a missing package or tool is a
//! loud skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::binary::{free_port, THIS_BUILD};

const REQUIRE: &str = "STRATUM_REQUIRE_PACKAGES";

fn package_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("package")
}

/// The cargo target directory this test binary was built in.
fn target_dir() -> PathBuf {
    Path::new(THIS_BUILD)
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_owned()
}

/// The one file in `dir` whose name starts with `prefix` and ends with
/// `suffix`, if the package was built.
fn built(dir: &str, prefix: &str, suffix: &str) -> Option<PathBuf> {
    let dir = target_dir().join(dir);
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(prefix) && n.ends_with(suffix)
        })
        .collect();
    found.sort();
    found.pop()
}

fn package_or_skip(dir: &str, prefix: &str, suffix: &str, build: &str) -> Option<PathBuf> {
    let p = built(dir, prefix, suffix);
    if p.is_none() {
        assert!(
            std::env::var(REQUIRE).as_deref() != Ok("1"),
            "no {prefix}*{suffix} in target/{dir}: `{build}` builds it ({REQUIRE}=1)"
        );
        eprintln!("\n!!! no {prefix}*{suffix} in target/{dir} (`{build}`): the package test did NOT run\n");
    }
    p
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn ok(program: &str, args: &[&str]) -> String {
    let out = run(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The files every package carries, where both put them.
const FILES: [&str; 7] = [
    "/usr/bin/stratum",
    "/usr/lib/systemd/system/stratum.service",
    "/usr/lib/sysusers.d/stratum.conf",
    "/usr/lib/tmpfiles.d/stratum.conf",
    "/etc/stratum/stratum.toml",
    "/usr/share/bash-completion/completions/stratum",
    "/usr/share/fish/vendor_completions.d/stratum.fish",
];

/// The packaged binary's limit.
const MAX_BINARY: u64 = 40 * 1024 * 1024;

/// The shipped unit's exposure, as `systemd-analyze security` rates it
/// offline: 2.0 or less.
#[test]
fn the_shipped_unit_is_rated_two_or_less() {
    if !crate::support::tools_available(&["systemd-analyze"], REQUIRE, "the unit's rating") {
        return;
    }
    let unit = package_dir().join("stratum.service");
    let out = run(
        "systemd-analyze",
        &["security", "--offline=true", unit.to_str().unwrap()],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let level: f64 = text
        .lines()
        .find_map(|l| {
            l.split_once("Overall exposure level for stratum.service: ")
                .map(|(_, r)| r.split_whitespace().next().unwrap().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no overall level:\n{text}"));
    assert!(level <= 2.0, "exposure {level}:\n{text}");
    // The relaxations it keeps are the raft adapters' and the network's.
    for kept in [
        "PrivateNetwork=",
        "RestrictAddressFamilies=~AF_(INET|INET6)",
    ] {
        assert!(
            text.lines().any(|l| l.contains('✗') && l.contains(kept)),
            "{kept} is the one relaxation expected:\n{text}"
        );
    }
}

/// The man page and completions the packages carry are this build's: a
/// flag added without regenerating them fails here (regenerate with
/// `stratum man > api/package/man/stratum.1` and `stratum completions
/// bash|zsh|fish > api/package/completions/...`).
#[test]
fn the_packaged_man_page_and_completions_are_this_builds() {
    for (args, file) in [
        (vec!["man"], "man/stratum.1"),
        (vec!["completions", "bash"], "completions/stratum.bash"),
        (vec!["completions", "zsh"], "completions/_stratum"),
        (vec!["completions", "fish"], "completions/stratum.fish"),
    ] {
        let now = ok(THIS_BUILD, &args);
        let kept = std::fs::read_to_string(package_dir().join(file)).unwrap();
        assert!(
            now == kept,
            "api/package/{file} is not what `stratum {}` prints now: regenerate it",
            args.join(" ")
        );
    }
}

/// Whether the ELF file at `path` carries no DWARF.
fn stripped(path: &Path) -> bool {
    let sections = ok("readelf", &["-S", "-W", path.to_str().unwrap()]);
    !sections.contains(".debug_info") && !sections.contains(".debug_line")
}

/// The `.deb`: installs with `dpkg -i`, makes the user and the state
/// directory and starts nothing; the unit verifies; the packaged unit's
/// `ExecStart`, run as its user with its settings, serves; an upgrade
/// restarts the service only when /etc/default/stratum asks; `dpkg -r`
/// keeps the log and the configuration, `dpkg -P` removes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deb_installs_serves_as_its_user_and_removes_cleanly() {
    let Some(deb) = package_or_skip(
        "debian",
        "stratum_",
        "_amd64.deb",
        "cargo deb -p stratum-api",
    ) else {
        return;
    };
    if !crate::support::tools_available(
        &["dpkg", "setpriv", "systemd-analyze", "readelf"],
        REQUIRE,
        "the .deb test",
    ) {
        return;
    }
    assert!(
        rustix::process::geteuid().is_root(),
        "dpkg -i needs root: run the package test as root"
    );
    let dbgsym = built("debian", "stratum-dbgsym_", ".ddeb");
    // A machine a failed run left the package on starts clean.
    let _ = run("dpkg", &["--purge", "stratum-dbgsym", "stratum"]);
    assert!(
        !Path::new("/var/lib/stratum").exists()
            || run("rm", &["-rf", "/var/lib/stratum"]).status.success()
    );

    // systemctl as the scripts would call it, on a machine that looks
    // booted with systemd: what they ask is recorded, nothing runs.
    let fake = tempfile::tempdir().unwrap();
    let calls = fake.path().join("calls");
    let systemctl = fake.path().join("systemctl");
    std::fs::write(
        &systemctl,
        format!("#!/bin/sh\necho \"$*\" >> {}\n", calls.display()),
    )
    .unwrap();
    ok("chmod", &["755", systemctl.to_str().unwrap()]);
    let booted = Path::new("/run/systemd/system");
    let fake_boot = !booted.exists();
    if fake_boot {
        std::fs::create_dir_all(booted).unwrap();
    }
    // Whatever happens below, the fake boot marker goes.
    struct Unboot(bool);
    impl Drop for Unboot {
        fn drop(&mut self) {
            if self.0 {
                let _ = std::fs::remove_dir("/run/systemd/system");
            }
        }
    }
    let unboot = Unboot(fake_boot);
    let path = format!(
        "{}:{}",
        fake.path().display(),
        std::env::var("PATH").unwrap()
    );
    let dpkg = |args: &[&str]| {
        let out = Command::new("dpkg")
            .args(args)
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "dpkg {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let calls_now = || {
        let c = std::fs::read_to_string(&calls).unwrap_or_default();
        let _ = std::fs::remove_file(&calls);
        c
    };
    let mut install = vec!["-i", deb.to_str().unwrap()];
    if let Some(d) = &dbgsym {
        install.push(d.to_str().unwrap());
    }
    dpkg(&install);
    let first = calls_now();

    assert!(
        !first.contains("start") && !first.contains("enable"),
        "installing starts or enables nothing: {first:?}"
    );

    // What it installed.
    for f in FILES {
        assert!(Path::new(f).exists(), "{f} installed");
    }
    assert!(
        Path::new("/usr/share/man/man1/stratum.1.gz").exists()
            || Path::new("/usr/share/man/man1/stratum.1").exists()
    );
    let passwd = ok("getent", &["passwd", "stratum"]);
    let fields: Vec<&str> = passwd.trim().split(':').collect();
    assert_eq!(fields[5], "/var/lib/stratum", "{passwd}");
    assert!(fields[6].ends_with("nologin"), "{passwd}");
    let uid: u32 = fields[2].parse().unwrap();
    assert!(uid < 1000, "a system user: {passwd}");
    let state = ok("stat", &["-c", "%U %G %a", "/var/lib/stratum"]);
    assert_eq!(state.trim(), "stratum stratum 750");
    let bin = Path::new("/usr/bin/stratum");
    let size = std::fs::metadata(bin).unwrap().len();
    assert!(size < MAX_BINARY, "the packaged binary is {size} bytes");
    assert!(
        stripped(bin),
        "the packaged binary carries no debug sections"
    );
    if let Some(d) = &dbgsym {
        // The debug symbols: a file under /usr/lib/debug/.build-id, whose
        // build id is the binary's.
        let listed = ok("dpkg", &["-L", "stratum-dbgsym"]);
        let debug = listed
            .lines()
            .find(|l| l.ends_with(".debug"))
            .unwrap_or_else(|| panic!("{d:?} holds a .debug file: {listed}"));
        let id = ok("readelf", &["-n", "/usr/bin/stratum"]);
        let id = id
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: "))
            .expect("a build id");
        assert!(
            debug.ends_with(&format!("{}/{}.debug", &id[..2], &id[2..])),
            "{debug} for {id}"
        );
        let sections = ok("readelf", &["-S", "-W", debug]);
        assert!(
            sections.contains(".debug_line"),
            "{debug} holds the line tables"
        );
    } else {
        assert!(
            std::env::var(REQUIRE).as_deref() != Ok("1"),
            "no stratum-dbgsym .ddeb beside the .deb"
        );
    }
    let version = ok("/usr/bin/stratum", &["--version"]);
    assert_eq!(
        version,
        ok(THIS_BUILD, &["--version"]),
        "the package is this build's: rebuild it"
    );

    // The unit, as installed: verifies clean.
    let verify = run(
        "systemd-analyze",
        &["verify", "/usr/lib/systemd/system/stratum.service"],
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    assert!(
        verify.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );

    // The unit's ExecStart, as its user, with its settings.
    let unit = std::fs::read_to_string("/usr/lib/systemd/system/stratum.service").unwrap();
    let setting = |key: &str| -> Vec<String> {
        unit.lines()
            .filter_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(setting("Type"), ["notify"]);
    let exec = setting("ExecStart").pop().unwrap();
    let user = setting("User").pop().unwrap();
    let workdir = setting("WorkingDirectory").pop().unwrap();
    let mut cmd = tokio::process::Command::new("setpriv");
    cmd.args(["--reuid", &user, "--regid", &user, "--init-groups", "--"])
        .args(exec.split_whitespace())
        .current_dir(&workdir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for env in setting("Environment") {
        let (k, v) = env.split_once('=').unwrap();
        cmd.env(k, v);
    }
    // The packaged configuration listens on 127.0.0.1:8080, which the
    // guides' test uses meanwhile: STRATUM_LISTEN moves it, as a drop-in's
    // Environment= would; every other setting is the package's.
    assert!(
        std::fs::read_to_string("/etc/stratum/stratum.toml")
            .unwrap()
            .contains("listen = \"127.0.0.1:8080\""),
        "the packaged configuration's listener"
    );
    let listen = format!("127.0.0.1:{}", free_port());
    cmd.env("STRATUM_LISTEN", &listen);
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    // The token it generated on its first start, printed once.
    let token = tokio::time::timeout(Duration::from_secs(60), async {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Some(l) = lines.next_line().await.unwrap() {
            if let Some((_, t)) = l.split_once("(shown once, keep it): ") {
                return t.trim().to_owned();
            }
        }
        panic!("no bootstrap token printed")
    })
    .await
    .expect("the packaged service starts");
    let http = reqwest::Client::new();
    let ready = http
        .get(format!("http://{listen}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    let members = http
        .get(format!("http://{listen}/v1/admin/cluster/members"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(members.status(), 200, "{}", members.text().await.unwrap());
    let db = ok("stat", &["-c", "%U", "/var/lib/stratum/stratum.db"]);
    assert_eq!(db.trim(), "stratum", "the log is the service user's");
    let pid = child.id().unwrap().to_string();
    ok("kill", &["-TERM", &pid]);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");

    // An upgrade (the same package again) keeps the operator's
    // configuration and restarts nothing by default...
    let edited = format!(
        "{}\n# edited by the operator\n",
        std::fs::read_to_string("/etc/stratum/stratum.toml").unwrap()
    );
    std::fs::write("/etc/stratum/stratum.toml", &edited).unwrap();
    calls_now();
    dpkg(&["--force-confold", "-i", deb.to_str().unwrap()]);
    let again = calls_now();
    assert!(!again.contains("restart"), "{again:?}");
    assert_eq!(
        std::fs::read_to_string("/etc/stratum/stratum.toml").unwrap(),
        edited
    );
    // ...and a running stratum is restarted when the operator asked.
    std::fs::write("/etc/default/stratum", "RESTART_ON_UPGRADE=true\n").unwrap();
    dpkg(&["--force-confold", "-i", deb.to_str().unwrap()]);
    let asked = calls_now();
    assert!(asked.contains("try-restart stratum.service"), "{asked:?}");

    // Removed: the binary goes, the log, the configuration and the user stay.
    if dbgsym.is_some() {
        dpkg(&["-r", "stratum-dbgsym"]);
    }
    calls_now();
    dpkg(&["-r", "stratum"]);
    assert!(
        calls_now().contains("stop stratum.service"),
        "removing stops the service"
    );
    assert!(!bin.exists());
    assert!(
        Path::new("/var/lib/stratum/stratum.db").exists(),
        "remove keeps the log"
    );
    assert!(
        Path::new("/etc/stratum/stratum.toml").exists(),
        "remove keeps the configuration"
    );
    assert!(run("getent", &["passwd", "stratum"]).status.success());
    // Purged: they go too.
    dpkg(&["-P", "stratum"]);
    assert!(
        !Path::new("/var/lib/stratum").exists(),
        "purge removes the state"
    );
    assert!(
        !Path::new("/etc/stratum").exists(),
        "purge removes the configuration"
    );
    drop(unboot);
}

/// The `.rpm` holds the same files, its configuration marked as such, and
/// scripts that start nothing; its binary is stripped and under 40 MB.
#[test]
fn the_rpm_holds_the_same_files() {
    let Some(rpm) = package_or_skip(
        "generate-rpm",
        "stratum-",
        ".x86_64.rpm",
        "cargo generate-rpm -p api",
    ) else {
        return;
    };
    if !crate::support::tools_available(
        &["rpm", "rpm2cpio", "cpio", "readelf"],
        REQUIRE,
        "the .rpm test",
    ) {
        return;
    }
    let rpm = rpm.to_str().unwrap();
    let listed = ok("rpm", &["-qlp", rpm]);
    for f in FILES.iter().chain(&[
        "/usr/share/man/man1/stratum.1",
        "/usr/share/zsh/site-functions/_stratum",
        "/etc/sysconfig/stratum",
    ]) {
        assert!(listed.lines().any(|l| l == *f), "{f} in the rpm:\n{listed}");
    }
    let config = ok("rpm", &["-qcp", rpm]);
    assert!(
        config.lines().any(|l| l == "/etc/stratum/stratum.toml"),
        "{config}"
    );
    let scripts = ok("rpm", &["-qp", "--scripts", rpm]);
    assert!(scripts.contains("systemd-sysusers"), "{scripts}");
    assert!(
        !scripts.contains("systemctl start") && !scripts.contains("systemctl enable"),
        "{scripts}"
    );
    let name = ok("rpm", &["-qp", "--queryformat", "%{NAME}", rpm]);
    assert_eq!(name, "stratum");
    // The binary inside.
    let dir = tempfile::tempdir().unwrap();
    let cpio = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "rpm2cpio '{rpm}' | cpio -idm --quiet ./usr/bin/stratum"
        ))
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(cpio.success());
    let bin = dir.path().join("usr/bin/stratum");
    let size = std::fs::metadata(&bin).unwrap().len();
    assert!(size < MAX_BINARY, "the rpm's binary is {size} bytes");
    assert!(stripped(&bin), "the rpm's binary carries no debug sections");
    // This build's, not a stale split.
    assert_eq!(
        ok(bin.to_str().unwrap(), &["--version"]),
        ok(THIS_BUILD, &["--version"]),
        "the rpm is this build's: rebuild it"
    );
    // Its symbols, found by its debug link, with the line tables.
    assert!(
        listed
            .lines()
            .any(|l| l == "/usr/lib/debug/usr/bin/stratum.debug"),
        "{listed}"
    );
    let link = ok("readelf", &["-p", ".gnu_debuglink", bin.to_str().unwrap()]);
    assert!(link.contains("stratum.debug"), "{link}");
    let cpio = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "rpm2cpio '{rpm}' | cpio -idm --quiet ./usr/lib/debug/usr/bin/stratum.debug"
        ))
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(cpio.success());
    let debug = dir.path().join("usr/lib/debug/usr/bin/stratum.debug");
    let sections = ok("readelf", &["-S", "-W", debug.to_str().unwrap()]);
    assert!(
        sections.contains(".debug_line"),
        "the symbols hold the line tables"
    );
}
