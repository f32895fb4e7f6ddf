//! The bot's words: pt-BR templates compiled into the binary (askama), one struct per message.

use askama::Template;

/// The placeholder reply of the pipeline before an agent answers turns.
#[derive(Template)]
#[template(path = "messages/ack.txt")]
pub struct Acknowledgement<'a> {
    pub business: &'a str,
    pub customer: Option<&'a str>,
}

/// When the model provider cannot answer.
#[derive(Template)]
#[template(path = "messages/agent_unavailable.txt")]
pub struct AgentUnavailable<'a> {
    pub business: &'a str,
}

/// When the agent used all its steps without an answer.
#[derive(Template)]
#[template(path = "messages/agent_gave_up.txt")]
pub struct AgentGaveUp<'a> {
    pub business: &'a str,
}

/// The agent's static instructions: the business and the rules.
#[derive(Template)]
#[template(path = "prompts/system.txt")]
pub struct SystemPrompt<'a> {
    pub business: &'a str,
    pub timezone: &'a str,
    /// One line each.
    pub services: Vec<(String,)>,
    pub professionals: Vec<(String,)>,
}

/// The per-turn context: time, customer, side effects already executed.
#[derive(Template)]
#[template(path = "prompts/context.txt")]
pub struct TurnContext<'a> {
    pub now: String,
    pub timezone: &'a str,
    pub customer: Option<&'a str>,
    pub effects: Vec<String>,
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
