"""The hypothesis categories, one module each, all of one shape:

- ``NAME``: the category as hypotheses carry it;
- ``suspect(hunt, rt, add)``: state its hypotheses (``add(category, statement, test, subject)``
  returns the new hypothesis), each with the test that could refute it;
- ``test(hunt, rt, h)``: run that test (an A/B from ``agent.experiments``, or a reading) and write
  the verdict on the hypothesis and its group, localizing within the group when it is supported;
- ``name(hunt, rt, sup)``: name the cause the supported hypotheses point at (``hunt.root_*``);
- ``action(hunt)``: the fix a person approves.

History also confirms (``history.confirm``: the revert A/B); the others' own A/B is their proof.
``broken`` is the other mode of a hunt (HEAD does not serve at all), with its own shape. The
policy (``agent.policy``) only orders the ledger and reads it.
"""

from __future__ import annotations

from agent.categories import config, dependencies, environment, hardware, history, uncommitted

# The ledger's order: cheapest first (a reading, then one A/B each, then the bisection).
LEDGER = (hardware, environment, uncommitted, dependencies, history, config)
BY_NAME = {m.NAME: m for m in LEDGER}
# Which supported category names the cause first (a commit is the most specific).
PRIORITY = ("history", "dependencies", "environment", "uncommitted", "config", "hardware")
# The verdict's root-cause kind -> its category.
BY_KIND = {
    "commit": history,
    "dependency": dependencies,
    "env": environment,
    "uncommitted": uncommitted,
    "config": config,
    "hardware": hardware,
}
