//! Command-line interface: `bazaar` (serve), `bazaar seed`, `bazaar hash-password`,
//! `bazaar repair`.

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
  help            show this help

Settings come from ./config.toml (or $BAZAAR_CONFIG) and BAZAAR_SECTION__KEY variables.";

enum Command {
    Serve,
    Seed { products: Option<u64> },
    HashPassword,
    Repair,
    Help,
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
        crate::db::indexes::ensure_indexes(&database.db).await?;
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

/// Generate products up to `n` in steps, printing progress to standard error on large runs.
async fn seed_generated_products(db: &crate::db::Db, n: u64) -> anyhow::Result<u64> {
    let step = (n / 20).max(1_000);
    let show_progress = n > step && std::io::stderr().is_terminal();
    let mut added = 0;
    let mut target = 0;
    while target < n {
        target = (target + step).min(n);
        added += crate::catalog::demo::seed_bulk(db, target).await?;
        if show_progress {
            let done = target * 40 / n;
            eprint!(
                "\r[{}{}] {target}/{n} products",
                "#".repeat(done as usize),
                " ".repeat(40 - done as usize)
            );
            let _ = std::io::stderr().flush();
        }
    }
    if show_progress {
        eprintln!();
    }
    Ok(added)
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
