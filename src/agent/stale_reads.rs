//! Earlier turns' read results are not sent again.
//!
//! A read tool's result (free times, the catalog, the customer's bookings) was true when it was
//! read; in a later turn it is stale, and resending it costs bytes on every model call of every
//! later turn (a day's free times is about 1.8 kB). The model is told the result was left out
//! and reads again when it needs the data. Write results stay whole: they carry the ids a later
//! turn acts on (a proposal's `action_id`, a booking's id).

use std::collections::HashSet;

use crate::llm::{Block, ChatMessage};

/// What the model sees instead of a stale read.
pub const OMITTED: &str =
    "{\"omitted\":\"read in an earlier turn and no longer current; call the tool again if you need it\"}";

/// Replaces the results of calls to tools named in `read_tools` with [`OMITTED`].
pub fn omit_stale_reads(history: &mut [ChatMessage], read_tools: &HashSet<&str>) {
    let stale: HashSet<String> = history
        .iter()
        .flat_map(|m| &m.blocks)
        .filter_map(|b| match b {
            Block::ToolUse { id, name, .. } if read_tools.contains(name.as_str()) => Some(id.clone()),
            _ => None,
        })
        .collect();
    for block in history.iter_mut().flat_map(|m| &mut m.blocks) {
        if let Block::ToolResult { tool_use_id, content, is_error: false } = block
            && stale.contains(tool_use_id)
        {
            OMITTED.clone_into(content);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Role;
    use serde_json::json;

    fn call(id: &str, name: &str) -> ChatMessage {
        ChatMessage {
            role: Role::Assistant,
            blocks: vec![Block::ToolUse { id: id.into(), name: name.into(), input: json!({}), input_error: None }],
            raw: None,
        }
    }

    fn result(id: &str, content: &str, is_error: bool) -> ChatMessage {
        ChatMessage {
            role: Role::User,
            blocks: vec![Block::ToolResult { tool_use_id: id.into(), content: content.into(), is_error }],
            raw: None,
        }
    }

    #[test]
    fn read_results_are_omitted_and_write_results_and_errors_kept() {
        let mut history = vec![
            call("r1", "check_availability"),
            result("r1", "{\"slots\":[\"14:00\"]}", false),
            call("w1", "cancel_booking"),
            result("w1", "{\"action_id\":\"a1\"}", false),
            call("r2", "list_services"),
            result("r2", "{\"error\":\"boom\"}", true),
        ];
        omit_stale_reads(&mut history, &HashSet::from(["check_availability", "list_services"]));
        let contents: Vec<&str> = history
            .iter()
            .flat_map(|m| &m.blocks)
            .filter_map(|b| if let Block::ToolResult { content, .. } = b { Some(content.as_str()) } else { None })
            .collect();
        assert_eq!(contents, [OMITTED, "{\"action_id\":\"a1\"}", "{\"error\":\"boom\"}"]);
    }
}
