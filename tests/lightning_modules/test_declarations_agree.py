"""Every `_target_` of conf/ is declared once, and its three spellings agree (issue 22, item 2):

- the torch-free declaration (a pydantic model in `ptmlab.methods`, one module per group: the
  compose-time check, the API's 422 and the declared defaults), found two ways that must agree:
  through `ptmlab.config_schema.TARGETS` (assembled from the groups' maps) and through the
  implementation, which imports it and names it (`declaration = LoRAParams`, its own attribute);
- the constructor it builds (its parameters and their defaults),
- the YAML options of the method groups (adaptation, compression, attack, defence, objective: one
  file per method, which states the declared defaults so a reader sees them).

The probes (not `_target_`s: the probe stage builds them) are declared the same way (`PROBES`).
A key added to one of the three and not the others, a default changed in one place only, an
implementation that names no declaration or another one than TARGETS, fails here, naming the target
and the key. The few keys that legitimately differ are listed below with the reason; the list is
checked too (a stale entry fails).
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from pydantic_core import PydanticUndefined

from ptmlab.config import CONF_DIR
from ptmlab.config_schema import TARGETS
from ptmlab.methods.probing import PROBES

LIGHTNING_MODULES = Path(__file__).resolve().parents[2] / "lightning_modules"

HYDRA_KEYS = {"_target_", "_partial_", "_recursive_", "_convert_", "_args_"}
# Constructor parameters the code supplies at run time, never a config: the backbone or model being
# adapted, the tokenizer, the optimizer's parameters and a scheduler's optimizer and step counts,
# the Trainer's callbacks/logger/plugins/folder, and a task model's saved state on reload.
RUNTIME_PARAMETERS = {
    "backbone",
    "tokenizer",
    "params",
    "optimizer",
    "num_warmup_steps",
    "num_training_steps",
    "last_epoch",
    "logger",
    "callbacks",
    "plugins",
    "default_root_dir",
    "merged",
    "resolved",
}
# A token probe's scalar mix is sized by the probed model's layers when `scalar_mix` is on.
RUNTIME_PROBE_PARAMETERS = {"mix_layers"}
# Declared keys that a stage reads from the node instead of passing them to the constructor.
READ_BY_THE_STAGE = {
    "name": "every group: the option's name, popped before instantiation",
    "compatible_families": "adaptation: the finetune stage refuses a backbone family the method cannot adapt",
    "warmup_ratio": "scheduler: the stage turns it into num_warmup_steps",
    "compile": "trainer: ptmlab's trainer builder (torch.compile of the module)",
    "compile_backend": "trainer: ptmlab's trainer builder",
    "compile_mode": "trainer: ptmlab's trainer builder",
    "activation_checkpointing": "trainer: ptmlab's trainer builder",
    "peak_flops": "trainer: the MFU callback",
}
# YAML values of a method group that are not the declared default, on purpose.
YAML_CHOICES = {
    ("adaptation/freeze_layers.yaml", "num_frozen"): "exactly one of num_frozen / num_trainable: both default to null",
    ("objective/unilm.yaml.module", "mode_weights"): "null declares UniLM's own mixture; the YAML spells it out",
}
METHOD_GROUPS = ("adaptation", "compression", "attack", "defence", "objective")


def _target_nodes(value, where: str):
    if isinstance(value, dict):
        if "_target_" in value:
            yield where, value
        for key, sub in value.items():
            yield from _target_nodes(sub, f"{where}.{key}")
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from _target_nodes(sub, f"{where}[{i}]")


def _uses() -> dict[str, list[tuple[str, dict]]]:
    uses: dict[str, list[tuple[str, dict]]] = {}
    for path in sorted(Path(CONF_DIR).rglob("*.yaml")):
        raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        for where, node in _target_nodes(raw, str(path.relative_to(CONF_DIR))):
            uses.setdefault(node["_target_"], []).append((where, node))
    return uses


USES = _uses()


def _declared(target: str) -> dict:
    return {(field.alias or key): field for key, field in TARGETS[target].model_fields.items()}


def _built(target: str):
    module, _, attr = target.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def _naming_classes() -> dict[str, str]:
    """`module.Class` -> the name it assigns to `declaration`, for every class of lightning_modules
    that names one (read from the source, so a class no config reaches is seen too)."""
    found = {}
    for path in sorted(LIGHTNING_MODULES.rglob("*.py")):
        module = ".".join(path.relative_to(LIGHTNING_MODULES.parent).with_suffix("").parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.ClassDef):
                continue
            for statement in node.body:
                if isinstance(statement, ast.Assign) and any(
                    getattr(t, "id", None) == "declaration" for t in statement.targets
                ):
                    found[f"{module}.{node.name}"] = ast.unparse(statement.value)
    return found


# Every target and probe implemented in lightning_modules; a library's class or function (Lightning's
# Trainer, torch.optim, transformers' schedules) cannot name a declaration, so TARGETS alone holds it.
DECLARED = {**{t: d for t, d in TARGETS.items() if t.startswith("lightning_modules.")}, **PROBES}


@pytest.mark.parametrize("target", sorted(DECLARED))
def test_the_implementation_names_the_declaration_targets_holds(target):
    built = _built(target)
    own = vars(built).get("declaration")  # its own: an inherited one may be its parent's
    assert own is not None, f"{target}: names no declaration (declaration = {DECLARED[target].__name__})"
    assert own is DECLARED[target], f"{target}: names {own.__name__}, TARGETS holds {DECLARED[target].__name__}"


def test_every_class_that_names_a_declaration_is_in_targets():
    named = _naming_classes()
    assert len(named) > 60, len(named)
    missing = sorted(set(named) - set(DECLARED))
    assert not missing, f"declared by their class but missing from ptmlab.config_schema.TARGETS: {missing}"
    differ = {t: (named[t], DECLARED[t].__name__) for t in named if named[t] != DECLARED[t].__name__}
    assert not differ, f"the class names one declaration, TARGETS another: {differ}"


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_a_probe_constructor_and_its_declaration_agree(probe):
    declared = PROBES[probe].model_fields
    parameters = inspect.signature(_built(probe).__init__).parameters
    problems = [
        f"{key}: constructor default {p.default!r}, declared "
        + (repr(declared[key].default) if key in declared else "nothing")
        for key, p in parameters.items()
        if p.default is not inspect.Parameter.empty
        and key not in RUNTIME_PROBE_PARAMETERS
        and (key not in declared or not _same(declared[key].default, p.default))
    ]
    assert not problems, f"{probe}: " + "; ".join(problems)


def _same(a, b) -> bool:
    as_list = lambda v: list(v) if isinstance(v, tuple) else v
    return as_list(a) == as_list(b)


def _constructor(target: str) -> tuple[dict[str, inspect.Parameter], bool]:
    """The named parameters of what `target` builds, and whether it takes any keyword (`**values`:
    a class built from its declaration, whose keywords the declaration validates)."""
    built = _built(target)
    if inspect.isclass(built) and built.__init__ is object.__init__:  # no constructor: takes nothing
        return {}, False
    signature = inspect.signature(built.__init__ if inspect.isclass(built) else built)
    parameters = {
        k: p for k, p in signature.parameters.items() if k != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    return parameters, any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values())


@pytest.mark.parametrize("target", sorted(USES))
def test_the_declaration_and_the_constructor_agree(target):
    assert target in TARGETS, f"{target}: no declaration in ptmlab.methods (used by {USES[target][0][0]})"
    parameters, takes_any = _constructor(target)
    declared = _declared(target)
    problems = []
    for key, field in declared.items():
        if key in HYDRA_KEYS or key in READ_BY_THE_STAGE:
            continue
        if key not in parameters:
            if not takes_any:
                problems.append(f"{key}: declared, but the constructor has no such parameter")
            continue
        default = parameters[key].default
        if (
            default is not inspect.Parameter.empty
            and field.default is not PydanticUndefined
            and not _same(field.default, default)
        ):
            problems.append(f"{key}: declared default {field.default!r}, constructor default {default!r}")
    for key, parameter in parameters.items():
        if key in RUNTIME_PARAMETERS or key in declared:
            continue
        if parameter.default is not inspect.Parameter.empty:
            problems.append(f"{key}: a constructor parameter no config can set (not declared)")
    assert not problems, f"{target}: " + "; ".join(problems)


METHOD_USES = [(where, node) for uses in USES.values() for where, node in uses if where.split("/")[0] in METHOD_GROUPS]


@pytest.mark.parametrize("where, node", METHOD_USES, ids=[w for w, _ in METHOD_USES])
def test_a_method_yaml_states_the_declared_defaults(where, node):
    declared = _declared(node["_target_"])
    problems = []
    for key, value in node.items():
        if key in HYDRA_KEYS or key == "name":
            continue
        if key not in declared:
            problems.append(f"{key}: not declared")
            continue
        default = declared[key].default
        if default is PydanticUndefined or (isinstance(value, str) and "${" in value) or (where, key) in YAML_CHOICES:
            continue
        if not _same(value, default):
            problems.append(f"{key}: {value!r} here, declared default {default!r}")
    assert not problems, f"{where}: " + "; ".join(problems)


def test_every_listed_exception_is_still_needed():
    # a key the stage reads is listed only while some declaration has it and its constructor neither
    # takes it nor takes its declaration's keywords (a class built from its declaration needs no entry)
    unpassed = set()
    for target in USES:
        parameters, takes_any = _constructor(target)
        if not takes_any:
            unpassed |= set(_declared(target)) - set(parameters)
    stale = set(READ_BY_THE_STAGE) - unpassed
    assert not stale, f"READ_BY_THE_STAGE entries no constructor needs any more: {sorted(stale)}"
    taken = {key for target in USES for key in _constructor(target)[0]}
    assert RUNTIME_PARAMETERS <= taken, f"RUNTIME_PARAMETERS no constructor takes: {sorted(RUNTIME_PARAMETERS - taken)}"
    for where, key in YAML_CHOICES:
        assert any(w == where and key in node for uses in USES.values() for w, node in uses), (where, key)


def test_declared_groups_option_files_are_as_their_declarations_write_them():
    """The declared groups' option files state every declared key (Hydra takes an override only of a key
    the file has), written from the declaration by `python -m ptmlab.declared_yaml`."""
    from ptmlab.declared_yaml import declared_yaml, option_files

    files = option_files()
    assert len(files) >= 15
    stale = [str(p.relative_to(CONF_DIR)) for p in files if p.read_text(encoding="utf-8") != declared_yaml(p)]
    assert not stale, f"not as their declarations write them (run python -m ptmlab.declared_yaml): {stale}"


def test_a_mode_that_takes_its_declaration_is_built_from_it():
    from lightning_modules.adaptation.from_config import build_adaptation
    from lightning_modules.adaptation.lora import LoRA
    from ptmlab.config import compose_config
    from ptmlab.methods.adaptation import LoRAParams

    cfg = compose_config(["stage=finetune", "task=glue/rte", "adaptation=lora", "adaptation.rank=16"])
    lora = build_adaptation(cfg.adaptation)
    assert isinstance(lora.params, LoRAParams) and lora.rank == 16
    in_code = LoRA(rank=4)  # built in code: the values it is not given are the declaration's defaults
    assert (in_code.rank, in_code.alpha, in_code.target_modules) == (
        4,
        LoRAParams.model_fields["alpha"].default,
        LoRAParams.model_fields["target_modules"].default,
    )
    saved = build_adaptation(OmegaConf.create(lora.saved_node(OmegaConf.to_container(cfg.adaptation))))
    assert saved.params == lora.params and saved.merged is False


def test_a_compression_method_is_built_from_its_declaration():
    from lightning_modules.compression.prune_heads import PruneHeads
    from lightning_modules.stages.compress import build_method
    from ptmlab.config import compose_config
    from ptmlab.contracts import ConfigError
    from ptmlab.methods.compression import PruneHeadsParams

    cfg = compose_config(["stage=compress", "compression=prune_heads", "compression.fraction=0.5"])
    method = build_method(cfg.compression)
    assert isinstance(method.params, PruneHeadsParams) and method.params.fraction == 0.5 and method.control
    # the summary's `config`: every key of the option file but name and _target_, as run
    assert method.settings() == {k: v for k, v in cfg.compression.items() if k not in ("name", "_target_")}
    in_code = PruneHeads(steps=2)  # built in code: the values it is not given are the declaration's defaults
    assert (in_code.params.steps, in_code.params.fraction) == (2, PruneHeadsParams.model_fields["fraction"].default)
    with pytest.raises(ConfigError, match=r"^compression\.fraction=1\.5: expected a share in \(0, 1\)$"):
        PruneHeads(fraction=1.5)


def test_a_defence_is_built_from_its_declaration():
    from lightning_modules.adaptation.adversarial import PGD, build_defence
    from ptmlab.config import compose_config
    from ptmlab.contracts import ConfigError
    from ptmlab.methods.defences import PGDParams

    cfg = compose_config(["stage=finetune", "task=glue/sst2", "defence=pgd", "defence.adv_k=3"])
    pgd = build_defence(cfg.defence)
    assert isinstance(pgd.params, PGDParams) and pgd.params.adv_k == 3
    # what the summary and the task model record: the option file's keys, as run
    assert pgd.settings() == {k: v for k, v in cfg.defence.items() if k != "_target_"}
    assert PGD().params.adv_max_norm == PGDParams.model_fields["adv_max_norm"].default  # PGD's own, not FreeLB's
    with pytest.raises(ConfigError, match=r"^defence\.adv_norm_type='l3': expected one of 'l2', 'linf'$"):
        PGD(adv_norm_type="l3")


def test_an_attack_recipe_is_built_from_its_declaration():
    from lightning_modules.attacks.deepwordbug import DeepWordBug
    from lightning_modules.stages.attack import SAMPLE_KEYS, build_recipe
    from ptmlab.config import compose_config
    from ptmlab.contracts import ConfigError
    from ptmlab.methods.attacks import DeepWordBugParams

    cfg = compose_config(["stage=attack", "attack=deepwordbug", "attack.max_queries=5", "attack.num_examples=7"])
    recipe = build_recipe(cfg.attack)
    assert isinstance(recipe.params, DeepWordBugParams) and recipe.params.max_queries == 5
    # the summary's `constraints`: the option file's keys but the stage's sample keys, as run
    skipped = ("name", "_target_", *SAMPLE_KEYS)
    assert recipe.settings() == {k: v for k, v in cfg.attack.items() if k not in skipped}
    assert DeepWordBug().params.max_edit_distance == DeepWordBugParams.model_fields["max_edit_distance"].default
    with pytest.raises(ConfigError, match=r"^attack\.max_queries=0: expected a positive integer$"):
        DeepWordBug(max_queries=0)
