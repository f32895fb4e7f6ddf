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
    /// The street address from the tenant file, when it has one.
    pub address: Option<&'a str>,
    /// One line each.
    pub services: Vec<(String,)>,
    pub professionals: Vec<(String,)>,
}

/// The agent's static instructions when it talks with the business's staff.
#[derive(Template)]
#[template(path = "prompts/merchant.txt")]
pub struct MerchantPrompt<'a> {
    pub business: &'a str,
    pub timezone: &'a str,
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
    AlreadyBooked {
        when: &'a str,
    },
    SlotTaken,
    NoBookings,
    /// The customer's bookings, one per line, then `ask` (one of the `WhichTo…`).
    Bookings {
        lines: Vec<String>,
        ask: &'a str,
    },
    WhichToChange,
    WhichToMove,
    WhichToCancel,
    ChooseBookingButton,
    CancelButton,
    /// A booking chosen from the list: what to do with it.
    BookingChosen {
        line: &'a str,
    },
    MoveButton,
    CancelBookingButton,
    BackToMenu,
    /// The days offered for moving a booking.
    ChooseNewDay,
    /// No other free time for the booking's professional.
    NoDaysToMove,
    Address {
        business: &'a str,
        address: &'a str,
    },
    NoAddress,
    Problem,
    /// The answer to "obrigado", "ok".
    YoureWelcome,
    /// Free text the menu cannot place (a first message often is: it greets too).
    NotUnderstood {
        business: &'a str,
        customer: Option<&'a str>,
    },
}

/// The pt-BR text of a guided message.
pub fn guided(text: GuidedText<'_>) -> anyhow::Result<String> {
    render(&Guided { text })
}

/// What the bot says about messages it cannot read: media, voice notes it could not hear.
#[derive(Template)]
#[template(path = "messages/kinds.txt")]
pub struct Kinds<'a> {
    pub text: KindsText<'a>,
}

pub enum KindsText<'a> {
    /// `kind` is the stored kind (`image`, `location`, `unsupported`, ...).
    MediaReceived { kind: &'a str },
    /// A voice note whose fetch or transcription failed.
    CouldNotHear,
    /// A voice note when no transcription endpoint is configured.
    NoVoice,
}

/// The pt-BR text about a message the bot cannot read.
pub fn kinds(text: KindsText<'_>) -> anyhow::Result<String> {
    render(&Kinds { text })
}

/// What to say about voice notes nobody could hear, given whether hearing any of them failed
/// (else no transcription endpoint is configured). See `InboundMessage::unheard_voice`.
pub fn unheard_voice(failed: bool) -> anyhow::Result<String> {
    kinds(if failed { KindsText::CouldNotHear } else { KindsText::NoVoice })
}

/// How the model is told about a message that is not text: `[o cliente enviou uma imagem: …]`.
#[derive(Template)]
#[template(path = "prompts/inbound_line.txt")]
pub struct InboundLine<'a> {
    /// The stored kind.
    pub kind: &'a str,
    /// A caption, a location's name, an edit's new text.
    pub label: Option<&'a str>,
    pub error_code: Option<i64>,
}

/// Every text about pending actions, charges and reminders, including button labels.
#[derive(Template)]
#[template(path = "messages/actions.txt")]
pub struct Actions<'a> {
    pub text: ActionText<'a>,
}

/// How a charge reached the customer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChargeVia {
    Text,
    Order,
    Template,
}

impl ChargeVia {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Order => "order",
            Self::Template => "template",
        }
    }

    pub fn parse(s: &str) -> Self {
        match s {
            "order" => Self::Order,
            "template" => Self::Template,
            _ => Self::Text,
        }
    }
}

