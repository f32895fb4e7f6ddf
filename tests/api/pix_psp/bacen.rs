//! The Bacen gateway against a loopback fake PSP over real mutual TLS: a test CA signs the
//! fake's server certificate and our client certificate, and the fake refuses any client
//! whose certificate that CA did not sign. The fake speaks the API Pix as Efí does (JSON
//! token request, `409 txid_duplicado` on a second `PUT`), counts token issues and charge
//! creations, and misbehaves on demand: error answers, a hang after creating, a reset. Its
//! devoluções (`/pix/{e2eid}/devolucao/{id}`) are in `bacen/devolucoes.rs`, their cases in
//! `bacen/refunds.rs`.

mod devolucoes;
mod refunds;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use balcao::domain::Cents;
use balcao::pix::bacen::BacenGateway;
use balcao::pix::{
    CancelOutcome, ChargeRef, ChargeRequest, GatewayError, GatewayKind, MapSecrets, Notification, NotificationError,
    NotifiedCharge, PaymentState, PixGateway, PixKey, PixKeyType, PixSettings, ProviderConfig, Txid, WebhookRequest,
    decode,
};
use chrono::Utc;
use hyper_util::rt::{TokioIo, TokioTimer};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

const CLIENT_ID: &str = "balcao-client";
const CLIENT_SECRET: &str = "client-s3cret";
/// `Basic base64("balcao-client:client-s3cret")`.
const BASIC: &str = "Basic YmFsY2FvLWNsaWVudDpjbGllbnQtczNjcmV0";
const TXID_SECRET: &str = "txid-secret-of-the-tenant";
const WEBHOOK_SECRET: &str = "callback-path-secret";
const PIX_KEY: &str = "caixa@barbearia.com.br";
/// What Efí grants an application with charges and received Pix enabled.
const DEFAULT_SCOPE: &str = "cob.read cob.write pix.read pix.write";

// ---------------------------------------------------------------------------------------
// Certificates
// ---------------------------------------------------------------------------------------

/// A test PKI in a temporary directory: `ca.pem` (trusted by the fake), the fake's server
/// identity, our client certificate (`client.pem`, `client.key`) and a `rogue` one signed
/// by another CA.
struct Pki {
    dir: tempfile::TempDir,
    server: Arc<rustls::ServerConfig>,
}

fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key")).expect("CA certificate")
}

fn issue(
    ca: &CertifiedIssuer<'static, KeyPair>,
    common_name: &str,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (rcgen::Certificate, KeyPair) {
    let mut params =
        CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>()).expect("leaf params");
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().expect("leaf key");
    let cert = params.signed_by(&key, &**ca).expect("leaf certificate");
    (cert, key)
}

impl Pki {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let ca = authority("Fake PSP test CA");
        let (server_cert, server_key) =
            issue(&ca, "fake psp", &["127.0.0.1", "localhost"], ExtendedKeyUsagePurpose::ServerAuth);
        let (client_cert, client_key) = issue(&ca, CLIENT_ID, &[], ExtendedKeyUsagePurpose::ClientAuth);
        let other_ca = authority("Someone else's CA");
        let (rogue_cert, rogue_key) = issue(&other_ca, CLIENT_ID, &[], ExtendedKeyUsagePurpose::ClientAuth);
        for (name, pem) in [
            ("ca.pem", ca.pem()),
            ("client.pem", client_cert.pem()),
            ("client.key", client_key.serialize_pem()),
            ("rogue.pem", rogue_cert.pem()),
            ("rogue.key", rogue_key.serialize_pem()),
            ("both.pem", format!("{}{}", client_cert.pem(), client_key.serialize_pem())),
            ("garbage.pem", "not a certificate\n".to_owned()),
        ] {
            std::fs::write(dir.path().join(name), pem).expect("write PEM");
        }

        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.der().clone()).expect("trust the test CA");
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .expect("client verifier");
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
        let server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![server_cert.der().clone()], key)
            .expect("server certificate");
        Self { dir, server: Arc::new(server) }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

// ---------------------------------------------------------------------------------------
// The fake PSP
// ---------------------------------------------------------------------------------------

