"""Replay: a recorded run's world, served back to the graph.

A recorded run is a sequence of events; its ``tool_call`` / ``tool_result`` pairs are everything
the hunt ever learned from the world (``Runtime.observe`` records them). Two ways to serve them:

- **strict** (``sleuth replay RUN``): the same graph and policy must ask the same questions in the
  same order; each is answered with the recorded answer, and every event the replay emits is
  compared with the recorded one (``EventChecker``). The first difference is a ``Divergence``.
- **world** (``sleuth replay RUN --policy P``): another policy asks what it likes. Questions about
  git, the host and tools are answered when the recording holds the same call (name and args);
  measurements come from a pool of the recorded samples of each state (so a different number of
  samples, or samples asked in a different order, can still be answered); where the pool serves
  the very samples a recorded call with the same arguments got, that call's whole answer is served
  (its launch groups and costs too, which the policy's decisions read). A model's call is
  answered only when the recording holds the very same request (the same model shown the same
  messages); otherwise the model is asked. A question the recording cannot answer goes live
  (against the scenario rebuilt from its spec) or, offline,
  stops the replay with ``Unanswerable``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from transcripts.store import redact


class Unanswerable(RuntimeError):
    """A replay's call that the recording cannot answer (and no live world may)."""


class ReplayStop(Exception):
    """Ends a replay from inside the graph (it is not the hunt's failure but the replay's finding)."""


THE_END = "the end of the recording (nothing more was recorded there)"


def past_the_end(events: list[dict]) -> int:
    """The event number a replay that goes on past the recording diverges at: one after its last
    (it said "event None", as if no place could be named)."""
    return max((e["seq"] for e in events if e.get("seq") is not None), default=0) + 1


class Divergence(ReplayStop):
    def __init__(self, seq: int | None, expected: Any, got: Any) -> None:
        super().__init__(f"diverged at event {seq}: expected {_short(expected)}, got {_short(got)}")
        self.seq, self.expected, self.got = seq, expected, got


class Offline(ReplayStop, Unanswerable):
    pass


def _state(args: dict) -> tuple[str, str, str]:
    """A measured state as the calls name it: commit, launch, env."""
    return args["ref"], args["launch"], json.dumps(args.get("env") or {}, sort_keys=True)


def _sides(name: str, args: dict, result: Any) -> list[tuple[dict, Any]]:
    """(state args, its part of the result) of each state a ``measure_pair`` (sides a and b) or
    ``measure_arms`` (a list of arms) call measured; the parts are None without a result. An arm
    the experiment left out (``other_if_needed``: its result None) measured nothing."""
    if name == "measure_arms":
        if result is None:
            return [(arm, None) for arm in args["arms"]]
        return [(arm, got) for arm, got in zip(args["arms"], result["arms"], strict=True) if got is not None]
    return [(args[k], result[k] if result is not None else None) for k in ("a", "b")]


MEASURING = ("measure", "probe", "measure_pair", "measure_arms")


def _samples_of(name: str, result: Any) -> Any:
    """The samples a measuring call's result holds, per state: what two answers must share to be
    the same answer (the rest, groups and costs, is how they were taken)."""
    if name == "measure_arms":
        return [arm["samples"] if arm else None for arm in result["arms"]]
    if name == "measure_pair":
        return [result[k]["samples"] for k in ("a", "b")]
    return result["samples"] if isinstance(result, dict) else result


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[:limit] + "..."


def normal(value: Any) -> Any:
    """How a value looks once stored (redacted, JSON round-tripped): what comparisons see."""
    return json.loads(json.dumps(redact(value), default=str))


@dataclass
class Answer:
    result: Any
    error: dict | None


def recorded_calls(events: list[dict]) -> list[tuple[int, str, dict, Answer]]:
    """(seq, name, args, answer) of each tool_call followed by its tool_result, and of each model
    call (``llm_request`` followed by its ``llm_response``, named ``llm``)."""
    out = []
    pending: dict | None = None
    for e in events:
        payload = json.loads(e["payload"]) if isinstance(e["payload"], str) else e["payload"]
        if e["kind"] in ("tool_call", "llm_request"):
            pending = {"seq": e["seq"], **payload}
        elif e["kind"] in ("tool_result", "llm_response") and pending is not None:
            out.append(
                (pending["seq"], pending["name"], pending["args"], Answer(payload.get("result"), payload.get("error")))
            )
            pending = None
    return out


