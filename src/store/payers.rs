//! A contact's payer data: the CPF or CNPJ a Pix provider identifies the payer by. Personal
//! data: exported with the contact and cleared by its erasure (`erasure.rs`).

use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, changed_one, writing};
use crate::domain::{ContactId, PayerDocument, PhoneE164, TenantId};
use crate::whatsapp::ContactIdentity;

impl Store {
    /// Records `document` as contact `contact`'s (replacing one given before); false when the
    /// contact was erased (nothing is stored then).
    pub async fn set_payer_document(
        &self,
        tenant: TenantId,
        contact: ContactId,
        document: &PayerDocument,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
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
            .map(changed_one)
        })?)
    }

    /// The document of the person at `phone`, with or without a Brazilian mobile's ninth
    /// digit: the contact a charge to that number reaches (`conversation_for_phone` finds the
    /// same one), if it carries one.
    pub async fn payer_document_of_phone(
        &self,
        tenant: TenantId,
        phone: &PhoneE164,
    ) -> StoreResult<Option<PayerDocument>> {
        let known = self.find_contact(tenant, &ContactIdentity::phone(phone.clone())).await?;
        let stored = known.and_then(|k| k.payer_document);
        stored
            .map(|d| PayerDocument::parse(&d).map_err(|e| StoreError::Corrupt(format!("payer document: {e}"))))
            .transpose()
    }
}
