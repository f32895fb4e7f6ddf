//! Voice notes, heard once: the audio is downloaded through the Graph API (type and size
//! checked: [`AUDIO_TYPES`], 16 MB), transcribed by the configured endpoint, and the text (or
//! why there is none) kept on the message ([`MessageEffectStore::keep_transcript`]).
//!
//! Invariants:
//! - a message is downloaded and transcribed at most once however often its turn runs: a kept
//!   transcript or failure is read back, never redone (two attempts racing after a lost lease
//!   keep the first one's result), and it is kept only under the turn's lease, so a turn an
//!   erasure stopped cannot write a transcript back;
//! - the transcript is personal data kept with the message: exported and erased with it;
//! - a simulated voice note (marked `simulated_by`, which never comes from the wire) is read
//!   from the clip the simulator ships, never downloaded: its media id names nothing at Meta.

use crate::domain::Secret;
use crate::jobs::Turn;
use crate::simulator::payload::{VOICE_NOTE, VOICE_NOTE_MEDIA_ID, VOICE_NOTE_MIME};
use crate::store::{InboundMessage, MessageEffectStore, Store};
use crate::transcription::Transcriber;
use crate::whatsapp::GraphClient;
use crate::whatsapp::media::{AUDIO_MAX_BYTES, AUDIO_TYPES, Media};

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
        let result = self.transcribe(turn, message, transcriber).await;
        if let Err(reason) = &result {
            tracing::warn!(tenant = %turn.tenant.id, message = message.id, %reason, "a voice note could not be heard");
        }
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
    ) -> Result<String, String> {
        let media_id = message.media_id.as_deref().ok_or("no media id")?;
        let media = if message.simulated_by.is_some() {
            if media_id != VOICE_NOTE_MEDIA_ID {
                return Err(format!("unknown simulator media {media_id:?}"));
            }
            Media { bytes: VOICE_NOTE.to_vec(), mime_type: VOICE_NOTE_MIME.to_owned() }
        } else {
            let token = turn.tenant.access_token.as_ref().or(self.default_token.as_ref()).ok_or("no access token")?;
            self.graph
                .download_media(token, media_id, AUDIO_TYPES, AUDIO_MAX_BYTES)
                .await
                .map_err(|e| format!("{}: {e}", e.code()))?
        };
        transcriber.transcribe(&media.bytes, &media.mime_type).await.map_err(|e| e.to_string())
    }
}
