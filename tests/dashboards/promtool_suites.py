"""Run a variant of the generated promtool suite (custom thresholds, a report link, another
runbook) without re-running the test groups whose outcome is already known.

``promtool test rules`` is deterministic: a test group's outcome is a function of the group
(its input series, interval, checks) and of the rules its checks can see. The shipped suite
(``dashboards/rules/tests/stormotel-rules.test.yml`` against ``dashboards/rules/
stormotel-rules.yml``) runs whole in tests/dashboards/test_rules.py. A variant's group that is
byte-for-byte the shipped one, and whose checks read only rules that are identical in both
files, has the same outcome as there, so running it again proves nothing new; it costs up to
ten seconds of promtool each (every rule evaluated every 15 s over up to five hours).

What a group's checks can see, and so what must be identical for it to be skipped:

* every recording rule (any alert may read any of them), compared on everything promtool loads
  (expr, labels);
* each alert it names in ``alert_rule_test``: expr, ``for``, labels, and its annotations as
  well when the group expects that alert to fire (promtool compares the firing alerts' labels
  and annotations; a quiet check sees neither);
* every alert rule when a ``promql_expr_test`` reads ``ALERTS`` or ``ALERTS_FOR_STATE``;
* the file-level settings (evaluation interval, group order) and every rule group's own
  settings (name, interval).

An annotation without a template action (no ``{{``), such as ``runbook_url``, renders to its
own text, so a check of it is a comparison of two strings: where the variant's expected text
equals the variant rule's text, both are put back to the shipped rule's text before comparing
(a moved runbook URL changes no outcome); where they differ, the group runs (and fails).

A group that expects only silence (no alert firing at any check; no ``ALERTS`` query returning
samples) is also known when the only alerts that differ hold on fewer series at every instant
than the shipped ones: their expressions are the shipped ones with raised comparison thresholds
(``> 0.8`` becomes ``> 0.9`` in an alert of the one shape where that only filters: a
series above a number, joined to its placement; nothing else in the alert differs but its
annotations). Such an
alert is pending or firing only where the shipped one was, so silence stays silence (the
healthy control under ``--warning-percent 90 --critical-percent 100``); a lowered threshold
runs it.

Any other difference runs the group. A variant whose rules differ anywhere still has every one
of its changed rules evaluated over real inputs by the groups that do run, so an expression that
fails at evaluation is still caught.

Within a group that runs only because some of its checks see a changed alert (the group itself,
the settings and the recording rules are the shipped ones), the other checks have the shipped
run's outcome too: :func:`write_runs` keeps only the checks that see a changed alert, against a
rules file of the alerts they see and the recording rules those read (:func:`rules_for`; every
alert is checked quiet in the healthy control, so each changed alert is evaluated there). The
values are the whole file's: promtool evaluates rules in file order and a rule's value depends
only on the rules it reads; the rules left out are the shipped ones, over the same inputs, in
the shipped run (where an evaluation error would fail it). The healthy control under 50/60 %
thresholds is then 8 rules, not 37: 2 s of promtool instead of 10.
"""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path
from typing import Any

import yaml

_RULE_KEYS = ("expr", "for", "labels")
_GROUP_KEYS = ("name", "interval", "limit")
_ALERT_SERIES = ("ALERTS", "ALERTS_FOR_STATE")


#: libyaml's loader and dumper where PyYAML has them: the suite is 100 kB of YAML, read and
#: written a few times per variant (the pure-Python ones take seconds of CPU for that).
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


#: Each distinct text parsed once, kept pickled: the same 100 kB suite and rules file are read
#: over a hundred times in tests/dashboards, and PyYAML builds its objects in Python even with
#: libyaml's parser (~60 ms each). A pickle round trip gives every caller a fresh tree of its
#: own (callers edit what they load), with YAML aliases still one shared object.
_PARSED: dict[str, bytes] = {}


def load(path: Path) -> Any:
    text = path.read_text()
    blob = _PARSED.get(text)
    if blob is None:
        blob = _PARSED[text] = pickle.dumps(yaml.load(text, Loader=LOADER))
    return pickle.loads(blob)


def _group_texts(path: Path) -> set[str]:
    """Every test group of the suite at ``path``, dumped (for comparing a variant's groups)."""
    text = path.read_text()
    got = _GROUP_TEXTS.get(text)
    if got is None:
        got = _GROUP_TEXTS[text] = frozenset(dump(g) for g in load(path)["tests"])
    return set(got)


_GROUP_TEXTS: dict[str, frozenset[str]] = {}