class Cassette:
    """Answers ``Runtime.observe`` from a recording (see the module docstring for the two modes)."""

    def __init__(
        self,
        events: list[dict],
        strict: bool = True,
        live: bool = False,
        rewrite: tuple[str, str] | None = None,
    ) -> None:
        self.calls = recorded_calls(events)
        self.end = past_the_end(events)
        self.strict, self.live, self.rewrite = strict, live, rewrite
        self.cursor = 0
        self.served = 0
        self.went_live = 0
        # world mode: per state (ref, launch) the pool of recorded samples
        self.pool: dict[tuple[str, str, str], list[float]] = {}
        self.verify: dict[tuple[str, str, str], list[float]] = {}
        self.handed: dict[tuple[str, str, str], int] = {}  # states this replay measured, and how many samples
        for _seq, name, args, ans in self.calls:
            if ans.error is None:
                self._pool_add(name, args, ans.result)

    def learn(self, name: str, args: dict, result: Any) -> None:
        """A call answered live: its answer serves the same question later."""
        args = self._key_args(args)
        self.calls.append((-1, name, args, Answer(result, None)))
        self._pool_add(name, args, result)
        if name in ("measure_pair", "measure_arms"):
            for side, got in _sides(name, args, result):
                key = _state(side)
                n = len(got["samples"])
                self.handed[key] = self.handed.get(key, 0) + n if args.get("fresh") else max(self.handed.get(key, 0), n)
        if name in ("measure", "probe"):
            n = len(result["samples"]) if name == "measure" else args["start"] + args["n"]
            key = _state(args)
            fresh = name == "measure" and args.get("fresh")  # new samples on top of what it had
            self.handed[key] = self.handed.get(key, 0) + n if fresh else max(self.handed.get(key, 0), n)

    def _pool_add(self, name: str, args: dict, result: Any) -> None:
        """Both are views of a state's sample cache: measure returns all of it, probe the slice
        [start, start + n). The pool is that cache as far as the recording saw it."""
        if name in ("measure_pair", "measure_arms"):
            for side, got in _sides(name, args, result):
                if args.get("fresh"):  # new samples only: they follow whatever the state had
                    self.pool.setdefault(_state(side), []).extend(got["samples"])
                else:
                    self._pool_add("measure", {**side, "samples": args["samples"]}, got)
            return
        if name not in ("measure", "probe"):
            return
        key = _state(args)
        if name == "measure" and args.get("fresh"):  # new samples only: they follow whatever the state had
            self.pool.setdefault(key, []).extend(result["samples"])
            return
        probed = result["samples"] if isinstance(result, dict) else result  # a list before costs were kept
        start, got = (0, result["samples"]) if name == "measure" else (args["start"], probed)
        have = self.pool.setdefault(key, [])
        if start + len(got) > len(have) and start <= len(have):
            have.extend(got[len(have) - start :])
        if name == "measure":
            self.verify[key] = result.get("verify_ms", [])

    def _key_args(self, args: dict) -> dict:
        if self.rewrite is None:
            return normal(args)
        new, old = self.rewrite
        return normal(json.loads(json.dumps(args).replace(new, old)))

    def answer(self, name: str, args: dict) -> Answer | None:
        args = self._key_args(args)
        if self.strict:
            if self.cursor >= len(self.calls):
                raise Divergence(self.end, THE_END, {"name": name, "args": args})
            seq, rname, rargs, ans = self.calls[self.cursor]
            if (rname, normal(rargs)) != (name, args):
                raise Divergence(seq, {"name": rname, "args": rargs}, {"name": name, "args": args})
            self.cursor += 1
            self.served += 1
            return ans
        ans = self._from_world(name, args)
        if ans is not None:
            self.served += 1
            return self._as_recorded(name, args, ans)
        if name == "llm":  # the model under test is not the world: it answers even offline
            return None
        if not self.live:
            raise Offline(f"--offline: the recording cannot answer {name} {_short(args)}")
        self.went_live += 1
        return None

    def _as_recorded(self, name: str, args: dict, served: Answer) -> Answer:
        """The recorded answer itself where the same call got the very samples served: with its
        launch groups, costs and verify times, which a pooled answer lacks and which the policy's
        decisions read (a launch-aware test, whether launches are dear). Another policy that walks
        the recorded path then decides as the recorded one did; off it, the pool serves."""
        if name not in MEASURING:
            return served
        want = _samples_of(name, served.result)
        for _seq, rname, rargs, ans in self.calls:
            if rname == name and ans.error is None and normal(rargs) == args and _samples_of(name, ans.result) == want:
                return ans
        return served

    def _from_world(self, name: str, args: dict) -> Answer | None:
        if name in ("git_resolve", "git_prepare_revert") and self.live:
            # Calls that write git objects run in the rebuilt repo itself: a snapshot of uncommitted
            # work gets the same (content-addressed) SHA there, and a prepared revert exists there,
            # so the live probes that follow can check them out.
            return None
        if name == "clock":
            return Answer(0.0, None)  # a replay has no wall-time budget of its own
        if name == "probe_budget":
            key = _state(args)
            return Answer({"new": key not in self.handed, "measured": len(self.handed)}, None)
        if name == "measure" and args.get("fresh"):
            key = _state(args)
            have, start = self.pool.get(key, []), self.handed.get(key, 0)
            if len(have) < start + args["samples"]:
                return None
            self.handed[key] = start + args["samples"]
            return Answer({"samples": have[start : start + args["samples"]], "verify_ms": []}, None)
        if name == "measure":
            key = _state(args)
            have = self.pool.get(key, [])
            n = max(args["samples"], self.handed.get(key, 0))
            if len(have) < n:
                return None
            self.handed[key] = n
            return Answer({"samples": have[:n], "verify_ms": self.verify.get(key, [])[:n]}, None)
        if name in ("measure_pair", "measure_arms") and args.get("fresh"):
            served, ends = [], {}
            for i, (side, _) in enumerate(_sides(name, args, None)):
                key = _state(side)
                have, start = self.pool.get(key, []), self.handed.get(key, 0)
                if len(have) < start + args["samples"] and i == 2 and args.get("other_if_needed"):
                    served.append(None)  # the recording's experiment left it out: so does this one
                    continue
                if len(have) < start + args["samples"]:
                    return None
                served.append({"samples": have[start : start + args["samples"]], "verify_ms": []})
                ends[key] = start + args["samples"]
            self.handed.update(ends)
            if name == "measure_arms":
                return Answer({"arms": served, "groups": [[] for _ in served]}, None)
            return Answer(dict(zip(("a", "b"), served, strict=True)), None)
        if name == "measure_pair":
            sides = {}
            for side in ("a", "b"):
                got = self._from_world("measure", {**args[side], "samples": args["samples"]})
                if got is None:
                    return None
                sides[side] = got.result
            return Answer(sides, None)
        if name == "probe":
            key = _state(args)
            have, start = self.pool.get(key, []), args["start"]
            if len(have) < start + args["n"]:
                return None
            self.handed[key] = max(self.handed.get(key, 0), start + args["n"])
            return Answer({"samples": have[start : start + args["n"]]}, None)
        for _seq, rname, rargs, ans in self.calls:
            if rname == name and normal(rargs) == args:
                return ans
        return None


