use serde_json::json;

use super::*;

fn button(id: &str, title: &str) -> ReplyButton {
    ReplyButton { id: id.into(), title: title.into() }
}

#[test]
fn button_limits() {
    assert!(OutboundMessage::buttons("ok?", None, vec![button("a", "Sim"), button("b", "Não")]).is_ok());
    let four = (0..4).map(|i| button(&i.to_string(), &format!("B{i}"))).collect();
    assert!(matches!(OutboundMessage::buttons("x", None, four), Err(MessageError::TooMany { .. })));
    // 20 characters with accents is fine; 21 is not.
    assert!(OutboundMessage::buttons("x", None, vec![button("a", "Confirmação agendada")]).is_ok());
    assert!(matches!(
        OutboundMessage::buttons("x", None, vec![button("a", "Confirmação agendadas")]),
        Err(MessageError::TooLong { len: 21, .. })
    ));
    assert!(matches!(
        OutboundMessage::buttons("x", None, vec![button(&"i".repeat(257), "a")]),
        Err(MessageError::TooLong { max: 256, .. })
    ));
    assert!(matches!(
        OutboundMessage::buttons("x", None, vec![button("a", "Sim"), button("b", "Sim")]),
        Err(MessageError::Duplicate { .. })
    ));
}

#[test]
fn list_limits() {
    let rows = |n: usize| {
        (0..n).map(|i| ListRow { id: format!("r{i}"), title: format!("{i}:00"), description: None }).collect()
    };
    let ok = OutboundMessage::list("Escolha", None, "Ver horários", vec![ListSection { title: None, rows: rows(10) }]);
    assert!(ok.is_ok());
    let too_many = OutboundMessage::list(
        "Escolha",
        None,
        "Ver",
        vec![ListSection { title: None, rows: rows(6) }, ListSection { title: None, rows: rows(5) }],
    );
    assert!(matches!(too_many, Err(MessageError::TooMany { what: "rows", .. })));
    assert!(OutboundMessage::text("").is_err());
    assert!(OutboundMessage::text("a".repeat(4097)).is_err());
}

#[test]
fn clip_counts_characters_and_marks_the_cut() {
    assert_eq!(clip("Confirmação", 11), "Confirmação");
    assert_eq!(clip("Confirmação", 10), "Confirmaç…");
    assert_eq!(clip("ããããã", 3).chars().count(), 3);
    assert_eq!(clip("👍👍👍", 2), "👍…");
    assert_eq!(clip("abc", 0), "");
    let long = "Corte ".repeat(20);
    assert!(OutboundMessage::buttons("x", None, vec![button("a", &clip(&long, BUTTON_TITLE_MAX))]).is_ok());
}

#[test]
fn graph_json_shape() {
    let to = Recipient { wa_id: Some(PhoneE164::parse("5511999990000").unwrap()), user_id: None };
    let m = OutboundMessage::buttons("Confirma?", None, vec![button("act:1:yes", "Sim")]).unwrap();
    let v = m.to_graph_json(&to, "turn:1:0").unwrap();
    assert_eq!(v["to"], "+5511999990000");
    assert_eq!(v["type"], "interactive");
    assert_eq!(v["interactive"]["action"]["buttons"][0]["reply"]["id"], "act:1:yes");
    assert_eq!(v["biz_opaque_callback_data"], "turn:1:0");
    let bsuid = Recipient { wa_id: None, user_id: Some("BR.1502576394655843".into()) };
    assert_eq!(
        OutboundMessage::text("oi").unwrap().to_graph_json(&bsuid, "k").unwrap()["recipient"],
        "BR.1502576394655843"
    );
}

fn to() -> Recipient {
    Recipient { wa_id: Some(PhoneE164::parse("5511999990000").unwrap()), user_id: None }
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| (*v).to_owned()).collect()
}

fn reminder() -> OutboundMessage {
    OutboundMessage::template(
        "lembrete_horario",
        "pt_BR",
        strings(&["Ana", "amanhã às 14:00"]),
        strings(&["act:7:confirm", "act:7:cancel"]),
    )
    .unwrap()
}

