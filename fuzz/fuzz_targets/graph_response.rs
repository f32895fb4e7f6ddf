//! The Graph API's answers to a message send: the message id, or the failure classified. The
//! first byte picks the HTTP status; the rest is the body.
#![no_main]

use std::time::Duration;

use balcao::whatsapp::SendError;
use balcao::whatsapp::client::read_send_answer;
use libfuzzer_sys::fuzz_target;
use reqwest::StatusCode;

const STATUSES: [u16; 10] = [200, 201, 400, 401, 403, 404, 429, 500, 502, 503];

fuzz_target!(|data: &[u8]| {
    let [status, body @ ..] = data else { return };
    let status = StatusCode::from_u16(STATUSES[usize::from(*status) % STATUSES.len()]).expect("a status");
    match read_send_answer(status, body, Some(Duration::from_secs(3))) {
        Ok(_) => assert!(status.is_success()),
        Err(SendError::Retry { .. } | SendError::Unknown { .. } | SendError::Permanent { .. }) => {}
        Err(SendError::Invalid(e)) => panic!("a reply is never an invalid message: {e}"),
    }
});
