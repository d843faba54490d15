"""Write the golden vectors of the protocol: inputs and the seed reference's outputs on them.

Run ONCE where the seed reference is beside the checkout (``../shared/seeds/002_*.txt``):

    python tests/foundation/golden/make_golden.py

The JSON files next to this script are then committed as data; the tests compare the package with
them everywhere (a bare clone too) and with the live reference only where it is present. The inputs
come from a fixed-seed generator plus hand-picked edge cases, so rerunning gives the same files.
"""

from __future__ import annotations

import json
import random
import string
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from foundation_reference import load_reference  # noqa: E402

LETTERS = [chr(65 + i) for i in range(26)]


def _token(rng: random.Random) -> str:
    if rng.random() < 0.75:
        letter = rng.choice([*LETTERS[:8], "a", "z", "Z"])
        return rng.choice(["", " ", "(", "[", " (", "  "]) + letter + rng.choice(
            ["", ")", "]", ".", ":", " ", ".\n", "))", "A"])
    return "".join(rng.choice(string.ascii_letters + " .()[]:\n") for _ in range(rng.randint(0, 4)))


def _option(rng: random.Random, pos: int, prefixed: bool) -> str:
    text = rng.choice(["red", "blue", "1", "to play", "", "A", "x y", "é", "(C) nested", "B: colon"])
    if not prefixed:
        return text
    letter = LETTERS[pos] if rng.random() < 0.9 else rng.choice(LETTERS[:6])
    letter = letter.lower() if rng.random() < 0.2 else letter
    return rng.choice(["{L}. {t}", "({L}) {t}", "{L}: {t}", "[{L}] {t}", "{L}.{t}", "{L}) {t}", "  {L}. {t}"]).format(
        L=letter, t=text)


def main() -> None:
    ref = load_reference()
    if ref is None:
        raise SystemExit("the seed reference (../shared/seeds/002_*.txt) is not beside this checkout")
    rng = random.Random(20261201)

    perms: list[dict[str, Any]] = []
    ids = ["MVBench_17", "", "x", "NExTQA_1001_3", "ümlaut|pipe", "42", "a" * 40]
    for item_id in ids:
        for k in (1, 2, 4, 5, 26):
            perms.append({"item_id": item_id, "k": k, "n_perm": 4, "seed": 42})
    for _ in range(150):
        item_id = "".join(rng.choice(string.printable) for _ in range(rng.randint(0, 30)))
        perms.append({"item_id": item_id, "k": rng.randint(1, 26), "n_perm": rng.randint(1, 6),
                      "seed": rng.choice([42, 0, rng.randint(0, 10**6)])})
    for case in perms:
        case["out"] = ref.permutations_for(case["item_id"], case["k"], case["n_perm"], case["seed"])

    lps: list[dict[str, Any]] = [
        {"top": [{"token": "A", "logprob": -1.2039728043259361}, {"token": " A", "logprob": -1.6094379124341003},
                 {"token": "(B", "logprob": -2.3025850929940455}, {"token": "hello", "logprob": -0.1}], "k": 3},
        {"top": [], "k": 4},
        {"top": [{"token": "Z", "logprob": -0.5}], "k": 26},
        {"top": [{"token": "a", "logprob": -0.5}, {"token": "B.", "logprob": -0.7}], "k": 2},
    ]
    for _ in range(150):
        top = [{"token": _token(rng), "logprob": round(-rng.random() * 30, rng.choice([2, 6, 12]))}
               for _ in range(rng.randint(0, 20))]
        lps.append({"top": top, "k": rng.randint(1, 26)})
    for case in lps:
        lp, missing, variants = ref.letter_logprobs(case["top"], case["k"])
        case["out"] = {"lp": lp, "missing": missing, "variants": variants}

    margins: list[dict[str, Any]] = [{"lp": [-1.0, -0.5, -0.5], "pos": 0}, {"lp": [-3.0], "pos": 0},
                                     {"lp": [-2.0, -2.0], "pos": 1}]
    for _ in range(250):
        n = rng.randint(1, 26)
        lp = [round(-rng.random() * 20, rng.choice([1, 3, 9])) for _ in range(n)]
        if rng.random() < 0.3:  # ties: argmax must take the first maximum
            lp[rng.randrange(n)] = max(lp)
        margins.append({"lp": lp, "pos": rng.randrange(n)})
    for case in margins:
        case["out"] = {"margin": ref.margin_of(case["lp"], case["pos"]), "argmax": ref.argmax_pos(case["lp"])}

    strip: list[dict[str, Any]] = [{"opts": [f"({chr(65 + i)}) option {i}" for i in range(n)]} for n in range(0, 6)]
    strip += [{"opts": ["A. x", "C. y"]}, {"opts": ["a. x", "b) y", "C: z"]}, {"opts": ["x", "y"]},
              {"opts": ["A.", "B."]}, {"opts": ["A x", "B y"]}]
    for _ in range(200):
        n = rng.randint(0, 8)
        prefixed = rng.random() < 0.7
        strip.append({"opts": [_option(rng, i, prefixed and rng.random() < 0.95) for i in range(n)]})
    for case in strip:
        texts, stripped = ref.strip_sequential_prefix(case["opts"])
        case["out"] = {"texts": texts, "stripped": stripped}
        case["rendered"] = ref.render_options(texts)
        case["item_text"] = ref.item_text("Why?", case["opts"])

    shards: list[dict[str, Any]] = []
    for _ in range(70):
        benches = rng.sample(["abc", "X", "Y_1", "Zz", "a", "b", "MVBench", "NExTQA", "c_c"], rng.randint(0, 8))
        # unique ids in generator order (a set would follow PYTHONHASHSEED)
        work = [[b, list(dict.fromkeys(str(rng.randint(0, 99999)) for _ in range(rng.randint(0, 40))))]
                for b in benches]
        shards.append({"work": work, "max_unit": rng.randint(1, 25), "n_tasks": rng.randint(1, 7)})
    for case in shards:
        units = ref.plan_units([(b, ids) for b, ids in case["work"]], case["max_unit"])
        case["units"] = [[b, p, n, list(ids)] for b, p, n, ids in units]
        case["tasks"] = []
        for t in range(case["n_tasks"]):
            mine, loads = ref.assign_units(units, case["n_tasks"], t)
            case["tasks"].append({"mine": [[u[0], u[1]] for u in mine], "loads": loads})

    for name, cases in [("permutations", perms), ("letter_logprobs", lps), ("margins", margins),
                        ("strip_prefix", strip), ("shard", shards)]:
        (HERE / f"{name}.json").write_text(json.dumps(cases, ensure_ascii=False, separators=(",", ":")) + "\n",
                                           encoding="utf-8")
        print(f"{name}.json: {len(cases)} cases")


if __name__ == "__main__":
    main()
