//! A customer erased mid-conversation: they say hello, maybe book, and go on writing while the
//! merchant erases them (LGPD), the erasure racing their messages at the intake and their turns
//! at the workers; then they write again, as a new, empty contact, and one of their old
//! messages is redelivered late. What must hold is checked in `invariants::erasures`: nothing
//! they sent before the erasure survives anywhere, and what they sent after is answered.
//!
//! Their message ids say which side of the erasure each was sent on: `.erased.` before (or
//! racing it), `.after.` once it committed.

use std::time::Duration;

use anyhow::Context;
use balcao::domain::{ContactId, PrivacyKey, Secret};
use balcao::jobs::Replier;
use balcao::store::TenantStore;

use super::{Player, start};
use crate::faults::Fault;
use crate::meta;
use crate::rng::Rng;

impl Player<'_> {
    pub(super) async fn erased(&self, me: &str, mut rng: Rng) -> anyhow::Result<()> {
        let wamid =
            |rng: &mut Rng, side: &str| format!("wamid.chaos.{}.{side}.{:016x}", self.cast.index, rng.next_u64());
        let first = meta::message(&self.cast.number, me, meta::text(&wamid(&mut rng, "erased"), me, "oi"));
        self.deliver(&first).await;
        if rng.chance(0.5) {
            let (at, alt) = super::spell(start(rng.below(6))?)?;
            let book = format!(
                "#book service={} professional={} at={at} alt={alt} copies=1",
                self.cast.service, self.cast.professional
            );
            let body = meta::message(&self.cast.number, me, meta::text(&wamid(&mut rng, "erased"), me, &book));
            let before = self.ctx.graph.count_to(&self.cast.number, me);
            self.deliver(&body).await;
            self.ctx.graph.wait_for(&self.cast.number, me, before, super::STEP, |_| true).await;
        }
        // Still writing while the merchant erases them: the erasure races these at the intake
        // and their turn at a worker.
        let racing: Vec<serde_json::Value> = (0..rng.between(1, 3))
            .map(|_| {
                meta::message(&self.cast.number, me, meta::text(&wamid(&mut rng, "erased"), me, "quais horários?"))
            })
            .collect();
        let talk = async {
            for said in &racing {
                self.deliver(said).await;
            }
        };
        let pause = Duration::from_millis(rng.below(400));
        let erase = async {
            tokio::time::sleep(pause).await;
            self.erase(me).await
        };
        let ((), erased) = futures::future::join(talk, erase).await;
        erased?;
        self.ctx.faults.add(Fault::ErasureMidConversation);
        self.ctx.coverage.add("customers erased", 1);
        // Later: they write again (a new contact), and an old message is redelivered.
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        if rng.chance(0.7) {
            let again = meta::message(&self.cast.number, me, meta::text(&wamid(&mut rng, "after"), me, "oi de novo"));
            let before = self.ctx.graph.count_to(&self.cast.number, me);
            self.deliver(&again).await;
            self.ctx.graph.wait_for(&self.cast.number, me, before, super::STEP, |_| true).await;
        }
        self.late.lock().await.push(first);
        Ok(())
    }

    /// Erases the contact `me` is, as the console's "Apagar dados" does.
    async fn erase(&self, me: &str) -> anyhow::Result<()> {
        let sql = format!("SELECT COALESCE(MAX(id), 0) FROM contacts WHERE tenant_id = $1 AND wa_id = '{me}'");
        let contact = self.ctx.db.count(&sql, self.cast.tenant).await?;
        anyhow::ensure!(contact > 0, "{me} has no contact to erase");
        let store = &self.ctx.store;
        let tenant = store.tenant(balcao::domain::TenantId(self.cast.tenant)).await?.context("the run's tenant")?;
        let key = PrivacyKey::derive(&Secret::new(meta::APP_SECRET));
        let token = Secret::new(crate::SERVER_ACCESS_TOKEN);
        let replier = Replier::new(store.clone(), Some(token), false, Default::default());
        let now = store.db_time(chrono::Utc::now());
        balcao::privacy::erase(store, &replier, &key, &tenant, ContactId(contact), now).await?;
        Ok(())
    }
}