/// A scripted answer to the next `PUT` or `GET /cob`, before any normal handling.
enum Act {
    Answer(u16, &'static str, Value),
    /// Create the charge, then never answer (the client times out).
    HangAfterCreate,
    /// Reset the connection (RST) without answering.
    Reset,
}

#[derive(Default)]
struct Psp {
    charges: HashMap<String, Value>,
    creations: usize,
    token_issues: usize,
    tokens_refused: usize,
    /// Each token issued, with the scopes it carries.
    tokens: HashMap<String, String>,
    /// The scopes tokens are issued with; `None`: all the API's (`DEFAULT_SCOPE`).
    scope: Option<String>,
    devolucoes: devolucoes::Devolucoes,
    on_put: VecDeque<Act>,
    on_get: VecDeque<Act>,
    /// Leave `pixCopiaECola` out of charges: the code is then at `/loc/{id}/qrcode`.
    omit_copia_e_cola: bool,
    /// Accept only RFC 6749's form body at the token endpoint (Efí's JSON otherwise).
    form_tokens_only: bool,
    /// The `PUT` bodies received.
    puts: Vec<Value>,
}

type Shared = Arc<Mutex<Psp>>;

/// The connection a request came on, so a handler can reset it.
#[derive(Clone)]
struct Conn {
    reset: Arc<Notify>,
}

struct FakePsp {
    addr: SocketAddr,
    state: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakePsp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakePsp {
    async fn start(pki: &Pki) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Shared::default();
        let app = Router::new()
            .route("/oauth/token", post(token))
            .route("/v2/oauth/token", post(token))
            .route("/v2/cob/{txid}", put(put_cob).get(get_cob).patch(patch_cob))
            .route("/v2/loc/{id}/qrcode", get(qrcode))
            .route("/v2/pix/{e2eid}/devolucao/{id}", put(devolucoes::put).get(devolucoes::get))
            .with_state(state.clone());
        let task = tokio::spawn(serve(listener, TlsAcceptor::from(pki.server.clone()), app));
        Self { addr, state, task }
    }

    fn base_url(&self) -> String {
        format!("https://127.0.0.1:{}/v2", self.addr.port())
    }

    fn psp(&self) -> MutexGuard<'_, Psp> {
        self.state.lock().expect("fake PSP state")
    }

    fn expire_tokens(&self) {
        self.psp().tokens.clear();
    }

    fn set(&self, txid: &str, change: impl FnOnce(&mut Value)) {
        change(self.psp().charges.get_mut(txid).expect("a charge with this txid"));
    }
}

async fn serve(listener: TcpListener, acceptor: TlsAcceptor, app: Router) {
    while let Ok((tcp, _)) = listener.accept().await {
        tokio::spawn(connection(tcp, acceptor.clone(), app.clone()));
    }
}

async fn connection(tcp: TcpStream, acceptor: TlsAcceptor, app: Router) {
    // A second handle on the socket, kept to reset it on demand.
    let Ok(std_tcp) = tcp.into_std() else { return };
    let Ok(twin) = std_tcp.try_clone() else { return };
    let (Ok(tcp), Ok(twin)) = (TcpStream::from_std(std_tcp), TcpStream::from_std(twin)) else { return };
    let tls = match acceptor.accept(tcp).into_fallible().await {
        Ok(tls) => tls,
        Err((_, mut tcp)) => {
            // The alert is sent; close gently and drain, so the client reads it (no RST).
            let _ = tcp.shutdown().await;
            let mut sink = [0u8; 1024];
            let drain = async { while matches!(tcp.read(&mut sink).await, Ok(n) if n > 0) {} };
            let _ = tokio::time::timeout(Duration::from_secs(5), drain).await;
            return;
        }
    };
    let conn = Conn { reset: Arc::new(Notify::new()) };
    let reset = conn.reset.clone();
    let service = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(conn.clone());
        app.clone().oneshot(req.map(axum::body::Body::new))
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .serve_connection(TokioIo::new(tls), service);
    tokio::select! {
        _ = served => {}
        _ = reset.notified() => {
            // Closing the last handle with a zero linger sends RST.
            let _ = twin.set_zero_linger();
        }
    }
}

fn answer(status: u16, content_type: &'static str, body: &Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, content_type)], body.to_string()).into_response()
}

fn problem(status: u16, kind: &str, title: &str, detail: &str) -> Value {
    json!({ "type": format!("https://pix.bcb.gov.br/api/v2/error/{kind}"), "title": title, "status": status, "detail": detail })
}

async fn token(State(state): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let mut psp = state.lock().expect("state");
    if headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) != Some(BASIC) {
        return answer(
            401,
            "application/json",
            &json!({ "error": "invalid_client", "error_description": "Invalid or inactive credentials" }),
        );
    }
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let accepted = if psp.form_tokens_only {
        content_type.starts_with("application/x-www-form-urlencoded") && &body[..] == b"grant_type=client_credentials"
    } else {
        content_type.starts_with("application/json")
            && serde_json::from_slice::<Value>(&body).ok().is_some_and(|b| b["grant_type"] == "client_credentials")
    };
    if !accepted {
        psp.tokens_refused += 1;
        return answer(400, "application/json", &json!({ "error": "invalid_request" }));
    }
    psp.token_issues += 1;
    let token = format!("token-{}", psp.token_issues);
    // The scopes granted to the application, as Efí answers them; the request names none.
    let scope = psp.scope.clone().unwrap_or_else(|| DEFAULT_SCOPE.to_owned());
    psp.tokens.insert(token.clone(), scope.clone());
    let body = json!({ "access_token": token, "token_type": "Bearer", "expires_in": 3600, "scope": scope });
    answer(200, "application/json", &body)
}

