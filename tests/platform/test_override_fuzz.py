"""Property-based: every Hydra override string either composes or gets a 4xx, never a 5xx.

schemathesis (test_api_live.py) fuzzes the JSON level and never reaches the override grammar;
this generates override strings themselves: keys from the config catalogue and random ones,
every prefix (`+`, `++`, `~`), every value type (numbers, inf/nan, quoted strings with escapes
and unicode, null, lists, dicts, interpolations), every sweep form (`a,b`, range, choice,
interval, glob, shuffle, sort, tag), `@package`, and very long keys and values. A fixed budget
(`PTMLAB_FUZZ_EXAMPLES`, default 250 per property) and a fixed seed keep `make test` bounded
and repeatable.
"""

from __future__ import annotations

import os
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from test_api import API, make_client

EXAMPLES = int(os.environ.get("PTMLAB_FUZZ_EXAMPLES", "250"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@lru_cache(maxsize=1)
def catalogue_keys() -> list[str]:
    """Every dotted key of the default config of each stage, and every group name."""
    from omegaconf import OmegaConf

    from ptmlab.config import compose_config, list_config_groups

    keys: set[str] = set(list_config_groups())
    for stage in ("pretrain", "finetune", "multitask", "sleep"):
        extra = ["task=glue/sst2", "adaptation=full"] if stage == "finetune" else []
        cfg = OmegaConf.to_container(compose_config([f"stage={stage}", *extra]), resolve=False)

        def walk(node, prefix=""):
            if isinstance(node, dict):
                for k, v in node.items():
                    path = f"{prefix}.{k}" if prefix else str(k)
                    keys.add(path)
                    walk(v, path)

        walk(cfg)
    return sorted(keys)


identifier = st.from_regex(r"[A-Za-z_][A-Za-z0-9_\-]{0,12}", fullmatch=True)
random_key = st.lists(identifier, min_size=1, max_size=4).map(".".join)
key = st.one_of(
    st.sampled_from(catalogue_keys()),
    random_key,
    st.sampled_from(catalogue_keys()).map(lambda k: k + "." + "x" * 40),
    st.integers(100, 3000).map(lambda n: "k" * n),
)
scalar = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["inf", "-inf", "nan", "null", "true", "false", "1e309", "0x1F", "1_000", "", "''", '""']),
    identifier,
    st.text(max_size=30).map(lambda t: "'" + t.replace("\\", "\\\\").replace("'", "\\'") + "'"),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30),
    st.sampled_from(
        [
            "${model.name}",
            "${oc.env:HOME}",
            "\\${x}",
            "${now:%H}",
            "${",
            "}",
            "é✓漢字",
            "a\\,b",
            "/etc/passwd",
            "../../x",
            "~/.ssh",
            "file:///etc",
            "job:1",
            "mlflow:abc",
            "random",
        ]
    ),
    st.integers(500, 2000).map(lambda n: "v" * n),
)
value = st.recursive(
    scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.dictionaries(identifier, inner, max_size=3).map(
            lambda d: "{" + ",".join(f"{k}:{v}" for k, v in d.items()) + "}"
        ),
    ),
    max_leaves=8,
)
sweep = st.one_of(
    st.lists(scalar, min_size=2, max_size=4).map(",".join),
    st.tuples(st.integers(-(10**12), 10**12), st.integers(-(10**12), 10**12), st.integers(-5, 5)).map(
        lambda t: f"range({t[0]},{t[1]},{t[2]})"
    ),
    st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)).map(lambda t: f"range({t[0]},{t[1]},0.5)"),
    st.lists(scalar, min_size=1, max_size=4).map(lambda xs: "choice(" + ",".join(xs) + ")"),
    st.sampled_from(
        [
            "interval(0,1)",
            "glob(*)",
            "glob(bert*,exclude=bert_base)",
            "shuffle(1,2,3)",
            "sort(3,1,2,reverse=true)",
            "tag(a,b,range(0,3))",
            "nosuch(1,2)",
            "range(5)",
            "range()",
            "range(0,10**9)",
            "choice()",
            "shuffle(range(0,100000000))",
        ]
    ),
)
override = st.one_of(
    st.builds(lambda p, k, v: f"{p}{k}={v}", st.sampled_from(["", "+", "++"]), key, st.one_of(value, sweep)),
    st.builds(lambda k: f"~{k}", key),
    st.builds(lambda k, v: f"~{k}={v}", key, scalar),
    st.builds(
        lambda k, pkg, v: f"{k}@{pkg}={v}", st.sampled_from(["model", "task", "stage", "data"]), random_key, identifier
    ),
    st.text(max_size=80).filter(lambda t: "\x00" not in t),
)


@pytest.fixture(scope="module")
def fuzz_client(tmp_path_factory):
    from ptmlab.db import dispose_engines

    with make_client(tmp_path_factory.mktemp("fuzz")) as c:
        yield c
    dispose_engines()


def _assert_not_5xx(response, body):
    assert response.status_code < 500, (body, response.status_code, response.text[:500])
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["message"] and "\n" not in error["message"], (body, error)


@seed(9)
@FUZZ
@given(overrides=st.lists(override, min_size=1, max_size=3))
def test_jobs_never_answer_5xx_to_any_override(fuzz_client, overrides):
    body = {"stage": "sleep", "overrides": overrides}
    _assert_not_5xx(fuzz_client.post(f"{API}/jobs", json=body), body)


@seed(10)
@FUZZ
@given(overrides=st.lists(override, min_size=1, max_size=3))
def test_sweeps_and_pipelines_never_answer_5xx_to_any_override(fuzz_client, overrides):
    body = {"overrides": ["stage=sleep", *overrides], "dry_run": True}
    _assert_not_5xx(fuzz_client.post(f"{API}/sweeps", json=body), body)
    spec = {
        "name": "fuzz",
        "vars": {"v": ["a", "b"]},
        "defaults": {"overrides": overrides[:1]},
        "jobs": [{"name": "j-{v}", "stage": "sleep", "overrides": overrides[1:]}],
    }
    body = {"spec": spec, "dry_run": True}
    _assert_not_5xx(fuzz_client.post(f"{API}/pipelines", json=body), body)
