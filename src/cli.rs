//! Command-line interface: `bazaar` (serve), `bazaar seed`, `bazaar hash-password`,
//! `bazaar repair`, `bazaar backup`, `bazaar restore`, `bazaar migrate`.

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;

use anyhow::Context;

use crate::config::Settings;
use crate::startup::{init_logging, Application, OpenDatabase};
use crate::web::basic_auth::hash_password;

const USAGE: &str = "\
usage: bazaar [COMMAND]

commands:
  serve           run the web site (the default)
  seed [--products N]
                  add missing demo data to the database, then exit; with --products, also
                  generate products until there are N generated ones (for load tests)
  hash-password   read a password from standard input, print its argon2 hash
                  (for admin.password_hash)
  repair          salvage a damaged embedded store (database.path) with Bazaar
                  stopped: keep every record that still validates, report exactly
                  what was lost, move the old files to database.path/repair-<time>/
  backup DIR      write a consistent, verified backup of the whole database into DIR (new or
                  empty), in mongodump's layout; works while Bazaar is serving
  restore DIR [--force]
                  restore a backup (or a mongodump directory, without --gzip) as the embedded
                  store's data, with Bazaar stopped; --force moves a non-empty database.path
                  aside to database.path.before-restore-<time> first. With a mongodb:// URI,
                  restore through the driver into empty databases (--force drops them first)
  migrate --to URI [--force | --resume] [--batch N] [--max-batches N]
                  copy the whole database to a MongoDB server (stop writes first), verify
                  counts and checksums; --resume continues an interrupted copy, --force drops
                  the target database first, --max-batches stops early (resume later)
  help            show this help

Settings come from ./config.toml (or $BAZAAR_CONFIG) and BAZAAR_SECTION__KEY variables.";

enum Command {
    Serve,
    Seed { products: Option<u64> },
    HashPassword,
    Repair,
    Backup { dir: String },
    Restore { dir: String, force: bool },
    Migrate(MigrateArgs),
    Help,
}

struct MigrateArgs {
    to: String,
    mode: crate::backup::migrate::TargetMode,
    batch: usize,
    max_batches: Option<u64>,
}

fn parse_migrate(args: &[&str]) -> Result<Command, String> {
    use crate::backup::migrate::TargetMode;
    let mut to = None;
    let mut mode = TargetMode::Fresh;
    let mut batch = 1000;
    let mut max_batches = None;
    let mut rest = args.iter();
    let number = |flag: &str, value: Option<&&str>, max: u64| {
        value
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| format!("{flag} needs a whole number from 1 to {max}"))
    };
    while let Some(arg) = rest.next() {
        match *arg {
            "--to" => to = rest.next().map(|s| s.to_string()),
            "--force" | "--resume" if mode != TargetMode::Fresh => {
                return Err("use either --force or --resume, not both".into())
            }
            "--force" => mode = TargetMode::Force,
            "--resume" => mode = TargetMode::Resume,
            "--batch" => batch = number("--batch", rest.next(), 100_000)? as usize,
            "--max-batches" => max_batches = Some(number("--max-batches", rest.next(), u64::MAX)?),
            other => return Err(format!("unknown migrate argument {other:?}")),
        }
    }
    let to = to.ok_or("migrate needs --to mongodb://…")?;
    if !(to.starts_with("mongodb://") || to.starts_with("mongodb+srv://")) {
        return Err("--to needs a mongodb:// or mongodb+srv:// URI".into());
    }
    Ok(Command::Migrate(MigrateArgs {
        to,
        mode,
        batch,
        max_batches,
    }))
}

fn parse(args: &[String]) -> Result<Command, String> {
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] | ["serve"] => Ok(Command::Serve),
        ["seed"] => Ok(Command::Seed { products: None }),
        ["seed", "--products", n] => n
            .parse::<u64>()
            .ok()
            .filter(|n| *n <= 10_000_000)
            .map(|n| Command::Seed { products: Some(n) })
            .ok_or_else(|| format!("--products needs a whole number up to 10000000, got {n:?}")),
        ["hash-password"] => Ok(Command::HashPassword),
        ["repair"] => Ok(Command::Repair),
        ["backup", dir] if !dir.starts_with('-') => Ok(Command::Backup {
            dir: dir.to_string(),
        }),
        ["restore", dir] if !dir.starts_with('-') => Ok(Command::Restore {
            dir: dir.to_string(),
            force: false,
        }),
        ["restore", dir, "--force"] | ["restore", "--force", dir] => Ok(Command::Restore {
            dir: dir.to_string(),
            force: true,
        }),
        ["migrate", rest @ ..] => parse_migrate(rest),
        ["help"] | ["--help"] | ["-h"] => Ok(Command::Help),
        other => Err(format!("unknown arguments: {}", other.join(" "))),
    }
}

