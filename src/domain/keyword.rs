//! The one-word commands a customer types ("atendente", "sair", "parar", "voltar"), folded
//! the same way everywhere: case, accents and whatever surrounds the word (spaces,
//! punctuation, emoji) do not matter; anything inside it does.

use unicode_normalization::UnicodeNormalization;

/// `text` folded for comparison with a command: "  Sáir! " → "sair".
pub fn fold(text: &str) -> String {
    text.nfd()
        .filter(|c| !unicode_normalization::char::is_combining_mark(*c))
        .collect::<String>()
        .to_lowercase()
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::fold;

    #[test]
    fn case_accents_and_surroundings_do_not_matter() {
        assert_eq!(fold("  Sáir! "), "sair");
        assert_eq!(fold("ATENDENTE 🙏"), "atendente");
        assert_eq!(fold("¿Vóltar?"), "voltar");
        assert_eq!(fold("quero sair"), "quero sair");
        assert_eq!(fold("!!!"), "");
    }
}
