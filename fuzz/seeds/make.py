#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/ from the repository's vectors, fixtures and test
payloads. Run from the repository root: python3 fuzz/seeds/make.py"""
import glob, hashlib, json, os, re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def put(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def selector(n, i):
    """A printable byte b with b % n == i, so seeds stay readable."""
    return next(chr(c) for c in range(ord("0"), 127) if c % n == i)


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


# BR Codes: one payload a file, valid and invalid vectors.
for kind in ("valid", "invalid"):
    lines = [l.strip() for l in read(f"tests/fixtures/pix/brcode-{kind}.txt").splitlines()]
    for i, line in enumerate(l for l in lines if l and not l.startswith("#")):
        put("brcode", f"{kind}-{i}", line)

# Webhooks: the fixtures as Meta sends them.
for path in sorted(glob.glob(os.path.join(ROOT, "tests/fixtures/whatsapp/*.json"))):
    put("webhook", os.path.basename(path), open(path, "rb").read())

# Click ids: the two decisions, a guided-menu id and near misses.
for name, raw in [
    ("yes", "a:0f8fad5bd9cb469fa16570867728950e:y"),
    ("no", "a:0f8fad5bd9cb469fa16570867728950e:n"),
    ("hyphenated", "a:0f8fad5b-d9cb-469f-a165-70867728950e:y"),
    ("menu", "g:menu"),
]:
    put("click_id", name, raw)

# Tenant files: the committed example and the test suites' files.
put("tenant_file", "example.toml", read("tenants/example.toml"))
scenario = read("tests/api/support/scenario.rs")
template = re.search(r'pub fn catalog_file.*?r#"(.*?)"#', scenario, re.S).group(1)
catalog = (template.replace("{slug}", "barbearia").replace("{phone_number_id}", "106540352242922")
           .replace("{timezone}", "America/Sao_Paulo"))
put("tenant_file", "catalog.toml", catalog)
merchant = (catalog.replace("[whatsapp]", 'staff = ["+5511988887777"]\n[whatsapp]', 1)
            + '[pix]\nkey = "barbearia@example.com"\nkey_type = "email"\n'
            'merchant_name = "Barbearia do Zé"\nmerchant_city = "São Paulo"\n')
put("tenant_file", "merchant.toml", merchant)
good = re.search(r'const GOOD: &str = r#"(.*?)"#', read("src/tenant/file.rs"), re.S).group(1)
put("tenant_file", "minimal.toml", good)
put("tenant_file", "deposit.toml", good + '[pix]\nkey = "caixa@example.com"\nkey_type = "email"\n'
    'merchant_name = "Zé"\nmerchant_city = "São Paulo"\n[[services]]\nname = "Corte"\n'
    'duration_minutes = 30\nprice = "50.00"\ndeposit = "30%"\n')

# Pix providers: the payloads of tests/api/pix_psp/*.rs (Bacen's in pix_psp/bacen.rs), made
# concrete. First byte: parser; second: HTTP status (see fuzz_targets/pix_response.rs).
PIX_STATUSES = [200, 201, 204, 302, 400, 401, 403, 404, 409, 429, 500, 503]
PARSERS = ["asaas_payment", "asaas_event", "mercadopago_payment", "bacen_cob", "bacen_callback", "bacen_token"]
code = read("tests/fixtures/pix/brcode-valid.txt").splitlines()[3].strip()
pix = [
    ("asaas_payment", 200, {"object": "payment", "id": "pay_080225913252", "customer": "cus_000000000001",
                            "value": 45.5, "billingType": "PIX", "status": "PENDING", "dueDate": "2030-01-01",
                            "description": "Corte de cabelo", "externalReference": "7f3a9c2e1b4d5f6a7b8c9",
                            "deleted": False, "pixTransaction": None}),
    ("asaas_payment", 200, {"object": "list", "hasMore": False, "totalCount": 1, "limit": 10, "offset": 0,
                            "data": [{"id": "pay_1", "status": "RECEIVED", "deleted": False}]}),
    ("asaas_payment", 503, {"errors": [{"code": "unavailable", "description": "Serviço indisponível"}]}),
    ("asaas_payment", 404, {"errors": [{"code": "invalid_object", "description": "Cobrança não encontrada."}]}),
    ("asaas_event", 200, {"id": "evt_05b708f961d739ea7eba7e4db318f621&368604920", "event": "PAYMENT_RECEIVED",
                          "dateCreated": "2024-06-12 16:45:03",
                          "payment": {"object": "payment", "id": "pay_080225913252", "status": "RECEIVED"}}),
    ("asaas_event", 200, {"id": "evt_2", "event": "TRANSFER_CREATED", "transfer": {"id": "tra_1"}}),
    ("mercadopago_payment", 201, {"id": 1234567890, "status": "pending", "status_detail": "pending_waiting_transfer",
                                  "payment_method_id": "pix", "transaction_amount": 45.5,
                                  "description": "Corte de cabelo", "external_reference": "7f3a9c2e1b4d5f6a7b8c9",
                                  "date_of_expiration": "2030-01-01T23:59:59.000-03:00",
                                  "payer": {"email": "5511999990000@clientes.barbearia.com.br", "first_name": "Maria"},
                                  "point_of_interaction": {"type": "PIX", "transaction_data": {
                                      "qr_code": code, "qr_code_base64": "iVBORw0KGgo=",
                                      "ticket_url": "https://example.invalid/1234567890"}}}),
    ("mercadopago_payment", 200, {"id": "1234567890", "status": "cancelled", "status_detail": "expired"}),
    ("mercadopago_payment", 400, {"message": "Invalid request data", "error": "bad_request", "status": 400,
                                  "cause": [{"code": 4037, "description": "Invalid transaction_amount"}]}),
    ("mercadopago_payment", 500, {"message": "internal_error", "error": "internal_error", "status": 500, "cause": []}),
    ("mercadopago_payment", 401, {"message": "invalid access token", "error": "unauthorized", "status": 401,
                                  "cause": []}),
    ("bacen_cob", 200, {"calendario": {"criacao": "2026-12-03T11:00:00Z", "expiracao": 3600},
                        "txid": "7f3a9c2e1b4d5f6a7b8c9d0e1f2a3b4c", "revisao": 0,
                        "loc": {"id": 1001, "location": "pix.example.com/qr/v2/7f3a9c2e", "tipoCob": "cob"},
                        "location": "pix.example.com/qr/v2/7f3a9c2e", "status": "ATIVA",
                        "valor": {"original": "50.00"}, "chave": "barbearia@example.com",
                        "pixCopiaECola": code}),
    ("bacen_cob", 200, {"txid": "7f3a9c2e1b4d5f6a7b8c9d0e1f2a3b4c", "status": "CONCLUIDA",
                        "valor": {"original": "50.00"}, "loc": {"id": "abc-1"},
                        "pix": [{"endToEndId": "E87654321202009091221dfghi123456", "valor": "50.00"}]}),
    ("bacen_cob", 404, {"nome": "cobranca_nao_encontrada",
                        "mensagem": "Nenhuma cobrança encontrada para o txid informado"}),
    ("bacen_cob", 409, {"nome": "txid_duplicado", "mensagem": "Campo txid informado já foi utilizado em outra cobrança"}),
    ("bacen_cob", 400, {"type": "https://pix.bcb.gov.br/api/v2/error/CobOperacaoInvalida", "title": "Cobrança inválida.",
                        "status": 400, "detail": "A requisição que busca alterar ou criar uma cobrança não respeita o schema.",
                        "violacoes": [{"razao": "O campo valor.original não respeita o schema.",
                                       "propriedade": "cob.valor.original"}]}),
    ("bacen_callback", 200, {"pix": [
        {"endToEndId": "E87654321202009091221dfghi123456", "txid": "971122d8f37211eaadc10242ac120002",
         "valor": "110.00", "horario": "2020-09-09T20:15:00.358Z"},
        {"endToEndId": "E87654321202009091221dfghi123457", "valor": "1.00", "horario": "2020-09-09T20:15:00.358Z"}]}),
    ("bacen_token", 200, {"access_token": "token-1", "token_type": "Bearer", "expires_in": 3600,
                          "scope": "cob.read cob.write"}),
    ("bacen_token", 200, {"access_token": "token-2", "expires_in": "600"}),
    ("bacen_token", 401, {"error": "invalid_client", "error_description": "Invalid or inactive credentials"}),
]
for i, (parser, status, body) in enumerate(pix):
    prefix = selector(len(PARSERS), PARSERS.index(parser)) + selector(len(PIX_STATUSES), PIX_STATUSES.index(status))
    put("pix_response", f"{parser}-{status}-{i}", prefix + json.dumps(body, ensure_ascii=False))
put("pix_response", "bacen_cob-502-html", selector(6, 3) + selector(12, 11) + "<html><body>Bad gateway</body></html>")

# Graph API answers (src/whatsapp/client.rs tests). First byte: HTTP status.
GRAPH_STATUSES = [200, 201, 400, 401, 403, 404, 429, 500, 502, 503]
graph = [
    (200, {"messaging_product": "whatsapp", "contacts": [{"input": "5511999990000", "wa_id": "5511999990000"}],
           "messages": [{"id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA"}]}),
    (400, {"error": {"message": "(#131047) Re-engagement message", "type": "OAuthException", "code": 131047,
                     "error_data": {"messaging_product": "whatsapp", "details": "Message failed to send because more than 24 hours have passed"},
                     "fbtrace_id": "A"}}),
    (400, {"error": {"message": "(#130429) Rate limit hit", "type": "OAuthException", "code": 130429, "fbtrace_id": "A"}}),
    (401, {"error": {"message": "Invalid OAuth access token.", "type": "OAuthException", "code": 190, "fbtrace_id": "B"}}),
]
for i, (status, body) in enumerate(graph):
    put("graph_response", f"{status}-{i}", selector(len(GRAPH_STATUSES), GRAPH_STATUSES.index(status)) + json.dumps(body))
put("graph_response", "502-html", selector(len(GRAPH_STATUSES), GRAPH_STATUSES.index(502)) + "<html>")

# Model answers (tests/api/llm.rs). First byte: 0 Anthropic, 1 OpenAI.
anthropic = [
    {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
     "content": [{"type": "thinking", "thinking": "...", "signature": "sig"},
                 {"type": "text", "text": "Vou agendar."},
                 {"type": "tool_use", "id": "toolu_01", "name": "create_booking", "input": {"service_id": 1}}],
     "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 212, "output_tokens": 61}},
    {"content": [{"type": "text", "text": "Pronto!"}], "stop_reason": "end_turn", "usage": {}},
    {"content": [{"type": "tool_use", "id": "toolu_9", "name": "create_booking", "input": "not an object"},
                 {"type": "brand_new_block", "x": 1}], "stop_reason": "some_future_reason"},
    {"unexpected": True},
]
def openai_reply(arguments):
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "refusal": None,
                "tool_calls": [{"id": "call_1", "type": "function",
                                "function": {"name": "create_booking", "arguments": arguments}}]}}],
            "usage": {"prompt_tokens": 89, "completion_tokens": 17, "total_tokens": 106}}
openai = [openai_reply('{"service_id":1}'), openai_reply("{}"), openai_reply("not json"),
          {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Olá!"}}]}]
for i, body in enumerate(anthropic):
    put("llm_response", f"anthropic-{i}", "0" + json.dumps(body, ensure_ascii=False))
for i, body in enumerate(openai):
    put("llm_response", f"openai-{i}", "1" + json.dumps(body, ensure_ascii=False))

# Tool inputs: what the tests and the guided agent send to the tools.
tool_inputs = [
    {"service_id": 1},
    {"service_id": 1, "professional_id": 2, "starts_at": "2026-03-11T14:00:00-03:00"},
    {"booking_id": 7, "starts_at": "2026-03-11 17:00Z"},
    {"booking_id": "7"},
    {"date": "2026-03-11", "service_id": 1},
    {"customer_phone": "+55 (11) 99999-0000", "amount": "R$ 50,00", "description": "  Corte   e barba "},
    {"customer_phone": "11 90000-0001", "amount": 50.5, "description": "Ｃorte ﬁno"},
    {"action_id": "0f8fad5b-d9cb-469f-a165-70867728950e"},
    {"date": "2026-03-11"},
    {"status": "paid"},
    None,
    {},
]
for i, value in enumerate(tool_inputs):
    put("tool_input", f"input-{i}", json.dumps(value, ensure_ascii=False))

# Inputs that crashed once, kept as regression seeds.
# A token lifetime of u64::MAX seconds overflowed the renewal instant (src/pix/bacen/oauth.rs).
put("pix_response", "crash-bacen_token-expires_in-overflow",
    selector(len(PARSERS), PARSERS.index("bacen_token")) + selector(len(PIX_STATUSES), 0)
    + '{"access_token":"abc","expires_in":18446744073709551615}')
# Free text whose canonical form was not a fixed point: "J" + caron lowercased to "j" + caron,
# which NFKC composes to "ǰ" (src/ledger/normalize.rs, normalization version 2).
put("tool_input", "crash-text-j-caron", json.dumps({"description": "J\u030c", "status": "J\u030c"}, ensure_ascii=False))
