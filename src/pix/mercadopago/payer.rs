//! Where Mercado Pago's required `payer.email` comes from (see the parent module's docs).

use crate::pix::gateway::Payer;

/// Where `payer.email` comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayerEmail {
    /// One address for every charge.
    Fixed(String),
    /// `<phone match key>@domain` for each customer.
    PerCustomer { domain: String },
}

impl PayerEmail {
    /// `name@domain` or `@domain`.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let raw = raw.trim();
        let (local, domain) = raw.split_once('@').ok_or_else(|| format!("{raw:?} is not name@domain or @domain"))?;
        let plain = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic() && b != b'@');
        if !plain(domain) || !domain.contains('.') || (!local.is_empty() && !plain(local)) {
            return Err(format!("{raw:?} is not name@domain or @domain"));
        }
        Ok(if local.is_empty() { Self::PerCustomer { domain: domain.to_owned() } } else { Self::Fixed(raw.to_owned()) })
    }

    pub(super) fn for_payer(&self, payer: &Payer) -> String {
        match self {
            Self::Fixed(address) => address.clone(),
            Self::PerCustomer { domain } => format!("{}@{domain}", payer.phone.match_key()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payer_emails_are_fixed_or_per_customer() {
        let phone = crate::domain::PhoneE164::parse("+5511999990000").unwrap();
        let payer = Payer { phone, name: None, document: None };
        let fixed = PayerEmail::parse(" pagamentos@loja.com.br ").unwrap();
        assert_eq!(fixed.for_payer(&payer), "pagamentos@loja.com.br");
        let per_customer = PayerEmail::parse("@clientes.loja.com.br").unwrap();
        assert_eq!(
            per_customer.for_payer(&payer),
            "551199990000@clientes.loja.com.br",
            "one payer with or without the 9"
        );
        for bad in ["", "loja", "@", "a@", "a@b", "a b@c.d", "a@b@c.d"] {
            assert!(PayerEmail::parse(bad).is_err(), "{bad:?}");
        }
    }
}
