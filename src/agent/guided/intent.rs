//! What a customer's free text asks the menu for: a few keywords and phrases, case, accents and
//! punctuation aside, and close spellings of the longer words (one letter off: "horaros",
//! "cancelr"). Anything else is not understood, and the menu says so.
//!
//! Invariant: a keyword is matched as whole words, never inside another word ("remarcar" is not
//! "marcar"); when a text names several things, the most specific wins (its bookings over a
//! new booking, a new booking over a greeting).

use crate::domain::keyword::fold;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Intent {
    /// Its bookings (to see, move or cancel one).
    Mine,
    /// Move one of its bookings.
    Move,
    /// Cancel one of its bookings.
    Cancel,
    /// Where the business is.
    Address,
    Book,
    /// The services and their prices.
    Prices,
    Greeting,
    /// "obrigado", "ok", "valeu": nothing to do, a short answer.
    Thanks,
    Unknown,
}

/// Phrases, most specific first: changing a booking and the address, then a new one (so "quero marcar meu
/// horário" books), then the bookings, prices, greetings and thanks. Words are folded (no
/// accents, lowercase).
const PHRASES: &[(&str, Intent)] = &[
    ("meus horarios", Intent::Mine),
    ("meus agendamentos", Intent::Mine),
    ("minhas reservas", Intent::Mine),
    ("remarcar", Intent::Move),
    ("reagendar", Intent::Move),
    ("mudar o horario", Intent::Move),
    ("mudar meu horario", Intent::Move),
    ("trocar o horario", Intent::Move),
    ("trocar meu horario", Intent::Move),
    ("mudar de horario", Intent::Move),
    ("trocar de horario", Intent::Move),
    ("adiar", Intent::Move),
    ("desmarcar", Intent::Cancel),
    ("cancelar", Intent::Cancel),
    ("endereco", Intent::Address),
    ("onde fica", Intent::Address),
    ("onde voces ficam", Intent::Address),
    ("localizacao", Intent::Address),
    ("como chegar", Intent::Address),
    ("agendar", Intent::Book),
    ("marcar", Intent::Book),
    ("meu horario", Intent::Mine),
    ("horarios", Intent::Book),
    ("horario", Intent::Book),
    ("agenda", Intent::Book),
    ("vaga", Intent::Book),
    ("precos", Intent::Prices),
    ("preco", Intent::Prices),
    ("valores", Intent::Prices),
    ("valor", Intent::Prices),
    ("quanto custa", Intent::Prices),
    ("quanto e", Intent::Prices),
    ("servicos", Intent::Prices),
    ("tabela", Intent::Prices),
    ("oi", Intent::Greeting),
    ("ola", Intent::Greeting),
    ("opa", Intent::Greeting),
    ("bom dia", Intent::Greeting),
    ("boa tarde", Intent::Greeting),
    ("boa noite", Intent::Greeting),
    ("menu", Intent::Greeting),
    ("inicio", Intent::Greeting),
    ("comecar", Intent::Greeting),
    ("obrigado", Intent::Thanks),
    ("obrigada", Intent::Thanks),
    ("obg", Intent::Thanks),
    ("valeu", Intent::Thanks),
    ("ok", Intent::Thanks),
    ("beleza", Intent::Thanks),
    ("blz", Intent::Thanks),
    ("combinado", Intent::Thanks),
    ("perfeito", Intent::Thanks),
];

/// Keywords at least this long also match a word one letter off; shorter ones differ from
/// everyday words by one letter ("preco"/"preto", "quanto"/"quando", "marcar"/"marca").
const FUZZY_MIN_CHARS: usize = 7;

/// What `text` asks for.
pub(super) fn intent(text: &str) -> Intent {
    let folded = fold(text);
    let words: Vec<&str> = folded.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    PHRASES
        .iter()
        .find(|(phrase, _)| {
            let phrase: Vec<&str> = phrase.split(' ').collect();
            words.windows(phrase.len()).any(|window| window.iter().zip(&phrase).all(|(w, p)| close(w, p)))
        })
        .map_or(Intent::Unknown, |(_, intent)| *intent)
}

/// `word` is `keyword`, or one letter off it when both are long enough to tell apart.
fn close(word: &str, keyword: &str) -> bool {
    word == keyword
        || (keyword.chars().count() >= FUZZY_MIN_CHARS
            && word.chars().count() + 1 >= FUZZY_MIN_CHARS
            && within_one_edit(word, keyword))
}

/// Levenshtein distance at most one.
fn within_one_edit(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let (short, long) = if a.len() <= b.len() { (&a, &b) } else { (&b, &a) };
    if long.len() - short.len() > 1 {
        return false;
    }
    let prefix = short.iter().zip(long.iter()).take_while(|(x, y)| x == y).count();
    if short.len() == long.len() {
        // One substitution: the rest after the first difference is equal.
        short[prefix..].iter().skip(1).eq(long[prefix..].iter().skip(1))
    } else {
        // One insertion into the shorter.
        short[prefix..].iter().eq(long[prefix + 1..].iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_and_close_spellings_reach_their_screens() {
        for (text, expected) in [
            ("Meus horários", Intent::Mine),
            ("quero remarcar meu horário", Intent::Move),
            ("dá pra mudar o horário?", Intent::Move),
            ("quero trocar de horário", Intent::Move),
            ("posso adiar?", Intent::Move),
            ("CANCELAR!", Intent::Cancel),
            ("cancelr", Intent::Cancel),
            ("qual o endereço?", Intent::Address),
            ("Endereco", Intent::Address),
            ("onde fica a barbearia", Intent::Address),
            ("enderço", Intent::Address),
            ("meus horaros", Intent::Mine),
            ("Oi, quero marcar um corte", Intent::Book),
            ("tem horário amanhã?", Intent::Book),
            ("qual o preço?", Intent::Prices),
            ("Quanto custa a barba", Intent::Prices),
            ("Bom dia!", Intent::Greeting),
            ("oi", Intent::Greeting),
            ("quero marcar meu horário", Intent::Book),
            ("Obrigado!", Intent::Thanks),
            ("ok 👍", Intent::Thanks),
            ("aceita cartão?", Intent::Unknown),
            ("marcaram", Intent::Unknown),
            ("quando é que abre?", Intent::Unknown),
            ("cabelo preto", Intent::Unknown),
            ("qual a marca?", Intent::Unknown),
        ] {
            assert_eq!(intent(text), expected, "{text}");
        }
    }

    #[test]
    fn one_edit_means_one_edit() {
        assert!(within_one_edit("horaros", "horarios"));
        assert!(within_one_edit("cancelor", "cancelar"));
        assert!(!within_one_edit("marcaram", "marcar"));
        assert!(!within_one_edit("xyz", "abcde"));
    }
}
