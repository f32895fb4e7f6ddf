//! A contact's payer data: the CPF or CNPJ a Pix provider identifies the payer by. Personal
//! data: exported with the contact and cleared by its erasure (`erasure.rs`).

use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, reading, writing};
use crate::domain::{ContactId, PayerDocument, PhoneE164, TenantId};

impl Store {
    /// Records `document` as contact `contact`'s (replacing one given before).
    pub async fn set_payer_document(
        &self,
        tenant: TenantId,
        contact: ContactId,
        document: &PayerDocument,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        writing!(self, pool => {
            sqlx::query(
                "UPDATE contacts SET payer_document = $1, updated_at = $2
                 WHERE tenant_id = $3 AND id = $4 AND erased_at IS NULL",
            )
            .bind(document.as_str())
            .bind(now)
            .bind(tenant.0)
            .bind(contact.0)
            .execute(pool)
            .await
            .map(|_| ())
        })?;
        Ok(())
    }

    /// The document of the person at `phone`, with or without a Brazilian mobile's ninth
    /// digit, if they have a contact that carries one.
    pub async fn payer_document_of_phone(
        &self,
        tenant: TenantId,
        phone: &PhoneE164,
    ) -> StoreResult<Option<PayerDocument>> {
        let stored: Option<Option<String>> = reading!(self, pool => {
            sqlx::query_scalar(
                "SELECT payer_document FROM contacts WHERE tenant_id = $1 AND external_key = $2
                 UNION ALL SELECT payer_document FROM contacts WHERE tenant_id = $1 AND wa_id = $3
                 LIMIT 1",
            )
            .bind(tenant.0)
            .bind(phone.match_key())
            .bind(phone.digits())
            .fetch_optional(pool)
            .await
        })?;
        stored.flatten().map(|d| PayerDocument::parse(&d).map_err(|e| StoreError::Corrupt(e.to_string()))).transpose()
    }
}
