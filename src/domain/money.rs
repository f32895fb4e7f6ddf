//! Money in integer centavos of BRL. Never a float.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Cents(pub i64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    #[error("{0:?} is not an amount in reais like 50, 50.00, R$ 50,00 or 1.234,56")]
    Unreadable(String),
    #[error("{0:?} is more than the largest amount, R$ 10.000.000,00")]
    TooLarge(String),
}

impl Cents {
    /// Ten million reais: far above any appointment or charge, far below overflow.
    pub const MAX: Self = Self(1_000_000_000);

    /// Reads an amount as a Brazilian types it: `50`, `50,50`, `R$ 1.234,56`, `1.234` (the dot
    /// groups thousands when a comma follows or when exactly three digits follow each dot), and
    /// the machine form `50.5` / `50.50` (one dot, one or two digits after it).
    pub fn parse_brl(raw: &str) -> Result<Self, MoneyError> {
        let err = || MoneyError::Unreadable(raw.to_owned());
        let s = raw.trim();
        let s = s.strip_prefix("R$").unwrap_or(s).trim();
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        // Whole part (dots grouping thousands removed) and fraction.
        let (whole, frac) = match (s.rfind(','), s.matches('.').count()) {
            (Some(comma), _) => (grouped(&s[..comma]).ok_or_else(err)?, &s[comma + 1..]),
            (None, 0) => (s.to_owned(), ""),
            (None, dots) => match s.rfind('.').map(|i| (&s[..i], &s[i + 1..])) {
                Some((head, tail)) if dots == 1 && tail.len() <= 2 => (head.to_owned(), tail),
                _ => (grouped(s).ok_or_else(err)?, ""),
            },
        };
        if !digits(&whole) || (!frac.is_empty() && !digits(frac)) || frac.len() > 2 || s.ends_with([',', '.']) {
            return Err(err());
        }
        let whole: i64 = whole.parse().map_err(|_| MoneyError::TooLarge(raw.to_owned()))?;
        let frac: i64 = match frac.len() {
            0 => 0,
            1 => frac.parse::<i64>().map_err(|_| err())? * 10,
            _ => frac.parse().map_err(|_| err())?,
        };
        let too_large = || MoneyError::TooLarge(raw.to_owned());
        let cents = whole
            .checked_mul(100)
            .and_then(|w| w.checked_add(frac))
            .filter(|c| *c <= Self::MAX.0)
            .ok_or_else(too_large)?;
        Ok(Self(cents))
    }

    /// The machine form and its comma twin only: `50`, `50.5`, `50,50` (at most two decimals, no
    /// thousands grouping), for what a program or a model writes: `50.001` is refused there, not
    /// read as fifty thousand and one.
    pub fn parse_decimal(raw: &str) -> Result<Self, MoneyError> {
        let s = raw.trim();
        let separators = s.matches(['.', ',']).count();
        let decimals = s.rsplit(['.', ',']).next().map_or(0, str::len);
        if separators > 1 || (separators == 1 && decimals > 2) {
            return Err(MoneyError::Unreadable(raw.to_owned()));
        }
        Self::parse_brl(s)
    }

    /// `"50.00"`: the canonical machine form.
    pub fn to_decimal(self) -> String {
        format!("{}.{:02}", self.0 / 100, self.0 % 100)
    }
}

/// `1234` from `1.234` (dots between groups of three digits), `None` if the dots group
/// anything else; a string without dots is returned as it is.
fn grouped(s: &str) -> Option<String> {
    let mut groups = s.split('.');
    let first = groups.next()?;
    let rest: Vec<&str> = groups.collect();
    // "0.500" groups nothing: a first group of thousands never starts with 0.
    let ok = rest.is_empty() || ((1..=3).contains(&first.len()) && !first.starts_with('0'));
    (ok && rest.iter().all(|g| g.len() == 3)).then(|| rest.iter().fold(first.to_owned(), |acc, g| acc + g))
}

/// `R$ 1.234,56`, as a Brazilian reads it.
impl fmt::Display for Cents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reais = (self.0 / 100).to_string();
        let mut grouped = String::with_capacity(reais.len() + reais.len() / 3);
        for (i, digit) in reais.chars().enumerate() {
            if i > 0 && (reais.len() - i).is_multiple_of(3) {
                grouped.push('.');
            }
            grouped.push(digit);
        }
        write!(f, "R$ {grouped},{:02}", self.0 % 100)
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
        for (raw, cents) in [
            ("1.234,56", 123_456),
            ("R$ 1.234,56", 123_456),
            ("1.000", 100_000),
            ("1.234.567", 123_456_700),
            ("1234,5", 123_450),
        ] {
            assert_eq!(Cents::parse_brl(raw), Ok(Cents(cents)), "{raw}");
        }
        for bad in
            ["", "-5", "5.", "5,", "0.500", "0.050,00", "1.00.000", "12.34.56", "1,000.00", "abc", "R$", "99999999999"]
        {
            assert!(Cents::parse_brl(bad).is_err(), "{bad}");
        }
        assert!(matches!(Cents::parse_brl("99999999999"), Err(MoneyError::TooLarge(_))));
        assert!(matches!(Cents::parse_brl("abc"), Err(MoneyError::Unreadable(_))));
        assert_eq!(Cents::parse_decimal("50.5"), Ok(Cents(5050)));
        assert_eq!(Cents::parse_decimal("1234,56"), Ok(Cents(123_456)));
        for bad in ["50.001", "1.234,56", "1.000"] {
            assert!(Cents::parse_decimal(bad).is_err(), "{bad}");
        }
        assert_eq!(Cents(5050).to_string(), "R$ 50,50");
        assert_eq!(Cents(123_456).to_string(), "R$ 1.234,56");
        assert_eq!(Cents(100_000_000).to_string(), "R$ 1.000.000,00");
        assert_eq!(Cents(5).to_string(), "R$ 0,05");
        assert_eq!(Cents(5).to_decimal(), "0.05");
    }
}