#[test]
fn template_limits() {
    let t = |name: &str, language: &str, params: &[&str], replies: Vec<String>| {
        OutboundMessage::template(name, language, strings(params), replies)
    };
    assert!(t("hello_world", "en_US", &[], vec![]).is_ok());
    assert!(t("lembrete_2", "pt_BR", &["Ana"], strings(&["a"])).is_ok());
    assert!(t("fil_only", "fil", &[], vec![]).is_ok());
    for bad_name in ["Lembrete", "lembrete-horario", "lembrete horario", ""] {
        assert!(t(bad_name, "pt_BR", &[], vec![]).is_err(), "{bad_name:?}");
    }
    assert!(matches!(t(&"a".repeat(513), "pt_BR", &[], vec![]), Err(MessageError::TooLong { max: 512, .. })));
    for bad_language in ["", "pt-BR", "PT_BR", "pt_br", "portuguese"] {
        assert!(matches!(t("x", bad_language, &[], vec![]), Err(MessageError::Malformed { .. })), "{bad_language:?}");
    }
    // Parameters: not empty, one line, at most four spaces in a row, 1024 characters.
    assert!(matches!(t("x", "pt_BR", &[" "], vec![]), Err(MessageError::Empty { .. })));
    assert!(matches!(t("x", "pt_BR", &["a\nb"], vec![]), Err(MessageError::Malformed { .. })));
    assert!(matches!(t("x", "pt_BR", &["a\tb"], vec![]), Err(MessageError::Malformed { .. })));
    assert!(t("x", "pt_BR", &["a    b"], vec![]).is_ok());
    assert!(matches!(t("x", "pt_BR", &["a     b"], vec![]), Err(MessageError::Malformed { .. })));
    assert!(t("x", "pt_BR", &[&"ç".repeat(1024)], vec![]).is_ok());
    assert!(matches!(t("x", "pt_BR", &[&"ç".repeat(1025)], vec![]), Err(MessageError::TooLong { .. })));
    // Quick replies: at most ten, each payload 1..=256 characters, all different.
    let replies = |n: usize| (0..n).map(|i| format!("act:{i}")).collect::<Vec<_>>();
    assert!(t("x", "pt_BR", &[], replies(10)).is_ok());
    assert!(matches!(t("x", "pt_BR", &[], replies(11)), Err(MessageError::TooMany { max: 10, .. })));
    assert!(t("x", "pt_BR", &[], vec!["p".repeat(256)]).is_ok());
    assert!(matches!(t("x", "pt_BR", &[], vec!["p".repeat(257)]), Err(MessageError::TooLong { .. })));
    assert!(matches!(t("x", "pt_BR", &[], strings(&[""])), Err(MessageError::Empty { .. })));
    assert!(matches!(t("x", "pt_BR", &[], strings(&["a", "a"])), Err(MessageError::Duplicate { .. })));
}

#[test]
fn template_graph_json_matches_the_documented_shape() {
    let v = reminder().to_graph_json(&to(), "reminder:7").unwrap();
    // whatsapp-cloud-api.md §6 (send shape) and §3.4 (quick-reply component).
    assert_eq!(
        v,
        json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": "+5511999990000",
            "biz_opaque_callback_data": "reminder:7",
            "type": "template",
            "template": {
                "name": "lembrete_horario",
                "language": { "code": "pt_BR" },
                "components": [
                    { "type": "body", "parameters": [
                        { "type": "text", "text": "Ana" },
                        { "type": "text", "text": "amanhã às 14:00" },
                    ]},
                    { "type": "button", "sub_type": "quick_reply", "index": "0",
                      "parameters": [{ "type": "payload", "payload": "act:7:confirm" }] },
                    { "type": "button", "sub_type": "quick_reply", "index": "1",
                      "parameters": [{ "type": "payload", "payload": "act:7:cancel" }] },
                ],
            },
        })
    );
    // No parameters, no buttons: no components at all (like Meta's hello_world).
    let bare = OutboundMessage::template("hello_world", "en_US", vec![], vec![]).unwrap();
    let v = bare.to_graph_json(&to(), "k").unwrap();
    assert_eq!(v["template"], json!({ "name": "hello_world", "language": { "code": "en_US" } }));
    // Only buttons: no body component.
    let buttons = OutboundMessage::template("confirmar", "pt_BR", vec![], strings(&["sim"])).unwrap();
    let v = buttons.to_graph_json(&to(), "k").unwrap();
    assert_eq!(v["template"]["components"].as_array().unwrap().len(), 1);
    assert_eq!(v["template"]["components"][0]["sub_type"], "quick_reply");
    assert_eq!(reminder().body(), "lembrete_horario");
    assert_eq!(reminder().preview(), "[template lembrete_horario] Ana · amanhã às 14:00");
}