def dump(data: Any, sort_keys: bool = True) -> str:
    return yaml.dump(data, Dumper=_DUMPER, sort_keys=sort_keys)


def _rules(rules_file: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    groups = load(rules_file)["groups"]
    return groups, [r for g in groups for r in g["rules"]]


def _alerts_by_name(rules: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rules:
        if "alert" in r:
            out.setdefault(str(r["alert"]), []).append(r)
    return out


#: The one alert shape whose threshold is known to filter and nothing else: a series above a
#: number, joined to the rank's placement where there is one (``(A * on (…) group_left (…) P)
#: or on (…) A`` with ``A`` = ``series > number``). A threshold elsewhere (under ``unless``,
#: inside ``count(…) < n``) can let more through when it rises, so any other shape runs.
_FILTER = re.compile(r"\(\((?P<s>[\w:]+) > (?P<a>[0-9.eE+-]+)\) \* on \([\w, ]+\) group_left"
                     r" \([\w, ]+\) [\w:]+\) or on \([\w, ]+\) \((?P=s) > (?P<b>[0-9.eE+-]+)\)")


def _only_raised(variant: dict[str, Any], shipped: dict[str, Any]) -> bool:
    """``variant`` holds wherever and whenever ``shipped`` held or less: the same, or the
    filter shape above with its threshold raised, and the same ``for`` and labels."""
    if {k: variant.get(k) for k in _RULE_KEYS} == {k: shipped.get(k) for k in _RULE_KEYS}:
        return True
    if {k: variant.get(k) for k in ("for", "labels")} != \
            {k: shipped.get(k) for k in ("for", "labels")}:
        return False
    v, s = _FILTER.fullmatch(str(variant["expr"])), _FILTER.fullmatch(str(shipped["expr"]))
    if not (v and s and v["a"] == v["b"] and s["a"] == s["b"]):
        return False
    same_shape = str(variant["expr"]).replace(f"> {v['a']})", "> N)") == \
        str(shipped["expr"]).replace(f"> {s['a']})", "> N)")
    return same_shape and float(v["a"]) >= float(s["a"])


def _expects_silence(group: dict[str, Any]) -> bool:
    return not any(c.get("exp_alerts") for c in group.get("alert_rule_test", ())) and not any(
        t.get("exp_samples") for t in group.get("promql_expr_test", ()) if _reads_alerts(
            {"promql_expr_test": [t]}))


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]], keys: tuple[str, ...]) -> bool:
    return [{k: r.get(k) for k in keys} for r in a] == [{k: r.get(k) for k in keys} for r in b]


def _reads_alerts(group: dict[str, Any]) -> bool:
    return any(name in str(t.get("expr", "")) for t in group.get("promql_expr_test", ())
               for name in _ALERT_SERIES)


def _literal(value: object) -> bool:
    return isinstance(value, str) and "{{" not in value


def _severity(alert: dict[str, Any]) -> str:
    return str((alert.get("labels") or {}).get("severity", ""))


def _shipped_literals(v_rules: list[dict[str, Any]], s_rules: list[dict[str, Any]],
                      v_suite: dict[str, Any]) -> None:
    """Put the variant's template-free annotations, in its rules and in the checks that expect
    exactly them, back to the shipped rule's text (in place; see the module docstring)."""
    shipped = {(str(r["alert"]), _severity(r)): r.get("annotations") or {}
               for r in s_rules if "alert" in r}
    moved: dict[tuple[str, str, str], tuple[str, str]] = {}
    for rule in (r for r in v_rules if "alert" in r):
        key = (str(rule["alert"]), _severity(rule))
        for name, text in (rule.get("annotations") or {}).items():
            before = shipped.get(key, {}).get(name)
            if _literal(text) and _literal(before) and text != before:
                moved[(*key, name)] = (text, before)
                rule["annotations"][name] = before
    seen: set[int] = set()  # a YAML alias makes one dict recur: put it back once
    for group in v_suite["tests"]:
        for case in group.get("alert_rule_test", ()):
            for alert in case.get("exp_alerts") or ():
                severity = str((alert.get("exp_labels") or {}).get("severity", ""))
                notes = alert.get("exp_annotations") or {}
                if id(notes) in seen:
                    continue
                seen.add(id(notes))
                for name, text in notes.items():
                    now, before = moved.get((str(case["alertname"]), severity, name),
                                            (None, None))
                    if now is not None:  # renders ``now``: expected right, or a mismatch
                        notes[name] = before if text == now else f"{text!r} != {now!r}"


