//! Voice notes, heard once: the audio is downloaded through the Graph API (type and size
//! checked: [`AUDIO_TYPES`], 16 MB), transcribed by the configured endpoint, and the text (or
//! why there is none) kept on the message ([`MessageEffectStore::keep_transcript`]).
//!
//! Invariants:
//! - what is kept is final: a kept transcript or a kept failure is read back by every later
//!   run of the turn, never redone (two attempts racing after a lost lease keep the first
//!   one's), and it is kept only under the turn's lease, before anything uses it, so a turn an
//!   erasure stopped cannot write a transcript back;
//! - an outage is not a failure: a download or transcription still unavailable after the
//!   client's own quick retries (timeouts, 429, 5xx) fails the turn, which the queue retries
//!   with its backoff, for up to [`RETRY_FOR`] after the note arrived and never past the
//!   turn's last attempt; then it is kept as a failure, so the customer is asked to write
//!   rather than left unanswered. A refusal (4xx, a wrong type, too large, an empty
//!   transcript) is final at once;
//! - "once" means once per kept result: the endpoint is called again only while nothing is kept.
//!   A crash between the endpoint's answer and the keeping (one `UPDATE`) transcribes, and pays
//!   for, that note again on the retry; nothing else does;
//! - the transcript is personal data kept with the message: exported and erased with it;
//! - a simulated voice note (marked `simulated_by`, which never comes from the wire) is read
//!   from the clip the simulator ships, never downloaded: its media id names nothing at Meta.

use chrono::Utc;

use crate::domain::Secret;
use crate::jobs::Turn;
use crate::simulator::payload::{VOICE_NOTE, VOICE_NOTE_MEDIA_ID, VOICE_NOTE_MIME};
use crate::store::{InboundMessage, MessageEffectStore, Store};
use crate::transcription::{Transcriber, TranscriptionError};
use crate::whatsapp::GraphClient;
use crate::whatsapp::media::{AUDIO_MAX_BYTES, AUDIO_TYPES, Media, MediaError};

/// How long after a voice note arrived an outage is waited out (its turn retried) before the
/// customer is asked to write instead: long enough for a restart, short enough that nobody
/// waits long for an answer (and the conversation's next turn waits behind this one).
const RETRY_FOR: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

/// Downloads and transcribes voice notes.
pub struct Voice {
    pub store: Store,
    pub graph: GraphClient,
    /// The server's WhatsApp token, for tenants without their own.
    pub default_token: Option<Secret>,
    /// `None`: no transcription endpoint is configured.
    pub transcriber: Option<Transcriber>,
}

/// What a voice note said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    Text(String),
    /// Its download or transcription failed, for this kept reason (not tried again).
    Failed(String),
    /// No transcription endpoint is configured.
    NoEndpoint,
}

/// Why a voice note could not be heard on this attempt.
enum Unheard {
    /// The media or the transcriber is unavailable for now: worth another turn attempt.
    Again(String),
    /// Trying again would get the same answer.
    Final(String),
}

impl Voice {
    /// The words of audio message `message` of `turn`.
    pub async fn hear(&self, turn: &Turn, message: &InboundMessage) -> anyhow::Result<Heard> {
        if let Some(text) = &message.transcript {
            return Ok(Heard::Text(text.clone()));
        }
        if let Some(reason) = &message.transcript_error {
            return Ok(Heard::Failed(reason.clone()));
        }
        let Some(transcriber) = &self.transcriber else { return Ok(Heard::NoEndpoint) };
        let result = match self.transcribe(turn, message, transcriber).await {
            Ok(text) => Ok(text),
            Err(Unheard::Again(reason)) if !turn.last_attempt && Utc::now() - message.received_at < RETRY_FOR => {
                tracing::warn!(tenant = %turn.tenant.id, message = message.id, %reason, "a voice note could not be heard yet");
                anyhow::bail!("a voice note could not be heard yet ({reason}); the turn is tried again");
            }
            Err(Unheard::Again(reason) | Unheard::Final(reason)) => {
                tracing::warn!(tenant = %turn.tenant.id, message = message.id, %reason, "a voice note could not be heard");
                Err(reason)
            }
        };
        let result = result.as_deref().map_err(String::as_str);
        let kept = self.store.keep_transcript(turn.tenant.id, message.id, &turn.lease, result).await?;
        Ok(match kept {
            Some((Some(text), _)) => Heard::Text(text),
            Some((None, reason)) => Heard::Failed(reason.unwrap_or_default()),
            // Stopped meanwhile (an erasure, a lost lease): nothing is kept, nothing answered.
            None => anyhow::bail!("the turn's lease was lost while a voice note was heard"),
        })
    }

    /// The transcript, or a short reason for the record.
    async fn transcribe(
        &self,
        turn: &Turn,
        message: &InboundMessage,
        transcriber: &Transcriber,
    ) -> Result<String, Unheard> {
        let final_ = |reason: &str| Unheard::Final(reason.to_owned());
        let media_id = message.media_id.as_deref().ok_or_else(|| final_("no media id"))?;
        let media = if message.simulated_by.is_some() {
            if media_id != VOICE_NOTE_MEDIA_ID {
                return Err(final_(&format!("unknown simulator media {media_id:?}")));
            }
            Media { bytes: VOICE_NOTE.to_vec(), mime_type: VOICE_NOTE_MIME.to_owned() }
        } else {
            let token = turn
                .tenant
                .access_token
                .as_ref()
                .or(self.default_token.as_ref())
                .ok_or_else(|| final_("no access token"))?;
            self.graph.download_media(token, media_id, AUDIO_TYPES, AUDIO_MAX_BYTES).await.map_err(|e| {
                let reason = format!("{}: {e}", e.code());
                match e {
                    MediaError::Unavailable(_) => Unheard::Again(reason),
                    _ => Unheard::Final(reason),
                }
            })?
        };
        transcriber.transcribe(&media.bytes, &media.mime_type).await.map_err(|e| match e {
            TranscriptionError::Unavailable(_) => Unheard::Again(e.to_string()),
            _ => Unheard::Final(e.to_string()),
        })
    }
}
