"""One declaration per method (issue 22, item 2): the parameters of every `_target_` of conf/
(adaptations, defences, compression methods, attack recipes, objectives, data readers and
corpora, backbones, the trainer, optimizers and schedulers) and of the probes, as torch-free
pydantic models. Each implementation in lightning_modules imports its declaration and names it
(`declaration = LoRAParams`); ptmlab.config_schema checks a composed config against it (the API's
422, exit 2) and tests/lightning_modules/test_declarations_agree.py checks that the YAML, the
declaration and the constructor agree.

A leaf like ptmlab.contracts: it imports pydantic, ptmlab.contracts and itself, never torch,
lightning_modules or the rest of ptmlab (tests/platform/test_contracts.py), so both halves can
import it. Each group module ends with its `_target_` -> declaration map, which
ptmlab.config_schema assembles into TARGETS.
"""