def groups_to_run(variant_tests: Path, variant_rules: Path, shipped_tests: Path,
                  shipped_rules: Path) -> list[int]:
    """Indexes of the variant suite's test groups whose outcome the shipped suite's run does
    not already give (see the module docstring for the rule)."""
    return [i for i, _ in _plan(variant_tests, variant_rules, shipped_tests, shipped_rules)]


#: The checks of a group whose outcome is not known: ``alert_rule_test`` and
#: ``promql_expr_test`` indexes, the alerts they can see, and whether they see every alert
#: (None: every check, against every rule).
_Unknown = tuple[list[int], list[int], set[str], bool] | None


def _plan(variant_tests: Path, variant_rules: Path, shipped_tests: Path,
          shipped_rules: Path) -> list[tuple[int, _Unknown]]:
    """:func:`groups_to_run`, each group with its checks that must run: in a group identical to
    the shipped one (same settings, same recording rules) an alert check whose alert is
    unchanged, and a ``promql_expr_test`` that reads no changed alert, have the shipped run's
    outcome; elsewhere every check runs.

    A check of ``ALERTS`` that expects nothing sees only the changed alerts: it passed in the
    shipped run, so no unchanged alert (the same expression, ``for`` and labels: the same
    ``ALERTS`` series; annotations are not among them) put a series there. One that expects
    samples sees every alert."""
    v_suite, s_suite = load(variant_tests), load(shipped_tests)
    v_groups, v_rules = _rules(variant_rules)
    s_groups, s_rules = _rules(shipped_rules)
    _shipped_literals(v_rules, s_rules, v_suite)
    settings_same = (
        {k: v for k, v in v_suite.items() if k != "tests"}
        == {k: v for k, v in s_suite.items() if k != "tests"}
        and [{k: g.get(k) for k in _GROUP_KEYS} for g in v_groups]
        == [{k: g.get(k) for k in _GROUP_KEYS} for g in s_groups]
        and _same([r for r in v_rules if "record" in r], [r for r in s_rules if "record" in r],
                  ("record", *_RULE_KEYS)))
    v_alerts, s_alerts = _alerts_by_name(v_rules), _alerts_by_name(s_rules)
    changed = {n for n in v_alerts.keys() | s_alerts.keys() if n not in v_alerts
               or n not in s_alerts or not _same(v_alerts[n], s_alerts[n], _RULE_KEYS)}
    all_alerts_same = not changed
    # Every alert is the shipped one or the shipped one with raised thresholds: fewer alerts.
    fewer = v_alerts.keys() == s_alerts.keys() and all(
        len(v_alerts[n]) == len(s_alerts[n]) and all(
            _only_raised(v, s) for v, s in zip(v_alerts[n], s_alerts[n], strict=True))
        for n in v_alerts)
    shipped = _group_texts(shipped_tests)
    run: list[tuple[int, _Unknown]] = []
    for i, group in enumerate(v_suite["tests"]):
        same_group = settings_same and dump(group) in shipped
        if same_group and fewer and _expects_silence(group):
            continue
        cases = list(group.get("alert_rule_test", ()))
        alert_checks = [k for k, case in enumerate(cases)
                        if not _same_alert(case, v_alerts, s_alerts)]
        exprs = list(group.get("promql_expr_test", ()))
        expr_checks = [k for k, t in enumerate(exprs)
                       if not all_alerts_same and _reads_alerts({"promql_expr_test": [t]})]
        seen = {str(cases[k]["alertname"]) for k in alert_checks}
        if expr_checks:
            seen |= changed
        every = any(exprs[k].get("exp_samples") for k in expr_checks)
        if not same_group:
            run.append((i, None))
        elif alert_checks or expr_checks:
            run.append((i, (alert_checks, expr_checks, seen, every)))
    return run


def _same_alert(case: dict[str, Any], v_alerts: dict[str, list[dict[str, Any]]],
                s_alerts: dict[str, list[dict[str, Any]]]) -> bool:
    """The alert an ``alert_rule_test`` names is the shipped one, on everything the check sees
    (annotations too where it expects the alert to fire)."""
    name = str(case["alertname"])
    keys = (*_RULE_KEYS, "annotations") if case.get("exp_alerts") else _RULE_KEYS
    return name in v_alerts and name in s_alerts and _same(v_alerts[name], s_alerts[name], keys)


def write_subset(variant_tests: Path, keep: list[int], out: Path) -> Path:
    """The variant suite with only the groups in ``keep``, written beside it as ``out`` (same
    directory, so its relative ``rule_files`` still point at the variant's rules)."""
    suite = load(variant_tests)
    suite["tests"] = [g for i, g in enumerate(suite["tests"]) if i in keep]
    out.write_text(dump(suite, sort_keys=False))
    return out


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w:]){re.escape(name)}(?![\w:])", text) is not None


