//! Finding a person in text we did not write for them: a staff member's typed message, the
//! merchant agent's history, a notice quoting a customer. Used by the erasure on the merchant's
//! side, where the rows are not the customer's own and are found by what they contain.
//!
//! A number is found however it was written (`+55 (11) 98765-4321`, `11987654321`,
//! `98765-4321`, with or without the ninth digit), and only as that person's number: some
//! consecutive digit groups of a run of digits and phone punctuation spell the local part with
//! the person's own area code (or `55` and it) before it, with a trunk or international prefix
//! or not (`011 …`, `0 21 11 …` with a carrier, `00 55 11 …`), or the local part alone at the
//! run's start. `21 98765-4321` is someone else in Rio, not `+55 11 98765-4321`. A list's marker
//! (`1) `, `2. `) and a spaced dash (`Pedido 3 - `) end a run. A document (CPF, CNPJ) is found as
//! its whole digits, `/` included (`12.345.678/0001-95`). A name is found as whole words, ignoring case
//! (a profile name "Ana" is in "a Ana vem", not in "banana").
//! What matches is replaced whole, never cut around: a string that quotes the person says
//! nothing else worth keeping, and in JSON every free-text sibling of the match goes too (a
//! tool call's description beside its phone), while numbers, amounts, dates and structural fields
//! (`type`, `id`, `role`...) stay, so amounts, dates, ids and the shape survive.

use serde_json::Value;

use super::PhoneE164;

/// Digits a run must have to count as a phone number: the local part of a Brazilian number.
const MIN_PHONE_DIGITS: usize = 8;
/// A name shorter than this would match inside unrelated words.
const MIN_NAME_CHARS: usize = 3;
/// JSON fields that hold structure, not free text: kept even beside a match.
const STRUCTURAL: &[&str] = &["type", "id", "tool_use_id", "role", "kind", "status", "name", "tool"];

/// Digits that name the person, however they are punctuated.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Digits {
    digits: String,
    /// Whether other digits may come before it in the same run: a local part alone must start
    /// the run (`21 98765-4321` names another area's subscriber), a number with its area code
    /// may follow anything (`R$ 50 (11) 98765-4321`).
    after_anything: bool,
    /// A document's digits (found across `/`), not a phone number's (which may carry a dialing
    /// prefix).
    document: bool,
}

/// What identifies one person in free text.
#[derive(Debug, Clone, Default)]
pub struct Needles {
    /// Each spelling of the number (with and without the ninth digit; with the country and
    /// area code, with the area code, or the local part alone), a CPF or CNPJ.
    numbers: Vec<Digits>,
    /// Lowercased names (profile name, username), found as whole words.
    names: Vec<String>,
    /// Lowercased texts (a charge's description) found only as a whole message: the answer a
    /// staff member typed into a form, not every mention of a common word.
    texts: Vec<String>,
}

impl Needles {
    /// The number, with its other spelling when it is a Brazilian mobile: whole, without the
    /// country code, and its local part (found only at the start of a run).
    pub fn number(mut self, phone: &PhoneE164) -> Self {
        for spelling in phone.spellings() {
            // `55`, a two-digit area code and a local part of eight or nine digits.
            if spelling.starts_with("55") && (12..=13).contains(&spelling.len()) {
                self.numbers.push(Digits { digits: spelling[2..].to_owned(), after_anything: true, document: false });
                self.numbers.push(Digits { digits: spelling[4..].to_owned(), after_anything: false, document: false });
            }
            self.numbers.push(Digits { digits: spelling, after_anything: true, document: false });
        }
        self
    }

    /// A document's digits (CPF, CNPJ), however punctuated.
    pub fn digits(mut self, raw: &str) -> Self {
        let digits: String = raw.chars().filter(char::is_ascii_digit).collect();
        if digits.len() >= MIN_PHONE_DIGITS {
            self.numbers.push(Digits { digits, after_anything: true, document: true });
        }
        self
    }

    pub fn name(mut self, name: &str) -> Self {
        let name = name.trim().to_lowercase();
        if name.chars().count() >= MIN_NAME_CHARS {
            self.names.push(name);
        }
        self
    }