/// Run the command line and return the process exit code.
pub fn run(args: Vec<String>) -> ExitCode {
    let command = match parse(&args) {
        Ok(command) => command,
        Err(message) => {
            eprintln!("bazaar: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = match command {
        Command::Help => {
            println!("{USAGE}");
            Ok(())
        }
        Command::HashPassword => print_password_hash(),
        Command::Serve => with_runtime(serve()),
        Command::Seed { products } => with_runtime(seed(products)),
        Command::Repair => repair(),
        Command::Backup { dir } => with_runtime(backup(dir)),
        Command::Restore { dir, force } => with_runtime(restore(dir, force)),
        Command::Migrate(args) => with_runtime(migrate(args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bazaar: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn with_runtime(task: impl std::future::Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(task)
}

fn load_settings() -> anyhow::Result<Settings> {
    let settings = Settings::from_environment()?;
    init_logging(&settings);
    Ok(settings)
}

async fn serve() -> anyhow::Result<()> {
    let settings = load_settings()?;
    let app = Application::build(settings.clone()).await?;
    app.stop_on_signals();
    println!("Bazaar is running at {}", app.address());
    println!(
        "Admin: {}admin (user {:?}{})",
        app.address(),
        settings.admin.username,
        if app.generated_admin_password().is_some() {
            ", password logged above"
        } else {
            ""
        }
    );
    let _ = std::io::stdout().flush();
    app.run_until_stopped().await
}

async fn seed(products: Option<u64>) -> anyhow::Result<()> {
    let settings = load_settings()?;
    let database = OpenDatabase::open(&settings).await?;
    let outcome = async {
        crate::startup::indexes::ensure_indexes(&database.db).await?;
        let report = crate::seed::run(&database.db).await?;
        let generated = match products {
            Some(n) => Some(seed_generated_products(&database.db, n).await?),
            None => None,
        };
        anyhow::Ok((report, generated))
    }
    .await;
    database.close().await;
    let (report, generated) = outcome.context("seeding failed")?;
    println!("{}", report.summary());
    if let Some(added) = generated {
        println!("Generated products added: {added}.");
    }
    Ok(())
}

/// Generate products up to `n`, streamed in batches (see [`crate::catalog::demo::BULK_BATCH`]),
/// with progress on standard error: a bar redrawn in place on a terminal, otherwise a line at
/// every tenth of the way (so logs of unattended runs show it too).
async fn seed_generated_products(db: &crate::db::Db, n: u64) -> anyhow::Result<u64> {
    let terminal = std::io::stderr().is_terminal();
    let started = std::time::Instant::now();
    let mut last_tenth = 0;
    let mut drew = false;
    let added = crate::catalog::demo::seed_bulk_with_progress(db, n, |done, total| {
        let line = progress_line(done, total, started.elapsed());
        if terminal {
            eprint!("\r{line}");
            let _ = std::io::stderr().flush();
            drew = true;
        } else if done * 10 / total > last_tenth || done == total {
            last_tenth = done * 10 / total;
            eprintln!("{line}");
        }
    })
    .await?;
    if drew {
        eprintln!();
    }
    Ok(added)
}

/// `[########                                ] 200000/1000000 products (20%), 31 s`
fn progress_line(done: u64, total: u64, elapsed: std::time::Duration) -> String {
    let total = total.max(1);
    let filled = (done.min(total) * 40 / total) as usize;
    format!(
        "[{}{}] {done}/{total} products ({}%), {} s",
        "#".repeat(filled),
        " ".repeat(40 - filled),
        done * 100 / total,
        elapsed.as_secs()
    )
}

/// Run docstore's repair on the embedded store's directory and print its report.
fn repair() -> anyhow::Result<()> {
    let settings = load_settings()?;
    if settings.database.uri != crate::config::DatabaseUri::Embedded {
        anyhow::bail!(
            "repair works on the embedded store (database.uri = \"embedded\"); this Bazaar uses \
             {:?}, which has nothing on disk to repair here",
            settings.database.uri
        );
    }
    let path = &settings.database.path;
    let report = docstore::repair(path)
        .with_context(|| format!("cannot repair the embedded store in {}", path.display()))?;
    println!("{report}");
    Ok(())
}

/// `bazaar backup DIR`: through the store Bazaar is serving, or the configured one.
async fn backup(dir: String) -> anyhow::Result<()> {
    let settings = load_settings()?;
    if settings.database.uri == crate::config::DatabaseUri::Memory {
        anyhow::bail!(
            "database.uri is \"memory\": that store lives only inside the serving process and \
             has nothing to back up from here"
        );
    }
    let database = OpenDatabase::open_or_attach(&settings).await?;
    let outcome = crate::backup::backup_to(&database.db, std::path::Path::new(&dir)).await;
    database.close().await;
    let report = outcome.context("backup failed")?;
    println!("{}", report.summary());
    Ok(())
}

/// `bazaar restore DIR [--force]`: into the embedded store's directory (Bazaar stopped), or
/// through the driver into the configured MongoDB.
async fn restore(dir: String, force: bool) -> anyhow::Result<()> {
    use crate::config::DatabaseUri;
    let settings = load_settings()?;
    let dir = std::path::Path::new(&dir);
    let (collections, documents, verified, skipped, target) = match &settings.database.uri {
        DatabaseUri::Embedded => {
            let report = crate::backup::restore_embedded(dir, &settings.database.path, force)
                .await
                .context("restore failed")?;
            if let Some(aside) = &report.previous_moved_to {
                println!("The previous data is in {}.", aside.display());
            }
            (
                report.collections,
                report.documents,
                report.verified_manifest,
                report.skipped,
                settings.database.path.display().to_string(),
            )
        }
        DatabaseUri::Memory => anyhow::bail!(
            "database.uri is \"memory\": that store lives only inside the serving process; \
             restore into the embedded store (database.uri = \"embedded\") instead"
        ),
        DatabaseUri::External(uri) => {
            let client = mongodb::Client::with_uri_str(uri)
                .await
                .context("invalid database.uri")?;
            let outcome = crate::backup::restore_through_driver(&client, dir, force).await;
            client.shutdown().await;
            let report = outcome.context("restore failed")?;
            (
                report.collections,
                report.documents,
                report.verified_manifest,
                report.skipped,
                crate::config::redact_uri(uri),
            )
        }
    };
    println!(
        "Restored {collections} collections, {documents} documents into {target}{}.",
        if verified {
            " (every file matched the backup's checksums)"
        } else {
            " (a mongodump: every file was read and checked before anything was written)"
        }
    );
    for skipped in &skipped {
        println!("Skipped: {skipped}");
    }
    Ok(())
}

/// `bazaar migrate --to URI`: copy the configured database to a MongoDB server.
async fn migrate(args: MigrateArgs) -> anyhow::Result<()> {
    use crate::backup::migrate::{MigrateOptions, MigrateOutcome};
    let settings = load_settings()?;
    let database = OpenDatabase::open_or_attach(&settings).await?;
    let options = MigrateOptions {
        target_uri: args.to,
        mode: args.mode,
        batch: args.batch,
        max_batches: args.max_batches,
        progress: true,
    };
    let outcome = crate::backup::migrate::migrate(database.db.database(), &options).await;
    database.close().await;
    match outcome.context("migrate failed")? {
        MigrateOutcome::Complete {
            collections,
            documents,
        } => println!(
            "Migrated and verified {collections} collections, {documents} documents: counts, \
             SHA-256 checksums and indexes match. Point database.uri at the new server to switch."
        ),
        MigrateOutcome::Paused { copied, remaining } => println!(
            "Stopped after the requested batches: {copied} documents copied, {remaining} to go. \
             Run again with --resume to continue."
        ),
    }
    Ok(())
}

fn print_password_hash() -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprint!("Password (input is shown; end with Enter): ");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        stdin.read_line(&mut line).context("reading the password")?;
        return print_hash_of(&line);
    }
    let mut input = String::new();
    stdin
        .lock()
        .read_to_string(&mut input)
        .context("reading the password from standard input")?;
    print_hash_of(&input)
}

fn print_hash_of(input: &str) -> anyhow::Result<()> {
    // Only the line ending goes: spaces may be part of the password.
    let password = input.strip_suffix('\n').unwrap_or(input);
    let password = password.strip_suffix('\r').unwrap_or(password);
    if password.is_empty() {
        anyhow::bail!("the password is empty");
    }
    println!("{}", hash_password(password)?);
    Ok(())
}