def rules_for(rules_file: Path, alerts: set[str], all_alerts: bool, out: Path,
              reads: str = "") -> Path:
    """The rules file with only what ``alerts`` (every alert where ``all_alerts``) can see:
    those alert rules and, transitively, every recording rule named in their text (expression,
    labels, annotations: a template may ``query`` a recorded series), in their groups and
    order (a rule reading one recorded later in its group reads the previous evaluation, as in
    the whole file). The values of the rules kept are those of the whole file's run; the rules
    left out are the shipped ones, evaluated over the same inputs in the shipped run.
    ``reads``: text of queries (``promql_expr_test`` expressions) whose recording rules are
    kept too."""
    groups = load(rules_file)["groups"]
    every = [r for g in groups for r in g["rules"]]
    kept = [r for r in every if "alert" in r and (all_alerts or str(r["alert"]) in alerts)]
    seen = "\n".join([reads, *(dump(r) for r in kept)])
    for _ in every:  # a fixed point: each pass can add a recording rule another one reads
        more = [r for r in every if "record" in r and not any(r is k for k in kept)
                and _mentions(seen, str(r["record"]))]
        if not more:
            break
        kept += more
        seen += "\n" + "\n".join(dump(r) for r in more)
    out_groups = [{**g, "rules": [r for r in g["rules"] if any(r is k for k in kept)]}
                  for g in groups]
    out.write_text(dump({"groups": [g for g in out_groups if g["rules"]]}, sort_keys=False))
    return out


def write_runs(variant_tests: Path, variant_rules: Path, shipped_tests: Path,
               shipped_rules: Path) -> list[Path]:
    """promtool suites, written beside ``variant_tests``, that together run what the shipped
    run does not already give: every group :func:`groups_to_run` names, with the checks whose
    outcome is not known, against the variant's rules those checks can see
    (:func:`rules_for`); a group unlike every shipped one runs whole against the whole file.
    One suite per group (``rule_files`` is per suite). Empty when nothing needs to run."""
    suite = load(variant_tests)
    out_dir = variant_tests.parent
    runs = []
    for i, unknown in _plan(variant_tests, variant_rules, shipped_tests, shipped_rules):
        group = suite["tests"][i]
        rules_path = variant_rules
        if unknown is not None:
            alert_checks, expr_checks, seen, every = unknown
            group = {**group,
                     "alert_rule_test": [c for k, c in enumerate(group.get("alert_rule_test", ()))
                                         if k in alert_checks],
                     "promql_expr_test": [t for k, t in enumerate(group.get("promql_expr_test",
                                                                           ()))
                                          if k in expr_checks]}
            group = {k: v for k, v in group.items() if v != []}
            rules_path = rules_for(variant_rules, seen, every, out_dir / f"group-{i}.rules.yml",
                                   "\n".join(str(t["expr"])
                                             for t in group.get("promql_expr_test", ())))
        one = {**suite, "rule_files": [os.path.relpath(rules_path, out_dir)], "tests": [group]}
        path = out_dir / f"group-{i}.test.yml"
        path.write_text(dump(one, sort_keys=False))
        runs.append(path)
    return runs


def write_expecting(suite_path: Path, rules_path: Path) -> list[Path]:
    """promtool suites, written beside ``suite_path``, one per group that expects something
    (an alert firing, a query returning samples), each with only those checks, against the
    rules they see (:func:`rules_for`): for a suite whose outcome is the shipped one's by
    construction except where a check can tell a series found from one missing (a renamed
    selector that finds nothing is silence too)."""
    suite = load(suite_path)
    runs = []
    for i, group in enumerate(suite["tests"]):
        cases = [c for c in group.get("alert_rule_test", ()) if c.get("exp_alerts")]
        exprs = [t for t in group.get("promql_expr_test", ()) if t.get("exp_samples")]
        if not cases and not exprs:
            continue
        one = {k: v for k, v in group.items() if k not in ("alert_rule_test", "promql_expr_test")}
        one.update({"alert_rule_test": cases} if cases else {})
        one.update({"promql_expr_test": exprs} if exprs else {})
        every = any(name in str(t["expr"]) for t in exprs for name in _ALERT_SERIES)
        rules = rules_for(rules_path, {str(c["alertname"]) for c in cases}, every,
                          suite_path.parent / f"expecting-{i}.rules.yml",
                          "\n".join(str(t["expr"]) for t in exprs))
        path = suite_path.parent / f"expecting-{i}.test.yml"
        path.write_text(dump({**suite, "rule_files": [os.path.relpath(rules, path.parent)],
                              "tests": [one]}, sort_keys=False))
        runs.append(path)
    return runs


