"""What an auditor reads from an opened bundle, and brings along (keys, labels, profiles).

Every piece is loaded on first use and kept; a piece that cannot be loaded raises
``Unavailable`` with the reason, which the check that needed it reports as its failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

from runner import data, paths, safe_read
from runner.bundle import PROFILE_FILE
from runner.fingerprint.host import node_file
from runner.bundle.filelist import (
    BOOKKEEPING,
    ENVELOPE,
    MANIFEST,
    SIGNER_KEY,
    file_digests,
    list_files,
    read_manifest,
)
from runner.bundle.signing import read_envelope
from runner.errors import RunnerError, UserError
from runner.events import bounded_json
from runner.manifest.untrusted_yaml import load_untrusted_yaml
from runner.safe_npy import load_npy
from runner.results.record import Result
from runner.keys import key_from_dict
from runner.profiles import Profile, profile_from_dict
from runner.events import Event, read_events
from runner.score.evaluations import ScoredEvaluation, load_predictions, score_evaluations
from runner.score.tta import Evaluation, EventStreamError, Timeline, timeline
from runner.tasks import Rules, Task, get_task
from runner.data.store import StagedData
from runner.data.synthetic import smoke_data


class Unavailable(RunnerError):
    """A piece of evidence is missing or unreadable; the message says which and why."""

    default_fix = "verify the bundle as `runner bundle` made it (copy or download it again)"


def _staged_default(task_id: str) -> StagedData:
    return data.staged(task_id)


def _synthetic_default(task_id: str, folder: Path) -> StagedData:
    """The smoke run's synthetic data, regenerated exactly as ``reproduce --smoke`` makes it."""
    return smoke_data(task_id, folder)


@dataclass
class Auditor:
    """What the person running ``verify`` trusts: keys, their own data, their own profiles."""

    trusted_keys: list[SSlibKey] = field(default_factory=list)
    staged: Callable[[str], StagedData] = _staged_default
    synthetic: Callable[[str, Path], StagedData] = _synthetic_default
    profiles_dir: Path | None = None  # default: the repository's hardware_profiles/
    # Ledgers the keys' owners published (``runner verify --ledger``), by key id: their lines
    # as JSON values, untrusted (runner.verify.ledger checks the chain).
    ledgers: dict[str, list] = field(default_factory=dict)

    def repository_profile_path(self, profile_id: str) -> Path:
        return Path(self.profiles_dir or paths.profiles_dir()) / f"{profile_id}.yaml"


def _json(path: Path, what: str) -> object:
    """A JSON file of the bundle through ``runner.safe_read`` (a regular file within the cap
    of its kind, strict UTF-8), then depth- and number-bounded: Unavailable otherwise."""
    try:
        text = safe_read.read_text(path, "result" if what == "result.json" else "json")
    except safe_read.Unreadable as err:
        if err.why == "does not exist":
            raise Unavailable(f"the bundle has no {what}") from None
        raise Unavailable(f"{what} {err.why}") from None
    try:
        return bounded_json(text)  # a hostile bundle's JSON: depth and size bounded
    except ValueError as err:
        raise Unavailable(f"{what} is not valid JSON ({err})") from None


# What depends on the rules a result is judged by: dropped by ``Evidence.under``.
_RULES_BOUND = frozenset({"rules", "task", "rescored", "scored_from_events", "_judged_by"})