#[test]
fn qr_image_limits_and_upload_shape() {
    assert!(OutboundMessage::qr_image("000201...6304ABCD", None).is_ok());
    assert!(OutboundMessage::qr_image("000201", Some("Pague com Pix".into())).is_ok());
    assert!(matches!(OutboundMessage::qr_image("", None), Err(MessageError::Empty { .. })));
    assert!(OutboundMessage::qr_image("x", Some("é".repeat(1024))).is_ok());
    assert!(matches!(
        OutboundMessage::qr_image("x", Some("é".repeat(1025))),
        Err(MessageError::TooLong { max: 1024, .. })
    ));
    // A QR code has no body of its own: it is uploaded first.
    let qr = OutboundMessage::qr_image("000201", Some("Pague com Pix".into())).unwrap();
    assert_eq!(qr.to_graph_json(&to(), "k"), Err(MessageError::NeedsUpload { kind: "qr_image" }));
    assert_eq!(qr.body(), "Pague com Pix");
    assert_eq!(OutboundMessage::qr_image("000201", None).unwrap().body(), "[QR Code Pix]");

    // Image messages page: `type: image`, `image: { id, caption }`.
    let image = UploadedImage { media_id: "1479537139650973".into(), caption: Some("Pague com Pix".into()) };
    assert!(image.validate().is_ok());
    let v = image.to_graph_json(&to(), "charge:9:qr");
    assert_eq!(
        v,
        json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": "+5511999990000",
            "biz_opaque_callback_data": "charge:9:qr",
            "type": "image",
            "image": { "id": "1479537139650973", "caption": "Pague com Pix" },
        })
    );
    let bare = UploadedImage { media_id: "1".into(), caption: None };
    assert_eq!(bare.to_graph_json(&to(), "k")["image"], json!({ "id": "1" }));
    assert!(UploadedImage { media_id: String::new(), caption: None }.validate().is_err());
}

fn order() -> OutboundMessage {
    OutboundMessage::OrderDetails {
        reference_id: "cob7x2k9q4m1n8p3r5t6v0w2y4".into(),
        body: "Sua cobrança de Corte masculino".into(),
        footer: Some("Barbearia do Zé".into()),
        amount: Cents(5000),
        description: "Corte masculino".into(),
        copia_e_cola: "00020101021226820014br.gov.bcb.pix2560pix.example.com/qr/v2/cobv/9d36b84f5204000053039865802BR5913BARBEARIA ZE6009SAO PAULO62070503***63041D3D".into(),
        merchant_name: "Barbearia do Zé".into(),
        pix_key: "12345678000199".into(),
        key_type: "CNPJ".into(),
        fallback: "Cobrança de R$ 50,00 — Corte masculino. Pix copia e cola: 000201…".into(),
    }
}

fn with_order(change: impl FnOnce(&mut OutboundMessage)) -> Result<(), MessageError> {
    let mut m = order();
    change(&mut m);
    m.validate()
}

#[test]
fn order_details_limits() {
    assert!(order().validate().is_ok());
    macro_rules! set {
        ($field:ident = $value:expr) => {
            with_order(|m| {
                if let OutboundMessage::OrderDetails { $field, .. } = m {
                    *$field = $value;
                }
            })
        };
    }
    assert!(set!(reference_id = "a".repeat(35)).is_ok());
    assert!(set!(reference_id = "charge-12.a_b".into()).is_ok());
    assert!(matches!(set!(reference_id = "a".repeat(36)), Err(MessageError::TooLong { max: 35, .. })));
    assert!(matches!(set!(reference_id = "charge:12".into()), Err(MessageError::Malformed { .. })));
    assert!(matches!(set!(reference_id = "cobrança".into()), Err(MessageError::Malformed { .. })));
    assert!(matches!(set!(amount = Cents(0)), Err(MessageError::Malformed { what: "amount", .. })));
    assert!(matches!(set!(amount = Cents(-1)), Err(MessageError::Malformed { .. })));
    assert!(set!(amount = Cents(1)).is_ok());
    assert!(matches!(set!(body = "b".repeat(1025)), Err(MessageError::TooLong { max: 1024, .. })));
    assert!(matches!(set!(footer = Some("f".repeat(61))), Err(MessageError::TooLong { max: 60, .. })));
    assert!(set!(footer = None).is_ok());
    for kind in ["CPF", "CNPJ", "EMAIL", "PHONE", "EVP"] {
        assert!(set!(key_type = kind.into()).is_ok(), "{kind}");
    }
    for kind in ["cpf", "RANDOM", ""] {
        assert!(set!(key_type = kind.into()).is_err(), "{kind:?}");
    }
    assert!(matches!(set!(copia_e_cola = String::new()), Err(MessageError::Empty { .. })));
    assert!(matches!(set!(pix_key = " ".into()), Err(MessageError::Empty { .. })));
    assert!(matches!(set!(merchant_name = String::new()), Err(MessageError::Empty { .. })));
    assert!(matches!(set!(description = String::new()), Err(MessageError::Empty { .. })));
    assert!(matches!(set!(fallback = String::new()), Err(MessageError::Empty { .. })));
    assert!(matches!(set!(fallback = "f".repeat(4097)), Err(MessageError::TooLong { max: 4096, .. })));
}