class EventChecker:
    """Stands in for the Store in a strict replay: compares every emitted event with the recorded
    one at the same position (kind, text and payload as stored; times and durations aside)."""

    def __init__(self, events: list[dict]) -> None:
        self.expected = [e for e in events if not _is_resume_note(e)]
        self.end = past_the_end(events)
        self.pos = 0
        self.run_fields: dict[str, Any] = {}  # what the replay wrote to its run's row (the verdict)

    def event(self, run_id: str, kind: str, text: str, payload: Any = None, duration_s: float | None = None, t=None):
        got = _emitted(kind, text, payload)
        if self.pos >= len(self.expected):
            raise Divergence(self.end, THE_END, got)
        e = self.expected[self.pos]
        want = _as_stored(e)
        if want != got:
            raise Divergence(e["seq"], want, got)
        self.pos += 1
        return e["seq"]

    def remaining(self) -> list[dict]:
        return self.expected[self.pos :]

    def update_run(self, run_id: str, **fields: Any) -> None:
        """Kept, not written: the replayed verdict is checked as well as the events (a summary's
        wording is in the verdict, in no event)."""
        self.run_fields.update(fields)

    # the rest of the Store's writing interface: a strict replay writes nothing
    def start_run(self, *a, **k) -> None: ...
    def put_measurement(self, *a, **k) -> None: ...
    def put_hypotheses(self, *a, **k) -> None: ...
    def close(self) -> None: ...