    pub fn text(mut self, text: &str) -> Self {
        let text = text.trim().to_lowercase();
        if text.chars().count() >= MIN_NAME_CHARS {
            self.texts.push(text);
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.numbers.is_empty() && self.names.is_empty() && self.texts.is_empty()
    }

    /// Lowercase `LIKE` patterns that every match satisfies (a prefilter; [`Self::matches`] decides).
    pub fn like_patterns(&self) -> Vec<String> {
        let mut patterns: Vec<String> = self
            .numbers
            .iter()
            .map(|n| format!("%{}%", &n.digits[n.digits.len().saturating_sub(4)..]))
            .chain(self.names.iter().chain(&self.texts).map(|n| format!("%{}%", like_any(n))))
            .collect();
        patterns.sort();
        patterns.dedup();
        patterns
    }

    /// Whether `text` names the person.
    pub fn matches(&self, text: &str) -> bool {
        if !self.names.is_empty() || !self.texts.is_empty() {
            let lower = text.to_lowercase();
            let whole = lower.trim();
            if self.names.iter().any(|n| contains_word(&lower, n)) || self.texts.iter().any(|t| t == whole) {
                return true;
            }
        }
        !self.numbers.is_empty()
            && (digit_runs(text, false).iter().any(|run| self.number_in(run, false))
                || digit_runs(text, true).iter().any(|run| self.number_in(run, true)))
    }

    /// `Some(placeholder)` when `text` names the person.
    pub fn scrub_text(&self, text: &str, placeholder: &str) -> Option<String> {
        self.matches(text).then(|| placeholder.to_owned())
    }

    /// Replaces, in place, every string that names the person and its free-text siblings.
    /// Whether anything changed.
    pub fn scrub_json(&self, value: &mut Value, placeholder: &str) -> bool {
        match value {
            Value::String(s) => {
                let hit = self.matches(s);
                if hit {
                    *s = placeholder.to_owned();
                }
                hit
            }
            Value::Array(items) => {
                items.iter_mut().fold(false, |changed, item| self.scrub_json(item, placeholder) | changed)
            }
            Value::Object(fields) => {
                let direct = fields.values().any(|v| v.as_str().is_some_and(|s| self.matches(s)));
                let mut changed = false;
                for (name, field) in fields.iter_mut() {
                    match field {
                        Value::String(s)
                            if direct && is_free_text(s) && !STRUCTURAL.contains(&name.as_str()) || self.matches(s) =>
                        {
                            *s = placeholder.to_owned();
                            changed = true;
                        }
                        Value::String(_) => {}
                        other => changed |= self.scrub_json(other, placeholder),
                    }
                }
                changed
            }
            _ => false,
        }
    }

    /// Whether some consecutive digit groups of `run` spell one of the person's numbers (or,
    /// with `documents`, one of their documents), where that spelling may stand.
    fn number_in(&self, groups: &[&str], documents: bool) -> bool {
        let longest = self.numbers.iter().map(|n| n.digits.len()).max().unwrap_or(0) + DIALING_PREFIX_MAX;
        (0..groups.len()).any(|start| {
            let mut digits = String::new();
            groups[start..].iter().any(|group| {
                digits.push_str(group);
                digits.len() <= longest
                    && self.numbers.iter().filter(|n| n.document == documents).any(|n| {
                        (start == 0 || n.after_anything)
                            && (n.digits == digits || (!n.document && n.after_anything && dialed(&digits, &n.digits)))
                    })
            })
        })
    }
}

/// `text` as a `LIKE` body that matches it whatever the database folds: `%`, `_` and every
/// non-ASCII letter become `_` (SQLite's `LOWER` leaves "Â" as it is, so "%ângela%" would miss
/// "Ângela"); the Rust side then decides.
fn like_any(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii() && c != '%' && c != '_' { c } else { '_' }).collect()
}

