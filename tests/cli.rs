//! The `bazaar` command as a user runs it: configuration from the environment, start-up
//! errors, graceful shutdown, `seed` and `hash-password`, every subcommand's help, usage errors
//! and their exit status, shell completions.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

const BAZAAR: &str = env!("CARGO_BIN_EXE_bazaar");

/// The command run from the repository root (where config.toml is), with the test's
/// environment free of any BAZAAR_ setting.
fn bazaar(args: &[&str]) -> Command {
    let mut command = Command::new(BAZAAR);
    command.args(args).current_dir(repo_root());
    for (name, _) in std::env::vars() {
        if name.starts_with("BAZAAR_") {
            command.env_remove(name);
        }
    }
    command.env("BAZAAR_LOG__LEVEL", "info");
    command.env_remove("RUST_LOG");
    command
}

async fn wait_until_healthy(url: &str, child: &mut Child) -> reqwest::Response {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(response) = reqwest::get(url).await {
            return response;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("bazaar exited early with {status}");
        }
        assert!(
            Instant::now() < deadline,
            "bazaar did not start within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn wait_for_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        assert!(Instant::now() < deadline, "bazaar did not stop within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_invalid_config_value_stops_start_up_with_a_message_naming_the_key() {
    let output = bazaar(&[])
        .env("BAZAAR_SERVER__PORT", "eighty")
        .output()
        .expect("bazaar runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("invalid value for server.port (from BAZAAR_SERVER__PORT)"),
        "{stderr}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[database]\nuri = \"postgres://localhost\"\n").expect("write");
    let output = bazaar(&[])
        .env("BAZAAR_CONFIG", &file)
        .output()
        .expect("bazaar runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("database.uri"), "{stderr}");
    assert!(stderr.contains("bad.toml"), "{stderr}");
}

#[tokio::test]
async fn an_environment_override_of_the_port_serves_there_and_sigterm_stops_gracefully() {
    let port = free_port();
    let mut child = bazaar(&[])
        .env("BAZAAR_SERVER__PORT", port.to_string())
        .env("BAZAAR_DATABASE__URI", "memory")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bazaar starts");
    let response =
        wait_until_healthy(&format!("http://127.0.0.1:{port}/healthz"), &mut child).await;
    assert_eq!(response.status(), reqwest::StatusCode::OK);

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let status = wait_for_exit(&mut child);
    assert!(status.success(), "exit status {status}");

    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout).expect("stdout");
    }
    if let Some(mut err) = child.stderr.take() {
        err.read_to_string(&mut stderr).expect("stderr");
    }
    assert!(
        stdout.contains(&format!("Bazaar is running at http://127.0.0.1:{port}/")),
        "{stdout}"
    );
    // No hash configured: the generated password is logged once.
    assert_eq!(
        stderr.matches("the admin password for this run is").count()
            + stdout.matches("the admin password for this run is").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("embedded store stopped") || stdout.contains("embedded store stopped"));
    // The embedded store's generated credentials travel in a URI that is never logged.
    for output in [&stdout, &stderr] {
        assert!(!output.contains("mongodb://bazaar:"), "{output}");
        assert!(!output.contains("authSource"), "{output}");
    }
}

#[test]
fn seed_adds_demo_data_once_and_rerunning_it_adds_nothing() {
    let data = tempfile::tempdir().expect("tempdir");
    let run = || {
        let output = bazaar(&["seed"])
            .env("BAZAAR_DATABASE__PATH", data.path())
            .output()
            .expect("bazaar seed runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    assert_eq!(
        run(),
        "Demo data added: 1 in settings, 18 in categories, 36 in products, 36 in product covers, \
         13 in nodes, 17 in comments."
    );
    assert_eq!(run(), "Demo data is already in place; nothing was added.");
}

#[test]
fn seed_with_a_product_count_generates_products_once() {
    let data = tempfile::tempdir().expect("tempdir");
    let run = |args: &[&str]| {
        let output = bazaar(args)
            .env("BAZAAR_DATABASE__PATH", data.path())
            .output()
            .expect("bazaar seed runs");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    };
    let (code, out, err) = run(&["seed", "--products", "120"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("Generated products added: 120."), "{out}");
    let (code, out, _) = run(&["seed", "--products", "120"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("Generated products added: 0."), "{out}");
    let (code, _, err) = run(&["seed", "--products", "many"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("invalid value 'many' for '--products <N>'"),
        "{err}"
    );
    let (code, _, err) = run(&["seed", "--products", "10000001"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("10000001 is not in 0..=10000000"), "{err}");
}

#[tokio::test]
async fn hash_password_prints_a_hash_that_opens_the_admin() {
    let mut child = bazaar(&["hash-password"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bazaar hash-password runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"s3cret pass\n")
        .expect("write");
    let output = child.wait_with_output().expect("finishes");
    assert!(output.status.success());
    let hash = String::from_utf8_lossy(&output.stdout).trim().to_string();
    assert!(hash.starts_with("$argon2id$"), "{hash}");

    let app = spawn_app_with(&[("BAZAAR_ADMIN__PASSWORD_HASH", hash.as_str())]).await;
    let response = app
        .client
        .get(app.url("/admin"))
        .basic_auth(ADMIN_USER, Some("s3cret pass"))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
}

/// Run `bazaar args` (no database is touched by a usage error): (status, stdout, stderr).
fn outcome(args: &[&str]) -> (Option<i32>, String, String) {
    let output = bazaar(args)
        .env("BAZAAR_DATABASE__URI", "memory")
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

const SUBCOMMANDS: &[&str] = &[
    "serve",
    "seed",
    "hash-password",
    "repair",
    "backup",
    "restore",
    "migrate",
    "completions",
];

#[test]
fn every_subcommand_has_its_own_help_with_examples() {
    for sub in SUBCOMMANDS {
        for args in [vec![*sub, "--help"], vec!["help", *sub]] {
            let (code, out, err) = outcome(&args);
            assert_eq!(code, Some(0), "{args:?}: {err}");
            assert!(
                out.contains(&format!("Usage: bazaar {sub}")),
                "{args:?}: {out}"
            );
            let examples = out.split("Examples:\n").nth(1).unwrap_or_default();
            assert!(
                examples.contains(&format!("bazaar {sub}")),
                "{args:?}: {out}"
            );
        }
    }
    let (code, out, _) = outcome(&["--help"]);
    assert_eq!(code, Some(0));
    for sub in SUBCOMMANDS {
        assert!(
            out.contains(&format!("\n  {sub} ")),
            "{sub} missing from: {out}"
        );
    }
    assert!(out.contains("Exit status: 0 done, 1 the command failed, 2 a usage error"));
    let (_, out, _) = outcome(&["migrate", "--help"]);
    for flag in [
        "--to <URI>",
        "--force",
        "--resume",
        "--batch <N>",
        "--max-batches <N>",
    ] {
        assert!(out.contains(flag), "{flag} missing from: {out}");
    }
}

#[test]
fn version_prints_the_package_version() {
    let (code, out, _) = outcome(&["--version"]);
    assert_eq!(code, Some(0));
    assert_eq!(out.trim(), format!("bazaar {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn a_bad_argument_is_a_usage_error_with_status_two_and_a_hint() {
    let cases: &[(&[&str], &str)] = &[
        (&["serv"], "error: unrecognized subcommand 'serv'"),
        (
            &["seed", "--product", "5"],
            "error: unexpected argument '--product' found",
        ),
        (
            &["backup"],
            "error: the following required arguments were not provided",
        ),
        (
            &["migrate", "--to", "http://db.example.com"],
            "error: invalid value 'http://db.example.com' for '--to <URI>': needs a mongodb:// \
             or mongodb+srv:// URI",
        ),
        (
            &[
                "migrate",
                "--to",
                "mongodb://db.example.com",
                "--force",
                "--resume",
            ],
            "error: the argument '--force' cannot be used with '--resume'",
        ),
        (
            &[
                "migrate",
                "--to",
                "mongodb://db.example.com",
                "--batch",
                "0",
            ],
            "error: invalid value '0' for '--batch <N>'",
        ),
        (
            &["completions", "tcsh"],
            "error: invalid value 'tcsh' for '<SHELL>'",
        ),
    ];
    for (args, message) in cases {
        let (code, out, err) = outcome(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.starts_with(message), "{args:?}: {err}");
        assert!(
            err.trim_end()
                .ends_with("For more information, try '--help'."),
            "{args:?}: {err}"
        );
        assert!(out.is_empty(), "{args:?}: {out}");
    }
    // A near miss names the command meant, with the usage.
    let (_, _, err) = outcome(&["serv"]);
    assert!(
        err.contains("a similar subcommand exists: 'serve'"),
        "{err}"
    );
    assert!(err.contains("Usage: bazaar [COMMAND]"), "{err}");
    let (_, _, err) = outcome(&["restore"]);
    assert!(err.contains("Usage: bazaar restore <DIR>"), "{err}");
}

#[test]
fn a_command_that_fails_says_why_with_status_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, out, err) = outcome(&["backup", dir.path().to_str().expect("utf-8")]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "error: database.uri is \"memory\": that store lives only inside the serving process"
        ),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
}

#[test]
fn bash_completions_complete_subcommands_and_flags() {
    let (code, script, err) = outcome(&["completions", "bash"]);
    assert_eq!(code, Some(0), "{err}");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("bazaar.bash");
    std::fs::write(&file, &script).expect("write");
    // What bash offers after `bazaar mi<TAB>` and `bazaar migrate --re<TAB>`.
    let complete = |words: &str, current: usize| {
        let output = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {}; COMP_WORDS=({words}); COMP_CWORD={current}; COMP_LINE='{words}'; \
                 COMP_POINT=${{#COMP_LINE}}; \
                 _bazaar bazaar \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
                 echo \"${{COMPREPLY[@]}}\"",
                file.display()
            ))
            .output()
            .expect("bash runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    assert_eq!(complete("bazaar mi", 1), "migrate");
    assert_eq!(complete("bazaar migrate --re", 2), "--resume");
    let all = complete("bazaar ''", 1);
    for sub in SUBCOMMANDS {
        assert!(
            all.split(' ').any(|w| w == *sub),
            "{sub} missing from: {all}"
        );
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let (code, script, _) = outcome(&["completions", shell]);
        assert_eq!(code, Some(0));
        assert!(script.contains("bazaar"), "{shell}");
    }
}

/// Start offsets of the records in a docstore journal segment (`[u32 length][u32 crc][payload]`).
fn journal_record_starts(bytes: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut off = 0;
    while off + 8 <= bytes.len() {
        starts.push(off);
        let len = u32::from_le_bytes(bytes[off..off + 4].try_into().expect("4 bytes"));
        off += 8 + len as usize;
    }
    starts
}

#[test]
fn a_damaged_store_refuses_to_start_with_the_repair_command_and_repair_salvages_it() {
    let data = tempfile::tempdir().expect("tempdir");
    let seed = || {
        bazaar(&["seed"])
            .env("BAZAAR_DATABASE__PATH", data.path())
            .output()
            .expect("bazaar seed runs")
    };
    assert!(seed().status.success());
    // Overwrite the length field of a record in the middle of the journal, as a bad sector
    // would: the records after it are intact and must not be dropped silently.
    let segment = std::fs::read_dir(data.path())
        .expect("data dir")
        .map(|e| e.expect("entry").path())
        .find(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with("journal-") && n.ends_with(".log")
            }) && std::fs::metadata(p).is_ok_and(|m| m.len() > 0)
        })
        .expect("a journal segment");
    let mut bytes = std::fs::read(&segment).expect("read");
    let starts = journal_record_starts(&bytes);
    assert!(starts.len() > 4, "{} records", starts.len());
    let at = starts[starts.len() / 2];
    bytes[at..at + 4].copy_from_slice(&[0xff; 4]);
    std::fs::write(&segment, &bytes).expect("write");

    let output = seed();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is damaged"), "{stderr}");
    assert!(
        stderr.contains(&format!("damaged at byte {at}")),
        "{stderr}"
    );
    assert!(stderr.contains("bazaar repair"), "{stderr}");
    assert_eq!(
        std::fs::read(&segment).expect("read"),
        bytes,
        "nothing cut off"
    );

    let output = bazaar(&["repair"])
        .env("BAZAAR_DATABASE__PATH", data.path())
        .output()
        .expect("bazaar repair runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(&format!(
            "LOST: {} bytes {at}..",
            starts[starts.len() / 2 + 1] - at
        )),
        "{stdout}"
    );
    assert!(stdout.contains("fresh snapshot"), "{stdout}");

    // The repaired store opens, and seeding puts back whatever demo data the lost record held.
    let output = seed();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
