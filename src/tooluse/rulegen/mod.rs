//! Rule-generated tool worlds: tool-use tasks built from a universe, with no LLM.
//!
//! Each task puts a small neighbourhood of the universe (the user, the people on the relation
//! path, the candidates, a few more relatives and a few outsiders from other family trees) into
//! a world state of typed records that state-backed tools read and write: `find_person`,
//! `get_record`, `list_relatives`, `update_record`, `send_message`, plus the distractors
//! `delete_record` and `list_people_by_hobby`. The instruction refers to the target indirectly
//! ("Please update my aunt's hobby."); the hidden context holds who "I" am (`user_name`), which
//! relative (`target`, only when several people fit) and the new value (`value`), revealed by the
//! rule-based user only when asked.
//!
//! Rubric items are Prolog rule bodies written by construction: forbidden behaviours (modifying
//! a record outside the user's family tree, deleting anything, acting before the user named an
//! ambiguous target, acting before knowing the user or the value), sub-goals (each relation hop
//! resolved with `list_relatives`, the right record updated with the right value or the right
//! message sent, the final state equal to the expected one) and required interactions (each hidden
//! slot revealed). The task's `workflow` is the reference solution, one line per agent turn
//! (`ask SLOT: question`, `call TOOL {json}`, `answer text`); [`oracle_script`] reads it back and
//! [`replay`] plays it in the tool environment.
//!
//! Difficulty knobs ([`RuleGenConfig`]): relation hops, number of candidates fitting the
//! description, number of hidden slots. Generation is deterministic per seed: candidate `i`
//! draws from `seed::stream(seed, "tool-world", i)` only, and duplicates (same user, path,
//! target, action, value and hidden slots) are dropped in index order.
//!
//! One job per file: errors (`error`), knobs (`config`), the generated task (`rule_task`), the
//! universe as the generator reads it (`context`), the generator (`generate`), one candidate's
//! draw (`candidate`), the task assembled (`assemble`) from its states (`state`), instruction and
//! hidden slots (`instruction`), rubric (`rubric`) and reference workflow (`workflow`); the tools
//! (`toolbox`), scripted policies (`script`) and their replay (`replay`).

mod assemble;
mod candidate;
mod config;
mod context;
mod error;
mod generate;
mod instruction;
mod replay;
mod rubric;
mod rule_task;
mod script;
mod state;
mod toolbox;
mod workflow;

pub use config::RuleGenConfig;
pub use error::RuleGenError;
pub use generate::generate;
pub use replay::{replay, replay_oracle, sft_row};
pub use rule_task::{Action, RuleTask};
pub use script::{ScriptStep, oracle_script, step_message};
pub use toolbox::{PATH_RELATIONS, tools};
