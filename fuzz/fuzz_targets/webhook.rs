//! The WhatsApp webhook: the `X-Hub-Signature-256` check over raw bytes, then
//! `parse_batch` over whatever JSON the bytes hold.
#![no_main]

use balcao::whatsapp::signature::{SignatureError, sign, verify};
use balcao::whatsapp::webhook::parse_batch;
use libfuzzer_sys::fuzz_target;

const SECRET: &[u8] = b"fuzz-app-secret";

fuzz_target!(|data: &[u8]| {
    // The body as Meta would sign it verifies; the same bytes as a header never panic.
    assert_eq!(verify(SECRET, data, Some(&sign(SECRET, data))), Ok(()));
    if let Ok(header) = std::str::from_utf8(data) {
        assert_ne!(verify(SECRET, b"{}", Some(header)), Err(SignatureError::Missing));
    }

    let Ok(body) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let batch = parse_batch(&body);
    for change in &batch.changes {
        for message in &change.messages {
            assert!(!message.provider_message_id.trim().is_empty());
            let _ = message.content.reply_id();
        }
    }
});