fn authorized(psp: &Psp, headers: &HeaderMap) -> bool {
    let bearer =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    bearer.is_some_and(|t| psp.tokens.contains_key(t))
}

fn unauthorized() -> Response {
    answer(401, "application/problem+json", &problem(401, "AcessoNegado", "Acesso negado", "token inválido"))
}

fn shown(psp: &Psp, charge: &Value) -> Value {
    let mut charge = charge.clone();
    if psp.omit_copia_e_cola
        && let Some(fields) = charge.as_object_mut()
    {
        fields.remove("pixCopiaECola");
    }
    charge
}

/// Creates the charge `txid` from a `CobSolicitada`, or says (as a problem's `detail`) what is
/// wrong with it.
fn create(psp: &mut Psp, txid: &str, body: &[u8]) -> Result<Value, &'static str> {
    if !(26..=35).contains(&txid.len()) || !txid.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err("txid fora do padrão [a-zA-Z0-9]{26,35}");
    }
    let Ok(cob) = serde_json::from_slice::<Value>(body) else { return Err("JSON inválido") };
    psp.puts.push(cob.clone());
    let expiracao = cob["calendario"]["expiracao"].as_i64().filter(|e| *e > 0);
    let original = cob["valor"]["original"].as_str().filter(|v| Cents::parse_brl(v).is_ok() && v.contains('.'));
    let (Some(expiracao), Some(original), Some(chave)) = (expiracao, original, cob["chave"].as_str()) else {
        return Err("calendario.expiracao, valor.original e chave são obrigatórios");
    };
    psp.creations += 1;
    let location = format!("pix.example.com/qr/v2/{}", txid.to_ascii_lowercase());
    let mut charge = json!({
        "calendario": { "criacao": Utc::now().to_rfc3339(), "expiracao": expiracao },
        "txid": txid,
        "revisao": 0,
        "loc": { "id": 1000 + psp.creations, "location": location, "tipoCob": "cob" },
        "location": location,
        "status": "ATIVA",
        "valor": { "original": original },
        "chave": chave,
        "pixCopiaECola": dynamic_code(&location),
    });
    if let Some(text) = cob.get("solicitacaoPagador") {
        charge["solicitacaoPagador"] = text.clone();
    }
    psp.charges.insert(txid.to_owned(), charge.clone());
    Ok(charge)
}

async fn put_cob(
    State(state): State<Shared>,
    Extension(conn): Extension<Conn>,
    Path(txid): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let act = state.lock().expect("state").on_put.pop_front();
    match act {
        Some(Act::Answer(status, content_type, body)) => return answer(status, content_type, &body),
        Some(Act::Reset) => {
            conn.reset.notify_one();
            return std::future::pending().await;
        }
        Some(Act::HangAfterCreate) => {
            let _ = create(&mut state.lock().expect("state"), &txid, &body);
            return std::future::pending().await;
        }
        None => {}
    }
    let mut psp = state.lock().expect("state");
    if !authorized(&psp, &headers) {
        return unauthorized();
    }
    if psp.charges.contains_key(&txid) {
        let body =
            json!({ "nome": "txid_duplicado", "mensagem": "Campo txid informado já foi utilizado em outra cobrança" });
        return answer(409, "application/json", &body);
    }
    match create(&mut psp, &txid, &body) {
        Ok(charge) => answer(201, "application/json", &shown(&psp, &charge)),
        Err(detail) => {
            let body = problem(400, "CobOperacaoInvalida", "Cobrança inválida.", detail);
            answer(400, "application/problem+json", &body)
        }
    }
}

async fn get_cob(State(state): State<Shared>, Path(txid): Path<String>, headers: HeaderMap) -> Response {
    let mut psp = state.lock().expect("state");
    if let Some(Act::Answer(status, content_type, body)) = psp.on_get.pop_front() {
        return answer(status, content_type, &body);
    }
    if !authorized(&psp, &headers) {
        return unauthorized();
    }
    match psp.charges.get(&txid) {
        Some(charge) => answer(200, "application/json", &shown(&psp, charge)),
        None => {
            let body = json!({ "nome": "cobranca_nao_encontrada", "mensagem": "Nenhuma cobrança encontrada para o txid informado" });
            answer(404, "application/json", &body)
        }
    }
}

