"""What puts an answer on the review list (GET /v1/review, the dashboard's "to review" panel): the rule
in words and numbers, shared by the ledger's reader and the benchmark that measures it.

An answer is listed when any signal says it may be wrong:
    low_grounded       groundedness <= REVIEW_AT (inclusive: an answer half of whose claims are unsupported
                       is listed)
    invalid_citation   a citation to a passage, law or article that was not sent
    judge_unfaithful   the judge's faithfulness <= JUDGE_REVIEW_AT
    marked_wrong       a user marked it wrong
A refusal (quality.refusal) is never listed as ungrounded: refusals are a list of their own.
"""
from __future__ import annotations

REVIEW_AT = 0.5
JUDGE_REVIEW_AT = 0.5
WHY = ("marked_wrong", "low_grounded", "invalid_citation", "judge_unfaithful")
