//! Building a static BR Code from the receiver's key: the payload is built, then decoded with
//! the parent's [`decode`], so whatever [`StaticCharge`] returns passes every rule a payer's
//! bank checks.

use super::{
    ADDITIONAL, AMOUNT, BrCode, BrCodeError, CITY, COUNTRY, CURRENCY, DESCRIPTION, FORMAT, Field, GUI, KEY,
    MAX_CITY_LEN, MAX_NAME_LEN, MAX_VALUE_LEN, MCC, NAME, NO_TXID, PIX_ACCOUNT, PIX_GUI, REFERENCE_LABEL, decode,
    field_error,
};
use crate::domain::Cents;
use crate::pix::fold::fold_ascii;
use crate::pix::key::PixKey;
use crate::pix::txid::Txid;

/// The data of a static BR Code, built locally from the receiver's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticCharge {
    pub key: PixKey,
    pub merchant_name: String,
    pub merchant_city: String,
    pub amount: Option<Cents>,
    pub txid: Option<Txid>,
    /// Shown to the payer when it fits the 99-character template; dropped otherwise.
    pub description: Option<String>,
}

impl StaticCharge {
    /// The payload. Name and city are folded to uppercase ASCII and cut to 25 and 15.
    pub fn encode(&self) -> Result<String, BrCodeError> {
        self.to_brcode().map(|code| code.encode())
    }

    /// Builds the payload and decodes it with [`decode`], so whatever this returns is valid.
    pub fn to_brcode(&self) -> Result<BrCode, BrCodeError> {
        let mut account = vec![Field::leaf(GUI, PIX_GUI), Field::leaf(KEY, self.key.as_str())];
        let description = self.description.as_deref().map(fold_ascii).unwrap_or_default();
        let template_len = |fields: &[Field]| fields.iter().map(|f| 4 + f.value.len()).sum::<usize>();
        if !description.is_empty() && template_len(&account) + 4 + description.len() <= MAX_VALUE_LEN {
            account.push(Field::leaf(DESCRIPTION, description));
        }
        let mut fields = vec![Field::leaf(FORMAT, "01"), Field::template(PIX_ACCOUNT, account)];
        fields.push(Field::leaf(MCC, "0000"));
        fields.push(Field::leaf(CURRENCY, "986"));
        if let Some(amount) = self.amount {
            if amount.0 <= 0 {
                return Err(field_error(None, AMOUNT, format!("the amount must be positive, not {amount}")));
            }
            fields.push(Field::leaf(AMOUNT, amount.to_decimal()));
        }
        fields.push(Field::leaf(COUNTRY, "BR"));
        fields.push(Field::leaf(NAME, fold_and_cut(NAME, &self.merchant_name, MAX_NAME_LEN)?));
        fields.push(Field::leaf(CITY, fold_and_cut(CITY, &self.merchant_city, MAX_CITY_LEN)?));
        let txid = match &self.txid {
            Some(t) if !t.fits_static() => {
                let message = format!("a static code's txid has at most 25 characters; {t} has {}", t.as_str().len());
                return Err(field_error(Some(ADDITIONAL), REFERENCE_LABEL, message));
            }
            Some(t) => t.as_str(),
            None => NO_TXID,
        };
        fields.push(Field::template(ADDITIONAL, vec![Field::leaf(REFERENCE_LABEL, txid)]));
        let code = BrCode { fields, ..BrCode::default() };
        decode(&code.encode())
    }
}

fn fold_and_cut(id: u8, text: &str, max: usize) -> Result<String, BrCodeError> {
    let mut folded = fold_ascii(text).to_ascii_uppercase();
    // ASCII only, so any byte index is a character boundary.
    folded.truncate(max);
    let folded = folded.trim_end().to_owned();
    if folded.is_empty() {
        return Err(field_error(None, id, format!("{text:?} has no letters or digits left once folded to ASCII")));
    }
    Ok(folded)
}