/// `PATCH /cob/{txid}` (`CobPayloadRevisada`): only `status: REMOVIDA_PELO_USUARIO_RECEBEDOR` is
/// taken here; a `CONCLUIDA` charge cannot be changed or removed.
async fn patch_cob(State(state): State<Shared>, Path(txid): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    let mut psp = state.lock().expect("state");
    if !authorized(&psp, &headers) {
        return unauthorized();
    }
    let revision: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if revision["status"] != "REMOVIDA_PELO_USUARIO_RECEBEDOR" {
        let body =
            problem(400, "CobOperacaoInvalida", "Cobrança inválida.", "status must be REMOVIDA_PELO_USUARIO_RECEBEDOR");
        return answer(400, "application/problem+json", &body);
    }
    let Some(charge) = psp.charges.get_mut(&txid) else {
        let body = json!({ "nome": "cobranca_nao_encontrada", "mensagem": "Nenhuma cobrança encontrada para o txid informado" });
        return answer(404, "application/json", &body);
    };
    if charge["status"] == "CONCLUIDA" {
        let detail = "Não se pode alterar nem remover uma cobrança cujo status esteja CONCLUIDA.";
        let body = problem(400, "CobOperacaoInvalida", "Cobrança inválida.", detail);
        return answer(400, "application/problem+json", &body);
    }
    charge["status"] = json!("REMOVIDA_PELO_USUARIO_RECEBEDOR");
    let charge = charge.clone();
    answer(200, "application/json", &shown(&psp, &charge))
}

async fn qrcode(State(state): State<Shared>, Path(id): Path<u64>, headers: HeaderMap) -> Response {
    let psp = state.lock().expect("state");
    if !authorized(&psp, &headers) {
        return unauthorized();
    }
    match psp.charges.values().find(|c| c["loc"]["id"].as_u64() == Some(id)) {
        Some(charge) => {
            let body =
                json!({ "qrcode": charge["pixCopiaECola"], "imagemQrcode": "data:image/png;base64,iVBORw0KGgo=" });
            answer(200, "application/json", &body)
        }
        None => answer(404, "application/problem+json", &problem(404, "NaoEncontrado", "Não encontrado", "loc")),
    }
}

/// A dynamic BR Code for `url` (field 26-25), closed by its CRC-16/CCITT-FALSE.
fn dynamic_code(url: &str) -> String {
    let tlv = |id: &str, value: &str| format!("{id}{:02}{value}", value.len());
    let account = tlv("00", "br.gov.bcb.pix") + &tlv("25", url);
    let mut code = [
        tlv("00", "01"),
        tlv("01", "12"),
        tlv("26", &account),
        tlv("52", "0000"),
        tlv("53", "986"),
        tlv("58", "BR"),
        tlv("59", "BARBEARIA DO ZE"),
        tlv("60", "FLORIANOPOLIS"),
        tlv("62", &tlv("05", "***")),
    ]
    .concat();
    code.push_str("6304");
    let mut crc: u16 = 0xFFFF;
    for byte in code.bytes() {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    code.push_str(&format!("{crc:04X}"));
    code
}

// ---------------------------------------------------------------------------------------
// The gateway under test
// ---------------------------------------------------------------------------------------

fn settings(provider: ProviderConfig) -> PixSettings {
    PixSettings {
        gateway: GatewayKind::Bacen,
        key: PixKey::parse(PixKeyType::Email, PIX_KEY).expect("key"),
        merchant_name: "Barbearia do Zé".into(),
        merchant_city: "Florianópolis".into(),
        provider,
    }
}

fn secrets(client_secret: &str) -> MapSecrets {
    MapSecrets(HashMap::from([
        ("BACEN_CLIENT_SECRET".to_owned(), client_secret.to_owned()),
        ("BACEN_TXID_SECRET".to_owned(), TXID_SECRET.to_owned()),
        ("BACEN_WEBHOOK_SECRET".to_owned(), WEBHOOK_SECRET.to_owned()),
    ]))
}

fn provider(pki: &Pki, base_url: String) -> ProviderConfig {
    ProviderConfig {
        base_url: Some(base_url),
        token_url: None,
        client_id: Some(CLIENT_ID.into()),
        client_secret_env: Some("BACEN_CLIENT_SECRET".into()),
        cert_file: Some(pki.path("client.pem")),
        key_file: Some(pki.path("client.key")),
        ca_file: Some(pki.path("ca.pem")),
        txid_secret_env: Some("BACEN_TXID_SECRET".into()),
        webhook_secret_env: Some("BACEN_WEBHOOK_SECRET".into()),
        ..ProviderConfig::default()
    }
}

fn gateway_with(
    pki: &Pki,
    psp: &FakePsp,
    change: impl FnOnce(&mut ProviderConfig),
) -> Result<BacenGateway, GatewayError> {
    let mut config = provider(pki, psp.base_url());
    change(&mut config);
    BacenGateway::new(&settings(config), &secrets(CLIENT_SECRET))
}

fn gateway(pki: &Pki, psp: &FakePsp) -> BacenGateway {
    gateway_with(pki, psp, |_| {}).expect("gateway")
}

/// The providers' test charge, for a payer known by phone alone.
fn request(key: &str, cents: i64) -> ChargeRequest {
    let mut request = super::request(key, cents, Utc::now() + chrono::TimeDelta::hours(24));
    request.payer.name = None;
    request
}

fn cob_txid(req: &ChargeRequest) -> Txid {
    Txid::for_cob(&req.key, TXID_SECRET.as_bytes())
}

async fn setup() -> (Pki, FakePsp) {
    let pki = Pki::new();
    let psp = FakePsp::start(&pki).await;
    (pki, psp)
}

// ---------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn pix_bacen_create_returns_a_valid_dynamic_code_under_the_derived_txid() {
    let (pki, psp) = setup().await;
    // Efí's layout: the API under /v2, the token endpoint at the root.
    let token_url = format!("https://127.0.0.1:{}/oauth/token", psp.addr.port());
    let gateway = gateway_with(&pki, &psp, |p| p.token_url = Some(token_url)).expect("gateway");
    let req = request("pix_charge/v1/success", 4550);
    assert_eq!(gateway.find(&req).await.expect("find"), None);

    let created = gateway.create(&req).await.expect("create");
    let txid = cob_txid(&req);
    assert_eq!(created.txid, txid);
    assert_eq!(gateway.txid_for(&req.key), txid);
    assert_ne!(created.txid, req.txid, "the API txid is the cob one, not the static one");
    assert_eq!(created.provider_ref.as_deref(), Some(txid.as_str()));
    let code = decode(&created.copia_e_cola).expect("a valid BR Code");
    assert!(code.is_dynamic());
    assert_eq!(code.url(), Some(format!("pix.example.com/qr/v2/{}", txid.as_str().to_ascii_lowercase()).as_str()));

    {
        let state = psp.psp();
        let sent = &state.puts[0];
        assert_eq!(sent["valor"]["original"], "45.50");
        assert_eq!(sent["chave"], PIX_KEY);
        assert_eq!(sent["solicitacaoPagador"], "Corte de cabelo");
        assert!(sent["calendario"]["expiracao"].as_i64().is_some_and(|e| e > 0));
        assert_eq!((state.creations, state.token_issues), (1, 1));
    }
    assert_eq!(gateway.find(&req).await.expect("find"), Some(created));
}

