// The web simulator: one WhatsApp-like chat with a tenant's number. The bot's messages arrive
// from the server-sent event stream; what the user sends goes to the send endpoint, which hands
// a signed webhook payload to the server's own intake.
//
// Every piece of data is shown with textContent, never parsed as HTML: names, texts, titles and
// codes come from customers and merchants.
//
// Hooks for tests (keep them stable): #tenant, #from, #name, #as-customer, #as-staff, #open,
// #text, #send, #messages; .msg.in[data-id] is a bot message (the outbox row id), .msg.out what
// this phone sent; button.reply[data-id] and .list-row[data-id] are its choices; .copia-e-cola,
// img.qr and button.mark-paid[data-charge] a Pix charge; body[data-connected="slug|digits"]
// once the event stream is open.
(function () {
  "use strict";

  const $ = (selector) => document.querySelector(selector);
  const tenantSelect = $("#tenant");
  if (!tenantSelect) return; // no tenants: nothing to simulate

  const fromInput = $("#from");
  const nameInput = $("#name");
  const messages = $("#messages");
  const statusLine = $("#status");
  const CUSTOMER = { from: fromInput.value, name: nameInput.value };

  let source = null;
  let chat = null; // { slug, from, name, key }
  let lastId = 0;
  // What the user sent, per chat, with the last bot message id seen when it was sent, so a
  // reopened chat interleaves it again: key -> [{ after, text }]
  const sent = new Map();

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function api(path) {
    return "/simulator/api/tenants/" + encodeURIComponent(chat.slug) + path;
  }

  // R$ 1.234,56, as the bot writes it.
  function brl(cents) {
    const [reais, centavos] = (Number(cents) / 100).toFixed(2).split(".");
    return "R$ " + reais.replace(/\B(?=(\d{3})+(?!\d))/g, ".") + "," + centavos;
  }

  function scrollDown() {
    messages.scrollTop = messages.scrollHeight;
  }

  function showOut(text) {
    messages.appendChild(el("div", "msg out", text));
    scrollDown();
  }

  function showError(text) {
    messages.appendChild(el("div", "msg error", text));
    scrollDown();
  }

  function replayAfter(id) {
    for (const m of sent.get(chat.key) || []) {
      if (m.after === id) messages.appendChild(el("div", "msg out", m.text));
    }
  }

  async function post(body) {
    const response = await fetch(api("/messages"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      credentials: "same-origin",
      body: JSON.stringify(Object.assign({ from: chat.from, name: chat.name }, body)),
    });
    if (!response.ok) throw new Error(await response.text());
    return response.json();
  }

  async function say(text, body) {
    const list = sent.get(chat.key) || [];
    list.push({ after: lastId, text: text });
    sent.set(chat.key, list);
    showOut(text);
    try {
      await post(body);
    } catch (e) {
      showError("Não foi possível enviar: " + e.message);
    }
  }

  function replyButton(className, id, title, kind, context, label) {
    const button = el("button", className);
    button.type = "button";
    button.dataset.id = id;
    button.dataset.kind = kind;
    if (label) {
      button.appendChild(el("span", "title", title));
      button.appendChild(el("span", "desc", label));
    } else {
      button.textContent = title;
    }
    button.addEventListener("click", () =>
      say(title, { reply: { id: id, title: title, kind: kind, context: context } }),
    );
    return button;
  }

  function qrImage(code) {
    const img = el("img", "qr");
    img.alt = "QR Code Pix";
    img.src = api("/qr?code=" + encodeURIComponent(code));
    return img;
  }

  function pixCode(bubble, code, charge) {
    bubble.appendChild(el("div", "copia-e-cola", code));
    const copy = el("button", "copy", "Copiar");
    copy.type = "button";
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(code);
        copy.textContent = "Copiado!";
      } catch (_) {
        copy.textContent = "Selecione e copie";
      }
    });
    bubble.appendChild(copy);
    if (charge) markPaid(bubble, charge);
  }

  // A charge's status as the merchant reads it (cancellations and refunds included).
  const CHARGE_STATUS = {
    paid: "Cobrança paga",
    expired: "Cobrança expirada",
    cancelled: "Cobrança cancelada",
    refund_due: "Paga fora do prazo: a devolver",
    partially_refunded: "Cobrança devolvida em parte",
    refunded: "Cobrança devolvida",
  };

  function markPaid(bubble, charge) {
    if (charge.status !== "pending") {
      bubble.appendChild(el("div", "paid", CHARGE_STATUS[charge.status] || "Cobrança " + charge.status));
      return;
    }
    if (charge.gateway !== "sandbox") return;
    const button = el("button", "mark-paid", "Marcar como pago");
    button.type = "button";
    button.dataset.charge = charge.charge_id;
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        const response = await fetch(api("/charges/" + charge.charge_id + "/paid"), {
          method: "POST",
          credentials: "same-origin",
          headers: { "content-type": "application/json" },
          body: "{}",
        });
        if (!response.ok) throw new Error(await response.text());
        button.textContent = "Pago (sandbox)";
      } catch (e) {
        button.disabled = false;
        showError("Não foi possível marcar como pago: " + e.message);
      }
    });
    bubble.appendChild(button);
  }

  function render(event) {
    const m = event.message;
    const context = event.wamid || "wamid.local." + event.id;
    const bubble = el("div", "msg in");
    bubble.dataset.id = event.id;
    bubble.dataset.type = m.type;
    const choices = el("div", "choices");
    switch (m.type) {
      case "text":
        if (event.charge) {
          pixCode(bubble, m.body, event.charge);
        } else {
          bubble.appendChild(el("div", "body", m.body));
        }
        break;
      case "buttons":
        bubble.appendChild(el("div", "body", m.body));
        if (m.footer) bubble.appendChild(el("div", "footer", m.footer));
        for (const b of m.buttons) choices.appendChild(replyButton("reply", b.id, b.title, "button", context));
        bubble.appendChild(choices);
        break;
      case "list":
        bubble.appendChild(el("div", "body", m.body));
        if (m.footer) bubble.appendChild(el("div", "footer", m.footer));
        bubble.appendChild(el("div", "list-title", m.button));
        for (const section of m.sections) {
          if (section.title) choices.appendChild(el("div", "list-section", section.title));
          for (const row of section.rows) {
            choices.appendChild(replyButton("list-row", row.id, row.title, "list", context, row.description));
          }
        }
        bubble.appendChild(choices);
        break;
      case "template":
        bubble.appendChild(el("div", "template-name", "Modelo " + m.name + " (fora da janela de 24 h)"));
        for (const p of m.body_params) bubble.appendChild(el("div", "param", p));
        for (const payload of m.quick_replies) {
          choices.appendChild(replyButton("reply", payload, payload, "quick_reply", context));
        }
        bubble.appendChild(choices);
        // A charge sent as the template: it can be paid here too (sandbox).
        if (event.charge) markPaid(bubble, event.charge);
        break;
      case "qr_image":
        bubble.appendChild(qrImage(m.payload));
        if (m.caption) bubble.appendChild(el("div", "body", m.caption));
        break;
      case "order_details":
        bubble.appendChild(el("div", "body", m.body));
        bubble.appendChild(el("div", "amount", brl(m.amount) + " — " + m.description));
        bubble.appendChild(qrImage(m.copia_e_cola));
        pixCode(bubble, m.copia_e_cola, event.charge);
        break;
      case "order_status":
        bubble.appendChild(el("div", "body", m.body));
        break;
      case "location": {
        // WhatsApp shows a map preview; here a pin and a link to the map.
        const pin = el("a", "location", "📍 " + (m.name || "Localização"));
        pin.href = "https://www.openstreetmap.org/?mlat=" + encodeURIComponent(m.latitude) +
          "&mlon=" + encodeURIComponent(m.longitude) + "#map=17/" + encodeURIComponent(m.latitude) + "/" +
          encodeURIComponent(m.longitude);
        pin.target = "_blank";
        pin.rel = "noopener";
        bubble.appendChild(pin);
        if (m.address) bubble.appendChild(el("div", "body", m.address));
        break;
      }
      default:
        bubble.appendChild(el("div", "body", "[mensagem " + m.type + "]"));
    }
    bubble.appendChild(el("div", "meta", event.status));
    messages.appendChild(bubble);
    lastId = event.id;
    replayAfter(event.id);
    scrollDown();
  }

  // Any way a Brazilian writes a number: "+55 11 97777-6666", "(11) 97777-6666", "11977776666",
  // "5511977776666". Returns "+55…" digits, or null when it cannot be a WhatsApp number.
  function normalizePhone(raw) {
    const compact = raw.trim().replace(/[\s().\-]/g, "");
    if (/^\+\d{8,15}$/.test(compact)) return compact;
    if (/^\d{10,11}$/.test(compact)) return "+55" + compact;
    if (/^55\d{10,11}$/.test(compact)) return "+" + compact;
    return null;
  }

  function open() {
    if (source) source.close();
    const from = normalizePhone(fromInput.value);
    if (!from) {
      statusLine.textContent = "";
      showError("Número inválido: escreva o DDD e o número, por exemplo 11 90000-0001.");
      return;
    }
    fromInput.value = from;
    const slug = tenantSelect.value;
    chat = { slug: slug, from: from, name: nameInput.value.trim(), key: slug + "|" + from.replace(/\D/g, "") };
    lastId = 0;
    messages.replaceChildren();
    const option = tenantSelect.selectedOptions[0];
    $("#chat-title").textContent = (option ? option.textContent : slug) + " · " + from;
    statusLine.textContent = "conectando…";
    // What this phone sent (kept by the server, so a reload shows both sides), then the replies.
    const opened = chat;
    fetch(api("/sent?wa_id=" + encodeURIComponent(from)), { credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : { sent: [] }))
      .then((body) => {
        if (chat !== opened) return;
        const said = (m) => m.text || (m.kind === "audio" ? "🎤 Áudio" : "[" + m.kind + "]");
        sent.set(chat.key, body.sent.map((m) => ({ after: m.after, text: said(m) })));
      })
      .catch(() => {})
      .finally(() => {
        if (chat !== opened) return;
        replayAfter(0);
        connect(from);
      });
  }

  function connect(from) {
    const url = api("/events?wa_id=" + encodeURIComponent(from) + "&after=0");
    source = new EventSource(url, { withCredentials: true });
    source.addEventListener("open", () => {
      statusLine.textContent = "online";
      document.body.dataset.connected = chat.key;
    });
    source.addEventListener("error", () => {
      statusLine.textContent = "reconectando…";
    });
    source.addEventListener("message", (e) => {
      try {
        render(JSON.parse(e.data));
      } catch (err) {
        showError("Mensagem ilegível: " + err.message);
      }
    });
  }

  $("#setup").addEventListener("submit", (e) => {
    e.preventDefault();
    open();
  });
  tenantSelect.addEventListener("change", open);
  $("#as-customer").addEventListener("click", () => {
    fromInput.value = CUSTOMER.from;
    nameInput.value = CUSTOMER.name;
    open();
  });
  $("#as-staff").addEventListener("click", () => {
    const option = tenantSelect.selectedOptions[0];
    const staff = ((option && option.dataset.staff) || "").split(",").filter(Boolean);
    if (staff.length === 0) {
      showError("Este negócio não tem números da equipe (staff) no arquivo do tenant.");
      return;
    }
    fromInput.value = staff[0];
    nameInput.value = "Equipe";
    open();
  });
  $("#composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = $("#text");
    const text = input.value.trim();
    if (!text || !chat) return;
    input.value = "";
    say(text, { text: text });
  });
  $("#voice").addEventListener("click", () => {
    if (!chat) return;
    say("🎤 Áudio", { voice: true });
  });

  open();
})();
