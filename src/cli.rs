//! Command-line interface (clap's derive API): `bazaar` (serve), `bazaar seed`, `bazaar
//! hash-password`, `bazaar repair`, `bazaar backup`, `bazaar restore`, `bazaar migrate`,
//! `bazaar completions` (and the hidden `bazaar traffic-rollup`, for tests and operators).
//! Every subcommand has its own `--help` with examples; a usage error is
//! clap's message on standard error with exit status 2, a failed command `error: …` with 1.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};

use crate::config::Settings;
use crate::startup::{init_logging, Application, OpenDatabase};
use crate::telemetry::progress::{Progress, Step};
use crate::web::basic_auth::hash_password;

/// Self-hostable storefront, CMS and tumblelog on MongoDB (embedded docstore by default).
///
/// Without a command, Bazaar serves the site.
#[derive(Debug, Parser)]
#[command(
    name = "bazaar",
    version,
    after_help = "Settings come from ./config.toml (or $BAZAAR_CONFIG) and BAZAAR_SECTION__KEY \
                  variables.\nExit status: 0 done, 1 the command failed, 2 a usage error.",
    after_long_help = "Settings come from ./config.toml (or $BAZAAR_CONFIG) and \
                       BAZAAR_SECTION__KEY variables (README.md, Configuration).\n\n\
                       Exit status: 0 done, 1 the command failed, 2 a usage error.\n\n\
                       Examples:\n  \
                       bazaar                                 # serve the site\n  \
                       BAZAAR_SERVER__PORT=9000 bazaar serve  # on another port\n  \
                       bazaar seed --help                     # one command's help"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the web site (the default)
    #[command(after_help = "Examples:\n  bazaar serve\n  BAZAAR_SERVER__PORT=9000 bazaar serve")]
    Serve,
    /// Add missing demo data to the database, then exit
    ///
    /// Adds the demo catalog, pages, posts and comments that are missing (never duplicates).
    /// With --products, also generates products until there are N generated ones, and with
    /// --posts blog posts (for load tests), in batches, with progress on standard error.
    #[command(
        after_help = "Examples:\n  bazaar seed\n  bazaar seed --products 10000\n  bazaar seed --posts 100000"
    )]
    Seed {
        /// Also generate products until there are N generated ones (at most 10 000 000)
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(..=10_000_000))]
        products: Option<u64>,
        /// Also generate blog posts of every type until there are N generated ones (at most
        /// 1 000 000)
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(..=1_000_000))]
        posts: Option<u64>,
    },
    /// Read a password from standard input, print its argon2 hash (for admin.password_hash)
    ///
    /// Only the line ending is removed: spaces are part of the password.
    #[command(
        after_help = "Examples:\n  echo 'my password' | bazaar hash-password\n  \
                            bazaar hash-password    # asks for it on a terminal"
    )]
    HashPassword,
    /// Salvage a damaged embedded store (database.path), with Bazaar stopped
    ///
    /// Keeps every journal and snapshot record that still validates, writes a fresh snapshot,
    /// moves the old files to database.path/repair-<time>/ and prints exactly what was lost.
    #[command(after_help = "Examples:\n  bazaar repair\n  \
                            BAZAAR_DATABASE__PATH=/srv/bazaar/data bazaar repair")]
    Repair,
    /// Write a consistent, verified backup of the whole database into DIR
    ///
    /// DIR must be new or empty; the backup is in mongodump's layout, readable by its owner
    /// only. Works while Bazaar is serving.
    #[command(after_help = "Examples:\n  bazaar backup ./backups/before-the-sale")]
    Backup {
        /// The backup directory (new or empty)
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Restore a backup (or a mongodump directory, without --gzip), with Bazaar stopped
    ///
    /// Into the embedded store's database.path; with a mongodb:// database.uri, through the
    /// driver into empty databases instead.
    #[command(
        after_help = "Examples:\n  bazaar restore ./backups/before-the-sale\n  \
                            bazaar restore ./backups/before-the-sale --force"
    )]
    Restore {
        /// The backup directory
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Move a non-empty database.path aside to database.path.before-restore-<time> first
        /// (with a mongodb:// URI: drop the databases first)
        #[arg(long)]
        force: bool,
    },
    /// Copy the whole database to a MongoDB server, then verify counts and checksums
    ///
    /// Stop writes first. A target that already holds collections is refused unless --resume
    /// (continue an interrupted copy) or --force (drop the target database first).
    #[command(after_help = "Examples:\n  \
                            bazaar migrate --to 'mongodb://db.example.com:27017/bazaar'\n  \
                            bazaar migrate --to 'mongodb://db.example.com/bazaar' --resume\n  \
                            bazaar migrate --to 'mongodb://db.example.com/bazaar' --max-batches 100")]
    Migrate {
        /// The target server (the database it names, else database.name)
        #[arg(long, value_name = "URI", value_parser = mongodb_uri)]
        to: String,
        /// Drop the target database first
        #[arg(long, conflicts_with = "resume")]
        force: bool,
        /// Continue an interrupted copy after the last document copied
        #[arg(long)]
        resume: bool,
        /// Documents per insert
        #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
        batch: u64,
        /// Stop after N batches (run again with --resume to continue)
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        max_batches: Option<u64>,
    },
    /// Build the traffic roll-ups that are due, then exit
    ///
    /// What the background jobs of a serving instance do every run, under the same lease (when
    /// another instance holds it, nothing is done). For tests and for operators catching up.
    #[command(
        hide = true,
        after_help = "Examples:\n  bazaar traffic-rollup\n  \
                            bazaar traffic-rollup --now 2027-01-01T02:00:00Z"
    )]
    TrafficRollup {
        /// Roll up as of this time (RFC 3339) instead of the clock's
        #[arg(long, value_name = "TIME", value_parser = rfc3339_time)]
        now: Option<bson::DateTime>,
    },
    /// Print a shell completion script for bazaar
    #[command(after_help = "Examples:\n  \
                            bazaar completions bash > /etc/bash_completion.d/bazaar\n  \
                            bazaar completions zsh > \"${fpath[1]}/_bazaar\"\n  \
                            bazaar completions fish > ~/.config/fish/completions/bazaar.fish")]
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `--to` takes a MongoDB connection string.
fn mongodb_uri(uri: &str) -> Result<String, String> {
    if uri.starts_with("mongodb://") || uri.starts_with("mongodb+srv://") {
        Ok(uri.to_string())
    } else {
        Err("needs a mongodb:// or mongodb+srv:// URI".into())
    }
}