pub enum ActionText<'a> {
    ConfirmButton,
    DeclineButton,
    /// A cancellation's buttons: what each does, not "Confirmar / Cancelar".
    CancelYes,
    CancelNo,
    /// The buttons under a booking's, a move's or a cancellation's confirmation.
    AfterMine,
    AfterBook,
    AttendYes,
    AttendNo,
    OfferCancellation {
        service: &'a str,
        when: &'a str,
    },
    OfferMove {
        service: &'a str,
        professional: &'a str,
        from: &'a str,
        to: &'a str,
    },
    OfferBooking {
        service: &'a str,
        professional: &'a str,
        when: &'a str,
    },
    OfferCharge {
        amount: &'a str,
        customer: &'a str,
        description: &'a str,
        /// The customer has not written in 24 hours: it will go as the approved template.
        as_template: bool,
    },
    OfferAttendance {
        business: &'a str,
        service: &'a str,
        when: &'a str,
    },
    Cancelled {
        when: &'a str,
    },
    Booked {
        service: &'a str,
        professional: &'a str,
        when: &'a str,
    },
    Moved {
        when: &'a str,
    },
    ChargeSent {
        number: i64,
        amount: &'a str,
        customer: &'a str,
        via: ChargeVia,
    },
    AttendanceConfirmed {
        when: &'a str,
    },
    Declined,
    AlreadyConfirmed,
    AlreadyDeclined,
    Expired,
    Superseded,
    NotAllowed,
    Unknown,
    Failed {
        reason: &'a str,
    },
    NoLongerAvailable,
    CustomerBusy,
    AlreadyStarted,
    NotActive,
    ProviderRefused {
        reason: &'a str,
    },
    FailedGeneric,
    ExpiredNotice {
        what: &'a str,
    },
    ChargeToCustomer {
        business: &'a str,
        amount: &'a str,
        description: &'a str,
    },
    QrCaption {
        amount: &'a str,
    },
    PaidCustomer {
        amount: &'a str,
        description: &'a str,
    },
    PaidMerchant {
        amount: &'a str,
        customer: &'a str,
        description: &'a str,
    },
    PixNotConfigured,
    LatePayment {
        number: i64,
        amount: &'a str,
        customer: &'a str,
    },
    OutsideWindow,
    PayerDocumentRequired,
}

/// The pt-BR text of an action, charge or reminder message.
pub fn action_text(text: ActionText<'_>) -> anyhow::Result<String> {
    render(&Actions { text })
}

/// Every text about refunds (devoluções).
#[derive(Template)]
#[template(path = "messages/refunds.txt")]
pub struct Refunds<'a> {
    pub text: RefundText<'a>,
}

pub enum RefundText<'a> {
    /// Offered to the staff: a refund asked for (menu, agent, console).
    Offer {
        number: i64,
        amount: &'a str,
        customer: &'a str,
        description: &'a str,
    },
    /// Offered to the staff: a payment that came for a charge no longer wanted.
    OfferDue {
        number: i64,
        amount: &'a str,
        customer: &'a str,
        description: &'a str,
    },
    Done {
        number: i64,
        amount: &'a str,
        customer: &'a str,
    },
    Processing {
        number: i64,
        amount: &'a str,
    },
    ToCustomer {
        business: &'a str,
        amount: &'a str,
        description: &'a str,
    },
    Failed {
        number: i64,
        amount: &'a str,
        reason: &'a str,
    },
    /// A refusal's reason (lower case, follows "Não consegui concluir:").
    TooMuch {
        refundable: &'a str,
    },
    AllRefunded,
    NotPaid,
    GatewayChanged {
        gateway: &'a str,
    },
    PixNotConfigured,
    ConfirmedByAnother,
}

/// The pt-BR text of a refund message.
pub fn refund_text(text: RefundText<'_>) -> anyhow::Result<String> {
    render(&Refunds { text })
}

/// Every text of the staff's guided menu.
#[derive(Template)]
#[template(path = "messages/merchant.txt")]
pub struct Merchant<'a> {
    pub text: MerchantText<'a>,
}

/// Why a typed amount was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmountProblem {
    Zero,
    /// Over `Cents::MAX`.
    TooLarge,
    Unreadable,
}

