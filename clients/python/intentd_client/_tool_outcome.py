"""What a guarded tool call came to, and the words that tell the model.

A model retries what looks unfinished. So every answer says plainly whether
the action happened now, had already happened (a replay: do not retry), is
happening elsewhere (do not retry), or did not happen (what to change before
calling again). The first word of ``text`` is the verdict in capitals;
``to_dict()`` is the same for programs. The Node package
(clients/agent-tools/src/outcome.js) words them the same way.

Outcomes, by what the model should do next:
    executed     done now; the result is the provider's answer
    recovered    an interrupted earlier call had acted: the provider's record
                 of it, found by txid; nothing done now (replay)
    replayed     done by an earlier call: the stored result (replay)
    failed       refused for good by the provider, now or earlier (replay
                 when earlier); a retry returns the same failure
    released     the provider surely did not act; calling again is fine
    in_progress  another call holds the action; do not retry
    pending_approval  the payment policy holds it for a person; nothing done
    unknown      the provider call ended without an answer; the next call
                 with the same arguments resumes the same action
    refused      the anchor function refused the arguments; nothing frozen
    error        intentd (or the tool) refused or failed before acting
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

OUTCOMES = ("executed", "recovered", "replayed", "failed", "released", "in_progress",
            "pending_approval", "unknown", "refused", "error")

_IS_ERROR = {"failed", "released", "unknown", "refused", "error"}
_WITH_RESULT = {"executed", "recovered", "replayed"}
# Codes after which the same call may succeed a little later.
_TRANSIENT = {"unavailable", "timeout", "storage_error", "overloaded", "shutting_down",
              "internal"}


class ToolOutcome:
    """One guarded tool call's outcome. ``text`` is for the model (the
    content of the tool message); ``to_dict()`` for programs.

    outcome: one of OUTCOMES; is_error: the model should read it as a failed
    tool call; replay: nothing was done now, it had already happened;
    intent_ref, action_type, txid; result: the provider's answer or the
    stored one (None for outcomes without one); error: intentd's
    {code, message, field} or the provider's stored error value;
    diverged_fields: where this call's arguments differ from the frozen
    intent; recorded: False when intentd could not store the outcome.
    """

    def __init__(self, outcome: str, *, replay: bool = False,
                 intent_ref: Optional[str] = None, action_type: Optional[str] = None,
                 txid: Optional[str] = None, result: Any = None, error: Any = None,
                 diverged_fields: Optional[List[str]] = None, recorded: bool = True,
                 recovering: bool = False, waited: Optional[float] = None):
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}")
        self.outcome = outcome
        self.replay = replay
        self.is_error = outcome in _IS_ERROR
        self.intent_ref = intent_ref
        self.action_type = action_type
        self.txid = txid
        self.result = result
        self.error = error
        self.diverged_fields = list(diverged_fields or [])
        self.recorded = recorded
        self.recovering = recovering
        self.waited = waited
        self.text = _model_text(self)

    def to_dict(self) -> Dict[str, Any]:
        """The members a program reads (as the Node package's toJSON)."""
        out: Dict[str, Any] = {
            "outcome": self.outcome, "replay": self.replay, "is_error": self.is_error,
            "intent_ref": self.intent_ref, "action_type": self.action_type,
            "txid": self.txid, "diverged_fields": self.diverged_fields,
        }
        if self.outcome in _WITH_RESULT:
            out["result"] = self.result
        if self.error is not None:
            out["error"] = self.error
        if not self.recorded:
            out["recorded"] = False
        return out

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"<ToolOutcome {self.outcome} {self.intent_ref} replay={self.replay}>"


def _sentence(message: Any) -> str:
    m = str(message if message is not None else "").strip()
    return m if m.endswith((".", "!", "?")) else m + "."


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _divergence(o: ToolOutcome, tense: str) -> str:
    if not o.diverged_fields:
        return ""
    fields = ", ".join(o.diverged_fields)
    if tense == "now":
        return (f" Your arguments differed from the ones it was first asked with in: {fields}; "
                "the first ones were used.")
    return (f" Your arguments differ from the ones it was first asked with in: {fields}; "
            "the first ones stand (only an operator can amend them).")


def _error_hint(o: ToolOutcome) -> str:
    code = (o.error or {}).get("code") if isinstance(o.error, dict) else None
    if code in ("invalid_field", "missing_field"):
        return "Correct that argument and call again."
    if code in ("payload_mismatch", "frozen_input_unavailable"):
        return f"Call again with the arguments first used for {o.intent_ref}."
    if code in ("forbidden", "anchor_error"):
        return "Do not retry."
    if code == "policy_refused":
        return ("The payment policy refuses this amount: do not retry; tell the user that a "
                "person must review it.")
    if code in _TRANSIENT:
        return "Try again in a little while with the same arguments."
    return "Do not retry as is."


def _model_text(o: ToolOutcome) -> str:
    w = f"{o.action_type} for {o.intent_ref}" if o.intent_ref else "this action"
    no_retry = f" Do not call this tool again for {o.intent_ref}." if o.intent_ref else ""
    if o.outcome == "executed":
        text = f"DONE: {w} was carried out now (txid {o.txid})."
        if o.recovering:
            text += (" An earlier attempt had been interrupted; the provider was asked again "
                     "under the same txid.")
        text += _divergence(o, "now")
        if not o.recorded:
            text += (f" (intentd could not record it: {o.error['code']}; calling again "
                     "resumes this same action instead of starting a new one.)")
        return f"{text}{no_retry}\nResult: {_json(o.result)}"
    if o.outcome == "recovered":
        return (f"ALREADY DONE: {w} had been carried out by an earlier call that was "
                "interrupted; this is the provider's record of it, and nothing was done now."
                f"{_divergence(o, 'past')}{no_retry}\nResult: {_json(o.result)}")
    if o.outcome == "replayed":
        return (f"ALREADY DONE (replay): {w} was carried out by an earlier call; nothing was "
                "done now and this is the stored result. It has happened."
                f"{_divergence(o, 'past')}{no_retry}\nResult: {_json(o.result)}")
    if o.outcome == "failed":
        head = (f"FAILED EARLIER (replay): the provider refused {w} for good on an earlier "
                "call; nothing was done now." if o.replay
                else f"FAILED: the provider refused {w} for good.")
        return (f"{head} Do not retry: a retry returns this same failure."
                f"{_divergence(o, 'past' if o.replay else 'now')}\nError: {_json(o.error)}")
    if o.outcome == "released":
        return (f"NOT DONE: the provider did not carry out {w}; nothing happened. You may call "
                f"this tool again later with the same arguments.\nError: {_json(o.error)}")
    if o.outcome == "in_progress":
        return (f"IN PROGRESS: another call is carrying out {w} right now (waited "
                f"{round(o.waited or 0, 1):g} s). Do not retry and do not try another way; say "
                "that it is in progress. A later call with the same arguments returns its "
                "result without acting again.")
    if o.outcome == "pending_approval":
        return (f"WAITING FOR APPROVAL: {w} is held for a person's approval "
                f"({_sentence((o.error or {}).get('message'))}) Nothing was done. Do not retry "
                "and do not try another way; tell the user that the charge is being reviewed.")
    if o.outcome == "unknown":
        return (f"OUTCOME UNKNOWN: the call to the provider ({w}) ended without an answer; it "
                "may or may not have happened. Do not try another way. Calling this tool again "
                "with the same arguments is safe: it resumes this same action instead of "
                f"starting a new one.\nError: {_json(o.error)}")
    if o.outcome == "refused":
        return f"REFUSED: {_sentence(o.error['message'])} Nothing was done."
    e = o.error or {}
    where = f" on {e['field']}" if e.get("field") else ""
    return (f"ERROR ({e.get('code')}{where}): {_sentence(e.get('message'))} Nothing was done. "
            f"{_error_hint(o)}")
