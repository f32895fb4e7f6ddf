//! `balcao`: serve (default), migrate, chat, tenant apply, pix decode/encode.

use std::path::PathBuf;

use anyhow::Context;
use balcao::app::App;
use balcao::config::Config;
use balcao::pix::cli::PixCommand;
use balcao::store::{CatalogStore, Store, TenantStore};
use balcao::tenant::{ApplyOutcome, TenantSpec};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "balcao", version, about = "WhatsApp receptionist for small businesses")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (the default).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Chat with a tenant's bot as a customer, from the terminal (needs a running server).
    Chat {
        /// The tenant's slug (from its tenant file).
        #[arg(long)]
        tenant: String,
        /// The customer's number.
        #[arg(long, default_value = "+5511900000001")]
        from: String,
        /// The customer's WhatsApp profile name.
        #[arg(long, default_value = balcao::simulator::chat::DEFAULT_NAME)]
        name: String,
        /// The server's base URL (default: from BALCAO_ADDR).
        #[arg(long)]
        url: Option<String>,
    },
    /// Manage tenants.
    Tenant {
        #[command(subcommand)]
        command: TenantCommand,
    },
    /// Manage the console's admins.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
    /// Pix BR Code tools; they need no database or configuration.
    Pix {
        #[command(subcommand)]
        command: PixCommand,
    },
}

#[derive(Subcommand)]
enum TenantCommand {
    /// Create or update a tenant from a TOML file; applying the same file twice changes nothing.
    Apply { file: PathBuf },
}

#[derive(Subcommand)]
enum AdminCommand {
    /// Create an admin (or set their password) and give them a tenant; prompts for the password
    /// (or reads BALCAO_ADMIN_PASSWORD, for scripts).
    Add {
        email: String,
        /// The tenant's slug; run again with another slug to add a second tenant.
        #[arg(long)]
        tenant: String,
        /// The admin's own number among the tenant's staff: told on WhatsApp when someone with
        /// their password types wrong codes of the second factor.
        #[arg(long)]
        phone: Option<String>,
    },
    /// Turn on the admin's second factor: prints a new secret to add to an authenticator app
    /// (a QR code and an otpauth:// link); from then on the console asks for its code. Running
    /// it again replaces the secret.
    Totp {
        email: String,
        /// Turn the second factor off instead.
        #[arg(long)]
        off: bool,
    },
}

/// Runs the command; an error is printed for a person (see [`report`]), exit code 1.
fn main() -> std::process::ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", report(&e, std::env::var_os("BALCAO_DEBUG").is_some_and(|v| v != "0")));
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error for a person: each cause once, in order ("error: … \n  because: …"), without the
/// sentences a wrapper repeats from its cause; the backtrace only when asked
/// (`BALCAO_DEBUG=1`), whatever `RUST_BACKTRACE` says.
fn report(error: &anyhow::Error, debug: bool) -> String {
    if debug {
        return format!("error: {error:?}");
    }
    let mut causes: Vec<String> = Vec::new();
    for cause in error.chain() {
        let text = cause.to_string();
        // A cause whose words its wrapper already said adds nothing.
        if causes.last().is_some_and(|previous| previous.contains(&text)) || text.trim().is_empty() {
            continue;
        }
        // A wrapper that quotes its cause whole is replaced by the cause's shorter words.
        if let Some(previous) = causes.last_mut()
            && text.contains(previous.as_str())
        {
            *previous = text;
            continue;
        }
        causes.push(text);
    }
    let mut out = format!("error: {}", causes.first().map_or("unknown error", String::as_str));
    for cause in causes.iter().skip(1) {
        out.push_str(&format!("\n  because: {cause}"));
    }
    out
}

