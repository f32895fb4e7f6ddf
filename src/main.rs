//! `balcao`: serve (default), migrate, tenant apply.

use std::path::PathBuf;

use anyhow::Context;
use balcao::app::App;
use balcao::config::Config;
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
        #[arg(long, default_value = "Cliente de Teste")]
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
}

#[derive(Subcommand)]
enum TenantCommand {
    /// Create or update a tenant from a TOML file; applying the same file twice changes nothing.
    Apply { file: PathBuf },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A missing .env is normal; a malformed one is not.
    if let Err(e) = dotenvy::dotenv()
        && !e.not_found()
    {
        return Err(e).context("failed to read .env");
    }
    let cli = Cli::parse();
    let config = Config::from_env()?;
    balcao::telemetry::init(config.log_format);

    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let store = open_store(&config).await?;
            let app = App::build(config, store).await?;
            app.run_until_stopped(shutdown_signal()).await
        }
        Command::Migrate => {
            open_store(&config).await?;
            println!("migrations applied to {}", config.database_url);
            Ok(())
        }
        Command::Chat { tenant, from, name, url } => {
            balcao::domain::PhoneE164::parse(&from).context("--from must be a phone number like +5511900000001")?;
            let session = balcao::chat::ChatSession {
                url: url.unwrap_or_else(|| format!("http://{}", config.addr)),
                slug: tenant,
                from,
                name,
                secret: config.whatsapp.app_secret.clone(),
                admin_token: config.admin_token.clone(),
            };
            session.run(std::io::stdin().lock(), std::io::stdout()).await
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
    }
}

async fn open_store(config: &Config) -> anyhow::Result<Store> {
    let store = Store::connect(&config.database_url, config.db_max_connections)
        .await
        .with_context(|| format!("failed to open the database at {}", config.database_url))?;
    store.migrate().await.context("failed to apply migrations")?;
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