#[tokio::test]
async fn pix_bacen_without_pix_copia_e_cola_the_code_comes_from_the_location() {
    let (pki, psp) = setup().await;
    psp.psp().omit_copia_e_cola = true;
    let gateway = gateway(&pki, &psp);
    let req = request("pix_charge/v1/loc", 1000);
    let created = gateway.create(&req).await.expect("create");
    let stored = psp.psp().charges[cob_txid(&req).as_str()]["pixCopiaECola"].clone();
    assert_eq!(Some(created.copia_e_cola.as_str()), stored.as_str());
    decode(&created.copia_e_cola).expect("a valid BR Code");
}

#[tokio::test]
async fn pix_bacen_a_5xx_is_unknown_and_the_retry_creates_one_charge() {
    let (pki, psp) = setup().await;
    let unavailable = problem(503, "ServicoIndisponivel", "Serviço Indisponível", "Tente novamente");
    psp.psp().on_put.push_back(Act::Answer(503, "application/problem+json", unavailable));
    let gateway = gateway(&pki, &psp);
    let req = request("pix_charge/v1/5xx", 2500);

    let first = gateway.create(&req).await;
    assert!(matches!(&first, Err(GatewayError::Unknown(m)) if m.contains("ServicoIndisponivel")), "{first:?}");
    // The caller's retry: look it up, then create only if absent.
    assert_eq!(gateway.find(&req).await.expect("find"), None);
    let created = gateway.create(&req).await.expect("create");
    assert_eq!(created.txid, cob_txid(&req));
    let state = psp.psp();
    assert_eq!((state.creations, state.charges.len()), (1, 1));
}

#[tokio::test]
async fn pix_bacen_a_timeout_after_creation_is_unknown_and_find_returns_that_charge() {
    let (pki, psp) = setup().await;
    let req = request("pix_charge/v1/timeout", 2500);
    let gateway = gateway(&pki, &psp);
    // The token is fetched (and kept) with the normal timeouts: only the PUT runs on the short one.
    assert_eq!(gateway.find(&req).await.expect("find"), None);
    psp.psp().on_put.push_back(Act::HangAfterCreate);
    let gateway = gateway.with_timeouts(Duration::from_secs(10), Duration::from_secs(1)).expect("short timeouts");

    let first = gateway.create(&req).await;
    assert!(matches!(&first, Err(GatewayError::Unknown(m)) if m.contains("no answer in time")), "{first:?}");
    let gateway = gateway.with_timeouts(Duration::from_secs(10), Duration::from_secs(30)).expect("normal timeouts");
    let found = gateway.find(&req).await.expect("find").expect("the charge the fake created");
    assert_eq!(found.txid, cob_txid(&req));
    decode(&found.copia_e_cola).expect("a valid BR Code");
    // Creating again reuses it (409 then GET): still one charge.
    assert_eq!(gateway.create(&req).await.expect("create"), found);
    let state = psp.psp();
    assert_eq!((state.creations, state.charges.len(), state.token_issues), (1, 1, 1));
}