/// `--now` takes an RFC 3339 time.
fn rfc3339_time(time: &str) -> Result<bson::DateTime, String> {
    chrono::DateTime::parse_from_rfc3339(time)
        .map(|t| bson::DateTime::from_chrono(t.with_timezone(&chrono::Utc)))
        .map_err(|e| format!("needs an RFC 3339 time such as 2027-01-01T02:00:00Z ({e})"))
}

/// Run the command line (`args` starts with the program name) and return the exit status.
pub fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version land here too, on standard output with status 0.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let result = match cli.command.unwrap_or(Command::Serve) {
        Command::HashPassword => print_password_hash(),
        Command::Serve => with_runtime(serve()),
        Command::Seed { products, posts } => with_runtime(seed(products, posts)),
        Command::Repair => repair(),
        Command::Backup { dir } => with_runtime(backup(dir)),
        Command::Restore { dir, force } => with_runtime(restore(dir, force)),
        Command::Migrate {
            to,
            force,
            resume,
            batch,
            max_batches,
        } => {
            use crate::backup::migrate::TargetMode;
            let mode = match (force, resume) {
                (true, _) => TargetMode::Force,
                (_, true) => TargetMode::Resume,
                _ => TargetMode::Fresh,
            };
            with_runtime(migrate(MigrateArgs {
                to,
                mode,
                // At most 100 000 (the parser's range).
                batch: batch as usize,
                max_batches,
            }))
        }
        Command::TrafficRollup { now } => with_runtime(traffic_rollup(now)),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "bazaar", &mut std::io::stdout());
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

struct MigrateArgs {
    to: String,
    mode: crate::backup::migrate::TargetMode,
    batch: usize,
    max_batches: Option<u64>,
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

async fn seed(products: Option<u64>, posts: Option<u64>) -> anyhow::Result<()> {
    let settings = load_settings()?;
    let database = OpenDatabase::open(&settings).await?;
    let outcome = async {
        crate::startup::indexes::ensure_indexes(&database.db).await?;
        let report = crate::demo::run(&database.db).await?;
        let generated = match products {
            Some(n) => Some(seed_generated_products(&database.db, n).await?),
            None => None,
        };
        let posts = match posts {
            Some(n) => Some(seed_generated_posts(&database.db, n).await?),
            None => None,
        };
        anyhow::Ok((report, generated, posts))
    }
    .await;
    database.close().await;
    let (report, generated, posts) = outcome.context("seeding failed")?;
    println!("{}", report.summary());
    if let Some(added) = generated {
        println!("Generated products added: {added}.");
    }
    if let Some(added) = posts {
        println!("Generated posts added: {added}.");
    }
    Ok(())
}

/// Generate products up to `n`, streamed in batches (see [`crate::demo::catalog::BULK_BATCH`]),
/// with progress on standard error (see [`Progress`]).
async fn seed_generated_products(db: &crate::db::Db, n: u64) -> anyhow::Result<u64> {
    let mut progress = ProgressOf::new("products");
    let added = crate::demo::catalog::seed_bulk_with_progress(db, n, |done, total| {
        progress.set(done, total)
    })
    .await?;
    progress.finish();
    Ok(added)
}

/// Generate blog posts up to `n` (see [`crate::demo::content::seed_generated_posts`]), with
/// progress on standard error.
async fn seed_generated_posts(db: &crate::db::Db, n: u64) -> anyhow::Result<u64> {
    let mut progress = ProgressOf::new("posts");
    let added =
        crate::demo::content::seed_generated_posts(db, n, |done, total| progress.set(done, total))
            .await?;
    progress.finish();
    Ok(added)
}

/// A [`Progress`] bar of `noun`s, started at the first report (when the total is known).
struct ProgressOf {
    noun: &'static str,
    bar: Option<Progress>,
}

impl ProgressOf {
    fn new(noun: &'static str) -> ProgressOf {
        ProgressOf { noun, bar: None }
    }

