//! The bot's words: pt-BR templates compiled into the binary (askama), one struct per message.

use askama::Template;

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

/// Every text of the guided (menu) agent, including button and list labels.
#[derive(Template)]
#[template(path = "messages/guided.txt")]
pub struct Guided<'a> {
    pub text: GuidedText<'a>,
}

pub enum GuidedText<'a> {
    Menu {
        business: &'a str,
        customer: Option<&'a str>,
    },
    MenuBook,
    MenuMine,
    ChooseService,
    ServicesButton,
    ChooseProfessional {
        service: &'a str,
    },
    ProfessionalsButton,
    AnyProfessional,
    ChooseDay,
    /// A day as a list row: `02/12 (qua)`; `weekday` counts from Monday = 0.
    Day {
        date: &'a str,
        weekday: u32,
    },
    DaysButton,
    NoDays,
    ChooseTime {
        day: &'a str,
    },
    TimesButton,
    /// The last row of a page of times when more remain.
    MoreTimes,
    /// The last row of a page of any other list when more remain.
    MoreOptions,
    Confirm {
        service: &'a str,
        professional: &'a str,
        when: &'a str,
    },
    ConfirmButton,
    OtherTime,
    Booked {
        service: &'a str,
        professional: &'a str,
        when: &'a str,
    },
    AlreadyBooked {
        when: &'a str,
    },
    SlotTaken,
    NoBookings,
    Bookings {
        lines: Vec<String>,
    },
    CancelButton,
    ConfirmCancel {
        when: &'a str,
    },
    CancelYes,
    CancelNo,
    Cancelled {
        when: &'a str,
    },
    AlreadyCancelled,
    Problem,
}

/// The pt-BR text of a guided message.
pub fn guided(text: GuidedText<'_>) -> anyhow::Result<String> {
    render(&Guided { text })
}

/// Renders a message template; a failure is a bug in a template, reported as such.
pub fn render(template: &impl Template) -> anyhow::Result<String> {
    Ok(template.render()?.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guided_menu_greets_by_name_when_known() {
        let named = guided(GuidedText::Menu { business: "Barbearia do Zé", customer: Some("Ana") }).unwrap();
        assert!(named.starts_with("Olá, Ana!") && named.contains("Barbearia do Zé"), "{named}");
        let anonymous = guided(GuidedText::Menu { business: "Barbearia do Zé", customer: None }).unwrap();
        assert!(anonymous.starts_with("Olá!"), "{anonymous}");
        assert_eq!(guided(GuidedText::Day { date: "02/12", weekday: 2 }).unwrap(), "02/12 (qua)");
        assert_eq!(guided(GuidedText::Day { date: "06/12", weekday: 6 }).unwrap(), "06/12 (dom)");
        // Labels fit WhatsApp's limits (buttons 20, list buttons 20 characters).
        for label in [
            GuidedText::MenuBook,
            GuidedText::MenuMine,
            GuidedText::ConfirmButton,
            GuidedText::OtherTime,
            GuidedText::CancelYes,
            GuidedText::CancelNo,
            GuidedText::ServicesButton,
            GuidedText::TimesButton,
            GuidedText::DaysButton,
            GuidedText::ProfessionalsButton,
            GuidedText::CancelButton,
        ] {
            assert!(guided(label).unwrap().chars().count() <= 20);
        }
        // List row titles: 24 characters.
        for label in [GuidedText::MoreTimes, GuidedText::MoreOptions, GuidedText::AnyProfessional] {
            assert!(guided(label).unwrap().chars().count() <= 24);
        }
    }
}
