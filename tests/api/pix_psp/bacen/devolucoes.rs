//! The fake PSP's devoluções (API Pix `PUT` / `GET /pix/{e2eid}/devolucao/{id}`), kept on the
//! received Pix inside its charge (`pix[].devolucoes`), where `GET /cob/{txid}` shows them.
//!
//! Refused as the spec says (`PixDevolucaoInvalida`, `400`): an id outside `[a-zA-Z0-9]{1,35}`,
//! a `valor` outside `\d{1,10}\.\d{2}` or zero, an id already used for this Pix (any second
//! `PUT` with it, the same request or not), devoluções adding up to more than the Pix. A Pix it
//! does not know is `404`. The `PUT` needs scope `pix.write`, the `GET` `pix.read` (`403
//! AcessoNegado` otherwise). New devoluções are `EM_PROCESSAMENTO` until a test settles them
//! (or `DEVOLVIDO` at once, when asked).

use std::collections::VecDeque;

use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use balcao::domain::Cents;
use chrono::Utc;
use serde_json::{Value, json};

use super::{Act, Conn, FakePsp, Psp, Shared, answer, problem, unauthorized};

#[derive(Default)]
pub(super) struct Devolucoes {
    /// Scripted answers to the next `PUT`s and `GET`s, before any normal handling.
    pub(super) on_put: VecDeque<Act>,
    pub(super) on_get: VecDeque<Act>,
    /// New devoluções are `DEVOLVIDO` at once.
    pub(super) done_at_once: bool,
    made: usize,
    /// The `PUT`s received: `(e2eid, id, body)`.
    pub(super) puts: Vec<(String, String, Value)>,
}

impl FakePsp {
    /// Charge `txid` received a Pix `e2eid` of its whole amount: it is `CONCLUIDA`.
    pub(super) fn pay(&self, txid: &str, e2eid: &str) {
        self.set(txid, |c| {
            c["status"] = json!("CONCLUIDA");
            c["pix"] = json!([{ "endToEndId": e2eid, "txid": txid, "valor": c["valor"]["original"],
                                 "horario": Utc::now().to_rfc3339() }]);
        });
    }

    /// The devoluções of Pix `e2eid`.
    pub(super) fn devolucoes_of(&self, e2eid: &str) -> Vec<Value> {
        let mut psp = self.psp();
        let pix = find_pix(&mut psp, e2eid).expect("a received Pix");
        pix["devolucoes"].as_array().cloned().unwrap_or_default()
    }

    /// Devolução `id` reaches `status` (`DEVOLVIDO`, or `NAO_REALIZADO` with `motivo`).
    pub(super) fn settle_devolucao(&self, id: &str, status: &str, motivo: Option<&str>) {
        let mut psp = self.psp();
        let devolucao = psp
            .charges
            .values_mut()
            .flat_map(|c| c["pix"].as_array_mut().into_iter().flatten())
            .flat_map(|p| p["devolucoes"].as_array_mut().into_iter().flatten())
            .find(|d| d["id"] == id)
            .expect("a devolução made");
        devolucao["status"] = json!(status);
        devolucao["horario"]["liquidacao"] = json!(Utc::now().to_rfc3339());
        if let Some(motivo) = motivo {
            devolucao["motivo"] = json!(motivo);
        }
    }
}

fn find_pix<'a>(psp: &'a mut Psp, e2eid: &str) -> Option<&'a mut Value> {
    psp.charges
        .values_mut()
        .flat_map(|c| c["pix"].as_array_mut().into_iter().flatten())
        .find(|p| p["endToEndId"] == e2eid)
}

/// The refusal of a request whose bearer token's scopes do not include `scope`, if so.
fn unscoped(psp: &Psp, headers: &HeaderMap, scope: &str) -> Option<Response> {
    let bearer =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    match bearer.and_then(|t| psp.tokens.get(t)) {
        None => Some(unauthorized()),
        Some(scopes) if !scopes.split_whitespace().any(|s| s == scope) => {
            let detail = format!("Token sem o escopo {scope}");
            Some(answer(403, "application/problem+json", &problem(403, "AcessoNegado", "Acesso negado", &detail)))
        }
        Some(_) => None,
    }
}

fn invalid(razao: &str, propriedade: Option<&str>) -> Box<Response> {
    let detail = "A presente requisição de devolução não respeita o _schema_ ou não faz sentido semanticamente.";
    let mut body = problem(400, "PixDevolucaoInvalida", "Devolução inválida.", detail);
    body["violacoes"] = json!([{ "razao": razao, "propriedade": propriedade }]);
    Box::new(answer(400, "application/problem+json", &body))
}

fn not_found(kind: &str, detail: &str) -> Response {
    answer(404, "application/problem+json", &problem(404, kind, "Não encontrado", detail))
}

