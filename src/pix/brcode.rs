//! BR Code, the EMV QRCPS-MPM payload behind "Pix copia e cola": strict decoding, byte-exact
//! re-encoding, and building static codes.
//!
//! Invariants of a decoded [`BrCode`]:
//! - it is a sequence of TLV fields (2-digit id, 2-digit length in bytes, 1..=99 bytes of
//!   value) covering the whole payload, at most [`MAX_PAYLOAD_LEN`] bytes, each id at most once;
//! - `00` = `01` comes first; `63` comes last and holds the CRC-16/CCITT-FALSE of everything
//!   before its 4 hex digits (including `6304`), in uppercase;
//! - `26` holds the GUI `br.gov.bcb.pix` (any case) and either a key (`26-01`, a canonical
//!   [`PixKey`]) or a URL without scheme (`26-25`); or, in a Pix Automático code, the GUI alone,
//!   the recurrence's URL then sitting in `80` (`80-00` the same GUI, `80-25` the URL);
//! - `52` is 4 digits, `53` = `986`, `58` = `BR`; `54`, if present, is a positive amount like
//!   `123.45` of at most 13 characters;
//! - `59` (name, ≤ 25), `60` (city, ≤ 15), `26-02`, `26-25` and `62-05` are printable ASCII, so
//!   byte and character lengths agree for every reader; a static code's `62-05` is `***` or
//!   ≤ 25 characters without spaces;
//! - [`BrCode::encode`] gives back the decoded payload byte for byte: fields, their order and
//!   any template we do not interpret (`27 BR.COM.OUTRO`, `80`, …) are kept verbatim.
//!
//! Rules are checked field by field in payload order, so an error names the first bad field.
//! Payer apps ignore a dynamic code's `62-05` (the payment's txid is behind the URL), so a
//! nonconforming one there is a [`BrCode::warnings`] entry, not an error: one PSP writing its
//! 35-character txid there must not fail every charge made through it.

use super::key::PixKey;
use super::tlv::{Tlv, TlvError, check_crc, crc16_hex};
use super::txid::MAX_STATIC_TXID_LEN;
use crate::domain::Cents;

/// Bacen's `pixCopiaECola` has `maxLength: 512`; it also bounds the decoder's work.
pub const MAX_PAYLOAD_LEN: usize = 512;
pub const PIX_GUI: &str = "br.gov.bcb.pix";
/// Payer banks refuse longer names and cities ("Esperado ANS, max25").
pub const MAX_NAME_LEN: usize = 25;
pub const MAX_CITY_LEN: usize = 15;
/// Two length digits.
const MAX_VALUE_LEN: usize = 99;
const MAX_AMOUNT_LEN: usize = 13;
/// Field 62-05 of a code without a txid.
pub const NO_TXID: &str = "***";

const FORMAT: u8 = 0;
const INITIATION: u8 = 1;
const PIX_ACCOUNT: u8 = 26;
const MCC: u8 = 52;
const CURRENCY: u8 = 53;
const AMOUNT: u8 = 54;
const COUNTRY: u8 = 58;
const NAME: u8 = 59;
const CITY: u8 = 60;
const ADDITIONAL: u8 = 62;
const CRC: u8 = 63;
const GUI: u8 = 0;
const KEY: u8 = 1;
const DESCRIPTION: u8 = 2;
const URL: u8 = 25;
const REFERENCE_LABEL: u8 = 5;
/// The unreserved template Pix Automático uses for the recurrence.
const RECURRENCE: u8 = 80;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrCodeError {
    #[error("the payload has {0} bytes; a BR Code has at most 512")]
    TooLong(usize),
    /// The CRC or the TLV structure is wrong.
    #[error(transparent)]
    Tlv(#[from] TlvError),
    #[error("field {field}: {message}")]
    Field { field: String, message: String },
    #[error("missing required field {0}")]
    Missing(String),
    #[error("field {0} appears twice")]
    Duplicate(String),
}

/// One TLV field. A template's `value` is the encoding of its `children`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    id: u8,
    value: String,
    children: Option<Vec<Field>>,
}

impl Field {
    fn leaf(id: u8, value: impl Into<String>) -> Self {
        Self { id, value: value.into(), children: None }
    }

    fn template(id: u8, children: Vec<Field>) -> Self {
        let mut value = String::new();
        children.iter().for_each(|c| c.write(&mut value));
        Self { id, value, children: Some(children) }
    }

