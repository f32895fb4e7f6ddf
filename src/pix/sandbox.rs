//! The sandbox gateway: a static BR Code built locally from the tenant's key.
//!
//! Invariant: the code is a pure function of the settings and the request (key, txid,
//! amount), so `create` is idempotent by construction and `find` returns the very same
//! code. The description is not put in the code; the payer sees the merchant's name. Nothing
//! confirms a payment here: the merchant confirms it by hand.

use super::brcode::StaticCharge;
use super::gateway::{CancelOutcome, ChargeRef, ChargeRequest, CreatedCharge, GatewayError, PaymentState, PixGateway};
use super::gateway::{RefundReceipt, RefundRequest, RefundState};
use super::settings::PixSettings;

#[derive(Debug, Clone)]
pub struct SandboxGateway {
    pub settings: PixSettings,
}

impl SandboxGateway {
    pub fn new(settings: PixSettings) -> Self {
        Self { settings }
    }

    fn build(&self, req: &ChargeRequest) -> Result<CreatedCharge, GatewayError> {
        let charge = StaticCharge {
            key: self.settings.key.clone(),
            merchant_name: self.settings.merchant_name.clone(),
            merchant_city: self.settings.merchant_city.clone(),
            amount: Some(req.amount),
            txid: Some(req.txid.clone()),
            description: None,
        };
        let copia_e_cola = charge.encode().map_err(|e| GatewayError::Rejected(e.to_string()))?;
        Ok(CreatedCharge { txid: req.txid.clone(), copia_e_cola, provider_ref: None, expires_at: req.expires_at })
    }
}

#[async_trait::async_trait]
impl PixGateway for SandboxGateway {
    fn name(&self) -> &'static str {
        "sandbox"
    }

    async fn create(&self, req: &ChargeRequest) -> Result<CreatedCharge, GatewayError> {
        self.build(req)
    }

    async fn find(&self, req: &ChargeRequest) -> Result<Option<CreatedCharge>, GatewayError> {
        self.build(req).map(Some)
    }

    /// Nothing here sees a payment: a sandbox charge is marked paid by hand.
    async fn state(&self, _charge: &ChargeRef) -> Result<PaymentState, GatewayError> {
        Ok(PaymentState::Pending)
    }

    /// A static code cannot be revoked: withdrawing it is marking it so here, which the caller
    /// does; nobody pays a sandbox charge.
    async fn cancel(&self, _charge: &ChargeRef) -> Result<CancelOutcome, GatewayError> {
        Ok(CancelOutcome::Cancelled)
    }

    /// A sandbox payment was made by hand to the merchant's key, so it is given back by hand:
    /// the refund is recorded done here at once (the simulator shows it).
    async fn refund(&self, _req: &RefundRequest) -> Result<RefundReceipt, GatewayError> {
        Ok(RefundReceipt { state: RefundState::Done, provider_ref: None })
    }

    async fn find_refund(&self, _req: &RefundRequest) -> Result<Option<RefundReceipt>, GatewayError> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::domain::Cents;
    use crate::domain::LedgerKey;
    use crate::pix::brcode::decode;
    use crate::pix::key::{PixKey, PixKeyType};
    use crate::pix::settings::GatewayKind;
    use crate::pix::txid::Txid;

    fn gateway() -> SandboxGateway {
        SandboxGateway::new(PixSettings {
            gateway: GatewayKind::Sandbox,
            key: PixKey::parse(PixKeyType::Email, "caixa@barbearia.com.br").unwrap(),
            merchant_name: "Barbearia do Zé".into(),
            merchant_city: "Florianópolis".into(),
            provider: Default::default(),
        })
    }

    fn request(key: &str, cents: i64) -> ChargeRequest {
        let key = LedgerKey::from_stored(key.to_owned());
        ChargeRequest {
            txid: Txid::for_static(&key),
            key,
            amount: Cents(cents),
            description: "Corte de cabelo".into(),
            expires_at: Utc.with_ymd_and_hms(2030, 1, 2, 3, 4, 5).unwrap(),
            payer: crate::pix::gateway::Payer {
                phone: crate::domain::PhoneE164::parse("+5511999990000").unwrap(),
                name: None,
                document: None,
            },
            window: crate::domain::SendWindow::unbounded(),
        }
    }

    #[tokio::test]
    async fn create_builds_a_valid_static_code_for_the_request() {
        let req = request("pix_charge/v1/abc", 4550);
        let created = gateway().create(&req).await.unwrap();
        assert_eq!((&created.txid, created.expires_at, &created.provider_ref), (&req.txid, req.expires_at, &None));
        let code = decode(&created.copia_e_cola).unwrap();
        assert_eq!(code.key().map(PixKey::as_str), Some("caixa@barbearia.com.br"));
        assert_eq!((code.amount(), code.txid()), (Some(Cents(4550)), Some(req.txid.as_str())));
        assert_eq!(
            (code.merchant_name(), code.merchant_city(), code.description()),
            ("BARBEARIA DO ZE", "FLORIANOPOLIS", None)
        );
    }

    #[tokio::test]
    async fn create_is_idempotent_and_find_returns_the_same_charge() {
        let gateway = gateway();
        let req = request("pix_charge/v1/abc", 4550);
        let first = gateway.create(&req).await.unwrap();
        assert_eq!(gateway.create(&req).await.unwrap(), first);
        assert_eq!(gateway.find(&req).await.unwrap(), Some(first.clone()));
        let other = gateway.create(&request("pix_charge/v1/abd", 4550)).await.unwrap();
        assert_ne!(other.copia_e_cola, first.copia_e_cola);
        assert_eq!(gateway.name(), "sandbox");
    }

    #[tokio::test]
    async fn an_impossible_code_is_rejected_not_unknown() {
        let mut req = request("pix_charge/v1/abc", 0);
        assert!(matches!(gateway().create(&req).await, Err(GatewayError::Rejected(m)) if m.contains("positive")));
        req.amount = Cents(100);
        req.txid = Txid::for_cob(&req.key, b"secret");
        assert!(matches!(gateway().create(&req).await, Err(GatewayError::Rejected(m)) if m.contains("25")));
    }
}