#[tokio::test]
async fn pix_bacen_a_connection_reset_is_unknown() {
    let (pki, psp) = setup().await;
    psp.psp().on_put.push_back(Act::Reset);
    let gateway = gateway(&pki, &psp);
    let req = request("pix_charge/v1/reset", 2500);

    let first = gateway.create(&req).await;
    assert!(matches!(&first, Err(GatewayError::Unknown(_))), "{first:?}");
    assert_eq!(gateway.find(&req).await.expect("find"), None);
    gateway.create(&req).await.expect("create after the reset");
    assert_eq!(psp.psp().creations, 1);
}

#[tokio::test]
async fn pix_bacen_a_409_on_a_second_put_reuses_the_existing_charge() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let req = request("pix_charge/v1/again", 7000);
    let first = gateway.create(&req).await.expect("create");
    let second = gateway.create(&req).await.expect("create again");
    assert_eq!(second, first);
    {
        let state = psp.psp();
        assert_eq!((state.creations, state.puts.len()), (1, 1));
    }

    // Our txid at the provider with another amount is not silently reused.
    let mut changed = req.clone();
    changed.amount = Cents(7100);
    let refused = gateway.create(&changed).await;
    assert!(matches!(&refused, Err(GatewayError::Rejected(m)) if m.contains("70.00")), "{refused:?}");
}

#[tokio::test]
async fn pix_bacen_one_token_is_fetched_and_one_renewal_made_under_concurrency() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let requests: Vec<ChargeRequest> = (0..40).map(|i| request(&format!("pix_charge/v1/burst{i}"), 1000 + i)).collect();

    let cold = futures::future::join_all(requests[..20].iter().map(|r| gateway.create(r))).await;
    assert!(cold.iter().all(Result::is_ok), "{cold:?}");
    assert_eq!(psp.psp().token_issues, 1, "20 callers without a token share one fetch");

    psp.expire_tokens();
    let renewed = futures::future::join_all(requests[20..].iter().map(|r| gateway.create(r))).await;
    assert!(renewed.iter().all(Result::is_ok), "{renewed:?}");
    assert_eq!(psp.psp().token_issues, 2, "20 callers refused with 401 share one renewal");
    assert_eq!(psp.psp().creations, 40);
}

#[tokio::test]
async fn pix_bacen_a_provider_wanting_a_form_token_request_gets_one() {
    let (pki, psp) = setup().await;
    psp.psp().form_tokens_only = true;
    let gateway = gateway(&pki, &psp);
    gateway.create(&request("pix_charge/v1/form1", 1000)).await.expect("create");
    psp.expire_tokens();
    gateway.create(&request("pix_charge/v1/form2", 1000)).await.expect("create");
    let state = psp.psp();
    assert_eq!((state.token_issues, state.tokens_refused), (2, 1), "the form encoding is remembered");
}

#[tokio::test]
async fn pix_bacen_refusals_carry_the_providers_text() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let req = request("pix_charge/v1/refused", 2500);
    let violation = json!({
        "type": "https://pix.bcb.gov.br/api/v2/error/CobOperacaoInvalida",
        "title": "Cobrança inválida.",
        "status": 400,
        "detail": "A requisição que busca alterar ou criar uma cobrança não respeita o _schema_.",
        "violacoes": [{ "razao": "O campo cob.valor.original não respeita o _schema_.", "propriedade": "cob.valor.original" }]
    });
    let efi = json!({ "nome": "valor_invalido", "mensagem": "Campo valor inválido." });
    {
        let mut state = psp.psp();
        state.on_put.push_back(Act::Answer(400, "application/problem+json", violation));
        state.on_put.push_back(Act::Answer(400, "application/json", efi));
        state.on_put.push_back(Act::Answer(
            429,
            "application/json",
            json!({ "nome": "too_many", "mensagem": "Calma" }),
        ));
    }
    let problem = gateway.create(&req).await;
    assert!(
        matches!(&problem, Err(GatewayError::Rejected(m))
            if m.contains("CobOperacaoInvalida") && m.contains("cob.valor.original: O campo cob.valor.original não respeita")),
        "{problem:?}"
    );
    let nome = gateway.create(&req).await;
    assert!(
        matches!(&nome, Err(GatewayError::Rejected(m)) if m.contains("valor_invalido: Campo valor inválido.")),
        "{nome:?}"
    );
    let limited = gateway.create(&req).await;
    assert!(matches!(&limited, Err(GatewayError::Unknown(m)) if m.contains("Calma")), "{limited:?}");
    assert_eq!(psp.psp().creations, 0);
}