pub enum MerchantText<'a> {
    Menu {
        business: &'a str,
    },
    /// The label of the button that opens the menu's list.
    MenuButton,
    NewChargeButton,
    RefundButton,
    WithdrawButton,
    TodayButton,
    AgendaButton,
    /// The label of the button that opens a list of charges.
    ChargesButton,
    ChooseRefund,
    NothingToRefund,
    AskRefundAmount {
        number: i64,
        amount: &'a str,
    },
    RefundAllButton {
        amount: &'a str,
    },
    RefundRefused {
        reason: &'a str,
    },
    ChooseCancel,
    NothingToCancel,
    ChargeCancelled {
        number: i64,
    },
    NotCancelled {
        number: i64,
    },
    AskAmount,
    AskPhone,
    /// "Nova cobrança" with customers who wrote lately to pick from.
    AskPhoneOrPick,
    RecentButton,
    /// A recent customer's row: their number and when they last wrote.
    RecentCustomer {
        number: &'a str,
        when: &'a str,
    },
    AskDocument,
    AskDescription,
    /// An amount typed into a form that cannot be charged: why.
    InvalidAmount {
        problem: AmountProblem,
    },
    InvalidPhone,
    InvalidDocument,
    InvalidDescription,
    ChargesToday {
        lines: Vec<String>,
        total: String,
    },
    ChargeLine {
        amount: &'a str,
        customer: &'a str,
        description: &'a str,
        status: &'a str,
    },
    NoCharges,
    Agenda {
        lines: Vec<String>,
    },
    NoAgenda,
    ChargeRefused {
        reason: &'a str,
    },
}

/// The pt-BR text of a staff menu message.
pub fn merchant_text(text: MerchantText<'_>) -> anyhow::Result<String> {
    render(&Merchant { text })
}

/// Every text about booking deposits.
#[derive(Template)]
#[template(path = "messages/deposits.txt")]
pub struct Deposits<'a> {
    pub text: DepositText<'a>,
}

pub enum DepositText<'a> {
    /// The charge's description (also shown to the merchant).
    Description {
        service: &'a str,
        when: &'a str,
    },
    ChargeToCustomer {
        business: &'a str,
        amount: &'a str,
        description: &'a str,
        until: &'a str,
    },
    /// The answer to a confirmed booking that waits for its deposit.
    Held {
        service: &'a str,
        professional: &'a str,
        when: &'a str,
        amount: &'a str,
        until: &'a str,
    },
    PaidCustomer {
        amount: &'a str,
        service: &'a str,
        when: &'a str,
    },
    PaidMerchant {
        amount: &'a str,
        customer: &'a str,
        service: &'a str,
        when: &'a str,
    },
    Expired {
        service: &'a str,
        when: &'a str,
    },
    RefundMerchant {
        number: i64,
        amount: &'a str,
        customer: &'a str,
        service: &'a str,
        when: &'a str,
    },
    RefundCustomer {
        amount: &'a str,
        service: &'a str,
        when: &'a str,
    },
    /// The Pix provider needs the customer's CPF or CNPJ before the deposit's charge.
    AskDocument {
        amount: &'a str,
    },
    /// The customer's CPF or CNPJ arrived: the deposit's charge follows.
    DocumentReceived,
}

/// The pt-BR text of a deposit message.
pub fn deposit_text(text: DepositText<'_>) -> anyhow::Result<String> {
    render(&Deposits { text })
}

/// A moment as customers read it: `dd/mm HH:MM` in the tenant's zone.
pub fn when_at(tz: chrono_tz::Tz, at: chrono::DateTime<chrono::Utc>) -> String {
    at.with_timezone(&tz).format("%d/%m %H:%M").to_string()
}

/// What the console tells an admin's staff number on WhatsApp.
#[derive(Template)]
#[template(path = "messages/console.txt")]
pub struct Console<'a> {
    pub text: ConsoleText<'a>,
}

pub enum ConsoleText<'a> {
    /// Wrong codes of the second factor typed behind the admin's right password.
    CodesGuessed { email: &'a str, count: i64, last: String },
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
