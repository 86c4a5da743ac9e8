//! Command-line interface: `bazaar` (serve), `bazaar seed`, `bazaar hash-password`.

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
  seed            add missing demo data to the database, then exit
  hash-password   read a password from standard input, print its argon2 hash
                  (for admin.password_hash)
  help            show this help

Settings come from ./config.toml (or $BAZAAR_CONFIG) and BAZAAR_SECTION__KEY variables.";

enum Command {
    Serve,
    Seed,
    HashPassword,
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
        ["seed"] => Ok(Command::Seed),
        ["hash-password"] => Ok(Command::HashPassword),
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
        Command::Seed => with_runtime(seed()),
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

async fn seed() -> anyhow::Result<()> {
    let settings = load_settings()?;
    let database = OpenDatabase::open(&settings).await?;
    let outcome = async {
        crate::db::indexes::ensure_indexes(&database.db).await?;
        crate::seed::run(&database.db).await
    }
    .await;
    database.close().await;
    let report = outcome.context("seeding failed")?;
    println!("{}", report.summary());
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