    pub fn id(&self) -> u8 {
        self.id
    }
    pub fn value(&self) -> &str {
        &self.value
    }
    /// The nested fields of a template that parsed as TLV; `None` for a plain value.
    pub fn children(&self) -> Option<&[Field]> {
        self.children.as_deref()
    }
    fn child(&self, id: u8) -> Option<&Field> {
        self.children.as_ref()?.iter().find(|c| c.id == id)
    }
    fn write(&self, out: &mut String) {
        out.push_str(&format!("{:02}{:02}{}", self.id, self.value.len(), self.value));
    }
}

/// A decoded, valid BR Code.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrCode {
    fields: Vec<Field>,
    key: Option<PixKey>,
    amount: Option<Cents>,
    /// `26` held the GUI alone: valid only with a recurrence in `80`.
    gui_only: bool,
    warnings: Vec<String>,
}

impl BrCode {
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }
    pub fn field(&self, id: u8) -> Option<&Field> {
        self.fields.iter().find(|f| f.id == id)
    }
    fn sub(&self, id: u8, sub: u8) -> Option<&str> {
        self.field(id)?.child(sub).map(Field::value)
    }
    /// The receiver's key (static codes).
    pub fn key(&self) -> Option<&PixKey> {
        self.key.as_ref()
    }
    /// Where a payer's bank fetches the charge (dynamic codes), without scheme.
    pub fn url(&self) -> Option<&str> {
        self.sub(PIX_ACCOUNT, URL)
    }
    /// Where a payer's bank fetches the Pix Automático recurrence, without scheme.
    pub fn recurrence_url(&self) -> Option<&str> {
        self.field(RECURRENCE).filter(|f| is_pix_template(f)).and_then(|f| f.child(URL)).map(Field::value)
    }
    /// A charge (or recurrence) fetched from a URL rather than paid to a key.
    pub fn is_dynamic(&self) -> bool {
        self.url().is_some() || self.gui_only
    }
    /// What was accepted although nonconforming (a dynamic code's 62-05), for the log.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
    pub fn description(&self) -> Option<&str> {
        self.sub(PIX_ACCOUNT, DESCRIPTION)
    }
    pub fn amount(&self) -> Option<Cents> {
        self.amount
    }
    pub fn merchant_name(&self) -> &str {
        self.field(NAME).map_or("", Field::value)
    }
    pub fn merchant_city(&self) -> &str {
        self.field(CITY).map_or("", Field::value)
    }
    /// The reference label `62-05`, unless absent or `***`. Not always a [`Txid`]: the BR Code
    /// manual's own example uses `RP12345678-2019`.
    pub fn txid(&self) -> Option<&str> {
        self.sub(ADDITIONAL, REFERENCE_LABEL).filter(|t| *t != NO_TXID)
    }
    pub fn crc(&self) -> &str {
        self.field(CRC).map_or("", Field::value)
    }

    /// The payload: the decoded one byte for byte, with the CRC computed afresh.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        self.fields.iter().filter(|f| f.id != CRC).for_each(|f| f.write(&mut out));
        out.push_str("6304");
        let crc = crc16_hex(out.as_bytes());
        out.push_str(&crc);
        out
    }
}

/// Decodes and checks a "Pix copia e cola" payload. Never panics.
pub fn decode(payload: &str) -> Result<BrCode, BrCodeError> {
    if payload.len() > MAX_PAYLOAD_LEN {
        return Err(BrCodeError::TooLong(payload.len()));
    }
    check_crc(payload)?;
    let mut code = BrCode::default();
    let mut seen = [false; 100];
    for item in Tlv::new(payload, 0) {
        let (id, value, at) = item?;
        if std::mem::replace(&mut seen[usize::from(id)], true) {
            return Err(BrCodeError::Duplicate(label(None, id)));
        }
        if (id == FORMAT) != code.fields.is_empty() {
            return Err(field_error(None, FORMAT, "the Payload Format Indicator must be the first field"));
        }
        if id == CRC && at + 8 != payload.len() {
            return Err(field_error(None, CRC, "the CRC must be the last field, 6304 and 4 hex digits"));
        }
        let field = check_field(&mut code, id, value, at)?;
        code.fields.push(field);
    }
    for id in [PIX_ACCOUNT, MCC, CURRENCY, COUNTRY, NAME, CITY, CRC] {
        if !seen[usize::from(id)] {
            return Err(BrCodeError::Missing(label(None, id)));
        }
    }
    if code.gui_only {
        check_recurrence(&code)?;
    }
    Ok(code)
}

