"""Grading: verifiers over final state, trajectories and responses, and their aggregation.

Every verifier returns a `Score`. The checklists (`check_state`, `check_trajectory`,
`check_response`) give partial credit; `gold_replay` compares the agent's final state
with the reference solution's; `judge_rubric` asks an LLM judge; `aggregate` combines.
"""

from agentenv.grading.aggregate import Aggregator, aggregate, aggregate_task
from agentenv.grading.checklist import CheckResult, VerifierError, checklist_score, lookup
from agentenv.grading.gold_replay import (
    ReplayEnv,
    ReplayOutcome,
    compare_states,
    gold_replay,
    gold_replay_envs,
    replay,
)
from agentenv.grading.response_checks import (
    ContainsCheck,
    JsonFieldCheck,
    NotContainsCheck,
    RegexCheck,
    ResponseCheck,
    check_response,
    extract_json,
)
from agentenv.grading.rubric import (
    Criterion,
    CriterionVerdict,
    RubricError,
    RubricJudge,
    build_messages,
    judge_rubric,
    normalize_criteria,
    parse_verdicts,
)
from agentenv.grading.score import Score
from agentenv.grading.state_checks import (
    CountCheck,
    FieldCheck,
    NamedCheck,
    StateCheck,
    check_state,
)
from agentenv.grading.trajectory_checks import (
    CalledCheck,
    LimitCheck,
    NotCalledCheck,
    OrderCheck,
    TrajectoryCheck,
    calls_of,
    check_trajectory,
    records_between,
)

__all__ = [
    "Aggregator",
    "CalledCheck",
    "CheckResult",
    "ContainsCheck",
    "CountCheck",
    "Criterion",
    "CriterionVerdict",
    "FieldCheck",
    "JsonFieldCheck",
    "LimitCheck",
    "NamedCheck",
    "NotCalledCheck",
    "NotContainsCheck",
    "OrderCheck",
    "RegexCheck",
    "ReplayEnv",
    "ReplayOutcome",
    "ResponseCheck",
    "RubricError",
    "RubricJudge",
    "Score",
    "StateCheck",
    "TrajectoryCheck",
    "VerifierError",
    "aggregate",
    "aggregate_task",
    "build_messages",
    "calls_of",
    "check_response",
    "check_state",
    "check_trajectory",
    "checklist_score",
    "compare_states",
    "extract_json",
    "gold_replay",
    "gold_replay_envs",
    "judge_rubric",
    "lookup",
    "normalize_criteria",
    "parse_verdicts",
    "records_between",
    "replay",
]
