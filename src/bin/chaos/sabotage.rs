//! What happens to the processes and the database during a run, drawn from the run's seed:
//! a SIGKILL and restart, a SIGSTOP past every lease, a rolling restart, killed PostgreSQL
//! connections. Every process is running again when the plan ends.

use std::time::Duration;

use crate::cluster::Cluster;
use crate::db::Db;
use crate::faults::{Fault, Faults};
use crate::rng::Rng;

pub struct Sabotage<'a> {
    pub cluster: &'a Cluster,
    pub db: &'a Db,
    pub faults: &'a Faults,
    /// The servers' job and ledger lease.
    pub lease: Duration,
    /// The share of each fault's probability this run draws ([`crate::run::Ctx::share`]).
    pub share: f64,
}

impl Sabotage<'_> {
    pub async fn play(&self, mut rng: Rng) -> anyhow::Result<()> {
        let n = self.cluster.len() as u64;
        let share = self.share;
        let kill = rng.chance(0.3 * share).then(|| (rng.below(2_000), rng.below(n) as usize, rng.below(500)));
        let stop = rng.chance(0.05 * share).then(|| (rng.below(1_500), rng.below(n) as usize));
        let rolling = n > 1 && rng.chance(0.03 * share);
        let terminate = matches!(self.db, Db::Postgres(_)) && rng.chance(0.3 * share);
        let terminate_at = rng.below(2_000);
        let kill = async {
            if let Some((at, i, down)) = kill {
                tokio::time::sleep(Duration::from_millis(at)).await;
                if self.cluster.kill(i).await {
                    self.faults.add(Fault::Kill);
                }
                tokio::time::sleep(Duration::from_millis(down)).await;
            }
        };
        let stop = async {
            if let Some((at, i)) = stop {
                tokio::time::sleep(Duration::from_millis(at)).await;
                self.faults.add(Fault::Stop);
                self.cluster.freeze(i, true).await;
                tokio::time::sleep(self.lease + Duration::from_secs(1)).await;
                self.cluster.freeze(i, false).await;
            }
        };
        let terminate = async {
            if terminate {
                tokio::time::sleep(Duration::from_millis(terminate_at)).await;
                self.faults.add(Fault::ConnectionsKilled);
                if let Db::Postgres(pool) = self.db {
                    let _ = sqlx::query(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                         WHERE datname = current_database() AND pid <> pg_backend_pid() \
                         AND application_name <> $1",
                    )
                    .bind(crate::db::CAMPAIGN)
                    .execute(pool)
                    .await;
                }
            }
        };
        futures::future::join3(kill, stop, terminate).await;
        if rolling {
            self.faults.add(Fault::RollingRestart);
            for i in 0..self.cluster.len() {
                self.cluster.terminate(i, Duration::from_secs(10)).await;
                self.cluster.restart(i).await?;
            }
        }
        for i in 0..self.cluster.len() {
            self.cluster.restart(i).await?;
        }
        Ok(())
    }
}
