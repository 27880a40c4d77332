//! The system prompt an episode starts with.

use super::config::Protocol;
use crate::tooluse::mock_tools::canonical_json;
use crate::tooluse::task::Task;

/// The system prompt of an episode of `task` (what [`ToolEnv`]'s `reset` starts with): the
/// instructions, plus the tool signatures for the Hermes protocol.
pub fn system_prompt(task: &Task, protocol: Protocol) -> String {
    let mut s = String::from(
        "You are a helpful assistant that completes the user's request with the tools \
         available. The request may be missing details: ask the user for them (one \
         question per turn, optionally inside <question></question>). Do not guess missing \
         details. When the request is done, reply with <answer>a short summary</answer>.",
    );
    if protocol == Protocol::Hermes {
        s.push_str(
            "\n\n# Tools\n\nYou may call one or more functions. Function signatures are \
             inside <tools></tools>:\n<tools>\n",
        );
        for tool in task.tools.iter().map(|t| t.openai_schema()) {
            s.push_str(&canonical_json(&tool));
            s.push('\n');
        }
        s.push_str(
            "</tools>\n\nFor each function call, write a JSON object with the function \
             name and arguments inside <tool_call></tool_call>:\n<tool_call>\n{\"name\": \
             <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
        );
    }
    s
}
