//! The Portuguese words the conversation page shows for stored states. Pages keep the raw state
//! as the CSS class (the badge colors) and show these labels.
//!
//! Invariant: every state the store writes has a label here; an unknown one (a newer server's
//! row read by an older one) shows as a neutral word, never as the raw English value.

/// A job's state (`crate::store::JobState`).
pub fn job_state(state: &str) -> &'static str {
    match state {
        "available" => "na fila",
        "running" => "em andamento",
        "retryable" => "vai tentar de novo",
        "completed" => "concluído",
        "dead" => "falhou",
        _ => "desconhecido",
    }
}

/// What a job answers (`crate::store::JobKind`).
pub fn turn_kind(kind: &str) -> &'static str {
    match kind {
        "turn" => "mensagem",
        "click" => "toque em botão",
        _ => "outro",
    }
}

/// A pending action's kind (`crate::actions::ActionKind`).
pub fn action_kind(kind: &str) -> &'static str {
    match kind {
        "cancellation" => "cancelamento",
        "booking" => "agendamento",
        "move" => "remarcação",
        "charge" => "cobrança",
        "attendance" => "presença",
        "refund" => "devolução",
        _ => "ação",
    }
}

/// Whether the kind's word is feminine, so a status agrees with it ("remarcação recusada").
fn feminine(kind: &str) -> bool {
    matches!(kind, "move" | "charge" | "attendance" | "refund")
}

/// A pending action's status (`crate::actions::ActionStatus`), agreeing with "ação".
pub fn action_status(status: &str) -> &'static str {
    action_status_of(status, true)
}

/// A status agreeing with the action's kind, for sentences like "agendamento feito".
pub fn action_status_for(kind: &str, status: &str) -> &'static str {
    match (kind, status) {
        // Attendance is confirmed, not done.
        ("attendance", "executed") => "confirmada",
        _ => action_status_of(status, feminine(kind) || action_kind(kind) == "ação"),
    }
}

fn action_status_of(status: &str, feminine: bool) -> &'static str {
    match (status, feminine) {
        ("pending", _) => "aguardando",
        ("confirmed", true) => "confirmada",
        ("confirmed", false) => "confirmado",
        ("executed", true) => "feita",
        ("executed", false) => "feito",
        ("declined", true) => "recusada",
        ("declined", false) => "recusado",
        ("expired", _) => "expirou",
        ("superseded", true) => "substituída",
        ("superseded", false) => "substituído",
        ("failed", _) => "falhou",
        ("cancelled", true) => "cancelada",
        ("cancelled", false) => "cancelado",
        _ => "desconhecida",
    }
}

/// A charge's status (`pending → paid | expired | cancelled`, then the refund states).
pub fn charge_status(status: &str) -> &'static str {
    match status {
        "pending" => "aguardando pagamento",
        "paid" => "paga",
        "expired" => "expirou",
        "cancelled" => "cancelada",
        "refund_due" => "a devolver",
        "partially_refunded" => "devolvida em parte",
        "refunded" => "devolvida",
        _ => "desconhecida",
    }
}

/// How a charge reached its customer.
pub fn charge_delivery(delivery: &str) -> &'static str {
    match delivery {
        "text" => "por mensagem",
        "order" => "pedido Pix",
        "template" => "modelo",
        _ => "outro meio",
    }
}

/// An outbox row's status, in words (the trace's list of queued messages).
pub fn outbound_status(status: &str) -> &'static str {
    match status {
        "local" => "local",
        "pending" => "na fila",
        "sending" => "enviando",
        "unknown" => "envio incerto",
        "sent" => "enviada",
        "delivered" => "entregue",
        "read" => "lida",
        "failed" => "falhou",
        _ => "desconhecido",
    }
}

/// Local mode keeps replies in the outbox; the page says so instead of "not sent".
pub const LOCAL_TITLE: &str = "modo local: não foi enviada ao WhatsApp";

/// An outbox row's status as WhatsApp draws it under a bubble: the mark and its tooltip.
pub fn delivery_mark(status: &str) -> (&'static str, &'static str) {
    match status {
        "pending" => ("🕓", "na fila para envio"),
        "sending" => ("🕓", "enviando"),
        "sent" => ("✓", "enviada"),
        "delivered" => ("✓✓", "entregue"),
        "read" => ("✓✓ lida", "lida"),
        "failed" => ("falhou", "o WhatsApp não entregou esta mensagem"),
        "local" => ("local", LOCAL_TITLE),
        "unknown" => ("envio incerto", "não se sabe se o WhatsApp recebeu esta mensagem"),
        _ => ("?", "situação desconhecida"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_agree_with_their_kind() {
        assert_eq!(action_status_for("booking", "executed"), "feito");
        assert_eq!(action_status_for("move", "declined"), "recusada");
        assert_eq!(action_status("confirmed"), "confirmada");
        assert_eq!(action_status_for("charge", "pending"), "aguardando");
    }

    #[test]
    fn no_label_is_the_raw_english_state() {
        for s in ["available", "running", "retryable", "completed", "dead", "bogus"] {
            assert_ne!(job_state(s), s);
        }
        for s in ["pending", "confirmed", "executed", "declined", "expired", "superseded", "failed", "cancelled"] {
            assert_ne!(action_status(s), s);
        }
        assert_eq!(delivery_mark("local"), ("local", LOCAL_TITLE));
    }
}