class Evidence:
    def __init__(self, root: Path, auditor: Auditor, scratch: Path, rules: Rules | None = None):
        self.root = root
        self.auditor = auditor
        self.scratch = scratch  # a private folder for regenerated smoke data
        self._judged_by = rules  # None: the rules the result records (runner.tasks.rules)

    def under(self, rules: Rules) -> Evidence:
        """The same evidence judged by ``rules`` (today's, for the note on a result made under
        older ones): what was read and does not depend on the rules is kept."""
        again = Evidence(self.root, self.auditor, self.scratch, rules)
        again.__dict__.update({k: v for k, v in self.__dict__.items()
                               if k not in _RULES_BOUND and k not in ("root", "auditor", "scratch")})
        return again

    # -- signature --------------------------------------------------------------------
    @cached_property
    def envelope(self) -> Envelope:
        path = self.root / ENVELOPE
        if not path.exists():
            raise Unavailable(f"the bundle is unsigned (no {ENVELOPE})")
        try:
            return read_envelope(path)
        except ValueError as err:
            raise Unavailable(f"{ENVELOPE}: {err}") from None

    @cached_property
    def signer_key(self) -> SSlibKey:
        data = _json(self.root / SIGNER_KEY, SIGNER_KEY)
        if not isinstance(data, dict):
            raise Unavailable(f"{SIGNER_KEY} is not a public key")
        try:
            return key_from_dict(data, SIGNER_KEY)
        except UserError as err:
            raise Unavailable(err.problem) from None

    @cached_property
    def statement(self) -> dict:
        try:
            statement = safe_read.parse_json(self.envelope.payload, "the signed payload")
        except safe_read.Unreadable as err:
            raise Unavailable(err.problem) from None
        if not isinstance(statement, dict):
            raise Unavailable("the signed payload is not a JSON object")
        return statement

    # -- files ------------------------------------------------------------------------
    @cached_property
    def actual_digests(self) -> dict[str, str]:
        return file_digests(self.root)

    @cached_property
    def stray_bookkeeping(self) -> list[str]:
        """Files under bundle/ that are not the bundle's own three files."""
        return [
            p for p in list_files(self.root, include_bookkeeping=True)
            if p.startswith("bundle/") and p not in BOOKKEEPING
        ]

    @cached_property
    def manifest(self) -> dict[str, str]:
        try:
            return read_manifest(self.root)
        except FileNotFoundError:
            raise Unavailable(f"the bundle has no {MANIFEST}") from None
        except ValueError as err:
            raise Unavailable(f"{MANIFEST}: {err}") from None

    def read_json(self, rel: str) -> object:
        """A JSON file of the bundle (depth and size bounded); Unavailable when absent or malformed."""
        return _json(self.root / rel, rel)

    @cached_property
    def result(self) -> dict:
        data = _json(self.root / "result.json", "result.json")
        if not isinstance(data, dict):
            raise Unavailable("result.json is not an object")
        return data

    @cached_property
    def typed_result(self) -> Result:
        """result.json read through the result's type (a malformed one is unavailable)."""
        try:
            return Result.from_dict(self.result)
        except ValueError as err:
            raise Unavailable(str(err)) from None

    def claim(self, *keys: str, default: object = None) -> object:
        data: object = self.result
        for key in keys:
            if not isinstance(data, dict) or key not in data:
                return default
            data = data[key]
        return data

    def claim_object(self, *keys: str) -> dict:
        """The object result.json claims at ``keys``: empty where it claims nothing (absent,
        null, empty), Unavailable where it claims something else (the check fails, naming it)."""
        value = self.claim(*keys) or {}
        if not isinstance(value, dict):
            raise Unavailable(f"result.json's {'.'.join(keys)} is not an object: {str(value)[:80]}")
        return value

    # -- task and the auditor's own labels -----------------------------------------------
    @cached_property
    def today_task(self) -> Task:
        """The task the result names, as this runner declares it today (today's rules)."""
        task_id = self.claim("task", "id")
        if not isinstance(task_id, str):
            raise Unavailable("result.json names no task")
        try:
            return get_task(task_id)
        except UserError as err:
            raise Unavailable(err.problem) from None

    @cached_property
    def rules(self) -> Rules:
        """The rules the result is judged by: the version it records (none recorded: "1", made
        before rules had versions); a version this runner does not know is unavailable."""
        if self._judged_by is not None:
            return self._judged_by
        task, recorded = self.today_task, self.claim("rules")
        if recorded is None:
            version = "1"
        elif (not isinstance(recorded, dict) or recorded.get("task") != task.id
              or not isinstance(recorded.get("version"), str)):
            raise Unavailable(f"result.json's rules {str(recorded)[:120]} do not name a version of {task.id}'s rules")
        else:
            version = recorded["version"]
        try:
            return task.rules_of(version)
        except LookupError as err:
            raise Unavailable(str(err)) from None

    @cached_property
    def task(self) -> Task:
        """The task under the rules the result is judged by (``rules``): its threshold and limits."""
        return self.today_task.under(self.rules)

    @cached_property
    def smoke(self) -> bool:
        return bool(self.claim("smoke"))

    @cached_property
    def staged(self) -> StagedData:
        """The auditor's data set: staged locally, or regenerated for a smoke run."""
        try:
            if self.smoke:
                return self.auditor.synthetic(self.task.id, self.scratch / "smoke-data")
            return self.auditor.staged(self.task.id)
        except UserError as err:
            raise Unavailable(f"no data of the auditor's own to check against: {err}") from None

    @cached_property
    def labels(self) -> np.ndarray | dict[str, list[str]]:
        try:
            return self.staged.load_eval_labels()
        except (OSError, ValueError) as err:
            raise Unavailable(f"the auditor's labels for {self.task.id} are unreadable ({err})") from None

    @cached_property
    def eval_size(self) -> int:
        """Items every predictions file must have: the task's set (the smoke set for smoke runs)."""
        n = len(self.labels)
        if not self.smoke and n != self.task.eval_size:
            raise Unavailable(
                f"the auditor's staged {self.task.id} has {n} evaluation labels, the task {self.task.eval_size}"
            )
        return n

    # -- evaluations -------------------------------------------------------------------
    @cached_property
    def claimed_evaluations(self) -> list[dict]:
        evals = self.claim("training", "evaluations")
        if not isinstance(evals, list) or not all(isinstance(e, dict) for e in evals):
            raise Unavailable("result.json lists no evaluations")
        return evals

    @cached_property
    def claimed_timeline(self) -> Timeline:
        """The evaluations as result.json states them (to score predictions without events)."""
        try:
            evs = [
                Evaluation(
                    i, e.get("epoch"), float(e["start"]), float(e["stop"]), str(e["predictions"]),
                    probe_predictions=e.get("probe_predictions") if isinstance(e.get("probe_predictions"), str) else None,
                    probe_items=e.get("probe_items") if isinstance(e.get("probe_items"), int) else None,
                    probe_seed=e.get("probe_seed") if isinstance(e.get("probe_seed"), int) else None,
                    checkpoint=e.get("checkpoint"), checkpoint_sha256=e.get("checkpoint_sha256"),
                    excluded=e.get("excluded", True) is True,
                    problem=e.get("problem") if e.get("count") is None and isinstance(e.get("problem"), str) else None,
                )
                for i, e in enumerate(self.claimed_evaluations)
            ]
        except (KeyError, TypeError, ValueError) as err:
            raise Unavailable(f"result.json has a malformed evaluation ({err})") from None
        return Timeline(0.0, None, evs)

    @cached_property
    def rescored(self) -> list[ScoredEvaluation]:
        """Every claimed evaluation scored again from its predictions and the auditor's labels."""
        return score_evaluations(self.task, self.claimed_timeline, self.root, self.labels)

    @cached_property
    def events(self) -> list[Event]:
        path = self.root / "events.jsonl"
        if not path.exists():
            raise Unavailable("the bundle has no events.jsonl")
        try:
            return read_events(path)
        except (ValueError, TypeError) as err:
            raise Unavailable(f"events.jsonl is malformed ({err})") from None

    @cached_property
    def timeline(self) -> Timeline:
        try:
            return timeline(self.events)
        except EventStreamError as err:
            raise Unavailable(f"the events do not form a valid run: {err}") from None

    @cached_property
    def scored_from_events(self) -> list[ScoredEvaluation]:
        return score_evaluations(self.task, self.timeline, self.root, self.labels)

    # -- hardware --------------------------------------------------------------------
    @cached_property
    def fingerprint(self) -> dict:
        return self._fingerprint(0)

    @cached_property
    def node_fingerprints(self) -> list[dict]:
        """Every node's fingerprint, the run's own host first (``hardware.nodes`` of them)."""
        nodes = self.claim_object("hardware").get("nodes", 1)
        if not isinstance(nodes, int) or isinstance(nodes, bool) or not 1 <= nodes <= 4096:
            raise Unavailable(f"result.json's hardware.nodes is not a node count: {nodes!r}")
        return [self.fingerprint] + [self._fingerprint(i) for i in range(1, nodes)]

    def _fingerprint(self, node: int) -> dict:
        name = node_file(node)
        data = _json(self.root / name, name)
        if not isinstance(data, dict):
            raise Unavailable(f"{name} is not an object")
        return data

    @cached_property
    def profile_data(self) -> dict:
        return self._profile_yaml(self.root / PROFILE_FILE, f"the bundle's {PROFILE_FILE}")

    @cached_property
    def profile(self) -> Profile:
        return self._profile(self.profile_data, f"the bundle's {PROFILE_FILE}")

    @cached_property
    def repository_profile_data(self) -> dict | None:
        """The auditor's own copy of the profile, or None if they have none."""
        path = self.auditor.repository_profile_path(self.profile.id)
        return self._profile_yaml(path, str(path)) if path.is_file() else None

    @cached_property
    def repository_profile(self) -> Profile | None:
        data = self.repository_profile_data
        path = self.auditor.repository_profile_path(self.profile.id)
        return None if data is None else self._profile(data, str(path))

    @staticmethod
    def _profile_yaml(path: Path, what: str) -> dict:
        if not path.exists() and not path.is_symlink():
            raise Unavailable(f"{what} is missing")
        try:
            data = load_untrusted_yaml(path, what)  # no aliases, bounded size, plain file
        except UserError as err:
            raise Unavailable(f"{what} is not readable YAML ({err.problem})") from None
        if not isinstance(data, dict):
            raise Unavailable(f"{what} is not a hardware profile")
        return data

    @staticmethod
    def _profile(data: dict, what: str) -> Profile:
        try:
            return profile_from_dict(data, what)
        except UserError as err:
            raise Unavailable(err.problem) from None

    # -- inference --------------------------------------------------------------------
    def backend_array(self, backend: str, name: str) -> np.ndarray | dict:
        path = self.root / "inference" / backend / name
        try:
            if path.suffix == ".json":  # a question task's {id: answer}, read within limits
                return load_predictions(path)
            return load_npy(path)  # bounded header, no pickle
        except FileNotFoundError:
            raise Unavailable(f"inference/{backend}/{name} is missing") from None
        except (OSError, ValueError) as err:
            raise Unavailable(f"inference/{backend}/{name} is unreadable ({err})") from None

    @cached_property
    def inference_events(self) -> list[Event]:
        path = self.root / "inference" / "events.jsonl"
        if not path.exists():
            return []
        try:
            return read_events(path)
        except (ValueError, TypeError) as err:
            raise Unavailable(f"inference/events.jsonl is malformed ({err})") from None