#[tokio::test]
async fn pix_bacen_credentials_refused_are_unauthorized() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let req = request("pix_charge/v1/unauthorized", 2500);
    let denied = problem(401, "AcessoNegado", "Acesso negado", "Token sem o escopo cob.write");
    {
        let mut state = psp.psp();
        state.on_put.push_back(Act::Answer(401, "application/problem+json", denied.clone()));
        state.on_put.push_back(Act::Answer(401, "application/problem+json", denied));
        let forbidden = problem(403, "AcessoNegado", "Acesso negado", "Conta sem permissão");
        state.on_put.push_back(Act::Answer(403, "application/problem+json", forbidden));
    }
    let refused = gateway.create(&req).await;
    assert!(matches!(&refused, Err(GatewayError::Unauthorized(m)) if m.contains("cob.write")), "{refused:?}");
    assert_eq!(psp.psp().token_issues, 2, "one renewal, then the refusal stands");
    let forbidden = gateway.create(&req).await;
    assert!(
        matches!(&forbidden, Err(GatewayError::Unauthorized(m)) if m.contains("Conta sem permissão")),
        "{forbidden:?}"
    );

    let config = provider(&pki, psp.base_url());
    let wrong = BacenGateway::new(&settings(config), &secrets("wrong secret")).expect("gateway");
    let refused = wrong.create(&req).await;
    assert!(matches!(&refused, Err(GatewayError::Unauthorized(m)) if m.contains("invalid_client")), "{refused:?}");
    assert_eq!(psp.psp().creations, 0);
}

#[tokio::test]
async fn pix_bacen_a_client_certificate_from_another_ca_is_refused_in_the_handshake() {
    let (pki, psp) = setup().await;
    let rogue = gateway_with(&pki, &psp, |p| {
        p.cert_file = Some(pki.path("rogue.pem"));
        p.key_file = Some(pki.path("rogue.key"));
    })
    .expect("gateway");
    let refused = rogue.create(&request("pix_charge/v1/rogue", 2500)).await;
    assert!(matches!(&refused, Err(GatewayError::Unauthorized(m)) if m.contains("TLS handshake")), "{refused:?}");
    {
        let state = psp.psp();
        assert_eq!((state.token_issues, state.creations), (0, 0));
    }

    // Without the private CA, the fake's own certificate is not trusted.
    let untrusting = gateway_with(&pki, &psp, |p| p.ca_file = None).expect("gateway");
    let refused = untrusting.create(&request("pix_charge/v1/untrusted", 2500)).await;
    assert!(matches!(&refused, Err(GatewayError::NotConfigured(m)) if m.contains("not trusted")), "{refused:?}");

    // One PEM holding both certificate and key (a converted .p12) works too.
    let combined = gateway_with(&pki, &psp, |p| {
        p.cert_file = Some(pki.path("both.pem"));
        p.key_file = Some(pki.path("both.pem"));
    })
    .expect("gateway");
    combined.create(&request("pix_charge/v1/combined", 2500)).await.expect("create");
}

#[tokio::test]
async fn pix_bacen_unreadable_certificates_name_the_file() {
    let (pki, psp) = setup().await;
    let missing = pki.path("missing.pem");
    type Change<'a> = Box<dyn FnOnce(&mut ProviderConfig) + 'a>;
    let cases: [(&str, Change); 4] = [
        ("missing.pem", Box::new(|p| p.cert_file = Some(missing))),
        ("garbage.pem", Box::new(|p| p.cert_file = Some(pki.path("garbage.pem")))),
        ("client.pem", Box::new(|p| p.key_file = Some(pki.path("client.pem")))),
        ("garbage.pem", Box::new(|p| p.ca_file = Some(pki.path("garbage.pem")))),
    ];
    for (file, change) in cases {
        let built = gateway_with(&pki, &psp, change);
        assert!(matches!(&built, Err(GatewayError::NotConfigured(m)) if m.contains(file)), "{file}: {built:?}");
    }
    let plain = gateway_with(&pki, &psp, |p| p.base_url = Some("http://127.0.0.1:1/v2".into()));
    assert!(matches!(&plain, Err(GatewayError::NotConfigured(m)) if m.contains("https")), "{plain:?}");
}