    fn set(&mut self, done: u64, total: u64) {
        self.bar
            .get_or_insert_with(|| Progress::counting(total, self.noun))
            .set_position(done);
    }

    fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish();
        }
    }
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
    let step = Step::start(&format!("repairing {}", path.display()));
    let report = docstore::repair(path);
    drop(step);
    let report = report
        .with_context(|| format!("cannot repair the embedded store in {}", path.display()))?;
    println!("{report}");
    Ok(())
}

/// `bazaar backup DIR`: through the store Bazaar is serving, or the configured one.
async fn backup(dir: PathBuf) -> anyhow::Result<()> {
    let settings = load_settings()?;
    if settings.database.uri == crate::config::DatabaseUri::Memory {
        anyhow::bail!(
            "database.uri is \"memory\": that store lives only inside the serving process and \
             has nothing to back up from here"
        );
    }
    let database = OpenDatabase::open_or_attach(&settings).await?;
    let outcome = crate::backup::backup_to_with_progress(&database.db, &dir, true).await;
    database.close().await;
    let report = outcome.context("backup failed")?;
    println!("{}", report.summary());
    Ok(())
}

/// `bazaar restore DIR [--force]`: into the embedded store's directory (Bazaar stopped), or
/// through the driver into the configured MongoDB.
async fn restore(dir: PathBuf, force: bool) -> anyhow::Result<()> {
    use crate::config::DatabaseUri;
    let settings = load_settings()?;
    let dir = dir.as_path();
    let (collections, documents, verified, skipped, target) = match &settings.database.uri {
        DatabaseUri::Embedded => {
            // The store restores in one go: a spinner, not a count.
            let step = Step::start(&format!("restoring {}", dir.display()));
            let report = crate::backup::restore_embedded(dir, &settings.database.path, force)
                .await
                .context("restore failed")?;
            drop(step);
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
            let outcome =
                crate::backup::restore_through_driver_with_progress(&client, dir, force, true)
                    .await;
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

/// `bazaar traffic-rollup [--now TIME]`: one roll-up run under the lease.
async fn traffic_rollup(now: Option<bson::DateTime>) -> anyhow::Result<()> {
    let settings = load_settings()?;
    let database = OpenDatabase::open_or_attach(&settings).await?;
    let db = &database.db;
    let now = now.unwrap_or_else(|| db.now());
    let outcome = crate::analytics::rollup::roll_up_under_lease_at(db, now).await;
    database.close().await;
    match outcome.context("the traffic roll-up failed")? {
        None => println!("Another instance holds the roll-up lease: nothing done."),
        Some(report) if report.built.is_empty() && report.dimension_hours.is_none() => {
            println!("Nothing was due.")
        }
        Some(report) => {
            for built in report.built {
                println!(
                    "Built the {} roll-ups from {} to {} in {} ms.",
                    built.level.unit(),
                    built.from.to_chrono().to_rfc3339(),
                    built.to.to_chrono().to_rfc3339(),
                    built.took.as_millis()
                );
            }
            if let Some((from, to, took)) = report.dimension_hours {
                println!(
                    "Built the hourly dimension roll-ups from {} to {} in {} ms.",
                    from.to_chrono().to_rfc3339(),
                    to.to_chrono().to_rfc3339(),
                    took.as_millis()
                );
            }
            if let Some((from, to, _)) = report.dimensions {
                println!(
                    "Built the dimension roll-ups from {} to {} (from their hours).",
                    from.to_chrono().to_rfc3339(),
                    to.to_chrono().to_rfc3339(),
                );
            }
        }
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