async fn run() -> anyhow::Result<()> {
    // A missing .env is normal; a malformed one is not.
    if let Err(e) = dotenvy::dotenv()
        && !e.not_found()
    {
        return Err(e).context("failed to read .env");
    }
    let cli = Cli::parse();
    let command = match cli.command {
        // A verdict for the operator, not a failure of the program: the reason alone, exit 1.
        Some(Command::Pix { command }) if !matches!(command, PixCommand::WebhookUrl { .. }) => {
            match balcao::pix::cli::run(&command) {
                Ok(text) => {
                    print!("{text}");
                    return Ok(());
                }
                Err(reason) => {
                    eprintln!("error: {reason}");
                    std::process::exit(1);
                }
            }
        }
        command => command.unwrap_or(Command::Serve),
    };
    let config = Config::from_env()?;
    balcao::telemetry::init(config.log_format);

    match command {
        Command::Serve => {
            let store = open_store(&config).await?;
            let local = config.whatsapp.local_mode;
            let seeded = if local { seed_example(&store).await? } else { None };
            let app = App::build(config, store).await?;
            if local {
                print_local_banner(app.local_addr()?, seeded.as_deref());
            }
            app.run_until_stopped(shutdown_signal()).await
        }
        Command::Migrate => {
            open_store(&config).await?;
            println!("migrations applied to {}", config.database_url);
            Ok(())
        }
        Command::Chat { tenant, from, name, url } => {
            let from = balcao::domain::PhoneE164::parse(&from)
                .context("--from precisa ser um número de WhatsApp, como +5511900000001")?
                .as_str()
                .to_owned();
            let session = balcao::simulator::chat::ChatSession {
                url: url.unwrap_or_else(|| format!("http://{}", config.addr)),
                slug: tenant,
                from,
                name,
                secret: config.whatsapp.app_secret.clone(),
                admin_token: config.admin_token.clone(),
            };
            session.run(std::io::stdin().lock(), std::io::stdout()).await
        }
        Command::Admin { command: AdminCommand::Add { email, tenant, phone } } => {
            let password = match std::env::var("BALCAO_ADMIN_PASSWORD") {
                Ok(p) => p,
                Err(_) => rpassword::prompt_password(format!("Password for {email}: "))
                    .context("failed to read the password")?,
            };
            let store = open_store(&config).await?;
            let id = balcao::http::console::auth::add_admin(&store, &email, &password, &tenant).await?;
            println!("admin {email} (id {id}) can open /admin for {tenant}");
            if let Some(phone) = phone {
                let phone = balcao::http::console::auth::set_admin_phone(&store, &email, &phone, &tenant).await?;
                println!(
                    "{email} is staff number {phone}: told there when someone types wrong codes with their password"
                );
            }
            Ok(())
        }
        Command::Admin { command: AdminCommand::Totp { email, off } } => {
            let store = open_store(&config).await?;
            match balcao::http::console::auth::set_totp(&store, &email, !off).await? {
                Some(secret) => {
                    let uri = secret.uri("Balcão", &email.trim().to_lowercase());
                    let qr = qrcode::QrCode::new(uri.as_bytes()).context("failed to draw the QR code")?;
                    println!("{}", qr.render::<qrcode::render::unicode::Dense1x2>().quiet_zone(true).build());
                    println!("Scan it with an authenticator app, or add this secret by hand: {}", secret.base32());
                    println!("{uri}");
                    println!("From now on {email} signs in to the console with a code from that app.");
                }
                None => println!("{email} signs in with the password only."),
            }
            Ok(())
        }
        Command::Tenant { command: TenantCommand::Apply { file } } => {
            let text = std::fs::read_to_string(&file).with_context(|| format!("failed to read {}", file.display()))?;
            let spec =
                TenantSpec::parse(&text).with_context(|| format!("{} is not a valid tenant file", file.display()))?;
            let store = open_store(&config).await?;
            let outcome = store.apply_tenant(&spec, chrono::Utc::now()).await?;
            let catalog_changed = store.apply_catalog(outcome.id(), &spec.catalog).await?;
            match (outcome, catalog_changed) {
                (ApplyOutcome::Created(id), _) => println!("created tenant {} (id {id})", spec.slug),
                (ApplyOutcome::Updated(id), _) | (ApplyOutcome::Unchanged(id), true) => {
                    println!("updated tenant {} (id {id})", spec.slug)
                }
                (ApplyOutcome::Unchanged(id), false) => println!("tenant {} (id {id}) is unchanged", spec.slug),
            }
            Ok(())
        }
        Command::Pix { command: PixCommand::WebhookUrl { tenant } } => {
            let store = open_store(&config).await?;
            let found = store.tenant_by_slug(&tenant).await?.with_context(|| format!("no tenant {tenant:?}"))?;
            let raw = found.settings.pix.clone().with_context(|| format!("tenant {tenant} has no [pix] section"))?;
            let settings = balcao::pix::PixSettings::from_raw(raw).map_err(anyhow::Error::msg)?;
            let public =
                config.public_url.clone().context("set BALCAO_PUBLIC_URL to the server's public https address")?;
            let provider = settings.gateway.as_str();
            let secret = match settings.gateway {
                balcao::pix::GatewayKind::Bacen => {
                    let name = settings.provider.webhook_secret_env.as_deref();
                    let secret =
                        balcao::pix::secrets::required_secret(&balcao::pix::EnvSecrets, "webhook_secret_env", name)?;
                    Some(secret.expose().to_owned())
                }
                _ => None,
            };
            println!("{}", balcao::pix::cli::webhook_url(&public, &tenant, provider, secret.as_deref()));
            Ok(())
        }
        Command::Pix { .. } => unreachable!("handled before loading the configuration"),
    }
}

