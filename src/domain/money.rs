//! Money in integer centavos of BRL. Never a float.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Cents(pub i64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an amount in reais like 50, 50.00 or R$ 50,00")]
pub struct MoneyError(pub String);

/// Ten million reais: far above any appointment or charge, far below overflow.
const MAX_CENTS: i64 = 1_000_000_000;

impl Cents {
    /// Reads `50`, `50.5`, `50,50` or `R$ 50,00`. Thousands separators are refused: `1.000`
    /// means one thousand in Brazil and one in most code, so it cannot be read safely.
    pub fn parse_brl(raw: &str) -> Result<Self, MoneyError> {
        let err = || MoneyError(raw.to_owned());
        let s = raw.trim();
        let s = s.strip_prefix("R$").unwrap_or(s).trim();
        let (whole, frac) = match s.find(['.', ',']) {
            Some(i) => (&s[..i], &s[i + 1..]),
            None => (s, ""),
        };
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole)
            || (!frac.is_empty() && !digits(frac))
            || frac.len() > 2
            || (s.contains(['.', ',']) && frac.is_empty())
        {
            return Err(err());
        }
        let whole: i64 = whole.parse().map_err(|_| err())?;
        let frac: i64 = match frac.len() {
            0 => 0,
            1 => frac.parse::<i64>().map_err(|_| err())? * 10,
            _ => frac.parse().map_err(|_| err())?,
        };
        let cents =
            whole.checked_mul(100).and_then(|w| w.checked_add(frac)).filter(|c| *c <= MAX_CENTS).ok_or_else(err)?;
        Ok(Self(cents))
    }

    /// `"50.00"`: the canonical machine form.
    pub fn to_decimal(self) -> String {
        format!("{}.{:02}", self.0 / 100, self.0 % 100)
    }
}

/// `R$ 50,00`, as a Brazilian customer reads it.
impl fmt::Display for Cents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "R$ {},{:02}", self.0 / 100, self.0 % 100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_brazilian_and_machine_forms() {
        for (raw, cents) in
            [("50", 5000), ("50.5", 5050), ("50,50", 5050), ("R$ 50,00", 5000), ("0.01", 1), (" 12 ", 1200)]
        {
            assert_eq!(Cents::parse_brl(raw), Ok(Cents(cents)), "{raw}");
        }
        for bad in ["", "-5", "5.", "5.001", "1.000,00", "abc", "R$", "99999999999"] {
            assert!(Cents::parse_brl(bad).is_err(), "{bad}");
        }
        assert_eq!(Cents(5050).to_string(), "R$ 50,50");
        assert_eq!(Cents(5).to_decimal(), "0.05");
    }
}
