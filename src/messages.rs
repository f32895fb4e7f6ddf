//! The bot's words: pt-BR templates compiled into the binary (askama), one struct per message.

use askama::Template;

/// The placeholder reply of the pipeline before an agent answers turns.
#[derive(Template)]
#[template(path = "messages/ack.txt")]
pub struct Acknowledgement<'a> {
    pub business: &'a str,
    pub customer: Option<&'a str>,
}

/// Renders a message template; a failure is a bug in a template, reported as such.
pub fn render(template: &impl Template) -> anyhow::Result<String> {
    Ok(template.render()?.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgement_greets_by_name_when_known() {
        let named = render(&Acknowledgement { business: "Barbearia do Zé", customer: Some("Ana") }).unwrap();
        assert!(named.starts_with("Olá, Ana!"), "{named}");
        assert!(named.contains("Barbearia do Zé"));
        let anonymous = render(&Acknowledgement { business: "Barbearia do Zé", customer: None }).unwrap();
        assert!(anonymous.starts_with("Olá!"), "{anonymous}");
    }
}