/// The example tenant, built into the binary so a fresh `cargo run` has a business to talk to.
const EXAMPLE_TENANT: &str = include_str!("../tenants/example.toml");

/// In local mode, a database without any tenant gets the example one; returns its slug.
async fn seed_example(store: &Store) -> anyhow::Result<Option<String>> {
    if store.count_tenants().await? > 0 {
        return Ok(None);
    }
    let spec = TenantSpec::parse(EXAMPLE_TENANT).context("the built-in example tenant is invalid")?;
    let outcome = store.apply_tenant(&spec, chrono::Utc::now()).await?;
    store.apply_catalog(outcome.id(), &spec.catalog).await?;
    Ok(Some(spec.slug))
}

/// How this binary was launched, to repeat in hints: `cargo run --release --` under cargo, else
/// the path it was started by (`./target/release/balcao`, `balcao`).
fn launched_as() -> String {
    if std::env::var_os("CARGO_PKG_NAME").is_some() {
        return "cargo run --release --".to_owned();
    }
    std::env::args().next().unwrap_or_else(|| "balcao".to_owned())
}

/// The simulator's address comes first: it is what a developer opens.
fn print_local_banner(addr: std::net::SocketAddr, seeded: Option<&str>) {
    let slug = seeded.unwrap_or("barbearia-do-ze");
    let balcao = launched_as();
    println!("Simulator: http://{addr}/simulator?tenant={slug}");
    println!(
        "Console:   http://{addr}/admin (make yourself an admin first: \
         {balcao} admin add you@example.com --tenant {slug})\n"
    );
    if let Some(slug) = seeded {
        println!("No tenant yet: applied the example business ({slug}) from tenants/example.toml.");
    }
    println!(
        "Balcão is running in local mode at http://{addr} (nothing is sent to WhatsApp).\n\
         \n  In the simulator, be a customer, or pick \"Ser a equipe\" to be the business: \"oi\" opens\n\
         \x20 the staff menu, Nova cobrança sends a Pix charge once you tap Confirmar, and\n\
         \x20 \"Marcar como pago\" pays it (sandbox gateway).\n\
         \n  From the terminal:\n\
         \x20 Be a customer:   {balcao} chat --tenant {slug}\n\
         \x20 Be the business: {balcao} chat --tenant {slug} --from +5511988887777\n\
         \x20 (/pago N marks charge N paid)\n"
    );
}

async fn open_store(config: &Config) -> anyhow::Result<Store> {
    let store = Store::connect(&config.database_url, config.pool_size())
        .await
        .with_context(|| format!("failed to open the database at {}", config.database_url))?;
    store.migrate().await.context("failed to apply migrations")?;
    let hashed = store
        .hash_stored_message_ids(&config.whatsapp.privacy_key)
        .await
        .context("failed to hash stored message ids")?;
    if hashed > 0 {
        tracing::info!(hashed, "hashed message ids stored before this version");
    }
    Ok(store)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    tracing::info!("shutdown signal received");
}

#[cfg(test)]
mod tests {
    use super::report;

    #[test]
    fn a_cause_is_named_once() {
        let root = anyhow::anyhow!("connection refused (os error 111)");
        let wrapped = root.context("error connecting to the server: connection refused (os error 111)");
        let e = wrapped.context("failed to open the database at postgres://127.0.0.1/x");
        assert_eq!(
            report(&e, false),
            "error: failed to open the database at postgres://127.0.0.1/x\n  because: error connecting to the server: connection refused (os error 111)"
        );
        assert!(!report(&e, false).contains("Stack backtrace"));
    }
}
