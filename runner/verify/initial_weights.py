"""``initial-weights``: the run started from weights the runner drew, and its scored models
descend from them (issue 44), recomputed from the bundle.

* ``init/init.json`` is the file the result names (its sha256), for the result's seed;
* the values are drawn again from it (``runner.initial_weights.redraw``) and their digest is the
  one recorded; the ``weights.npz`` the container was given, when the bundle holds it, holds
  exactly those values;
* each tensor's role is the one the rules give its name and shape under the entry's manifest
  (the bundle's copy): a result cannot claim a role the manifest never chose, and the share of
  tensors not drawn at random is held to its limit;
* the descent of the crossing checkpoint and the final model is measured again on the
  evaluator's copies of their tensors (the crossing's checked against its kept checkpoint)
  against the task's limit; a result that claims conforming while a tensor falls under it fails.
"""

from __future__ import annotations

import numpy as np

from runner.initial_weights import (
    INIT_DIR, INIT_WEIGHTS, assign_roles, digest, redraw, undrawn_problem,
)
from runner.manifest.untrusted_yaml import load_untrusted_yaml
from runner.digests import sha256_file
from runner.run.init_weights import is_word_table
from runner.score.descent import descent_of_run
from runner.verify.evidence import Evidence
from runner.verify.report import Verdict
from runner.verify.tolerance import close

MAX_NPZ_BYTES = 1 << 30


def _declared(ev: Evidence) -> tuple[tuple[str, str], ...]:
    path = ev.root / "entry" / "entry.yaml"
    data = load_untrusted_yaml(path, "the bundle's entry.yaml") if path.is_file() else {}
    declared = (data or {}).get("initial_weights") or {} if isinstance(data, dict) else {}
    return tuple((str(k), str(v)) for k, v in declared.items()) if isinstance(declared, dict) else ()


def _npz_problem(ev: Evidence, values: dict) -> str | None:
    path = ev.root / INIT_DIR / INIT_WEIGHTS
    if not path.is_file():
        return None
    if path.stat().st_size > MAX_NPZ_BYTES:
        return f"{INIT_DIR}/{INIT_WEIGHTS} is over {MAX_NPZ_BYTES:,} bytes"
    with np.load(path, allow_pickle=False) as data:
        if sorted(data.files) != sorted(values):
            return f"{INIT_DIR}/{INIT_WEIGHTS} does not hold the tensors init.json lists"
        for name, value in values.items():
            if not np.array_equal(data[name], value):
                return f"{INIT_DIR}/{INIT_WEIGHTS}: tensor {name!r} is not the value drawn from the run's seed"
    return None


def check_initial_weights(ev: Evidence) -> Verdict:
    claimed = ev.claim("initial_weights")
    if claimed is None:
        return Verdict(True, f"no initial-weights record: the result predates the runner's draw (toolkit "
                             f"{ev.claim('toolkit', 'version')}); its start is not known")
    if not isinstance(claimed, dict) or claimed.get("record") != f"{INIT_DIR}/init.json":
        return Verdict(False, "initial_weights is malformed")
    path = ev.root / claimed["record"]
    if not path.is_file() or sha256_file(path) != claimed.get("record_sha256"):
        return Verdict(False, f"{claimed['record']} is missing or is not the file the result names")
    data = ev.read_json(claimed["record"])
    if not isinstance(data, dict):
        return Verdict(False, f"{claimed['record']} is not an object")
    tensors, values = redraw(data)
    problems = []
    if data.get("seed") != ev.claim("seed"):
        problems.append(f"init.json was drawn for seed {data.get('seed')!r}, the run's seed is {ev.claim('seed')!r}")
    if data.get("framework") != ev.claim("entry", "framework", "name"):
        problems.append("init.json names another framework than the entry's")
    mine = digest(values)
    if mine != claimed.get("values_sha256") or mine != data.get("sha256"):
        problems.append("the recorded digest of the initial weights is not the digest of the values drawn again "
                        "from init.json")
    if problem := _npz_problem(ev, values):
        problems.append(problem)
    framework = str(data.get("framework"))
    expected = assign_roles([(t.name, t.shape) for t in tensors], framework, _declared(ev))
    wrong = [f"{t.name} ({t.role}, the rules give {e.role})" for t, e in zip(tensors, expected) if t.role != e.role]
    if wrong:
        problems.append(f"roles the entry's manifest does not give: {', '.join(wrong[:4])}")
    width = ev.task.cross_seed.public_width
    if tables := [t.name for t in tensors if t.role == "public" and not is_word_table(t.shape, width)]:
        problems.append(f"tensors taken as public inputs that are no word table of them: {', '.join(tables[:4])}")
    found = [problem] if (problem := undrawn_problem(tensors)) else []

    origin = ev.claim("training", "model_origin")
    crossing = ev.claim("training", "crossing")
    crossing = crossing if isinstance(crossing, int) and not isinstance(crossing, bool) else None
    words = "no scored model"
    if isinstance(origin, dict):
        sensitivity = [r for r in (origin.get("sensitivity") or []) if isinstance(r, dict)]
        record, descent_problems = descent_of_run(ev.root, tensors, data["seed"], framework,
                                                  ev.task.descent.similarity, sensitivity, crossing, signed=True)
        found += descent_problems
        theirs = (origin.get("descent") or {}).get("models") or {} if isinstance(origin.get("descent"), dict) else {}
        for key, measured in record["models"].items():
            if not isinstance(theirs.get(key), dict):
                continue  # not measured at the run (its checkpoint copy was gone): judged here alone
            claimed_overall = theirs[key].get("overall")
            if measured.get("overall") is not None and not close(claimed_overall, measured["overall"], abs_tol=1e-3):
                problems.append(f"descent of the {key} model: claimed overall {claimed_overall!r}, "
                                f"recomputed {measured['overall']}")
        words = "; ".join(f"{key} overall cosine {m.get('overall')} (limit {record['limit']:g})"
                          if m.get("overall") is not None else f"{key} not measured ({m.get('not_measured')})"
                          for key, m in record["models"].items()) or "no dump of the scored models"
    if found and ev.claim("conforming"):
        problems.append("claims conforming, but class 4: " + "; ".join(found))
    if problems:
        return Verdict(False, "; ".join(problems))
    return Verdict(True, f"{len(tensors)} tensors drawn again from seed {data['seed']} (digest matches); {words}"
                         + ("; marked non-conforming for it" if found else ""))