/// Whether `needle` occurs in `text` as whole words ("ana" in "a Ana vem", not in "banana").
fn contains_word(text: &str, needle: &str) -> bool {
    text.match_indices(needle).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + needle.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// Text with words in it; amounts, dates and codes have none and are kept beside a match.
fn is_free_text(s: &str) -> bool {
    s.chars().any(char::is_alphabetic)
}

/// The longest prefix dialed before a number with its area code: `0` and a two-digit carrier.
const DIALING_PREFIX_MAX: usize = 3;

/// Whether `typed` is `number` (with its area code) dialed with a prefix: the trunk `0`, the
/// international `00`, or `0` and a two-digit carrier code.
fn dialed(typed: &str, number: &str) -> bool {
    typed.strip_prefix("00") == Some(number)
        || typed.strip_prefix('0') == Some(number)
        || (typed.len() == number.len() + DIALING_PREFIX_MAX && typed.starts_with('0') && typed.ends_with(number))
}

/// The digit groups of each run of digits and phone punctuation (`+`, `(`, `)`, `-`, `.`,
/// spaces; and `/`, with `slash`) in `text`. A list's marker (one or two digits followed by `)`
/// or `.`, not inside parentheses) and a dash with spaces around it end a run.
fn digit_runs(text: &str, slash: bool) -> Vec<Vec<&str>> {
    let mut runs: Vec<Vec<&str>> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut group_start: Option<usize> = None;
    let mut previous: Option<char> = None;
    let mut opened = false;
    for (i, c) in text.char_indices() {
        if c.is_ascii_digit() {
            if group_start.is_none() {
                opened = previous == Some('(');
            }
            group_start.get_or_insert(i);
            previous = Some(c);
            continue;
        }
        let mut ends = false;
        if let Some(start) = group_start.take() {
            let group = &text[start..i];
            current.push(group);
            let marker = matches!(c, ')' | '.') && group.len() <= 2 && !opened;
            let spaced = text[i..].starts_with(". ") || text[i..].starts_with(") ");
            ends = marker && spaced;
        }
        let dash = c == '-' && previous == Some(' ') && text[i + 1..].starts_with(' ');
        let punctuation = matches!(c, '+' | '(' | ')' | '-' | '.' | ' ') || (slash && c == '/');
        if (ends || dash || !punctuation) && !current.is_empty() {
            runs.push(std::mem::take(&mut current));
        }
        previous = Some(c);
    }
    if let Some(start) = group_start {
        current.push(&text[start..]);
    }
    if !current.is_empty() {
        runs.push(current);
    }
    runs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn needles() -> Needles {
        let phone = PhoneE164::parse("+5511987654321").unwrap();
        Needles::default().number(&phone).name("Maria Souza").name("ms").digits("529.982.247-25").text("Corte")
    }

    #[test]
    fn a_number_is_found_however_it_was_typed() {
        let n = needles();
        for text in [
            "cobrar +5511987654321 50",
            "cliente 11987654321",
            "(11) 98765-4321",
            "+55 11 9 8765 4321.",
            "ligar 98765-4321 amanhã",
            "sem o nono: 551187654321",
            "8765-4321",
            "R$ 50 (11) 98765-4321 hoje",
            "MARIA SOUZA pagou",
            "CPF 529.982.247-25",
            " corte ",
        ] {
            assert!(n.matches(text), "{text:?}");
        }
        for text in
            ["R$ 50,00", "4321", "98765-4322", "5511987654320", "ms", "pedido 1234567812345678", "mariasouza", ""]
        {
            assert!(!n.matches(text), "{text:?}");
        }
        assert!(!n.matches("Corte e barba"));
        let other = Needles::default().number(&PhoneE164::parse("551187654321").unwrap());
        assert!(other.matches("+55 11 98765-4321"));
    }

    #[test]
    fn a_number_in_another_area_code_is_someone_else() {
        let n = needles();
        for text in [
            "ligar 21 98765-4321",
            "(21) 98765-4321",
            "+55 21 98765-4321",
            "5521987654321",
            "21987654321",
            "pedido 123 98765-4321",
            "98765-43210",
            "CPF 29.982.247-25",
        ] {
            assert!(!n.matches(text), "{text:?}");
        }
        for text in [
            "tel 0 11 98765-4321",
            "98765-4321 e 21 3333-4444",
            "9 8765 4321",
            "1187654321",
            "011 98765 4321",
            "(011) 98765-4321",
            "005511987654321",
            "02111987654321",
            "1) 98765-4321",
            "2. 98765-4321",
            "Pedido 3 - 98765-4321",
            "+55 (11) 9 8765-4321",
        ] {
            assert!(n.matches(text), "{text:?}");
        }
        for text in ["021 98765-4321", "0 21 98765-4321"] {
            assert!(!n.matches(text), "{text:?}");
        }
        let company = Needles::default().digits("12.345.678/0001-95");
        assert!(company.matches("CNPJ 12.345.678/0001-95"));
        assert!(!company.matches("CNPJ 12.345.678/0001-96"));
        // A number outside Brazil is found whole.
        let abroad = Needles::default().number(&PhoneE164::parse("+351912345678").unwrap());
        assert!(abroad.matches("+351 912 345 678"));
        assert!(!abroad.matches("912 345 678 e 12345678"));
    }

    #[test]
    fn json_keeps_amounts_ids_and_shape() {
        let n = needles();
        let mut v = json!({ "type": "tool_use", "id": "toolu_1", "name": "propose_charge",
            "input": { "customer_phone": "+5511987654321", "amount": "50,00", "cents": 5000, "description": "Corte" },
            "other": { "text": "nada aqui" } });
        assert!(n.scrub_json(&mut v, "x"));
        assert_eq!(
            v,
            json!({ "type": "tool_use", "id": "toolu_1", "name": "propose_charge",
            "input": { "customer_phone": "x", "amount": "50,00", "cents": 5000, "description": "x" },
            "other": { "text": "nada aqui" } })
        );
        let mut untouched = json!({ "text": "oi" });
        assert!(!n.scrub_json(&mut untouched, "x"));
        assert!(n.like_patterns().contains(&"%4321%".to_owned()));
        assert_eq!(Needles::default().name("Ângela 100%").like_patterns(), ["%_ngela 100_%"]);
    }
}