def _is_resume_note(e: dict) -> bool:
    return e["kind"] == "note" and '"phase": "resume"' in (e["payload"] or "")


def _emitted(kind: str, text: str, payload: Any) -> dict:
    """An event being written, as the store would hold it (what a recorded one is compared with)."""
    return {"kind": kind, "text": normal(text), "payload": normal(payload)}


def _as_stored(e: dict) -> dict:
    """A recorded event (a store row) in the same shape as ``_emitted``."""
    return {"kind": e["kind"], "text": e["text"], "payload": json.loads(e["payload"])}


class Resumption:
    """A run resumed after its driver died: the node that was running starts again from the last
    checkpoint, and what it had already asked the world, and recorded, before the driver died is
    served back in order (``answer``) instead of asked again: no measured state is measured twice,
    no prepared revert prepared twice. The events it re-emits up to that point are the ones the
    store already holds (``stored``): not written twice. From the first call or event that differs
    from the recording, or at its end (the call in flight when the driver died), everything is
    live, for good.

    ``after_seq``: the last event seq of the checkpoint (``Hunt.seq``); what came after it is the
    interrupted node's. A call the host did not answer (``HostError``: the link dropped, which
    stopped the run) is asked again, live, with everything after it."""

    def __init__(self, events: list[dict], after_seq: int) -> None:
        after = [e for e in events if e["seq"] > after_seq and not _is_resume_note(e)]
        calls = recorded_calls(after)
        lost = next((i for i, c in enumerate(calls) if (c[3].error or {}).get("kind") == "HostError"), len(calls))
        self.calls = calls[:lost]
        self.events = [(e["seq"], _as_stored(e)) for e in after]  # (its place, what it holds)
        self.cursor = self.event_cursor = 0
        self.served = self.skipped = 0
        self.live = self.writing = False
        self.reported = False  # whether ``caught_up`` has said what was served

    def caught_up(self) -> dict | None:
        """Once, when the resumption has just gone live: what it served (for the transcript)."""
        if not self.live or self.reported:
            return None
        self.reported = True
        return {"served": self.served, "recorded": len(self.calls), "events_not_rewritten": self.skipped}

    def answer(self, name: str, args: dict) -> Answer | None:
        if not self.live and self.cursor < len(self.calls):
            _seq, rname, rargs, ans = self.calls[self.cursor]
            if (rname, normal(rargs)) == (name, normal(args)):
                self.cursor += 1
                self.served += 1
                return ans
        self.live = True
        return None

    def learn(self, name: str, args: dict, result: Any) -> None:
        """A live answer: nothing to keep (the store records it, as any live call)."""

    def stored(self, kind: str, text: str, payload: Any) -> int | None:
        """The seq of this event if it is the next one the dead driver recorded (so it is in the
        store already, not to be written twice); None: it is new, write it. The seq is the event's
        place in the transcript: a checkpoint taken after it starts there, written twice or not
        (a node the dead driver had finished, all its events, ends at its last one)."""
        if self.writing or self.event_cursor >= len(self.events):
            self.writing = True
            return None
        seq, recorded = self.events[self.event_cursor]
        if recorded != _emitted(kind, text, payload):
            self.writing = True
            return None
        self.event_cursor += 1
        self.skipped += 1
        return seq
