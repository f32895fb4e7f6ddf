//! What happens to a claimed turn: the handler chain the worker runs. Each kind of message
//! meets its policy first ([`kinds`]: reactions silent, voice notes heard). A click goes to the
//! click path (never the model); a turn from one of the tenant's staff goes to the merchant's agent,
//! any other to the customer's, behind the opt-out ("sair" is honoured even during a handoff)
//! and the handoff gate (a person has the conversation: the bot stays quiet).

mod dispatch;
mod handoff;
pub mod kinds;
mod opt_out;
mod payer_document;
mod voice;

pub use dispatch::{ByAudience, ByKind};
pub use handoff::HandoffGate;
pub use kinds::{MessageKinds, UnheardVoice};
pub use opt_out::{Command, OptOut, command};
pub use payer_document::PayerDocumentGate;
pub use voice::{Heard, Voice};

use std::sync::Arc;

use crate::actions::{ClickHandler, Proposer};
use crate::agent::tools::{ProposeBooking, ProposeMove, booking_tools, merchant_tools};
use crate::agent::{AgentSettings, AgentTurn, Audience, GuidedTurn, MerchantMenu};
use crate::config::Config;
use crate::jobs::{Replier, TurnHandler};
use crate::ledger::Executor;
use crate::llm::ModelClient;
use crate::metrics::Metrics;
use crate::store::Store;

/// The parts a turn handler is built from.
pub struct HandlerContext {
    pub store: Store,
    pub replier: Replier,
    pub config: Config,
    /// Proposes pending actions (the cancel and charge tools, the guided menu).
    pub proposer: Proposer,
    /// The click path, which `confirm_action` shares.
    pub clicks: Arc<ClickHandler>,
    /// The registry `/metrics` serves; tool and model timings go here.
    pub metrics: Metrics,
}

/// The customer's and the merchant's turn handlers: the model's agent when one is configured
/// (falling back to the guided menus), else the guided menus alone.
pub fn chain(ctx: &HandlerContext, model: Option<(&'static str, Arc<dyn ModelClient>)>) -> Arc<dyn TurnHandler> {
    let executor = Executor::new(ctx.store.clone(), ctx.config.ledger.lease).with_metrics(ctx.metrics.clone());
    let tools = booking_tools(&ctx.store, &ctx.proposer, &ctx.clicks);
    let mut guided_tools = tools.clone();
    guided_tools.push(Arc::new(ProposeBooking { proposer: ctx.proposer.clone() }));
    guided_tools.push(Arc::new(ProposeMove { proposer: ctx.proposer.clone() }));
    let guided: Arc<dyn TurnHandler> =
        Arc::new(GuidedTurn { executor: executor.clone(), tools: guided_tools, replier: ctx.replier.clone() });
    let staff_tools = merchant_tools(&ctx.store, &ctx.proposer, &ctx.clicks);
    let menu: Arc<dyn TurnHandler> = Arc::new(MerchantMenu {
        store: ctx.store.clone(),
        executor: executor.clone(),
        tools: staff_tools.clone(),
        replier: ctx.replier.clone(),
    });
    let (customer, merchant) = match model {
        Some((provider, model)) => {
            let agent = |tools, audience, fallback| -> Arc<dyn TurnHandler> {
                Arc::new(AgentTurn {
                    executor: executor.clone(),
                    tools,
                    store: ctx.store.clone(),
                    model: model.clone(),
                    provider,
                    replier: ctx.replier.clone(),
                    settings: AgentSettings {
                        max_steps: ctx.config.agent.max_steps,
                        max_tokens: ctx.config.agent.max_tokens,
                        history_turns: ctx.config.agent.history_turns,
                        history_budget_chars: ctx.config.agent.history_budget_chars,
                    },
                    fallback,
                    audience,
                    metrics: ctx.metrics.clone(),
                })
            };
            (agent(tools, Audience::Customer, guided), agent(staff_tools, Audience::Merchant, menu))
        }
        None => (guided, menu),
    };
    // Inside the handoff gate: while a person has the conversation, the bot does not answer.
    let customer = UnheardVoice::wrap(ctx.replier.clone(), customer);
    let merchant = UnheardVoice::wrap(ctx.replier.clone(), merchant);
    let customer = PayerDocumentGate::wrap(ctx.store.clone(), ctx.replier.clone(), customer);
    let customer = HandoffGate::wrap(customer, ctx);
    // Outermost: "sair" is honored even while a person has the conversation.
    let customer = OptOut::wrap(ctx.store.clone(), ctx.replier.clone(), customer);
    Arc::new(ByAudience { store: ctx.store.clone(), customer, merchant })
}
