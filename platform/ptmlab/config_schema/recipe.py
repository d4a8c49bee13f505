"""The `recipe` node (conf/recipe/, platform/ptmlab/recipes.py): as chosen, and as applied."""

from __future__ import annotations

from typing import Any

from ptmlab.methods.fields import Name, Node


class RecipeNode(Node):
    name: Name
    base: Name | None = None  # a recipe this one extends
    then: Name | None = None  # the regime applied on top when the backbone starts from random weights
    set: dict[str, Any] | None = None  # the keys the recipe sets, nested like the config
    # written by apply_recipe
    requested: Name | None = None  # auto, or the recipe named by `recipe=`
    origin: dict[str, str] | None = None  # dotted key -> recipe:<name> | override | sweep
