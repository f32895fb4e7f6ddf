//! Folding free text to the printable ASCII a BR Code carries.
//!
//! Invariant: the output of [`fold_ascii`] is printable ASCII (0x20..=0x7E), has no leading,
//! trailing or repeated spaces, and so has as many bytes as characters.

use unicode_normalization::UnicodeNormalization;

/// Folds text to printable ASCII: accents stripped (NFD, combining marks dropped), letters with
/// no decomposition transliterated (`ß` → `ss`, `Æ` → `AE`, `Ø` → `O`), anything else that is
/// not ASCII dropped, runs of whitespace made one space, ends trimmed.
/// "São João ☕" becomes "Sao Joao".
pub fn fold_ascii(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    let mut push = |c: char, out: &mut String| {
        if c.is_whitespace() {
            space = !out.is_empty();
        } else if c.is_ascii_graphic() {
            if space {
                out.push(' ');
                space = false;
            }
            out.push(c);
        }
    };
    for c in text.nfd() {
        // Only letters: a symbol's transliteration is its name ("☕" → "coffee"), not its form.
        match deunicode::deunicode_char(c).filter(|_| !c.is_ascii() && c.is_alphabetic()) {
            Some(ascii) => ascii.chars().for_each(|a| push(a, &mut out)),
            None => push(c, &mut out),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_accents_and_drops_what_has_no_ascii_form() {
        assert_eq!(fold_ascii("São João"), "Sao Joao");
        assert_eq!(fold_ascii("  Maceió\t\n Açaí  ☕ Bar "), "Maceio Acai Bar");
        assert_eq!(fold_ascii("ÀÉÎÕÜ ç Ñ"), "AEIOU c N");
        assert_eq!(fold_ascii("☕🙂"), "");
        assert_eq!(fold_ascii(""), "");
    }

    #[test]
    fn transliterates_letters_without_a_decomposition() {
        assert_eq!(fold_ascii("Straße"), "Strasse");
        assert_eq!(fold_ascii("Ærø"), "AEro");
        assert_eq!(fold_ascii("Œuvre Łódź Þór Đorđe"), "OEuvre Lodz Thor Dorde");
    }
}