#[test]
fn order_details_graph_json_matches_the_documented_shape() {
    let v = order().to_graph_json(&to(), "charge:9:order").unwrap();
    assert_eq!(v["type"], "interactive");
    assert_eq!(v["biz_opaque_callback_data"], "charge:9:order");
    // whatsapp-pix-orders.md, "Order details (shape)"; R$ 50,00 is { value: 5000, offset: 100 }.
    let money = json!({ "value": 5000, "offset": 100 });
    assert_eq!(
        v["interactive"],
        json!({
            "type": "order_details",
            "body": { "text": "Sua cobrança de Corte masculino" },
            "footer": { "text": "Barbearia do Zé" },
            "action": {
                "name": "review_and_pay",
                "parameters": {
                    "reference_id": "cob7x2k9q4m1n8p3r5t6v0w2y4",
                    "type": "digital-goods",
                    "payment_type": "br",
                    "currency": "BRL",
                    "total_amount": money,
                    "payment_settings": [{
                        "type": "pix_dynamic_code",
                        "pix_dynamic_code": {
                            "code": "00020101021226820014br.gov.bcb.pix2560pix.example.com/qr/v2/cobv/9d36b84f5204000053039865802BR5913BARBEARIA ZE6009SAO PAULO62070503***63041D3D",
                            "merchant_name": "Barbearia do Zé",
                            "key": "12345678000199",
                            "key_type": "CNPJ",
                        },
                    }],
                    "order": {
                        "status": "pending",
                        "items": [{
                            "retailer_id": "cob7x2k9q4m1n8p3r5t6v0w2y4",
                            "name": "Corte masculino",
                            "amount": money,
                            "quantity": 1,
                        }],
                        "subtotal": money,
                    },
                },
            },
        })
    );
    // The fallback is ours, never Meta's.
    assert!(!v.to_string().contains("Pix copia e cola: "));
    let mut no_footer = order();
    if let OutboundMessage::OrderDetails { footer, .. } = &mut no_footer {
        *footer = None;
    }
    assert!(no_footer.to_graph_json(&to(), "k").unwrap()["interactive"].get("footer").is_none());
    assert_eq!(order().body(), "Sua cobrança de Corte masculino");
}

#[test]
fn order_status_limits_and_shape() {
    let status = |s: &str| OutboundMessage::OrderStatus {
        reference_id: "cob7x2k9q4m1n8p3r5t6v0w2y4".into(),
        status: s.into(),
        body: "Pagamento recebido, obrigado!".into(),
    };
    for s in ["pending", "processing", "partially_shipped", "shipped", "completed", "canceled"] {
        assert!(status(s).validate().is_ok(), "{s}");
    }
    for s in ["paid", "cancelled", "COMPLETED", ""] {
        assert!(status(s).validate().is_err(), "{s:?}");
    }
    let v = status("completed").to_graph_json(&to(), "charge:9:paid").unwrap();
    assert_eq!(v["type"], "interactive");
    // whatsapp-pix-orders.md, "Order status (shape)".
    assert_eq!(
        v["interactive"],
        json!({
            "type": "order_status",
            "body": { "text": "Pagamento recebido, obrigado!" },
            "action": {
                "name": "review_order",
                "parameters": {
                    "reference_id": "cob7x2k9q4m1n8p3r5t6v0w2y4",
                    "order": { "status": "completed" },
                },
            },
        })
    );
    let mut bad = status("completed");
    if let OutboundMessage::OrderStatus { reference_id, .. } = &mut bad {
        *reference_id = "charge:9".into();
    }
    assert!(matches!(bad.validate(), Err(MessageError::Malformed { .. })));
}

#[test]
fn new_kinds_round_trip_through_the_stored_json() {
    for m in [
        reminder(),
        OutboundMessage::qr_image("000201", Some("Pix".into())).unwrap(),
        order(),
        OutboundMessage::OrderStatus { reference_id: "r1".into(), status: "completed".into(), body: "Pago".into() },
    ] {
        let stored = serde_json::to_value(&m).unwrap();
        assert_eq!(serde_json::from_value::<OutboundMessage>(stored.clone()).unwrap(), m, "{stored}");
    }
    let stored = serde_json::to_value(reminder()).unwrap();
    assert_eq!(stored["type"], "template");
    assert_eq!(serde_json::to_value(order()).unwrap()["amount"], 5000);
    assert_eq!(serde_json::to_value(OutboundMessage::qr_image("0", None).unwrap()).unwrap()["type"], "qr_image");
}
