//! `docstore --dbpath DIR [--port 27017] [--bind 127.0.0.1] [--in-memory] [--auth --user NAME]`:
//! run docstore on its own so that mongosh, Compass or any driver can connect to it.
//! `docstore --repair --dbpath DIR` salvages a damaged data directory and reports what was lost.
//! `docstore --print-support` prints the supported/refused feature table the README carries.

use docstore::{Config, Server};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
usage: docstore --dbpath DIR [--port PORT] [--bind ADDRESS] [--auth --user NAME]
       docstore --in-memory [--port PORT] [--bind ADDRESS] [--auth --user NAME]
       docstore --repair --dbpath DIR
       docstore --print-support

  --dbpath DIR      keep data in DIR (created if missing)
  --in-memory       keep nothing on disk; all data is lost at exit
  --port PORT       port to listen on (default 27017; 0 picks a free one)
  --bind ADDRESS    address to listen on (default 127.0.0.1; without --auth,
                    think before binding anything else)
  --auth            require clients to authenticate (SCRAM-SHA-256 or
                    SCRAM-SHA-1, authSource=admin) as the --user NAME, whose
                    password is read from the environment variable
                    DOCSTORE_PASSWORD (never from the command line)
  --user NAME       the user clients authenticate as (needs --auth; default:
                    the environment variable DOCSTORE_USER)
  --maxConns N      most client connections open at once (default 1000); more
                    are closed as soon as they are accepted
  --repair          salvage a damaged DIR instead of serving: keep every record
                    that still validates, write a fresh snapshot, move the old
                    files to DIR/repair-<time>/, and report exactly what was lost
  --print-support   print the table of MongoDB features docstore supports and
                    refuses (the crate README's section), in Markdown
  --help            show this help

Logging goes to stderr; set RUST_LOG (default: info) to change it.";

/// Where `--auth` reads the password: the environment keeps it out of `ps` and shell history.
const PASSWORD_VARIABLE: &str = "DOCSTORE_PASSWORD";
/// Where `--auth` reads the user name when `--user` is not given.
const USER_VARIABLE: &str = "DOCSTORE_USER";

/// What the command line asked for.
#[derive(Debug)]
enum Command {
    /// Boxed: a `Config` is large next to `Help`.
    Run(Box<Config>),
    Repair(PathBuf),
    PrintSupport,
    Help,
}

/// Parse the command line; `env` looks up environment variables (the `--auth` user and password).
fn parse_args(
    args: impl IntoIterator<Item = String>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Command, String> {
    let mut auth = false;
    let mut user: Option<String> = None;
    let mut dbpath: Option<PathBuf> = None;
    let mut in_memory = false;
    let mut repair = false;
    let mut served = false;
    let mut port: u16 = 27017;
    let mut bind = "127.0.0.1".to_string();
    let mut max_connections = docstore::DEFAULT_MAX_CONNECTIONS;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        // Accept both `--port 27018` and `--port=27018`.
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match inline.clone().or_else(|| args.next()) {
                Some(v) if !v.is_empty() => Ok(v),
                _ => Err(format!("{name} needs a value")),
            }
        };
        match flag.as_str() {
            "--help" | "-h" => return Ok(Command::Help),
            "--print-support" => return Ok(Command::PrintSupport),
            "--dbpath" => dbpath = Some(PathBuf::from(value("--dbpath")?)),
            "--repair" => {
                if inline.is_some() {
                    return Err("--repair takes no value".to_string());
                }
                repair = true;
            }
            "--port" => {
                served = true;
                let v = value("--port")?;
                port = v
                    .parse()
                    .map_err(|_| format!("--port must be a number from 0 to 65535, not '{v}'"))?;
            }
            "--maxConns" | "--max-connections" => {
                served = true;
                let v = value("--maxConns")?;
                max_connections =
                    v.parse().ok().filter(|&n: &usize| n > 0).ok_or_else(|| {
                        format!("--maxConns must be a positive number, not '{v}'")
                    })?;
            }
            "--bind" | "--bind_ip" => {
                served = true;
                bind = value("--bind")?;
            }
            "--in-memory" => {
                if inline.is_some() {
                    return Err("--in-memory takes no value".to_string());
                }
                in_memory = true;
            }
            "--auth" => {
                if inline.is_some() {
                    return Err("--auth takes no value".to_string());
                }
                auth = true;
                served = true;
            }
            "--user" => {
                user = Some(value("--user")?);
                served = true;
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if repair {
        return match (dbpath, in_memory || served) {
            (_, true) => Err("--repair takes only --dbpath DIR".to_string()),
            (None, false) => Err("--repair needs --dbpath DIR".to_string()),
            (Some(dir), false) => Ok(Command::Repair(dir)),
        };
    }
    let config = match (dbpath, in_memory) {
        (Some(_), true) => return Err("--dbpath and --in-memory cannot be combined".to_string()),
        (None, false) => return Err("either --dbpath DIR or --in-memory is required".to_string()),
        (Some(dir), false) => Config::persistent(dir),
        (None, true) => Config::in_memory(),
    };
    let user = match (auth, user) {
        (false, None) => None,
        (false, Some(_)) => return Err("--user needs --auth".to_string()),
        (true, user) => {
            let name = user
                .or_else(|| env(USER_VARIABLE).filter(|u| !u.is_empty()))
                .ok_or_else(|| format!("--auth needs --user NAME (or {USER_VARIABLE})"))?;
            let password = env(PASSWORD_VARIABLE)
                .filter(|p| !p.is_empty())
                .ok_or_else(|| format!("--auth needs the password in {PASSWORD_VARIABLE}"))?;
            let user = docstore::User::with_password(&name, &password)
                .map_err(|e| format!("--user {name}: {}", e.message))?;
            Some(user)
        }
    };
    Ok(Command::Run(Box::new(Config {
        bind,
        port,
        user,
        max_connections,
        ..config
    })))
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Resolves on SIGINT (Ctrl-C) or, on Unix, SIGTERM.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                tracing::warn!("cannot listen for SIGTERM: {e}");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Writes to stdout without `println!`'s panic when nobody reads it any more (a closed pipe
/// must not take the server down).
fn say(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// `--repair`: salvage the directory and print the report; fails if it cannot be done at all.
fn repair(dir: &std::path::Path) -> ExitCode {
    match docstore::repair(dir) {
        Ok(report) => {
            say(&format!("{report}\n"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("docstore: cannot repair {}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let config = match parse_args(std::env::args().skip(1), |name| std::env::var(name).ok()) {
        Ok(Command::Run(config)) => *config,
        Ok(Command::Repair(dir)) => {
            init_logging();
            return repair(&dir);
        }
        Ok(Command::PrintSupport) => {
            say(&docstore::support_table());
            return ExitCode::SUCCESS;
        }
        Ok(Command::Help) => {
            say(&format!("{USAGE}\n"));
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("docstore: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("docstore: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        if let docstore::StorageMode::Directory(dir) = &config.storage {
            if let Err(e) = docstore::private_fs::create_dir_all(dir) {
                eprintln!("docstore: cannot create {}: {e}", dir.display());
                return ExitCode::FAILURE;
            }
        }
        let server = match Server::start(config).await {
            Ok(server) => server,
            Err(e) => {
                eprintln!("docstore: {}", e.message);
                return ExitCode::FAILURE;
            }
        };
        say(&format!("docstore listening on {}\n", server.uri()));
        stop_signal().await;
        tracing::info!("stop requested; finishing commands in flight and flushing");
        server.shutdown().await;
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use docstore::StorageMode;

    fn parse(args: &[&str]) -> Result<Command, String> {
        parse_args(args.iter().map(|s| s.to_string()), |_| None)
    }

    fn config(args: &[&str]) -> Config {
        match parse(args) {
            Ok(Command::Run(c)) => *c,
            other => panic!("expected a config, got {other:?}"),
        }
    }

    #[test]
    fn max_conns_sets_the_connection_limit_and_refuses_nonsense() {
        assert_eq!(
            config(&["--in-memory"]).max_connections,
            docstore::DEFAULT_MAX_CONNECTIONS
        );
        assert_eq!(
            config(&["--in-memory", "--maxConns", "20"]).max_connections,
            20
        );
        for bad in ["0", "-3", "many"] {
            assert!(
                parse(&["--in-memory", "--maxConns", bad]).is_err(),
                "--maxConns {bad}"
            );
        }
    }

    #[test]
    fn dbpath_with_defaults_listens_on_loopback_27017() {
        let c = config(&["--dbpath", "/tmp/data"]);
        assert_eq!(c.storage, StorageMode::Directory("/tmp/data".into()));
        assert_eq!((c.bind.as_str(), c.port), ("127.0.0.1", 27017));
    }

    #[test]
    fn port_bind_and_in_memory_are_read_in_both_spellings() {
        let c = config(&["--in-memory", "--port=0", "--bind", "0.0.0.0"]);
        assert_eq!(c.storage, StorageMode::InMemory);
        assert_eq!((c.bind.as_str(), c.port), ("0.0.0.0", 0));
        let c = config(&["--port", "27018", "--bind=::1", "--dbpath=/d"]);
        assert_eq!((c.bind.as_str(), c.port), ("::1", 27018));
    }

    #[test]
    fn bad_command_lines_are_explained() {
        for (args, needle) in [
            (&["--dbpath"][..], "needs a value"),
            (&["--in-memory", "--port"][..], "needs a value"),
            (&["--in-memory", "--port", "70000"][..], "--port must be"),
            (&["--in-memory", "--frobnicate"][..], "unknown argument"),
            (&[][..], "is required"),
            (&["--in-memory", "--dbpath", "/x"][..], "cannot be combined"),
            (&["--in-memory=yes"][..], "takes no value"),
            (&["--repair"][..], "needs --dbpath"),
            (&["--repair", "--in-memory"][..], "only --dbpath"),
            (
                &["--repair", "--dbpath", "/d", "--port", "1"][..],
                "only --dbpath",
            ),
        ] {
            let e = parse(args).expect_err("should be refused");
            assert!(e.contains(needle), "{args:?}: {e}");
        }
    }

    #[test]
    fn print_support_prints_the_readme_support_table() {
        assert!(matches!(
            parse(&["--print-support"]),
            Ok(Command::PrintSupport)
        ));
        let table = docstore::support_table();
        assert!(table.contains("| `mapReduce` | refused, 115 |"), "{table}");
    }

    #[test]
    fn repair_takes_the_data_directory() {
        assert!(matches!(
            parse(&["--repair", "--dbpath", "/d"]),
            Ok(Command::Repair(dir)) if dir == std::path::Path::new("/d")
        ));
        assert!(matches!(
            parse(&["--dbpath=/d", "--repair"]),
            Ok(Command::Repair(_))
        ));
    }

    #[test]
    fn auth_takes_the_user_from_the_command_line_and_the_password_from_the_environment() {
        let args = ["--in-memory", "--auth", "--user", "app"];
        let env = |name: &str| match name {
            "DOCSTORE_PASSWORD" => Some("s3cret".to_string()),
            "DOCSTORE_USER" => Some("from-env".to_string()),
            _ => None,
        };
        let user_of = |args: &[&str]| match parse_args(args.iter().map(|s| s.to_string()), env) {
            Ok(Command::Run(c)) => c.user.expect("a user"),
            other => panic!("expected a config, got {other:?}"),
        };
        let user = user_of(&args);
        assert_eq!(user.name(), "app");
        assert!(!format!("{user:?}").contains("s3cret"));
        assert_eq!(user_of(&["--in-memory", "--auth"]).name(), "from-env");
        let e = parse_args(args.map(String::from), |_| None).expect_err("no password");
        assert!(e.contains("DOCSTORE_PASSWORD"), "{e}");
        assert!(config(&["--in-memory"]).user.is_none());
    }

    #[test]
    fn auth_and_user_need_each_other() {
        for (args, needle) in [
            (&["--in-memory", "--auth"][..], "needs --user"),
            (&["--in-memory", "--user", "app"][..], "needs --auth"),
            (&["--in-memory", "--auth=yes"][..], "takes no value"),
        ] {
            let e = parse(args).expect_err("should be refused");
            assert!(e.contains(needle), "{args:?}: {e}");
        }
    }

    #[test]
    fn help_wins() {
        assert!(matches!(
            parse(&["--in-memory", "--help"]),
            Ok(Command::Help)
        ));
    }
}