/// A GUI-only `26` is a Pix Automático code: `80` must carry the Pix GUI and the recurrence's URL.
fn check_recurrence(code: &BrCode) -> Result<(), BrCodeError> {
    let needs = "needs a key (26-01) or a URL (26-25), or a Pix Automático recurrence in field 80";
    let Some(recurrence) = code.field(RECURRENCE).filter(|f| is_pix_template(f)) else {
        return Err(field_error(None, PIX_ACCOUNT, needs));
    };
    let url =
        recurrence.child(URL).ok_or_else(|| field_error(Some(RECURRENCE), URL, "the recurrence needs its URL"))?;
    check_url(&url.value).map_err(|m| field_error(Some(RECURRENCE), URL, m))
}

/// A template whose GUI is Pix's (`80` is shared with other arrangements).
fn is_pix_template(field: &Field) -> bool {
    field.children().and_then(|c| c.first()).is_some_and(|gui| gui.id == GUI && gui.value.eq_ignore_ascii_case(PIX_GUI))
}

/// A URL as a BR Code carries it: printable ASCII without spaces or scheme.
fn check_url(url: &str) -> Result<(), String> {
    check_ans(url, MAX_VALUE_LEN, true)?;
    if url.contains("://") {
        return Err("must not contain a scheme such as https://".to_owned());
    }
    Ok(())
}

fn check_field(code: &mut BrCode, id: u8, value: &str, at: usize) -> Result<Field, BrCodeError> {
    let fail = |message: String| field_error(None, id, message);
    match id {
        FORMAT if value != "01" => return Err(fail(format!("must be 01, found {value:?}"))),
        INITIATION if value != "11" && value != "12" => {
            return Err(fail(format!("must be 11 (reusable) or 12 (single use), found {value:?}")));
        }
        PIX_ACCOUNT => return check_pix_account(code, value, at),
        MCC if value.len() != 4 || !value.bytes().all(|b| b.is_ascii_digit()) => {
            return Err(fail(format!("must be 4 digits, found {value:?}")));
        }
        CURRENCY if value != "986" => return Err(fail(format!("must be 986 (BRL), found {value:?}"))),
        AMOUNT => code.amount = Some(parse_amount(value).map_err(|m| fail(m.to_owned()))?),
        COUNTRY if value != "BR" => return Err(fail(format!("must be BR, found {value:?}"))),
        NAME => check_ans(value, MAX_NAME_LEN, false).map_err(fail)?,
        CITY => check_ans(value, MAX_CITY_LEN, false).map_err(fail)?,
        ADDITIONAL => {
            let children = strict_children(ADDITIONAL, value, at)?;
            if let Some(reference) = children.iter().find(|c| c.id == REFERENCE_LABEL) {
                let txid = reference.value();
                if txid != NO_TXID
                    && let Err(message) = check_ans(txid, MAX_STATIC_TXID_LEN, true)
                {
                    let error = field_error(Some(ADDITIONAL), REFERENCE_LABEL, message);
                    // `26` comes first, so whether the code is dynamic is known here.
                    if !code.is_dynamic() {
                        return Err(error);
                    }
                    code.warnings.push(format!("{error} (ignored by payer apps in a dynamic code)"));
                }
            }
            return Ok(Field { id, value: value.to_owned(), children: Some(children) });
        }
        // Other templates: shown nested when they parse, kept verbatim either way.
        27..=51 | 64 | 80..=99 => {
            let children: Result<Vec<Field>, _> =
                Tlv::new(value, 0).map(|r| r.map(|(id, v, _)| Field::leaf(id, v))).collect();
            return Ok(Field { id, value: value.to_owned(), children: children.ok() });
        }
        _ => {}
    }
    Ok(Field::leaf(id, value))
}

fn check_pix_account(code: &mut BrCode, value: &str, at: usize) -> Result<Field, BrCodeError> {
    let fail = |sub: u8, message: String| field_error(Some(PIX_ACCOUNT), sub, message);
    let children = strict_children(PIX_ACCOUNT, value, at)?;
    match children.first() {
        Some(gui) if gui.id == GUI && gui.value.eq_ignore_ascii_case(PIX_GUI) => {}
        Some(gui) if gui.id == GUI => return Err(fail(GUI, format!("must be {PIX_GUI}, found {:?}", gui.value))),
        _ => return Err(fail(GUI, format!("the template must start with the GUI {PIX_GUI}"))),
    }
    for child in &children {
        match child.id {
            KEY => code.key = Some(PixKey::infer(&child.value).map_err(|e| fail(KEY, e.to_string()))?),
            DESCRIPTION => check_ans(&child.value, MAX_VALUE_LEN, false).map_err(|m| fail(DESCRIPTION, m))?,
            URL => check_url(&child.value).map_err(|m| fail(URL, m))?,
            _ => {}
        }
    }
    let has = |id: u8| children.iter().any(|c| c.id == id);
    match (has(KEY), has(URL)) {
        (true, false) | (false, true) => {
            Ok(Field { id: PIX_ACCOUNT, value: value.to_owned(), children: Some(children) })
        }
        (true, true) => Err(field_error(None, PIX_ACCOUNT, "holds both a key (26-01) and a URL (26-25)")),
        // Checked once `80` has been read.
        (false, false) => {
            code.gui_only = true;
            Ok(Field { id: PIX_ACCOUNT, value: value.to_owned(), children: Some(children) })
        }
    }
}

