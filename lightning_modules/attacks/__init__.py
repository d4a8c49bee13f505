"""Adversarial attacks on task models (stage=attack): one recipe per file, each a
`lightning_modules.attacks.recipe.AttackRecipe` that `conf/attack/<name>.yaml` names by `_target_`."""