pub(super) async fn put(
    State(state): State<Shared>,
    Extension(conn): Extension<Conn>,
    Path((e2eid, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let act = state.lock().expect("state").devolucoes.on_put.pop_front();
    match act {
        Some(Act::Answer(status, content_type, body)) => return answer(status, content_type, &body),
        Some(Act::Reset) => {
            conn.reset.notify_one();
            return std::future::pending().await;
        }
        Some(Act::HangAfterCreate) => {
            let _ = devolver(&mut state.lock().expect("state"), &e2eid, &id, &body);
            return std::future::pending().await;
        }
        None => {}
    }
    let mut psp = state.lock().expect("state");
    if let Some(refused) = unscoped(&psp, &headers, "pix.write") {
        return refused;
    }
    match devolver(&mut psp, &e2eid, &id, &body) {
        Ok(devolucao) => answer(201, "application/json", &devolucao),
        Err(refused) => *refused,
    }
}

/// Makes devolução `id` of Pix `e2eid` from a `DevolucaoSolicitada`, or says why not.
fn devolver(psp: &mut Psp, e2eid: &str, id: &str, body: &[u8]) -> Result<Value, Box<Response>> {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    psp.devolucoes.puts.push((e2eid.to_owned(), id.to_owned(), request.clone()));
    if id.is_empty() || id.len() > 35 || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(invalid("O id da devolução não respeita o _schema_.", Some("id")));
    }
    let schema = "O campo devolucao.valor não respeita o _schema_.";
    let valor = request["valor"].as_str().filter(|v| follows_valor_schema(v));
    let Some((valor, amount)) = valor.and_then(|v| Some((v, Cents::parse_brl(v).ok()?))) else {
        return Err(invalid(schema, Some("devolucao.valor")));
    };
    if amount.0 <= 0 {
        return Err(invalid(schema, Some("devolucao.valor")));
    }
    let made = psp.devolucoes.made + 1;
    let status = if psp.devolucoes.done_at_once { "DEVOLVIDO" } else { "EM_PROCESSAMENTO" };
    let pix = find_pix(psp, e2eid).ok_or_else(|| Box::new(not_found("NaoEncontrado", "Pix não encontrado")))?;
    let devolucoes = pix["devolucoes"].as_array().cloned().unwrap_or_default();
    if devolucoes.iter().any(|d| d["id"] == id) {
        return Err(invalid(
            &format!(
                "A presente requisição de devolução apresenta um id {id} já utilizado por outra requisição de devolução para o e2eid {e2eid} em questão."
            ),
            None,
        ));
    }
    let committed: i64 = devolucoes
        .iter()
        .filter(|d| d["status"] != "NAO_REALIZADO")
        .filter_map(|d| Cents::parse_brl(d["valor"].as_str()?).ok())
        .map(|c| c.0)
        .sum();
    let received = pix["valor"].as_str().and_then(|v| Cents::parse_brl(v).ok()).unwrap_or(Cents(0));
    if committed + amount.0 > received.0 {
        return Err(invalid(
            "A presente requisição de devolução, em conjunto com as demais prévias devoluções, excederia o valor do pix originário.",
            None,
        ));
    }
    let devolucao = json!({
        "id": id, "rtrId": format!("D{made:0>31}"), "valor": valor,
        "horario": { "solicitacao": Utc::now().to_rfc3339() }, "status": status,
    });
    match pix["devolucoes"].as_array_mut() {
        Some(list) => list.push(devolucao.clone()),
        None => pix["devolucoes"] = json!([devolucao.clone()]),
    }
    psp.devolucoes.made = made;
    Ok(devolucao)
}

/// `\d{1,10}\.\d{2}`.
fn follows_valor_schema(valor: &str) -> bool {
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    valor.split_once('.').is_some_and(|(whole, cents)| {
        (1..=10).contains(&whole.len()) && digits(whole) && cents.len() == 2 && digits(cents)
    })
}

pub(super) async fn get(
    State(state): State<Shared>,
    Path((e2eid, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let mut psp = state.lock().expect("state");
    if let Some(Act::Answer(status, content_type, body)) = psp.devolucoes.on_get.pop_front() {
        return answer(status, content_type, &body);
    }
    if let Some(refused) = unscoped(&psp, &headers, "pix.read") {
        return refused;
    }
    let Some(pix) = find_pix(&mut psp, &e2eid) else { return not_found("NaoEncontrado", "Pix não encontrado") };
    match pix["devolucoes"].as_array().into_iter().flatten().find(|d| d["id"] == id.as_str()) {
        Some(devolucao) => answer(200, "application/json", devolucao),
        None => not_found("PixDevolucaoNaoEncontrada", "Devolução não encontrada para o e2eid informado"),
    }
}