#[tokio::test]
async fn pix_bacen_state_follows_the_charge_at_the_provider() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let req = request("pix_charge/v1/state", 2500);
    let created = gateway.create(&req).await.expect("create");
    let charge = ChargeRef { txid: created.txid.as_str().to_owned(), provider_ref: created.provider_ref.clone() };
    assert_eq!(gateway.state(&charge).await.expect("state"), PaymentState::Pending);

    psp.set(created.txid.as_str(), |c| {
        c["status"] = json!("CONCLUIDA");
        c["pix"] = json!([{ "endToEndId": "E1234567820200909122120200808008", "txid": created.txid.as_str(),
                             "valor": "25.00", "horario": "2020-09-09T20:15:00.358Z" }]);
    });
    let paid = PaymentState::Paid { end_to_end_id: Some("E1234567820200909122120200808008".into()) };
    assert_eq!(gateway.state(&charge).await.expect("state"), paid);

    psp.set(created.txid.as_str(), |c| c["status"] = json!("REMOVIDA_PELO_USUARIO_RECEBEDOR"));
    assert_eq!(gateway.state(&charge).await.expect("state"), PaymentState::Cancelled);

    psp.set(created.txid.as_str(), |c| {
        c["status"] = json!("ATIVA");
        c["calendario"]["criacao"] = json!("2020-09-09T20:15:00.358Z");
    });
    assert_eq!(gateway.state(&charge).await.expect("state"), PaymentState::Expired);

    let unknown = ChargeRef { txid: "a".repeat(32), provider_ref: None };
    assert!(matches!(gateway.state(&unknown).await, Err(GatewayError::Rejected(_))));
}

#[tokio::test]
async fn pix_bacen_cancel_removes_a_charge_and_reports_one_paid_meanwhile() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let created = gateway.create(&request("pix_charge/v1/cancel", 2500)).await.expect("create");
    let charge = ChargeRef { txid: created.txid.as_str().to_owned(), provider_ref: created.provider_ref.clone() };
    assert_eq!(gateway.cancel(&charge).await.expect("cancel"), CancelOutcome::Cancelled);
    assert_eq!(gateway.state(&charge).await.expect("state"), PaymentState::Cancelled);
    assert_eq!(gateway.cancel(&charge).await.expect("again"), CancelOutcome::Cancelled, "idempotent");

    let paid = gateway.create(&request("pix_charge/v1/cancel-paid", 2500)).await.expect("create");
    psp.set(paid.txid.as_str(), |c| {
        c["status"] = json!("CONCLUIDA");
        c["pix"] = json!([{ "endToEndId": "E1234567820200909122120200808009", "txid": paid.txid.as_str(),
                             "valor": "25.00", "horario": "2020-09-09T20:15:00.358Z" }]);
    });
    let paid = ChargeRef { txid: paid.txid.as_str().to_owned(), provider_ref: paid.provider_ref.clone() };
    let outcome = gateway.cancel(&paid).await.expect("cancel");
    assert_eq!(outcome, CancelOutcome::Paid { end_to_end_id: Some("E1234567820200909122120200808009".into()) });
    assert_eq!(
        gateway.state(&paid).await.expect("state"),
        PaymentState::Paid { end_to_end_id: Some("E1234567820200909122120200808009".into()) }
    );
}

#[tokio::test]
async fn pix_bacen_notifications_need_the_secret_path() {
    let (pki, psp) = setup().await;
    let gateway = gateway(&pki, &psp);
    let body = json!({ "pix": [
        { "endToEndId": "E87654321202009091221dfghi123456", "txid": "971122d8f37211eaadc10242ac120002",
          "valor": "110.00", "horario": "2020-09-09T20:15:00.358Z" },
        { "endToEndId": "E87654321202009091221dfghi123457", "valor": "1.00", "horario": "2020-09-09T20:15:00.358Z" }
    ]})
    .to_string();
    let headers = reqwest::header::HeaderMap::new();
    let read = |secret: Option<&str>, body: &[u8]| {
        gateway.notifications(&WebhookRequest { headers: &headers, query: None, path_secret: secret, body })
    };
    assert_eq!(
        read(Some(WEBHOOK_SECRET), body.as_bytes()),
        Ok(vec![Notification {
            event_id: "E87654321202009091221dfghi123456".into(),
            charge: NotifiedCharge::Txid("971122d8f37211eaadc10242ac120002".into()),
        }])
    );
    assert_eq!(read(Some("callback-path-secreT"), body.as_bytes()), Err(NotificationError::Unauthenticated));
    assert_eq!(read(None, body.as_bytes()), Err(NotificationError::Unauthenticated));
    assert!(matches!(read(Some(WEBHOOK_SECRET), b"{\"pix\": 1}"), Err(NotificationError::Malformed(_))));

    let shown = format!("{gateway:?}");
    for secret in [CLIENT_SECRET, TXID_SECRET, WEBHOOK_SECRET] {
        assert!(!shown.contains(secret), "{shown}");
    }

    let unset = gateway_with(&pki, &psp, |p| p.webhook_secret_env = None).expect("gateway");
    let request =
        WebhookRequest { headers: &headers, query: None, path_secret: Some(WEBHOOK_SECRET), body: body.as_bytes() };
    assert_eq!(unset.notifications(&request), Err(NotificationError::Unauthenticated));
}
