//! The console's reads of appointments: the calendar over a visible range (one indexed range
//! scan on `appointments_tenant_start`, whatever the table's size), and one appointment with
//! the ledger rows and pending actions about it.

use chrono::{DateTime, Utc};
use sqlx::types::Json;

use crate::booking::Appointment;
use crate::domain::TenantId;
use crate::store::{Store, StoreResult, reading};

/// At most this many appointments are drawn on one page (a week of a large business).
const AGENDA_LIMIT: i64 = 5_000;

/// One appointment on the calendar.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AgendaEntry {
    pub id: i64,
    pub professional_id: i64,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub status: String,
    pub customer: Option<String>,
    pub service: Option<String>,
}

/// An appointment with who and what it is about.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AppointmentDetail {
    #[sqlx(flatten)]
    pub appointment: Appointment,
    pub idempotency_key: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub attendance_confirmed_at: Option<DateTime<Utc>>,
    pub customer: Option<String>,
    pub wa_id: Option<String>,
    pub service: Option<String>,
    pub professional: Option<String>,
}

/// A ledger row about an appointment.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LedgerEntry {
    pub id: i64,
    pub tool: String,
    pub idempotency_key: String,
    pub arguments: Json<serde_json::Value>,
    pub status: String,
    pub error: Option<String>,
    pub replay_count: i64,
    pub generation: i64,
    pub conversation_id: i64,
    pub turn_id: Option<i64>,
    pub tool_use_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
}

/// A pending action, as the console lists it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ActionEntry {
    pub id: String,
    pub conversation_id: i64,
    pub kind: String,
    pub subject: String,
    pub status: String,
    pub offer_text: String,
    pub expires_at: DateTime<Utc>,
    pub confirmed_via: Option<String>,
    pub confirmed_by: Option<i64>,
    pub confirmed_by_name: Option<String>,
    /// The admin who decided it in the simulator.
    pub decided_in_simulator: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// The columns of [`ActionEntry`], over `pending_actions p` left-joined to the deciding contact `d`.
macro_rules! action_entry_columns {
    () => {
        "p.id, p.conversation_id, p.kind, p.subject, p.status, p.offer_text, p.expires_at, p.confirmed_via,
         p.confirmed_by, d.profile_name AS confirmed_by_name, p.decided_in_simulator, p.decided_at, p.created_at"
    };
}
pub(crate) use action_entry_columns;

#[allow(async_fn_in_trait)]
pub trait ConsoleAgendaStore {
    /// Every appointment (any status) starting in `[from, to)`, by start.
    async fn agenda_entries(
        &self,
        tenant: TenantId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<AgendaEntry>>;
    async fn appointment_detail(&self, tenant: TenantId, id: i64) -> StoreResult<Option<AppointmentDetail>>;
    /// The ledger rows about `subject`, or under `key` (the row that booked it), oldest first.
    async fn ledger_entries(&self, tenant: TenantId, subject: &str, key: Option<&str>)
    -> StoreResult<Vec<LedgerEntry>>;
    /// Pending actions about `subject` or with one of the ids `ids`, oldest first.
    async fn actions_about(&self, tenant: TenantId, subject: &str, ids: &[String]) -> StoreResult<Vec<ActionEntry>>;
}

impl ConsoleAgendaStore for Store {
    async fn agenda_entries(
        &self,
        tenant: TenantId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<AgendaEntry>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT a.id, a.professional_id, a.starts_at, a.ends_at, a.status, c.profile_name AS customer,
                        s.name AS service
                 FROM appointments a
                 JOIN contacts c ON c.id = a.contact_id AND c.tenant_id = a.tenant_id
                 LEFT JOIN services s ON s.id = a.service_id AND s.tenant_id = a.tenant_id
                 WHERE a.tenant_id = $1 AND a.starts_at >= $2 AND a.starts_at < $3
                 ORDER BY a.starts_at, a.id LIMIT $4",
            )
            .bind(tenant.0)
            .bind(from)
            .bind(to)
            .bind(AGENDA_LIMIT)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn appointment_detail(&self, tenant: TenantId, id: i64) -> StoreResult<Option<AppointmentDetail>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT a.id, a.contact_id, a.service_id, a.professional_id, a.starts_at, a.ends_at, a.status,
                        a.price_cents, a.deposit_cents, a.hold_expires_at, a.idempotency_key, a.created_at,
                        a.updated_at, a.attendance_confirmed_at, c.profile_name AS customer, c.wa_id,
                        s.name AS service, p.name AS professional
                 FROM appointments a
                 JOIN contacts c ON c.id = a.contact_id AND c.tenant_id = a.tenant_id
                 LEFT JOIN services s ON s.id = a.service_id AND s.tenant_id = a.tenant_id
                 LEFT JOIN professionals p ON p.id = a.professional_id AND p.tenant_id = a.tenant_id
                 WHERE a.tenant_id = $1 AND a.id = $2",
            )
            .bind(tenant.0)
            .bind(id)
            .fetch_optional(pool)
            .await
        })?)
    }

    async fn ledger_entries(
        &self,
        tenant: TenantId,
        subject: &str,
        key: Option<&str>,
    ) -> StoreResult<Vec<LedgerEntry>> {
        let _gate = self.replays.read_gate().await;
        let mut entries: Vec<LedgerEntry> = reading!(self, pool => {
            sqlx::query_as(
                "SELECT id, tool, idempotency_key, arguments, status, error, replay_count, generation,
                        conversation_id, turn_id, tool_use_id, created_at, completed_at
                 FROM agent_tool_executions
                 WHERE tenant_id = $1 AND (subject = $2 OR idempotency_key = $3)
                 ORDER BY id",
            )
            .bind(tenant.0)
            .bind(subject)
            .bind(key)
            .fetch_all(pool)
            .await
        })?;
        self.replays.add_pending(tenant, entries.iter_mut().map(|e| (e.id, &mut e.replay_count)));
        Ok(entries)
    }

    async fn actions_about(&self, tenant: TenantId, subject: &str, ids: &[String]) -> StoreResult<Vec<ActionEntry>> {
        let mut found: Vec<ActionEntry> = reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT ", action_entry_columns!(), "
                 FROM pending_actions p LEFT JOIN contacts d ON d.id = p.confirmed_by AND d.tenant_id = p.tenant_id
                 WHERE p.tenant_id = $1 AND p.subject = $2 ORDER BY p.created_at, p.id"
            ))
            .bind(tenant.0)
            .bind(subject)
            .fetch_all(pool)
            .await
        })?;
        // A booking proposal is about its slot, not the appointment it became: found by the id
        // its execution was keyed by (a handful at most).
        for id in ids {
            if found.iter().any(|a| &a.id == id) {
                continue;
            }
            let action: Option<ActionEntry> = reading!(self, pool => {
                sqlx::query_as(concat!(
                    "SELECT ", action_entry_columns!(), "
                     FROM pending_actions p LEFT JOIN contacts d ON d.id = p.confirmed_by AND d.tenant_id = p.tenant_id
                     WHERE p.tenant_id = $1 AND p.id = $2"
                ))
                .bind(tenant.0)
                .bind(id)
                .fetch_optional(pool)
                .await
            })?;
            found.extend(action);
        }
        found.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(found)
    }
}