/// The children of a template we interpret: well-formed, each id once.
fn strict_children(parent: u8, value: &str, at: usize) -> Result<Vec<Field>, BrCodeError> {
    let mut children: Vec<Field> = Vec::new();
    for item in Tlv::new(value, at + 4) {
        let (id, v, _) = item?;
        if children.iter().any(|c| c.id == id) {
            return Err(BrCodeError::Duplicate(label(Some(parent), id)));
        }
        children.push(Field::leaf(id, v));
    }
    Ok(children)
}

/// `123.45`, `10`, `0.5`: digits, then optionally a dot and one or two digits; positive.
fn parse_amount(value: &str) -> Result<Cents, &'static str> {
    const AMOUNT_FORMAT: &str = "must be an amount like 123.45 (at most 13 characters, dot as separator)";
    let (whole, frac) = value.split_once('.').unwrap_or((value, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if value.len() > MAX_AMOUNT_LEN
        || whole.is_empty()
        || !digits(whole)
        || !digits(frac)
        || frac.len() > 2
        || value.ends_with('.')
    {
        return Err(AMOUNT_FORMAT);
    }
    let whole: i64 = whole.parse().map_err(|_| AMOUNT_FORMAT)?;
    let frac: i64 = format!("{frac:0<2}").parse().map_err(|_| AMOUNT_FORMAT)?;
    let cents = whole.checked_mul(100).and_then(|w| w.checked_add(frac)).ok_or(AMOUNT_FORMAT)?;
    if cents == 0 {
        return Err("the amount must be positive");
    }
    Ok(Cents(cents))
}

/// Printable ASCII, 1..=`max` characters, and no spaces when `compact`.
fn check_ans(value: &str, max: usize, compact: bool) -> Result<(), String> {
    if let Some(c) = value.chars().find(|c| !(c.is_ascii_graphic() || (*c == ' ' && !compact))) {
        let allowed = if compact { "letters, digits and symbols without spaces" } else { "printable ASCII" };
        return Err(format!("{value:?} contains {c:?}; only {allowed} are accepted"));
    }
    if value.len() > max {
        return Err(format!("{value:?} has {} characters; the maximum is {max}", value.len()));
    }
    Ok(())
}

fn field_error(parent: Option<u8>, id: u8, message: impl Into<String>) -> BrCodeError {
    BrCodeError::Field { field: label(parent, id), message: message.into() }
}

/// `59 (Merchant Name)`, `26-01 (Pix Key)`.
fn label(parent: Option<u8>, id: u8) -> String {
    let number = match parent {
        Some(p) => format!("{p:02}-{id:02}"),
        None => format!("{id:02}"),
    };
    match field_name(parent, id) {
        Some(name) => format!("{number} ({name})"),
        None => number,
    }
}

/// The EMV/Pix name of a field, `parent` being the template it sits in.
pub fn field_name(parent: Option<u8>, id: u8) -> Option<&'static str> {
    Some(match (parent, id) {
        (None, 0) => "Payload Format Indicator",
        (None, 1) => "Point of Initiation Method",
        (None, 2..=51) => "Merchant Account Information",
        (None, 52) => "Merchant Category Code",
        (None, 53) => "Transaction Currency",
        (None, 54) => "Transaction Amount",
        (None, 58) => "Country Code",
        (None, 59) => "Merchant Name",
        (None, 60) => "Merchant City",
        (None, 61) => "Postal Code",
        (None, 62) => "Additional Data Field Template",
        (None, 63) => "CRC16",
        (None, 64) => "Merchant Information Language Template",
        (None, 80..=99) => "Unreserved Template",
        (Some(26..=51 | 80..=99), 0) => "Globally Unique Identifier",
        (Some(26), 1) => "Pix Key",
        (Some(26), 2) => "Additional Information",
        (Some(26), 3) => "Payment Facilitator (FSS)",
        (Some(26), 25) => "URL",
        (Some(62), 5) => "Reference Label (txid)",
        (Some(62), 50..=99) => "Payment System Specific Template",
        _ => return None,
    })
}

mod static_charge;

pub use static_charge::StaticCharge;

#[cfg(test)]
mod tests;