#: PromQL that can return samples with no series selected: ``absent``/``absent_over_time``
#: (1 where nothing is), ``vector``, ``time``, ``scalar`` and the clock functions (called with
#: no argument they read ``time()``), ``pi``; and a ``__name__`` matcher, which selects series
#: by a pattern rather than by a name this module can look for. A rule containing any of them
#: is never left out by :func:`rules_reading`.
_FROM_NOTHING = re.compile(r"\b(absent|absent_over_time|vector|time|scalar|pi|day_of_month|"
                           r"day_of_week|day_of_year|days_in_month|hour|minute|month|year)\s*\("
                           r"|__name__")
_SERIES_NAME = re.compile(r"^\s*([a-zA-Z_:][\w:]*)")


def input_names(group: dict[str, Any]) -> set[str]:
    """The metric names a test group's ``input_series`` hold."""
    names = set()
    for s in group.get("input_series", ()):
        m = _SERIES_NAME.match(str(s["series"]))
        names.add(m.group(1) if m else "")
    return names


def rules_reading(rules_file: Path, names: set[str], out: Path) -> tuple[Path, set[str]]:
    """The rules file with only the rules that can return a sample when the TSDB holds only
    series of ``names`` (a test group's inputs), in their groups and order; returns the file
    and the kept rules' names (``record``/``alert`` and severity).

    A PromQL expression whose selectors all name metrics that have no series, and that has no
    function producing samples from nothing (:data:`_FROM_NOTHING`), is empty at every
    evaluation: every selector is empty, and every operator, aggregation and function of empty
    vectors is empty (no sample, so no value, no duplicate series, no matching error). Such a
    rule records nothing, and an alert of it never fires or is pending, so leaving it out
    changes no value, alert, ``ALERTS`` series or template query of the rules kept, whatever
    the checks. Kept, to a fixed point: rules mentioning an input's name, a kept recording
    rule's name, or (once any alert is kept) ``ALERTS``/``ALERTS_FOR_STATE``; and every rule
    matching :data:`_FROM_NOTHING`. Names are matched as whole PromQL identifiers anywhere in
    the rule (expression, labels, annotations), so a mention in a comment or string keeps the
    rule too: the test errs towards keeping."""
    groups = load(rules_file)["groups"]
    every = [r for g in groups for r in g["rules"]]
    texts = [dump(r) for r in every]
    seen = set(names)
    kept: set[int] = set()
    changed = True
    while changed:
        changed = False
        for i, (rule, text) in enumerate(zip(every, texts, strict=True)):
            if i in kept:
                continue
            if _FROM_NOTHING.search(str(rule.get("expr", ""))) or any(
                    _mentions(text, n) for n in seen):
                kept.add(i)
                seen.add(str(rule["record"]) if "record" in rule else _ALERT_SERIES[0])
                if "alert" in rule:
                    seen.add(_ALERT_SERIES[1])
                changed = True
    ids = {id(r) for i, r in enumerate(every) if i in kept}
    out_groups = [{**g, "rules": [r for r in g["rules"] if id(r) in ids]} for g in groups]
    out.write_text(dump({"groups": [g for g in out_groups if g["rules"]]}, sort_keys=False))
    return out, {rule_id(r) for i, r in enumerate(every) if i in kept}


def rule_id(rule: dict[str, Any]) -> str:
    if "record" in rule:
        return str(rule["record"])
    return f"{rule['alert']}/{rule.get('labels', {}).get('severity', '')}"


def write_per_group(suite_path: Path, rules_path: Path, out_dir: Path
                    ) -> tuple[list[Path], set[str]]:
    """``suite_path`` split into one promtool suite per test group, written to ``out_dir``,
    each against the rules that can return a sample from that group's inputs
    (:func:`rules_reading`): the same outcome per group as the whole file, without evaluating
    at every step the rules that are empty there. Returns the suites and every rule some group
    keeps (a rule no group keeps is evaluated over no input at all: the caller checks)."""
    suite = load(suite_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs, covered = [], set()
    for i, group in enumerate(suite["tests"]):
        rules, kept = rules_reading(rules_path, input_names(group),
                                    out_dir / f"inputs-{i}.rules.yml")
        covered |= kept
        path = out_dir / f"inputs-{i}.test.yml"
        path.write_text(dump({**suite, "rule_files": [rules.name], "tests": [group]},
                             sort_keys=False))
        runs.append(path)
    return runs, covered
