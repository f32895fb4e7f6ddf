//! tower-sessions' store on Balcão's own database (SQLite or PostgreSQL), so sessions survive
//! restarts and are shared by every server process. Records are serialized as JSON; expired
//! ones are never loaded and are pruned by the sweep.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tower_sessions::SessionStore;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{Error, ExpiredDeletion, Result};

use crate::store::{AdminStore, Store};

#[derive(Clone, Debug)]
pub struct DbSessionStore {
    store: Store,
}

impl DbSessionStore {
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

fn expiry(record: &Record) -> Result<DateTime<Utc>> {
    DateTime::from_timestamp(record.expiry_date.unix_timestamp(), record.expiry_date.nanosecond())
        .ok_or_else(|| Error::Encode("session expiry out of range".into()))
}

fn backend(e: crate::store::StoreError) -> Error {
    Error::Backend(e.to_string())
}

#[async_trait]
impl SessionStore for DbSessionStore {
    async fn create(&self, record: &mut Record) -> Result<()> {
        let data = serde_json::to_vec(record).map_err(|e| Error::Encode(e.to_string()))?;
        // A colliding random id is astronomically unlikely; draw again rather than overwrite.
        while !self.store.session_save(&record.id.to_string(), &data, expiry(record)?, true).await.map_err(backend)? {
            record.id = Id::default();
        }
        Ok(())
    }

    async fn save(&self, record: &Record) -> Result<()> {
        let data = serde_json::to_vec(record).map_err(|e| Error::Encode(e.to_string()))?;
        self.store.session_save(&record.id.to_string(), &data, expiry(record)?, false).await.map_err(backend)?;
        Ok(())
    }

    async fn load(&self, id: &Id) -> Result<Option<Record>> {
        let Some(data) = self.store.session_load(&id.to_string(), Utc::now()).await.map_err(backend)? else {
            return Ok(None);
        };
        // A record that no longer decodes (an older format) is a logged-out session, not an error.
        Ok(serde_json::from_slice(&data).ok())
    }

    async fn delete(&self, id: &Id) -> Result<()> {
        self.store.session_delete(&id.to_string()).await.map_err(backend)
    }
}

#[async_trait]
impl ExpiredDeletion for DbSessionStore {
    async fn delete_expired(&self) -> Result<()> {
        self.store.session_prune(Utc::now()).await.map_err(backend)?;
        Ok(())
    }
}

/// Deletes expired sessions every `every` until `stop`.
pub async fn run_pruning(store: Store, every: std::time::Duration, stop: tokio_util::sync::CancellationToken) {
    crate::supervise::periodically("pruning console sessions", every, stop, || async {
        Ok(usize::try_from(store.session_prune(Utc::now()).await?).unwrap_or(usize::MAX))
    })
    .await;
}
